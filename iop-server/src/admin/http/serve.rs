//! The admin API's HTTP/1 server, on hyper's connection builder: a client that is slow
//! to send its headers, or that goes quiet, is let go, and at most so many admin
//! connections are held at once.
//!
//! * **Header timeout** — a request's headers must arrive within
//!   [`AdminServerConfig::header_read_timeout`] (hyper's, with its tokio timer), also
//!   on a kept-alive connection waiting for its next request.
//! * **Idle timeout** — a connection on which nothing was read or written for
//!   [`AdminServerConfig::idle_timeout`] is closed: a client that stopped reading an
//!   event stream, or holds a connection open without using it. (An event stream sends
//!   a keep-alive comment every 15 s, so a live one is never idle.)
//! * **Connection caps** — past [`AdminServerConfig::max_connections`], or past
//!   [`AdminServerConfig::max_connections_per_address`] from one IP address, a new
//!   connection is closed at once (logged at most once a second, with a count): one
//!   client holding idle sockets never darkens the dashboard and `/healthz` for the
//!   others.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use iop_driver::RateLog;
use iop_driver::tls::ServerTls;

/// Limits of the admin HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdminServerConfig {
    /// How long a request's headers may take to arrive (default 10 s).
    pub header_read_timeout: Duration,
    /// How long a connection may go without a byte read or written (default 60 s).
    pub idle_timeout: Duration,
    /// Admin connections held at once (default 256).
    pub max_connections: usize,
    /// Admin connections held at once from one IP address (default 32).
    pub max_connections_per_address: usize,
}

impl Default for AdminServerConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 256,
            max_connections_per_address: 32,
        }
    }
}

/// The admin API's TLS certificate in force, replaceable while it serves (SIGHUP):
/// new connections use the new one. Cloning shares it.
#[derive(Debug, Clone)]
pub struct AdminTls(Arc<std::sync::RwLock<ServerTls>>);

impl AdminTls {
    /// The certificate `tls` in force.
    pub fn new(tls: ServerTls) -> Self {
        Self(Arc::new(std::sync::RwLock::new(tls)))
    }

    /// Puts `tls` in force for the connections that come next.
    pub fn replace(&self, tls: ServerTls) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tls;
    }

    fn current(&self) -> ServerTls {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Serves `app` on `listener` until `stop` turns true; then open connections finish
/// their requests (their event streams end with the Control Plane) and close.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    config: AdminServerConfig,
    stop: watch::Receiver<bool>,
) {
    serve_with(listener, app, config, stop, None).await;
}

/// [`serve`] over HTTPS with `tls` (each connection's handshake must complete within
/// the header timeout).
pub async fn serve_tls(
    listener: TcpListener,
    app: Router,
    config: AdminServerConfig,
    stop: watch::Receiver<bool>,
    tls: AdminTls,
) {
    serve_with(listener, app, config, stop, Some(tls)).await;
}

async fn serve_with(
    listener: TcpListener,
    app: Router,
    config: AdminServerConfig,
    mut stop: watch::Receiver<bool>,
    tls: Option<AdminTls>,
) {
    let permits = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let per_address = Arc::new(Mutex::new(HashMap::new()));
    let mut refused = RateLog::default();
    let mut failed = RateLog::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                failed.hit(|n| tracing::warn!(%error, count = n, "admin accept failed"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(share) =
            AddressShare::take(&per_address, peer.ip(), config.max_connections_per_address)
        else {
            refused.hit(|n| {
                tracing::warn!(
                    count = n,
                    %peer,
                    max = config.max_connections_per_address,
                    "admin connections from one address at their cap: connections closed at once"
                )
            });
            continue;
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refused.hit(|n| {
                tracing::warn!(
                    count = n,
                    max = config.max_connections,
                    "admin connection cap reached: connections closed at once"
                )
            });
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let stop = stop.clone();
        let tls = tls.as_ref().map(AdminTls::current);
        tokio::spawn(async move {
            match tls {
                None => connection(stream, service, config, stop).await,
                Some(tls) => {
                    use tokio_util::compat::{
                        FuturesAsyncReadCompatExt as _, TokioAsyncReadCompatExt as _,
                    };
                    let handshake = tls.accept(stream.compat());
                    match tokio::time::timeout(config.header_read_timeout, handshake).await {
                        Ok(Ok(tls)) => connection(tls.compat(), service, config, stop).await,
                        Ok(Err(error)) => tracing::debug!(%error, "admin TLS handshake failed"),
                        Err(_) => tracing::debug!("admin TLS handshake timed out"),
                    }
                }
            }
            drop((permit, share));
        });
    }
}

/// One connection's place among those of its address; given back when dropped.
struct AddressShare {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl AddressShare {
    /// A place for `ip`, if it holds fewer than `max` connections.
    fn take(counts: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, max: usize) -> Option<Self> {
        let mut held = counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = held.entry(ip).or_default();
        if *n >= max.max(1) {
            return None;
        }
        *n += 1;
        Some(Self {
            counts: counts.clone(),
            ip,
        })
    }
}

impl Drop for AddressShare {
    fn drop(&mut self) {
        let mut held = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = held.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

async fn connection<S>(
    stream: S,
    service: TowerToHyperService<Router>,
    config: AdminServerConfig,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let start = Instant::now();
    let activity = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(Watched {
        inner: stream,
        start,
        activity: activity.clone(),
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let idle = idle(start, activity, config.idle_timeout);
    tokio::pin!(idle);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = idle.as_mut() => return,
        _ = stop.wait_for(|s| *s) => {}
    }
    // Stopping: the request under way finishes, then the connection closes.
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        _ = conn => {}
        () = idle => {}
    }
}

/// Completes once nothing was read or written for `timeout`.
async fn idle(start: Instant, activity: Arc<AtomicU64>, timeout: Duration) {
    loop {
        let last = Duration::from_millis(activity.load(Ordering::Relaxed));
        let quiet = start.elapsed().saturating_sub(last);
        if quiet >= timeout {
            return;
        }
        tokio::time::sleep(timeout - quiet).await;
    }
}

/// A stream that notes when it last moved a byte.
struct Watched<S> {
    inner: S,
    start: Instant,
    /// Milliseconds after `start` of the last byte read or written.
    activity: Arc<AtomicU64>,
}

impl<S> Watched<S> {
    fn moved(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.activity.store(ms, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
