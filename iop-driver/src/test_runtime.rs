//! A runtime for unit tests that never runs what it is given: no sockets, spawned
//! tasks dropped; its timers fire at once, or never when `PATIENT`.

use crate::Runtime;

pub(crate) struct Nop<const PATIENT: bool = false>;

/// [`Nop`] whose timers never fire.
pub(crate) type Patient = Nop<true>;

impl<const PATIENT: bool> Runtime for Nop<PATIENT> {
    type Stream = futures_lite::io::Cursor<Vec<u8>>;
    type Listener = ();
    async fn bind(_: std::net::SocketAddr) -> std::io::Result<()> {
        Ok(())
    }
    fn local_addr(_: &()) -> std::io::Result<std::net::SocketAddr> {
        Ok(([127, 0, 0, 1], 0).into())
    }
    async fn accept(_: &()) -> std::io::Result<(Self::Stream, std::net::SocketAddr)> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
    async fn connect(_: std::net::SocketAddr) -> std::io::Result<Self::Stream> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
    async fn sleep_until(_: std::time::Instant) {
        if PATIENT {
            std::future::pending::<()>().await;
        }
    }
    fn spawn<F: Future<Output = ()> + Send + 'static>(_: F) {}
}
