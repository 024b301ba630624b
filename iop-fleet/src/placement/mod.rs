//! Placement: which providers can take one more request of a model now, best first —
//! what a request router asks the fleet (`GET /v1/placement` in `iop-server`).
//!
//! [`Fleet`](crate::Fleet) files every provider of every Edge it counts by model as
//! views change (a full status, a load update, an Edge disconnecting or leaving), so a
//! placement reads the best providers of a model in order instead of scanning the
//! fleet. A provider is a **candidate** when its Edge is connected, it is online and
//! `admission_eligible`, it has a free slot (`capacity − in_flight − reserved`, and
//! for a long-context request room in its long-context pool too) and its numbers are
//! not stale ([`Staleness`]). Candidates rank by free slots (most first), then queue
//! (shortest first), then the age of their report (newest first).
//!
//! A **reserving** placement counts its pick as one more request in flight on the
//! Control Plane's view until the provider's next report overwrites it (or its
//! numbers would be stale), so that routers asking at once do not all pick the
//! provider that looked emptiest.
//!
//! ```
//! use std::time::Duration;
//! use iop_core::cp::CpConfig;
//! use iop_core::edge::EdgeConfig;
//! use iop_core::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};
//! use iop_core::testing::{NetConfig, Pair};
//! use iop_fleet::{Fleet, FleetConfig, PlacementQuery};
//!
//! // An Edge with two READY nodes serving `llama-3`: room for 4 and for 2.
//! let mut nodes = NodeRegistry::new();
//! for (id, capacity) in [("gpu-1", 4), ("gpu-2", 2)] {
//!     let node = NodeConfig::new(id).with_provider(
//!         ProviderConfig::new("llama", ProviderCategory::LocalInference, capacity, 0)
//!             .with_model("llama-3"),
//!     );
//!     nodes.configure(node, 0)?;
//!     nodes.connect_ready(id, 1)?;
//! }
//! let cp = CpConfig::default();
//! let mut pair = Pair::new(0, cp.clone(), NetConfig::default())?;
//! pair.add_edge(EdgeConfig::new("edge-1", 1), nodes)?;
//! pair.advance(Duration::from_secs(1));
//!
//! let mut config = FleetConfig::default();
//! config.follow(&cp); // staleness from the Control Plane's periods
//! let mut fleet = Fleet::new(config)?;
//! for event in pair.cp_events.drain(..) {
//!     fleet.handle_event(&event);
//! }
//! let now = cp.wall_clock.unix_ms(pair.now);
//! let answer = fleet.placement(&PlacementQuery::new("llama-3"), now)?;
//! let best: Vec<(&str, u32)> =
//!     answer.candidates.iter().map(|c| (c.node_id.as_str(), c.free)).collect();
//! assert_eq!(best, [("gpu-1", 4), ("gpu-2", 2)]);
//!
//! // Three routers reserve at once: 4, then 3, then 2 against 2 (the tie to the
//! // newer report or the first position) — none picks a full provider.
//! for _ in 0..3 {
//!     assert!(fleet.reserve(&PlacementQuery::new("llama-3"), now)?.reserved);
//! }
//! let left: u32 = fleet
//!     .placement(&PlacementQuery::new("llama-3"), now)?
//!     .candidates
//!     .iter()
//!     .map(|c| c.free)
//!     .sum();
//! assert_eq!(left, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod book;
mod pick;
mod proofs;
mod query;
mod ranking;
mod reserve;
mod slot;
mod staleness;

use std::collections::{BTreeSet, HashMap};

use proofs::Proofs;
use std::sync::Arc;

use iop_core::cp::load::EdgeLoad;

pub(crate) use book::Slot;
use book::{Books, Class, Rank, Reserved, classify};
pub use pick::{Pick, SPREAD_POOL};
pub use query::{
    Candidate, DEFAULT_PLACEMENT_LIMIT, Excluded, MAX_PLACEMENT_LABELS, MAX_PLACEMENT_LIMIT,
    PlacementAnswer, PlacementError, PlacementQuery,
};
use slot::{EdgeSlot, candidate, labelled, nodes_of};
pub use staleness::{STALE_GRACE_RANGE, Staleness};

/// Upper bounds (ms) of the buckets of [`PlacementStats::age_ms_buckets`]; the last
/// bucket counts the rest.
pub const AGE_BUCKETS_MS: [u64; 10] = [25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000];

