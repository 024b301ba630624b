//! The smol implementation of [`iop_driver::Runtime`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use smol::Timer;
use smol::net::{TcpListener, TcpStream};

/// The smol runtime, as an [`iop_driver::Runtime`].
///
/// Sockets and timers are `async-io`'s (driven by its own reactor thread), and
/// everything spawned goes to smol's global executor (`smol::spawn`), which runs on
/// threads of its own. So nothing here needs a particular executor to be polling: the
/// types of this crate work from `smol::block_on`, async-std, or any other executor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Smol;

impl iop_driver::Runtime for Smol {
    type Stream = TcpStream;
    type Listener = TcpListener;

    async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
        // As `TcpListener::bind` (address reuse on Unix), with a longer backlog.
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        #[cfg(unix)]
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(i32::try_from(iop_driver::LISTEN_BACKLOG).unwrap_or(i32::MAX))?;
        TcpListener::try_from(std::net::TcpListener::from(socket))
    }

    fn local_addr(listener: &TcpListener) -> io::Result<SocketAddr> {
        listener.local_addr()
    }

    async fn accept(listener: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, peer) = listener.accept().await?;
        stream.set_nodelay(true)?;
        Ok((stream, peer))
    }

    async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    async fn sleep_until(deadline: std::time::Instant) {
        Timer::at(deadline).await;
    }

    fn spawn<F: Future<Output = ()> + Send + 'static>(future: F) {
        smol::spawn(future).detach();
    }
}
