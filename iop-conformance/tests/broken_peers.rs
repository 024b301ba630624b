//! The tester fails a broken peer under the rule it breaks, and passes what the same
//! peer does right: a Control Plane that accepts any hello and ignores every error,
//! and an Edge that runs any operation, ignores `retry_after_ms` and leaks a secret
//! in its hello. Also the binary's `--list`, `--only`, `--json` and exit code.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iop_conformance::wire::{Listener, frame};
use iop_conformance::{Report, Verdict, control_plane, edge};
use iop_proto::{
    Body, CommandPhase, EdgeCommandEvent, EdgeCommandResponse, EdgeHelloRequest, EdgeHelloResponse,
    EdgeStatusResponse, Envelope, FrameDecoder, Heartbeat, HeartbeatAck,
};

/// Reads what `stream` has within `wait`: frames, and whether the peer closed. A
/// decode error stops decoding for good (the broken peers ignore it and stay open).
struct Reader {
    decoder: FrameDecoder,
    broken: bool,
}

impl Reader {
    fn new() -> Self {
        Self {
            decoder: FrameDecoder::new(4 * 1024 * 1024),
            broken: false,
        }
    }

    fn read(&mut self, stream: &mut TcpStream, wait: Duration) -> Option<Vec<Envelope>> {
        stream.set_read_timeout(Some(wait)).ok()?;
        let mut buf = [0u8; 8192];
        match stream.read(&mut buf) {
            Ok(0) => None,
            Ok(n) => {
                let mut frames = Vec::new();
                let mut input = &buf[..n];
                while !self.broken {
                    match self.decoder.decode(&mut input) {
                        Ok(Some(env)) => frames.push(env),
                        Ok(None) => break,
                        Err(_) => self.broken = true,
                    }
                }
                Some(frames)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Some(Vec::new())
            }
            Err(_) => None,
        }
    }
}

fn send(stream: &mut TcpStream, env: impl Into<Envelope>) {
    let _ = stream.write_all(&frame(&env.into()));
}

/// A Control Plane that accepts every hello and acks heartbeats, and otherwise never
/// checks anything nor closes a connection.
fn broken_control_plane(stop: Arc<AtomicBool>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((mut stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let _ = stream.set_nonblocking(false);
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut reader = Reader::new();
                let mut session = 0;
                while !stop.load(Ordering::Relaxed) {
                    let Some(frames) = reader.read(&mut stream, Duration::from_millis(50)) else {
                        return;
                    };
                    for env in frames {
                        match env.body {
                            Some(Body::HelloRequest(_)) => {
                                session += 1;
                                let r = EdgeHelloResponse {
                                    accepted: true,
                                    protocol_version: 1,
                                    heartbeat_interval_ms: 1_000,
                                    session_id: session,
                                    ..Default::default()
                                };
                                send(&mut stream, r);
                            }
                            Some(Body::Heartbeat(hb)) => {
                                send(
                                    &mut stream,
                                    HeartbeatAck {
                                        sequence: hb.sequence,
                                    },
                                );
                            }
                            _ => {}
                        }
                    }
                }
            });
        }
    });
    addr
}

