//! [`ControlPlaneHandle::wait_for_edge`]: readiness of one Edge as the Control Plane
//! sees it — a live session and a fresh status of it.

use std::time::Duration;

use futures_lite::StreamExt;
use iop_core::cp::{CpEventKind, EdgeView, Reachability};

use super::handle::{ControlPlaneHandle, SubscribeOptions};
use crate::Runtime;

/// Why [`ControlPlaneHandle::wait_for_edge`] gave up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WaitForEdgeError {
    /// The Edge was not connected with a fresh status within the timeout. `view` is
    /// what the Control Plane knew then (`None`: the Edge never connected).
    #[error("edge {edge_id} was not ready within {timeout:?} ({})", describe(.view))]
    TimedOut {
        /// The Edge waited for.
        edge_id: String,
        /// The timeout given.
        timeout: Duration,
        /// Its view at the timeout.
        view: Option<Box<EdgeView>>,
    },
    /// The server is shutting down.
    #[error("control plane is shutting down")]
    Stopped,
}

fn describe(view: &Option<Box<EdgeView>>) -> String {
    match view.as_deref() {
        None => "it never connected".to_owned(),
        Some(v) if v.reachability == Reachability::Connected => {
            "connected, no fresh status yet".to_owned()
        }
        Some(v) => format!("{:?}", v.reachability),
    }
}

/// Events that may change an Edge's readiness; only their arrival matters here.
const WAKING: [CpEventKind; 6] = [
    CpEventKind::SessionAccepted,
    CpEventKind::StatusReceived,
    CpEventKind::StatusTimedOut,
    CpEventKind::StatusAbandoned,
    CpEventKind::EdgeReachable,
    CpEventKind::Closed,
];

impl<R: Runtime> ControlPlaneHandle<R> {
    /// Waits until `edge_id` has a live session, is heard from, and its view holds a
    /// fresh status (the full answer of this session), at most `timeout`; returns that
    /// view. The Control Plane asks a new session for its status on its own
    /// (`CpConfig::auto_status_on_resync`); with that off, this asks once itself.
    pub async fn wait_for_edge(
        &self,
        edge_id: &str,
        timeout: Duration,
    ) -> Result<EdgeView, WaitForEdgeError> {
        let deadline = std::time::Instant::now() + timeout;
        // Subscribed before the first look, so no change falls between the two. Small
        // budgets: a status event over them arrives as `Lagged`, which wakes us too.
        let mut changes = self.subscribe_with(
            SubscribeOptions::default()
                .kinds(WAKING)
                .capacity(16)
                .byte_budget(64 * 1024),
        );
        let mut asked_in_session = None;
        loop {
            let (view, stopped, auto) = {
                let state = self.shared.lock();
                (
                    state.cp.edge(edge_id).cloned(),
                    state.stopped,
                    state.cp.config().auto_status_on_resync,
                )
            };
            if stopped {
                return Err(WaitForEdgeError::Stopped);
            }
            if let Some(view) = &view
                && view.reachability == Reachability::Connected
            {
                if view.fresh {
                    return Ok(view.clone());
                }
                if !auto && asked_in_session != Some(view.session_id) {
                    asked_in_session = Some(view.session_id);
                    let handle = self.clone();
                    let id = edge_id.to_owned();
                    // Its answer (or its failure) arrives as an event: not awaited here.
                    R::spawn(async move {
                        let _ = handle.request_status(&id, Vec::new()).await;
                    });
                }
            }
            let woken = matches!(
                crate::runtime::before::<R, _>(deadline, changes.next()).await,
                Some(Some(_))
            );
            if !woken {
                if std::time::Instant::now() < deadline {
                    // The subscription ended: the server stopped.
                    return Err(WaitForEdgeError::Stopped);
                }
                return Err(WaitForEdgeError::TimedOut {
                    edge_id: edge_id.to_owned(),
                    timeout,
                    view: self.edge(edge_id).map(Box::new),
                });
            }
        }
    }
}
