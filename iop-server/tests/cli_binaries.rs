//! The binaries as an operator meets them: `--help` explains every flag, bad flags and
//! bad files give exit code 2 and a clear message, the demo runs to the end.

mod cli_support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use cli_support::{CP_BIN, DEMO_BIN, EDGE_BIN, temp_file};

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run binary")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_explains_every_flag() {
    for (bin, flags) in [
        (
            CP_BIN,
            &[
                "--listen",
                "--admin",
                "--enroll",
                "--duplicate-policy",
                "--heartbeat-interval-ms",
                "--hello-timeout-ms",
                "--status-timeout-ms",
                "--log-level",
                "--tls-cert",
                "--tls-key",
                "--tls-client-ca",
                "--require-client-identity",
                "SIGHUP",
                "hash-credential",
                "gen-test-certs",
                "--proxy-protocol-from",
                "--cluster-batch-min",
            ][..],
        ),
        (
            EDGE_BIN,
            &[
                "--control-plane",
                "--edge-id",
                "--config",
                "--credential-file",
                "--simulate",
                "--seed",
                "--log-level",
                "--tls-ca",
                "--tls-server-name",
                "--tls-cert",
                "--tls-key",
            ][..],
        ),
        (DEMO_BIN, &["--seed", "--log-level"][..]),
    ] {
        let out = run(bin, &["--help"]);
        assert!(out.status.success(), "{bin} --help failed");
        let help = text(&out.stdout);
        for flag in flags {
            assert!(
                help.contains(flag),
                "{bin} --help does not mention {flag}:\n{help}"
            );
        }
        assert!(help.contains("Exit codes") || bin == DEMO_BIN, "{help}");
    }
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    // Unknown flag, bad address, missing required flag.
    let out = run(
        CP_BIN,
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--bogus",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--bogus"));
    let out = run(CP_BIN, &["--listen", "nowhere", "--admin", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--listen"));
    let out = run(EDGE_BIN, &["--control-plane", "127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--edge-id"));
    let out = run(
        CP_BIN,
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--duplicate-policy",
            "maybe",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("replace"));

    // A bad enrolment file: file, line and field.
    let enroll = temp_file(
        "enroll.toml",
        "[[edges]]\nid = \"e1\"\ncredential_sha256 = \"xyz\"\n",
    );
    let out = run(
        CP_BIN,
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--enroll",
            enroll.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}:3: edges[0].credential_sha256",
            enroll.display()
        )),
        "{err}"
    );

    // A bad edge config: file, line and field.
    let config = temp_file(
        "edge.toml",
        "[[nodes]]\nid = \"n1\"\nlabels = { zone = \"a\" }\nproviders = 3\n",
    );
    let out = run(
        EDGE_BIN,
        &[
            "--control-plane",
            "127.0.0.1:1",
            "--edge-id",
            "e1",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.starts_with("iop-edge: error: "), "{err}");
    assert!(err.contains(&format!("{}:4:", config.display())), "{err}");

    // An empty or invalid edge id is refused before dialling.
    let good = temp_file("edge.toml", "");
    let out = run(
        EDGE_BIN,
        &[
            "--control-plane",
            "127.0.0.1:1",
            "--edge-id",
            "",
            "--config",
            good.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("edge_id"),
        "{}",
        text(&out.stderr)
    );

    // A missing credential file.
    let out = run(
        EDGE_BIN,
        &[
            "--control-plane",
            "127.0.0.1:1",
            "--edge-id",
            "e1",
            "--config",
            good.to_str().unwrap(),
            "--credential-file",
            "/nonexistent/secret",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent/secret"));

    // A trusted-proxy range that is not one.
    let out = run(
        CP_BIN,
        &[
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--proxy-protocol-from",
            "10.0.0.0/33",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("10.0.0.0/33"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn runtime_errors_exit_1() {
    // The admin port is taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(CP_BIN, &["--listen", "127.0.0.1:0", "--admin", &addr]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("admin listener"));
}

#[test]
fn hash_credential_matches_the_enrolment_hash() {
    let mut child = Command::new(CP_BIN)
        .arg("hash-credential")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"edge-1-secret-5b0c9e2a\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let hash = text(&out.stdout);
    assert_eq!(
        hash.trim(),
        iop_server::credential_hash_hex(b"edge-1-secret-5b0c9e2a")
    );
    // The same hash as the shipped example enrolment file lists for edge-1.
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/enroll.toml"
    ))
    .unwrap();
    assert!(example.contains(hash.trim()));
}

#[test]
fn demo_runs_every_section_and_exits_0() {
    let started = std::time::Instant::now();
    let out = run(DEMO_BIN, &[]);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {}\n{stdout}",
        text(&out.stderr)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    for section in iop_server::demo::SECTIONS {
        assert!(
            stdout.contains(&format!("== {section}")),
            "missing {section}:\n{stdout}"
        );
    }
    for needle in [
        "EMPTY_EDGE_ID",
        "UNKNOWN_EDGE",
        "BAD_CREDENTIAL",
        "SUCCEEDED",
        "NO_MATCHING_TARGET",
        "NODE_DISCONNECTED",
        "DISCONNECTED  false",
        "node addresses or tokens in any status  none",
    ] {
        assert!(
            stdout.contains(needle),
            "demo output lacks {needle:?}:\n{stdout}"
        );
    }
    assert!(!stdout.contains("tok-SECRET"), "{stdout}");
}

#[test]
fn the_control_plane_never_warns_about_its_own_connection_default() {
    let limit = iop_server::startup::open_files_limit();
    let (cp, log) = cli_support::control_plane_logged(&[]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("open-files limit"), "{text}");
    drop(cp);
    // A value given past the limit is warned about.
    let Some(limit) = limit else { return };
    let too_many = (limit + 1).to_string();
    let (_cp, log) = cli_support::control_plane_logged(&["--max-connections", &too_many]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("open-files limit"), "{text}");
}
