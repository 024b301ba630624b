//! The driver loop of a [`Pair`]: what a runtime does for both ends.

use std::collections::BTreeSet;
use std::time::Duration;

use super::link::{Link, Segment};
use super::pair::Pair;
use super::rng::SimRng;
use super::scripted::Peer;
use crate::cp::ConnectionId;
use crate::proto::PRE_HELLO_MAX_FRAME_LEN;
use crate::transmit::{Transmit, drain_transmits};

impl Pair {
    /// Drives both ends at the current time until nothing moves: dials, writes,
    /// deliveries that are due, and events.
    pub fn pump(&mut self) {
        loop {
            let mut moved = self.dial();
            moved |= self.edge_writes();
            moved |= self.cp_writes();
            moved |= self.deliver();
            moved |= self.collect_events();
            self.links.retain(|_, l| !l.is_done());
            if !moved {
                break;
            }
        }
        self.cross_check();
    }

    fn dial(&mut self) -> bool {
        let mut moved = false;
        for index in 0..self.edges.len() {
            let Some(p) = self.edges.get_mut(index) else {
                continue;
            };
            let due = p.alive
                && p.conn.is_none()
                && p.edge.poll_connect_at().is_some_and(|at| at <= self.now);
            if !due {
                continue;
            }
            moved = true;
            if p.partitioned {
                p.edge.handle_connect_failed(self.now);
                continue;
            }
            self.next_conn += 1;
            let conn = ConnectionId(self.next_conn);
            let scripted = p.to_scripted_cp;
            let cp_refused = !scripted && self.cp.handle_connect(self.now, conn).is_err();
            if cp_refused || p.edge.handle_connected(self.now).is_err() {
                self.monitor
                    .fail(self.now.as_millis(), format!("dial of {conn:?} refused"));
                p.edge.handle_connect_failed(self.now);
                continue;
            }
            p.conn = Some(conn);
            let mut link = self.new_link(Some(index));
            if scripted {
                link.cp_scripted = true;
                self.scripted_cps.insert(conn, Peer::new());
            } else {
                self.inputs.insert(conn);
            }
            self.links.insert(conn, link);
        }
        moved
    }

    /// A link to Edge process `edge` (`None`: a scripted Edge), each direction with a
    /// latency drawn from the network's range.
    pub(super) fn new_link(&mut self, edge: Option<usize>) -> Link {
        let (lo, hi) = (
            self.net.latency_min.as_millis() as u64,
            self.net.latency_max.as_millis() as u64,
        );
        let up = Duration::from_millis(self.rng.range(lo, hi));
        let down = Duration::from_millis(self.rng.range(lo, hi));
        Link::new(edge, up, down)
    }

    fn edge_writes(&mut self) -> bool {
        let mut moved = false;
        let at_ms = self.now.as_millis();
        let limit = self.cp.config().max_frame_len;
        for index in 0..self.edges.len() {
            let Some(p) = self.edges.get_mut(index) else {
                continue;
            };
            let Some(conn) = p.conn.filter(|_| p.alive) else {
                continue;
            };
            let mut buf = Vec::new();
            // Close: the Edge is disconnected already; no `handle_closed` is needed.
            let close = drain_transmits(&mut buf, usize::MAX, |b| p.edge.poll_transmit(b))
                == Transmit::Close;
            if close {
                p.conn = None;
            }
            let Some(link) = self.links.get_mut(&conn) else {
                continue;
            };
            if !buf.is_empty() {
                moved = true;
                self.hash.record(b'e', &buf);
                let first = link.tap_to_cp.frames_seen() == 0;
                for frame in link.tap_to_cp.feed(&buf) {
                    // A scripted CP announces what it likes after the hello.
                    let limit = match (first, link.cp_scripted) {
                        (true, _) => PRE_HELLO_MAX_FRAME_LEN,
                        (false, true) => u32::MAX,
                        (false, false) => limit,
                    };
                    self.monitor.on_frame(
                        at_ms,
                        conn,
                        false,
                        frame.len,
                        limit,
                        frame.envelope.as_ref(),
                    );
                }
                link.send_to_cp(self.now, Segment::Data(buf));
            }
            if close {
                moved = true;
                link.edge_open = false;
                link.send_to_cp(self.now, Segment::Fin);
            }
        }
        moved
    }

