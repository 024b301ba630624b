//! Helpers for the binaries' tests: spawn them, talk HTTP/1.1 to the admin API over a
//! plain TCP socket, make temporary files. Everything binds 127.0.0.1 port 0 and every
//! wait is bounded.
#![allow(dead_code, unreachable_pub)]

pub mod in_process;
pub mod scripted_edge;
pub mod webdriver;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const CP_BIN: &str = env!("CARGO_BIN_EXE_iop-control-plane");
pub const EDGE_BIN: &str = env!("CARGO_BIN_EXE_iop-edge");
pub const DEMO_BIN: &str = env!("CARGO_BIN_EXE_iop-demo");

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends signal `name` (`-STOP`, `-CONT`, `-TERM`…) to `proc`.
pub fn signal(proc: &Proc, name: &str) {
    let pid = proc.0.id().to_string();
    assert!(
        Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap()
            .success()
    );
}

/// A running `iop-control-plane`.
pub struct ControlPlane {
    pub proc: Proc,
    pub edges: SocketAddr,
    pub admin: SocketAddr,
}

/// Starts `iop-control-plane` on port 0 with `extra` flags and reads its addresses.
pub fn control_plane(extra: &[&str]) -> ControlPlane {
    spawn_control_plane("127.0.0.1:0", extra, "warn", Stdio::null())
}

/// [`control_plane`] taking its Edges on `listen` (a port a killed one had).
pub fn control_plane_on(listen: SocketAddr, extra: &[&str]) -> ControlPlane {
    spawn_control_plane(&listen.to_string(), extra, "warn", Stdio::null())
}

/// Starts `iop-control-plane` taking Edges on `listen` with `extra` flags at
/// `log_level`, its stderr to `stderr`, and reads its addresses from its first line.
fn spawn_control_plane(
    listen: &str,
    extra: &[&str],
    log_level: &str,
    stderr: Stdio,
) -> ControlPlane {
    let mut child = Command::new(CP_BIN)
        .args(["--listen", listen, "--admin", "127.0.0.1:0"])
        .args(["--heartbeat-interval-ms", "1000", "--log-level", log_level])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn iop-control-plane");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read addresses");
    let field = |name: &str| -> SocketAddr {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
    };
    let (edges, admin) = (field("edges="), field("admin="));
    ControlPlane {
        proc: Proc(child),
        edges,
        admin,
    }
}

/// Starts `iop-edge` against `cp` with `config` and `extra` flags; stderr is kept in
/// a file so tests can read its logs.
pub fn edge(cp: SocketAddr, edge_id: &str, config: &PathBuf, extra: &[&str]) -> (Proc, PathBuf) {
    let log = temp_path(&format!("{edge_id}.log"));
    let child = Command::new(EDGE_BIN)
        .args(["--control-plane", &cp.to_string(), "--edge-id", edge_id])
        .arg("--config")
        .arg(config)
        .args(["--log-level", "debug"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn iop-edge");
    (Proc(child), log)
}

/// A unique path in the temp directory.
pub fn temp_path(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("iop-cli-test-{}-{n}-{name}", std::process::id()))
}

/// Writes `text` to a new temp file.
pub fn temp_file(name: &str, text: &str) -> PathBuf {
    let path = temp_path(name);
    std::fs::write(&path, text).expect("write temp file");
    path
}

/// Writes `text` to a new temp file only its owner may read (a credential, a token
/// file): the binaries refuse secrets others can read.
pub fn secret_file(name: &str, text: &str) -> PathBuf {
    let path = temp_file(name, text);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
    }
    path
}

/// An HTTP answer: status code and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// One HTTP/1.1 request with `Connection: close`, JSON content and this address as
/// its Host.
pub fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Answer {
    http_with(addr, method, path, &[], body)
}

