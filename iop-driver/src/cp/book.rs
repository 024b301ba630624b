//! The handle's bounded record book of commands.

use std::collections::{HashMap, VecDeque};
use std::task::{Context, Poll, Waker};

use iop_core::cp::{CommandAnswer, CommandOutcome, CommandState, Ending};
use iop_core::proto::{
    CommandPhase, CommandRejectReason, EdgeCommandEvent, EdgeCommandResponse, WireEnum,
};

/// How much of a command's history its record keeps, and how much the whole book
/// holds (`ServerConfig::command_records`).
///
/// A record keeps the Edge's response, the command's first event, its latest
/// `running_events` RUNNING events and its terminal event; older RUNNING events are
/// coalesced (counted in [`CommandRecord::coalesced_events`]), also while the record
/// would hold more than `record_bytes`. The book forgets its oldest records while it
/// holds more than `book_bytes` (or more than `ServerConfig::command_book` records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordLimits {
    /// RUNNING events kept per record, the latest ones (default 16).
    pub running_events: usize,
    /// Bytes of events a record keeps besides its first and terminal events (default
    /// 64 KiB).
    pub record_bytes: usize,
    /// Bytes the whole book keeps (default 64 MiB).
    pub book_bytes: usize,
}

impl Default for RecordLimits {
    fn default() -> Self {
        Self {
            running_events: 16,
            record_bytes: 64 * 1024,
            book_bytes: 64 * 1024 * 1024,
        }
    }
}

/// One step of a command, in the order the Control Plane learnt it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CommandUpdate {
    /// The Edge answered the request (as it sent it).
    Response(EdgeCommandResponse),
    /// A phase event (ACCEPTED, RUNNING…, then one terminal phase).
    Event(EdgeCommandEvent),
    /// It ended without the Edge's word ([`Ending`]: lost, undeliverable, abandoned,
    /// forgotten, unrecorded, a conflict of its id): FAILED, never sent (again).
    Ended(Ending),
}

/// Everything known about one command: its response and every event so far.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CommandRecord {
    /// The Edge it was sent to.
    pub edge_id: String,
    /// Its id.
    pub command_id: String,
    /// Its operation.
    pub operation: String,
    /// The updates kept, in arrival order: the response, the first event, the latest
    /// RUNNING events and the terminal one (see [`RecordLimits`]).
    pub updates: Vec<CommandUpdate>,
    /// Set once the command is finished for good.
    pub outcome: Option<CommandOutcome>,
    /// RUNNING events not kept: older than the latest ones kept, or over the record's
    /// byte budget. Each was seen, in order, by the trackers following it then.
    pub coalesced_events: u64,
}

impl CommandRecord {
    /// The record of a command as the core knows it (`state`): its answer (without
    /// the Edge's message) and outcome, no events.
    pub fn of(edge_id: &str, state: &CommandState) -> Self {
        let request = &state.request;
        let mut record = Self::new(edge_id, &request.command_id, &request.operation);
        let answered = |accepted: bool, reason: CommandRejectReason| EdgeCommandResponse {
            command_id: request.command_id.clone(),
            accepted,
            reject_reason: reason as i32,
            message: String::new(),
        };
        match state.answer {
            CommandAnswer::Accepted => record.updates.push(CommandUpdate::Response(answered(
                true,
                CommandRejectReason::Unspecified,
            ))),
            CommandAnswer::Rejected(reason) => record
                .updates
                .push(CommandUpdate::Response(answered(false, reason))),
            _ => {}
        }
        record.outcome = state.outcome.clone();
        record
    }

    /// A record of `command_id` of `edge_id` with no update yet (a command another
    /// Control Plane sent, rebuilt from the cluster's record, say).
    pub fn new(
        edge_id: impl Into<String>,
        command_id: impl Into<String>,
        operation: impl Into<String>,
    ) -> Self {
        Self {
            edge_id: edge_id.into(),
            command_id: command_id.into(),
            operation: operation.into(),
            updates: Vec::new(),
            outcome: None,
            coalesced_events: 0,
        }
    }

