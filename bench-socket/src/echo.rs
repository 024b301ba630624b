//! The raw TCP echo baseline of the round-trip benches: the same bytes as our status
//! exchange, moved by plain tokio sockets with no encoding or decoding.

use iop_bench::fixtures;
use iop_tokio::core::proto::{self, EncodeError};
use iop_tokio::core::registry::NodeRegistry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Our full status request frame and `registry`'s status response frame, the bytes
/// the echo moves.
pub fn frames(registry: &NodeRegistry) -> Result<(Vec<u8>, Vec<u8>), EncodeError> {
    let mut request = Vec::new();
    proto::encode_frame(
        &fixtures::full_status_request(1 << 20),
        proto::DEFAULT_MAX_FRAME_LEN,
        &mut request,
    )?;
    let mut response = Vec::new();
    proto::encode_frame(
        &fixtures::status_response_envelope(registry, 1 << 20),
        proto::DEFAULT_MAX_FRAME_LEN,
        &mut response,
    )?;
    Ok((request, response))
}

/// The Control Plane end of an echo connection (`TCP_NODELAY` on both ends) whose
/// Edge end, spawned on `edge_rt`, reads `request_len` bytes and writes `response`
/// back, until the connection closes.
pub async fn connect(
    edge_rt: &tokio::runtime::Handle,
    request_len: usize,
    response: Vec<u8>,
) -> std::io::Result<TcpStream> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    edge_rt.spawn(async move {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            return;
        };
        let _ = stream.set_nodelay(true);
        let mut buf = vec![0u8; request_len];
        while stream.read_exact(&mut buf).await.is_ok() {
            if stream.write_all(&response).await.is_err() {
                break;
            }
        }
    });
    let (stream, _) = listener.accept().await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// One round trip on the Control Plane end: `request` out, `buf.len()` bytes back.
pub async fn round_trip(
    stream: &mut TcpStream,
    request: &[u8],
    buf: &mut [u8],
) -> std::io::Result<()> {
    stream.write_all(request).await?;
    stream.read_exact(buf).await?;
    Ok(())
}
