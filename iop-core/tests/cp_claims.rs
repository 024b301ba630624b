//! The ownership-claim seam: a hello that passed its local checks is put to the
//! `Directory`. Deferred (`ExternalDirectory`): each answer, a late answer, a claim that
//! times out, losing an Edge to another Control Plane, and the release signal; at once
//! (`LocalDirectory`, a directory of one's own).

use std::time::Duration;

use iop_core::cp::{
    Claim, ClaimAnswer, ClaimError, CloseReason, ConnectionId, CpEvent, Directory, DuplicatePolicy,
    EnrolmentPolicy, ExternalDirectory, LocalDirectory, Reachability,
};
use iop_core::proto::{Body, GoAwayReason, HelloRejectReason};
use iop_core::testing::scripted::edges::*;

fn external(policy: DuplicatePolicy) -> Pair {
    let mut c = cfg();
    c.duplicate_policy = policy;
    harness_with_directory(c, EnrolmentPolicy::AcceptAny, Box::new(ExternalDirectory))
}

/// A deferring directory, with at most `max_pending_hellos` connections unchecked.
fn external_capped(max_pending_hellos: usize) -> Pair {
    let mut c = cfg();
    c.max_pending_hellos = max_pending_hellos;
    harness_with_directory(c, EnrolmentPolicy::AcceptAny, Box::new(ExternalDirectory))
}

/// Connects and sends a hello; returns the connection and the claim it raised.
fn claim(t: &mut Pair, edge_id: &str) -> (ConnectionId, Claim) {
    let conn = t.connect();
    t.send(conn, hello(edge_id, &["edge.ping"]));
    assert!(
        t.take_frames(conn).is_empty(),
        "nothing is answered before the claim is"
    );
    let claim = t
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            CpEvent::OwnershipClaim(c) => Some(c),
            _ => None,
        })
        .expect("an ownership claim");
    (conn, claim)
}

fn answer(t: &mut Pair, conn: ConnectionId, a: ClaimAnswer) -> Result<(), ClaimError> {
    let r = t.cp.handle_claim(t.now, conn, a);
    t.pump();
    r
}

fn hello_response(t: &mut Pair, conn: ConnectionId) -> iop_core::proto::EdgeHelloResponse {
    t.take_frames(conn)
        .into_iter()
        .find_map(|f| match f.body {
            Some(Body::HelloResponse(r)) => Some(r),
            _ => None,
        })
        .expect("a hello response")
}

#[test]
fn a_granted_claim_accepts_the_hello_under_the_directorys_session_id() {
    let mut t = external(DuplicatePolicy::Replace);
    let (conn, c) = claim(&mut t, "edge-1");
    assert_eq!((c.conn, c.edge_id.as_str()), (conn, "edge-1"));
    assert_eq!((c.local_session_id, c.last_session_id), (None, 0));
    assert_eq!(c.policy, DuplicatePolicy::Replace);

    answer(&mut t, conn, ClaimAnswer::Granted { session_id: 77 }).unwrap();
    let r = hello_response(&mut t, conn);
    assert!(r.accepted);
    assert_eq!(r.session_id, 77);
    assert!(t.cp_events.iter().any(|e| matches!(
        e,
        CpEvent::SessionAccepted {
            session_id: 77,
            superseded_session_id: None,
            ..
        }
    )));
    assert_eq!(t.cp.edge("edge-1").unwrap().session_id, 77);
    // Answered once: a second answer finds nothing waiting.
    assert_eq!(
        answer(&mut t, conn, ClaimAnswer::Granted { session_id: 78 }),
        Err(ClaimError::NotWaiting)
    );
}

