//! The one connection loop both ends share: read while writes are pending, write what
//! the core hands out, sleep until the core's deadline or a wake-up, never busy-poll.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use futures_io::{AsyncRead, AsyncWrite};
use futures_lite::AsyncWriteExt;

use crate::Runtime;
use crate::signal::Signal;

/// Bytes read per `poll_read` into a stack buffer, held only during the poll. Small:
/// it is zeroed on every poll (safe code cannot leave it uninitialised), and the
/// control traffic of an idle or chatty session — heartbeats, acks, status requests
/// and small answers — fits in it.
const SMALL_READ: usize = 256;
/// Bytes read per `poll_read` while a large frame streams in: a heap buffer taken
/// when a small read came back full, released once a read does not fill it (the
/// socket is drained), so an idle connection holds none.
const LARGE_READ: usize = 64 * 1024;
/// Bytes pulled from the core before writing them out.
const PULL_BATCH: usize = 64 * 1024;
/// A write buffer above this is released once flushed.
const IDLE_WRITE_CAPACITY: usize = 4 * 1024;
/// How long closing the transport (flush + shutdown) may take.
const CLOSE_BOUND: Duration = Duration::from_secs(2);

/// What the core says after being asked for bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pull {
    /// Nothing more now.
    Idle,
    /// Write what was handed out, then close the transport.
    Close,
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The core asked for the close (after its final bytes were written).
    ByCore,
    /// The peer closed or the transport failed.
    Transport,
    /// The driver was told to stop at once.
    Aborted,
    /// The core ended the connection while bytes were still waiting to be written,
    /// and the peer did not take them within the close bound (a peer that stopped
    /// reading). The core has not been told the transport is gone.
    Stalled,
}

/// The core side of one connection, called with its lock taken inside each method.
pub(crate) trait ConnCore {
    /// Bytes read.
    fn handle_bytes(&self, bytes: &[u8]);
    /// Appends bytes to write (up to `limit` total in `out`).
    fn pull(&self, out: &mut Vec<u8>, limit: usize) -> Pull;
    /// The core's next deadline for this connection, if it wants one driven here.
    fn deadline(&self) -> Option<std::time::Instant>;
    /// The deadline passed.
    fn handle_timeout(&self);
    /// Whether the driver must stop now without flushing (forced shutdown).
    fn aborted(&self) -> bool;
    /// Whether the core has ended this connection (its `Closed` event was emitted).
    /// Bytes already pulled then get a bounded time to leave: the core hands out its
    /// `Close` only once they have, which a peer that stopped reading never allows.
    fn closed(&self) -> bool;
}

/// A boxed runtime timer.
type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

enum Step {
    /// Bytes were read; `filled` when they filled the buffer (more may be waiting).
    Read {
        filled: bool,
    },
    Wrote(usize),
    Eof,
    Failed(std::io::Error),
    Woken,
    Timeout,
}

