//! Who may use the admin API, and from where: bearer tokens with a role, and the
//! checks that keep a web page the operator happens to have open from using the API
//! (cross-site request forgery, DNS rebinding).
//!
//! Every request passes, in order:
//! 1. **Host** — an IP address, `localhost`, or a name given with `--admin-host`; any
//!    other name is a page of another site whose name now resolves to this address
//!    (DNS rebinding): 403 `forbidden_host`.
//! 2. **Origin** — when a browser sends one, it must be this API's own
//!    (`http://` or `https://` and the request's Host): 403 `forbidden_origin`.
//! 3. **Token** — with a token file, `Authorization: Bearer <token>` on every route
//!    but `/healthz`, the dashboard's page and assets (they hold no data; the page
//!    asks for a token: [`dashboard`](crate::admin::dashboard)) and `/metrics` with
//!    `--metrics-public`: 401 `unauthorized` with `WWW-Authenticate: Bearer`; a `read` token may not change anything: 403
//!    `forbidden`. Tokens are compared in constant time (as SHA-256 hashes) and never
//!    logged.
//! 4. **Body** — a request that changes something (POST, PUT, PATCH, DELETE) must say
//!    `Content-Type: application/json` (415 `unsupported_media_type`): a web page can
//!    send a "simple" cross-site POST without a preflight only as `text/plain` or a
//!    form; and its body is at most 64 KiB (413 `payload_too_large`).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use iop_core::cp::CredentialHash;

use super::error::ApiError;
use crate::FileError;
use crate::private_file::read_private;

/// Largest request body the admin API reads.
pub const MAX_BODY: usize = 64 * 1024;
/// Shortest token a token file may hold.
pub const MIN_TOKEN_LEN: usize = 16;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Read views, statuses, records, events and metrics.
    Read,
    /// Everything `Read` may, and send commands.
    Operate,
}

/// The admin tokens of `--admin-token-file`: one per line, optionally followed by its
/// role (`read` or `operate`, the default); blank lines and `#` comments are skipped.
/// Only their SHA-256 hashes are kept. `Debug` shows how many there are, no more.
///
/// ```
/// use std::path::Path;
/// use iop_server::admin::{AdminTokens, Role};
///
/// let tokens = AdminTokens::parse(Path::new("tokens"), "
/// ## operators
/// 7f3c0a9e4b2d8c61f0e5 operate
/// 0b9d8e7f6a5c4b3a2918 read
/// ")?;
/// assert_eq!(tokens.role_of(b"0b9d8e7f6a5c4b3a2918"), Some(Role::Read));
/// assert_eq!(tokens.role_of(b"guess"), None);
/// # Ok::<(), iop_server::FileError>(())
/// ```
pub struct AdminTokens {
    entries: Vec<(CredentialHash, Role)>,
}

impl std::fmt::Debug for AdminTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AdminTokens({} tokens)", self.entries.len())
    }
}

impl AdminTokens {
    /// Reads the token file at `path`, which only its owner may read.
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let bytes = read_private(path)?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| FileError::new(path, None, "is not UTF-8 text"))?;
        Self::parse(path, text)
    }

    /// Parses a token file's text, reporting errors against `path` (never quoting a
    /// token).
    pub fn parse(path: &Path, text: &str) -> Result<Self, FileError> {
        let mut entries: Vec<(CredentialHash, Role)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line_no = Some(n + 1);
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let token = words.next().unwrap_or_default();
            let role = match words.next() {
                None | Some("operate") => Role::Operate,
                Some("read") => Role::Read,
                Some(other) => {
                    return Err(FileError::new(
                        path,
                        line_no,
                        format!("unknown role {other:?}: use `read` or `operate`"),
                    ));
                }
            };
            if words.next().is_some() {
                return Err(FileError::new(
                    path,
                    line_no,
                    "expected a token and at most a role",
                ));
            }
            if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(FileError::new(
                    path,
                    line_no,
                    format!(
                        "a token must be at least {MIN_TOKEN_LEN} printable ASCII characters \
                         (e.g. `openssl rand -hex 24`)"
                    ),
                ));
            }
            let hash = CredentialHash::of(token.as_bytes());
            if entries.iter().any(|(h, _)| *h == hash) {
                return Err(FileError::new(
                    path,
                    line_no,
                    "the same token is listed twice",
                ));
            }
            entries.push((hash, role));
        }
        if entries.is_empty() {
            return Err(FileError::new(path, None, "lists no token"));
        }
        Ok(Self { entries })
    }

    /// The role of `presented`, if it is one of the tokens. Every token is compared,
    /// in constant time, whichever matches.
    pub fn role_of(&self, presented: &[u8]) -> Option<Role> {
        let hash = CredentialHash::of(presented);
        let mut role = None;
        for (h, r) in &self.entries {
            if h.ct_eq(&hash) {
                role = Some(*r);
            }
        }
        role
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Never true: a token file lists at least one token.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The admin API's access rules; see the [module docs](self).
#[derive(Debug, Default)]
pub struct AdminAccess {
    /// The tokens, when a token file was given (replaced on SIGHUP). Without one,
    /// only a loopback `--admin` address is allowed (the binary refuses any other).
    pub tokens: Option<super::tokens::TokenBook>,
    /// Host names (besides IP addresses and `localhost`) the API answers to.
    pub hosts: Vec<String>,
    /// `/metrics` without a token.
    pub metrics_public: bool,
}

impl AdminAccess {
    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        if name.parse::<IpAddr>().is_ok() || name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
    }

    fn public(&self, path: &str) -> bool {
        path == "/healthz"
            || (self.metrics_public && path == "/metrics")
            || crate::admin::dashboard::PATHS.contains(&path)
    }
}

