//! [`LoadTotals`]: the provider numbers of PROTOCOL.md §5.2 summed over a set of
//! providers, with what the Control Plane adds from memory: the capacity of those
//! offline now, as they last reported it online.

/// Sums over a set of providers. Live providers add their six numbers; an offline one
/// (or every provider of a disconnected Edge) adds the capacity it last reported while
/// online to `offline_capacity` instead — what is missing, never put back on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadTotals {
    /// Providers counted, online or not.
    pub providers: u64,
    /// Providers offline now (reported OFFLINE, or on a disconnected Edge).
    pub providers_offline: u64,
    /// Providers admission-eligible now (PROTOCOL.md §5.2).
    pub providers_eligible: u64,
    /// Σ `capacity` of the online providers.
    pub capacity: u64,
    /// Σ `in_flight`.
    pub in_flight: u64,
    /// Σ `queued`.
    pub queued: u64,
    /// Σ `long_context_capacity`.
    pub long_context_capacity: u64,
    /// Σ `long_context_in_flight`.
    pub long_context_in_flight: u64,
    /// Σ `long_context_queued`.
    pub long_context_queued: u64,
    /// Room for new work now: Σ `capacity − in_flight` over the admission-eligible
    /// providers.
    pub available: u64,
    /// Σ of the capacity each offline provider last reported while online (0 for one
    /// never seen online).
    pub offline_capacity: u64,
    /// The same for `long_context_capacity`.
    pub offline_long_context_capacity: u64,
}

/// One provider's part in a [`LoadTotals`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProviderPart {
    pub(crate) offline: bool,
    pub(crate) eligible: bool,
    /// `capacity, in_flight, queued, long_context_capacity, long_context_in_flight,
    /// long_context_queued` as reported (zeros when offline).
    pub(crate) numbers: [u32; 6],
    /// The capacity and long-context capacity it last reported online.
    pub(crate) last_online: [u32; 2],
}

impl LoadTotals {
    /// Adds one provider's part.
    pub(crate) fn add(&mut self, p: &ProviderPart) {
        self.apply(p, u64::wrapping_add);
    }

    /// Takes back one provider's part, added before: the totals of a set are kept as
    /// its members come and go, so what is taken back is exactly what was added.
    pub(crate) fn sub(&mut self, p: &ProviderPart) {
        self.apply(p, u64::wrapping_sub);
    }

    fn apply(&mut self, p: &ProviderPart, op: fn(u64, u64) -> u64) {
        let n = p.numbers.map(u64::from);
        self.providers = op(self.providers, 1);
        if p.offline {
            self.providers_offline = op(self.providers_offline, 1);
            self.offline_capacity = op(self.offline_capacity, u64::from(p.last_online[0]));
            self.offline_long_context_capacity = op(
                self.offline_long_context_capacity,
                u64::from(p.last_online[1]),
            );
            return;
        }
        self.capacity = op(self.capacity, n[0]);
        self.in_flight = op(self.in_flight, n[1]);
        self.queued = op(self.queued, n[2]);
        self.long_context_capacity = op(self.long_context_capacity, n[3]);
        self.long_context_in_flight = op(self.long_context_in_flight, n[4]);
        self.long_context_queued = op(self.long_context_queued, n[5]);
        if p.eligible {
            self.providers_eligible = op(self.providers_eligible, 1);
            self.available = op(self.available, n[0].saturating_sub(n[1]));
        }
    }

    /// Adds every field of `other` (the totals of another set, e.g. another replica's).
    pub fn merge(&mut self, other: &LoadTotals) {
        self.providers = self.providers.saturating_add(other.providers);
        self.providers_offline = self
            .providers_offline
            .saturating_add(other.providers_offline);
        self.providers_eligible = self
            .providers_eligible
            .saturating_add(other.providers_eligible);
        self.capacity = self.capacity.saturating_add(other.capacity);
        self.in_flight = self.in_flight.saturating_add(other.in_flight);
        self.queued = self.queued.saturating_add(other.queued);
        self.long_context_capacity = self
            .long_context_capacity
            .saturating_add(other.long_context_capacity);
        self.long_context_in_flight = self
            .long_context_in_flight
            .saturating_add(other.long_context_in_flight);
        self.long_context_queued = self
            .long_context_queued
            .saturating_add(other.long_context_queued);
        self.available = self.available.saturating_add(other.available);
        self.offline_capacity = self.offline_capacity.saturating_add(other.offline_capacity);
        self.offline_long_context_capacity = self
            .offline_long_context_capacity
            .saturating_add(other.offline_long_context_capacity);
    }

    /// No provider is counted.
    pub fn is_empty(&self) -> bool {
        self.providers == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_added_and_taken_back_leaves_nothing() {
        let live = ProviderPart {
            offline: false,
            eligible: true,
            numbers: [8, 3, 5, 2, 1, 4],
            last_online: [8, 2],
        };
        let offline = ProviderPart {
            offline: true,
            eligible: false,
            numbers: [0; 6],
            last_online: [6, 1],
        };
        let mut t = LoadTotals::default();
        t.add(&live);
        t.add(&offline);
        assert_eq!(
            (t.providers, t.providers_offline, t.providers_eligible),
            (2, 1, 1)
        );
        assert_eq!(
            (t.capacity, t.in_flight, t.queued, t.available),
            (8, 3, 5, 5)
        );
        assert_eq!(
            (t.offline_capacity, t.offline_long_context_capacity),
            (6, 1)
        );
        t.sub(&offline);
        t.sub(&live);
        assert_eq!(t, LoadTotals::default());
        assert!(t.is_empty());
    }
}
