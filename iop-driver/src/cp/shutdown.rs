//! Stopping a Control Plane server: graceful (GoAway to every connection, a bounded
//! grace, then the rest dropped), awaited by `shutdown` or run in the background when
//! the last handle is dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_channel::oneshot;

use super::state::CpShared;
use crate::Runtime;

/// Stops accepting, sends `GoAway{SHUTDOWN}` everywhere, waits up to the grace for
/// the connections to close, drops the rest, then ends waiters, trackers and
/// subscriptions. Idempotent.
pub(super) async fn shutdown<R: Runtime>(shared: &Arc<CpShared<R>>) {
    let idle = begin(shared);
    let deadline = std::time::Instant::now() + shared.shutdown_grace;
    if crate::runtime::before::<R, _>(deadline, idle)
        .await
        .is_none()
    {
        let idle = {
            let mut state = shared.lock();
            tracing::warn!(
                connections = state.conns.len(),
                "shutdown grace over, dropping connections"
            );
            let (tx, rx) = oneshot::channel();
            state.idle_waiters.push(tx);
            abort_connections(shared, &mut state);
            rx
        };
        let _ = idle.await;
    }
    finish(shared);
}

/// What dropping the last handle does: [`shutdown`] in the background, or with no
/// runtime left to run it on, every connection aborted at once.
pub(super) fn shutdown_in_background<R: Runtime>(shared: Arc<CpShared<R>>) {
    if shared.lock().finished {
        return;
    }
    tracing::info!("last control plane handle dropped: shutting down");
    let background = shared.clone();
    if !R::try_spawn(async move { shutdown(&background).await }) {
        drop(begin(&shared));
        abort_connections(&shared, &mut shared.lock());
        finish(&shared);
    }
}

/// Marks the server stopped, queues the GoAways and stops the accept loop; the
/// receiver resolves once no connection is left.
fn begin<R: Runtime>(shared: &Arc<CpShared<R>>) -> oneshot::Receiver<()> {
    let (tx, rx) = oneshot::channel();
    shared.with(|state, now| {
        if !state.stopped {
            tracing::info!(
                connections = state.conns.len(),
                "control plane shutting down"
            );
        }
        state.stopped = true;
        state.cp.shutdown(now);
        state.idle_waiters.push(tx);
    });
    shared.accept_stop.notify();
    rx
}

fn abort_connections<R: Runtime>(shared: &Arc<CpShared<R>>, state: &mut super::state::CpState) {
    for slot in state.conns.values() {
        slot.aborted.store(true, Ordering::Release);
        slot.wake.notify();
    }
    shared.pump(state);
}

fn finish<R: Runtime>(shared: &Arc<CpShared<R>>) {
    let mut state = shared.lock();
    state.status_waiters.wake_all();
    state.followers.wake_all();
    state.finished = true;
    state.events.close();
    super::state::notify_watchers(&mut state);
    drop(state);
    shared.timer.notify();
}
