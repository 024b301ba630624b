//! Both ends say in words why a connection ended.

use iop_core::cp;
use iop_core::edge;
use iop_core::proto::{GoAwayReason, HelloRejectReason};

#[test]
fn close_reasons_read_as_words_on_both_ends() {
    let cases: [(String, &str); 7] = [
        (
            // A peer's words are quoted and escaped: they never forge a log line.
            cp::CloseReason::PeerGoAway {
                reason: GoAwayReason::Shutdown.into(),
                message: "bye\nFAKE LOG LINE".into(),
            }
            .to_string(),
            "the edge went away: GO_AWAY_REASON_SHUTDOWN: \"bye\\nFAKE LOG LINE\"",
        ),
        (
            cp::CloseReason::Superseded { by_session_id: 7 }.to_string(),
            "superseded by the session with id 7",
        ),
        (
            cp::CloseReason::HelloRejected(HelloRejectReason::DuplicateEdge).to_string(),
            "hello rejected: HELLO_REJECT_REASON_DUPLICATE_EDGE",
        ),
        (
            cp::CloseReason::HeartbeatTimeout.to_string(),
            "nothing heard for the liveness window",
        ),
        (
            edge::CloseReason::GoAway {
                reason: GoAwayReason::Overloaded,
                message: "too many hellos".into(),
            }
            .to_string(),
            "the control plane sent GoAway GO_AWAY_REASON_OVERLOADED: \"too many hellos\"",
        ),
        (
            edge::CloseReason::PeerSilent.to_string(),
            "the control plane went silent",
        ),
        (edge::CloseReason::Shutdown.to_string(), "shut down"),
    ];
    for (said, expected) in cases {
        assert_eq!(said, expected);
    }
}

/// Each real end names who caused it: the network, the Edge, the Control Plane's own
/// state, or its operator.
#[test]
fn every_close_names_its_initiator() {
    use iop_core::cp::{CpEvent, DuplicatePolicy, EnrolmentPolicy, Initiator};
    use iop_core::testing::scripted::edges::*;

    let mut config = cfg();
    config.duplicate_policy = DuplicatePolicy::Replace;
    let mut t = harness_with(config, EnrolmentPolicy::AcceptAny);
    let mut events = Vec::new();
    let (dropped, _) = t.enrol("edge-1", &[]);
    t.drop_transport(dropped);
    t.pump();
    events.extend(t.take_events());
    let (superseded, _) = t.enrol("edge-2", &[]);
    let (_, resp) = t.hello_with(hello("edge-2", &[]));
    assert!(resp.accepted, "{resp:?}");
    t.pump();
    events.extend(t.take_events());
    let (revoked, _) = t.enrol("edge-3", &[]);
    t.cp.revoke(t.now, "edge-3").unwrap();
    t.pump();
    events.extend(t.take_events());
    let broken = t.connect();
    // A frame far over the pre-hello cap: a protocol error.
    t.send_raw(broken, &u32::MAX.to_be_bytes());
    t.pump();
    events.extend(t.take_events());
    let initiator = |of| {
        events.iter().find_map(|e| match e {
            CpEvent::Closed { conn, reason, .. } if *conn == of => Some(reason.initiator()),
            _ => None,
        })
    };
    assert_eq!(initiator(dropped), Some(Initiator::Transport), "{events:?}");
    assert_eq!(
        initiator(superseded),
        Some(Initiator::ControlPlane),
        "{events:?}"
    );
    assert_eq!(initiator(revoked), Some(Initiator::Operator), "{events:?}");
    assert_eq!(initiator(broken), Some(Initiator::Edge), "{events:?}");
}
