//! Callers of [`request_status`](crate::cp::ControlPlaneHandle::request_status)
//! waiting for their answer: one entry per request in the server's state, written
//! under the server's lock by whoever learns the outcome, read by the caller's
//! future under the same lock.
//!
//! Not a channel per request: that would allocate a shared cell and synchronise on
//! it, although every party already holds the server's lock when it touches the
//! request (BENCHMARKS.md §10). An entry in a table the state keeps costs a lookup
//! instead, and a caller that gives up (drops its future) removes its entry at once.

use std::collections::HashMap;
use std::task::{Poll, Waker};

use iop_core::cp::{IdHasher, RequestId};
use iop_core::proto::EdgeStatusResponse;

use super::error::StatusRequestError;

/// What a status request's caller gets.
pub(crate) type StatusOutcome = Result<EdgeStatusResponse, StatusRequestError>;

/// One request's entry.
#[derive(Debug)]
enum Waiter {
    /// Not answered yet; the task to wake when it is.
    Waiting(Waker),
    /// Answered; the caller has not taken it yet.
    Done(StatusOutcome),
}

/// Status waiters by request (a hash map keeps its table between requests, where a
/// B-tree allocated a node for each one).
#[derive(Debug, Default)]
pub(crate) struct StatusWaiters {
    entries: HashMap<RequestId, Waiter, std::hash::BuildHasherDefault<IdHasher>>,
}

impl StatusWaiters {
    /// Registers `request`, whose caller's task `waker` wakes.
    pub(crate) fn insert(&mut self, request: RequestId, waker: Waker) {
        self.entries.insert(request, Waiter::Waiting(waker));
    }

    /// Gives `request`'s caller its outcome and wakes it. Nothing happens when nobody
    /// waits for it (the caller gave up, or the application did not ask through a
    /// handle).
    pub(crate) fn complete(&mut self, request: RequestId, outcome: StatusOutcome) {
        if let Some(entry @ Waiter::Waiting(_)) = self.entries.get_mut(&request)
            && let Waiter::Waiting(waker) = std::mem::replace(entry, Waiter::Done(outcome))
        {
            waker.wake();
        }
    }

    /// Whether `request`'s caller is still waiting for its outcome: answering it
    /// then needs the response.
    pub(crate) fn is_waiting(&self, request: RequestId) -> bool {
        matches!(self.entries.get(&request), Some(Waiter::Waiting(_)))
    }

    /// Ends every wait still open: those callers find no entry and report the server
    /// stopped. Outcomes already in stay for their callers to take.
    pub(crate) fn wake_all(&mut self) {
        self.entries.retain(|_, waiter| match waiter {
            Waiter::Waiting(waker) => {
                waker.wake_by_ref();
                false
            }
            Waiter::Done(_) => true,
        });
    }

    /// Requests registered and not yet collected by their caller: each has a caller
    /// whose future is alive (a dropped one removes its entry).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The caller gave up (dropped its future): its entry goes.
    pub(super) fn give_up(&mut self, request: RequestId) {
        self.entries.remove(&request);
    }

    /// The caller's side: its outcome once there is one, else it records `waker`.
    pub(super) fn poll(&mut self, request: RequestId, waker: &Waker) -> Poll<StatusOutcome> {
        // One search when the outcome is in (the caller is woken once, when it is);
        // a second one only for a caller polled early.
        match self.entries.remove(&request) {
            Some(Waiter::Done(outcome)) => Poll::Ready(outcome),
            Some(Waiter::Waiting(mut w)) => {
                if !w.will_wake(waker) {
                    w.clone_from(waker);
                }
                self.entries.insert(request, Waiter::Waiting(w));
                Poll::Pending
            }
            // Taken by shutdown.
            None => Poll::Ready(Err(StatusRequestError::Stopped)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn rid(correlation_id: u64) -> RequestId {
        RequestId {
            session_id: 1,
            correlation_id,
        }
    }

    fn counting_waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn an_outcome_wakes_its_caller_once_and_is_taken_once() {
        let (count, waker) = counting_waker();
        let mut waiters = StatusWaiters::default();
        let request = rid(7);
        waiters.insert(request, waker.clone());
        assert!(waiters.poll(request, &waker).is_pending());
        assert!(waiters.is_waiting(request));

        waiters.complete(request, Err(StatusRequestError::TimedOut));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(!waiters.is_waiting(request));
        // A second outcome for the same request (none should come) changes nothing.
        waiters.complete(request, Err(StatusRequestError::Abandoned));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);

        assert!(matches!(
            waiters.poll(request, &waker),
            Poll::Ready(Err(StatusRequestError::TimedOut))
        ));
        assert_eq!(waiters.len(), 0, "the caller took its entry");
    }

    #[test]
    fn the_latest_waker_is_the_one_woken() {
        let (first, first_waker) = counting_waker();
        let (second, second_waker) = counting_waker();
        let mut waiters = StatusWaiters::default();
        let request = rid(1);
        waiters.insert(request, first_waker);
        assert!(waiters.poll(request, &second_waker).is_pending());
        waiters.complete(request, Err(StatusRequestError::TimedOut));
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_outcome_nobody_waits_for_is_dropped() {
        let mut waiters = StatusWaiters::default();
        waiters.complete(rid(3), Err(StatusRequestError::TimedOut));
        assert_eq!(waiters.len(), 0);
        assert!(!waiters.is_waiting(rid(3)));
    }

    #[test]
    fn wake_all_stops_the_open_waits_only() {
        let (count, waker) = counting_waker();
        let mut waiters = StatusWaiters::default();
        for id in 0..3 {
            waiters.insert(rid(id), waker.clone());
        }
        waiters.complete(rid(0), Err(StatusRequestError::TimedOut));
        waiters.wake_all();
        assert_eq!(count.0.load(Ordering::SeqCst), 3, "one each, no more");
        assert!(matches!(
            waiters.poll(rid(1), &waker),
            Poll::Ready(Err(StatusRequestError::Stopped))
        ));
        assert!(
            matches!(
                waiters.poll(rid(0), &waker),
                Poll::Ready(Err(StatusRequestError::TimedOut))
            ),
            "an outcome already in is kept for its caller"
        );
    }
}
