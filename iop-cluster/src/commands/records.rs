//! The command bucket as the write path sees it ([`Records`]): read a key, create it,
//! or update it on a revision — the engine's three operations, each bounded by a
//! timeout — and the compare-and-set every record write is made of ([`cas_put`]).
//! The bucket itself implements it; the write path's tests put an engine double in
//! its place that fails any step, or lands a write after reporting it failed.

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv;
use bytes::Bytes;

use super::ATTEMPTS;

/// One key's latest entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Its revision.
    pub(crate) revision: u64,
    /// Its value; `None` when it was deleted or purged.
    pub(crate) value: Option<Bytes>,
    /// How long ago the engine wrote it (by the engine's clock against ours: an
    /// estimate, for ages of seconds).
    pub(crate) age: Duration,
}

/// Why a create or an update did not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The key exists (a create), or is not at the revision given (an update).
    Moved,
    /// The engine did not answer in time, or refused: the write may still land.
    Failed,
}

/// The engine's operations on the command bucket, each within the store's timeout.
pub(crate) trait Records: Send + Sync {
    /// The latest entry of `key`; `Err` when the engine did not answer.
    fn entry(&self, key: &str) -> impl Future<Output = Result<Option<Entry>, ()>> + Send;
    /// Writes `value` at `key` if there is none; its revision.
    fn create(&self, key: &str, value: Bytes) -> impl Future<Output = Result<u64, Refused>> + Send;
    /// Writes `value` at `key` if its latest revision is `revision`; the new revision.
    fn update(
        &self,
        key: &str,
        value: Bytes,
        revision: u64,
    ) -> impl Future<Output = Result<u64, Refused>> + Send;
}

/// The bucket, each operation within `timeout`.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    pub(crate) kv: kv::Store,
    pub(crate) timeout: Duration,
}

impl Records for Bucket {
    async fn entry(&self, key: &str) -> Result<Option<Entry>, ()> {
        let entry = tokio::time::timeout(self.timeout, self.kv.entry(key))
            .await
            .map_err(|_| ())?
            .map_err(|_| ())?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Ok(entry.map(|e| {
            let written = u128::try_from(e.created.unix_timestamp_nanos()).unwrap_or(0);
            Entry {
                revision: e.revision,
                value: (e.operation == kv::Operation::Put).then_some(e.value),
                age: Duration::from_nanos(
                    u64::try_from(now.saturating_sub(written)).unwrap_or(u64::MAX),
                ),
            }
        }))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<u64, Refused> {
        match tokio::time::timeout(self.timeout, self.kv.create(key, value)).await {
            Ok(Ok(revision)) => Ok(revision),
            Ok(Err(e)) if e.kind() == kv::CreateErrorKind::AlreadyExists => Err(Refused::Moved),
            _ => Err(Refused::Failed),
        }
    }

    async fn update(&self, key: &str, value: Bytes, revision: u64) -> Result<u64, Refused> {
        match tokio::time::timeout(self.timeout, self.kv.update(key, value, revision)).await {
            Ok(Ok(revision)) => Ok(revision),
            Ok(Err(e)) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Err(Refused::Moved),
            _ => Err(Refused::Failed),
        }
    }
}

/// How a compare-and-set put ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Put {
    /// At this revision.
    Written(u64),
    /// A value that must stand is there (written for a newer session, or a command's
    /// ending this write does not repeat): left as it is.
    Stands,
    /// The engine did not take it.
    Failed,
}

/// Writes `value` at `key` by compare-and-set on `expected` (or create); on a
/// conflict reads the value again, and gives way to one that must stand (`stands`
/// says: one written for a newer session, or an ending another replica wrote).
pub(crate) async fn cas_put(
    records: &impl Records,
    key: &str,
    value: Bytes,
    mut expected: Option<u64>,
    stands: impl Fn(&[u8]) -> bool,
) -> Put {
    let mut tried = HashSet::new();
    for _ in 0..ATTEMPTS {
        let result = match expected {
            Some(r) => records.update(key, value.clone(), r).await,
            None => records.create(key, value.clone()).await,
        };
        // Moved on, or not taken (it may have landed all the same): read it again.
        let Err(why) = result else {
            return result.map_or(Put::Failed, Put::Written);
        };
        tried.insert(expected);
        match records.entry(key).await {
            Ok(Some(entry)) => {
                if entry.value.as_deref().is_some_and(&stands) {
                    return Put::Stands;
                }
                // Deleted or purged: `update` on its revision writes it again.
                expected = Some(entry.revision);
            }
            Ok(None) => expected = None,
            Err(()) => {
                tracing::warn!(key, ?why, "cannot write a command record");
                return Put::Failed;
            }
        }
        if tried.contains(&expected) {
            // The same revision again: not a race but an engine refusing the write.
            tracing::warn!(key, ?why, "cannot write a command record");
            return Put::Failed;
        }
    }
    Put::Failed
}