/// Drives `stream` for `core` until the connection ends.
pub(crate) async fn drive<R: Runtime, S, C>(stream: &mut S, core: &C, wake: &Signal) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: ConnCore,
{
    let mut out: Vec<u8> = Vec::new();
    let mut written = 0usize;
    let mut closing = false;
    // Set when the core ended the connection with bytes still pending here.
    let mut stall_at: Option<std::time::Instant> = None;
    let mut sleep: Option<(std::time::Instant, Sleep)> = None;
    // The large read buffer, while data streams in (see `LARGE_READ`).
    let mut large: Vec<u8> = Vec::new();
    // The core may have output: after an input (bytes, a timeout), a wake-up, and at
    // the start. Not after a write alone: output queued by anyone else comes with a
    // wake-up (the signal keeps it), so pulling then would only find nothing.
    let mut need_pull = true;
    // Bytes were written since the last flush.
    let mut unflushed = false;
    loop {
        if core.aborted() {
            return Ended::Aborted;
        }
        if written == out.len() {
            out.clear();
            written = 0;
            if out.capacity() > IDLE_WRITE_CAPACITY {
                out = Vec::new();
            }
            if closing {
                close_bounded::<R, S>(stream).await;
                return Ended::ByCore;
            }
            if need_pull && core.pull(&mut out, PULL_BATCH) == Pull::Close {
                closing = true;
                // The final bytes get a bounded time: a peer that reads nothing must
                // not hold the task forever.
                let at = std::time::Instant::now() + CLOSE_BOUND;
                sleep = Some((at, Box::pin(R::sleep_until(at))));
                if out.is_empty() {
                    close_bounded::<R, S>(stream).await;
                    return Ended::ByCore;
                }
            }
            if need_pull {
                // A full batch may have left more behind: pull again once it is
                // written.
                need_pull = out.len() >= PULL_BATCH;
            }
            if out.is_empty() && unflushed {
                unflushed = false;
                // Everything written: make sure it left any buffering layer (TLS).
                if let Err(e) = stream.flush().await {
                    tracing::debug!(error = %e, "flush failed");
                    return Ended::Transport;
                }
            }
        }
        if !closing && stall_at.is_none() && written < out.len() && core.closed() {
            stall_at = Some(std::time::Instant::now() + CLOSE_BOUND);
        }
        let deadline = if closing {
            sleep.as_ref().map(|(at, _)| *at)
        } else if stall_at.is_some() {
            stall_at
        } else {
            core.deadline()
        };
        match (&sleep, deadline) {
            (Some((at, _)), Some(d)) if *at == d => {}
            (_, Some(d)) => sleep = Some((d, Box::pin(R::sleep_until(d)))),
            (_, None) => sleep = None,
        }
        let step = futures_lite::future::poll_fn(|cx| {
            if written < out.len() {
                match Pin::new(&mut *stream).poll_write(cx, out.get(written..).unwrap_or_default())
                {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Step::Eof),
                    Poll::Ready(Ok(n)) => return Poll::Ready(Step::Wrote(n)),
                    Poll::Ready(Err(e)) => return Poll::Ready(Step::Failed(e)),
                    Poll::Pending => {}
                }
            }
            // Read while writes are pending; a closing connection reads no more. The
            // bytes go to the core at once: an idle connection's task holds no read
            // buffer.
            if !closing {
                let mut small = [0u8; SMALL_READ];
                let buf: &mut [u8] = if large.is_empty() {
                    &mut small
                } else {
                    &mut large
                };
                match Pin::new(&mut *stream).poll_read(cx, buf) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Step::Eof),
                    Poll::Ready(Ok(n)) => {
                        core.handle_bytes(buf.get(..n).unwrap_or_default());
                        return Poll::Ready(Step::Read {
                            filled: n == buf.len(),
                        });
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Step::Failed(e)),
                    Poll::Pending => {}
                }
            }
            if wake.poll_wait(cx).is_ready() {
                return Poll::Ready(Step::Woken);
            }
            if let Some((_, s)) = sleep.as_mut()
                && s.as_mut().poll(cx).is_ready()
            {
                return Poll::Ready(Step::Timeout);
            }
            Poll::Pending
        })
        .await;
        match step {
            Step::Read { filled } => {
                need_pull = true;
                if filled && large.is_empty() {
                    large = vec![0; LARGE_READ];
                } else if !filled && !large.is_empty() {
                    large = Vec::new();
                }
            }
            Step::Wrote(n) => {
                written += n;
                unflushed = true;
            }
            Step::Woken => need_pull = true,
            Step::Timeout if closing => {
                tracing::debug!("peer did not take the final bytes in time");
                return Ended::ByCore;
            }
            Step::Timeout if stall_at.is_some() => {
                tracing::debug!("connection ended with bytes the peer never took");
                return Ended::Stalled;
            }
            Step::Timeout => {
                sleep = None;
                need_pull = true;
                core.handle_timeout();
            }
            Step::Eof => return Ended::Transport,
            Step::Failed(e) => {
                // A TLS alert after the handshake (TLS 1.3 clients learn only then that
                // the server refused their certificate) is worth an operator's eyes.
                let tls = crate::tls::HandshakeError::from_io(&e);
                if tls.kind == crate::tls::HandshakeFailure::Io {
                    tracing::debug!(error = %e, "transport failed");
                } else {
                    tracing::warn!(error = %e, kind = ?tls.kind, "TLS error on the connection");
                }
                return Ended::Transport;
            }
        }
    }
}

async fn close_bounded<R: Runtime, S: AsyncWrite + Unpin>(stream: &mut S) {
    let deadline = std::time::Instant::now() + CLOSE_BOUND;
    let close = async {
        let _ = stream.close().await;
    };
    futures_lite::future::or(close, R::sleep_until(deadline)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nop;
    impl Runtime for Nop {
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
        async fn sleep_until(_: std::time::Instant) {}
        fn spawn<F: Future<Output = ()> + Send + 'static>(_: F) {}
    }

    /// Echo core: every byte read is written back; closes after `close_after` bytes.
    struct Echo {
        pending: std::sync::Mutex<Vec<u8>>,
        seen: std::sync::Mutex<usize>,
        close_after: usize,
    }
    impl ConnCore for Echo {
        fn handle_bytes(&self, bytes: &[u8]) {
            self.pending.lock().unwrap().extend_from_slice(bytes);
            *self.seen.lock().unwrap() += bytes.len();
        }
        fn pull(&self, out: &mut Vec<u8>, _limit: usize) -> Pull {
            out.append(&mut self.pending.lock().unwrap());
            if *self.seen.lock().unwrap() >= self.close_after {
                Pull::Close
            } else {
                Pull::Idle
            }
        }
        fn deadline(&self) -> Option<std::time::Instant> {
            None
        }
        fn handle_timeout(&self) {}
        fn aborted(&self) -> bool {
            false
        }
        fn closed(&self) -> bool {
            false
        }
    }

    #[test]
    fn a_connection_driver_holds_little_while_idle() {
        let core = Echo {
            pending: Default::default(),
            seen: Default::default(),
            close_after: usize::MAX,
        };
        let mut stream = futures_lite::io::Cursor::new(Vec::new());
        let wake = Signal::new();
        let fut = drive::<Nop, _, _>(&mut stream, &core, &wake);
        // A few words: no read buffer, no frame-sized buffer.
        let size = std::mem::size_of_val(&fut);
        assert!(size <= 512, "driver future is {size} bytes");
    }

    #[test]
    fn bytes_read_are_handed_to_the_core_and_its_output_written() {
        let core = Echo {
            pending: Default::default(),
            seen: Default::default(),
            close_after: 5,
        };
        let mut stream = futures_lite::io::Cursor::new(b"hello".to_vec());
        let wake = Signal::new();
        let ended = futures_lite::future::block_on(drive::<Nop, _, _>(&mut stream, &core, &wake));
        assert_eq!(ended, Ended::ByCore);
        // The cursor wrote the echo after the 5 bytes it read.
        assert_eq!(stream.into_inner(), b"hellohello");
    }
}
