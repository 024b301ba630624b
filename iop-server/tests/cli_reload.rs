//! SIGHUP re-reads the admin token file (Unix): a removed token is refused from the
//! next request on and the event streams opened with it end; a file that does not load
//! keeps the tokens in force.
#![cfg(unix)]

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

/// Whether an HTTPS `GET /healthz` to `admin`, trusting `ca` only, is answered 200.
fn healthz_over_tls(admin: std::net::SocketAddr, ca: &std::path::Path) -> bool {
    use futures_lite::{AsyncReadExt as _, AsyncWriteExt as _};
    let tls = iop_tokio::ClientTls::from_pem_files(ca, "127.0.0.1", None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio_util::compat::TokioAsyncReadCompatExt as _;
        let stream = tokio::net::TcpStream::connect(admin).await.unwrap();
        let Ok(mut tls) = tls.connect(stream.compat()).await else {
            return false;
        };
        let request =
            format!("GET /healthz HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tls.read_to_end(&mut answer).await;
        answer.starts_with(b"HTTP/1.1 200")
    })
}

#[test]
fn sighup_puts_a_rotated_admin_certificate_in_force() {
    let (old, new) = (
        cli_support::test_pki("admin-pki-old"),
        cli_support::test_pki("admin-pki-new"),
    );
    // The files the Control Plane reads, first the old PKI's.
    let live = cli_support::temp_path("admin-live");
    std::fs::create_dir_all(&live).unwrap();
    let install = |from: &std::path::Path| {
        for f in ["server.pem", "server.key"] {
            std::fs::copy(from.join(f), live.join(f)).unwrap();
        }
    };
    install(&old);
    let (cert, key) = (live.join("server.pem"), live.join("server.key"));
    let (cp, log) = control_plane_logged(&[
        "--admin-tls-cert",
        cert.to_str().unwrap(),
        "--admin-tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(healthz_over_tls(cp.admin, &old.join("ca.pem")));
    assert!(!healthz_over_tls(cp.admin, &new.join("ca.pem")));

    install(&new);
    hup(&cp);
    wait_until("the admin certificate reloaded", || {
        log_has(&log, "admin TLS certificate reloaded").then_some(())
    });
    assert!(healthz_over_tls(cp.admin, &new.join("ca.pem")));
    assert!(!healthz_over_tls(cp.admin, &old.join("ca.pem")));
    for dir in [old, new, live] {
        let _ = std::fs::remove_dir_all(dir);
    }
}
