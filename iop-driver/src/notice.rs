//! Bounded per-subscriber event queues: a slow subscriber loses events and is told
//! how many, never slowing down the driver that publishes them.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};

use futures_core::Stream;

use crate::signal::lock;

/// One item of a subscription stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Notice<T> {
    /// The next event.
    Event(T),
    /// This many events were dropped here because the subscriber fell behind.
    Lagged(u64),
}

#[derive(Debug)]
struct Queue<T> {
    items: VecDeque<Notice<T>>,
    capacity: usize,
    /// Events dropped since the last `Lagged` marker was queued.
    lagged: u64,
    waker: Option<Waker>,
    closed: bool,
}

/// A stream of [`Notice`]s for one subscriber. Ends when the publisher is gone.
#[derive(Debug)]
pub struct Subscription<T> {
    queue: Arc<Mutex<Queue<T>>>,
}

/// The publishing side: a list of weakly held subscriber queues.
#[derive(Debug)]
pub(crate) struct Publisher<T> {
    subscribers: Vec<Weak<Mutex<Queue<T>>>>,
}

impl<T> Default for Publisher<T> {
    fn default() -> Self {
        Self {
            subscribers: Vec::new(),
        }
    }
}

impl<T: Clone> Publisher<T> {
    /// A new subscriber holding at most `capacity` undelivered events (at least 1).
    pub(crate) fn subscribe(&mut self, capacity: usize) -> Subscription<T> {
        let queue = Arc::new(Mutex::new(Queue {
            items: VecDeque::new(),
            capacity: capacity.max(1),
            lagged: 0,
            waker: None,
            closed: false,
        }));
        self.subscribers.push(Arc::downgrade(&queue));
        Subscription { queue }
    }

    /// Whether anyone listens (so callers can skip building events).
    pub(crate) fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    /// Offers `event` to every live subscriber; drops subscribers that went away.
    pub(crate) fn publish(&mut self, event: &T) {
        self.subscribers.retain(|weak| {
            let Some(queue) = weak.upgrade() else {
                return false;
            };
            let waker = {
                let mut q = lock(&queue);
                if q.items.len() >= q.capacity {
                    q.lagged += 1;
                    None
                } else {
                    if q.lagged > 0 {
                        let n = std::mem::take(&mut q.lagged);
                        q.items.push_back(Notice::Lagged(n));
                    }
                    q.items.push_back(Notice::Event(event.clone()));
                    q.waker.take()
                }
            };
            if let Some(w) = waker {
                w.wake();
            }
            true
        });
    }

    /// Ends every subscription (after its queued items).
    pub(crate) fn close(&mut self) {
        for weak in self.subscribers.drain(..) {
            if let Some(queue) = weak.upgrade() {
                let waker = {
                    let mut q = lock(&queue);
                    q.closed = true;
                    q.waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            }
        }
    }
}

impl<T> Drop for Publisher<T> {
    fn drop(&mut self) {
        for weak in self.subscribers.drain(..) {
            if let Some(queue) = weak.upgrade() {
                let waker = {
                    let mut q = lock(&queue);
                    q.closed = true;
                    q.waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            }
        }
    }
}

impl<T> Subscription<T> {
    /// The next notice if one is queued now, without waiting.
    pub fn try_next(&mut self) -> Option<Notice<T>> {
        let mut q = lock(&self.queue);
        take(&mut q)
    }
}

fn take<T>(q: &mut Queue<T>) -> Option<Notice<T>> {
    if let Some(item) = q.items.pop_front() {
        return Some(item);
    }
    if q.lagged > 0 {
        return Some(Notice::Lagged(std::mem::take(&mut q.lagged)));
    }
    None
}

impl<T> Stream for Subscription<T> {
    type Item = Notice<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Notice<T>>> {
        let mut q = lock(&self.queue);
        if let Some(item) = take(&mut q) {
            return Poll::Ready(Some(item));
        }
        if q.closed {
            return Poll::Ready(None);
        }
        q.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_subscriber_is_told_how_many_it_lost() {
        let mut publisher = Publisher::default();
        let mut sub = publisher.subscribe(2);
        for i in 0..5 {
            publisher.publish(&i);
        }
        assert_eq!(sub.try_next(), Some(Notice::Event(0)));
        publisher.publish(&5);
        assert_eq!(sub.try_next(), Some(Notice::Event(1)));
        assert_eq!(sub.try_next(), Some(Notice::Lagged(3)));
        assert_eq!(sub.try_next(), Some(Notice::Event(5)));
        assert_eq!(sub.try_next(), None);
        publisher.publish(&6);
        publisher.publish(&7);
        publisher.publish(&8);
        assert_eq!(sub.try_next(), Some(Notice::Event(6)));
        assert_eq!(sub.try_next(), Some(Notice::Event(7)));
        assert_eq!(sub.try_next(), Some(Notice::Lagged(1)));
    }

    #[test]
    fn dropped_subscribers_are_forgotten() {
        let mut publisher = Publisher::default();
        let sub = publisher.subscribe(1);
        drop(sub);
        publisher.publish(&1);
        assert!(publisher.is_empty());
    }
}