    /// The sequence of the latest event kept (0: none).
    fn last_sequence(&self) -> u32 {
        self.events().last().map_or(0, |e| e.sequence)
    }

    /// The Edge's response, if it came.
    pub fn response(&self) -> Option<&EdgeCommandResponse> {
        self.updates.iter().find_map(|u| match u {
            CommandUpdate::Response(r) => Some(r),
            _ => None,
        })
    }

    /// The phase of the latest event kept, if one came (a newer Edge's unknown phase
    /// kept as it is).
    pub fn phase(&self) -> Option<WireEnum<CommandPhase>> {
        self.events().last().map(EdgeCommandEvent::phase_enum)
    }

    /// The phase events kept so far.
    pub fn events(&self) -> impl Iterator<Item = &EdgeCommandEvent> {
        self.updates.iter().filter_map(|u| match u {
            CommandUpdate::Event(e) => Some(e),
            _ => None,
        })
    }
}

#[derive(Debug)]
struct Entry {
    record: CommandRecord,
    /// The sequence of each kept update (parallel to `record.updates`), which trackers
    /// follow: coalescing takes updates out without moving anyone's place.
    seqs: Vec<u64>,
    /// The sequence the next update gets.
    next_seq: u64,
    /// Estimated bytes of the kept updates.
    bytes: usize,
    wakers: Vec<Waker>,
}

/// Estimated bytes of one kept update.
fn update_bytes(update: &CommandUpdate) -> usize {
    let heap = match update {
        CommandUpdate::Response(r) => r.command_id.len() + r.message.len(),
        CommandUpdate::Ended(Ending::Unrecorded { reason }) => reason.len(),
        CommandUpdate::Event(e) => {
            e.command_id.len()
                + e.message.len()
                + e.detail
                    .iter()
                    .map(|(k, v)| 48 + k.len() + v.len())
                    .sum::<usize>()
        }
        _ => 0,
    };
    std::mem::size_of::<CommandUpdate>() + heap
}

fn is_running(update: &CommandUpdate) -> bool {
    matches!(update, CommandUpdate::Event(e) if e.phase() == iop_core::proto::CommandPhase::Running)
}

impl Entry {
    /// Coalesces the oldest kept RUNNING events while more than `limits` allow, the
    /// latest one always kept. Returns the bytes freed.
    fn coalesce(&mut self, limits: &RecordLimits) -> usize {
        let mut freed = 0;
        loop {
            let running: Vec<usize> = (self.record.updates.iter().enumerate())
                .filter(|(_, u)| is_running(u))
                .map(|(i, _)| i)
                .collect();
            let over_count = running.len() > limits.running_events;
            let over_bytes = self.bytes > limits.record_bytes && running.len() > 1;
            let Some(&oldest) = running.first().filter(|_| over_count || over_bytes) else {
                return freed;
            };
            let gone = self.record.updates.remove(oldest);
            self.seqs.remove(oldest);
            let bytes = update_bytes(&gone);
            self.bytes -= bytes;
            freed += bytes;
            self.record.coalesced_events += 1;
        }
    }
}

/// Commands by id, oldest forgotten first past the capacity or the byte budget.
#[derive(Debug)]
pub(crate) struct CommandBook {
    entries: HashMap<String, Entry>,
    order: VecDeque<String>,
    capacity: usize,
    limits: RecordLimits,
    /// Estimated bytes of every kept update.
    bytes: usize,
}

