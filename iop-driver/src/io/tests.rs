//! The connection loop against scripted cores and streams.

use super::*;

use crate::test_runtime::{Nop, Patient};

/// A core that records every read it is handed and, when `echo`, writes each byte
/// back; closes after `close_after` bytes.
struct Echo {
    pending: std::sync::Mutex<Vec<u8>>,
    reads: std::sync::Mutex<Vec<usize>>,
    bytes: std::sync::Mutex<Vec<u8>>,
    close_after: usize,
    echo: bool,
}
impl Echo {
    fn new(close_after: usize, echo: bool) -> Self {
        Self {
            pending: Default::default(),
            reads: Default::default(),
            bytes: Default::default(),
            close_after,
            echo,
        }
    }
}
impl ConnCore for Echo {
    fn handle_bytes(&self, bytes: &[u8], out: Option<&mut Vec<u8>>) -> Option<Pull> {
        if self.echo {
            self.pending.lock().unwrap().extend_from_slice(bytes);
        }
        self.reads.lock().unwrap().push(bytes.len());
        self.bytes.lock().unwrap().extend_from_slice(bytes);
        out.map(|out| self.pull(out, PULL_BATCH))
    }
    fn pull(&self, out: &mut Vec<u8>, _limit: usize) -> Pull {
        out.append(&mut self.pending.lock().unwrap());
        if self.bytes.lock().unwrap().len() >= self.close_after {
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
    let core = Echo::new(usize::MAX, true);
    let mut wire = Wire::new(futures_lite::io::Cursor::new(Vec::new()));
    let wake = Signal::new();
    let fut = drive::<Nop, _, _, _>(&mut wire, &core, &wake);
    // A few words: no read buffer, no frame-sized buffer.
    let size = std::mem::size_of_val(&fut);
    assert!(size <= 512, "driver future is {size} bytes");
}

#[test]
fn bytes_read_are_handed_to_the_core_and_its_output_written() {
    let core = Echo::new(5, true);
    let mut wire = Wire::new(futures_lite::io::Cursor::new(b"hello".to_vec()));
    let wake = Signal::new();
    let ended = futures_lite::future::block_on(drive::<Nop, _, _, _>(&mut wire, &core, &wake));
    assert_eq!(ended, Ended::ByCore);
    // The cursor wrote the echo after the 5 bytes it read.
    assert_eq!(wire.stream.into_inner(), b"hellohello");
}

/// A stream that takes at most `room` more bytes (then `Pending` until given
/// more) and never has anything to read.
#[derive(Clone, Default)]
struct Narrow {
    room: std::sync::Arc<std::sync::Mutex<usize>>,
    taken: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    writer: std::sync::Arc<std::sync::Mutex<Option<Waker>>>,
}
impl Narrow {
    fn open(&self, more: usize) {
        *self.room.lock().unwrap() += more;
        if let Some(w) = self.writer.lock().unwrap().take() {
            w.wake();
        }
    }
    fn taken(&self) -> Vec<u8> {
        self.taken.lock().unwrap().clone()
    }
}
impl AsyncRead for Narrow {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Pending
    }
}
impl AsyncWrite for Narrow {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let mut room = self.room.lock().unwrap();
        if *room == 0 {
            *self.writer.lock().unwrap() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(*room);
        *room -= n;
        self.taken.lock().unwrap().extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A core whose output is scripted: `queued` goes out on the next pull, then its
/// `Close` once `close` is set.
#[derive(Default)]
struct Script {
    queued: std::sync::Mutex<Vec<u8>>,
    close: std::sync::atomic::AtomicBool,
}
impl ConnCore for Script {
    fn handle_bytes(&self, _: &[u8], _: Option<&mut Vec<u8>>) -> Option<Pull> {
        None
    }
    fn pull(&self, out: &mut Vec<u8>, _: usize) -> Pull {
        out.append(&mut self.queued.lock().unwrap());
        if self.close.load(std::sync::atomic::Ordering::Relaxed) {
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
fn a_claim_takes_output_only_when_nothing_is_pending() {
    let mut wire = Wire::new(Narrow::default());
    assert_eq!(wire.claim(|_| Pull::Idle), Claim::Nothing);
    assert_eq!(
        wire.claim(|out| {
            out.extend_from_slice(b"first");
            Pull::Idle
        }),
        Claim::Pulled
    );
    // "first" is not written yet: a later claim must not pull (its bytes would
    // have to go after "first", which only the driver may now write).
    let mut pulled = false;
    let claim = wire.claim(|_| {
        pulled = true;
        Pull::Idle
    });
    assert_eq!((claim, pulled), (Claim::Driver, false));
    assert_eq!(wire.out, b"first");
    // A batch that may have left more behind, and the close, go to the driver.
    let mut wire = Wire::new(Narrow::default());
    let big = wire.claim(|out| {
        out.resize(PULL_BATCH, 7);
        Pull::Idle
    });
    assert_eq!(big, Claim::Driver);
    let mut wire = Wire::new(Narrow::default());
    assert_eq!(wire.claim(|_| Pull::Close), Claim::Driver);
    assert!(wire.close);
    assert_eq!(wire.claim(|_| unreachable!()), Claim::Driver);
}

#[test]
fn what_a_claimant_cannot_write_the_driver_writes_first_in_order() {
    let stream = Narrow::default();
    stream.open(4);
    let wire = Mutex::new(Wire::new(stream.clone()));
    let core = Script::default();
    // Another task pulled "hello world" and wrote what the stream took.
    let claim = lock(&wire).claim(|out| {
        out.extend_from_slice(b"hello world");
        Pull::Idle
    });
    assert_eq!(claim, Claim::Pulled);
    assert!(!lock(&wire).write_now());
    assert_eq!(stream.taken(), b"hell");
    // Later output, then the close, queued in the core for the driver.
    core.queued.lock().unwrap().extend_from_slice(b", bye");
    core.close.store(true, std::sync::atomic::Ordering::Relaxed);
    let wake = Signal::new();
    wake.notify();
    let opener = {
        let stream = stream.clone();
        std::thread::spawn(move || {
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(1));
                stream.open(1);
            }
        })
    };
    let ended = futures_lite::future::block_on(drive::<Patient, _, _, _>(&wire, &core, &wake));
    opener.join().unwrap();
    assert_eq!(ended, Ended::ByCore);
    assert_eq!(stream.taken(), b"hello world, bye");
}

#[test]
fn reads_grow_from_the_stack_buffer_to_the_largest_while_they_fill() {
    // 200 KiB waiting: a small read, then heap reads of 4, 16 and 64 KiB, then the
    // largest until the rest is shorter.
    let input: Vec<u8> = (0..200 * 1024).map(|i| (i % 251) as u8).collect();
    let core = Echo::new(input.len(), false);
    let mut wire = Wire::new(futures_lite::io::Cursor::new(input.clone()));
    let wake = Signal::new();
    futures_lite::future::block_on(drive::<Nop, _, _, _>(&mut wire, &core, &wake));
    assert_eq!(*core.bytes.lock().unwrap(), input, "every byte, in order");
    let sizes = core.reads.lock().unwrap().clone();
    let mut expected = vec![SMALL_READ, FIRST_HEAP_READ, 4 * FIRST_HEAP_READ, LARGE_READ];
    let mut left = input.len() - expected.iter().sum::<usize>();
    while left > 0 {
        expected.push(left.min(LARGE_READ));
        left -= left.min(LARGE_READ);
    }
    assert_eq!(sizes, expected);
}

/// A stream whose reads stop at the end of each burst, as a socket's do when the
/// peer's bytes arrive in parts; nothing to write to.
struct Bursts(std::collections::VecDeque<Vec<u8>>);
impl AsyncRead for Bursts {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        let Some(burst) = self.0.front_mut() else {
            return Poll::Ready(Ok(0));
        };
        let n = burst.len().min(buf.len());
        buf[..n].copy_from_slice(&burst[..n]);
        burst.drain(..n);
        if burst.is_empty() {
            self.0.pop_front();
        }
        Poll::Ready(Ok(n))
    }
}
impl AsyncWrite for Bursts {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(b.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[test]
fn a_burst_after_a_large_one_starts_at_the_size_the_last_read_needed() {
    let (a, b, c) = (30_000, 100_000, 1_000);
    let core = Echo::new(a + b + c, false);
    let bursts = [a, b, c].map(|n| vec![7u8; n]).into_iter().collect();
    let mut wire = Wire::new(Bursts(bursts));
    let wake = Signal::new();
    futures_lite::future::block_on(drive::<Nop, _, _, _>(&mut wire, &core, &wake));
    let sizes = core.reads.lock().unwrap().clone();
    let (s, h) = (SMALL_READ, FIRST_HEAP_READ);
    // The first burst ends with a read of 9 264 bytes from the 64 KiB buffer, so the
    // second's heap reads start at 16 KiB; it ends with one of 17 824, so the third's
    // would start at 64 KiB (its 744 bytes after the small read fit in any).
    let rest_a = a - s - h - 4 * h;
    let rest_b = b - s - 4 * h - LARGE_READ;
    assert_eq!(
        sizes,
        [s, h, 4 * h, rest_a, s, 4 * h, LARGE_READ, rest_b, s, c - s]
    );
}
