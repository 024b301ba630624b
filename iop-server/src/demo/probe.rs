//! A raw hello over TCP, to show how the Control Plane answers hellos the Edge client
//! itself would never send (an empty edge id).

use std::net::SocketAddr;
use std::time::Duration;

use iop_core::proto::{
    self, Body, EdgeHelloRequest, EdgeHelloResponse, Envelope, FrameDecoder, HelloRejectReason,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends one hello for `edge_id` with `credential` and returns the Control Plane's
/// answer.
pub(super) async fn hello(
    addr: SocketAddr,
    edge_id: &str,
    credential: &[u8],
) -> Result<EdgeHelloResponse, String> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let hello = Envelope::new(EdgeHelloRequest {
        edge_id: edge_id.to_owned(),
        protocol_version: proto::PROTOCOL_VERSION,
        software_version: "iop-demo probe".into(),
        credential: credential.to_vec(),
        ..Default::default()
    });
    let mut wire = Vec::new();
    proto::encode_frame(&hello, proto::PRE_HELLO_MAX_FRAME_LEN, &mut wire)
        .map_err(|e| format!("encode: {e}"))?;
    stream
        .write_all(&wire)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut decoder = FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN);
    let mut buf = [0u8; 1024];
    let read = async {
        loop {
            let n = stream
                .read(&mut buf)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("closed without an answer".to_owned());
            }
            let mut input = buf.get(..n).unwrap_or_default();
            while let Some(envelope) = decoder.decode(&mut input).map_err(|e| e.to_string())? {
                if let Some(Body::HelloResponse(r)) = envelope.body {
                    return Ok(r);
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
}

/// The reject reason's name without its enum prefix (`EMPTY_EDGE_ID`).
pub(super) fn reason_name(r: &EdgeHelloResponse) -> String {
    let reason = HelloRejectReason::try_from(r.reject_reason)
        .unwrap_or(HelloRejectReason::Unspecified)
        .as_str_name();
    reason
        .strip_prefix("HELLO_REJECT_REASON_")
        .unwrap_or(reason)
        .to_owned()
}
