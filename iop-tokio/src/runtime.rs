//! The tokio implementation of [`iop_driver::Runtime`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt};

/// The tokio runtime, as an [`iop_driver::Runtime`]. Everything spawned goes to the
/// current tokio runtime (`tokio::spawn`): use the types of this crate from within one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tokio;

impl iop_driver::Runtime for Tokio {
    type Stream = Compat<TcpStream>;
    type Listener = TcpListener;

    async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
        // As `TcpListener::bind` (address reuse on Unix), with a longer backlog.
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(iop_driver::LISTEN_BACKLOG)
    }

    fn local_addr(listener: &TcpListener) -> io::Result<SocketAddr> {
        listener.local_addr()
    }

    async fn accept(listener: &TcpListener) -> io::Result<(Self::Stream, SocketAddr)> {
        let (stream, peer) = listener.accept().await?;
        stream.set_nodelay(true)?;
        Ok((stream.compat(), peer))
    }

    async fn connect(addr: SocketAddr) -> io::Result<Self::Stream> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(stream.compat())
    }

    fn sleep_until(deadline: std::time::Instant) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline))
    }

    fn spawn<F: Future<Output = ()> + Send + 'static>(future: F) {
        drop(tokio::spawn(future));
    }

    fn try_spawn<F: Future<Output = ()> + Send + 'static>(future: F) -> bool {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(runtime.spawn(future));
                true
            }
            Err(_) => false,
        }
    }
}
