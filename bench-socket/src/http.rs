//! A blocking HTTP/1.0 GET on loopback, for timing the admin API from outside the
//! server process (HTTP/1.0: the answer is the bytes until close, never chunked).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One answer: its status, body and how long it took from connect to the last byte.
#[derive(Debug)]
pub struct Got {
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
    /// Connect to close.
    pub elapsed: Duration,
}

/// `GET path` from `addr`.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<Got> {
    let start = Instant::now();
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let elapsed = start.elapsed();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line: {head}")))?;
    Ok(Got {
        status,
        body: raw[split + 4..].to_vec(),
        elapsed,
    })
}
