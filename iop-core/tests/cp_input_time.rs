//! Every Control Plane input acts at its own `now`: an end that an application call
//! causes (a revocation, a shutdown) is stamped with that call's time, not with the
//! time of whatever input came before it. The view's 24 h clock and the `Closed`
//! event's time both start at the closing call.

use std::time::Duration;

use iop_core::cp::{CloseReason, CpEvent, EnrolmentPolicy};
use iop_core::testing::scripted::edges::*;

/// An hour during which the Control Plane hears nothing: no bytes, no timer.
const QUIET: Duration = Duration::from_secs(3_600);

fn closed_at(events: &[CpEvent], edge: &str) -> Option<(CloseReason, u64)> {
    events.iter().find_map(|e| match e {
        CpEvent::Closed {
            edge_id,
            reason,
            unix_ms,
            ..
        } if edge_id.as_deref() == Some(edge) => Some((reason.clone(), *unix_ms)),
        _ => None,
    })
}

#[test]
fn a_revocation_stamps_the_close_and_the_views_age_with_its_own_time() {
    let mut c = cfg();
    c.disconnected_view_ttl = Duration::from_secs(24 * 3_600);
    // Liveness far away, so that no timer is an input during the quiet hour.
    c.heartbeat_interval = Duration::from_secs(10 * 3_600);
    let ttl = c.disconnected_view_ttl;
    let wall = c.wall_clock;
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    t.enrol("edge-1", &["op"]);
    t.take_events();

    // Time passes with no input, then the application revokes the Edge.
    t.now = t.now + QUIET;
    let revoked_at = t.now;
    t.cp.revoke(revoked_at, "edge-1").unwrap();
    t.pump();
    let events = t.take_events();
    assert_eq!(
        closed_at(&events, "edge-1"),
        Some((CloseReason::CredentialRevoked, wall.unix_ms(revoked_at))),
        "{events:?}"
    );

    // Its view is kept a whole TTL from the revocation: still there a moment before,
    // gone at it.
    t.cp.handle_timeout(revoked_at + (ttl - Duration::from_millis(1)));
    assert!(t.cp.edge("edge-1").is_some(), "forgotten an hour early");
    t.cp.handle_timeout(revoked_at + ttl);
    assert!(t.cp.edge("edge-1").is_none(), "kept past its TTL");
}

#[test]
fn a_shutdown_stamps_every_close_with_its_own_time() {
    let mut c = cfg();
    c.heartbeat_interval = Duration::from_secs(10 * 3_600);
    let wall = c.wall_clock;
    let mut t = harness_with(c, EnrolmentPolicy::AcceptAny);
    t.enrol("edge-1", &["op"]);
    t.enrol("edge-2", &["op"]);
    t.take_events();

    t.now = t.now + QUIET;
    let at = t.now;
    t.cp.shutdown(at);
    t.pump();
    let events = t.take_events();
    for edge in ["edge-1", "edge-2"] {
        assert_eq!(
            closed_at(&events, edge),
            Some((CloseReason::Shutdown, wall.unix_ms(at))),
            "{events:?}"
        );
    }
}