/// What placements have done since the fleet started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlacementStats {
    /// Placements answered (reserving ones included).
    pub placements: u64,
    /// Reserving placements that reserved a pick.
    pub reservations: u64,
    /// Reservations other replicas of a cluster placed and told, counted here (on
    /// providers this replica holds a view of).
    pub reservations_elsewhere: u64,
    /// Reservations placed here that the other replicas were not told: placed while
    /// [`MAX_PENDING_RESERVATIONS`](crate::MAX_PENDING_RESERVATIONS) providers'
    /// waited to be published.
    pub reservations_unshared: u64,
    /// Placements with no candidate.
    pub empty: u64,
    /// Providers left out of placements because their numbers were stale, summed.
    pub stale_excluded: u64,
    /// The age of the first candidate's numbers at each placement that had one, by
    /// [`AGE_BUCKETS_MS`] (the last bucket: older).
    pub age_ms_buckets: [u64; AGE_BUCKETS_MS.len() + 1],
    /// The sum of those ages, ms.
    pub age_ms_sum: u64,
}

/// The fleet's providers filed for placement; fed by [`Fleet`](crate::Fleet).
#[derive(Debug)]
pub(crate) struct Placement {
    staleness: Staleness,
    slots: Vec<Option<EdgeSlot>>,
    free_slots: Vec<Slot>,
    by_edge: HashMap<Arc<str>, Slot>,
    /// Edges with a live session whose first view has not come: whether they push.
    pending: HashMap<Box<str>, bool>,
    books: Books,
    /// Providers filed, whatever their models.
    providers: u64,
    /// When each live Edge last proved its numbers, by how it reports: the stale ones
    /// are the oldest.
    proofs: Proofs,
    /// (until_ms, slot, index) of every reservation.
    lapses: BTreeSet<(u64, Slot, u32)>,
    stats: PlacementStats,
}

impl Placement {
    pub(crate) fn new(staleness: Staleness) -> Self {
        Self {
            staleness,
            slots: Vec::new(),
            free_slots: Vec::new(),
            by_edge: HashMap::new(),
            pending: HashMap::new(),
            books: Books::default(),
            providers: 0,
            proofs: Proofs::default(),
            lapses: BTreeSet::new(),
            stats: PlacementStats::default(),
        }
    }

    pub(crate) fn stats(&self) -> PlacementStats {
        self.stats
    }

    pub(crate) fn staleness(&self) -> Staleness {
        self.staleness
    }

    /// A session of `edge_id` was accepted; `pushes`: it pushes load updates. Its
    /// numbers count from its first view on this session.
    pub(crate) fn session(&mut self, edge_id: &str, pushes: bool) {
        self.pending.insert(edge_id.into(), pushes);
    }

    /// Whether `edge_id`'s filed view comes from an Edge that pushes load updates.
    pub(crate) fn pushes(&self, edge_id: &str) -> bool {
        self.by_edge
            .get(edge_id)
            .and_then(|&slot| self.slot(slot))
            .is_some_and(|e| e.pushes)
    }

    /// `edge_id`'s view is `load` as of `at_ms`: new (`changed` is `None`) or with the
    /// numbers of providers `changed` updated.
    pub(crate) fn view(
        &mut self,
        edge_id: &str,
        load: &Arc<EdgeLoad>,
        changed: Option<&[u32]>,
        at_ms: u64,
    ) {
        let slot = match self.by_edge.get(edge_id) {
            Some(&slot) => slot,
            None => self.new_slot(edge_id.into(), load),
        };
        self.file_view(slot, edge_id, load, changed, at_ms);
    }

    /// [`view`](Self::view) of the Edge whose id is the string `edge_id` shares, filed
    /// in `hint` when that slot still holds it (a view filed this way before returned
    /// it): no lookup by id. Returns where it is filed.
    pub(crate) fn view_hinted(
        &mut self,
        hint: Option<Slot>,
        edge_id: &Arc<str>,
        load: &Arc<EdgeLoad>,
        changed: Option<&[u32]>,
        at_ms: u64,
    ) -> Slot {
        let held = |slot: Slot| {
            self.slot(slot)
                .is_some_and(|e| Arc::ptr_eq(&e.edge_id, edge_id))
        };
        let slot = match hint.filter(|&slot| held(slot)) {
            Some(slot) => slot,
            None => match self.by_edge.get(&**edge_id) {
                Some(&slot) => {
                    // Filed under another copy of the id: this one from now on, so
                    // that the next hint holds.
                    if let Some(e) = self.slot_mut(slot) {
                        e.edge_id = edge_id.clone();
                    }
                    slot
                }
                None => self.new_slot(edge_id.clone(), load),
            },
        };
        self.file_view(slot, edge_id, load, changed, at_ms);
        slot
    }

