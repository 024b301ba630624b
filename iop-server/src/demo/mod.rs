//! `iop-demo`: one process, a Control Plane and three Edges with simulated nodes on
//! loopback, walked through enrolment, status, a command, a node disconnect and its
//! reconnect, printed as plain-text tables.

pub mod cluster;
mod nodes;
mod probe;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use iop_core::NodeRegistry;
use iop_core::cp::{AllowList, CommandSpec, CpEvent, Credential, Reachability};
use iop_core::edge::Secret;
use iop_core::proto::{CommandPhase, EdgeStatusResponse, NodeEventKind, NodeState};

use super::exit::Failure;
use super::simulate::{self, SimRates, Simulator};
use super::table::Table;
use super::{edge_ops, unix_ms};
use iop_tokio::{
    CommandUpdate, ControlPlaneHandle, ControlPlaneServer, EdgeClient, EdgeConfig, EdgeHandle,
    EnrolmentPolicy, Notice, ServerConfig,
};

/// Section titles, in order (tests look for them).
pub const SECTIONS: [&str; 8] = [
    "1. Enrolment",
    "2. Edges",
    "3. Status",
    "4. Commands",
    "5. Node disconnect",
    "6. Node reconnect",
    "7. Lifecycle events seen by the control plane",
    "8. Summary",
];

/// How long any one wait of the demo may take before it fails.
const WAIT: Duration = Duration::from_secs(5);

struct DemoEdge {
    id: &'static str,
    handle: EdgeHandle,
    sim: Arc<Mutex<Simulator>>,
    task: tokio::task::JoinHandle<()>,
}

fn io(e: std::io::Error) -> Failure {
    Failure::Runtime(format!("writing output: {e}"))
}

fn section(out: &mut dyn Write, title: &str) -> Result<(), Failure> {
    writeln!(out, "\n== {title}\n").map_err(io)
}

