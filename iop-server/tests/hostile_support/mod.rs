//! Helpers of the hostile-peer tests (`hostile_*.rs`): raw frames, a "good" Edge whose
//! session must survive every attack, the `iop-control-plane` binary as a process
//! with its stderr captured and its memory read from `/proc`, and a fake Control
//! Plane for attacking the Edge. Everything binds 127.0.0.1 port 0; every wait is
//! bounded.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_lite::StreamExt;
use iop_tokio::core::edge::EdgeEvent;
use iop_tokio::core::proto::{
    self, Body, EdgeHelloRequest, EdgeStatusResponse, Envelope, FrameDecoder, GoAwayReason,
};
use iop_tokio::{ControlPlaneHandle, EdgeClient, EdgeHandle, Notice};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{bounded, fast_edge};

pub const CP_BIN: &str = env!("CARGO_BIN_EXE_iop-control-plane");

/// A length prefix followed by `body`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut wire = (body.len() as u32).to_be_bytes().to_vec();
    wire.extend_from_slice(body);
    wire
}

/// One encoded frame of `envelope` (any size).
pub fn envelope_frame(envelope: &Envelope) -> Vec<u8> {
    let mut wire = Vec::new();
    proto::encode_frame(envelope, u32::MAX, &mut wire).unwrap();
    wire
}

/// An empty status answer from `edge_id` to the request `correlation`.
pub fn status_response(correlation: u64, edge_id: &str) -> Vec<u8> {
    envelope_frame(&Envelope::correlated(
        correlation,
        EdgeStatusResponse {
            edge_id: edge_id.into(),
            ..Default::default()
        },
    ))
}

/// A hello frame for `edge_id` (any length, any bytes).
pub fn hello_frame(edge_id: &str, credential: &[u8]) -> Vec<u8> {
    envelope_frame(&Envelope::new(EdgeHelloRequest {
        edge_id: edge_id.into(),
        protocol_version: proto::PROTOCOL_VERSION,
        credential: credential.to_vec(),
        ..Default::default()
    }))
}

/// A raw connection that writes bytes and reads frames until EOF.
pub struct Attacker {
    pub stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
}