    /// Files `load` (new, or with the numbers of providers `changed` updated) as the
    /// view of `edge_id` in `slot`.
    fn file_view(
        &mut self,
        slot: Slot,
        edge_id: &str,
        load: &Arc<EdgeLoad>,
        changed: Option<&[u32]>,
        at_ms: u64,
    ) {
        let pushes = if self.pending.is_empty() {
            None
        } else {
            self.pending.remove(edge_id)
        };
        let Some(e) = self.slot_mut(slot) else { return };
        let was_live = e.live;
        if let Some(pushes) = pushes
            && pushes != e.pushes
        {
            // Its proof, if filed, is filed under its new way of reporting by the
            // `prove` below.
            e.pushes = pushes;
        }
        let Some(e) = self.slot_mut(slot) else { return };
        let whole = changed.is_none() || !was_live || load.providers().len() != e.filed.len();
        if whole {
            self.unfile_all(slot);
            self.set_models(slot, Some(load));
            let Some(e) = self.slot_mut(slot) else { return };
            e.view = load.clone();
            e.node_of = nodes_of(load);
            let n = load.providers().len();
            e.filed = vec![Class::Offline; n];
            e.reported_ms = vec![at_ms; n];
            e.reserved = vec![Reserved::default(); n];
            e.live = true;
            for i in 0..n {
                self.file(slot, i, true);
            }
        } else {
            // Same structure: the new view names the same models, so each changed
            // provider is unfiled (by the class it was filed under) and filed anew.
            e.view = load.clone();
            for &i in changed.unwrap_or_default() {
                let i = i as usize;
                self.unfile(slot, i);
                if let Some(r) = self.slot_mut(slot).and_then(|e| e.reported_ms.get_mut(i)) {
                    *r = at_ms;
                }
                self.clear_reservation(slot, i, at_ms);
                self.file(slot, i, true);
            }
        }
        self.prove(slot, at_ms);
    }

    /// `edge_id`'s numbers were proven current at `at_ms` (a refresh found them
    /// unchanged, or an Edge that pushes sent a heartbeat).
    pub(crate) fn confirmed(&mut self, edge_id: &str, at_ms: u64) {
        if let Some(&slot) = self.by_edge.get(edge_id)
            && self.slot(slot).is_some_and(|e| e.live)
        {
            self.prove(slot, at_ms);
        }
    }

    /// `edge_id`'s session ended: its providers count offline.
    pub(crate) fn disconnected(&mut self, edge_id: &str) {
        self.pending.remove(edge_id);
        let Some(&slot) = self.by_edge.get(edge_id) else {
            return;
        };
        self.unfile_all(slot);
        let Some(e) = self.slot_mut(slot) else { return };
        e.live = false;
        for r in &mut e.reserved {
            *r = Reserved::default();
        }
        self.proofs.unfile(slot);
        for i in 0..self.slot(slot).map_or(0, |e| e.filed.len()) {
            self.file(slot, i, false);
        }
    }

    /// `edge_id` is no longer counted here (forgotten, or held by another Control
    /// Plane).
    pub(crate) fn gone(&mut self, edge_id: &str) {
        self.pending.remove(edge_id);
        let Some(slot) = self.by_edge.remove(edge_id) else {
            return;
        };
        self.unfile_all(slot);
        self.set_models(slot, None);
        if self
            .slots
            .get_mut(slot as usize)
            .and_then(Option::take)
            .is_some()
        {
            self.proofs.unfile(slot);
            self.free_slots.push(slot);
        }
    }

