//! [`FleetLoad`]: the totals of every Edge's view, by provider category, by model and
//! by node label, kept as views come and go — each change adds the new view's part
//! and takes back the old one's — so that reading them costs nothing however many
//! Edges there are.

use std::collections::BTreeMap;
use std::sync::Arc;

use iop_core::cp::load::{EdgeLoad, NodeLoad, NodeStates, ProviderLoad};
use iop_core::proto::ProviderCategory;

use super::totals::{LoadTotals, ProviderPart};
use super::view::{LoadView, part};

/// How an Edge's view counts in the fleet's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Counted {
    /// Not at all: no view, or the Edge is live on another Control Plane.
    #[default]
    No,
    /// As it reported: it has a live session here.
    Live,
    /// Every provider offline at the capacity it last reported online: the Edge is
    /// disconnected (and not known to be live elsewhere).
    Offline,
}

/// Totals of a group of providers, and how many members (providers of a model, nodes
/// of a label) put them there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) totals: LoadTotals,
    pub(super) members: u64,
}

/// The fleet's load: every view this Control Plane holds, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetLoad {
    pub(super) total: LoadTotals,
    pub(super) by_category: [LoadTotals; 4],
    pub(super) by_model: BTreeMap<Box<str>, Tally>,
    pub(super) by_label: BTreeMap<Box<str>, BTreeMap<Box<str>, Tally>>,
    pub(super) nodes: NodeStates,
    pub(super) nodes_offline: u64,
    pub(super) edges_live: u64,
    pub(super) edges_offline: u64,
}

impl FleetLoad {
    /// Every provider.
    pub fn total(&self) -> &LoadTotals {
        &self.total
    }

    /// By provider category, each category once (empty ones included).
    pub fn by_category(&self) -> impl Iterator<Item = (ProviderCategory, &LoadTotals)> {
        [
            ProviderCategory::Unspecified,
            ProviderCategory::Cli,
            ProviderCategory::Api,
            ProviderCategory::LocalInference,
        ]
        .into_iter()
        .zip(self.by_category.iter())
    }

    /// By model, in name order; a provider serving several models counts in each.
    pub fn by_model(&self) -> impl Iterator<Item = (&str, &LoadTotals)> {
        self.by_model.iter().map(|(m, t)| (&**m, &t.totals))
    }

    /// By node label `(key, value)`, in order; a node's providers count under each of
    /// its labels.
    pub fn by_label(&self) -> impl Iterator<Item = (&str, &str, &LoadTotals)> {
        self.by_label
            .iter()
            .flat_map(|(k, values)| values.iter().map(move |(v, t)| (&**k, &**v, &t.totals)))
    }

    /// The nodes of the Edges connected here, by state.
    pub fn nodes(&self) -> &NodeStates {
        &self.nodes
    }

    /// Nodes of the disconnected Edges counted offline.
    pub fn nodes_offline(&self) -> u64 {
        self.nodes_offline
    }

    /// Edges counted as they reported (connected here, with a view).
    pub fn edges_live(&self) -> u64 {
        self.edges_live
    }

    /// Edges counted offline (disconnected, with a view, not live elsewhere).
    pub fn edges_offline(&self) -> u64 {
        self.edges_offline
    }

    /// Adds `view`'s part, counted `how`.
    pub(crate) fn count(&mut self, view: &LoadView, how: Counted) {
        self.apply(view, how, true);
    }

    /// Takes back `view`'s part, counted `how` when it was added.
    pub(crate) fn uncount(&mut self, view: &LoadView, how: Counted) {
        self.apply(view, how, false);
    }

    fn apply(&mut self, view: &LoadView, how: Counted, add: bool) {
        let op: fn(u64, u64) -> u64 = if add {
            u64::wrapping_add
        } else {
            u64::wrapping_sub
        };
        match how {
            Counted::No => return,
            Counted::Live => self.edges_live = op(self.edges_live, 1),
            Counted::Offline => self.edges_offline = op(self.edges_offline, 1),
        }
        let offline = how == Counted::Offline;
        for node in view.load.nodes() {
            match (how, add) {
                (Counted::Live, true) => self.nodes.count(node.state(), 1),
                (Counted::Live, false) => self.nodes.uncount(node.state(), 1),
                _ => self.nodes_offline = op(self.nodes_offline, 1),
            }
            for (k, v) in node.labels() {
                if let Some(t) = label_tally(&mut self.by_label, k, v) {
                    t.members = op(t.members, 1);
                }
            }
            let first = node.provider_indexes().start;
            for (i, p) in node.providers().enumerate() {
                let part = part(&p, view.remembered(first + i), offline);
                self.provider(&node, &p, &part, add);
            }
        }
        if !add {
            self.by_model.retain(|_, t| t.members != 0);
            self.by_label.retain(|_, values| {
                values.retain(|_, t| t.members != 0);
                !values.is_empty()
            });
        }
    }