/// An Edge that dials `addr` again at once whenever a session ends (it ignores
/// `retry_after_ms`), accepts every command whatever its operation, and puts a
/// secret in its hello's metadata.
fn broken_edge(addr: SocketAddr, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        for _ in 0..200 {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let Ok(mut stream) = TcpStream::connect(addr) else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let hello = EdgeHelloRequest {
                edge_id: "broken-edge".into(),
                protocol_version: 1,
                operations: vec!["edge.ping".into()],
                metadata: [("token".to_owned(), "secret-token-123".to_owned())]
                    .into_iter()
                    .collect(),
                ..Default::default()
            };
            send(&mut stream, hello);
            let mut reader = Reader::new();
            let mut next_beat: Option<Instant> = None;
            let mut sequence = 0;
            while let Some(frames) = reader.read(&mut stream, Duration::from_millis(50)) {
                for env in frames {
                    match env.body {
                        Some(Body::HelloResponse(r)) if r.accepted => {
                            next_beat = Some(Instant::now())
                        }
                        Some(Body::StatusRequest(_)) => {
                            let r = EdgeStatusResponse {
                                edge_id: "broken-edge".into(),
                                ..Default::default()
                            };
                            send(&mut stream, Envelope::correlated(env.correlation_id, r));
                        }
                        Some(Body::CommandRequest(c)) => {
                            let id = c.command_id;
                            send(
                                &mut stream,
                                EdgeCommandResponse {
                                    command_id: id.clone(),
                                    accepted: true,
                                    ..Default::default()
                                },
                            );
                            for (sequence, phase) in
                                [(1, CommandPhase::Accepted), (2, CommandPhase::Succeeded)]
                            {
                                send(
                                    &mut stream,
                                    EdgeCommandEvent {
                                        command_id: id.clone(),
                                        phase: phase as i32,
                                        sequence,
                                        ..Default::default()
                                    },
                                );
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(at) = next_beat
                    && Instant::now() >= at
                {
                    sequence += 1;
                    send(
                        &mut stream,
                        Heartbeat {
                            sequence,
                            sent_at_unix_ms: 0,
                        },
                    );
                    next_beat = Some(at + Duration::from_secs(1));
                }
            }
        }
    });
}

fn verdicts(report: &Report) -> Vec<(&'static str, Verdict)> {
    report
        .results
        .iter()
        .map(|r| (r.case.id, r.verdict))
        .collect()
}

#[test]
fn a_control_plane_that_checks_nothing_fails_under_each_rule_it_breaks() {
    let stop = Arc::new(AtomicBool::new(false));
    let addr = broken_control_plane(stop.clone());
    let mut opts = control_plane::CpOptions::new(addr);
    opts.only = [
        "cp.flow.hello",
        "cp.flow.heartbeat",
        "cp.hello.empty_id",
        "cp.hello.first",
        "cp.direction",
        "cp.frame.zero_length",
    ]
    .map(String::from)
    .to_vec();
    let report = control_plane::run(opts, |_| {});
    stop.store(true, Ordering::Relaxed);
    let lines: Vec<String> = report.results.iter().map(ToString::to_string).collect();
    assert_eq!(
        verdicts(&report),
        [
            ("cp.flow.hello", Verdict::Pass),
            ("cp.flow.heartbeat", Verdict::Pass),
            ("cp.hello.empty_id", Verdict::Fail),
            ("cp.hello.first", Verdict::Fail),
            ("cp.frame.zero_length", Verdict::Fail),
            ("cp.direction", Verdict::Fail),
        ],
        "{}",
        lines.join("\n")
    );
    let empty = report.result("cp.hello.empty_id").unwrap();
    assert!(empty.detail.contains("accepted"), "{}", empty.detail);
    let first = report.result("cp.hello.first").unwrap();
    assert!(first.detail.contains("still open"), "{}", first.detail);
}

#[test]
fn an_edge_that_runs_anything_and_redials_at_once_fails_under_those_rules() {
    let stop = Arc::new(AtomicBool::new(false));
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    broken_edge(listener.local_addr().unwrap(), stop.clone());
    let mut opts = edge::EdgeOptions::new(listener.local_addr().unwrap());
    opts.secrets = vec!["secret-token-123".into()];
    opts.dial_timeout = Duration::from_secs(10);
    opts.only = [
        "edge.flow.hello",
        "edge.flow.heartbeat",
        "edge.flow.command",
        "edge.command.operation",
        "edge.go_away",
        "edge.redaction",
    ]
    .map(String::from)
    .to_vec();
    let report = edge::run_on(listener, opts, &mut |_| {}).unwrap();
    stop.store(true, Ordering::Relaxed);
    let lines: Vec<String> = report.results.iter().map(ToString::to_string).collect();
    assert_eq!(
        verdicts(&report),
        [
            ("edge.flow.hello", Verdict::Pass),
            ("edge.flow.heartbeat", Verdict::Pass),
            ("edge.flow.command", Verdict::Pass),
            ("edge.command.operation", Verdict::Fail),
            ("edge.go_away", Verdict::Fail),
            ("edge.redaction", Verdict::Fail),
        ],
        "{}",
        lines.join("\n")
    );
    let op = report.result("edge.command.operation").unwrap();
    assert!(op.detail.contains("accepted (expected"), "{}", op.detail);
    let redial = report.result("edge.go_away").unwrap();
    assert!(
        redial.detail.starts_with("dialled again after"),
        "{}",
        redial.detail
    );
}

const BIN: &str = env!("CARGO_BIN_EXE_iop-conformance");

#[test]
fn the_binary_lists_its_cases_and_reports_a_failure_as_json_and_exit_code_1() {
    for (mode, cases) in [
        ("edge", edge::CASES),
        ("control-plane", control_plane::CASES),
    ] {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args([mode, "--list"]);
        if mode == "control-plane" {
            cmd.args(["--target", "127.0.0.1:9"]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        for c in cases {
            assert!(
                text.contains(c.id) && text.contains(&format!("§{}", c.section)),
                "{mode}: {}",
                c.id
            );
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let addr = broken_control_plane(stop.clone());
    let json = std::env::temp_dir().join(format!("iop-conformance-{}.json", std::process::id()));
    let out = std::process::Command::new(BIN)
        .args([
            "control-plane",
            "--target",
            &addr.to_string(),
            "--only",
            "cp.hello.empty_id,cp.flow.heartbeat",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("FAIL cp.hello.empty_id (§4.1)"), "{text}");
    assert!(text.contains("1 passed, 1 failed, 0 skipped"), "{text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(report["passed"], false);
    assert_eq!(report["counts"]["fail"], 1);
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    assert!(cases.iter().any(|c| c["id"] == "cp.hello.empty_id"
        && c["verdict"] == "FAIL"
        && c["section"] == "4.1"));
}
