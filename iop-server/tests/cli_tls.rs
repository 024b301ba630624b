//! The binaries with TLS: `gen-test-certs`, a mutual-TLS Control Plane with an
//! enrolment file re-read on SIGHUP (Unix): a removed Edge is disconnected with
//! GoAway{CREDENTIAL_REVOKED}, the others keep their session, and a broken file keeps
//! the previous allow list.
#![cfg(unix)]

mod cli_support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use cli_support::{
    CP_BIN, control_plane_logged, edge, get, hup, log_has, secret_file, temp_file, temp_path,
    wait_until,
};

fn hash(secret: &str) -> String {
    iop_server::credential_hash_hex(secret.as_bytes())
}

fn enrol_text(edges: &[(&str, &str)]) -> String {
    edges
        .iter()
        .map(|(id, secret)| {
            format!(
                "[[edges]]\nid = \"{id}\"\ncredential_sha256 = \"{}\"\n",
                hash(secret)
            )
        })
        .collect()
}

fn session_of(admin: SocketAddr, edge_id: &str) -> Option<String> {
    let a = get(admin, &format!("/v1/edges/{edge_id}"));
    (a.status == 200 && a.json()["connected"] == true).then(|| {
        a.json()["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    })
}

fn gen_certs(dir: &Path) {
    let out = Command::new(CP_BIN)
        .arg("gen-test-certs")
        .arg(dir)
        .args(["--edge-id", "edge-1", "--edge-id", "edge-2"])
        .output()
        .expect("run gen-test-certs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "ca.pem",
        "server.pem",
        "server.key",
        "edge-1.pem",
        "edge-1.key",
        "edge-2.key",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(dir.join("server.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "key files are private");
}

#[test]
fn mutual_tls_control_plane_reloads_its_enrolment_file_on_sighup() {
    let dir = temp_path("pki");
    gen_certs(&dir);
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let enroll = temp_file(
        "enroll.toml",
        &enrol_text(&[
            ("edge-1", "one-secret-0123456789"),
            ("edge-2", "two-secret-0123456789"),
        ]),
    );
    let (cp, cp_log) = control_plane_logged(&[
        "--enroll",
        enroll.to_str().unwrap(),
        "--tls-cert",
        &p("server.pem"),
        "--tls-key",
        &p("server.key"),
        "--tls-client-ca",
        &p("ca.pem"),
        "--require-client-identity",
    ]);
    let config = temp_file("edge.toml", "");
    let start = |id: &str, secret: &str| {
        let cred = secret_file(&format!("{id}.secret"), &format!("{secret}\n"));
        edge(
            cp.edges,
            id,
            &config,
            &[
                "--credential-file",
                cred.to_str().unwrap(),
                "--tls-ca",
                &p("ca.pem"),
                "--tls-cert",
                &p(&format!("{id}.pem")),
                "--tls-key",
                &p(&format!("{id}.key")),
            ],
        )
    };
    let (_e1, _) = start("edge-1", "one-secret-0123456789");
    let (_e2, e2_log) = start("edge-2", "two-secret-0123456789");
    let s1 = wait_until("edge-1 session", || session_of(cp.admin, "edge-1"));
    wait_until("edge-2 session", || session_of(cp.admin, "edge-2"));

    // A broken file: logged, nothing changes.
    std::fs::write(&enroll, "[[edges]]\nid = \"edge-1\"\n").unwrap();
    hup(&cp);
    wait_until("reload error logged", || {
        log_has(&cp_log, "enrolment file reload failed").then_some(())
    });
    assert!(log_has(&cp_log, "missing field `credential_sha256`"));
    assert!(session_of(cp.admin, "edge-2").is_some());

    // edge-2 removed: revoked at once; edge-1 keeps the same session.
    std::fs::write(&enroll, enrol_text(&[("edge-1", "one-secret-0123456789")])).unwrap();
    hup(&cp);
    wait_until("edge-2 revoked", || {
        session_of(cp.admin, "edge-2").is_none().then_some(())
    });
    wait_until("edge-2 told", || {
        log_has(&e2_log, "CredentialRevoked").then_some(())
    });
    assert!(log_has(&cp_log, "enrolment file reloaded"));
    assert_eq!(session_of(cp.admin, "edge-1"), Some(s1.clone()));
    // And it stays out: its reconnections are refused UNKNOWN_EDGE.
    wait_until("edge-2 refused", || {
        log_has(&e2_log, "UnknownEdge").then_some(())
    });
    assert_eq!(session_of(cp.admin, "edge-1"), Some(s1.clone()));

    // A file an editor left empty lists nobody: refused, edge-1 stays.
    std::fs::write(&enroll, "").unwrap();
    hup(&cp);
    wait_until("the empty file refused", || {
        log_has(&cp_log, "lists no Edge").then_some(())
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(session_of(cp.admin, "edge-1"), Some(s1));
}

#[test]
fn tls_flags_are_checked_at_start() {
    let out = Command::new(CP_BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args([
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--tls-key",
            "/nonexistent/key.pem",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TLS: /nonexistent/") && err.contains("cannot read"),
        "{err}"
    );

    let out = Command::new(CP_BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(["--require-client-identity"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-client-ca"));
}

/// A rotated certificate is put in force by SIGHUP: new handshakes use it, sessions
/// already up keep theirs, and a key file that does not load leaves the certificate in
/// force as it was, with a log line saying why.
#[test]
fn sighup_puts_a_rotated_certificate_in_force_for_new_handshakes() {
    let (old_pki, new_pki) = (temp_path("pki-old"), temp_path("pki-new"));
    gen_certs(&old_pki);
    gen_certs(&new_pki);
    let live = temp_path("pki-live");
    std::fs::create_dir_all(&live).unwrap();
    let install = |from: &Path| {
        for f in ["server.pem", "server.key"] {
            std::fs::copy(from.join(f), live.join(f)).unwrap();
        }
    };
    install(&old_pki);
    let p = |dir: &Path, f: &str| dir.join(f).to_string_lossy().into_owned();
    let (cp, cp_log) = control_plane_logged(&[
        "--tls-cert",
        &p(&live, "server.pem"),
        "--tls-key",
        &p(&live, "server.key"),
    ]);
    let config = temp_file("edge.toml", "");
    let start = |id: &str, ca: &Path| edge(cp.edges, id, &config, &["--tls-ca", &p(ca, "ca.pem")]);
    let (_first, _) = start("edge-1", &old_pki);
    let s1 = wait_until("edge-1 session", || session_of(cp.admin, "edge-1"));

    install(&new_pki);
    hup(&cp);
    wait_until("certificate reloaded", || {
        log_has(&cp_log, "TLS certificate reloaded").then_some(())
    });
    // New handshakes use the new certificate: an Edge that trusts only the new CA gets
    // in, one that trusts only the old one does not.
    let (_second, _) = start("edge-2", &new_pki);
    wait_until("edge-2 session", || session_of(cp.admin, "edge-2"));
    let (_third, third_log) = start("edge-3", &old_pki);
    wait_until("edge-3 refused", || {
        log_has(&third_log, "TLS handshake failed").then_some(())
    });
    assert!(session_of(cp.admin, "edge-3").is_none());
    // The session from before is untouched.
    assert_eq!(session_of(cp.admin, "edge-1"), Some(s1.clone()));

    // A key that does not load: logged, and the new certificate stays in force.
    std::fs::write(live.join("server.key"), "not a key").unwrap();
    hup(&cp);
    wait_until("reload failure logged", || {
        log_has(&cp_log, "TLS reload failed").then_some(())
    });
    let (_fourth, _) = start("edge-4", &new_pki);
    wait_until("edge-4 session", || session_of(cp.admin, "edge-4"));
    assert_eq!(session_of(cp.admin, "edge-1"), Some(s1));
}