/// The name part of a `Host` header value: `[::1]:7701` → `::1`, `a.b:80` → `a.b`.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

fn changes_something(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// A change a `read` token may make: a reserving placement (`POST /v1/placement`),
/// which counts a router's pick on the view until the Edge next reports — the router's
/// API is read scope.
fn routers_may(request: &Request) -> bool {
    request.method() == Method::POST && request.uri().path() == "/v1/placement"
}

fn is_json(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

fn bearer(request: &Request) -> Option<&[u8]> {
    bearer_of(request.headers())
}

/// The bearer token of a request's `headers`, if it has one.
pub(in crate::admin) fn bearer_of(headers: &axum::http::HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| token.trim_ascii())
}

fn unauthorized(message: &str) -> Response {
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"iop-admin\""),
    );
    response
}

/// The middleware that applies [`AdminAccess`] (steps 1 to 3) to every request.
pub async fn guard(
    State(access): State<Arc<AdminAccess>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if host.is_empty() || !access.host_allowed(&host) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            "this Host is not the admin API's: give the name with --admin-host, or use an IP address or localhost",
        )
        .into_response();
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let own = |scheme: &str| {
            origin
                .to_str()
                .ok()
                .and_then(|o| o.strip_prefix(scheme))
                .is_some_and(|rest| rest.eq_ignore_ascii_case(&host))
        };
        if !own("http://") && !own("https://") {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                "requests from another site's pages are refused",
            )
            .into_response();
        }
    }
    if let Some(tokens) = &access.tokens
        && !access.public(request.uri().path())
    {
        let Some(token) = bearer(&request) else {
            return unauthorized("an admin token is required: Authorization: Bearer <token>");
        };
        match tokens.role_of(token) {
            None => return unauthorized("the admin token is not valid"),
            Some(Role::Read) if changes_something(request.method()) && !routers_may(&request) => {
                return ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "this token may only read: changes need an `operate` token",
                )
                .into_response();
            }
            Some(_) => {}
        }
    }
    next.run(request).await
}

/// The middleware of the body rules (step 4), on the handlers that take a body: a
/// method a route does not have is answered 405, whatever its body.
pub async fn body_guard(request: Request, next: Next) -> Response {
    if !changes_something(request.method()) {
        return next.run(request).await;
    }
    if !is_json(&request) {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON: Content-Type: application/json",
        )
        .into_response();
    }
    let (parts, body) = request.into_parts();
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body may be at most {MAX_BODY} bytes"),
        )
        .into_response()
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|len| len > MAX_BODY) {
        return too_large();
    }
    match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(_) => too_large(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_addresses_localhost_or_named() {
        let access = AdminAccess {
            hosts: vec!["cp.example".into()],
            ..AdminAccess::default()
        };
        for ok in [
            "127.0.0.1:7701",
            "[::1]:7701",
            "localhost:7701",
            "LOCALHOST",
            "10.0.0.5",
            "cp.example:7701",
        ] {
            assert!(access.host_allowed(ok), "{ok}");
        }
        for refused in [
            "evil.example:7701",
            "localhost.evil.example",
            "cp.example.evil",
        ] {
            assert!(!access.host_allowed(refused), "{refused}");
        }
    }

    #[test]
    fn token_files_are_checked_without_quoting_tokens() {
        let p = Path::new("t");
        let secret = "s3cret-s3cret-s3cret";
        for (text, needle) in [
            ("", "lists no token"),
            ("short", "at least 16"),
            (&format!("{secret} admin")[..], "unknown role"),
            (&format!("{secret}\n{secret} read")[..], "twice"),
        ] {
            let err = AdminTokens::parse(p, text).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
            assert!(!err.contains(secret), "{err}");
        }
        let tokens = AdminTokens::parse(p, &format!("{secret}\n")).unwrap();
        assert_eq!(tokens.role_of(secret.as_bytes()), Some(Role::Operate));
        assert!(!format!("{tokens:?}").contains(secret));
    }
}
