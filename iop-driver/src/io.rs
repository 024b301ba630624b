//! The one connection loop both ends share: read while writes are pending, write what
//! the core hands out, sleep until the core's deadline or a wake-up, never busy-poll.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_io::{AsyncRead, AsyncWrite};

use crate::Runtime;
use crate::signal::{Signal, lock};

/// Bytes read per `poll_read` into a stack buffer, held only during the poll. Small:
/// it is zeroed on every poll (safe code cannot leave it uninitialised), and the
/// control traffic of an idle or chatty session — heartbeats, acks, status requests
/// and small answers — fits in it.
const SMALL_READ: usize = 256;
/// Bytes read per `poll_read` into a heap buffer taken when a small read came back
/// full: first this many (a status answer of a few nodes fits), four times more on
/// each read that fills it, up to [`LARGE_READ`]; released once a read does not fill
/// it (the socket is drained), so an idle connection holds none. Starting small
/// keeps a few-KiB answer off the allocator's page-sized path (a zeroed 64 KiB
/// buffer costs page faults each time it is taken).
const FIRST_HEAP_READ: usize = 4 * 1024;
/// The most bytes read per `poll_read`, while a large frame streams in.
const LARGE_READ: usize = 64 * 1024;
/// Bytes pulled from the core before writing them out.
pub(crate) const PULL_BATCH: usize = 64 * 1024;
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

/// Drains a core's `poll_transmit` into `out` up to `limit` bytes
/// ([`iop_core::drain_transmits`]); a full buffer is [`Pull::Idle`] too (the writer
/// pulls again once it is written).
pub(crate) fn pull(
    out: &mut Vec<u8>,
    limit: usize,
    poll: impl FnMut(&mut Vec<u8>) -> iop_core::Transmit,
) -> Pull {
    match iop_core::drain_transmits(out, limit, poll) {
        iop_core::Transmit::Close => Pull::Close,
        iop_core::Transmit::Idle | iop_core::Transmit::Bytes(_) => Pull::Idle,
    }
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
    /// Bytes read. With `out` (the write buffer, when nothing is pending in it) the
    /// core's output is also pulled into it, as [`pull`](Self::pull) would, under the
    /// same lock: `Some` says it was, `None` leaves the pull to the driver.
    fn handle_bytes(&self, bytes: &[u8], out: Option<&mut Vec<u8>>) -> Option<Pull>;
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
    /// Whether, once the final bytes are written and the write side shut, the
    /// driver waits (bounded) for the peer to close its side too: a peer that has
    /// closed has read everything, so the sender of a `GoAway` knows it was taken
    /// before it reports the connection gone.
    fn linger(&self) -> bool {
        false
    }
}

/// A boxed runtime timer.
type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The write side of one connection: its stream and the bytes pulled from the core
/// that are not written yet. Whoever pulls appends to `out` (under the core's lock, so
/// in the core's order) and whoever writes holds the `Wire`, so bytes leave in order,
/// once each, and never from two tasks at a time.
pub(crate) struct Wire<S> {
    pub(crate) stream: S,
    /// Pulled bytes; `out[written..]` are still to write.
    pub(crate) out: Vec<u8>,
    pub(crate) written: usize,
    /// The core handed out its `Close` (to whoever pulled): once `out` is written the
    /// transport closes.
    pub(crate) close: bool,
}

impl<S> Wire<S> {
    pub(crate) fn new(stream: S) -> Self {
        Self {
            stream,
            out: Vec::new(),
            written: 0,
            close: false,
        }
    }

    /// Nothing pulled is left to write.
    pub(crate) fn drained(&self) -> bool {
        self.written == self.out.len()
    }

    /// Empties a drained buffer for the next pull, releasing it if a burst grew it.
    fn reset(&mut self) {
        self.out.clear();
        self.written = 0;
        if self.out.capacity() > IDLE_WRITE_CAPACITY {
            self.out = Vec::new();
        }
    }
}

/// What [`Wire::claim`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The core had nothing to send after all.
    Nothing,
    /// Bytes were pulled: [`Wire::write_now`] them.
    Pulled,
    /// Left to the driver task, which must be woken.
    Driver,
}

impl<S> Wire<S> {
    /// For a task other than the driver that just queued output in the core (with
    /// the core's lock held, which `pull` reaches): pulls it into `out` if nothing
    /// else is pending there, so that this task may write it. Anything else is the
    /// driver's: bytes still pending (they go first), the core's close, a batch that
    /// may have left more behind.
    pub(crate) fn claim(&mut self, pull: impl FnOnce(&mut Vec<u8>) -> Pull) -> Claim {
        if self.close || !self.drained() {
            return Claim::Driver;
        }
        self.reset();
        if pull(&mut self.out) == Pull::Close {
            self.close = true;
            return Claim::Driver;
        }
        if self.out.len() >= PULL_BATCH {
            Claim::Driver
        } else if self.out.is_empty() {
            Claim::Nothing
        } else {
            Claim::Pulled
        }
    }
}

