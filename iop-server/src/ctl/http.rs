//! `iopctl`'s HTTP/1.1 client of the admin API: one connection per call (hyper's
//! connection API, no pool), HTTPS through the same rustls client as the Edge, every
//! call bounded in time and every body bounded in size.

use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use iop_driver::tls::ClientTls;
use tokio::net::TcpStream;
use tokio_util::compat::{FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};
use zeroize::Zeroizing;

use super::CtlError;
use super::sse::EventStream;

/// The largest answer body read (an Edge list of a large fleet fits many times over).
const MAX_ANSWER: usize = 64 * 1024 * 1024;

/// Where the admin API is: `http://HOST:PORT` or `https://HOST:PORT` (no path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminUrl {
    /// HTTPS (verified against `--ca-file`) rather than plain HTTP.
    pub https: bool,
    /// The host name or IP address, as the certificate and the `Host` header name it.
    pub host: String,
    /// The port (default 80 / 443).
    pub port: u16,
}

impl FromStr for AdminUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (https, rest) = if let Some(rest) = s.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = s.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!(
                "{s:?}: expected http://HOST:PORT or https://HOST:PORT"
            ));
        };
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') || rest.contains('@') {
            return Err(format!(
                "{s:?}: expected http://HOST:PORT or https://HOST:PORT, no path"
            ));
        }
        let default_port = if https { 443 } else { 80 };
        // An IPv6 literal is bracketed: [::1]:7701.
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => (
                host,
                port.parse::<u16>()
                    .map_err(|_| format!("{s:?}: {port:?} is not a port"))?,
            ),
            _ => (rest, default_port),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{s:?}: no host"));
        }
        Ok(Self {
            https,
            host: host.to_owned(),
            port,
        })
    }
}

impl AdminUrl {
    /// The `Host` header's value.
    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// An answer: its HTTP status and body.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body, parsed as JSON (`Null` when it is not).
    pub json: serde_json::Value,
}

/// The admin API, as `iopctl` calls it.
pub struct Admin {
    url: AdminUrl,
    token: Option<Zeroizing<String>>,
    tls: Option<ClientTls>,
    timeout: Duration,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Admin {
    /// The admin API at `url`, with a bearer `token` if given, verified with `tls` for
    /// `https://`; each call gives up after `timeout`.
    pub fn new(
        url: AdminUrl,
        token: Option<Zeroizing<String>>,
        tls: Option<ClientTls>,
        timeout: Duration,
    ) -> Result<Self, CtlError> {
        if url.https && tls.is_none() {
            return Err(CtlError::Usage(
                "an https:// admin URL needs --ca-file (the CA of its certificate)".into(),
            ));
        }
        Ok(Self {
            url,
            token,
            tls,
            timeout,
        })
    }

    /// `method path` with a JSON `body`, and its answer.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, CtlError> {
        let exchange = async {
            let mut sender = self.connect().await?;
            let request = self.request(method, path, body, &[])?;
            let response = sender.send_request(request).await.map_err(CtlError::http)?;
            let status = response.status().as_u16();
            let bytes = Limited::new(response.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| CtlError::Unreachable(format!("reading the answer: {e}")))?
                .to_bytes();
            let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
            Ok(Reply { status, json })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| CtlError::Unreachable(format!("no answer within {:?}", self.timeout)))?
    }

    /// The server-sent events of `path` (`/v1/events?...`), resuming after `last_id`.
    /// Connecting is bounded by the timeout; the stream then lasts as long as the API
    /// keeps it open.
    pub async fn events(&self, path: &str, last_id: Option<&str>) -> Result<EventStream, CtlError> {
        let open = async {
            let mut sender = self.connect().await?;
            let headers: Vec<(&str, &str)> = match last_id {
                Some(id) => vec![("last-event-id", id), ("accept", "text/event-stream")],
                None => vec![("accept", "text/event-stream")],
            };
            let request = self.request("GET", path, None, &headers)?;
            let response = sender.send_request(request).await.map_err(CtlError::http)?;
            let status = response.status().as_u16();
            if status != 200 {
                let bytes = Limited::new(response.into_body(), MAX_ANSWER)
                    .collect()
                    .await
                    .map(|c| c.to_bytes())
                    .unwrap_or_default();
                let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
                return Err(CtlError::from_reply(&Reply { status, json }));
            }
            Ok(EventStream::new(response.into_body()))
        };
        tokio::time::timeout(self.timeout, open)
            .await
            .map_err(|_| CtlError::Unreachable(format!("no answer within {:?}", self.timeout)))?
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
    ) -> Result<hyper::Request<Full<Bytes>>, CtlError> {
        let mut builder = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.url.authority())
            .header("user-agent", concat!("iopctl/", env!("CARGO_PKG_VERSION")));
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {}", token.as_str()));
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let body = match body {
            Some(json) => {
                builder = builder.header("content-type", "application/json");
                Bytes::from(json.to_string())
            }
            None => Bytes::new(),
        };
        builder
            .body(Full::new(body))
            .map_err(|e| CtlError::Usage(format!("cannot build the request: {e}")))
    }

    /// A new connection, its HTTP/1 exchange running in the background.
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, CtlError> {
        let addr = (self.url.host.as_str(), self.url.port);
        let tcp = TcpStream::connect(addr).await.map_err(|e| {
            CtlError::Unreachable(format!("cannot connect to {}: {e}", self.url.authority()))
        })?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            Some(tls) if self.url.https => {
                let stream = tls
                    .connect(tcp.compat())
                    .await
                    .map_err(|e| CtlError::Unreachable(format!("TLS handshake: {e}")))?;
                handshake(TokioIo::new(stream.compat())).await
            }
            _ => handshake(TokioIo::new(tcp)).await,
        }
    }
}

async fn handshake<I>(io: I) -> Result<SendRequest<Full<Bytes>>, CtlError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(CtlError::http)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_urls_parse_with_and_without_a_port() {
        let url: AdminUrl = "http://127.0.0.1:7701".parse().unwrap();
        assert_eq!(
            (url.https, url.host.as_str(), url.port),
            (false, "127.0.0.1", 7701)
        );
        let url: AdminUrl = "https://cp.example/".parse().unwrap();
        assert_eq!(
            (url.https, url.host.as_str(), url.port),
            (true, "cp.example", 443)
        );
        let url: AdminUrl = "http://[::1]:9".parse().unwrap();
        assert_eq!(
            (url.host.as_str(), url.port, url.authority().as_str()),
            ("::1", 9, "[::1]:9")
        );
        for bad in [
            "127.0.0.1:7701",
            "http://",
            "http://h:x",
            "http://h/v1",
            "ftp://h",
        ] {
            assert!(bad.parse::<AdminUrl>().is_err(), "{bad}");
        }
    }
}
