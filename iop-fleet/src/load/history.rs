//! The fleet's load over time, and each Edge's: bounded rings sampled at wall-clock
//! multiples of their interval (so that a cluster's replicas sample at the same
//! instants and their rings add up sample by sample).

use std::collections::VecDeque;

use super::totals::LoadTotals;

/// The fleet's totals at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetSample {
    /// When (the Control Plane's wall clock, Unix ms, a multiple of the interval).
    pub at_unix_ms: u64,
    /// The totals then.
    pub totals: LoadTotals,
    /// Edges counted live then.
    pub edges_live: u64,
    /// Edges counted offline then.
    pub edges_offline: u64,
}

impl FleetSample {
    /// A sample of another replica's, to add to one's own.
    pub fn new(at_unix_ms: u64, totals: LoadTotals, edges_live: u64, edges_offline: u64) -> Self {
        Self {
            at_unix_ms,
            totals,
            edges_live,
            edges_offline,
        }
    }

    /// Adds `other` (taken at the same instant) to this one.
    pub fn merge(&mut self, other: &FleetSample) {
        self.totals.merge(&other.totals);
        self.edges_live += other.edges_live;
        self.edges_offline += other.edges_offline;
    }
}

/// The fleet's totals, one sample per interval, the newest last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetHistory {
    samples: VecDeque<FleetSample>,
    capacity: usize,
}

impl FleetHistory {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            samples: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> impl ExactSizeIterator<Item = &FleetSample> {
        self.samples.iter()
    }

    /// The most samples kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn push(&mut self, sample: FleetSample) {
        if self.capacity == 0 {
            return;
        }
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }
}

/// One Edge's totals at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EdgeSample {
    /// When (Unix ms, a multiple of the interval).
    pub at_unix_ms: u64,
    /// Σ `capacity` then (0 while the Edge was disconnected).
    pub capacity: u32,
    /// Σ `in_flight` then.
    pub in_flight: u32,
    /// Σ `queued` then.
    pub queued: u32,
}

/// A provider's use in one sample: `in_flight / capacity` in half-percent steps.
pub(super) const MAX_USE: u8 = 200;
/// The provider had no capacity.
const NO_CAPACITY: u8 = 254;
/// The provider was offline (or its Edge disconnected), or not sampled.
const OFFLINE: u8 = 255;

/// One Edge's totals over time, and each provider's use (`in_flight / capacity`), one
/// sample per interval, the newest last: a fixed ring of a few hundred bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeHistory {
    newest_at_unix_ms: u64,
    interval_ms: u64,
    head: u16,
    len: u16,
    providers: u16,
    totals: Box<[[u32; 3]]>,
    /// `capacity` rows of `providers` bytes each.
    uses: Box<[u8]>,
}

impl EdgeHistory {
    pub(crate) fn new(capacity: usize, interval_ms: u64) -> Self {
        let capacity = capacity.clamp(1, usize::from(u16::MAX));
        Self {
            newest_at_unix_ms: 0,
            interval_ms,
            head: 0,
            len: 0,
            providers: 0,
            totals: vec![[0; 3]; capacity].into_boxed_slice(),
            uses: Box::new([]),
        }
    }

    fn capacity(&self) -> usize {
        self.totals.len()
    }

    /// Adds a sample at `at_unix_ms`: the Edge's totals and each provider's numbers
    /// (`None`: offline), node by node.
    pub(crate) fn push(
        &mut self,
        at_unix_ms: u64,
        totals: &LoadTotals,
        providers: impl ExactSizeIterator<Item = Option<(u32, u32)>>,
    ) {
        let count = u16::try_from(providers.len()).unwrap_or(u16::MAX);
        if count != self.providers {
            // Another set of providers: their past uses no longer line up.
            self.providers = count;
            self.uses = vec![OFFLINE; self.capacity() * usize::from(count)].into_boxed_slice();
        }
        let slot = (usize::from(self.head) + usize::from(self.len)) % self.capacity();
        let saturate = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        if let Some(t) = self.totals.get_mut(slot) {
            *t = [
                saturate(totals.capacity),
                saturate(totals.in_flight),
                saturate(totals.queued),
            ];
        }
        let row = slot * usize::from(count);
        for (i, p) in providers.take(usize::from(count)).enumerate() {
            if let Some(u) = self.uses.get_mut(row + i) {
                *u = match p {
                    None => OFFLINE,
                    Some((0, _)) => NO_CAPACITY,
                    Some((capacity, in_flight)) => {
                        let half_percent = u64::from(in_flight) * 200 / u64::from(capacity);
                        u8::try_from(half_percent.min(u64::from(MAX_USE))).unwrap_or(MAX_USE)
                    }
                };
            }
        }
        if usize::from(self.len) < self.capacity() {
            self.len += 1;
        } else {
            self.head = u16::try_from((usize::from(self.head) + 1) % self.capacity()).unwrap_or(0);
        }
        self.newest_at_unix_ms = at_unix_ms;
    }

