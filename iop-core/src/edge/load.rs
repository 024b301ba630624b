//! Load updates the Edge pushes (PROTOCOL.md §4.8): offered in the hello when the
//! registry tells its load, sent once the Control Plane answered a non-zero interval
//! and the session's first full status went out (its last page, when paged). Then,
//! at most once per interval, one update with the numbers of every provider that
//! changed since the Edge last reported it on this session — in a status answer or an
//! update — each provider once; nothing when nothing changed. A change the numbers
//! cannot carry (a node or provider came or went, a config changed, more than 1 024
//! providers changed, an update over the CP's frame limit) is a `resync` with no
//! providers, after which the Edge waits for the next full status again.
//!
//! The registry's snapshot rules hold in updates because the numbers come from the
//! same place: an offline provider reports zeros, a node that goes down reports its
//! providers `node_connected = false` and zeros in the update that follows the change.

use std::collections::BTreeMap;
use std::iter::Peekable;
use std::time::Duration;

use iop_proto::limits::{
    MAX_ID_LEN, MAX_LOAD_UPDATE_INTERVAL, MAX_LOAD_UPDATE_PROVIDERS, MIN_LOAD_UPDATE_INTERVAL,
};
use iop_proto::{EdgeLoadUpdate, Envelope, Message, ProviderLoad};

use super::link::{Conn, Edge};
use super::registry_seam::{EdgeRegistry, StatusScope};
use crate::Instant;
use crate::registry::LoadNumbers;

/// What one session pushes.
#[derive(Debug, Clone)]
pub(crate) struct LoadPush {
    interval: Duration,
    /// The session's first full status answer (its last page) went out.
    based: bool,
    sequence: u64,
    /// Node → provider → the numbers last reported on this session.
    reported: Reported,
    /// The registry's load revision when `reported` last matched it.
    seen: Option<u64>,
    /// The registry's structure revision of the latest full status answer.
    structure: u64,
    /// The earliest time of the next update.
    next_at: Instant,
}

/// What a scan of the registry against what was reported found.
enum Scan {
    /// Nothing changed.
    Same,
    /// These changed.
    Changed(Vec<ProviderLoad>),
    /// A change an update cannot carry.
    Resync,
}

impl<R: EdgeRegistry> Edge<R> {
    /// Whether the hello offers load updates.
    pub(super) fn offers_load(&self) -> bool {
        self.config.load_updates && self.registry.reports_load()
    }

    /// The hello was accepted with `interval_ms` (0: none): pushing starts with the
    /// session's first full status answer.
    pub(super) fn negotiate_load(&mut self, now: Instant, interval_ms: u32) {
        self.load = (interval_ms != 0 && self.offers_load()).then(|| {
            // A Control Plane outside the range is kept to it: never faster than 50 ms.
            let interval = Duration::from_millis(u64::from(interval_ms))
                .clamp(MIN_LOAD_UPDATE_INTERVAL, MAX_LOAD_UPDATE_INTERVAL);
            Box::new(LoadPush {
                interval,
                based: false,
                sequence: 0,
                reported: BTreeMap::new(),
                seen: None,
                structure: 0,
                next_at: now,
            })
        });
    }

    /// A status answer for `scope` holding `nodes` went out: their numbers are reported; a whole answer for every node (not truncated, all or the
    /// last page) lets updates follow.
    pub(super) fn load_answered(
        &mut self,
        scope: StatusScope<'_>,
        nodes: &[String],
        truncated: bool,
    ) {
        let Some(push) = self.load.as_deref_mut() else {
            return;
        };
        let mut current: BTreeMap<&str, BTreeMap<String, LoadNumbers>> = nodes
            .iter()
            .map(|n| (n.as_str(), BTreeMap::new()))
            .collect();
        self.registry.visit_loads(&mut |node, provider, numbers| {
            if let Some(providers) = current.get_mut(node) {
                providers.insert(provider.to_owned(), numbers);
            }
        });
        let all = matches!(scope, StatusScope::All);
        if all && !truncated {
            push.reported
                .retain(|node, _| current.contains_key(node.as_str()));
        }
        for (node, providers) in current {
            push.reported.insert(node.to_owned(), providers);
        }
        if !truncated && matches!(scope, StatusScope::All | StatusScope::After(_)) {
            push.based = true;
            push.structure = self.registry.structure_revision();
        }
        // Earlier pages may have changed since they went out: looked at again.
        push.seen = None;
    }

