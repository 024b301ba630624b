//! An Edge's driver task: dial (TCP, then TLS), drive the connection, redial with the
//! core's backoff, until shut down.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use iop_core::edge::{Edge, EdgeRegistry};

use super::ready::{ConnectedError, DialError};
use super::shared::EdgeShared;
use crate::Runtime;
use crate::io::{self, ConnCore, Pull};
use crate::signal::lock;
use crate::tls::{HandshakeError, MaybeTls};

/// How long one dial may take before it counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) async fn driver<R: Runtime, G: EdgeRegistry + Send + 'static>(
    shared: Arc<EdgeShared<R, G>>,
) {
    loop {
        if shared.aborted.load(Ordering::Acquire) {
            break;
        }
        let (connect_at, deadline, shut_down) = {
            let state = lock(&shared.state);
            (
                state.edge.poll_connect_at(),
                state.edge.poll_timeout(),
                state.edge.is_shut_down(),
            )
        };
        if shut_down {
            break;
        }
        let now = shared.clock.now();
        match connect_at {
            Some(at) if at <= now => {}
            _ => {
                // Wait for the dial time, a command deadline (both in `poll_timeout`),
                // or the application.
                match deadline {
                    Some(at) => {
                        futures_lite::future::or(
                            R::sleep_until(shared.clock.to_std(at)),
                            shared.wake.wait(),
                        )
                        .await
                    }
                    None => shared.wake.wait().await,
                }
                shared.with_inner(|edge, now| edge.handle_timeout(now));
                continue;
            }
        }
        let dial = futures_lite::future::or(
            futures_lite::future::or(async { Dial::Done(dial(&shared).await) }, async {
                R::sleep_until(std::time::Instant::now() + CONNECT_TIMEOUT).await;
                Dial::Done(Err(DialError::TimedOut))
            }),
            async {
                shared.stop.wait().await;
                Dial::Stopped
            },
        )
        .await;
        let stream = match dial {
            Dial::Done(Ok(stream)) => stream,
            Dial::Done(Err(e)) => {
                match &e {
                    DialError::Tls(error) => {
                        tracing::warn!(%error, kind = ?error.kind, "cannot connect to the control plane")
                    }
                    other => tracing::debug!(error = %other, "dial failed"),
                }
                lock(&shared.state).last_dial_error = Some(e);
                shared.advance_addr();
                shared.with_inner(|edge, now| edge.handle_connect_failed(now));
                continue;
            }
            // Shut down while dialling: the loop sees it and ends.
            Dial::Stopped => continue,
        };
        if let Err(e) = shared.with_inner(|edge, now| edge.handle_connected(now)) {
            tracing::debug!(error = %e, "not connecting");
            continue;
        }
        let core = EdgeConn { shared: &shared };
        shared.closed.store(false, Ordering::Release);
        let mut wire = io::Wire::new(stream);
        let ended = io::drive::<R, _, _, _>(&mut wire, &core, &shared.wake).await;
        drop(wire);
        tracing::debug!(?ended, "transport ended");
        // A close the Edge asked for (`Transmit::Close`) has disconnected it already.
        if ended != io::Ended::ByCore {
            shared.with_inner(|edge, now| edge.handle_closed(now));
        }
    }
    let mut state = lock(&shared.state);
    state.done = true;
    for w in state.done_waiters.drain(..) {
        let _ = w.send(());
    }
    for waiter in state.ready_waiters.drain(..) {
        let _ = waiter.send(Err(ConnectedError::Stopped));
    }
    state.session = None;
    state.events.close();
    tracing::debug!("edge driver stopped");
}

enum Dial<S> {
    Done(Result<S, DialError>),
    Stopped,
}

/// TCP, then the TLS handshake when configured.
async fn dial<R: Runtime, G: EdgeRegistry>(
    shared: &EdgeShared<R, G>,
) -> Result<MaybeTls<R::Stream>, DialError> {
    let stream = R::connect(shared.addr())
        .await
        .map_err(|e| DialError::Connect(e.to_string()))?;
    let Some(tls) = &shared.tls else {
        return Ok(MaybeTls::Plain(stream));
    };
    let connector = futures_rustls::TlsConnector::from(tls.config.clone());
    let tls_stream = connector
        .connect(tls.server_name.clone(), stream)
        .await
        .map_err(|e| DialError::Tls(HandshakeError::from_io(&e)))?;
    tracing::debug!("TLS handshake completed");
    Ok(MaybeTls::Client(Box::new(tls_stream)))
}

/// Appends the Edge's output to `out`, up to about `limit` bytes.
fn pull<G: EdgeRegistry>(edge: &mut Edge<G>, out: &mut Vec<u8>, limit: usize) -> Pull {
    io::pull(out, limit, |b| edge.poll_transmit(b))
}

struct EdgeConn<'a, R: Runtime, G: EdgeRegistry> {
    shared: &'a Arc<EdgeShared<R, G>>,
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> ConnCore for EdgeConn<'_, R, G> {
    fn handle_bytes(&self, bytes: &[u8], out: Option<&mut Vec<u8>>) -> Option<Pull> {
        let clock = &self.shared.clock;
        self.shared
            .with_edge_then(
                // The clock is read under the lock, like every other call's.
                |edge| edge.handle_bytes(clock.now(), bytes),
                |edge| out.map(|out| pull(edge, out, io::PULL_BATCH)),
            )
            .1
    }

    fn pull(&self, out: &mut Vec<u8>, limit: usize) -> Pull {
        self.shared.with_edge(|edge| pull(edge, out, limit))
    }

    fn deadline(&self) -> Option<std::time::Instant> {
        let at = lock(&self.shared.state).edge.poll_timeout()?;
        Some(self.shared.clock.to_std(at))
    }

    fn handle_timeout(&self) {
        self.shared.with_inner(|edge, now| edge.handle_timeout(now));
    }

    fn aborted(&self) -> bool {
        self.shared.aborted.load(Ordering::Acquire)
    }
    fn closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    // After its GoAway{SHUTDOWN} the Edge waits for the Control Plane to close: its
    // close then tells that the GoAway was read, so the CP's record of the session
    // says PEER_GO_AWAY by the time `shutdown` returns.
    fn linger(&self) -> bool {
        lock(&self.shared.state).edge.shutdown_requested()
    }
}
