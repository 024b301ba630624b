//! The seam between the drivers and an async runtime.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

/// The listen backlog a [`Runtime::bind`] asks for (the kernel caps it, on Linux at
/// `net.core.somaxconn`, 4 096 by default). Every Edge of a fleet dials at once after
/// a Control Plane restart: with the 128 of `std` and most runtimes, connections past
/// it lose their SYN and retry 1, 3, 7 s later.
pub const LISTEN_BACKLOG: u32 = 4096;

/// What a driver needs from an async runtime: TCP, a timer and a spawner.
///
/// Implemented by a zero-sized marker type per runtime (`iop_tokio::Tokio`,
/// `iop_smol::Smol`); every method is an associated function, so nothing holds a
/// runtime value. Streams must have `TCP_NODELAY` set by [`Runtime::accept`] and
/// [`Runtime::connect`]: the protocol's frames are small and latency-bound.
pub trait Runtime: Send + Sync + 'static {
    /// A connected byte stream.
    type Stream: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + Send + 'static;
    /// A bound listener.
    type Listener: Send + Sync + 'static;

    /// Binds a listener to `addr`, with a backlog of [`LISTEN_BACKLOG`].
    fn bind(addr: SocketAddr) -> impl Future<Output = io::Result<Self::Listener>> + Send;
    /// The address a listener is bound to (port 0 resolved).
    fn local_addr(listener: &Self::Listener) -> io::Result<SocketAddr>;
    /// Accepts one connection, with `TCP_NODELAY` on.
    fn accept(
        listener: &Self::Listener,
    ) -> impl Future<Output = io::Result<(Self::Stream, SocketAddr)>> + Send;
    /// Connects to `addr`, with `TCP_NODELAY` on.
    fn connect(addr: SocketAddr) -> impl Future<Output = io::Result<Self::Stream>> + Send;
    /// Completes at `deadline`.
    fn sleep_until(deadline: std::time::Instant) -> impl Future<Output = ()> + Send;
    /// Runs `future` in the background until it completes.
    fn spawn<F: Future<Output = ()> + Send + 'static>(future: F);

    /// [`spawn`](Self::spawn) where there may be no runtime to spawn on (a handle
    /// dropped after its runtime ended): false, and `future` dropped, when there is
    /// none. The default always has one.
    fn try_spawn<F: Future<Output = ()> + Send + 'static>(future: F) -> bool {
        Self::spawn(future);
        true
    }
}

/// `future`'s output if it completes before `deadline`; `None` once the deadline
/// passes first (the future is dropped).
pub(crate) async fn before<R: Runtime, F: Future>(
    deadline: std::time::Instant,
    future: F,
) -> Option<F::Output> {
    futures_lite::future::or(async { Some(future.await) }, async {
        R::sleep_until(deadline).await;
        None
    })
    .await
}
