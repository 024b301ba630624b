//! Instructions per session operation (Control Plane, and the Edge's side of a status
//! exchange), counted by valgrind's callgrind, with this library's own decode and
//! encode of the same messages counted alike and subtracted: what remains is the
//! session logic. And the frame codec against prost alone, in instructions.
//!
//! Run: `cargo bench -p iop-bench --bench instructions` (needs `valgrind` on the
//! PATH). Each scenario runs in a child process under callgrind; see
//! `iop_bench::callgrind` and `BENCHMARKS.md` for the method. Profiles are left in
//! `target/release/callgrind/<scenario>.out` for `callgrind_annotate`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use iop_bench::callgrind::{self, SCENARIO_VAR, measured};
use iop_bench::edge_session::EdgeSession;
use iop_bench::filter::Filter;
use iop_bench::fixtures::{EDGE_ID, NOW_UNIX_MS, registry, status_response_envelope};
use iop_bench::proto::{
    DEFAULT_MAX_FRAME_LEN, Envelope, FrameDecoder, HeartbeatAck, LENGTH_PREFIX_LEN, Message,
    encode_frame,
};
use iop_bench::session::{
    CpSession, codec_share, command_envelopes, frame, heartbeat_frame, ping_spec,
};
use iop_bench::table::{Row, Table, format_count};
use iop_core::NodeRegistry;
use iop_core::cp::CpEvent;
use iop_core::registry::STATUS_ENVELOPE_OVERHEAD;

/// Unmeasured iterations before the measured ones (allocator pools, first-use paths).
const WARM_UP: usize = 20;

/// Other Edges connected in the `-fleet` scenario.
const FLEET: u64 = 10_000;

/// Goal: instructions outside the codec per status exchange.
const STATUS_GOAL: u64 = 1_000;

/// One measured operation.
struct Scenario {
    name: &'static str,
    what: &'static str,
    /// Measured calls.
    calls: usize,
    goal: Option<u64>,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "heartbeat",
        what: "heartbeat: bytes in → ack out",
        calls: 200,
        goal: None,
    },
    Scenario {
        name: "status-0",
        what: "status exchange, Edge with 0 nodes",
        calls: 200,
        goal: Some(STATUS_GOAL),
    },
    Scenario {
        name: "status-0-fleet",
        what: "status exchange, Edge with 0 nodes, 10 000 other Edges connected",
        calls: 200,
        goal: Some(STATUS_GOAL),
    },
    Scenario {
        name: "status-1x4",
        what: "status exchange, 1 node × 4 providers",
        calls: 200,
        goal: Some(STATUS_GOAL),
    },
    Scenario {
        name: "status-1000x4",
        what: "status exchange, 1 000 nodes × 4 providers",
        calls: 5,
        goal: None,
    },
    Scenario {
        name: "edge-status-0",
        what: "Edge side of a status exchange, 0 nodes: request in, response out",
        calls: 200,
        goal: None,
    },
    Scenario {
        name: "edge-status-1000x4",
        what: "Edge side of a status exchange, 1 000 nodes × 4 providers",
        calls: 5,
        goal: None,
    },
    Scenario {
        name: "command",
        what: "command lifecycle: request out, response + 3 events in, 4 events out",
        calls: 200,
        goal: None,
    },
];

/// The frame codec against prost on the same bytes, in instructions (stable where
/// timings of a few nanoseconds are not).
const CODEC_SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "decode-request",
        what: "decode status request, all nodes (8 B frame)",
        calls: 1_000,
        goal: None,
    },
    Scenario {
        name: "encode-request",
        what: "encode status request, all nodes",
        calls: 1_000,
        goal: None,
    },
    Scenario {
        name: "decode-response",
        what: "decode status response 1 000 nodes × 4 providers",
        calls: 3,
        goal: None,
    },
    Scenario {
        name: "encode-response",
        what: "encode status response 1 000 nodes × 4 providers",
        calls: 3,
        goal: None,
    },
    Scenario {
        name: "encode-snapshot",
        what: "status response 1 000 nodes × 4 providers from the registry: `encode_snapshot` vs `snapshot()` + prost encode",
        calls: 3,
        goal: None,
    },
];

/// `encode_snapshot` may cost at most what building the message and encoding it does.
const SNAPSHOT_GOAL: f64 = 1.0;

