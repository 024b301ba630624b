//! [`StatusReply`]: the future by which a caller of
//! [`request_status`](crate::cp::ControlPlaneHandle::request_status) waits for its
//! answer in the server's status waiters ([`StatusWaiters`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use iop_core::cp::RequestId;

use super::error::StatusRequestError;
use super::state::CpShared;
use super::status_waiters::StatusOutcome;
#[cfg(doc)]
use super::status_waiters::StatusWaiters;
use crate::runtime::Runtime;

/// The future of one status request's outcome. Its request is registered (with the
/// waker of the task that issued it) before it is made, so its first poll has
/// nothing to check; dropping it before the outcome removes the entry.
pub(crate) struct StatusReply<'a, R: Runtime> {
    shared: &'a Arc<CpShared<R>>,
    request: RequestId,
    /// Polled before: the registered waker may be stale, or the outcome in.
    polled: bool,
    /// The outcome was taken (or the entry is gone): nothing to remove on drop.
    finished: bool,
}

impl<'a, R: Runtime> StatusReply<'a, R> {
    /// The outcome of `request`, registered in `shared`'s waiters with the waker of
    /// the task that will poll this future.
    pub(crate) fn new(shared: &'a Arc<CpShared<R>>, request: RequestId) -> Self {
        Self {
            shared,
            request,
            polled: false,
            finished: false,
        }
    }
}

impl<R: Runtime> Future for StatusReply<'_, R> {
    type Output = StatusOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<StatusOutcome> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(Err(StatusRequestError::Stopped));
        }
        if !this.polled {
            // Registered with this task's waker a moment ago, in the same poll: an
            // outcome since then has woken (or will wake) this task.
            this.polled = true;
            return Poll::Pending;
        }
        let outcome = this
            .shared
            .lock()
            .status_waiters
            .poll(this.request, cx.waker());
        if outcome.is_ready() {
            this.finished = true;
        }
        outcome
    }
}

impl<R: Runtime> Drop for StatusReply<'_, R> {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.lock().status_waiters.give_up(self.request);
        }
    }
}
