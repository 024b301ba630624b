//! One command record as the engine stores it (PROTOCOL.md §8 "Command records"): the
//! request, the Edge's answer, the events an operator reads, the outcome, and what the
//! core needs to carry the command on ([`CommandState`]).

use iop_driver::iop_core::cp::{CommandAnswer, CommandOutcome, CommandState, Ending};
use iop_driver::iop_core::proto::{
    CommandPhase, CommandRejectReason, EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse,
};
use iop_driver::{CommandRecord, CommandUpdate};
use prost::Message;

/// Values larger than this are not read back (a stranger's write, say): well above
/// any record a replica writes (a request within the Edge's limits, the response and
/// the events the Control Plane's record keeps, 64 KiB by default).
pub const MAX_STORED_LEN: usize = 1024 * 1024;

/// A command record, protobuf-encoded.
#[derive(Clone, PartialEq, Message)]
pub struct StoredCommand {
    /// The Edge.
    #[prost(string, tag = "1")]
    pub edge_id: String,
    /// The session of the Edge the writing replica held: a record is never overwritten
    /// by a replica whose session is older than its writer's (nor an ending by another
    /// ending: [`StoredCommand::stands_over`]).
    #[prost(uint64, tag = "2")]
    pub session_id: u64,
    /// The request as sent.
    #[prost(message, optional, tag = "3")]
    pub request: Option<EdgeCommandRequest>,
    /// 0: no answer yet; 1: accepted; 2: rejected.
    #[prost(uint32, tag = "4")]
    pub answer: u32,
    /// The reason of a rejection (a `CommandRejectReason`).
    #[prost(int32, tag = "5")]
    pub reject_reason: i32,
    /// The Edge's message with its answer.
    #[prost(string, tag = "6")]
    pub message: String,
    /// The events an operator reads (those the Control Plane's record keeps).
    #[prost(message, repeated, tag = "7")]
    pub events: Vec<EdgeCommandEvent>,
    /// The latest phase the core saw.
    #[prost(int32, tag = "8")]
    pub phase: i32,
    /// The latest event sequence the core saw.
    #[prost(uint32, tag = "9")]
    pub last_sequence: u32,
    /// 0: unfinished; else the code of the core's one encoding of a
    /// [`CommandOutcome`] ([`CommandOutcome::encode`]).
    #[prost(uint32, tag = "10")]
    pub outcome: u32,
    /// The value of that encoding (a reason, a phase, a count of sessions).
    #[prost(uint32, tag = "11")]
    pub outcome_value: u32,
    /// Sessions that ended without answering the request.
    #[prost(uint32, tag = "12")]
    pub unanswered_sessions: u32,
    /// RUNNING events the Control Plane's record coalesced.
    #[prost(uint64, tag = "13")]
    pub coalesced_events: u64,
}

impl StoredCommand {
    /// The record of a command of `edge_id` written by the replica holding session
    /// `session_id`: the core's `state`, the operator's `record` (if still kept).
    pub fn new(
        edge_id: &str,
        session_id: u64,
        state: CommandState,
        record: Option<&CommandRecord>,
    ) -> Self {
        let (answer, reject_reason) = match state.answer {
            CommandAnswer::Accepted => (1, 0),
            CommandAnswer::Rejected(reason) => (2, reason as i32),
            _ => (0, 0),
        };
        let (outcome, outcome_value) = state
            .outcome
            .as_ref()
            .map_or((0, 0), CommandOutcome::encode);
        Self {
            edge_id: edge_id.to_owned(),
            session_id,
            request: Some(state.request),
            answer,
            reject_reason,
            message: record
                .and_then(|r| r.response())
                .map(|r| r.message.clone())
                .unwrap_or_default(),
            events: record
                .map(|r| r.events().cloned().collect())
                .unwrap_or_default(),
            phase: state.phase as i32,
            last_sequence: state.last_sequence,
            outcome,
            outcome_value,
            unanswered_sessions: state.unanswered_sessions,
            coalesced_events: record.map_or(0, |r| r.coalesced_events),
        }
    }

    /// Whether the command is finished for good.
    pub fn finished(&self) -> bool {
        self.outcome != 0
    }

    /// The record of `request`, a command of `edge_id` that was never sent, finished
    /// UNRECORDED by the replica holding session `session_id`.
    pub fn unrecorded(edge_id: &str, session_id: u64, request: EdgeCommandRequest) -> Self {
        let mut state = CommandState::new(request);
        state.outcome = Some(CommandOutcome::Ended(Ending::Unrecorded {
            reason: String::new(),
        }));
        Self::new(edge_id, session_id, state, None)
    }

    /// Whether it was finished UNRECORDED: never sent.
    pub fn unrecorded_ending(&self) -> bool {
        self.outcome()
            .as_ref()
            .and_then(CommandOutcome::ending)
            .is_some_and(|e| e.kind() == iop_driver::iop_core::cp::EndingKind::Unrecorded)
    }

    /// Whether this record, read from the engine, stands over `write`, a replica's
    /// next write of the same key: it was written for a newer session of the Edge, or
    /// it ends the command otherwise than `write` does. A command's first ending in the
    /// engine is its ending — a caller may have been told it — so a replica that ended
    /// it differently (it adopted the command before that ending landed) or still
    /// carries it on gives way. An UNRECORDED ending (never sent) yields to a caller's
    /// retry.
    pub fn stands_over(&self, write: &StoredCommand) -> bool {
        self.session_id > write.session_id
            || (self.finished()
                && !self.unrecorded_ending()
                && (self.outcome, self.outcome_value) != (write.outcome, write.outcome_value))
    }

