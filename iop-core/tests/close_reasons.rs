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