impl Attacker {
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = bounded("attacker connect", TcpStream::connect(addr))
            .await
            .unwrap();
        Self::from_stream(stream)
    }

    /// Wraps a connected (or accepted) stream.
    pub fn from_stream(stream: TcpStream) -> Self {
        Self {
            stream,
            decoder: FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN),
            buf: Vec::new(),
        }
    }

    /// Writes `bytes`; the peer may already have closed, which is not an error here.
    pub async fn write(&mut self, bytes: &[u8]) {
        let _ = bounded("attacker write", self.stream.write_all(bytes)).await;
    }

    /// Says hello as `edge_id` and expects it accepted.
    pub async fn hello(&mut self, edge_id: &str) -> u64 {
        self.write(&hello_frame(edge_id, b"")).await;
        match self.next_body().await {
            Some(Body::HelloResponse(r)) if r.accepted => r.session_id,
            other => panic!("hello of {edge_id} not accepted: {other:?}"),
        }
    }

    /// The next frame's body, or `None` at EOF (or reset).
    pub async fn next_body(&mut self) -> Option<Body> {
        loop {
            match self.next_envelope().await {
                Some(Envelope { body: Some(b), .. }) => return Some(b),
                Some(_) => {}
                None => return None,
            }
        }
    }

    /// The next frame, or `None` at EOF (or reset).
    pub async fn next_envelope(&mut self) -> Option<Envelope> {
        bounded("a frame", async {
            loop {
                let mut input = self.buf.as_slice();
                let decoded = self
                    .decoder
                    .decode(&mut input)
                    .expect("the peer sent a bad frame");
                let consumed = self.buf.len() - input.len();
                self.buf.drain(..consumed);
                if let Some(envelope) = decoded {
                    return Some(envelope);
                }
                let mut chunk = [0u8; 8192];
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await
    }

    /// Skips frames until one matches `pick`.
    pub async fn until<T>(
        &mut self,
        what: &str,
        mut pick: impl FnMut(&Envelope) -> Option<T>,
    ) -> T {
        loop {
            match self.next_envelope().await {
                Some(e) => {
                    if let Some(v) = pick(&e) {
                        return v;
                    }
                }
                None => panic!("closed while waiting for {what}"),
            }
        }
    }

    /// Skips frames until a status request; its correlation id.
    pub async fn next_status_request(&mut self) -> u64 {
        self.until("a status request", |e| {
            matches!(e.body, Some(Body::StatusRequest(_))).then_some(e.correlation_id)
        })
        .await
    }

    /// Sends a heartbeat and waits for its ack: the session is alive.
    pub async fn ping(&mut self, sequence: u64) {
        self.write(&envelope_frame(&Envelope::new(proto::Heartbeat {
            sequence,
            sent_at_unix_ms: 0,
        })))
        .await;
        self.until("heartbeat ack", |e| match &e.body {
            Some(Body::HeartbeatAck(a)) if a.sequence == sequence => Some(()),
            _ => None,
        })
        .await;
    }

    /// Reads until EOF; returns the `GoAway` reason of the last frame, if it was one,
    /// and every body seen.
    pub async fn go_away_then_eof(&mut self) -> (Option<GoAwayReason>, Vec<Body>) {
        let mut bodies = Vec::new();
        while let Some(b) = self.next_body().await {
            bodies.push(b);
        }
        let reason = match bodies.last() {
            Some(Body::GoAway(g)) => Some(g.reason()),
            _ => None,
        };
        (reason, bodies)
    }

    /// Reads until EOF and asserts the last frame was `GoAway{reason}`.
    pub async fn expect_go_away(&mut self, reason: GoAwayReason) -> Vec<Body> {
        let (got, bodies) = self.go_away_then_eof().await;
        assert_eq!(got, Some(reason), "frames before EOF: {bodies:?}");
        bodies
    }
}

/// An Edge that connects before an attack and must keep its session through it.
pub struct GoodEdge {
    pub edge: EdgeHandle,
    pub edge_id: String,
    pub session_id: u64,
}

impl GoodEdge {
    /// The Edge kept the same session (never reconnected) and is connected.
    pub fn assert_kept_session(&self) {
        assert!(
            self.edge.is_connected(),
            "{} lost its session",
            self.edge_id
        );
        assert_eq!(
            self.edge.stats().sessions_accepted,
            1,
            "{} reconnected",
            self.edge_id
        );
    }

    /// Against an in-process Control Plane: same session there, and a status
    /// round trip and a command still work on it.
    pub async fn assert_undisturbed(&self, cp: &ControlPlaneHandle) {
        self.assert_kept_session();
        let view = cp.edge(&self.edge_id).expect("good edge listed");
        assert_eq!(
            view.session_id, self.session_id,
            "good edge's session changed"
        );
        let status = bounded("good edge status", cp.request_status(&self.edge_id, vec![]))
            .await
            .expect("status of the good edge");
        assert_eq!(status.edge_id, self.edge_id);
        let spec = iop_tokio::core::cp::CommandSpec::new("edge.ping");
        let mut tracker = cp.send_command(&self.edge_id, spec).expect("command sent");
        let mut last = None;
        bounded("good edge command", async {
            while let Some(update) = tracker.next().await {
                last = Some(update);
            }
        })
        .await;
        assert!(
            matches!(&last, Some(iop_tokio::CommandUpdate::Event(e)) if e.phase() == iop_tokio::core::proto::CommandPhase::Succeeded),
            "command on the good edge: {last:?}"
        );
        self.assert_kept_session();
    }
}

/// A `GoodEdge` that also handles `edge.ping`.
pub async fn good_edge(addr: SocketAddr, edge_id: &str) -> GoodEdge {
    let mut client = EdgeClient::new(fast_edge(edge_id)).operation(
        "edge.ping",
        iop_tokio::core::edge::TargetLevel::Edge,
        |_ctx| async move { iop_tokio::CommandResult::succeeded("pong") },
    );
    let mut events = client.events();
    let edge = client.connect(addr).unwrap();
    let session_id = bounded("good edge connected", async {
        loop {
            match events.next().await {
                Some(Notice::Event(EdgeEvent::Connected { session_id, .. })) => {
                    return session_id;
                }
                Some(_) => {}
                None => panic!("edge events ended"),
            }
        }
    })
    .await;
    GoodEdge {
        edge,
        edge_id: edge_id.into(),
        session_id,
    }
}

/// A running `iop-control-plane` process (killed on drop) with stderr in a file.
pub struct CpProcess {
    pub child: Child,
    pub edges: SocketAddr,
    pub admin: SocketAddr,
    pub log: PathBuf,
}

impl Drop for CpProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

impl CpProcess {
    /// Starts the binary on port 0 with `extra` flags and `RUST_LOG=rust_log`.
    pub fn start(extra: &[&str], rust_log: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!("iop-hostile-{}-{n}.log", std::process::id()));
        let mut child = Command::new(CP_BIN)
            .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .args(extra)
            .env("RUST_LOG", rust_log)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn iop-control-plane");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read addresses");
        let field = |name: &str| -> SocketAddr {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        };
        let (edges, admin) = (field("edges="), field("admin="));
        Self {
            child,
            edges,
            admin,
            log,
        }
    }

    /// `(VmRSS, VmHWM)` of the process in KiB.
    pub fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc status");
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in /proc status"))
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Everything logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GET on the admin API (blocking; call from `spawn_blocking` or a plain test).
    pub fn get(&self, path: &str) -> (u16, String) {
        http(self.admin, "GET", path, "")
    }
}

/// One HTTP/1.1 request with `Connection: close`: status code and body.
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect admin");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read answer");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("http head");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    (status, body.to_owned())
}

/// Runs a blocking admin call off the async workers.
pub async fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let path = path.to_owned();
    bounded(
        "admin call",
        tokio::task::spawn_blocking(move || http(admin, "GET", &path, "")),
    )
    .await
    .unwrap()
}

/// The admin API still shows `good` with the same session, and a status round trip
/// through it works.
pub async fn assert_binary_undisturbed(cp: &CpProcess, good: &GoodEdge) {
    good.assert_kept_session();
    let (code, body) = admin_get(cp.admin, &format!("/v1/edges/{}", good.edge_id)).await;
    assert_eq!(code, 200, "{body}");
    let view: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(view["connected"], true, "{body}");
    assert_eq!(view["sessionId"], good.session_id.to_string(), "{body}");
    let (code, body) = admin_get(cp.admin, &format!("/v1/edges/{}/status", good.edge_id)).await;
    assert_eq!(code, 200, "status of the good edge: {body}");
    good.assert_kept_session();
}