/// Framing may add at most 2 %.
const FRAMING_GOAL: f64 = 1.02;

/// Decodes or encodes (`prost`: with prost alone) the codec scenario's envelope.
fn run_codec(name: &str, calls: usize, prost: bool) {
    if name == "encode-snapshot" {
        return run_snapshot(calls, prost);
    }
    let envelope = if name.ends_with("request") {
        iop_bench::fixtures::full_status_request(42)
    } else {
        status_response_envelope(&registry(1_000, 4), 42)
    };
    let wire = frame(&envelope);
    let body = &wire[LENGTH_PREFIX_LEN..];
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    let mut out = Vec::with_capacity(wire.len());
    for i in 0..WARM_UP + calls {
        let op = || {
            out.clear();
            match (name.starts_with("decode"), prost) {
                (true, true) => usize::from(Envelope::decode(body).is_ok()),
                (true, false) => {
                    let mut input = wire.as_slice();
                    let mut frames = 0;
                    while let Ok(Some(e)) = decoder.decode(&mut input) {
                        drop(e);
                        frames += 1;
                    }
                    frames
                }
                (false, true) => usize::from(envelope.encode(&mut out).is_ok()),
                (false, false) => {
                    encode_frame(&envelope, DEFAULT_MAX_FRAME_LEN, &mut out).unwrap_or(0)
                }
            }
        };
        let done = step(i, op);
        assert!(
            if name.starts_with("decode") {
                done == 1
            } else {
                done > 0
            },
            "{name}: the operation failed"
        );
    }
}

/// A 1 000-node status response encoded from the registry: straight into the buffer
/// (`encode_snapshot`), or (`prost`) built as a message, then encoded by prost.
fn run_snapshot(calls: usize, prost: bool) {
    let reg = registry(1_000, 4);
    let budget = DEFAULT_MAX_FRAME_LEN as usize - STATUS_ENVELOPE_OVERHEAD;
    let mut out = Vec::with_capacity(1 << 20);
    let none: &[&str] = &[];
    for i in 0..WARM_UP + calls {
        out.clear();
        step(i, || {
            if prost {
                let message = reg.snapshot(EDGE_ID, NOW_UNIX_MS, none, budget);
                let _ = message.encode(&mut out);
            } else {
                reg.encode_snapshot(EDGE_ID, NOW_UNIX_MS, none, budget, &mut out);
            }
        });
        assert!(out.len() > 400_000, "the snapshot holds every node");
    }
}

/// Runs `op` as a warm-up call (the first [`WARM_UP`]) or as a measured one.
fn step<R>(i: usize, op: impl FnOnce() -> R) -> R {
    if i < WARM_UP { op() } else { measured(op) }
}

/// A status scenario's session and response frames (correlation ids in order).
fn status_fixture(reg: &NodeRegistry, calls: usize, others: u64) -> (CpSession, Vec<Vec<u8>>) {
    let session = CpSession::enrolled_among(others);
    let first = session.next_correlation_id();
    let frames = (0..(WARM_UP + calls) as u64)
        .map(|i| frame(&status_response_envelope(reg, first + i)))
        .collect();
    (session, frames)
}

fn nodes_of(name: &str) -> usize {
    match name {
        "status-1x4" => 1,
        "status-1000x4" => 1_000,
        _ => 0,
    }
}

/// Which part of a scenario a child process runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// The whole operation.
    Whole,
    /// The codec alone decoding the inbound bodies and encoding the outbound
    /// envelopes: this library's (`session::codec_share`), or prost's for the codec
    /// scenarios, whose baseline it is.
    Codec,
}

