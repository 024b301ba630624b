//! A level-triggered wake-up flag for one waiting task.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// Set by anyone, consumed by the one task that waits on it. A `notify` before the wait
/// is not lost.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    state: Mutex<SignalState>,
}

#[derive(Debug, Default)]
struct SignalState {
    set: bool,
    waker: Option<Waker>,
}

impl Signal {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Sets the flag and wakes the waiter.
    pub(crate) fn notify(&self) {
        let waker = {
            let mut s = lock(&self.state);
            s.set = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Ready (and clears the flag) once notified.
    pub(crate) fn poll_wait(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = lock(&self.state);
        if s.set {
            s.set = false;
            s.waker = None;
            return Poll::Ready(());
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Waits until notified.
    pub(crate) fn wait(&self) -> Wait<'_> {
        Wait(self)
    }
}

/// The future of [`Signal::wait`].
pub(crate) struct Wait<'a>(&'a Signal);

impl Future for Wait<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.poll_wait(cx)
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it (the state it
/// guards stays consistent: every critical section is panic-free core calls).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