async fn wait_for(mut cond: impl FnMut() -> bool, what: &str) -> Result<(), Failure> {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        if Instant::now() > deadline {
            return Err(Failure::Runtime(format!("timed out waiting for {what}")));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

fn short(name: &str, prefix: &str) -> String {
    name.strip_prefix(prefix).unwrap_or(name).to_owned()
}

/// One row per provider (or one per node without providers).
fn status_rows(table: &mut Table, status: &EdgeStatusResponse) {
    for node in &status.nodes {
        let state = NodeState::try_from(node.state)
            .map(|s| short(s.as_str_name(), "NODE_STATE_"))
            .unwrap_or_default();
        let mut first = true;
        for p in &node.provider_snapshots {
            let (edge, node_id, state_cell, connected) = if first {
                (
                    status.edge_id.clone(),
                    node.node_id.clone(),
                    state.clone(),
                    node.connected.to_string(),
                )
            } else {
                Default::default()
            };
            first = false;
            table.row([
                edge,
                node_id,
                state_cell,
                connected,
                p.provider_id.clone(),
                format!("{}/{}", p.capacity, p.long_context_capacity),
                format!("{}/{}", p.in_flight, p.long_context_in_flight),
                p.queued.to_string(),
                if p.admission_eligible { "yes" } else { "no" }.to_owned(),
            ]);
        }
    }
}

fn status_table() -> Table {
    Table::new([
        "edge",
        "node",
        "state",
        "connected",
        "provider",
        "capacity/long",
        "in-flight/long",
        "queued",
        "eligible",
    ])
}

/// Runs the whole walkthrough, writing to `out`.
pub async fn run(out: &mut dyn Write, seed: u64) -> Result<(), Failure> {
    let started = Instant::now();
    writeln!(
        out,
        "iop demo: a control plane and three edges with simulated nodes on 127.0.0.1"
    )
    .map_err(io)?;

    // The control plane, allowing the three demo Edges.
    let mut allow = AllowList::new();
    for e in &nodes::EDGES {
        allow.insert(e.edge_id, &Credential::new(e.credential));
    }
    let mut config = ServerConfig::new(EnrolmentPolicy::AllowList(allow));
    config.cp.heartbeat_interval = Duration::from_secs(1);
    config.shutdown_grace = Duration::from_secs(1);
    let server = ControlPlaneServer::bind(([127, 0, 0, 1], 0).into(), config)
        .await
        .map_err(|e| Failure::Runtime(format!("control plane: {e}")))?;
    let cp = server.handle();
    let seen: Arc<Mutex<Vec<CpEvent>>> = Arc::default();
    let collector = {
        let mut events = cp.subscribe();
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Some(notice) = events.next().await {
                if let (Notice::Event(e), Ok(mut seen)) = (notice, seen.lock()) {
                    seen.push(e);
                }
            }
        })
    };
    writeln!(out, "control plane listening on {}", server.local_addr()).map_err(io)?;

    // 1. Enrolment.
    section(out, SECTIONS[0])?;
    let mut table = Table::new(["edge id", "credential", "answer", "reason / session"]);
    let addr = server.local_addr();
    for (edge_id, credential, label) in [
        ("", "", "none"),
        ("edge-z", "anything", "any"),
        ("edge-a", "wrong-secret", "wrong"),
    ] {
        let answer = probe::hello(addr, edge_id, credential.as_bytes())
            .await
            .map_err(Failure::Runtime)?;
        let shown = if edge_id.is_empty() {
            "(empty)"
        } else {
            edge_id
        };
        let verdict = if answer.accepted {
            "accepted"
        } else {
            "rejected"
        };
        table.row([shown, label, verdict, &probe::reason_name(&answer)]);
    }
    let mut edges = Vec::new();
    for e in &nodes::EDGES {
        edges.push(start_edge(&cp, addr, e, seed).await?);
        let view = cp.edge(e.edge_id);
        let session = view.map(|v| v.session_id.to_string()).unwrap_or_default();
        table.row([
            e.edge_id,
            "right",
            "accepted",
            &format!("session {session}"),
        ]);
    }
    write!(out, "{table}").map_err(io)?;

    // Let the simulated nodes take leases and queue requests for a moment.
    tokio::time::sleep(Duration::from_millis(400)).await;

    // 2. Edges.
    section(out, SECTIONS[1])?;
    let mut table = Table::new(["edge", "reachability", "session", "software", "operations"]);
    for v in cp.edges() {
        let reach = match v.reachability {
            Reachability::Connected => "connected",
            Reachability::Unreachable => "unreachable",
            _ => "disconnected",
        };
        table.row([
            v.edge_id.clone(),
            reach.to_owned(),
            v.session_id.to_string(),
            v.software_version.clone(),
            v.operations.join(","),
        ]);
    }
    write!(out, "{table}").map_err(io)?;

    // 3. Status.
    section(out, SECTIONS[2])?;
    let mut table = status_table();
    let mut latencies = Vec::new();
    let mut all_status = Vec::new();
    for e in &edges {
        let t = Instant::now();
        let status = status_of(&cp, e.id, Vec::new()).await?;
        latencies.push((e.id, t.elapsed()));
        status_rows(&mut table, &status);
        all_status.push(status);
    }
    write!(out, "{table}").map_err(io)?;
    let rtts: Vec<String> = latencies
        .iter()
        .map(|(id, d)| format!("{id} {:.2} ms", d.as_secs_f64() * 1e3))
        .collect();
    writeln!(out, "\nstatus round trips: {}", rtts.join(", ")).map_err(io)?;

    // 4. Commands.
    section(out, SECTIONS[3])?;
    let mut table = Table::new(["edge", "operation", "target", "seq", "phase", "message"]);
    for (edge_id, op, target) in [
        ("edge-a", edge_ops::EDGE_PING, ""),
        ("edge-a", edge_ops::NODE_DRAIN, "node:a-gpu-1"),
        ("edge-a", edge_ops::NODE_RESUME, "node:a-gpu-1"),
        ("edge-c", edge_ops::NODE_DRAIN, "label:zone=nowhere"),
    ] {
        command_rows(&cp, &mut table, edge_id, op, target).await?;
    }
    write!(out, "{table}").map_err(io)?;

    // 5. Node disconnect: b-gpu-1's connection drops.
    section(out, SECTIONS[4])?;
    let b = edges
        .iter()
        .find(|e| e.id == "edge-b")
        .ok_or_else(|| Failure::Runtime("edge-b missing".into()))?;
    b.handle.with_registry(|reg, _now| {
        if let Ok(mut sim) = b.sim.lock() {
            sim.disconnect(reg, "b-gpu-1", "demo: connection dropped", unix_ms());
        }
    });
    wait_for(
        || node_event_seen(&seen, "b-gpu-1", NodeEventKind::NodeDisconnected),
        "NODE_DISCONNECTED of b-gpu-1",
    )
    .await?;
    writeln!(
        out,
        "b-gpu-1 dropped its connection; the control plane got NODE_DISCONNECTED.\n\
         It stays in the snapshot with connected=false and zeroed provider numbers:\n"
    )
    .map_err(io)?;
    let status = status_of(&cp, "edge-b", vec!["b-gpu-1".into()]).await?;
    let mut table = status_table();
    status_rows(&mut table, &status);
    write!(out, "{table}").map_err(io)?;
    all_status.push(status);

    // 6. Reconnect.
    section(out, SECTIONS[5])?;
    b.handle.with_registry(|reg, _now| {
        if let Ok(mut sim) = b.sim.lock() {
            sim.connect(reg, "b-gpu-1", unix_ms());
        }
    });
    wait_for(
        || node_event_ready_count(&seen, "b-gpu-1") >= 2,
        "NODE_READY of b-gpu-1 again",
    )
    .await?;
    writeln!(
        out,
        "b-gpu-1 connected again (new generation); capacity and eligibility are back:\n"
    )
    .map_err(io)?;
    let status = status_of(&cp, "edge-b", vec!["b-gpu-1".into()]).await?;
    let mut table = status_table();
    status_rows(&mut table, &status);
    write!(out, "{table}").map_err(io)?;
    all_status.push(status);

    // 7. Events.
    section(out, SECTIONS[6])?;
    let mut table = Table::new(["edge", "seq", "event", "node", "generation", "reason"]);
    let events: Vec<CpEvent> = seen.lock().map(|s| s.clone()).unwrap_or_default();
    for e in &events {
        match e {
            CpEvent::SessionAccepted {
                edge_id,
                session_id,
                ..
            } => {
                table.row([
                    edge_id.clone(),
                    String::new(),
                    "SESSION_ACCEPTED".into(),
                    String::new(),
                    String::new(),
                    format!("session {session_id}"),
                ]);
            }
            CpEvent::NodeEvent { event, .. } => {
                let kind = NodeEventKind::try_from(event.kind)
                    .map(|k| short(k.as_str_name(), "NODE_EVENT_KIND_"))
                    .unwrap_or_default();
                table.row([
                    event.edge_id.clone(),
                    event.sequence.to_string(),
                    kind,
                    event.node_id.clone(),
                    event.generation.to_string(),
                    event.reason.clone(),
                ]);
            }
            _ => {}
        }
    }
    write!(out, "{table}").map_err(io)?;

    // 8. Summary.
    section(out, SECTIONS[7])?;
    let leaked = all_status.iter().any(|s| {
        let text = format!("{s:?}");
        text.contains("tok-SECRET") || text.contains("10.77.0.1")
    });
    let stats = cp.stats();
    let mut table = Table::new(["metric", "value"]);
    table
        .row(["edges connected", &stats.live_sessions.to_string()])
        .row(["sessions accepted", &stats.sessions_accepted.to_string()])
        .row(["hellos rejected", &stats.hello_rejections.to_string()])
        .row([
            "frames received / sent",
            &format!("{} / {}", stats.frames_in, stats.frames_out),
        ])
        .row([
            "bytes received / sent",
            &format!("{} / {}", stats.bytes_in, stats.bytes_out),
        ])
        .row(["protocol errors", &stats.protocol_errors.to_string()])
        .row([
            "node addresses or tokens in any status",
            if leaked { "FOUND (bug)" } else { "none" },
        ]);
    write!(out, "{table}").map_err(io)?;

    for e in &edges {
        e.task.abort();
        e.handle.shutdown().await;
    }
    server.shutdown().await;
    collector.abort();
    writeln!(out, "\ndone in {:.1} s", started.elapsed().as_secs_f64()).map_err(io)?;
    if leaked {
        return Err(Failure::Runtime(
            "a private node field reached a status".into(),
        ));
    }
    Ok(())
}

