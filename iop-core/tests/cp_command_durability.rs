//! PROTOCOL.md §4.4 "a command's outcome is never lost to a reconnect or a superseded
//! session": a rule-abiding fake Edge, random drops, reconnects, supersessions and
//! restarts; at the end every command has exactly one outcome and the CP never saw a
//! protocol error.

use std::collections::BTreeMap;

use iop_core::cp::Ending;
use iop_core::cp::{CommandOutcome, CommandSpec, ConnectionId, CpEvent};
use iop_core::proto::{Body, CommandPhase, Envelope, NodeEventKind};
use iop_core::testing::scripted::edges::*;
use proptest::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    Rejected,
    Accepted { phase: CommandPhase, seq: u32 },
}

/// An Edge that follows every rule of PROTOCOL.md §4.4.
struct FakeEdge {
    conn: Option<ConnectionId>,
    held: BTreeMap<String, Held>,
    /// Frames written but not yet delivered: lost if the connection drops first.
    outbox: Vec<Envelope>,
}

const EDGE: &str = "edge-1";

impl FakeEdge {
    fn connect(&mut self, t: &mut Pair) {
        let mut h = hello(EDGE, &["op"]);
        h.inflight_command_ids = self.held.keys().cloned().collect();
        let (conn, resp) = t.hello_with(h);
        assert!(resp.accepted);
        self.conn = Some(conn);
        self.outbox.clear();
        self.outbox
            .push(node_event(EDGE, NodeEventKind::EdgeReady, 1));
        // Replay the latest event of every accepted command still held.
        for (id, held) in &self.held {
            if let Held::Accepted { phase, seq } = held {
                self.outbox.push(cmd_event(id, *phase, *seq));
            }
        }
    }

    /// Delivers everything written so far.
    fn flush(&mut self, t: &mut Pair) {
        let frames = std::mem::take(&mut self.outbox);
        if let Some(conn) = self.conn {
            for f in frames {
                t.send(conn, f);
            }
        }
    }

    fn drop_conn(&mut self, t: &mut Pair) {
        self.outbox.clear();
        if let Some(conn) = self.conn.take() {
            t.drop_transport(conn);
        }
    }

    /// Reads and answers everything the CP sent.
    fn read(&mut self, t: &mut Pair) {
        let Some(conn) = self.conn else { return };
        if t.is_closed(conn) {
            self.conn = None;
            return;
        }
        for f in t.take_frames(conn) {
            match f.body {
                Some(Body::CommandRequest(r)) => {
                    let id = r.command_id;
                    let fresh = !self.held.contains_key(&id);
                    // Deterministic verdict: ids ending in 5 are rejected.
                    let held = *self.held.entry(id.clone()).or_insert(if id.ends_with('5') {
                        Held::Rejected
                    } else {
                        Held::Accepted {
                            phase: CommandPhase::Accepted,
                            seq: 1,
                        }
                    });
                    self.outbox.push(cmd_response(&id, held != Held::Rejected));
                    if fresh && held != Held::Rejected {
                        self.outbox.push(cmd_event(&id, CommandPhase::Accepted, 1));
                    }
                }
                Some(Body::StatusRequest(_)) => {
                    self.outbox.push(status_response(f.correlation_id, EDGE, 1));
                }
                _ => {}
            }
        }
    }

    /// Moves the `i`-th unfinished command one step; sends the event if connected.
    fn progress(&mut self, t: &Pair, i: usize, finish: bool) {
        let open: Vec<String> = self
            .held
            .iter()
            .filter(|(_, h)| {
                matches!(h, Held::Accepted { phase, .. }
                    if matches!(phase, CommandPhase::Accepted | CommandPhase::Running))
            })
            .map(|(id, _)| id.clone())
            .collect();
        if open.is_empty() {
            return;
        }
        let id = &open[i % open.len()];
        let Some(Held::Accepted { phase, seq }) = self.held.get_mut(id) else {
            return;
        };
        *phase = if finish {
            CommandPhase::Succeeded
        } else {
            CommandPhase::Running
        };
        *seq += 1;
        let ev: Envelope = cmd_event(id, *phase, *seq);
        if self.conn.is_some_and(|c| !t.is_closed(c)) {
            self.outbox.push(ev);
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Send,
    Read,
    Flush,
    Progress(usize, bool),
    Drop,
    Connect,
    Supersede,
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Send),
        4 => Just(Step::Read),
        4 => Just(Step::Flush),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(i, f)| Step::Progress(i, f)),
        1 => Just(Step::Drop),
        2 => Just(Step::Connect),
        1 => Just(Step::Supersede),
        1 => Just(Step::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_command_ends_exactly_once_across_reconnects(steps in prop::collection::vec(step(), 1..60)) {
        let mut t = harness();
        let mut edge = FakeEdge { conn: None, held: BTreeMap::new(), outbox: Vec::new() };
        edge.connect(&mut t);
        let mut sent = Vec::new();
        for s in steps {
            if edge.conn.is_some_and(|c| t.is_closed(c)) {
                edge.conn = None;
            }
            match s {
                Step::Send => {
                    let spec = CommandSpec::new("op");
                    if let Ok(id) = t.cp.send_command(t.now, EDGE, spec) {
                        sent.push(id);
                    }
                    t.pump();
                }
                Step::Read => edge.read(&mut t),
                Step::Flush => edge.flush(&mut t),
                Step::Progress(i, f) => edge.progress(&t, i, f),
                Step::Drop => edge.drop_conn(&mut t),
                Step::Connect => if edge.conn.is_none() { edge.connect(&mut t) },
                Step::Supersede => edge.connect(&mut t),
                Step::Restart => {
                    edge.drop_conn(&mut t);
                    edge.held.clear();
                }
            }
        }
        // Settle: reconnect, deliver everything, finish everything.
        for _ in 0..4 {
            if edge.conn.is_none_or(|c| t.is_closed(c)) {
                edge.connect(&mut t);
            }
            edge.flush(&mut t);
            edge.read(&mut t);
            edge.flush(&mut t);
            for i in 0..edge.held.len() {
                edge.progress(&t, i, true);
            }
            edge.flush(&mut t);
        }
        prop_assert_eq!(t.cp.stats().protocol_errors, 0, "{:?}", t.cp_events);
        for id in &sent {
            let st = t.cp.command(EDGE, id).unwrap();
            prop_assert!(st.outcome.is_some(), "{id}: {st:?}");
            let ends = t.cp_events.iter().filter(|e| match e {
                CpEvent::CommandEvent { event, .. } => event.command_id == *id
                    && event.phase == CommandPhase::Succeeded as i32,
                // Lost, or sent on three sessions that each dropped before the Edge
                // read it.
                CpEvent::CommandEnded {
                    command_id,
                    ending: Ending::Lost | Ending::Undeliverable { .. },
                    ..
                } => command_id == id,
                CpEvent::CommandResponded { response, .. } => response.command_id == *id && !response.accepted,
                _ => false,
            }).count();
            prop_assert_eq!(ends, 1, "{}: {:?}", id, st);
            if let Some(CommandOutcome::Finished(p)) = st.outcome {
                prop_assert_eq!(p, CommandPhase::Succeeded);
            }
        }
    }
}
