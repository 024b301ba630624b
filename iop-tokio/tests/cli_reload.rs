//! SIGHUP re-reads the admin token file (Unix): a removed token is refused from the
//! next request on and the event streams opened with it end; a file that does not load
//! keeps the tokens in force.
#![cfg(all(feature = "cli", unix))]

mod cli_support;

use std::time::Duration;

use cli_support::{Sse, control_plane_logged, http_with, hup, log_has, secret_file, wait_until};

const KEPT: &str = "kept-operator-token-0123456789";
const REMOVED: &str = "removed-reader-token-0123456789";

fn status_with(cp: &cli_support::ControlPlane, token: &str) -> u16 {
    let auth = format!("Bearer {token}");
    http_with(
        cp.admin,
        "GET",
        "/v1/edges",
        &[("Authorization", &auth)],
        None,
    )
    .status
}

#[test]
fn sighup_rereads_the_admin_tokens_refusing_a_removed_one_and_ending_its_streams() {
    let tokens = secret_file("tokens", &format!("{KEPT} operate\n{REMOVED} read\n"));
    let (cp, log) = control_plane_logged(&["--admin-token-file", tokens.to_str().unwrap()]);
    assert_eq!(status_with(&cp, KEPT), 200);
    assert_eq!(status_with(&cp, REMOVED), 200);
    let removed = format!("Bearer {REMOVED}");
    let kept = format!("Bearer {KEPT}");
    let mut doomed = Sse::open_with(cp.admin, "/v1/events", &[("Authorization", &removed)]);
    let mut staying = Sse::open_with(cp.admin, "/v1/events", &[("Authorization", &kept)]);
    doomed.wait_for("text/event-stream");
    staying.wait_for("text/event-stream");

    // A file that does not load: logged, both tokens still in force.
    std::fs::write(&tokens, "short\n").unwrap();
    hup(&cp);
    wait_until("the reload failure logged", || {
        log_has(&log, "admin token reload failed").then_some(())
    });
    assert_eq!(status_with(&cp, REMOVED), 200);

    // The reader's token removed: refused at once, its stream ends, the other's not.
    std::fs::write(&tokens, format!("{KEPT} operate\n")).unwrap();
    hup(&cp);
    wait_until("the tokens reloaded", || {
        log_has(&log, "admin tokens reloaded").then_some(())
    });
    assert_eq!(status_with(&cp, REMOVED), 401);
    assert_eq!(status_with(&cp, KEPT), 200);
    assert!(
        doomed.ends_within(Duration::from_secs(5)),
        "the removed token's stream ended"
    );
    assert!(
        !staying.ends_within(Duration::from_millis(500)),
        "the kept token's stream goes on"
    );
}
