//! HTTP/1.1 to the admin API that gives up instead of panicking: a paused or killed
//! replica answers nothing, and that is part of the run.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Status code and body, or `None` when the replica did not answer within `timeout`.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

pub fn get_json(addr: SocketAddr, path: &str, timeout: Duration) -> Option<serde_json::Value> {
    match request(addr, "GET", path, None, timeout)? {
        (200, body) => serde_json::from_str(&body).ok(),
        _ => None,
    }
}

/// The events of `/v1/events?since=0` a replica streams within `listen`, as (name,
/// data) pairs.
pub fn all_events(addr: SocketAddr, listen: Duration) -> Option<Vec<(String, String)>> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
    write!(
        s,
        "GET /v1/events?since=0 HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .ok()?;
    let deadline = std::time::Instant::now() + listen;
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    while std::time::Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let (head, body) = (String::from_utf8_lossy(&raw[..split]), &raw[split + 4..]);
    let text = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        String::from_utf8_lossy(&dechunk(body)).into_owned()
    } else {
        String::from_utf8_lossy(body).into_owned()
    };
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let (mut name, mut data) = (None, None);
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = Some(n.to_owned());
            }
            if let Some(d) = line.strip_prefix("data: ") {
                data = Some(d.to_owned());
            }
        }
        if let (Some(name), Some(data)) = (name, data) {
            out.push((name, data));
        }
    }
    Some(out)
}

/// The body of a chunked transfer (a last chunk cut off is kept as far as it came).
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok());
        let Some(size) = size.filter(|s| *s > 0) else {
            break;
        };
        let rest = &body[end + 2..];
        let take = size.min(rest.len());
        out.extend_from_slice(&rest[..take]);
        body = rest.get(take + 2..).unwrap_or(&[]);
    }
    out
}
