//! Shared helpers of the runtime tests: fast configs, bounded waits, a raw protocol
//! client and a cuttable TCP proxy.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::StreamExt;
use iop_tokio::core::cp::{CpConfig, CpEvent};
use iop_tokio::core::edge::{EdgeConfig, EdgeEvent};
use iop_tokio::core::proto::{self, Body, EdgeHelloRequest, Envelope, FrameDecoder};
use iop_tokio::{Notice, ServerConfig, Subscription};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// Upper bound of every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(10);

/// Fails the test instead of hanging.
pub async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

pub fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A server config with short timers.
pub fn fast_server() -> ServerConfig {
    let mut cp = CpConfig::default();
    cp.heartbeat_interval = Duration::from_secs(1);
    cp.status_timeout = Duration::from_secs(2);
    cp.hello_timeout = Duration::from_secs(2);
    let mut config = ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny);
    config.cp = cp;
    config.shutdown_grace = Duration::from_secs(2);
    config
}

/// An Edge config that reconnects quickly.
pub fn fast_edge(edge_id: &str) -> EdgeConfig {
    let mut config = EdgeConfig::new(edge_id, iop_tokio::process_seed());
    config.backoff_base = Duration::from_millis(20);
    config.backoff_max = Duration::from_millis(200);
    config
}

/// Waits for the first CP event matching `pick`.
pub async fn next_cp<T>(
    sub: &mut Subscription<CpEvent>,
    what: &str,
    mut pick: impl FnMut(&CpEvent) -> Option<T>,
) -> T {
    bounded(what, async {
        loop {
            match sub.next().await {
                Some(Notice::Event(e)) => {
                    if let Some(v) = pick(&e) {
                        return v;
                    }
                }
                Some(Notice::Lagged(n)) => panic!("subscriber lagged by {n}"),
                Some(other) => panic!("unexpected notice {other:?}"),
                None => panic!("subscription ended waiting for {what}"),
            }
        }
    })
    .await
}

/// Waits for the first Edge event matching `pick`.
pub async fn next_edge<T>(
    sub: &mut Subscription<EdgeEvent>,
    what: &str,
    mut pick: impl FnMut(&EdgeEvent) -> Option<T>,
) -> T {
    bounded(what, async {
        loop {
            match sub.next().await {
                Some(Notice::Event(e)) => {
                    if let Some(v) = pick(&e) {
                        return v;
                    }
                }
                Some(Notice::Lagged(n)) => panic!("subscriber lagged by {n}"),
                Some(other) => panic!("unexpected notice {other:?}"),
                None => panic!("subscription ended waiting for {what}"),
            }
        }
    })
    .await
}

/// A hand-driven Edge connection speaking raw frames.
pub struct RawClient {
    pub stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = bounded("raw connect", TcpStream::connect(addr))
            .await
            .unwrap();
        Self {
            stream,
            decoder: FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN),
            buf: Vec::new(),
        }
    }

    pub async fn send_hello(&mut self, edge_id: &str) {
        self.send_hello_with(edge_id, &[]).await;
    }

    pub async fn send_hello_with(&mut self, edge_id: &str, operations: &[&str]) {
        self.send(Envelope::new(EdgeHelloRequest {
            edge_id: edge_id.into(),
            protocol_version: proto::PROTOCOL_VERSION,
            operations: operations.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }))
        .await;
    }

    pub async fn send(&mut self, envelope: Envelope) {
        let mut wire = Vec::new();
        proto::encode_frame(&envelope, proto::PRE_HELLO_MAX_FRAME_LEN, &mut wire).unwrap();
        self.stream.write_all(&wire).await.unwrap();
    }

    /// The next frame's body, or `None` at EOF.
    pub async fn next_body(&mut self) -> Option<Body> {
        bounded("a frame", async {
            loop {
                let mut input = self.buf.as_slice();
                let decoded = self.decoder.decode(&mut input).unwrap();
                let consumed = self.buf.len() - input.len();
                self.buf.drain(..consumed);
                if let Some(envelope) = decoded {
                    return envelope.body;
                }
                let mut chunk = [0u8; 4096];
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await
    }

    /// Reads frames until EOF; returns the bodies seen.
    pub async fn read_to_end(&mut self) -> Vec<Body> {
        let mut bodies = Vec::new();
        while let Some(b) = self.next_body().await {
            bodies.push(b);
        }
        bodies
    }
}

/// A TCP proxy in front of `upstream` whose live connections can be cut at once.
pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<Notify>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind(localhost()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(Notify::new());
        let cut2 = cut.clone();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let Ok(mut up) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let cut = cut2.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                        _ = cut.notified() => {}
                    }
                });
            }
        });
        Self { addr, cut }
    }

    /// Drops every proxied connection open now.
    pub fn cut(&self) {
        self.cut.notify_waiters();
    }
}