#[test]
fn a_grant_for_a_live_edge_supersedes_its_session_here() {
    let mut t = external(DuplicatePolicy::Replace);
    let (first, _) = claim(&mut t, "edge-1");
    answer(&mut t, first, ClaimAnswer::Granted { session_id: 10 }).unwrap();
    t.take_frames(first);
    let (second, c) = claim(&mut t, "edge-1");
    assert_eq!((c.local_session_id, c.last_session_id), (Some(10), 10));
    answer(&mut t, second, ClaimAnswer::Granted { session_id: 11 }).unwrap();
    assert_eq!(
        go_away(&t.take_frames(first)).map(|(r, _)| r),
        Some(GoAwayReason::Superseded as i32)
    );
    assert!(hello_response(&mut t, second).accepted);
    // The superseded session's end is no release: no EdgeDisconnected.
    assert!(
        !t.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::EdgeDisconnected { .. }))
    );
}

#[test]
fn a_stale_grant_is_refused_and_the_hello_ended_overloaded() {
    let mut t = external(DuplicatePolicy::Replace);
    let (first, _) = claim(&mut t, "edge-1");
    answer(&mut t, first, ClaimAnswer::Granted { session_id: 10 }).unwrap();
    t.drop_transport(first);
    let (conn, c) = claim(&mut t, "edge-1");
    assert_eq!(c.last_session_id, 10);
    assert_eq!(
        answer(&mut t, conn, ClaimAnswer::Granted { session_id: 10 }),
        Err(ClaimError::StaleSessionId {
            last: 10,
            given: 10
        })
    );
    assert_eq!(
        go_away(&t.take_frames(conn)).map(|(r, _)| r),
        Some(GoAwayReason::Overloaded as i32)
    );
}

#[test]
fn held_is_duplicate_edge_and_unavailable_is_overloaded() {
    let mut t = external(DuplicatePolicy::Reject);
    let (conn, c) = claim(&mut t, "edge-1");
    assert_eq!(c.policy, DuplicatePolicy::Reject);
    answer(&mut t, conn, ClaimAnswer::Held).unwrap();
    let r = hello_response(&mut t, conn);
    assert!(!r.accepted);
    assert_eq!(r.reject_reason, HelloRejectReason::DuplicateEdge as i32);
    assert_eq!(r.retry_after_ms, 5_000);
    assert!(t.is_closed(conn));

    // A directory that cannot decide now: back soon, paced as a burst's refusals
    // (the least wait and up to an eighth more).
    let (conn, _) = claim(&mut t, "edge-2");
    answer(&mut t, conn, ClaimAnswer::Unavailable).unwrap();
    let (reason, retry) = go_away(&t.take_frames(conn)).unwrap();
    assert_eq!(reason, GoAwayReason::Overloaded as i32);
    assert!((200..=225).contains(&retry), "{retry} ms");
    assert!(t.is_closed(conn));
    // Hellos kept coming for a second and none was accepted (the engine down): the
    // full `retry_after_overloaded`; before that, a slow burst's turns.
    for n in 0..6 {
        t.advance(std::time::Duration::from_millis(200));
        let (conn, _) = claim(&mut t, &format!("edge-stalled-{n}"));
        answer(&mut t, conn, ClaimAnswer::Unavailable).unwrap();
        let retry = go_away(&t.take_frames(conn)).unwrap().1;
        assert_eq!(retry >= 10_000, n >= 4, "claim {n}: {retry} ms");
    }
    assert_eq!(t.cp.stats().sessions_accepted, 0);
}

#[test]
fn a_claim_unanswered_within_the_hello_timeout_ends_the_hello() {
    let mut t = external(DuplicatePolicy::Replace);
    let (conn, _) = claim(&mut t, "edge-1");
    t.advance(Duration::from_secs(11));
    assert_eq!(
        go_away(&t.take_frames(conn)).map(|(r, _)| r),
        Some(GoAwayReason::HelloTimeout as i32)
    );
    // The late grant is refused: the driver releases the record it wrote.
    assert_eq!(
        answer(&mut t, conn, ClaimAnswer::Granted { session_id: 5 }),
        Err(ClaimError::NotWaiting)
    );
    let (gone, _) = claim(&mut t, "edge-2");
    t.drop_transport(gone);
    assert_eq!(
        answer(&mut t, gone, ClaimAnswer::Granted { session_id: 6 }),
        Err(ClaimError::NotWaiting)
    );
    assert_eq!(t.cp.stats().sessions_accepted, 0);
}

