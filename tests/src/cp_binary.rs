//! The reference `iop-control-plane` binary (package `iop-server`) as a child process,
//! and a raw HTTP/1.1 GET for its admin API.
//!
//! `env!("CARGO_BIN_EXE_…")` only names binaries of the package under test, so a
//! binary is located by running `$CARGO build -p iop-server --bin NAME
//! --message-format=json` (a no-op when it is fresh, as under `cargo test --workspace`)
//! and reading the `executable` of its `compiler-artifact` message.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Builds (if needed) and locates `iop-control-plane`.
pub fn control_plane_binary() -> PathBuf {
    iop_server_binary("iop-control-plane")
}

/// Builds (if needed) and locates `iop-edge`.
pub fn edge_binary() -> PathBuf {
    iop_server_binary("iop-edge")
}

/// Builds (if needed) and locates the `iop-server` binary `name`.
fn iop_server_binary(name: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "-p", "iop-server", "--bin", name])
        .args(["--message-format=json", "--quiet"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(output.status.success(), "cargo build of {name} failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reported no {name} executable"))
}

/// A running `iop-control-plane`, killed when dropped.
#[derive(Debug)]
pub struct ControlPlaneProcess {
    child: Child,
    /// Where Edges connect.
    pub edges: SocketAddr,
    /// The admin HTTP API.
    pub admin: SocketAddr,
}

impl ControlPlaneProcess {
    /// Starts the binary on 127.0.0.1 port 0 (both listeners) with 1 s heartbeats and
    /// reads the addresses from its first stdout line,
    /// `iop-control-plane listening edges=ADDR admin=ADDR`.
    pub fn start() -> Self {
        Self::start_with(&["--heartbeat-interval-ms", "1000"])
    }

    /// As [`start`](Self::start), with `args` (e.g. `--heartbeat-interval-ms N`,
    /// `--duplicate-policy P`) instead of the 1 s heartbeats.
    pub fn start_with(args: &[&str]) -> Self {
        let mut child = Command::new(control_plane_binary())
            .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .args(["--log-level", "warn"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let field = |name: &str| -> SocketAddr {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        };
        let (edges, admin) = (field("edges="), field("admin="));
        Self {
            child,
            edges,
            admin,
        }
    }
}

impl Drop for ControlPlaneProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` over a fresh connection (`Connection: close`): the status code and body.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(addr, "GET", path, "")
}

/// `POST path` with a JSON `body` over a fresh connection: the status code and body.
pub fn http_post(addr: SocketAddr, path: &str, body: &str) -> (u16, String) {
    http(addr, "POST", path, body)
}

/// One HTTP/1.1 request with `Connection: close`; the answer is read to EOF.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, crate::WAIT).unwrap();
    s.set_read_timeout(Some(crate::WAIT)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {raw:?}"));
    (status, body.to_owned())
}