    /// When the next update is due, if the registry moved since the last look.
    pub(super) fn load_deadline(&self) -> Option<Instant> {
        let push = self.load.as_deref()?;
        let moved = push.seen != Some(self.registry.load_revision())
            || push.structure != self.registry.structure_revision();
        (push.based && moved && matches!(self.conn, Conn::Active(_))).then_some(push.next_at)
    }

    /// Sends the update due at `now`, if any.
    pub(super) fn push_load(&mut self, now: Instant) {
        if self.load_deadline().is_none_or(|at| at > now) {
            return;
        }
        let revision = self.registry.load_revision();
        let scan = self.scan_loads();
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let max_frame = self.outbound.max_frame_len() as usize;
        let Some(push) = self.load.as_deref_mut() else {
            return;
        };
        push.seen = Some(revision);
        let mut update = EdgeLoadUpdate {
            sequence: push.sequence + 1,
            observed_at_unix_ms: unix_ms,
            providers: Vec::new(),
            resync: false,
        };
        match scan {
            Scan::Same => return,
            Scan::Changed(changed) => update.providers = changed,
            Scan::Resync => update.resync = true,
        }
        let envelope = Envelope::new(update);
        let envelope = if envelope.encoded_len() > max_frame {
            // A churn of long ids past the CP's frame limit: as more than fit.
            Envelope::new(EdgeLoadUpdate {
                sequence: push.sequence + 1,
                observed_at_unix_ms: unix_ms,
                providers: Vec::new(),
                resync: true,
            })
        } else {
            envelope
        };
        let Some(iop_proto::Body::LoadUpdate(update)) = &envelope.body else {
            return;
        };
        push.sequence += 1;
        push.next_at = now + push.interval;
        if update.resync {
            push.based = false;
            push.reported.clear();
            self.stats.load_resyncs_sent += 1;
        } else {
            for p in &update.providers {
                let numbers = numbers_of(p);
                push.reported
                    .entry(p.node_id.clone())
                    .or_default()
                    .insert(p.provider_id.clone(), numbers);
            }
            self.stats.load_updates_sent += 1;
        }
        self.send(now, envelope);
    }

    /// Compares the registry's numbers with those reported.
    fn scan_loads(&self) -> Scan {
        let Some(push) = self.load.as_deref() else {
            return Scan::Same;
        };
        if push.structure != self.registry.structure_revision() {
            return Scan::Resync;
        }
        let mut changed = Vec::new();
        let (mut known, mut strange) = (0usize, false);
        let mut nodes = NodeCursor::new(&push.reported);
        self.registry.visit_loads(&mut |node, provider, numbers| {
            // An id the CP would refuse (from a custom registry) is never sent.
            if node.len() > MAX_ID_LEN || provider.len() > MAX_ID_LEN {
                return;
            }
            match nodes.providers(node).and_then(|p| p.get(provider)) {
                Some(was) => {
                    known += 1;
                    if *was != numbers && changed.len() <= MAX_LOAD_UPDATE_PROVIDERS {
                        changed.push(numbers.to_wire(node, provider));
                    }
                }
                None => strange = true,
            }
        });
        let reported: usize = push.reported.values().map(BTreeMap::len).sum();
        if strange || known != reported || changed.len() > MAX_LOAD_UPDATE_PROVIDERS {
            Scan::Resync
        } else if changed.is_empty() {
            Scan::Same
        } else {
            Scan::Changed(changed)
        }
    }
}

/// Node → provider → numbers, as [`LoadPush`] keeps what it reported.
type Reported = BTreeMap<String, BTreeMap<String, LoadNumbers>>;

/// Finds each visited node's reported providers. A registry visits its nodes in id
/// order, the order they are kept in, so the node after the last one found is tried
/// first, and looked up only when a registry visits in another order: a scan every
/// interval costs no search of the nodes.
struct NodeCursor<'a> {
    reported: &'a Reported,
    ahead: Peekable<std::collections::btree_map::Iter<'a, String, BTreeMap<String, LoadNumbers>>>,
    current: Option<(&'a str, &'a BTreeMap<String, LoadNumbers>)>,
}