#[test]
fn the_claims_waiting_are_listed_until_answered_or_gone() {
    // A directory that missed the events (it subscribed late, or lagged) finds them.
    let mut t = external(DuplicatePolicy::Replace);
    let (first, c1) = claim(&mut t, "edge-1");
    let (second, c2) = claim(&mut t, "edge-2");
    let (third, c3) = claim(&mut t, "edge-3");
    assert_eq!(t.cp.claims_waiting(), vec![c1, c2, c3]);
    assert!(t.cp.claim_waiting(second));
    answer(&mut t, second, ClaimAnswer::Granted { session_id: 1 }).unwrap();
    t.drop_transport(third);
    assert!(!t.cp.claim_waiting(second) && !t.cp.claim_waiting(third));
    assert_eq!(t.cp.claims_waiting().len(), 1);
    assert_eq!(t.cp.claims_waiting()[0].conn, first);
    t.advance(Duration::from_secs(11));
    assert!(t.cp.claims_waiting().is_empty(), "timed out");
}

#[test]
fn hellos_waiting_on_their_claims_leave_the_pending_hello_cap_to_unchecked_connections() {
    let mut t = external_capped(2);
    // Three hellos checked, each waiting on its claim (a durable engine's storm).
    let claiming: Vec<_> = (0..3)
        .map(|i| claim(&mut t, &format!("edge-{i}")).0)
        .collect();
    // The cap still bounds the connections that have said nothing yet.
    let (a, b) = (t.connect(), t.connect());
    assert!(!t.is_closed(a) && !t.is_closed(b));
    let over = t.connect();
    assert_eq!(
        go_away(&t.take_frames(over)).map(|(r, _)| r),
        Some(GoAwayReason::Overloaded as i32)
    );
    assert_eq!(t.cp.stats().pending_hellos_refused, 1);
    // The claims answered, every waiting hello is accepted.
    for (i, conn) in claiming.into_iter().enumerate() {
        let session_id = i as u64 + 1;
        answer(&mut t, conn, ClaimAnswer::Granted { session_id }).unwrap();
        assert!(hello_response(&mut t, conn).accepted);
    }
    assert_eq!(t.cp.stats().sessions_accepted, 3);
}

/// The `retry_after` of a connection refused at the pending-hello cap, in ms.
fn refused_retry(t: &mut Pair) -> u32 {
    let over = t.connect();
    let (reason, retry) = go_away(&t.take_frames(over)).expect("refused");
    assert_eq!(reason, GoAwayReason::Overloaded as i32);
    retry
}

#[test]
fn turns_past_the_cap_follow_the_hellos_checked_while_their_claims_wait() {
    let mut t = external_capped(1);
    // A storm's first 400 ms: 400 hellos checked, none accepted yet (their claims
    // are on their way to a durable engine): 1 000 checked a second.
    for i in 0..400 {
        claim(&mut t, &format!("edge-{i}"));
        t.advance(Duration::from_millis(1));
    }
    let _silent = t.connect();
    // 200 refused: turns one apart at half as fast again as hellos are checked
    // (1 500/s), from the least wait on, each spread by up to an eighth; not all
    // sent back together at the least wait as if nothing were measured.
    let retries: Vec<u32> = (0..200).map(|_| refused_retry(&mut t)).collect();
    assert!((200..=225).contains(&retries[0]), "{retries:?}");
    let last = *retries.iter().max().unwrap();
    assert!((320..=380).contains(&last), "{retries:?}");
}