/// Runs one scenario (in the child process).
fn run(name: &str, calls: usize, part: Part) {
    let codec = part == Part::Codec;
    let share = codec_share;
    let total = WARM_UP + calls;
    let mut out = Vec::with_capacity(1 << 20);
    match name {
        "empty" => {
            for _ in 0..calls {
                measured(|| ());
            }
        }
        "heartbeat" => {
            let frames: Vec<Vec<u8>> = (0..total as u64).map(|i| heartbeat_frame(2 + i)).collect();
            let acks: Vec<Envelope> = (0..total as u64)
                .map(|i| Envelope::new(HeartbeatAck { sequence: 2 + i }))
                .collect();
            let mut s = CpSession::enrolled();
            for (i, f) in frames.iter().enumerate() {
                let body = &f[LENGTH_PREFIX_LEN..];
                let op = || {
                    if codec {
                        share(&[body], std::slice::from_ref(&acks[i]), &mut out)
                    } else {
                        s.heartbeat(f)
                    }
                };
                let done = step(i, op);
                assert!(done > 0, "heartbeat: no ack");
            }
        }
        "status-0" | "status-0-fleet" | "status-1x4" | "status-1000x4" => {
            let reg = registry(nodes_of(name), 4);
            let others = if name.ends_with("fleet") { FLEET } else { 0 };
            let (mut s, frames) = status_fixture(&reg, calls, others);
            let first = s.next_correlation_id();
            let requests: Vec<Envelope> = (0..total as u64)
                .map(|i| iop_bench::fixtures::full_status_request(first + i))
                .collect();
            for (i, f) in frames.iter().enumerate() {
                let body = &f[LENGTH_PREFIX_LEN..];
                let op = || {
                    if codec {
                        share(&[body], std::slice::from_ref(&requests[i]), &mut out)
                    } else {
                        // The event is dropped inside the measured call.
                        usize::from(matches!(
                            s.status_exchange(f),
                            Some(CpEvent::StatusReceived { .. })
                        ))
                    }
                };
                let done = step(i, op);
                assert!(done > 0, "{name}: no StatusReceived");
            }
        }
        "edge-status-0" | "edge-status-1000x4" => {
            let nodes = if name.ends_with("1000x4") { 1_000 } else { 0 };
            let reg = registry(nodes, 4);
            // Correlation ids from 2 (1 is the CP's resync request).
            let frames: Vec<Vec<u8>> = (0..total as u64)
                .map(|i| frame(&iop_bench::fixtures::full_status_request(2 + i)))
                .collect();
            if codec {
                // The Edge writes its answer straight from the registry; its codec's
                // share is the encoder of the answer already built.
                let mut response = status_response_envelope(&reg, 0);
                for (i, f) in frames.iter().enumerate() {
                    let body = &f[LENGTH_PREFIX_LEN..];
                    response.correlation_id = 2 + i as u64;
                    let op = || share(&[body], std::slice::from_ref(&response), &mut out);
                    let done = step(i, op);
                    assert!(done > 0, "{name}: nothing encoded");
                }
            } else {
                let mut s = EdgeSession::enrolled(reg);
                for (i, f) in frames.iter().enumerate() {
                    let done = step(i, || s.status_exchange(f));
                    assert!(done > 0, "{name}: no response sent");
                }
            }
        }
        "command" => {
            let ids: Vec<String> = (0..total).map(|i| format!("cmd-0190a3b4-{i:06}")).collect();
            let envelopes: Vec<Vec<Envelope>> =
                ids.iter().map(|id| command_envelopes(id)).collect();
            let frames: Vec<Vec<Vec<u8>>> = envelopes
                .iter()
                .map(|es| es.iter().map(frame).collect())
                .collect();
            let specs: Vec<_> = (0..total).map(|_| ping_spec()).collect();
            let mut s = CpSession::enrolled();
            for (i, ((id, spec), fs)) in ids.into_iter().zip(specs).zip(&frames).enumerate() {
                let request = Envelope::new(iop_bench::proto::EdgeCommandRequest {
                    command_id: id.clone(),
                    operation: spec.operation.clone(),
                    target_selector: spec.target_selector.clone(),
                    metadata: spec.metadata.clone(),
                    timeout_ms: spec.timeout_ms,
                });
                let bodies: Vec<&[u8]> = fs.iter().map(|f| &f[LENGTH_PREFIX_LEN..]).collect();
                let op = || {
                    if codec {
                        share(&bodies, std::slice::from_ref(&request), &mut out)
                    } else {
                        s.command_lifecycle(spec, id, fs)
                    }
                };
                let done = step(i, op);
                assert!(
                    if codec { done > 0 } else { done == 4 },
                    "command: {done} events"
                );
            }
        }
        c if CODEC_SCENARIOS.iter().any(|sc| sc.name == c) => run_codec(c, calls, codec),
        other => eprintln!("unknown scenario {other}"),
    }
}

