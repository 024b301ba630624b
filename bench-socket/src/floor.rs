//! The codec floor of the 0-node status round trip: a hand-written Control Plane end
//! and Edge end that only frame, encode and decode (see the `codec_floor` bench).

use iop_tokio::core::proto::{
    self, Body, EdgeStatusRequest, EdgeStatusResponse, Envelope, FrameDecoder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The floor's Control Plane end: one connection to a floor Edge.
pub struct FloorCp {
    stream: TcpStream,
    decoder: FrameDecoder,
    next_id: u64,
    out: Vec<u8>,
    buf: Vec<u8>,
}

impl FloorCp {
    /// Spawns a floor Edge answering as `edge_id` on `edge_rt` and connects to it.
    pub async fn connect(
        edge_rt: &tokio::runtime::Handle,
        edge_id: &'static str,
    ) -> Result<Self, BoxError> {
        let stream =
            accept_spawned(edge_rt, "floor edge", move |addr| floor_edge(addr, edge_id)).await?;
        Ok(Self {
            stream,
            decoder: FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN),
            next_id: 1,
            out: Vec::new(),
            buf: vec![0; 2048],
        })
    }

    /// One status request out, its decoded answer back.
    pub async fn round_trip(&mut self) -> Result<EdgeStatusResponse, BoxError> {
        let id = self.next_id;
        self.next_id += 1;
        let request = Envelope::correlated(id, EdgeStatusRequest { node_ids: vec![] });
        self.out.clear();
        proto::encode_frame(&request, u32::MAX, &mut self.out)?;
        self.stream.write_all(&self.out).await?;
        loop {
            let n = self.stream.read(&mut self.buf).await?;
            if n == 0 {
                return Err("the floor edge closed".into());
            }
            let mut input = self.buf.get(..n).unwrap_or_default();
            while let Some(envelope) = self.decoder.decode(&mut input)? {
                if let (true, Some(Body::StatusResponse(status))) =
                    (envelope.correlation_id == id, envelope.body)
                {
                    return Ok(status);
                }
            }
        }
    }
}

/// Listens on 127.0.0.1, spawns `edge(address)` on `edge_rt` (a hand-written Edge that
/// connects there; its failure is printed as `what`'s), and returns the connection it
/// makes, with `TCP_NODELAY` on.
pub async fn accept_spawned<F, Fut>(
    edge_rt: &tokio::runtime::Handle,
    what: &'static str,
    edge: F,
) -> Result<TcpStream, BoxError>
where
    F: FnOnce(std::net::SocketAddr) -> Fut,
    Fut: std::future::Future<Output = Result<(), BoxError>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let running = edge(listener.local_addr()?);
    edge_rt.spawn(async move {
        if let Err(e) = running.await {
            eprintln!("{what} failed: {e}");
        }
    });
    let (stream, _) = listener.accept().await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// The floor's Edge end: connects, then [`answer_status`].
async fn floor_edge(addr: std::net::SocketAddr, edge_id: &'static str) -> Result<(), BoxError> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    answer_status(&mut stream, edge_id).await
}

/// A minimal Edge's loop: answers every status request on `stream` with an empty
/// status as `edge_id` (decoded with `FrameDecoder`, built, framed with
/// `encode_frame`, one write per read); nothing else. Returns when the peer closes.
async fn answer_status(stream: &mut TcpStream, edge_id: &str) -> Result<(), BoxError> {
    let mut decoder = FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN);
    let mut buf = [0u8; 2048];
    let mut out = Vec::new();
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        let mut input = buf.get(..n).unwrap_or_default();
        out.clear();
        while let Some(envelope) = decoder.decode(&mut input)? {
            if let Some(Body::StatusRequest(_)) = envelope.body {
                let status = EdgeStatusResponse {
                    edge_id: edge_id.into(),
                    observed_at_unix_ms: 1_796_000_000_000,
                    ..Default::default()
                };
                let answer = Envelope::correlated(envelope.correlation_id, status);
                proto::encode_frame(&answer, u32::MAX, &mut out)?;
            }
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
        }
    }
}
