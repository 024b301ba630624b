//! The accept loop: each connection registered with the core (after its TLS
//! handshake, for TLS) and given its task; connections over the caps refused.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iop_core::cp::{ConnectionId, PeerIdentity};
use tracing::Instrument;

use super::conn_task::conn_task;
use super::direct::Direct;
use super::proxy_header::{ProxyHeaderError, read_header};
use super::state::{ConnSlot, CpShared, CpState};
use crate::Runtime;
use crate::io;
use crate::signal::lock;
use crate::tls::{CertIdentity, HandshakeError, MaybeTls};

/// TLS handshakes at a time for connections over the cap, so that they can be told
/// `OVERLOADED` (past it they are closed without a word).
const MAX_REFUSAL_HANDSHAKES: usize = 64;

/// What the accept loop does with a TLS connection.
enum Admit {
    /// Under the cap: handshake, then serve.
    Handshake,
    /// Over the cap: handshake, then the core refuses it `OVERLOADED`.
    Refuse,
    /// Over the cap with too many refusals under way: close at once.
    Drop,
    /// Its address already holds its share of connections awaiting their handshake
    /// or hello: close at once.
    DropPerAddress,
}

pub(super) async fn accept_loop<R: Runtime>(shared: Arc<CpShared<R>>, listener: R::Listener) {
    loop {
        let accepted =
            futures_lite::future::or(async { Some(R::accept(&listener).await) }, async {
                shared.accept_stop.wait().await;
                None
            })
            .await;
        let (stream, peer) = match accepted {
            None => break,
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                // Out of file descriptors and the like: back off briefly, never spin.
                tracing::warn!(error = %e, "accept failed");
                R::sleep_until(std::time::Instant::now() + Duration::from_millis(50)).await;
                continue;
            }
        };
        let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
        if let Some(proxy) = &shared.proxy_protocol
            && proxy.trusts(peer.ip())
        {
            read_proxy_header(&shared, stream, peer);
            continue;
        }
        if !admit(&shared, stream, peer) {
            break;
        }
    }
    drop(listener);
    shared.with_state(|state| state.accept_done = true);
    tracing::debug!("accept loop stopped");
}

/// Admits one connection from `peer` (its real source): TLS handshake or not, the caps.
/// False when the server is stopping.
fn admit<R: Runtime>(shared: &Arc<CpShared<R>>, stream: R::Stream, peer: SocketAddr) -> bool {
    let tls = lock(&shared.tls).clone();
    match &tls {
        None => start_conn(shared, MaybeTls::Plain(stream), peer, None),
        Some(tls) => {
            let admitted = shared.with_state(|state| {
                if state.stopped {
                    return None;
                }
                // A handshake awaits its hello too: one address holding every
                // handshake slot would keep every other Edge out.
                let ip = peer.ip();
                let held = state.pending_by_ip.get(&ip).copied().unwrap_or(0)
                    + state.handshaking_by_ip.get(&ip).copied().unwrap_or(0);
                if held >= shared.max_pending_hellos_per_ip {
                    state.tls_stats.refused_per_address += 1;
                    return Some(Admit::DropPerAddress);
                }
                if state.conns.len() + state.handshaking < shared.max_connections {
                    state.handshaking += 1;
                    *state.handshaking_by_ip.entry(ip).or_default() += 1;
                    return Some(Admit::Handshake);
                }
                // Over the cap the Edge is still told OVERLOADED with its
                // retry_after, as over plain TCP: after a handshake, by the core.
                // A few such handshakes at a time; past them, a bare close.
                state.tls_stats.refused_over_capacity += 1;
                if state.refusing < MAX_REFUSAL_HANDSHAKES {
                    state.refusing += 1;
                    return Some(Admit::Refuse);
                }
                Some(Admit::Drop)
            });
            let refuse = match admitted {
                None => return false,
                Some(Admit::Drop) => {
                    shared.with_state(|state| {
                        state.refusals.hit(|count| {
                            tracing::warn!(%peer, count, "connection cap reached: connections dropped before their TLS handshake");
                        });
                    });
                    return true;
                }
                Some(Admit::DropPerAddress) => {
                    shared.with_state(|state| {
                        state.refusals.hit(|count| {
                            tracing::warn!(%peer, count, limit = shared.max_pending_hellos_per_ip, "too many connections from one address awaiting their TLS handshake or hello: closed");
                        });
                    });
                    return true;
                }
                Some(Admit::Handshake) => false,
                Some(Admit::Refuse) => true,
            };
            let acceptor = futures_rustls::TlsAcceptor::from(tls.config.clone());
            let span = tracing::info_span!("tls_accept", %peer);
            R::spawn(
                handshake::<R>(shared.clone(), acceptor, stream, peer, refuse).instrument(span),
            );
            true
        }
    }
}