    /// Whether this is the record of `request` of `edge_id`, written ahead and never
    /// answered nor finished: a command no Edge is known to have taken.
    pub fn unsent(&self, edge_id: &str, request: &EdgeCommandRequest) -> bool {
        self.edge_id == edge_id
            && self.answer == 0
            && !self.finished()
            && self.request.as_ref() == Some(request)
    }

    /// A stored value; `None` for one no replica wrote: over [`MAX_STORED_LEN`],
    /// undecodable, without a request, with an Edge or command id the id grammar
    /// refuses, with an outcome the core never encodes, or with a request, answer
    /// message or event over the protocol's limits.
    pub fn decode_value(bytes: &[u8]) -> Option<Self> {
        use iop_driver::iop_core::ids::validate_id;
        use iop_driver::iop_core::proto::limits::{self, send};
        if bytes.len() > MAX_STORED_LEN {
            return None;
        }
        let stored = Self::decode(bytes).ok()?;
        let request = stored.request.as_ref()?;
        (stored.outcome == 0 || stored.outcome().is_some()).then_some(())?;
        validate_id("edge_id", &stored.edge_id).ok()?;
        validate_id("command_id", &request.command_id).ok()?;
        send::command_request(request).ok()?;
        (stored.message.len() <= limits::MAX_TEXT_LEN).then_some(())?;
        stored
            .events
            .iter()
            .all(|e| send::command_event(e).is_ok())
            .then_some(stored)
    }

    fn reason(&self) -> CommandRejectReason {
        CommandRejectReason::try_from(self.reject_reason)
            .unwrap_or(CommandRejectReason::Unspecified)
    }

    fn outcome(&self) -> Option<CommandOutcome> {
        CommandOutcome::decode(self.outcome, self.outcome_value)
    }

    /// What the core needs to carry the command on.
    pub fn state(&self) -> CommandState {
        let mut state = CommandState::new(self.request.clone().unwrap_or_default());
        state.answer = match self.answer {
            1 => CommandAnswer::Accepted,
            2 => CommandAnswer::Rejected(self.reason()),
            _ => CommandAnswer::Pending,
        };
        state.phase = CommandPhase::try_from(self.phase).unwrap_or(CommandPhase::Unspecified);
        state.last_sequence = self.last_sequence;
        state.outcome = self.outcome();
        state.unanswered_sessions = self.unanswered_sessions;
        state
    }

    /// The record an operator reads, as the record book of the replica that wrote it
    /// held it.
    pub fn record(&self) -> CommandRecord {
        let request = self.request.clone().unwrap_or_default();
        let mut r = CommandRecord::new(&self.edge_id, &request.command_id, &request.operation);
        if self.answer != 0 {
            let accepted = self.answer == 1;
            r.updates.push(CommandUpdate::Response(EdgeCommandResponse {
                command_id: request.command_id.clone(),
                accepted,
                reject_reason: if accepted { 0 } else { self.reject_reason },
                message: self.message.clone(),
            }));
        }
        r.updates
            .extend(self.events.iter().cloned().map(CommandUpdate::Event));
        let outcome = self.outcome();
        // The engine's record keeps an ending's kind (and an undeliverable command's
        // count of sessions), not its other details.
        if let Some(ending) = outcome.as_ref().and_then(CommandOutcome::ending) {
            r.updates.push(CommandUpdate::Ended(ending.clone()));
        }
        r.outcome = outcome;
        r.coalesced_events = self.coalesced_events;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_command_reads_back_as_it_was_written() {
        let request = EdgeCommandRequest {
            command_id: "cmd-1".into(),
            operation: "model.load".into(),
            target_selector: "node:gpu-1".into(),
            ..Default::default()
        };
        let mut h = CommandState::new(request);
        h.answer = CommandAnswer::Accepted;
        h.phase = CommandPhase::Succeeded;
        h.last_sequence = 3;
        h.outcome = Some(CommandOutcome::Finished(CommandPhase::Succeeded));
        let stored = StoredCommand::new("edge-1", 7, h.clone(), None);
        let back = StoredCommand::decode_value(&stored.encode_to_vec()).unwrap();
        assert_eq!(back.state(), h);
        assert!(back.finished());
        let record = back.record();
        assert_eq!(
            (record.edge_id.as_str(), record.command_id.as_str()),
            ("edge-1", "cmd-1")
        );
        assert!(record.response().is_some_and(|r| r.accepted));
        assert_eq!(record.outcome, h.outcome);
        // Bytes no replica wrote are no record.
        assert!(StoredCommand::decode_value(b"\xff\xff").is_none());
        assert!(StoredCommand::decode_value(&[]).is_none());
    }

    #[test]
    fn a_record_no_replica_could_write_is_no_record() {
        let request = EdgeCommandRequest {
            command_id: "cmd-1".into(),
            operation: "model.load".into(),
            ..Default::default()
        };
        let good = StoredCommand::new("edge-1", 7, CommandState::new(request), None);
        assert!(StoredCommand::decode_value(&good.encode_to_vec()).is_some());
        let forged: [fn(&mut StoredCommand); 7] = [
            |s| s.outcome = 99,
            |s| (s.outcome, s.outcome_value) = (2, CommandPhase::Running as u32),
            |s| s.edge_id = "edge 1".into(),
            |s| s.request.as_mut().unwrap().command_id = String::new(),
            |s| s.request.as_mut().unwrap().operation = "x".repeat(129),
            |s| s.message = "m".repeat(4097),
            |s| {
                s.events.push(EdgeCommandEvent {
                    message: "m".repeat(4097),
                    ..Default::default()
                })
            },
        ];
        for forge in forged {
            let mut bad = good.clone();
            forge(&mut bad);
            assert!(
                StoredCommand::decode_value(&bad.encode_to_vec()).is_none(),
                "{bad:?}"
            );
        }
    }
}