    fn cp_writes(&mut self) -> bool {
        if self.cp_silent() {
            return false;
        }
        let mut woken = BTreeSet::new();
        while let Some(conn) = self.cp.poll_wakeup() {
            woken.insert(conn);
        }
        let inputs = std::mem::take(&mut self.inputs);
        let mut moved = false;
        let at_ms = self.now.as_millis();
        let real = self
            .links
            .iter_mut()
            .filter(|(_, l)| l.cp_open && !l.cp_scripted);
        for (conn, link) in real {
            let mut buf = Vec::new();
            let mut empty = false;
            let close = drain_transmits(&mut buf, usize::MAX, |b| {
                let t = self.cp.poll_transmit(*conn, b);
                empty |= t == Transmit::Bytes(0);
                t
            }) == Transmit::Close;
            if empty {
                self.monitor.fail(
                    at_ms,
                    format!("{conn:?}: poll_transmit handed out no bytes"),
                );
            }
            let output = !buf.is_empty() || close;
            if output && !inputs.contains(conn) && !woken.contains(conn) {
                self.monitor
                    .fail(at_ms, format!("{conn:?} got output without a wake-up"));
            }
            if !buf.is_empty() {
                moved = true;
                self.hash.record(b'c', &buf);
                // A scripted peer announces what it likes: only the CP's default
                // limit of a real Edge is checked.
                let limit = match link.edge {
                    Some(_) => crate::proto::DEFAULT_MAX_FRAME_LEN,
                    None => u32::MAX,
                };
                for frame in link.tap_to_edge.feed(&buf) {
                    self.monitor.on_frame(
                        at_ms,
                        *conn,
                        true,
                        frame.len,
                        limit,
                        frame.envelope.as_ref(),
                    );
                }
                link.send_to_edge(self.now, Segment::Data(buf));
            }
            if close {
                moved = true;
                link.cp_open = false;
                link.send_to_edge(self.now, Segment::Fin);
            }
        }
        moved
    }

    fn deliver(&mut self) -> bool {
        let mut moved = false;
        let now = self.now;
        let cp_silent = self.cp_silent();
        for (conn, link) in self.links.iter_mut() {
            while !cp_silent && link.to_cp.front().is_some_and(|(t, _)| *t <= now) {
                let Some((_, segment)) = link.to_cp.pop_front() else {
                    break;
                };
                moved = true;
                if !link.cp_open {
                    continue;
                }
                if link.cp_scripted {
                    if let Some(cp) = self.scripted_cps.get_mut(conn) {
                        link.cp_open &= cp.receive(segment);
                    }
                    continue;
                }
                self.inputs.insert(*conn);
                match segment {
                    Segment::Data(bytes) => {
                        for piece in split(&mut self.rng, self.net.split_reads, &bytes) {
                            self.cp.handle_bytes(now, *conn, piece);
                        }
                    }
                    Segment::Fin => {
                        link.cp_open = false;
                        self.cp.handle_closed(now, *conn);
                    }
                }
            }
            while link.to_edge.front().is_some_and(|(t, _)| *t <= now) {
                let Some((_, segment)) = link.to_edge.pop_front() else {
                    break;
                };
                moved = true;
                let Some(index) = link.edge else {
                    if let Some(peer) = self.scripted.get_mut(conn)
                        && link.edge_open
                    {
                        link.edge_open &= peer.receive(segment);
                    }
                    continue;
                };
                let Some(p) = self.edges.get_mut(index) else {
                    continue;
                };
                if !link.edge_open || !p.alive || p.conn != Some(*conn) {
                    continue;
                }
                match segment {
                    Segment::Data(bytes) => {
                        for piece in split(&mut self.rng, self.net.split_reads, &bytes) {
                            p.edge.handle_bytes(now, piece);
                        }
                    }
                    Segment::Fin => {
                        link.edge_open = false;
                        p.conn = None;
                        p.edge.handle_closed(now);
                    }
                }
            }
        }
        moved
    }

    fn collect_events(&mut self) -> bool {
        let mut moved = false;
        let at_ms = self.now.as_millis();
        while let Some(e) = self.cp.poll_event() {
            moved = true;
            self.hash.record(b'C', format!("{at_ms} {e:?}").as_bytes());
            self.monitor.on_cp_event(at_ms, &e);
            self.cp_events.push(e);
        }
        for (index, p) in self.edges.iter_mut().enumerate() {
            while let Some(e) = p.edge.poll_event() {
                moved = true;
                self.hash
                    .record(b'E', format!("{at_ms} {index} {e:?}").as_bytes());
                self.monitor.on_edge_event(at_ms, index, &e);
                p.events.push(e);
            }
        }
        moved
    }

    /// The monitor's view of live sessions must be the CP's own.
    fn cross_check(&mut self) {
        let at_ms = self.now.as_millis();
        let mut problems = Vec::new();
        for (edge_id, (conn, _)) in self.monitor.live_sessions() {
            if self.cp.live_conn(edge_id) != Some(*conn) {
                problems.push(format!(
                    "{edge_id}: CP's live connection is {:?}, events say {conn:?}",
                    self.cp.live_conn(edge_id)
                ));
            }
        }
        let (cp_errors, _) = self.monitor.protocol_errors();
        if self.cp.stats().protocol_errors != cp_errors {
            problems.push(format!(
                "CP counts {} protocol errors, its events {cp_errors}",
                self.cp.stats().protocol_errors
            ));
        }
        for p in problems {
            self.monitor.fail(at_ms, p);
        }
    }
}

/// `bytes` as one read, or as random smaller reads.
fn split<'a>(rng: &mut SimRng, split_reads: bool, bytes: &'a [u8]) -> Vec<&'a [u8]> {
    if !split_reads || bytes.len() < 2 {
        return vec![bytes];
    }
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let take = (rng.range(1, rest.len() as u64) as usize).min(rest.len());
        let (a, b) = rest.split_at(take);
        out.push(a);
        rest = b;
    }
    out
}
