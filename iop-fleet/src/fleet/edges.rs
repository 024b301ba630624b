//! The Edges the fleet holds a view of: found by hashing their id (every load update
//! looks one up), listed in id order (a watch's snapshot, the admin API's pages).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Values by Edge id: a hash map for lookups and the ids in order for listing, each
/// id one shared string.
#[derive(Debug)]
pub(super) struct ById<V> {
    by_id: HashMap<Arc<str>, V>,
    order: BTreeSet<Arc<str>>,
}

impl<V> Default for ById<V> {
    fn default() -> Self {
        Self {
            by_id: HashMap::new(),
            order: BTreeSet::new(),
        }
    }
}

impl<V> ById<V> {
    pub(super) fn get(&self, id: &str) -> Option<&V> {
        self.by_id.get(id)
    }

    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut V> {
        self.by_id.get_mut(id)
    }

    /// Inserts (or replaces) `id`'s value.
    pub(super) fn insert(&mut self, id: Arc<str>, value: V) {
        if let Some(v) = self.by_id.get_mut(&*id) {
            *v = value;
            return;
        }
        self.order.insert(id.clone());
        self.by_id.insert(id, value);
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<V> {
        let value = self.by_id.remove(id)?;
        self.order.remove(id);
        Some(value)
    }

    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// In id order.
    pub(super) fn iter(&self) -> impl ExactSizeIterator<Item = (&Arc<str>, &V)> {
        Ordered {
            ids: self.order.iter(),
            by_id: &self.by_id,
        }
    }

    /// Those after `after`, in id order.
    pub(super) fn after(&self, after: &str) -> impl Iterator<Item = (&Arc<str>, &V)> {
        use std::ops::Bound::{Excluded, Unbounded};
        Ordered {
            ids: self.order.range::<str, _>((Excluded(after), Unbounded)),
            by_id: &self.by_id,
        }
    }

    /// In no particular order.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.by_id.values_mut()
    }
}

/// [`ById::iter`]: the ids in order, each with its value.
struct Ordered<'a, V, I> {
    ids: I,
    by_id: &'a HashMap<Arc<str>, V>,
}

impl<'a, V: 'a, I: Iterator<Item = &'a Arc<str>>> Iterator for Ordered<'a, V, I> {
    type Item = (&'a Arc<str>, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        // Every id listed has its value: both change together.
        self.ids.find_map(|id| self.by_id.get_key_value(&**id))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ids.size_hint()
    }
}

impl<'a, V: 'a, I: ExactSizeIterator<Item = &'a Arc<str>>> ExactSizeIterator for Ordered<'a, V, I> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_id_and_listed_in_id_order() {
        let mut m = ById::default();
        for (id, v) in [("b", 2), ("c", 3), ("a", 1)] {
            m.insert(id.into(), v);
        }
        m.insert("b".into(), 20);
        assert_eq!(m.get("b"), Some(&20));
        assert_eq!(m.remove("c"), Some(3));
        assert_eq!(m.remove("c"), None);
        let listed: Vec<(&str, i32)> = m.iter().map(|(k, v)| (&**k, *v)).collect();
        assert_eq!(listed, [("a", 1), ("b", 20)]);
        assert_eq!(m.iter().len(), 2);
        assert!(m.get("a").is_some() && m.get("c").is_none());
        let after: Vec<&str> = m.after("a").map(|(k, _)| &**k).collect();
        assert_eq!(after, ["b"]);
    }
}
