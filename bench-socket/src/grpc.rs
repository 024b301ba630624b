//! The gRPC baseline: one bidirectional stream per Edge, hand-written on tonic's
//! server and client (what `tonic-build` would generate for
//! `rpc Connect(stream EdgeStatusResponse) returns (stream EdgeStatusRequest)`), with
//! the iop messages and tonic-prost's codec. The Edge dials (it is the gRPC client),
//! the Control Plane sends status requests down the response stream and reads the
//! answers from the request stream.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use futures_channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use iop_tokio::core::proto::{EdgeStatusRequest, EdgeStatusResponse};
use tonic::codegen::{Body, BoxFuture, Service, StdError, http};
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::{Request, Response, Status, Streaming};

/// The method's path.
pub const PATH: &str = "/iop.bench.EdgeLink/Connect";

/// The Control Plane's end of one Edge's stream.
pub struct CpStream {
    /// Status requests to the Edge.
    pub tx: UnboundedSender<Result<EdgeStatusRequest, Status>>,
    /// The Edge's answers.
    pub rx: Streaming<EdgeStatusResponse>,
}

impl CpStream {
    /// One status round trip.
    pub async fn request_status(
        &mut self,
        request: &EdgeStatusRequest,
    ) -> Result<EdgeStatusResponse, Status> {
        self.tx
            .unbounded_send(Ok(request.clone()))
            .map_err(|_| Status::cancelled("stream closed"))?;
        self.rx
            .message()
            .await?
            .ok_or_else(|| Status::cancelled("stream ended"))
    }
}

/// The Control Plane's gRPC service: every accepted stream is handed to the bench.
#[derive(Clone)]
pub struct EdgeLinkServer {
    accepted: UnboundedSender<CpStream>,
    count: Arc<AtomicUsize>,
}

impl EdgeLinkServer {
    /// The service, and the receiver of the streams it accepts.
    pub fn new() -> (Self, UnboundedReceiver<CpStream>) {
        let (accepted, streams) = unbounded();
        let server = Self {
            accepted,
            count: Arc::new(AtomicUsize::new(0)),
        };
        (server, streams)
    }

    /// Streams accepted so far.
    pub fn accepted(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Serves on `addr` (TCP_NODELAY) until the runtime ends; returns the bound address.
    pub fn serve(self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let incoming = tonic::transport::server::TcpIncoming::bind(addr)?.with_nodelay(Some(true));
        let local = incoming.local_addr()?;
        tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .tcp_nodelay(true)
                .add_service(self)
                .serve_with_incoming(incoming)
                .await;
            if let Err(e) = served {
                eprintln!("tonic server failed: {e}");
            }
        });
        Ok(local)
    }
}

impl NamedService for EdgeLinkServer {
    const NAME: &'static str = "iop.bench.EdgeLink";
}

struct Connect(EdgeLinkServer);

impl StreamingService<EdgeStatusResponse> for Connect {
    type Response = EdgeStatusRequest;
    type ResponseStream = UnboundedReceiver<Result<EdgeStatusRequest, Status>>;
    type Future = BoxFuture<Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: Request<Streaming<EdgeStatusResponse>>) -> Self::Future {
        let (tx, out) = unbounded();
        let stream = CpStream {
            tx,
            rx: request.into_inner(),
        };
        let server = self.0.clone();
        Box::pin(async move {
            server
                .accepted
                .unbounded_send(stream)
                .map_err(|_| Status::unavailable("bench stopped"))?;
            server.count.fetch_add(1, Ordering::AcqRel);
            Ok(Response::new(out))
        })
    }
}

impl<B> Service<http::Request<B>> for EdgeLinkServer
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = Connect(self.clone());
        Box::pin(async move {
            let mut grpc = Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.streaming(method, req).await)
        })
    }
}

/// The Edge's end of its stream.
pub struct EdgeStream {
    /// Answers to the Control Plane.
    pub tx: UnboundedSender<EdgeStatusResponse>,
    /// The Control Plane's requests.
    pub rx: Streaming<EdgeStatusRequest>,
}

impl EdgeStream {
    /// Dials `addr` (its own HTTP/2 connection, TCP_NODELAY) and opens the stream.
    pub async fn connect(
        addr: SocketAddr,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .connect()
            .await?;
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await?;
        let (tx, requests) = unbounded::<EdgeStatusResponse>();
        let path = http::uri::PathAndQuery::from_static(PATH);
        let response = grpc
            .streaming(
                Request::new(requests),
                path,
                tonic_prost::ProstCodec::default(),
            )
            .await?;
        Ok(Self {
            tx,
            rx: response.into_inner(),
        })
    }

    /// Answers every request with `response` until the stream ends.
    pub async fn answer(mut self, response: EdgeStatusResponse) {
        while let Ok(Some(_request)) = self.rx.message().await {
            if self.tx.unbounded_send(response.clone()).is_err() {
                break;
            }
        }
    }
}