impl<S: AsyncWrite + Unpin> Wire<S> {
    /// Writes what is pending without waiting (a no-op waker: a stream that is not
    /// ready is left to the driver task, which polls it with its own). True when
    /// everything is written; on `false` the driver must be woken to finish, and it
    /// sees any error itself when it retries.
    pub(crate) fn write_now(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        while let Some(rest) = self.out.get(self.written..).filter(|r| !r.is_empty()) {
            match Pin::new(&mut self.stream).poll_write(&mut cx, rest) {
                Poll::Ready(Ok(n)) if n > 0 => self.written += n,
                _ => return false,
            }
        }
        true
    }
}

/// How the driver task reaches its [`Wire`]: its own (the Edge) or one it shares
/// with the tasks that write for it (the Control Plane's handles).
pub(crate) trait WireAccess<S> {
    /// Runs `f` on the wire; never across an `.await`.
    fn with<T>(&mut self, f: impl FnOnce(&mut Wire<S>) -> T) -> T;
}

impl<S> WireAccess<S> for &mut Wire<S> {
    // Inlined: out of line, its prologue and epilogue cost more than the closure.
    #[inline(always)]
    fn with<T>(&mut self, f: impl FnOnce(&mut Wire<S>) -> T) -> T {
        f(self)
    }
}

impl<S> WireAccess<S> for &Mutex<Wire<S>> {
    #[inline(always)]
    fn with<T>(&mut self, f: impl FnOnce(&mut Wire<S>) -> T) -> T {
        f(&mut lock(self))
    }
}

enum Step {
    /// `read` bytes were read; `filled` when they filled the buffer (more may be
    /// waiting), `pulled` when the core's output was pulled with them (all of it).
    Read {
        read: usize,
        filled: bool,
        pulled: bool,
        wrote: bool,
    },
    Wrote,
    Eof,
    Failed(std::io::Error),
    Woken,
    Timeout,
}

