//! [`Flag`]: a flag set once, which any number of tasks can await — how a command's
//! handler learns it is asked to stop, and how the cancellation learns it returned
//! ([`Running`], the two of one running command).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::signal::lock;

/// A flag set once, which any number of tasks can await.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flag(Arc<Mutex<FlagState>>);

#[derive(Debug, Default)]
struct FlagState {
    set: bool,
    wakers: Vec<Waker>,
}

impl Flag {
    /// Sets the flag and wakes every waiter; later sets do nothing.
    pub(crate) fn set(&self) {
        let wakers = {
            let mut s = lock(&self.0);
            s.set = true;
            std::mem::take(&mut s.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    pub(crate) fn is_set(&self) -> bool {
        lock(&self.0).set
    }

    /// Resolves once the flag is set.
    pub(crate) fn wait(&self) -> FlagWait {
        FlagWait(self.clone())
    }
}

/// The future of [`Flag::wait`].
#[derive(Debug)]
pub(crate) struct FlagWait(Flag);

impl Future for FlagWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = lock(&(self.0).0);
        if s.set {
            return Poll::Ready(());
        }
        // One waker per waiting task: a task polled again replaces its own.
        if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            s.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// A command whose handler runs: the flag its context watches, and the flag set once
/// the handler returned.
#[derive(Debug, Clone, Default)]
pub(crate) struct Running {
    pub(crate) cancel: Flag,
    pub(crate) returned: Flag,
}
