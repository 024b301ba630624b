//! [`LoadView`]: one Edge's load as the fleet keeps it — the Control Plane's view of
//! the Edge ([`EdgeLoad`], shared with the core by `Arc`) with what the fleet remembers
//! beside it: the capacity each offline provider last reported online, when the view
//! was last confirmed, whether it counts live.

use std::sync::Arc;

use iop_core::cp::load::{EdgeLoad, ProviderLoad};

use super::totals::{LoadTotals, ProviderPart};

/// What a provider last reported while online ([`LoadView::last_online`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LastOnline {
    /// Its `capacity` then.
    pub capacity: u32,
    /// Its `long_context_capacity` then.
    pub long_context_capacity: u32,
    /// When (the Control Plane's wall clock, Unix ms; 0: never seen online here).
    pub at_unix_ms: u64,
}

impl LastOnline {
    /// The two capacities, as a provider's part in the totals carries them.
    pub(crate) fn capacities(self) -> [u32; 2] {
        [self.capacity, self.long_context_capacity]
    }
}

/// One Edge's load as the fleet holds it: cheap to clone (two shared slices), to read
/// outside the lock of whoever drives the [`Fleet`](crate::Fleet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadView {
    pub(crate) load: Arc<EdgeLoad>,
    /// Provider `i` of `load` (node by node) last reported online this.
    pub(crate) last_online: Arc<[LastOnline]>,
    pub(crate) received_at_unix_ms: u64,
    pub(crate) partial: bool,
    pub(crate) live: bool,
}

impl LoadView {
    /// A new view `load`, received at `at_unix_ms`, remembering for each offline
    /// provider what `previous` (the Edge's view before it) knew of it.
    pub(crate) fn new(load: Arc<EdgeLoad>, previous: Option<&LoadView>, at_unix_ms: u64) -> Self {
        let last_online = carry_last_online(&load, previous, at_unix_ms);
        Self {
            load,
            last_online,
            received_at_unix_ms: at_unix_ms,
            partial: false,
            live: true,
        }
    }

    /// Takes `load`, of its view's structure (a load update's), received at
    /// `at_unix_ms`: each provider online in it last reported online now; an offline
    /// one keeps what it had.
    pub(crate) fn renumber(&mut self, load: Arc<EdgeLoad>, at_unix_ms: u64) {
        // Copied only when a reader holds a clone of this view.
        let last = Arc::make_mut(&mut self.last_online);
        for (l, p) in last.iter_mut().zip(load.providers()) {
            if !p.is_offline() {
                *l = LastOnline {
                    capacity: p.capacity(),
                    long_context_capacity: p.long_context_capacity(),
                    at_unix_ms,
                };
            }
        }
        self.load = load;
        self.received_at_unix_ms = at_unix_ms;
        self.partial = false;
    }

    /// The nodes and providers, as the Edge last reported them in full.
    pub fn load(&self) -> &Arc<EdgeLoad> {
        &self.load
    }

    /// When the Control Plane last confirmed it — its last page arrived, or a later
    /// refresh found the Edge's revision unchanged (Control Plane wall clock, Unix ms):
    /// the view is as old as now minus this.
    pub fn received_at_unix_ms(&self) -> u64 {
        self.received_at_unix_ms
    }

    /// The Edge's latest full answer could not be made a complete view: this one is
    /// older than that answer.
    pub fn partial(&self) -> bool {
        self.partial
    }

    /// Its Edge is connected to this Control Plane: the view counts as it reported.
    pub fn live(&self) -> bool {
        self.live
    }

    /// What provider `index` (of [`EdgeLoad::providers`], node by node) last
    /// reported while online; `None` if this Control Plane never saw it online. Kept
    /// by the fleet, never sent on the wire (PROTOCOL.md §5.2: offline providers
    /// report zero).
    pub fn last_online(&self, index: usize) -> Option<LastOnline> {
        self.last_online
            .get(index)
            .copied()
            .filter(|l| l.at_unix_ms != 0)
    }

    /// The sums over its providers, the Edge connected.
    pub fn totals(&self) -> LoadTotals {
        self.sum(false)
    }

    /// The sums over its providers as the fleet counts them: as reported while the
    /// view is [`live`](Self::live), else every provider offline at the capacity it
    /// last had online.
    pub fn counted_totals(&self) -> LoadTotals {
        self.sum(!self.live)
    }

    fn sum(&self, offline: bool) -> LoadTotals {
        let mut t = LoadTotals::default();
        for (i, p) in self.load.providers().enumerate() {
            t.add(&part(&p, self.remembered(i), offline));
        }
        t
    }

    /// Its providers, node by node, each with what it last reported online
    /// ([`last_online`](Self::last_online)).
    pub fn providers(
        &self,
    ) -> impl ExactSizeIterator<Item = (ProviderLoad<'_>, Option<LastOnline>)> {
        self.load
            .providers()
            .enumerate()
            .map(|(i, p)| (p, self.last_online(i)))
    }

    /// Provider `index`'s last-online capacities (zeros when never seen online).
    pub(crate) fn remembered(&self, index: usize) -> [u32; 2] {
        self.last_online
            .get(index)
            .map_or([0, 0], |l| l.capacities())
    }

    /// Bytes it holds on the heap besides the shared [`EdgeLoad`].
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.last_online)
    }
}

/// Provider `p`'s part in the totals: as reported, or (`offline`: its Edge is
/// disconnected) offline at the capacities it last had online.
pub(crate) fn part(p: &ProviderLoad<'_>, last_online: [u32; 2], offline: bool) -> ProviderPart {
    if offline {
        return ProviderPart {
            offline: true,
            eligible: false,
            numbers: [0; 6],
            last_online,
        };
    }
    ProviderPart {
        offline: p.is_offline(),
        eligible: p.admission_eligible(),
        numbers: p.numbers(),
        last_online,
    }
}

/// Each provider of `load`'s last-online capacities: its own numbers when it is online
/// now (seen at `now_unix_ms`), else what `previous` remembered for the same node and
/// provider id.
fn carry_last_online(
    load: &EdgeLoad,
    previous: Option<&LoadView>,
    now_unix_ms: u64,
) -> Arc<[LastOnline]> {
    let mut out = Vec::with_capacity(load.providers().len());
    for node in load.nodes() {
        let before = previous.and_then(|prev| Some((prev, prev.load.node(node.node_id())?)));
        for p in node.providers() {
            if !p.is_offline() {
                out.push(LastOnline {
                    capacity: p.capacity(),
                    long_context_capacity: p.long_context_capacity(),
                    at_unix_ms: now_unix_ms,
                });
                continue;
            }
            let remembered = before.and_then(|(prev, old)| {
                let j = old
                    .providers()
                    .position(|o| o.provider_id() == p.provider_id())?;
                prev.last_online
                    .get(old.provider_indexes().start + j)
                    .copied()
            });
            out.push(remembered.unwrap_or_default());
        }
    }
    out.into()
}