    fn slots(&self) -> impl ExactSizeIterator<Item = (usize, u64)> + '_ {
        let len = u64::from(self.len);
        (0..usize::from(self.len)).map(move |i| {
            let slot = (usize::from(self.head) + i) % self.capacity();
            let back = len - 1 - i as u64;
            (
                slot,
                self.newest_at_unix_ms
                    .saturating_sub(back * self.interval_ms),
            )
        })
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> impl ExactSizeIterator<Item = EdgeSample> + '_ {
        self.slots().map(|(slot, at_unix_ms)| {
            let [capacity, in_flight, queued] = self.totals.get(slot).copied().unwrap_or_default();
            EdgeSample {
                at_unix_ms,
                capacity,
                in_flight,
                queued,
            }
        })
    }

    /// Bytes its rings hold on the heap besides itself.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.totals) + self.uses.len()
    }

    /// The providers sampled (the Edge's view's, node by node, when last sampled).
    pub fn providers(&self) -> usize {
        usize::from(self.providers)
    }

    /// Provider `index`'s use in each sample, oldest first: `in_flight / capacity`
    /// (to half a percent, at most 1.0), `None` while it was offline or had no
    /// capacity.
    pub fn uses(&self, index: usize) -> impl ExactSizeIterator<Item = Option<f32>> + '_ {
        self.raw_uses(index).map(super::edge_share::provider_use)
    }

    /// Provider `index`'s use in each sample as the ring keeps it: half-percent steps
    /// (0–200), above that while it was offline or had no capacity.
    pub(crate) fn raw_uses(&self, index: usize) -> impl ExactSizeIterator<Item = u8> + '_ {
        let width = usize::from(self.providers);
        self.slots().map(move |(slot, _)| {
            if index < width {
                self.uses
                    .get(slot * width + index)
                    .copied()
                    .unwrap_or(OFFLINE)
            } else {
                OFFLINE
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edge_ring_keeps_the_newest_samples_and_each_providers_use() {
        let mut h = EdgeHistory::new(3, 1_000);
        let totals = |capacity| LoadTotals {
            capacity,
            in_flight: 1,
            queued: 2,
            ..Default::default()
        };
        for i in 0..4u64 {
            let providers = [Some((4, i as u32)), None, Some((0, 0))];
            h.push(10_000 + i * 1_000, &totals(4 + i), providers.into_iter());
        }
        let s: Vec<EdgeSample> = h.samples().collect();
        assert_eq!(s.len(), 3);
        assert_eq!(
            s.iter()
                .map(|s| (s.at_unix_ms, s.capacity))
                .collect::<Vec<_>>(),
            [(11_000, 5), (12_000, 6), (13_000, 7)]
        );
        assert_eq!(
            h.uses(0).collect::<Vec<_>>(),
            [Some(0.25), Some(0.5), Some(0.75)]
        );
        assert_eq!(h.uses(1).collect::<Vec<_>>(), [None, None, None]);
        assert_eq!(h.uses(2).collect::<Vec<_>>(), [None, None, None]);
        // The providers change: their past is forgotten, the totals are not.
        h.push(14_000, &totals(8), [Some((2, 2))].into_iter());
        assert_eq!(h.uses(0).collect::<Vec<_>>(), [None, None, Some(1.0)]);
        assert_eq!(
            h.samples().map(|s| s.capacity).collect::<Vec<_>>(),
            [6, 7, 8]
        );
        // Three slots of three u32 totals, and one byte per provider per slot.
        assert_eq!(h.heap_bytes(), 3 * 12 + 3);
    }

    #[test]
    fn a_fleet_ring_is_bounded() {
        let mut h = FleetHistory::new(2);
        for i in 0..5 {
            h.push(FleetSample::new(i, LoadTotals::default(), i, 0));
        }
        assert_eq!(
            h.samples().map(|s| s.at_unix_ms).collect::<Vec<_>>(),
            [3, 4]
        );
    }
}
