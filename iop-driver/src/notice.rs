//! Bounded per-subscriber event queues: a slow subscriber loses events and is told
//! how many, never slowing down the driver that publishes them.
//!
//! Each queue is bounded twice, by a count of events and by an estimate of the bytes
//! they hold (a status answer can be megabytes), and each subscriber may say which
//! kinds of events it wants: an event no subscriber asked for is never cloned.

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

/// An event a [`Publisher`] can filter and account for.
pub(crate) trait Published: Clone {
    /// The bit of its kind in a subscriber's filter (one bit per kind, below 64).
    fn kind_bit(&self) -> u64;
    /// An estimate of the heap and inline bytes a queued copy holds.
    fn cost(&self) -> usize;
}

/// Every kind.
pub(crate) const ALL_KINDS: u64 = u64::MAX;

#[derive(Debug)]
struct Queue<T> {
    items: VecDeque<(Notice<T>, usize)>,
    capacity: usize,
    /// Bytes the queued events may hold ([`Published::cost`]).
    byte_budget: usize,
    /// Bytes they hold now.
    bytes: usize,
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

/// The publishing side: a list of weakly held subscriber queues, with the kinds each
/// wants (kept here too, so that asking who wants an event takes no lock).
#[derive(Debug)]
pub(crate) struct Publisher<T> {
    subscribers: Vec<(u64, Weak<Mutex<Queue<T>>>)>,
}

impl<T> Default for Publisher<T> {
    fn default() -> Self {
        Self {
            subscribers: Vec::new(),
        }
    }
}

impl<T: Published> Publisher<T> {
    /// A new subscriber to the kinds in `kinds` (bits of [`Published::kind_bit`]),
    /// holding at most `capacity` undelivered events (at least 1) of at most
    /// `byte_budget` bytes in all (one event always fits).
    pub(crate) fn subscribe(
        &mut self,
        kinds: u64,
        capacity: usize,
        byte_budget: usize,
    ) -> Subscription<T> {
        let queue = Arc::new(Mutex::new(Queue {
            items: VecDeque::new(),
            capacity: capacity.max(1),
            byte_budget,
            bytes: 0,
            lagged: 0,
            waker: None,
            closed: false,
        }));
        self.subscribers.push((kinds, Arc::downgrade(&queue)));
        Subscription { queue }
    }

    /// Whether anyone listens (so callers can skip building events).
    pub(crate) fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    /// Whether a subscriber may want an event of this kind bit (one that went away
    /// may still be counted until the next publish).
    pub(crate) fn wants(&self, bit: u64) -> bool {
        self.subscribers.iter().any(|(kinds, _)| kinds & bit != 0)
    }

    /// Offers `event` to every live subscriber that wants its kind; drops subscribers
    /// that went away. A subscriber over its count or byte budget loses the event and
    /// is told so (`Lagged`) before its next one.
    pub(crate) fn publish(&mut self, event: &T) {
        let bit = event.kind_bit();
        // Measured once, and only if someone wants it.
        let mut cost = None;
        self.subscribers.retain(|(kinds, weak)| {
            if kinds & bit == 0 {
                // Not asked for: not even looked at (a subscriber that went away is
                // dropped by the next event it wants, or by `close`).
                return weak.strong_count() > 0;
            }
            let Some(queue) = weak.upgrade() else {
                return false;
            };
            let waker = {
                let mut q = lock(&queue);
                let cost = *cost.get_or_insert_with(|| event.cost());
                let full = q.items.len() >= q.capacity
                    || (!q.items.is_empty() && q.bytes.saturating_add(cost) > q.byte_budget);
                if full {
                    q.lagged += 1;
                    None
                } else {
                    if q.lagged > 0 {
                        let n = std::mem::take(&mut q.lagged);
                        q.items.push_back((Notice::Lagged(n), 0));
                    }
                    q.bytes += cost;
                    q.items.push_back((Notice::Event(event.clone()), cost));
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
        for (_, weak) in self.subscribers.drain(..) {
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
        for (_, weak) in self.subscribers.drain(..) {
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
    if let Some((item, cost)) = q.items.pop_front() {
        q.bytes -= cost;
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

    /// Events of kind `n % 2` costing `n` bytes.
    impl Published for i32 {
        fn kind_bit(&self) -> u64 {
            1 << (self % 2)
        }
        fn cost(&self) -> usize {
            *self as usize
        }
    }

    #[test]
    fn a_full_subscriber_is_told_how_many_it_lost() {
        let mut publisher = Publisher::default();
        let mut sub = publisher.subscribe(ALL_KINDS, 2, usize::MAX);
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
        let sub = publisher.subscribe(ALL_KINDS, 1, usize::MAX);
        drop(sub);
        publisher.publish(&1);
        assert!(publisher.is_empty());
    }

    #[test]
    fn a_subscriber_gets_only_its_kinds_within_its_byte_budget() {
        let mut publisher = Publisher::default();
        // Odd events only, 100 bytes at most.
        let mut odd = publisher.subscribe(0b10, 1_000, 100);
        let mut all = publisher.subscribe(ALL_KINDS, 1_000, usize::MAX);
        for n in [2, 41, 4, 51, 9, 1_001] {
            publisher.publish(&n);
        }
        assert_eq!(odd.try_next(), Some(Notice::Event(41)));
        assert_eq!(odd.try_next(), Some(Notice::Event(51)));
        // 9 would have passed 100 bytes: lost, and told.
        assert_eq!(odd.try_next(), Some(Notice::Lagged(2)));
        assert_eq!(odd.try_next(), None);
        // With the queue empty, one event always fits, however large.
        publisher.publish(&1_001);
        assert_eq!(odd.try_next(), Some(Notice::Event(1_001)));
        // Everything, both kinds, the second 1 001 included.
        let got: Vec<_> = std::iter::from_fn(|| all.try_next()).collect();
        assert_eq!(got.len(), 7);
        assert!(publisher.wants(0b01) && publisher.wants(0b10));
        drop(all);
        publisher.publish(&3);
        assert!(!publisher.wants(0b01));
    }
}