    /// Answers `query` at `now_ms`; `reserve`: count one more request in flight on the
    /// first candidate.
    pub(crate) fn place(
        &mut self,
        query: &PlacementQuery,
        now_ms: u64,
        reserve: bool,
    ) -> Result<PlacementAnswer, PlacementError> {
        query.validate()?;
        self.lapse(now_ms);
        let pick = if reserve { query.pick } else { Pick::Best };
        let mut answer = self.read(query, pick, now_ms);
        if reserve && let Some(first) = answer.candidates.first_mut() {
            self.reserve(first, query.long_context, now_ms);
            answer.reserved = true;
            self.stats.reservations += 1;
        }
        self.stats.placements += 1;
        if !query.include_stale {
            self.stats.stale_excluded += answer.excluded.stale;
        }
        match answer.candidates.first() {
            Some(c) => {
                let bucket = AGE_BUCKETS_MS
                    .iter()
                    .position(|&b| c.age_ms <= b)
                    .unwrap_or(AGE_BUCKETS_MS.len());
                if let Some(n) = self.stats.age_ms_buckets.get_mut(bucket) {
                    *n += 1;
                }
                self.stats.age_ms_sum = self.stats.age_ms_sum.saturating_add(c.age_ms);
            }
            None => self.stats.empty += 1,
        }
        Ok(answer)
    }

    /// The candidates for `query`, walking the model's ranking best first; the one
    /// `pick` chooses first.
    fn read(&self, query: &PlacementQuery, pick: Pick, now_ms: u64) -> PlacementAnswer {
        let mut answer = PlacementAnswer {
            candidates: Vec::new(),
            serving: 0,
            excluded: Excluded::default(),
            reserved: false,
        };
        let Some(book) = self.books.get(query.model.as_str()) else {
            answer.excluded.not_serving = self.providers;
            return answer;
        };
        let long = query.long_context;
        answer.serving = book.serving;
        answer.excluded = Excluded {
            not_serving: self.providers.saturating_sub(book.serving),
            offline: book.offline,
            not_eligible: book.not_eligible,
            full: book.full + if long { book.long_full } else { 0 },
            stale: self.stale_open(&query.model, long, now_ms),
            labels: 0,
        };
        let ranking = if long { &book.long_open } else { &book.open };
        let mut stale = Vec::new();
        // The current candidates a draw is among (ranks only: no names copied), in
        // the order they are listed: the first of them are the candidates listed
        // (SPREAD_POOL is no less than any limit).
        let mut pool: Vec<Rank> = Vec::new();
        let pool_size = if pick.draws() { SPREAD_POOL } else { 0 };
        for rank in ranking.iter() {
            let Some(e) = self.slot(rank.slot) else {
                continue;
            };
            let is_stale = self.is_stale(e, now_ms);
            if is_stale && (!query.include_stale || stale.len() >= query.limit) {
                continue;
            }
            if !query.labels.is_empty() && !labelled(e, rank.index, &query.labels) {
                answer.excluded.labels += u64::from(!is_stale);
                continue;
            }
            if !is_stale && pool.len() < pool_size {
                pool.push(rank);
            }
            if is_stale {
                stale.push(candidate(e, &rank, now_ms, true));
            } else if answer.candidates.len() < query.limit {
                answer.candidates.push(candidate(e, &rank, now_ms, false));
            } else if query.labels.is_empty() && !query.include_stale && pool.len() >= pool_size {
                // Nothing left to count: the stale were counted by their Edges.
                break;
            }
        }
        // The drawn one first, then the best others up to the limit.
        match pick.choose(&pool).filter(|&at| at > 0) {
            Some(at) if at < answer.candidates.len() => {
                if let Some(front) = answer.candidates.get_mut(..=at) {
                    front.rotate_right(1);
                }
            }
            Some(at) => {
                if let Some((e, rank)) = pool.get(at).and_then(|r| Some((self.slot(r.slot)?, r))) {
                    answer
                        .candidates
                        .insert(0, candidate(e, rank, now_ms, false));
                    answer.candidates.truncate(query.limit);
                }
            }
            None => {}
        }
        let room = query.limit.saturating_sub(answer.candidates.len());
        answer.candidates.extend(stale.into_iter().take(room));
        answer
    }