fn node_event_seen(seen: &Mutex<Vec<CpEvent>>, node: &str, kind: NodeEventKind) -> bool {
    seen.lock().is_ok_and(|s| {
        s.iter().any(|e| {
            matches!(e, CpEvent::NodeEvent { event, .. }
                if event.node_id == node && event.kind == kind as i32)
        })
    })
}

fn node_event_ready_count(seen: &Mutex<Vec<CpEvent>>, node: &str) -> usize {
    seen.lock().map_or(0, |s| {
        s.iter()
            .filter(|e| {
                matches!(e, CpEvent::NodeEvent { event, .. }
                    if event.node_id == node && event.kind == NodeEventKind::NodeReady as i32)
            })
            .count()
    })
}

async fn status_of(
    cp: &ControlPlaneHandle,
    edge_id: &str,
    nodes: Vec<String>,
) -> Result<EdgeStatusResponse, Failure> {
    cp.request_status(edge_id, nodes)
        .await
        .map_err(|e| Failure::Runtime(format!("status of {edge_id}: {e}")))
}

async fn command_rows(
    cp: &ControlPlaneHandle,
    table: &mut Table,
    edge_id: &str,
    operation: &str,
    target: &str,
) -> Result<(), Failure> {
    let spec = CommandSpec::new(operation).with_target(target);
    let mut tracker = cp
        .send_command(edge_id, spec)
        .map_err(|e| Failure::Runtime(format!("{operation} on {edge_id}: {e}")))?;
    let mut first = true;
    let mut cells = |seq: String, phase: String, message: String| {
        let lead = if first {
            [edge_id.to_owned(), operation.to_owned(), target.to_owned()]
        } else {
            Default::default()
        };
        first = false;
        let [a, b, c] = lead;
        table.row([
            a,
            b,
            if c.is_empty() && seq.is_empty() {
                String::new()
            } else {
                c
            },
            seq,
            phase,
            message,
        ]);
    };
    let follow = async {
        while let Some(update) = tracker.next().await {
            match update {
                CommandUpdate::Response(r) if !r.accepted => {
                    let reason = short(r.reject_reason().as_str_name(), "COMMAND_REJECT_REASON_");
                    cells(String::new(), format!("REJECTED {reason}"), r.message);
                    return;
                }
                CommandUpdate::Response(_) => {}
                CommandUpdate::Event(e) => {
                    let phase = CommandPhase::try_from(e.phase)
                        .map(|p| short(p.as_str_name(), "COMMAND_PHASE_"))
                        .unwrap_or_default();
                    cells(e.sequence.to_string(), phase, e.message);
                }
                CommandUpdate::Ended(ending) => {
                    cells(
                        String::new(),
                        ending.kind().name().into(),
                        ending.to_string(),
                    );
                    return;
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(WAIT, follow)
        .await
        .map_err(|_| Failure::Runtime(format!("{operation} on {edge_id} did not finish")))
}

async fn start_edge(
    cp: &ControlPlaneHandle,
    addr: std::net::SocketAddr,
    e: &nodes::DemoEdge,
    seed: u64,
) -> Result<DemoEdge, Failure> {
    let mut registry = NodeRegistry::new();
    for node in nodes::nodes(e.prefix) {
        let _added = registry
            .configure(node, unix_ms())
            .map_err(|err| Failure::Runtime(format!("{}: {err}", e.edge_id)))?;
    }
    let mut config = EdgeConfig::new(e.edge_id, iop_tokio::process_seed());
    config.credential = Secret::new(e.credential.as_bytes().to_vec());
    config.software_version = format!("iop-demo {}", env!("CARGO_PKG_VERSION"));
    let client = EdgeClient::new(config)
        .with_node_registry(registry)
        .with_shutdown_grace(Duration::from_secs(1));
    let handle = edge_ops::register(client, None)
        .connect(addr)
        .map_err(|err| Failure::Runtime(format!("{}: {err}", e.edge_id)))?;
    let id = e.edge_id;
    // Both sides must know the session is up: the Edge replays no transition from
    // before its session (PROTOCOL.md §4.5: each session's events start with EDGE_READY), and it
    // learns of the session one hop after the control plane accepts it.
    wait_for(
        || {
            handle.is_connected()
                && cp
                    .edge(id)
                    .is_some_and(|v| v.reachability == Reachability::Connected)
        },
        "the edge's session",
    )
    .await?;
    // Nodes connect once the session is up, so the control plane sees them become ready.
    let rates = SimRates {
        disconnect: 0,
        ..SimRates::default()
    };
    let sim = Arc::new(Mutex::new(Simulator::new(
        seed ^ u64::from(e.prefix.as_bytes()[0]),
        rates,
    )));
    handle.with_registry(|reg, _now| {
        if let Ok(mut sim) = sim.lock() {
            let ids: Vec<String> = reg.node_ids().map(str::to_owned).collect();
            for node in ids {
                sim.connect(reg, &node, unix_ms());
            }
            // b-gpu-1 is steered by hand in the disconnect section.
            sim.hold("b-gpu-1");
        }
    });
    let task = simulate::spawn(handle.clone(), sim.clone(), Duration::from_millis(50));
    Ok(DemoEdge {
        id,
        handle,
        sim,
        task,
    })
}