/// Drives `wire` for `core` until the connection ends.
pub(crate) async fn drive<R: Runtime, S, W, C>(mut wire: W, core: &C, wake: &Signal) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin,
    W: WireAccess<S>,
    C: ConnCore,
{
    // The core's `Close` was seen: the final bytes are being written.
    let mut closing = false;
    // Set when the core ended the connection with bytes still pending here.
    let mut stall_at: Option<std::time::Instant> = None;
    let mut sleep: Option<(std::time::Instant, Sleep)> = None;
    // The heap read buffer, while data streams in (see `FIRST_HEAP_READ`), and the
    // size it starts at: the least that held the last read from it, so a connection
    // that streams large frames in bursts takes the largest buffer at once.
    let mut large: Vec<u8> = Vec::new();
    let mut heap_start = FIRST_HEAP_READ;
    // The core may have output: after an input (bytes, a timeout), a wake-up, and at
    // the start. Not after a write alone: output queued by anyone else comes with a
    // wake-up (the signal keeps it), so pulling then would only find nothing.
    let mut need_pull = true;
    // Bytes were written since the last flush.
    let mut unflushed = false;
    // The core was called since its deadline was last asked for (a write alone
    // changes nothing there: the deadline is asked for again only after an input, a
    // wake-up or a pull).
    let mut core_called = true;
    loop {
        if core.aborted() {
            return Ended::Aborted;
        }
        let (drained, close) = wire.with(|w| {
            if w.drained() {
                w.reset();
                if need_pull && !w.close {
                    core_called = true;
                    if core.pull(&mut w.out, PULL_BATCH) == Pull::Close {
                        w.close = true;
                    }
                    // A full batch may have left more behind: pull again once it is
                    // written.
                    need_pull = w.out.len() >= PULL_BATCH;
                }
            }
            (w.drained(), w.close)
        });
        if close && !closing {
            closing = true;
            // The final bytes get a bounded time: a peer that reads nothing must not
            // hold the task forever.
            let at = std::time::Instant::now() + CLOSE_BOUND;
            sleep = Some((at, Box::pin(R::sleep_until(at))));
        }
        if drained {
            if closing {
                close_bounded::<R, S, W>(&mut wire, core.linger()).await;
                return Ended::ByCore;
            }
            if unflushed {
                unflushed = false;
                // Everything written: make sure it left any buffering layer (TLS).
                let flushed = futures_lite::future::poll_fn(|cx| {
                    wire.with(|w| Pin::new(&mut w.stream).poll_flush(cx))
                })
                .await;
                if let Err(e) = flushed {
                    tracing::debug!(error = %e, "flush failed");
                    return Ended::Transport;
                }
            }
        }
        if !closing && stall_at.is_none() && !drained && core.closed() {
            stall_at = Some(std::time::Instant::now() + CLOSE_BOUND);
        }
        let deadline = if closing {
            sleep.as_ref().map(|(at, _)| *at)
        } else if stall_at.is_some() {
            stall_at
        } else if core_called {
            core_called = false;
            core.deadline()
        } else {
            sleep.as_ref().map(|(at, _)| *at)
        };
        match (&sleep, deadline) {
            (Some((at, _)), Some(d)) if *at == d => {}
            (_, Some(d)) => sleep = Some((d, Box::pin(R::sleep_until(d)))),
            (_, None) => sleep = None,
        }
        let step = futures_lite::future::poll_fn(|cx| {
            let io = wire.with(|w| {
                if let Some(rest) = w.out.get(w.written..).filter(|r| !r.is_empty()) {
                    match Pin::new(&mut w.stream).poll_write(cx, rest) {
                        Poll::Ready(Ok(0)) => return Some(Step::Eof),
                        Poll::Ready(Ok(n)) => {
                            w.written += n;
                            return Some(Step::Wrote);
                        }
                        Poll::Ready(Err(e)) => return Some(Step::Failed(e)),
                        Poll::Pending => {}
                    }
                }
                // Read while writes are pending; a closing connection reads no more.
                // The bytes go to the core at once: an idle connection's task holds
                // no read buffer.
                if closing {
                    return None;
                }
                let mut small = [0u8; SMALL_READ];
                let buf: &mut [u8] = if large.is_empty() {
                    &mut small
                } else {
                    &mut large
                };
                match Pin::new(&mut w.stream).poll_read(cx, buf) {
                    Poll::Ready(Ok(0)) => Some(Step::Eof),
                    Poll::Ready(Ok(n)) => {
                        // What the bytes provoke (an answer, an ack) is pulled in the
                        // same step when nothing else is waiting to be written.
                        let out = if w.drained() && !w.close {
                            w.reset();
                            Some(&mut w.out)
                        } else {
                            None
                        };
                        let pulled = core.handle_bytes(buf.get(..n).unwrap_or_default(), out);
                        if pulled == Some(Pull::Close) {
                            w.close = true;
                        }
                        // An answer goes out at once, before this loop's bookkeeping
                        // (an error shows again on the next write).
                        let mut wrote = false;
                        if let Some(rest) = w.out.get(w.written..).filter(|r| !r.is_empty())
                            && let Poll::Ready(Ok(n)) = Pin::new(&mut w.stream).poll_write(cx, rest)
                        {
                            w.written += n;
                            wrote = n > 0;
                        }
                        Some(Step::Read {
                            read: n,
                            filled: n == buf.len(),
                            pulled: pulled.is_some() && w.out.len() < PULL_BATCH,
                            wrote,
                        })
                    }
                    Poll::Ready(Err(e)) => Some(Step::Failed(e)),
                    Poll::Pending => None,
                }
            });
            if let Some(step) = io {
                return Poll::Ready(step);
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
            Step::Read {
                read,
                filled,
                pulled,
                wrote,
            } => {
                need_pull = !pulled;
                core_called = true;
                unflushed |= wrote;
                if filled {
                    let grown = match large.len() {
                        0 => heap_start,
                        n => (n * 4).min(LARGE_READ),
                    };
                    if grown > large.len() {
                        large = vec![0; grown];
                    }
                } else if !large.is_empty() {
                    heap_start = FIRST_HEAP_READ;
                    while heap_start < read {
                        heap_start *= 4;
                    }
                    large = Vec::new();
                }
            }
            Step::Wrote => unflushed = true,
            Step::Woken => {
                need_pull = true;
                core_called = true;
            }
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
                core_called = true;
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

async fn close_bounded<R: Runtime, S: AsyncRead + AsyncWrite + Unpin, W: WireAccess<S>>(
    wire: &mut W,
    linger: bool,
) {
    let deadline = std::time::Instant::now() + CLOSE_BOUND;
    let close = async {
        let _ = futures_lite::future::poll_fn(|cx| {
            wire.with(|w| Pin::new(&mut w.stream).poll_close(cx))
        })
        .await;
        if !linger {
            return;
        }
        // Whatever the peer still sends is discarded: the core has ended. The buffer
        // lives only inside each poll, not in the task's future: every connection
        // task is as large as its largest await point.
        loop {
            let read = futures_lite::future::poll_fn(|cx| {
                let mut sink = [0u8; SMALL_READ];
                wire.with(|w| Pin::new(&mut w.stream).poll_read(cx, &mut sink))
            })
            .await;
            if !matches!(read, Ok(n) if n > 0) {
                return;
            }
        }
    };
    futures_lite::future::or(close, R::sleep_until(deadline)).await;
}

#[cfg(test)]
mod tests;
