//! A TCP proxy on plain threads (so it favours no async runtime) whose live
//! connections can be cut, frozen or partitioned.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// A proxy in front of `upstream` on 127.0.0.1. Dropping it cuts every connection and
/// stops its threads.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    stopped: AtomicBool,
    conns: Mutex<Vec<Conn>>,
}

#[derive(Debug)]
struct Conn {
    down: TcpStream,
    up: TcpStream,
    frozen: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
}

impl Conn {
    fn close(&self) {
        let _ = self.down.shutdown(Shutdown::Both);
        let _ = self.up.shutdown(Shutdown::Both);
    }
}

impl Proxy {
    /// Listens on 127.0.0.1 (port 0) and forwards each connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind(crate::localhost()).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let accept_shared = shared.clone();
        thread::spawn(move || {
            for down in listener.incoming() {
                if accept_shared.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(down) = down else { continue };
                let Ok(up) = TcpStream::connect_timeout(&upstream, crate::WAIT) else {
                    continue;
                };
                let _ = (down.set_nodelay(true), up.set_nodelay(true));
                let frozen = Arc::new(AtomicBool::new(false));
                let held = Arc::new(AtomicBool::new(false));
                let (Ok(down2), Ok(up2)) = (down.try_clone(), up.try_clone()) else {
                    continue;
                };
                let conn = Conn {
                    down: down2,
                    up: up2,
                    frozen: frozen.clone(),
                    held: held.clone(),
                };
                if accept_shared.stopped.load(Ordering::SeqCst) {
                    conn.close();
                    return;
                }
                // Registered before a byte flows, so `cut`, `freeze` and `partition`
                // called once a session is up always see this connection.
                accept_shared.conns.lock().unwrap().push(conn);
                pump(
                    down.try_clone(),
                    up.try_clone(),
                    frozen.clone(),
                    held.clone(),
                );
                pump(up.try_clone(), down.try_clone(), frozen, held);
            }
        });
        Self { addr, shared }
    }

    /// Where Edges should connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every connection open now (both sides see the transport end).
    pub fn cut(&self) {
        for conn in self.shared.conns.lock().unwrap().drain(..) {
            conn.close();
        }
    }

    /// Stops forwarding on every connection open now: bytes are read and dropped, so
    /// each peer hears silence; a close from either side still closes both. New
    /// connections are forwarded normally.
    pub fn freeze(&self) {
        for conn in self.shared.conns.lock().unwrap().iter() {
            conn.frozen.store(true, Ordering::SeqCst);
        }
    }

    /// A network partition on every connection open now: as [`freeze`](Self::freeze),
    /// and a close from either side is not passed on either, so a peer that dies
    /// (its FIN or RST lost in the partition) leaves the other side's connection
    /// half-open until the other side closes it itself, or the proxy is cut or dropped.
    pub fn partition(&self) {
        for conn in self.shared.conns.lock().unwrap().iter() {
            conn.held.store(true, Ordering::SeqCst);
            conn.frozen.store(true, Ordering::SeqCst);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.cut();
        // Wake the accept loop so it sees `stopped`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies `from` → `to` on a thread until either ends, then closes both (unless the
/// connection is `held`: then both stay open, registered, until `cut`).
fn pump(
    from: std::io::Result<TcpStream>,
    to: std::io::Result<TcpStream>,
    frozen: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
) {
    let (Ok(mut from), Ok(mut to)) = (from, to) else {
        return;
    };
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if frozen.load(Ordering::SeqCst) {
                continue;
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        if held.load(Ordering::SeqCst) {
            return;
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}
