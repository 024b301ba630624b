//! An Edge played by hand over a raw socket, for the cases a well-behaved Edge never
//! makes happen.

use std::net::SocketAddr;
use std::time::Duration;

use iop_core::proto::{
    self, Body, CommandPhase, EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse,
    EdgeHelloRequest, Envelope, FrameDecoder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every wait on the scripted Edge's side.
const WAIT: Duration = Duration::from_secs(15);

/// An Edge played by hand, one session per value. A test waits for the Control Plane
/// to see a session end before it opens the next: a hello that supersedes a session
/// may be read before that session's last frames, and the script needs them read.
pub struct ScriptedEdge {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
    pub session_id: u64,
}

impl ScriptedEdge {
    /// Says hello as `edge_id`, advertising `edge.ping` and holding `inflight`.
    pub async fn hello(cp: SocketAddr, edge_id: &str, inflight: &[&str]) -> Self {
        Self::hello_with(cp, edge_id, &["edge.ping"], inflight).await
    }

    /// Says hello as `edge_id`, advertising `operations` and holding `inflight`.
    pub async fn hello_with(
        cp: SocketAddr,
        edge_id: &str,
        operations: &[&str],
        inflight: &[&str],
    ) -> Self {
        let stream = TcpStream::connect(cp).await.unwrap();
        let mut edge = Self {
            stream,
            decoder: FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN),
            buf: Vec::new(),
            session_id: 0,
        };
        edge.send(&Envelope::new(EdgeHelloRequest {
            edge_id: edge_id.into(),
            protocol_version: proto::PROTOCOL_VERSION,
            operations: operations.iter().map(|s| (*s).to_owned()).collect(),
            inflight_command_ids: inflight.iter().map(|s| (*s).to_owned()).collect(),
            ..Default::default()
        }))
        .await;
        edge.session_id = match edge.next_body().await {
            Some(Body::HelloResponse(r)) if r.accepted => r.session_id,
            other => panic!("hello of {edge_id} not accepted: {other:?}"),
        };
        edge
    }

    pub async fn send(&mut self, envelope: &Envelope) {
        let mut wire = Vec::new();
        proto::encode_frame(envelope, proto::DEFAULT_MAX_FRAME_LEN, &mut wire).unwrap();
        self.stream.write_all(&wire).await.unwrap();
    }

    /// The next frame's body; `None` at EOF.
    pub async fn next_body(&mut self) -> Option<Body> {
        let read = async {
            loop {
                let mut input = self.buf.as_slice();
                let decoded = self.decoder.decode(&mut input).expect("a bad frame");
                let consumed = self.buf.len() - input.len();
                self.buf.drain(..consumed);
                if let Some(envelope) = decoded {
                    if let Some(body) = envelope.body {
                        return Some(body);
                    }
                    continue;
                }
                let mut chunk = [0u8; 8192];
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        };
        tokio::time::timeout(WAIT, read)
            .await
            .expect("no frame from the control plane")
    }

    /// Skips frames (the status request) until a command request.
    pub async fn command_request(&mut self) -> EdgeCommandRequest {
        loop {
            match self.next_body().await {
                Some(Body::CommandRequest(r)) => return r,
                Some(_) => {}
                None => panic!("closed before a command request"),
            }
        }
    }

    /// Whether a command request comes within `wait` (frames of other kinds skipped).
    pub async fn sees_command_within(&mut self, wait: Duration) -> bool {
        tokio::time::timeout(wait, async {
            loop {
                match self.next_body().await {
                    Some(Body::CommandRequest(_)) => return true,
                    Some(_) => {}
                    None => return false,
                }
            }
        })
        .await
        .unwrap_or(false)
    }

    /// Sends the event `sequence` in `phase` of `command_id`, as a replay after a
    /// reconnect does.
    pub async fn event(&mut self, command_id: &str, sequence: u32, phase: CommandPhase) {
        self.send(&Envelope::new(EdgeCommandEvent {
            command_id: command_id.into(),
            phase: phase as i32,
            sequence,
            message: "replayed".into(),
            ..Default::default()
        }))
        .await;
    }

    /// Accepts `command_id` (its response, then ACCEPTED).
    pub async fn accept(&mut self, command_id: &str) {
        self.send(&Envelope::new(EdgeCommandResponse {
            command_id: command_id.into(),
            accepted: true,
            ..Default::default()
        }))
        .await;
        self.event(command_id, 1, CommandPhase::Accepted).await;
    }
}
