//! Wire invariants under random application calls, CP requests and reconnects.

use std::collections::BTreeMap;

use iop_core::edge::Outcome;
use iop_core::proto::{Body, CommandPhase, Envelope, HeartbeatAck, NodeEventKind};
use iop_core::testing::scripted::control_plane::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Reconnect,
    Drop,
    Command(u8, bool),
    Running(u8),
    Finish(u8, u8),
    Advance(u16),
    Ack,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::Reconnect),
        1 => Just(Step::Drop),
        4 => (0u8..6, any::<bool>()).prop_map(|(i, t)| Step::Command(i, t)),
        3 => (0u8..6).prop_map(Step::Running),
        2 => (0u8..6, 0u8..3).prop_map(|(i, o)| Step::Finish(i, o)),
        3 => (0u16..4_000).prop_map(Step::Advance),
        2 => Just(Step::Ack),
    ]
}

fn rank(phase: i32) -> u8 {
    match CommandPhase::try_from(phase).unwrap() {
        CommandPhase::Accepted => 1,
        CommandPhase::Running => 2,
        _ => 3,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn command_and_session_invariants_hold(steps in proptest::collection::vec(step(), 1..60)) {
        let mut h = Harness::default_edge();
        let mut session = 0u64;
        // Everything the CP saw, per session.
        let mut sessions: Vec<Vec<Envelope>> = Vec::new();
        let mut ms = 0u64;
        for s in steps {
            match s {
                Step::Reconnect => {
                    if h.edge.is_connected() {
                        h.transport_closed();
                    }
                    if let Some(at) = h.edge.poll_connect_at() {
                        ms = ms.max(at.as_millis());
                        h.at(ms);
                        session += 1;
                        h.connect();
                        sessions.push(h.accept_with(accepted(session, 1_000)));
                    }
                }
                Step::Drop => h.transport_closed(),
                Step::Command(i, timed) => {
                    let mut req = cmd(&format!("c{i}"), "edge.ping", "");
                    req.timeout_ms = if timed { 1_500 } else { 0 };
                    h.deliver(Envelope::new(req));
                }
                Step::Running(i) => {
                    let _ = h.edge.report_running(h.now, &format!("c{i}"), "", BTreeMap::new());
                }
                Step::Finish(i, o) => {
                    let outcome = [Outcome::Succeeded, Outcome::Failed, Outcome::Cancelled][o as usize];
                    let _ = h.edge.report_outcome(h.now, &format!("c{i}"), outcome, "", BTreeMap::new());
                }
                Step::Advance(d) => {
                    ms += u64::from(d);
                    h.timeout(ms);
                }
                Step::Ack => h.deliver(Envelope::new(HeartbeatAck { sequence: 0 })),
            }
            let frames = h.flush();
            if h.close_requested {
                h.transport_closed();
                h.close_requested = false;
            }
            if let Some(current) = sessions.last_mut() {
                current.extend(frames);
            } else {
                prop_assert!(frames.is_empty());
            }
            h.events();
        }

        // Per command, across sessions: accepted response first, then events whose
        // sequence never goes back, seq 1 = ACCEPTED, phases never go back, one terminal.
        let mut responded: BTreeMap<String, bool> = BTreeMap::new();
        let mut last: BTreeMap<String, iop_core::proto::EdgeCommandEvent> = BTreeMap::new();
        for frames in &sessions {
            let mut node_seq = 0;
            let mut hb_seq = 0;
            for f in frames {
                match &f.body {
                    Some(Body::CommandResponse(r)) if r.accepted => {
                        responded.insert(r.command_id.clone(), true);
                    }
                    Some(Body::CommandEvent(e)) => {
                        prop_assert!(responded.contains_key(&e.command_id), "event before response");
                        if e.sequence == 1 {
                            prop_assert_eq!(e.phase, CommandPhase::Accepted as i32);
                        }
                        if let Some(prev) = last.get(&e.command_id) {
                            prop_assert!(e.sequence >= prev.sequence, "reordered");
                            if e.sequence == prev.sequence {
                                prop_assert_eq!(e, prev);
                            } else {
                                prop_assert!(rank(prev.phase) < 3, "event after terminal");
                                prop_assert!(rank(e.phase) >= rank(prev.phase));
                            }
                        }
                        last.insert(e.command_id.clone(), e.clone());
                    }
                    Some(Body::NodeEvent(e)) => {
                        if node_seq == 0 {
                            prop_assert_eq!(e.kind, NodeEventKind::EdgeReady as i32);
                        }
                        node_seq += 1;
                        prop_assert_eq!(e.sequence, node_seq);
                    }
                    Some(Body::Heartbeat(b)) => {
                        hb_seq += 1;
                        prop_assert_eq!(b.sequence, hb_seq);
                    }
                    _ => {}
                }
            }
        }
    }
}