impl CommandBook {
    pub(crate) fn new(capacity: usize, limits: RecordLimits) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            limits,
            bytes: 0,
        }
    }

    /// Forgets the oldest record (its trackers end).
    fn forget_oldest(&mut self) {
        let Some(old) = self.order.pop_front() else {
            return;
        };
        if let Some(entry) = self.entries.remove(&old) {
            self.bytes -= entry.bytes;
            entry.wakers.into_iter().for_each(Waker::wake);
        }
    }

    pub(crate) fn insert(&mut self, edge_id: &str, command_id: &str, operation: &str) {
        while self.order.len() >= self.capacity {
            self.forget_oldest();
        }
        self.order.push_back(command_id.to_owned());
        self.entries.insert(
            command_id.to_owned(),
            Entry {
                record: CommandRecord {
                    edge_id: edge_id.to_owned(),
                    command_id: command_id.to_owned(),
                    operation: operation.to_owned(),
                    updates: Vec::new(),
                    outcome: None,
                    coalesced_events: 0,
                },
                seqs: Vec::new(),
                next_seq: 0,
                bytes: 0,
                wakers: Vec::new(),
            },
        );
    }

    /// Records `update` for `command_id` (ignored for a command not in the book);
    /// `outcome` is the core's verdict after it.
    pub(crate) fn push(
        &mut self,
        command_id: &str,
        update: CommandUpdate,
        outcome: Option<CommandOutcome>,
    ) {
        let Some(entry) = self.entries.get_mut(command_id) else {
            return;
        };
        let bytes = update_bytes(&update);
        entry.record.updates.push(update);
        entry.seqs.push(entry.next_seq);
        entry.next_seq += 1;
        entry.bytes += bytes;
        self.bytes += bytes;
        self.bytes -= entry.coalesce(&self.limits);
        if outcome.is_some() {
            entry.record.outcome = outcome;
        }
        entry.wakers.drain(..).for_each(Waker::wake);
        // The newest record is never forgotten for the book's budget.
        while self.bytes > self.limits.book_bytes && self.order.len() > 1 {
            self.forget_oldest();
        }
    }

    /// Keeps `record`, a command another Control Plane sent, unless the book has
    /// it as far on already.
    pub(crate) fn adopt(&mut self, record: CommandRecord) {
        if let Some(kept) = self.get(&record.command_id) {
            let rank = |r: &CommandRecord| {
                (
                    r.outcome.is_some(),
                    r.response().is_some(),
                    r.last_sequence(),
                )
            };
            if rank(kept) >= rank(&record) {
                return;
            }
            // Replaced below; its trackers go on from the adopted updates.
            if let Some(pos) = self.order.iter().position(|id| *id == record.command_id) {
                self.order.remove(pos);
            }
            if let Some(entry) = self.entries.remove(&record.command_id) {
                self.bytes -= entry.bytes;
                entry.wakers.into_iter().for_each(Waker::wake);
            }
        }
        self.insert(&record.edge_id, &record.command_id, &record.operation);
        let count = record.updates.len();
        for (i, update) in record.updates.into_iter().enumerate() {
            let outcome = (i + 1 == count).then(|| record.outcome.clone()).flatten();
            self.push(&record.command_id, update, outcome);
        }
        if let Some(entry) = self.entries.get_mut(&record.command_id) {
            if entry.record.outcome.is_none() {
                entry.record.outcome = record.outcome;
            }
            entry.record.coalesced_events += record.coalesced_events;
        }
    }

    pub(crate) fn get(&self, command_id: &str) -> Option<&CommandRecord> {
        self.entries.get(command_id).map(|e| &e.record)
    }

    /// Ends every tracker (the server stopped).
    pub(crate) fn wake_all(&mut self) {
        for entry in self.entries.values_mut() {
            entry.wakers.drain(..).for_each(Waker::wake);
        }
    }

    pub(super) fn poll_update(
        &mut self,
        command_id: &str,
        cursor: &mut u64,
        stopped: bool,
        cx: &mut Context<'_>,
    ) -> Poll<Option<CommandUpdate>> {
        let Some(entry) = self.entries.get_mut(command_id) else {
            return Poll::Ready(None);
        };
        // The first update kept at or after the cursor: one coalesced before this
        // tracker read it is skipped.
        let at = entry.seqs.partition_point(|&seq| seq < *cursor);
        if let (Some(update), Some(&seq)) = (entry.record.updates.get(at), entry.seqs.get(at)) {
            *cursor = seq + 1;
            return Poll::Ready(Some(update.clone()));
        }
        if entry.record.outcome.is_some() || stopped {
            return Poll::Ready(None);
        }
        if !entry.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            entry.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(sequence: u32, phase: CommandPhase, detail_bytes: usize) -> CommandUpdate {
        CommandUpdate::Event(EdgeCommandEvent {
            command_id: "c".into(),
            phase: phase as i32,
            sequence,
            detail: [("k".to_owned(), "d".repeat(detail_bytes))].into(),
            ..Default::default()
        })
    }

    fn phases(r: &CommandRecord) -> Vec<(u32, CommandPhase)> {
        r.events().map(|e| (e.sequence, e.phase())).collect()
    }

    #[test]
    fn a_record_keeps_its_first_latest_running_and_terminal_events() {
        let limits = RecordLimits::default();
        let mut book = CommandBook::new(8, limits);
        book.insert("e", "c", "op");
        book.push("c", event(1, CommandPhase::Accepted, 0), None);
        for seq in 2..=101 {
            book.push("c", event(seq, CommandPhase::Running, 0), None);
        }
        let done = Some(CommandOutcome::Finished(CommandPhase::Succeeded));
        book.push("c", event(102, CommandPhase::Succeeded, 0), done);
        let r = book.get("c").unwrap();
        let kept = phases(r);
        assert_eq!(kept.first(), Some(&(1, CommandPhase::Accepted)));
        assert_eq!(kept.last(), Some(&(102, CommandPhase::Succeeded)));
        let running: Vec<u32> = kept
            .iter()
            .filter(|(_, p)| *p == CommandPhase::Running)
            .map(|(s, _)| *s)
            .collect();
        assert_eq!(running, (86..=101).collect::<Vec<_>>());
        assert_eq!(r.coalesced_events, 84);
    }

    #[test]
    fn records_and_the_book_stay_within_their_bytes() {
        let limits = RecordLimits {
            running_events: 1_000,
            record_bytes: 10_000,
            book_bytes: 30_000,
        };
        let mut book = CommandBook::new(100, limits);
        for c in ["a", "b", "c", "d", "e"] {
            book.insert("e", c, "op");
            book.push(c, event(1, CommandPhase::Accepted, 0), None);
            for seq in 2..=50 {
                book.push(c, event(seq, CommandPhase::Running, 1_000), None);
            }
            let r = book.get(c).unwrap();
            let bytes: usize = r.updates.iter().map(update_bytes).sum();
            assert!(bytes <= 10_000 + update_bytes(&event(1, CommandPhase::Accepted, 0)) + 2_000);
            assert!(r.coalesced_events > 30, "{}", r.coalesced_events);
            assert!(book.bytes <= 30_000);
        }
        // The oldest records went for the book's budget; the newest stay.
        assert!(book.get("a").is_none());
        assert!(book.get("e").is_some());
    }

    #[test]
    fn a_tracker_keeps_its_place_while_events_are_coalesced() {
        let limits = RecordLimits {
            running_events: 2,
            ..RecordLimits::default()
        };
        let mut book = CommandBook::new(8, limits);
        book.insert("e", "c", "op");
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut cursor = 0;
        let mut seen = Vec::new();
        book.push("c", event(1, CommandPhase::Accepted, 0), None);
        for seq in 2..=6 {
            book.push("c", event(seq, CommandPhase::Running, 0), None);
            // Read one update per push, from where it was.
            if let Poll::Ready(Some(CommandUpdate::Event(e))) =
                book.poll_update("c", &mut cursor, false, &mut cx)
            {
                seen.push(e.sequence);
            }
        }
        // Caught up by the end, never twice, never backwards, skipping only what was
        // coalesced before it was read.
        while let Poll::Ready(Some(CommandUpdate::Event(e))) =
            book.poll_update("c", &mut cursor, false, &mut cx)
        {
            seen.push(e.sequence);
        }
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert_eq!(seen.last(), Some(&6));
        assert_eq!(seen.first(), Some(&1));
    }
}