    /// Open providers of `model` whose Edge's numbers are stale at `now_ms`.
    fn stale_open(&self, model: &str, long: bool, now_ms: u64) -> u64 {
        let Some(model) = self.books.id(model) else {
            return 0;
        };
        let mut n = 0;
        for pushes in [false, true] {
            let after = self.staleness.after_ms(pushes);
            for (proved, slot) in self.proofs.oldest(pushes) {
                if proved.saturating_add(after) >= now_ms {
                    break;
                }
                let Some(e) = self.slot(slot) else { continue };
                for (i, class) in e.filed.iter().enumerate() {
                    let open = match class {
                        Class::Open { long: l, .. } => !long || l.is_some(),
                        _ => false,
                    };
                    if open && e.model_ids.get(i).is_some_and(|ids| ids.contains(&model)) {
                        n += 1;
                    }
                }
            }
        }
        n
    }

    fn is_stale(&self, e: &EdgeSlot, now_ms: u64) -> bool {
        e.proved_ms
            .saturating_add(self.staleness.after_ms(e.pushes))
            < now_ms
    }

    fn new_slot(&mut self, edge_id: Arc<str>, load: &Arc<EdgeLoad>) -> Slot {
        let e = EdgeSlot {
            edge_id,
            view: load.clone(),
            node_of: Box::default(),
            model_ids: Box::default(),
            filed: Vec::new(),
            reported_ms: Vec::new(),
            reserved: Vec::new(),
            pushes: false,
            live: false,
            proved_ms: 0,
        };
        let key = e.edge_id.clone();
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                if let Some(s) = self.slots.get_mut(slot as usize) {
                    *s = Some(e);
                }
                slot
            }
            None => {
                self.slots.push(Some(e));
                Slot::try_from(self.slots.len() - 1).unwrap_or(Slot::MAX)
            }
        };
        self.by_edge.insert(key, slot);
        slot
    }

    fn slot(&self, slot: Slot) -> Option<&EdgeSlot> {
        self.slots.get(slot as usize)?.as_ref()
    }

    fn slot_mut(&mut self, slot: Slot) -> Option<&mut EdgeSlot> {
        self.slots.get_mut(slot as usize)?.as_mut()
    }

    /// `slot`'s Edge proved its numbers at `at_ms`.
    fn prove(&mut self, slot: Slot, at_ms: u64) {
        let Some(e) = self.slot_mut(slot) else { return };
        e.proved_ms = e.proved_ms.max(at_ms);
        // Its proof is filed under its Edge's way of reporting (a disconnected Edge's
        // is taken out).
        let (pushes, proved) = (e.pushes, e.proved_ms);
        self.proofs.file(slot, pushes, proved);
    }

    /// Files provider `index` of `slot` by its numbers (`live`) or as offline.
    fn file(&mut self, slot: Slot, index: usize, live: bool) {
        let Some(e) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        let Some(p) = e.view.provider(index) else {
            return;
        };
        let reserved = e.reserved.get(index).copied().unwrap_or_default();
        let reported = e.reported_ms.get(index).copied().unwrap_or_default();
        let class = classify(&p, live && e.live, reserved, reported, slot, index as u32);
        for &id in e.model_ids.get(index).map_or(&[][..], |ids| ids) {
            if let Some(book) = self.books.book_mut(id) {
                book.file(class, true);
            }
        }
        if let Some(f) = e.filed.get_mut(index) {
            *f = class;
        }
        self.providers += 1;
    }

    /// Takes provider `index` of `slot` out of the books.
    fn unfile(&mut self, slot: Slot, index: usize) {
        let Some(e) = self.slots.get(slot as usize).and_then(Option::as_ref) else {
            return;
        };
        let (Some(&class), Some(ids)) = (e.filed.get(index), e.model_ids.get(index)) else {
            return;
        };
        for &id in ids {
            if let Some(book) = self.books.book_mut(id) {
                book.file(class, false);
            }
        }
        self.providers = self.providers.saturating_sub(1);
    }

    /// Files `slot`'s providers under the models of `load` (none: under none) from
    /// now on.
    fn set_models(&mut self, slot: Slot, load: Option<&EdgeLoad>) {
        let Some(e) = self.slots.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        for ids in &e.model_ids {
            self.books.release(ids);
        }
        e.model_ids = load
            .map(|load| load.providers().map(|p| self.books.acquire(p)).collect())
            .unwrap_or_default();
    }

    fn unfile_all(&mut self, slot: Slot) {
        for i in 0..self.slot(slot).map_or(0, |e| e.filed.len()) {
            self.unfile(slot, i);
        }
        if let Some(e) = self.slot_mut(slot) {
            e.filed.iter_mut().for_each(|c| *c = Class::Offline);
        }
    }
}