#[test]
fn turns_past_the_cap_follow_the_acceptances_once_the_claims_waiting_outlast_half_the_hello_timeout()
 {
    let mut t = external_capped(1);
    let conns: Vec<ConnectionId> = (0..640)
        .map(|i| claim(&mut t, &format!("edge-{i}")).0)
        .collect();
    // The engine grants 80 claims in 800 ms (100 a second): the 560 still waiting
    // take it 5.6 s, past half the hello timeout.
    for (i, conn) in conns.iter().take(80).enumerate() {
        answer(
            &mut t,
            *conn,
            ClaimAnswer::Granted {
                session_id: i as u64 + 1,
            },
        )
        .unwrap();
        t.advance(Duration::from_millis(10));
        if i % 8 == 0 {
            // Connections keep arriving (the windows move on with them).
            let c = t.connect();
            t.drop_transport(c);
        }
    }
    let _silent = t.connect();
    // Back when the engine will have taken every hello ahead: seconds, not the
    // checks' fraction of one.
    let retry = refused_retry(&mut t);
    assert!((3_000..10_000).contains(&retry), "{retry}");
}

#[test]
fn a_frame_while_the_claim_waits_is_a_protocol_error() {
    let mut t = external(DuplicatePolicy::Replace);
    let (conn, _) = claim(&mut t, "edge-1");
    t.send(conn, heartbeat(1));
    assert_eq!(
        go_away(&t.take_frames(conn)).map(|(r, _)| r),
        Some(GoAwayReason::ProtocolError as i32)
    );
    let (conn, _) = claim(&mut t, "edge-2");
    t.send(conn, hello("edge-2", &[]));
    assert!(t.cp_events.iter().any(|e| matches!(
        e,
        CpEvent::Closed { conn: c, reason: CloseReason::ProtocolError(_), .. } if *c == conn
    )));
}

#[test]
fn losing_the_record_supersedes_the_session_without_a_release() {
    let mut t = external(DuplicatePolicy::Replace);
    let (conn, _) = claim(&mut t, "edge-1");
    answer(&mut t, conn, ClaimAnswer::Granted { session_id: 20 }).unwrap();
    t.take_frames(conn);
    t.take_events();
    // Not the live session: nothing changes.
    assert!(!t.cp.handle_ownership_lost(t.now, "edge-1", 19, 21));
    assert!(!t.cp.handle_ownership_lost(t.now, "edge-9", 20, 21));
    assert!(t.cp.handle_ownership_lost(t.now, "edge-1", 20, 21));
    t.pump();
    assert_eq!(
        go_away(&t.take_frames(conn)).map(|(r, _)| r),
        Some(GoAwayReason::Superseded as i32)
    );
    let events = t.take_events();
    assert!(events.iter().any(|e| matches!(
        e,
        CpEvent::EdgeSuperseded {
            old_session_id: 20,
            new_session_id: 21,
            ..
        }
    )));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, CpEvent::EdgeDisconnected { .. }))
    );
    assert_eq!(
        t.cp.edge("edge-1").unwrap().reachability,
        Reachability::Disconnected
    );
}

#[test]
fn a_granted_session_that_ends_says_which_record_to_release() {
    let mut t = external(DuplicatePolicy::Replace);
    let (conn, _) = claim(&mut t, "edge-1");
    answer(&mut t, conn, ClaimAnswer::Granted { session_id: 30 }).unwrap();
    t.take_events();
    t.drop_transport(conn);
    assert!(t.take_events().iter().any(|e| matches!(
        e,
        CpEvent::EdgeDisconnected { edge_id, session_id: 30, .. } if edge_id == "edge-1"
    )));
}

#[test]
fn the_local_directory_answers_at_once() {
    let mut t = harness();
    let (conn, r) = t.hello_with(hello("edge-1", &[]));
    assert!(r.accepted);
    assert!(
        !t.cp_events
            .iter()
            .any(|e| matches!(e, CpEvent::OwnershipClaim(_)))
    );
    assert_eq!(
        t.cp.handle_claim(t.now, conn, ClaimAnswer::Held),
        Err(ClaimError::NotWaiting)
    );
}

