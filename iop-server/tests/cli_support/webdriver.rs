//! A headless Chromium driven over W3C WebDriver (chromedriver), for the dashboard's
//! browser test. WebDriver is JSON over HTTP: the dozen commands a test needs fit
//! here, with no client library.
//!
//! Chromium and chromedriver come from Debian's `chromium` and `chromium-driver`
//! (`.ci/run` installs them); `IOP_CHROMIUM` and `IOP_CHROMEDRIVER` point elsewhere.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Proc, temp_path};

/// The key of an element reference in WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A browser session; the browser and its driver stop when dropped.
pub struct Browser {
    driver: SocketAddr,
    session: String,
    profile: PathBuf,
    _chromedriver: Proc,
    /// One browser at a time in a test binary: two chromedrivers racing for one port
    /// left a test talking to the other's driver until that one ended.
    _only: std::sync::MutexGuard<'static, ()>,
}

static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// An element of the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Element {
    /// The element as an argument of [`Browser::js`] (`arguments[i]`).
    pub fn reference(&self) -> Value {
        json!({ ELEMENT: self.0 })
    }
}

fn executable(var: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from);
    path.is_file().then_some(path)
}

impl Browser {
    /// Starts chromedriver and a headless Chromium of `width`×`height`; a test without
    /// them fails, saying how to install them (`scripts/test.sh` does).
    pub fn start(width: u32, height: u32) -> Browser {
        Self::start_with(width, height, false)
    }

    /// [`start`](Self::start), accepting a certificate no system CA signed (a test
    /// PKI's) when `insecure_certs`.
    pub fn start_with(width: u32, height: u32, insecure_certs: bool) -> Browser {
        let chromium = executable("IOP_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = executable("IOP_CHROMEDRIVER", "/usr/bin/chromedriver");
        let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
            panic!(
                "chromium or chromedriver is not installed (apt-get install chromium \
                 chromium-driver; scripts/test.sh installs them)"
            );
        };
        let only = ONE_BROWSER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A free port for chromedriver, which takes no port 0.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver");
        let driver = SocketAddr::from(([127, 0, 0, 1], port));
        let mut proc = Proc(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(driver).is_err() {
            assert!(Instant::now() < deadline, "chromedriver never listened");
            assert!(
                matches!(proc.0.try_wait(), Ok(None)),
                "chromedriver exited: is port {port} taken?"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = temp_path("chromium-profile");
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-background-networking".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--user-data-dir={}", profile.display()),
            format!("--window-size={width},{height}"),
        ];
        let capabilities = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "acceptInsecureCerts": insecure_certs,
            "goog:chromeOptions": { "binary": chromium, "args": args },
        }}});
        let answer = call(driver, "POST", "/session", Some(capabilities));
        let session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Browser {
            driver,
            session,
            profile,
            _chromedriver: proc,
            _only: only,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        call(
            self.driver,
            method,
            &format!("/session/{}{path}", self.session),
            body,
        )
    }

    /// Loads `url`.
    pub fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body; `arguments` are `args`) and gives its result.
    pub fn js(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Waits (at most 30 s) until `script` returns something truthy, and gives it;
    /// on timeout, fails with `what` and the page's text.
    pub fn wait(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = self.js(script, json!([]));
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                let text = self.js("return document.body.innerText", json!([]));
                panic!(
                    "timed out waiting for {what}; the page says:\n{}",
                    text.as_str().unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The first element matching the CSS `selector`.
    pub fn find(&self, selector: &str) -> Element {
        let v = self.call(
            "POST",
            "/element",
            Some(json!({ "using": "css selector", "value": selector })),
        );
        Element(
            v[ELEMENT]
                .as_str()
                .unwrap_or_else(|| panic!("no element {selector:?}: {v}"))
                .to_owned(),
        )
    }

    /// Clicks `e` as a user would (it must be visible and enabled).
    pub fn click(&self, e: &Element) {
        self.call("POST", &format!("/element/{}/click", e.0), Some(json!({})));
    }

    /// Types `text` into `e` (WebDriver key codes such as `\u{E007}`, Enter, too).
    pub fn type_text(&self, e: &Element, text: &str) {
        self.call(
            "POST",
            &format!("/element/{}/value", e.0),
            Some(json!({ "text": text })),
        );
    }

    /// Focuses the element `selector` finds and types `text` into it, again with a
    /// fresh element while the page redraws it between the two (a stale reference,
    /// or one not interactable while it is replaced);
    /// a page that keeps redrawing it for 5 s is a failure.
    pub fn focus_and_type(&self, selector: &str, text: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let e = self.find(selector);
            let focus = format!(
                "const e = document.querySelector({}); if (e) e.focus();",
                json!(selector)
            );
            self.js(&focus, json!([]));
            let path = format!("/session/{}/element/{}/value", self.session, e.0);
            let body = json!({ "text": text }).to_string();
            let (status, answer) = exchange(self.driver, "POST", &path, &body)
                .unwrap_or_else(|e| panic!("WebDriver POST {path}: {e}"));
            if status == 200 {
                return;
            }
            let redrawn = answer.contains("stale element reference")
                || answer.contains("element not interactable");
            assert!(
                redrawn && std::time::Instant::now() < deadline,
                "WebDriver POST {path}: {status} {answer}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Empties the input `e`.
    pub fn clear(&self, e: &Element) {
        self.call("POST", &format!("/element/{}/clear", e.0), Some(json!({})));
    }

    /// Resizes the window.
    pub fn resize(&self, width: u32, height: u32) {
        self.call(
            "POST",
            "/window/rect",
            Some(json!({ "width": width, "height": height })),
        );
    }

    /// Writes a PNG screenshot of the window to `path`.
    pub fn screenshot(&self, path: &Path) {
        let v = self.call("GET", "/screenshot", None);
        let png = base64_decode(v.as_str().expect("screenshot data"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).expect("write screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = exchange(
            self.driver,
            "DELETE",
            &format!("/session/{}", self.session),
            "",
        );
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// One WebDriver command; its `value`, or a failure with the driver's error.
fn call(driver: SocketAddr, method: &str, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, text) = exchange(driver, method, path, &body)
        .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
    let json: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("WebDriver {method} {path}: not JSON ({e}): {text}"));
    assert!(
        status == 200,
        "WebDriver {method} {path}: {status} {}",
        json["value"]
    );
    json["value"].clone()
}

/// One HTTP/1.1 exchange; the answer is read by its `Content-Length` (chromedriver
/// keeps connections open).
fn exchange(
    driver: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(driver)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {driver}\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut answer = vec![0; length];
    reader.read_exact(&mut answer)?;
    Ok((status, String::from_utf8_lossy(&answer).into_owned()))
}

/// Standard base64 (screenshots), without a dependency for it.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits: Vec<u32> = text.bytes().filter_map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            n |= d << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}
