//! Ownership records in memory: the engine of tests and of the seeded simulation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::ownership::{OwnershipStore, StoreError, WriteError};
use crate::record::{Current, OwnerRecord};

/// An in-memory [`OwnershipStore`] with the engine's semantics: one revision counter for
/// the whole bucket (as a JetStream stream's sequence), compare-and-set writes, and a
/// set of live replicas standing in for the liveness bucket.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    sequence: u64,
    records: BTreeMap<String, Current>,
    /// Every write of each key, oldest first (for [`MemoryStore::rewind`]).
    history: BTreeMap<String, Vec<Current>>,
    alive: BTreeSet<String>,
    down: bool,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut inner = match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut inner)
    }

    /// Marks `replica`'s liveness entry present (`true`) or expired.
    pub fn set_alive(&self, replica: &str, alive: bool) {
        self.with(|i| {
            if alive {
                i.alive.insert(replica.to_owned());
            } else {
                i.alive.remove(replica);
            }
        });
    }

    /// Makes every operation fail (`true`), as an engine that is down, or work again.
    pub fn set_down(&self, down: bool) {
        self.with(|i| i.down = down);
    }

    /// The record of `key` now.
    pub fn current(&self, key: &str) -> Option<Current> {
        self.with(|i| i.records.get(key).cloned())
    }

    /// Puts `key`'s record back to what it was `n` writes ago, as an engine that lost
    /// acknowledged writes would; gone if it had fewer. The revision counter stays.
    pub fn rewind(&self, key: &str, n: usize) {
        self.with(|i| {
            let history = i.history.entry(key.to_owned()).or_default();
            let keep = history.len().saturating_sub(n);
            history.truncate(keep);
            match history.last() {
                Some(c) => {
                    i.records.insert(key.to_owned(), c.clone());
                }
                None => {
                    i.records.remove(key);
                }
            }
        });
    }

    /// Writes `record` if `key` is at `expected` (`None`: has no record); its new
    /// revision.
    pub fn write(
        &self,
        key: &str,
        record: &OwnerRecord,
        expected: Option<u64>,
    ) -> Result<u64, WriteError> {
        self.with(|i| {
            if i.down {
                return Err(WriteError::Store(StoreError("down".into())));
            }
            let at = i.records.get(key).map(|c| c.revision);
            if at != expected {
                return Err(WriteError::Conflict);
            }
            i.sequence += 1;
            let revision = i.sequence;
            let current = Current {
                record: Some(record.clone()),
                revision,
            };
            i.history
                .entry(key.to_owned())
                .or_default()
                .push(current.clone());
            i.records.insert(key.to_owned(), current);
            Ok(revision)
        })
    }

    fn read(&self, key: &str) -> Result<Option<Current>, StoreError> {
        self.with(|i| {
            if i.down {
                return Err(StoreError("down".into()));
            }
            Ok(i.records.get(key).cloned())
        })
    }
}

impl OwnershipStore for MemoryStore {
    async fn entry(&self, key: &str) -> Result<Option<Current>, StoreError> {
        self.read(key)
    }

    async fn create(&self, key: &str, record: &OwnerRecord) -> Result<u64, WriteError> {
        self.write(key, record, None)
    }

    async fn update(
        &self,
        key: &str,
        record: &OwnerRecord,
        expected: u64,
    ) -> Result<u64, WriteError> {
        self.write(key, record, Some(expected))
    }

    async fn leader_entry(&self, key: &str) -> Result<Option<Current>, StoreError> {
        self.read(key)
    }

    async fn replica_alive(&self, replica: &str) -> Result<bool, StoreError> {
        self.with(|i| {
            if i.down {
                return Err(StoreError("down".into()));
            }
            Ok(i.alive.contains(replica))
        })
    }
}