/// Defers `remote-*` Edges, refuses `blocked-*` ones at once, and leaves the rest to
/// the local directory.
#[derive(Debug)]
struct Mixed(LocalDirectory);

impl Directory for Mixed {
    fn claim(&mut self, claim: &Claim) -> Option<ClaimAnswer> {
        if claim.edge_id.starts_with("remote-") {
            None
        } else if claim.edge_id.starts_with("blocked-") {
            Some(ClaimAnswer::Unavailable)
        } else {
            self.0.claim(claim)
        }
    }
}

#[test]
fn a_directory_of_ones_own_answers_some_claims_at_once_and_defers_others() {
    let mut c = cfg();
    c.session_id_floor = 100;
    let directory = Box::new(Mixed(LocalDirectory::new(c.session_id_floor)));
    let mut t = harness_with_directory(c, EnrolmentPolicy::AcceptAny, directory);

    // At once, granted: the local directory's ids start above the floor.
    let (_, r) = t.hello_with(hello("edge-1", &[]));
    assert!(r.accepted);
    assert_eq!(r.session_id, 101);

    // At once, refused: no claim event, the hello ends `GoAway{OVERLOADED}`, paced.
    let conn = t.connect();
    t.take_events();
    t.send(conn, hello("blocked-1", &[]));
    let (reason, retry) = go_away(&t.take_frames(conn)).unwrap();
    assert_eq!(reason, GoAwayReason::Overloaded as i32);
    assert!((200..=10_000).contains(&retry), "{retry} ms");
    assert!(t.is_closed(conn));
    assert!(
        !t.take_events()
            .iter()
            .any(|e| matches!(e, CpEvent::OwnershipClaim(_)))
    );

    // Deferred: a claim event, and the answer applied as any other.
    let (conn, c) = claim(&mut t, "remote-1");
    assert_eq!(c.edge_id, "remote-1");
    answer(&mut t, conn, ClaimAnswer::Granted { session_id: 500 }).unwrap();
    assert_eq!(hello_response(&mut t, conn).session_id, 500);
    assert_eq!(t.cp.stats().sessions_accepted, 2);
}

fn local_claim(edge_id: &str, policy: DuplicatePolicy, live: Option<u64>, last: u64) -> Claim {
    let mut c = Claim::new(ConnectionId(1), edge_id, policy);
    c.local_session_id = live;
    c.last_session_id = last;
    c
}

#[test]
fn the_local_directory_counts_up_above_every_edges_last_id_and_holds_under_reject() {
    let mut d = LocalDirectory::new(10);
    let grant = |d: &mut LocalDirectory, c: &Claim| match d.claim(c) {
        Some(ClaimAnswer::Granted { session_id }) => session_id,
        other => panic!("expected a grant, got {other:?}"),
    };
    assert_eq!(
        grant(&mut d, &local_claim("a", DuplicatePolicy::Replace, None, 0)),
        11
    );
    assert_eq!(
        grant(&mut d, &local_claim("b", DuplicatePolicy::Reject, None, 0)),
        12
    );
    // An Edge whose last id is above the counter (an id a cluster granted) is
    // granted above it, and the counter follows.
    assert_eq!(
        grant(
            &mut d,
            &local_claim("c", DuplicatePolicy::Replace, None, 40)
        ),
        41
    );
    assert_eq!(
        grant(&mut d, &local_claim("d", DuplicatePolicy::Replace, None, 0)),
        42
    );
    // A live session here: superseded under Replace, held under Reject.
    assert_eq!(
        grant(
            &mut d,
            &local_claim("a", DuplicatePolicy::Replace, Some(11), 11)
        ),
        43
    );
    assert_eq!(
        d.claim(&local_claim("a", DuplicatePolicy::Reject, Some(43), 43)),
        Some(ClaimAnswer::Held)
    );
    assert_eq!(
        grant(&mut d, &local_claim("e", DuplicatePolicy::Reject, None, 0)),
        44
    );
}
