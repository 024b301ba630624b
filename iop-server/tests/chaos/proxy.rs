//! A TCP proxy of our own on loopback, between a replica and a NATS server, that
//! passes traffic, black-holes it (bytes read and dropped, connections left open, new
//! ones accepted and never answered: a silent partition), or resets every connection.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PASS: u8 = 0;
const BLACKHOLE: u8 = 1;

/// One proxy: listens on a free loopback port, forwards to `upstream`.
pub struct Proxy {
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy bind");
        let addr = listener.local_addr().unwrap();
        let mode = Arc::new(AtomicU8::new(PASS));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        listener.set_nonblocking(true).unwrap();
        {
            let (mode, conns, stop) = (mode.clone(), conns.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let client = match listener.accept() {
                        Ok((client, _)) => client,
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                    };
                    let _ = client.set_nonblocking(false);
                    let _ = client.set_nodelay(true);
                    if mode.load(Ordering::Relaxed) == BLACKHOLE {
                        // Accepted, and never answered: nothing reaches the server.
                        if let Ok(c) = client.try_clone() {
                            conns.lock().unwrap().push(c);
                        }
                        let mut held = client;
                        std::thread::spawn(move || {
                            let mut buf = [0u8; 4096];
                            while matches!(held.read(&mut buf), Ok(n) if n > 0) {}
                        });
                        continue;
                    }
                    let Ok(server) = TcpStream::connect(upstream) else {
                        continue;
                    };
                    let _ = server.set_nodelay(true);
                    if let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) {
                        conns.lock().unwrap().extend([c, s]);
                    }
                    pump(&client, &server, &mode);
                    pump(&server, &client, &mode);
                }
            });
        }
        Proxy {
            addr,
            mode,
            conns,
            stop,
        }
    }

    /// Traffic flows.
    pub fn pass(&self) {
        self.mode.store(PASS, Ordering::Relaxed);
    }

    /// Traffic is read and dropped; connections stay open.
    pub fn blackhole(&self) {
        self.mode.store(BLACKHOLE, Ordering::Relaxed);
    }

    /// Every open connection is reset; traffic flows again for new ones.
    pub fn reset(&self) {
        for conn in self.conns.lock().unwrap().drain(..) {
            let _ = socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO));
            let _ = conn.shutdown(Shutdown::Both);
        }
        self.pass();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.reset();
    }
}

/// Copies `from` to `to` on a thread of its own while the mode passes; drops the bytes
/// while it black-holes.
fn pump(from: &TcpStream, to: &TcpStream, mode: &Arc<AtomicU8>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let mode = mode.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if mode.load(Ordering::Relaxed) == BLACKHOLE {
                continue;
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