    /// Renumbers `view` (counted live) to `load`, of the same structure (a load
    /// update changed only numbers, [`EdgeLoad::same_structure`]), received at
    /// `at_unix_ms`: providers `changed` (indexes of its providers) have their parts
    /// replaced — what a whole recount would do, at the cost of the providers that
    /// changed, each total looked up once. `before` is scratch space.
    pub(crate) fn renumber(
        &mut self,
        view: &mut LoadView,
        load: &Arc<EdgeLoad>,
        changed: &[u32],
        at_unix_ms: u64,
        before: &mut Vec<ProviderPart>,
    ) {
        before.clear();
        before.extend(changed.iter().map(|&i| {
            let i = i as usize;
            let p = view.load.provider(i);
            p.map(|p| part(&p, view.remembered(i), false))
                .unwrap_or_default()
        }));
        view.renumber(load.clone(), at_unix_ms);
        for (&i, before) in changed.iter().zip(before.iter()) {
            let i = i as usize;
            let node = view
                .load
                .nodes()
                .find(|n| n.provider_indexes().contains(&i));
            let (Some(node), Some(after)) = (node, view.load.provider(i)) else {
                continue;
            };
            let after_part = part(&after, view.remembered(i), false);
            self.provider_renumbered(&node, &after, before, &after_part);
        }
    }

    /// One provider's part on `node` went from `before` to `after`, its models and
    /// node the same: every total it counts in takes the difference.
    fn provider_renumbered(
        &mut self,
        node: &NodeLoad<'_>,
        p: &ProviderLoad<'_>,
        before: &ProviderPart,
        after: &ProviderPart,
    ) {
        let apply = |t: &mut LoadTotals| {
            t.sub(before);
            t.add(after);
        };
        apply(&mut self.total);
        if let Some(t) = self.by_category.get_mut(p.category() as usize) {
            apply(t);
        }
        for m in p.models() {
            // Counted before, so its tally is there (made if not, to stay exact).
            let tally = match self.by_model.get_mut(m) {
                Some(t) => Some(t),
                None => model_tally(&mut self.by_model, m),
            };
            if let Some(t) = tally {
                apply(&mut t.totals);
            }
        }
        for (k, v) in node.labels() {
            let tally = match self
                .by_label
                .get_mut(k)
                .and_then(|values| values.get_mut(v))
            {
                Some(t) => Some(t),
                None => label_tally(&mut self.by_label, k, v),
            };
            if let Some(t) = tally {
                apply(&mut t.totals);
            }
        }
    }

    /// Adds (or takes back) one provider's part, on `node`, in every total it counts in.
    fn provider(
        &mut self,
        node: &NodeLoad<'_>,
        p: &ProviderLoad<'_>,
        part: &ProviderPart,
        add: bool,
    ) {
        let apply = |t: &mut LoadTotals| {
            if add {
                t.add(part);
            } else {
                t.sub(part);
            }
        };
        apply(&mut self.total);
        if let Some(t) = self.by_category.get_mut(p.category() as usize) {
            apply(t);
        }
        let op: fn(u64, u64) -> u64 = if add {
            u64::wrapping_add
        } else {
            u64::wrapping_sub
        };
        for m in p.models() {
            if let Some(t) = model_tally(&mut self.by_model, m) {
                t.members = op(t.members, 1);
                apply(&mut t.totals);
            }
        }
        for (k, v) in node.labels() {
            if let Some(t) = label_tally(&mut self.by_label, k, v) {
                apply(&mut t.totals);
            }
        }
    }

    /// Adds another fleet's totals (another replica's), for a cluster's whole.
    pub fn merge(&mut self, other: &FleetLoad) {
        self.total.merge(&other.total);
        for (mine, theirs) in self.by_category.iter_mut().zip(other.by_category.iter()) {
            mine.merge(theirs);
        }
        for (m, t) in &other.by_model {
            let mine = self.by_model.entry(m.clone()).or_default();
            mine.totals.merge(&t.totals);
            mine.members += t.members;
        }
        for (k, values) in &other.by_label {
            let mine = self.by_label.entry(k.clone()).or_default();
            for (v, t) in values {
                let tally = mine.entry(v.clone()).or_default();
                tally.totals.merge(&t.totals);
                tally.members += t.members;
            }
        }
        self.nodes.merge(&other.nodes);
        self.nodes_offline += other.nodes_offline;
        self.edges_live += other.edges_live;
        self.edges_offline += other.edges_offline;
    }
}

/// The tally of `model`, made if new (a name is allocated only then).
pub(super) fn model_tally<'a>(
    map: &'a mut BTreeMap<Box<str>, Tally>,
    model: &str,
) -> Option<&'a mut Tally> {
    if !map.contains_key(model) {
        map.insert(model.into(), Tally::default());
    }
    map.get_mut(model)
}

/// The tally of label `key=value`, made if new.
pub(super) fn label_tally<'a>(
    map: &'a mut BTreeMap<Box<str>, BTreeMap<Box<str>, Tally>>,
    key: &str,
    value: &str,
) -> Option<&'a mut Tally> {
    if !map.contains_key(key) {
        map.insert(key.into(), BTreeMap::new());
    }
    let values = map.get_mut(key)?;
    if !values.contains_key(value) {
        values.insert(value.into(), Tally::default());
    }
    values.get_mut(value)
}