/// An engine double for the write path's tests: a bucket in memory whose every
/// operation follows a script — done, failed without landing, or failed and landed
/// later (when the test says), as a write the engine applies after its writer stopped
/// waiting.
#[cfg(test)]
pub(crate) mod double {
    use std::collections::{BTreeMap, VecDeque};
    use std::sync::Mutex;
    use std::time::Duration;

    use bytes::Bytes;

    use super::{Entry, Records, Refused};

    /// What the next operation does.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Step {
        /// Done as asked.
        Ok,
        /// Reported failed, not applied.
        Fail,
        /// Reported failed; applied when [`Double::land`] is called.
        Late,
    }

    /// A write not applied yet: key, value, expected revision (`None`: a create).
    type Pending = (String, Bytes, Option<u64>);

    #[derive(Default)]
    struct State {
        keys: BTreeMap<String, (u64, Option<Bytes>)>,
        revision: u64,
        script: VecDeque<Step>,
        pending: Vec<Pending>,
        /// Every operation, in order: "entry k", "create k", "update k@r".
        log: Vec<String>,
    }

    /// The bucket in memory.
    #[derive(Default)]
    pub(crate) struct Double {
        state: Mutex<State>,
        /// How old every entry reads.
        pub(crate) age: Duration,
    }

    impl Double {
        /// The next operations follow `steps`; those after them are done.
        pub(crate) fn script(&self, steps: &[Step]) {
            self.state.lock().unwrap().script = steps.iter().copied().collect();
        }

        /// The late writes land now (each still a compare-and-set).
        pub(crate) fn land(&self) {
            let mut s = self.state.lock().unwrap();
            for (key, value, expected) in std::mem::take(&mut s.pending) {
                let _ = apply(&mut s, &key, value, expected);
            }
        }

        /// `key`'s value now.
        pub(crate) fn value(&self, key: &str) -> Option<Bytes> {
            self.state.lock().unwrap().keys.get(key)?.1.clone()
        }

        /// Puts `value` at `key` (a write of the past).
        pub(crate) fn put(&self, key: &str, value: Bytes) {
            let mut s = self.state.lock().unwrap();
            let expected = s.keys.get(key).map(|(r, _)| *r);
            let _ = apply(&mut s, key, value, expected);
        }

        /// The operations so far.
        pub(crate) fn log(&self) -> Vec<String> {
            self.state.lock().unwrap().log.clone()
        }

        fn step(&self) -> Step {
            self.state
                .lock()
                .unwrap()
                .script
                .pop_front()
                .unwrap_or(Step::Ok)
        }

        fn write(&self, key: &str, value: Bytes, expected: Option<u64>) -> Result<u64, Refused> {
            let step = self.step();
            let mut s = self.state.lock().unwrap();
            let what = match expected {
                None => format!("create {key}"),
                Some(r) => format!("update {key}@{r}"),
            };
            s.log.push(what);
            match step {
                Step::Ok => apply(&mut s, key, value, expected),
                Step::Fail => Err(Refused::Failed),
                Step::Late => {
                    s.pending.push((key.to_owned(), value, expected));
                    Err(Refused::Failed)
                }
            }
        }
    }

    fn apply(
        s: &mut State,
        key: &str,
        value: Bytes,
        expected: Option<u64>,
    ) -> Result<u64, Refused> {
        let current = s.keys.get(key).map(|(r, _)| *r);
        if current != expected {
            return Err(Refused::Moved);
        }
        s.revision += 1;
        let revision = s.revision;
        s.keys.insert(key.to_owned(), (revision, Some(value)));
        Ok(revision)
    }

    impl Records for Double {
        async fn entry(&self, key: &str) -> Result<Option<Entry>, ()> {
            let step = self.step();
            let mut s = self.state.lock().unwrap();
            s.log.push(format!("entry {key}"));
            if step != Step::Ok {
                return Err(());
            }
            Ok(s.keys.get(key).map(|(revision, value)| Entry {
                revision: *revision,
                value: value.clone(),
                age: self.age,
            }))
        }

        async fn create(&self, key: &str, value: Bytes) -> Result<u64, Refused> {
            self.write(key, value, None)
        }

        async fn update(&self, key: &str, value: Bytes, revision: u64) -> Result<u64, Refused> {
            self.write(key, value, Some(revision))
        }
    }
}
