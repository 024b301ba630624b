//! Where each provider is filed for placement: per model, its counters by reason and
//! two rankings of the providers that can take a request (any request; a long-context
//! one), kept as views change so that a placement reads the best ones first instead
//! of scanning the fleet.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::Arc;

use iop_core::cp::load::ProviderLoad;

use super::ranking::Ranking;

/// An Edge's place in the placement's slot table.
pub(crate) type Slot = u32;

/// A provider's place in a ranking: the most free slots first, then the shortest
/// queue, then the most recently reported numbers; slot and index make it unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Rank {
    pub(super) free: Reverse<u32>,
    pub(super) queued: u32,
    pub(super) reported: Reverse<u64>,
    pub(super) slot: Slot,
    pub(super) index: u32,
}

/// Why a provider can or cannot take a request, the first reason that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Offline,
    NotEligible,
    Full,
    /// It has room: ranked in [`ModelBook::open`], and in [`ModelBook::long_open`] with
    /// this rank when its long-context pool has room too.
    Open {
        rank: Rank,
        long: Option<Rank>,
    },
}

/// Requests placed on a provider with a reservation since its numbers were last
/// reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Reserved {
    pub(super) any: u32,
    pub(super) long: u32,
    /// When they lapse (Unix ms; 0: none).
    pub(super) until_ms: u64,
    /// When the latest was made (Unix ms): a report from before it does not know of
    /// it (one that crossed it on the way from another replica) and leaves them.
    pub(super) made_ms: u64,
}

/// The providers that list one model.
#[derive(Debug, Default)]
pub(super) struct ModelBook {
    pub(super) serving: u64,
    pub(super) offline: u64,
    pub(super) not_eligible: u64,
    pub(super) full: u64,
    /// Open, but with no room in the long-context pool.
    pub(super) long_full: u64,
    pub(super) open: Ranking,
    pub(super) long_open: Ranking,
}

impl ModelBook {
    /// Files (`add`) or unfiles a provider of class `class`.
    pub(super) fn file(&mut self, class: Class, add: bool) {
        let step = |n: &mut u64| {
            if add {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
            }
        };
        step(&mut self.serving);
        match class {
            Class::Offline => step(&mut self.offline),
            Class::NotEligible => step(&mut self.not_eligible),
            Class::Full => step(&mut self.full),
            Class::Open { rank, long } => {
                if add {
                    self.open.insert(rank);
                } else {
                    self.open.remove(rank);
                }
                match long {
                    Some(long) if add => self.long_open.insert(long),
                    Some(long) => self.long_open.remove(long),
                    None => step(&mut self.long_full),
                }
            }
        }
    }
}

/// Every model listed, each named once: a provider's models are filed by number, so
/// that a change of its numbers touches no model name (neither hashed nor compared).
/// A model's number is held while some filed view lists it, then reused.
#[derive(Debug, Default)]
pub(super) struct Books {
    ids: HashMap<Arc<str>, u32>,
    /// By model number: its book, its name (shared with `ids`), and how many providers of filed views
    /// list it.
    books: Vec<(ModelBook, Arc<str>, u64)>,
    free: Vec<u32>,
}

impl Books {
    /// The book of `model`, if a filed view lists it.
    pub(super) fn get(&self, model: &str) -> Option<&ModelBook> {
        self.books
            .get(self.id(model)? as usize)
            .map(|(book, ..)| book)
    }

    /// The number of `model`, if a filed view lists it.
    pub(super) fn id(&self, model: &str) -> Option<u32> {
        self.ids.get(model).copied()
    }

    pub(super) fn book_mut(&mut self, id: u32) -> Option<&mut ModelBook> {
        self.books.get_mut(id as usize).map(|(book, ..)| book)
    }

    /// The numbers of the models `p` lists (each once), held for it until
    /// [`release`](Self::release)d.
    pub(super) fn acquire(&mut self, p: ProviderLoad<'_>) -> Box<[u32]> {
        models_of(p).map(|m| self.acquire_one(m)).collect()
    }

    fn acquire_one(&mut self, model: &str) -> u32 {
        if let Some(&id) = self.ids.get(model) {
            if let Some((.., refs)) = self.books.get_mut(id as usize) {
                *refs += 1;
            }
            return id;
        }
        let name: Arc<str> = model.into();
        let entry = (ModelBook::default(), name.clone(), 1);
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(e) = self.books.get_mut(id as usize) {
                    *e = entry;
                }
                id
            }
            None => {
                self.books.push(entry);
                u32::try_from(self.books.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.ids.insert(name, id);
        id
    }

    /// Lets go of `ids` (taken by [`acquire`](Self::acquire)): a model no filed view
    /// lists any more is forgotten, its number free.
    pub(super) fn release(&mut self, ids: &[u32]) {
        for &id in ids {
            let Some((book, name, refs)) = self.books.get_mut(id as usize) else {
                continue;
            };
            *refs = refs.saturating_sub(1);
            if *refs == 0 {
                self.ids.remove(&**name);
                *book = ModelBook::default();
                *name = Arc::from("");
                self.free.push(id);
            }
        }
    }
}

/// Classifies provider `p` (provider `index` of the Edge in `slot`): `live` is whether
/// its Edge's numbers count here, `reserved` what has been placed on it since,
/// `reported_ms` when its numbers were last reported.
pub(super) fn classify(
    p: &ProviderLoad<'_>,
    live: bool,
    reserved: Reserved,
    reported_ms: u64,
    slot: Slot,
    index: u32,
) -> Class {
    if !live || p.is_offline() {
        return Class::Offline;
    }
    // A full provider reports itself not eligible (no room for another lease): full
    // is the reason that tells a router more.
    let free = p.capacity().saturating_sub(p.in_flight());
    if free == 0 {
        return Class::Full;
    }
    if !p.admission_eligible() {
        return Class::NotEligible;
    }
    let free = free.saturating_sub(reserved.any);
    if free == 0 {
        return Class::Full;
    }
    let rank = |free: u32, queued: u32| Rank {
        free: Reverse(free),
        queued,
        reported: Reverse(reported_ms),
        slot,
        index,
    };
    let long_free = p
        .long_context_capacity()
        .saturating_sub(p.long_context_in_flight().saturating_add(reserved.long))
        .min(free);
    Class::Open {
        rank: rank(free, p.queued()),
        long: (long_free > 0).then(|| rank(long_free, p.long_context_queued())),
    }
}

/// The models `p` lists, each once (a model listed twice is filed once).
pub(super) fn models_of<'a>(p: ProviderLoad<'a>) -> impl Iterator<Item = &'a str> + 'a {
    p.models()
        .enumerate()
        .filter(move |&(i, m)| !p.models().take(i).any(|earlier| earlier == m))
        .map(|(_, m)| m)
}
