//! Mutual TLS identity (iop_core::cp::PeerIdentity): with `require_peer_identity`, a
//! hello is accepted only on a connection whose transport identity names its edge id.

use iop_core::cp::{
    AllowList, CloseReason, CpEvent, Credential, EnrolmentPolicy, NamedPeer, PeerIdentity,
};
use iop_core::proto::{Body, HelloRejectReason};
use iop_core::testing::scripted::edges::*;

fn required() -> Pair {
    let mut config = cfg();
    config.require_peer_identity = true;
    harness_with(config, EnrolmentPolicy::AcceptAny)
}

fn answer(
    t: &mut Pair,
    identity: Option<Box<dyn PeerIdentity>>,
    edge_id: &str,
) -> (bool, HelloRejectReason, String) {
    let conn = t.connect_with_identity(identity);
    t.send(conn, hello(edge_id, &[]));
    let frames = t.take_frames(conn);
    let resp = frames
        .into_iter()
        .find_map(|f| match f.body {
            Some(Body::HelloResponse(r)) => Some(r),
            _ => None,
        })
        .expect("a hello response");
    if !resp.accepted {
        assert!(t.is_closed(conn), "a rejected hello closes the connection");
    }
    (resp.accepted, resp.reject_reason(), resp.message)
}

#[test]
fn a_matching_identity_is_accepted() {
    let mut t = required();
    let (accepted, _, _) = answer(&mut t, Some(Box::new(NamedPeer::new(["edge-1"]))), "edge-1");
    assert!(accepted);
}

#[test]
fn a_mismatched_identity_is_refused_bad_credential() {
    let mut t = required();
    let (accepted, reason, message) =
        answer(&mut t, Some(Box::new(NamedPeer::new(["edge-2"]))), "edge-1");
    assert!(!accepted);
    assert_eq!(reason, HelloRejectReason::BadCredential);
    assert_eq!(
        message,
        "client certificate identity does not match the edge id"
    );
    assert!(t.take_events().iter().any(|e| matches!(
        e,
        CpEvent::Closed {
            reason: CloseReason::HelloRejected(HelloRejectReason::BadCredential),
            ..
        }
    )));
}

#[test]
fn no_identity_is_refused_when_required_and_ignored_otherwise() {
    let mut t = required();
    let (accepted, reason, message) = answer(&mut t, None, "edge-1");
    assert!(!accepted);
    assert_eq!(reason, HelloRejectReason::BadCredential);
    assert!(
        message.contains("no verified client certificate"),
        "{message}"
    );

    // Not required: the identity is not consulted.
    let mut t = harness();
    let (accepted, _, _) = answer(&mut t, Some(Box::new(NamedPeer::new(["other"]))), "edge-1");
    assert!(accepted);
}

#[test]
fn the_enrolment_check_comes_first() {
    let mut config = cfg();
    config.require_peer_identity = true;
    let policy =
        EnrolmentPolicy::AllowList(AllowList::new().with("edge-1", &Credential::new("right")));
    let mut t = harness_with(config, policy);
    // Wrong credential and wrong identity: UNKNOWN_EDGE/BAD_CREDENTIAL of step 4 first.
    let (_, reason, message) = answer(&mut t, Some(Box::new(NamedPeer::new(["x"]))), "edge-9");
    assert_eq!(reason, HelloRejectReason::UnknownEdge);
    assert_eq!(message, "edge is not enrolled");
}