/// [`http`] with `headers` added, or replacing the defaults (`Host`, `Content-Type`)
/// of the same name.
pub fn http_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    let mut s = TcpStream::connect(addr).expect("connect admin");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let body = body.unwrap_or("");
    let host = addr.to_string();
    let mut all: Vec<(&str, &str)> = vec![("Host", &host), ("Content-Type", "application/json")];
    for (name, value) in headers {
        all.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        all.push((name, value));
    }
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in all {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(s, "{head}Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("http head");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_default();
    Answer {
        status,
        content_type,
        body: body.to_owned(),
    }
}

pub fn get(addr: SocketAddr, path: &str) -> Answer {
    http(addr, "GET", path, None)
}

pub fn post(addr: SocketAddr, path: &str, body: &str) -> Answer {
    http(addr, "POST", path, Some(body))
}

/// Polls `f` every 20 ms until it returns `Some`, for at most 10 s.
pub fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the admin API lists `edge_id` as connected.
pub fn wait_connected(admin: SocketAddr, edge_id: &str) {
    wait_until(&format!("{edge_id} connected"), || {
        let a = get(admin, &format!("/v1/edges/{edge_id}"));
        (a.status == 200 && a.json()["connected"] == true).then_some(())
    });
}

/// An open server-sent-events stream; reads until a substring shows up.
pub struct Sse {
    stream: TcpStream,
    pub seen: String,
}

impl Sse {
    pub fn open(addr: SocketAddr, path: &str) -> Sse {
        let mut stream = TcpStream::connect(addr).expect("connect admin");
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        Sse::answered(stream)
    }

    /// [`open`](Self::open) with extra request `headers`, on a connection the server
    /// closes once the stream ends.
    pub fn open_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Sse {
        let mut stream = TcpStream::connect(addr).expect("connect admin");
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut head = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nConnection: close\r\n"
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        write!(stream, "{head}\r\n").unwrap();
        Sse::answered(stream)
    }

    /// The stream once the server has answered the request: its subscription exists
    /// from then on, so nothing that happens after `open` returns is missed.
    fn answered(stream: TcpStream) -> Sse {
        let mut sse = Sse {
            stream,
            seen: String::new(),
        };
        sse.wait_for("\r\n\r\n");
        sse
    }

    /// Whether the stream ends within `wait`.
    pub fn ends_within(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if !self.read_some() {
                return true;
            }
        }
        false
    }

    /// Reads what has arrived (at most one read's timeout); false once the stream
    /// has ended.
    fn read_some(&mut self) -> bool {
        let mut buf = [0u8; 4096];
        match self.stream.read(&mut buf) {
            Ok(0) => false,
            Ok(n) => {
                self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                true
            }
            Err(e) => panic!("SSE read: {e}"),
        }
    }

    /// Reads whatever arrives for `how_long`.
    pub fn read_for(&mut self, how_long: Duration) {
        let deadline = Instant::now() + how_long;
        while Instant::now() < deadline && self.read_some() {}
    }

    /// Reads until `needle` has been seen (at most 10 s).
    pub fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.seen.contains(needle) {
            assert!(
                Instant::now() < deadline,
                "SSE never showed {needle:?}: {}",
                self.seen
            );
            assert!(self.read_some(), "SSE stream closed: {}", self.seen);
        }
    }
}

/// Starts the Control Plane with `extra` flags, its stderr (info logs) in a file.
pub fn control_plane_logged(extra: &[&str]) -> (ControlPlane, PathBuf) {
    let log = temp_path("cp.log");
    let stderr = std::fs::File::create(&log).expect("log file");
    (
        spawn_control_plane("127.0.0.1:0", extra, "info", stderr.into()),
        log,
    )
}

/// Sends SIGHUP to `cp`.
pub fn hup(cp: &ControlPlane) {
    let status = Command::new("kill")
        .args(["-HUP", &cp.proc.0.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// Whether the file at `path` holds `needle`.
pub fn log_has(path: &Path, needle: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle))
}

/// A throw-away test PKI from `iop-control-plane gen-test-certs` in a new directory
/// (`ca.pem`, `server.pem`, `server.key`, valid for localhost and 127.0.0.1).
pub fn test_pki(name: &str) -> PathBuf {
    let dir = temp_path(name);
    let out = Command::new(CP_BIN)
        .arg("gen-test-certs")
        .arg(&dir)
        .output()
        .expect("run gen-test-certs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// `iopctl`'s binary.
pub const CTL_BIN: &str = env!("CARGO_BIN_EXE_iopctl");

/// `iopctl events --follow --kinds KINDS -o json` against `admin`, as a script would
/// run it: the process (killed when dropped) and its events, one JSON object each, as
/// they come. Its stream is open when this returns.
pub fn follow_events(
    admin: SocketAddr,
    kinds: &str,
) -> (Proc, std::sync::mpsc::Receiver<serde_json::Value>) {
    let mut follower = Proc(
        Command::new(CTL_BIN)
            .args(["--admin", &format!("http://{admin}")])
            .args(["events", "--follow", "--kinds", kinds, "-o", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn iopctl events"),
    );
    let lines = BufReader::new(follower.0.stdout.take().unwrap()).lines();
    let (tx, events) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let event = serde_json::from_str(&line).expect("a JSON event per line");
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    // iopctl says nothing when its stream opens; the API opens one at once.
    std::thread::sleep(Duration::from_millis(300));
    (follower, events)
}

/// Asserts that a conformance run ran `cases` cases and passed every one (none failed
/// or skipped), printing every case's line when not.
pub fn assert_all_passed(report: &iop_conformance::Report, cases: usize) {
    let lines: Vec<String> = report.results.iter().map(ToString::to_string).collect();
    assert_eq!(report.results.len(), cases, "{}", lines.join("\n"));
    assert!(
        report
            .results
            .iter()
            .all(|r| r.verdict == iop_conformance::Verdict::Pass),
        "{}",
        lines.join("\n")
    );
}