impl<'a> NodeCursor<'a> {
    fn new(reported: &'a Reported) -> Self {
        Self {
            reported,
            ahead: reported.iter().peekable(),
            current: None,
        }
    }

    /// The providers reported for `node`.
    fn providers(&mut self, node: &str) -> Option<&'a BTreeMap<String, LoadNumbers>> {
        if let Some((id, providers)) = self.current
            && id == node
        {
            return Some(providers);
        }
        let found = match self.ahead.peek() {
            Some((id, _)) if *id == node => self.ahead.next(),
            _ => self.reported.get_key_value(node),
        };
        self.current = found.map(|(id, providers)| (id.as_str(), providers));
        self.current.map(|(_, providers)| providers)
    }
}

/// The numbers a wire provider load carries.
fn numbers_of(p: &ProviderLoad) -> LoadNumbers {
    LoadNumbers::new(
        p.status(),
        p.health(),
        p.numbers(),
        p.admission_eligible,
        p.node_connected,
    )
}

/// The node ids an encoded `EdgeStatusResponse` holds, and its `truncated`; `None` for
/// bytes that do not read as one.
pub(super) fn answer_nodes(body: &[u8]) -> Option<(Vec<&str>, bool)> {
    let mut nodes = Vec::new();
    let mut truncated = false;
    let mut buf = body;
    while !buf.is_empty() {
        let (field, wire_type) = key(&mut buf)?;
        match (field, wire_type) {
            (2, 2) => {
                let node = delimited(&mut buf)?;
                nodes.push(node_id(node)?);
            }
            (5, 0) => truncated = varint(&mut buf)? != 0,
            _ => skip(&mut buf, wire_type)?,
        }
    }
    Some((nodes, truncated))
}

/// The `node_id` (field 1) of an encoded `EdgeNodeSnapshot`.
fn node_id(mut node: &[u8]) -> Option<&str> {
    let mut id = "";
    while !node.is_empty() {
        let (field, wire_type) = key(&mut node)?;
        if (field, wire_type) == (1, 2) {
            id = std::str::from_utf8(delimited(&mut node)?).ok()?;
        } else {
            skip(&mut node, wire_type)?;
        }
    }
    Some(id)
}

fn key(buf: &mut &[u8]) -> Option<(u64, u64)> {
    let key = varint(buf)?;
    Some((key >> 3, key & 7))
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

fn delimited<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(varint(buf)?).ok()?;
    let (head, rest) = buf.split_at_checked(len)?;
    *buf = rest;
    Some(head)
}

fn skip(buf: &mut &[u8], wire_type: u64) -> Option<()> {
    let len = match wire_type {
        0 => return varint(buf).map(|_| ()),
        1 => 8,
        2 => return delimited(buf).map(|_| ()),
        5 => 4,
        _ => return None,
    };
    *buf = buf.get(len..)?;
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_finds_nodes_in_any_order_and_only_those_reported() {
        let numbers = |c| LoadNumbers {
            numbers: [c, 0, 0, 0, 0, 0],
            ..LoadNumbers::default()
        };
        let mut reported = Reported::new();
        for (i, node) in ["a", "b", "d"].into_iter().enumerate() {
            let providers = BTreeMap::from([("p".to_owned(), numbers(i as u32))]);
            reported.insert(node.to_owned(), providers);
        }
        let capacity = |found: Option<&BTreeMap<String, LoadNumbers>>| {
            found.and_then(|p| p.get("p")).map(|n| n.numbers[0])
        };
        let mut cursor = NodeCursor::new(&reported);
        // In order, each node asked for once per provider.
        for (node, want) in [("a", Some(0)), ("a", Some(0)), ("b", Some(1))] {
            assert_eq!(capacity(cursor.providers(node)), want, "{node}");
        }
        // A node not reported, then the rest: in order, and out of it.
        for (node, want) in [("c", None), ("d", Some(2)), ("a", Some(0)), ("b", Some(1))] {
            assert_eq!(capacity(cursor.providers(node)), want, "{node}");
        }
        assert_eq!(capacity(NodeCursor::new(&reported).providers("d")), Some(2));
        assert_eq!(NodeCursor::new(&Reported::new()).providers("a"), None);
    }
}