fn out_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/release/deps/instructions-<hash> → target/release/callgrind
    exe.parent()
        .and_then(|deps| deps.parent())
        .map_or_else(std::env::temp_dir, |p| p.to_path_buf())
        .join("callgrind")
}

fn main() -> ExitCode {
    if let Ok(spec) = std::env::var(SCENARIO_VAR) {
        // Child: "<name>:<calls>[:codec]".
        let mut parts = spec.split(':');
        let name = parts.next().unwrap_or_default();
        let calls = parts.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        let part = match parts.next() {
            Some("codec") => Part::Codec,
            _ => Part::Whole,
        };
        run(name, calls, part);
        return ExitCode::SUCCESS;
    }

    let filter = Filter::from_args();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("cannot find this executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = out_dir();
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let count = |spec: &str, file: &str| {
        let path = dir.join(format!("{file}.out"));
        callgrind::count(&exe, spec, &path).map(|n| (n, path))
    };
    let empty_calls = 1_000;
    let overhead = match count(&format!("empty:{empty_calls}"), "empty") {
        Ok((n, _)) => n / empty_calls as u64,
        Err(e) => {
            eprintln!("callgrind failed ({e}); is valgrind installed? (apt-get install valgrind)");
            return ExitCode::FAILURE;
        }
    };

    let mut logic = Table::new(
        "Instructions per session operation outside the codec (callgrind)",
        "outside the codec",
        "codec's share",
    );
    // A scenario counted whole and as its second part (`codec`): per call, each.
    let pair = |name: &str, calls: usize, second: &str| {
        let per_call = |n: u64| (n / calls as u64).saturating_sub(overhead);
        let whole = count(&format!("{name}:{calls}"), name)?;
        let part = count(
            &format!("{name}:{calls}:codec"),
            &format!("{name}.{second}"),
        )?;
        eprintln!("{name}: profile in {}", whole.1.display());
        Ok::<_, std::io::Error>((per_call(whole.0), per_call(part.0)))
    };
    for sc in SCENARIOS.iter().filter(|s| filter.wants(s.name)) {
        let (total, share) = match pair(sc.name, sc.calls, "codec") {
            Ok(counts) => counts,
            Err(e) => {
                eprintln!("scenario {}: {e}", sc.name);
                return ExitCode::FAILURE;
            }
        };
        // Negative for the Edge's large status: it encodes its answer straight from
        // the registry, for less than encoding the built message costs.
        let outside = total as i64 - share as i64;
        logic.push(Row::new(
            format!("{} (total {})", sc.what, format_count(total)),
            if outside < 0 {
                format!("−{}", format_count(outside.unsigned_abs()))
            } else {
                format_count(outside.unsigned_abs())
            },
            format_count(share),
            format!("{:.2}", outside as f64 / share.max(1) as f64),
            sc.goal.map_or_else(
                || "—".to_owned(),
                |g| format!("≤ {} outside the codec", format_count(g)),
            ),
            sc.goal.map(|g| outside <= g as i64),
        ));
    }
    let mut codec = Table::new(
        "Frame codec and status encoder vs plain prost, in instructions (callgrind)",
        "ours",
        "prost",
    );
    for sc in CODEC_SCENARIOS.iter().filter(|s| filter.wants(s.name)) {
        let (ours, prost) = match pair(sc.name, sc.calls, "prost") {
            Ok(counts) => counts,
            Err(e) => {
                eprintln!("scenario {}: {e}", sc.name);
                return ExitCode::FAILURE;
            }
        };
        let ratio = ours as f64 / prost.max(1) as f64;
        let goal = if sc.name == "encode-snapshot" {
            SNAPSHOT_GOAL
        } else {
            FRAMING_GOAL
        };
        codec.push(Row::new(
            sc.what,
            format_count(ours),
            format_count(prost),
            format!("{ratio:.3}"),
            format!("≤ {goal:.2}"),
            Some(ratio <= goal),
        ));
    }
    println!("{logic}");
    println!("{codec}");
    println!(
        "Per call, averaged over the measured calls after {WARM_UP} warm-up calls; the \
         cost of an empty measured call ({overhead} instructions) is subtracted. \
         The codec's share: decoding (and dropping) each inbound body and encoding each \
         outbound envelope with this library's codec alone (the single-pass decoder \
         with the PROTOCOL.md §7 limits, and the frame encoder)."
    );
    ExitCode::SUCCESS
}