/// Reads the PROXY header of a trusted proxy's connection (bounded in number and by
/// the hello timeout), then admits the connection as from the source it names.
fn read_proxy_header<R: Runtime>(
    shared: &Arc<CpShared<R>>,
    mut stream: R::Stream,
    peer: SocketAddr,
) {
    let room = shared.with_state(|state| {
        let room = state.reading_proxy_headers < shared.max_proxy_reads;
        if room {
            state.reading_proxy_headers += 1;
        } else {
            state.refusals.hit(|count| {
                tracing::warn!(%peer, count, "too many PROXY headers awaited at once: connections closed");
            });
        }
        room
    });
    if !room {
        return;
    }
    let shared = shared.clone();
    R::spawn(async move {
        let deadline = std::time::Instant::now() + shared.handshake_timeout;
        let read = crate::runtime::before::<R, _>(deadline, read_header(&mut stream))
            .await
            .unwrap_or(Err(ProxyHeaderError::TimedOut));
        shared.with_state(|state| state.reading_proxy_headers -= 1);
        match read {
            Ok(source) => {
                let source = source.map_or(peer, |s| SocketAddr::new(s.ip().to_canonical(), s.port()));
                admit(&shared, stream, source);
            }
            Err(error) => shared.with_state(|state| {
                state.refusals.hit(|count| {
                    tracing::warn!(%peer, %error, count, "a trusted proxy's connection without a valid PROXY header: closed");
                });
            }),
        }
    });
}

/// Registers a connection (after its TLS handshake, if any) with the core and spawns
/// its driver task. False when the server is stopping.
fn start_conn<R: Runtime>(
    shared: &Arc<CpShared<R>>,
    stream: MaybeTls<R::Stream>,
    peer: SocketAddr,
    identity: Option<Box<dyn PeerIdentity>>,
) -> bool {
    let wire = Arc::new(Mutex::new(io::Wire::new(stream)));
    let direct = match &lock(&wire).stream {
        MaybeTls::Plain(_) => Some(wire.clone() as Arc<dyn Direct>),
        _ => None,
    };
    let ip = peer.ip();
    let slot = Arc::new(ConnSlot {
        direct,
        peer: Some(ip),
        pending_hello: AtomicBool::new(true),
        ..ConnSlot::default()
    });
    let limit = shared.max_pending_hellos_per_ip;
    let conn = shared.with(|state, now| {
        if state.stopped {
            return None;
        }
        state.next_conn += 1;
        let conn = ConnectionId(state.next_conn);
        let pending = state.pending_by_ip.entry(ip).or_default();
        // Ids are never reused, so neither call can fail.
        let connected = if *pending >= limit {
            slot.pending_hello.store(false, Ordering::Release);
            state.refusals.hit(|count| {
                tracing::warn!(%ip, count, limit, "too many connections from one address awaiting their hello: refused OVERLOADED");
            });
            state.cp.handle_connect_refused(now, conn)
        } else {
            *pending += 1;
            state.cp.handle_connect_with_identity(now, conn, identity)
        };
        if state.pending_by_ip.get(&ip) == Some(&0) {
            state.pending_by_ip.remove(&ip);
        }
        connected.ok()?;
        state.conns.insert(conn, slot.clone());
        Some(conn)
    });
    let Some(conn) = conn else { return false };
    // A root span: after a TLS handshake this runs inside the handshake's span.
    let span = tracing::info_span!(
        parent: None,
        "cp_conn",
        conn = conn.0,
        %peer,
        edge_id = tracing::field::Empty
    );
    R::spawn(conn_task(shared.clone(), conn, slot, wire).instrument(span));
    true
}

/// One TLS handshake, bounded by the hello timeout; then the connection starts.
async fn handshake<R: Runtime>(
    shared: Arc<CpShared<R>>,
    acceptor: futures_rustls::TlsAcceptor,
    stream: R::Stream,
    peer: SocketAddr,
    refuse: bool,
) {
    // Counted under `refusing` (over the cap) or `handshaking` until it ends.
    let ip = peer.ip();
    let done = move |state: &mut CpState| {
        if refuse {
            state.refusing -= 1;
            return;
        }
        state.handshaking -= 1;
        if let Some(n) = state.handshaking_by_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                state.handshaking_by_ip.remove(&ip);
            }
        }
    };
    let deadline = std::time::Instant::now() + shared.handshake_timeout;
    let result = crate::runtime::before::<R, _>(deadline, acceptor.accept(stream))
        .await
        .map_or_else(
            || Err(HandshakeError::timed_out()),
            |done| done.map_err(|e| HandshakeError::from_io(&e)),
        );
    let tls = match result {
        Ok(tls) => tls,
        Err(error) => {
            shared.with_state(|state| {
                done(state);
                state.failed_handshakes.hit(|count| {
                    tracing::warn!(%error, kind = ?error.kind, count, "TLS handshakes failed: edge connections refused");
                });
                state.tls_stats.handshakes_failed += 1;
                state.tls_stats.last_failure = Some(error);
            });
            return;
        }
    };
    // rustls verified the chain; the end-entity certificate is the identity.
    let identity = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| {
            Box::new(CertIdentity::new(cert.clone().into_owned())) as Box<dyn PeerIdentity>
        });
    tracing::debug!(
        client_certificate = identity.is_some(),
        "TLS handshake completed"
    );
    shared.with_state(|state| {
        done(state);
        state.tls_stats.handshakes_completed += 1;
    });
    start_conn(&shared, MaybeTls::Server(Box::new(tls)), peer, identity);
}
