//! Group commit of ownership records (PROTOCOL.md §8 "Ownership"): the claims and
//! releases of one replica that reach the engine together share its durable writes.
//!
//! On an engine that flushes every acknowledged write to disk (`sync_interval:
//! always`), each compare-and-set is its own flush, and a fleet-wide reconnect is as
//! many flushes as Edges. One task per replica takes the writes in turn: the first
//! waiting write goes at once; every write that arrives while it is in flight waits
//! for the next group, so the groups grow with the load and a lone claim waits for
//! nothing.
//!
//! A group of at least [`ATOMIC_MIN`] writes goes to the engine as one JetStream
//! **atomic batch**: every message keeps its own compare-and-set
//! (`Nats-Expected-Last-Subject-Sequence`), the engine stores all of them or none,
//! with consecutive revisions, under one commit, and acknowledges the batch once it
//! is durable. A batch the engine refuses stored nothing (one write's revision moved
//! on, a lost message, a batch limit): its writes are sent again one by one, so each
//! learns its own answer (a conflict for the one that moved on). A batch whose
//! answer never comes may or may not have landed: each of its writes fails as a lone
//! write whose acknowledgement was lost does, and the holder reads its record again.
//! Smaller groups go as concurrent single writes: an atomic commit costs about as
//! much as two dozen single writes (docs/benchmarks/cluster.md). The next group waits
//! for a group's single writes — so that groups grow with the load — but, once the
//! engine has answered one of them, for an eighth of the operation timeout at most:
//! one write whose answer is slow would otherwise stall every claim behind it for up
//! to its timeout. The next group then goes while the slow ones are in flight, without
//! their keys: a write of a key in flight waits for its answer, so the writes of one
//! key reach the engine in order. An engine that answers none of a group is stalled,
//! not slow: nothing more is sent to it until they end (answered or timed out), and
//! the writes queued meanwhile with less than half their time left are dropped
//! unsent. Nothing is acknowledged before the engine has it;
//! the decision and the fencing of every claim stay the holder's
//! ([`Holder`](crate::holder::Holder)).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::kv;
use bytes::Bytes;
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use crate::nats::engine;
use crate::ownership::{StoreError, WriteError};
use crate::stats::ClusterStats;

/// Groups of at least this many writes go as one atomic batch; smaller ones as
/// concurrent single writes, which cost less below it.
pub const ATOMIC_MIN: usize = 24;
/// Writes in one group at most (the engine takes at most 1 000 messages per batch).
pub const MAX_GROUP: usize = 512;
/// Writes waiting for a group at most; past it a claim waits to be queued.
const QUEUE: usize = 16_384;
/// Single writes in flight at most; past it the next group waits for a place.
const MAX_SINGLES: usize = 1_024;

/// JetStream's "wrong last sequence": a compare-and-set lost.
const WRONG_LAST_SEQUENCE: u64 = 10_071;
/// JetStream's "atomic publish is disabled" on the stream.
const ATOMIC_DISABLED: u64 = 10_174;

struct Write {
    key: String,
    value: Bytes,
    /// The revision the key must be at (0: it must have none).
    expected: u64,
    /// When its claim stops waiting: the engine operation that carries it ends by
    /// then, and it is never sent with less than half its time left.
    deadline: Instant,
    done: oneshot::Sender<Result<u64, WriteError>>,
}

/// The replica's queue of ownership writes, in front of its group-commit task.
#[derive(Debug, Clone)]
pub(crate) struct GroupCommit {
    tx: mpsc::Sender<Write>,
    /// The engine operation timeout: each write is answered within it.
    timeout: Duration,
}

/// What the group-commit task writes with.
struct Engine {
    kv: kv::Store,
    client: async_nats::Client,
    timeout: Duration,
    /// The fewest writes sent as one atomic batch (`usize::MAX`: none, for good once
    /// the engine says the bucket takes none).
    atomic_min: AtomicUsize,
    stats: Arc<ClusterStats>,
    /// Names this task's batches (unique per process and replica).
    batch_prefix: String,
    /// The single writes sent and not answered yet.
    singles: Arc<Singles>,
}

/// The single writes in flight: their keys, a place for each, and a signal when one
/// is answered.
struct Singles {
    keys: Mutex<HashSet<String>>,
    places: Arc<Semaphore>,
    answered: Notify,
}

impl Singles {
    fn keys(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn in_flight(&self, key: &str) -> bool {
        self.keys().contains(key)
    }
}

impl GroupCommit {
    /// Starts the task writing to `kv`, each engine operation bounded by `timeout`;
    /// groups of at least `atomic_min` writes go as one atomic batch (`None`: the
    /// bucket's stream takes none).
    pub(crate) fn spawn(
        kv: kv::Store,
        client: async_nats::Client,
        timeout: Duration,
        atomic_min: Option<usize>,
        stats: Arc<ClusterStats>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let engine = Engine {
            kv,
            client,
            timeout,
            atomic_min: AtomicUsize::new(atomic_min.unwrap_or(usize::MAX)),
            stats,
            batch_prefix: format!("iop-{:x}-{nanos:x}", std::process::id()),
            singles: Arc::new(Singles {
                keys: Mutex::new(HashSet::new()),
                places: Arc::new(Semaphore::new(MAX_SINGLES)),
                answered: Notify::new(),
            }),
        };
        tokio::spawn(engine.run(rx));
        Self { tx, timeout }
    }

    /// Writes `value` at `key` if the key is at revision `expected` (0: has none); its
    /// new revision, once the engine has it. Answers within the engine operation
    /// timeout: a write that waited half of it in the queue fails unsent.
    pub(crate) async fn write(
        &self,
        key: &str,
        value: Bytes,
        expected: u64,
    ) -> Result<u64, WriteError> {
        let timeout = self.timeout;
        let deadline = Instant::now() + timeout;
        let (done, answer) = oneshot::channel();
        let write = Write {
            key: key.to_owned(),
            value,
            expected,
            deadline,
            done,
        };
        let gone = || WriteError::Store(StoreError("the write queue stopped".into()));
        let timed_out = || WriteError::Store(StoreError("timed out".into()));
        tokio::time::timeout_at(deadline, self.tx.send(write))
            .await
            .map_err(|_| timed_out())?
            .map_err(|_| gone())?;
        // The task answers by the deadline; the margin covers its own scheduling.
        tokio::time::timeout_at(deadline + timeout, answer)
            .await
            .map_err(|_| timed_out())?
            .map_err(|_| gone())?
    }
}

/// Writes `value` at `key` on its own, if the key is at `expected` (0: has none).
async fn single(
    kv: &kv::Store,
    deadline: Instant,
    key: &str,
    value: Bytes,
    expected: u64,
) -> Result<u64, WriteError> {
    let timed_out = || WriteError::Store(StoreError("timed out".into()));
    if expected == 0 {
        match tokio::time::timeout_at(deadline, kv.create(key, value)).await {
            Err(_) => Err(timed_out()),
            Ok(Ok(revision)) => Ok(revision),
            Ok(Err(e)) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                Err(WriteError::Conflict)
            }
            Ok(Err(e)) => Err(engine(e).into()),
        }
    } else {
        match tokio::time::timeout_at(deadline, kv.update(key, value, expected)).await {
            Err(_) => Err(timed_out()),
            Ok(Ok(revision)) => Ok(revision),
            Ok(Err(e)) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(WriteError::Conflict)
            }
            Ok(Err(e)) => Err(engine(e).into()),
        }
    }
}

/// Why an atomic batch did not answer with its revisions.
enum BatchError {
    /// The engine refused it: nothing was stored.
    Refused { code: u64, description: String },
    /// No answer (or one that cannot be read): it may have landed.
    Unknown(StoreError),
}

impl Engine {
    async fn run(self, mut rx: mpsc::Receiver<Write>) {
        let mut carried: VecDeque<Write> = VecDeque::new();
        let mut batches = 0u64;
        loop {
            let busy = |key: &str| self.singles.in_flight(key);
            let first = match carried.iter().position(|w| !busy(&w.key)) {
                Some(i) => carried.remove(i).expect("a position in it"),
                // Every carried write waits on a key in flight: for its answer, or
                // for another write.
                None if !carried.is_empty() => {
                    tokio::select! {
                        () = self.singles.answered.notified() => {}
                        w = rx.recv() => match w {
                            Some(w) => carried.push_back(w),
                            None => self.singles.answered.notified().await,
                        },
                    }
                    continue;
                }
                None => match rx.recv().await {
                    Some(w) if busy(&w.key) => {
                        carried.push_back(w);
                        continue;
                    }
                    Some(w) => w,
                    None => return,
                },
            };
            let group = gather(first, &mut carried, &mut rx, busy);
            batches += 1;
            self.commit(group, batches).await;
        }
    }

    /// Writes `group` (distinct keys) and answers each of its writes.
    async fn commit(&self, group: Vec<Write>, batch: u64) {
        // A write that waited half its time is not sent: it would most likely time
        // out, and a write that lands after its claim gave up is a record nobody
        // stands for (the holder would have to find it).
        let now = Instant::now();
        let (group, late): (Vec<Write>, Vec<Write>) = group
            .into_iter()
            .filter(|w| !w.done.is_closed())
            .partition(|w| w.deadline.saturating_duration_since(now) * 2 >= self.timeout);
        for w in late {
            let queued = StoreError("queued past half its timeout behind a slow engine".into());
            let _ = w.done.send(Err(WriteError::Store(queued)));
        }
        if group.is_empty() {
            return;
        }
        self.stats.owner_writes(group.len());
        if group.len() >= self.atomic_min.load(Ordering::Relaxed) {
            match self.atomic_batch(&group, batch).await {
                Ok(revisions) => {
                    self.stats.owner_batch(group.len());
                    for (w, revision) in group.into_iter().zip(revisions) {
                        let _ = w.done.send(Ok(revision));
                    }
                    return;
                }
                Err(BatchError::Unknown(e)) => {
                    self.stats.owner_batch(group.len());
                    for w in group {
                        let _ = w.done.send(Err(WriteError::Store(e.clone())));
                    }
                    return;
                }
                Err(BatchError::Refused { code, description }) => {
                    if code == ATOMIC_DISABLED {
                        self.atomic_min.store(usize::MAX, Ordering::Relaxed);
                        tracing::warn!(
                            bucket = %self.kv.name,
                            "the owners bucket takes no atomic batches: claims are written one by one"
                        );
                    } else if code != WRONG_LAST_SEQUENCE {
                        tracing::debug!(code, %description, "claim batch refused; written one by one");
                    }
                    self.stats.owner_batch_refused();
                }
            }
        }
        self.singles(group).await;
    }

    /// Sends each of `group` on its own, concurrently, each answered when the engine
    /// answers it; returns once all are answered, or an eighth of the operation
    /// timeout on if the engine answered one, leaving the rest in flight (see the
    /// [module docs](self)).
    async fn singles(&self, group: Vec<Write>) {
        self.stats.owner_singles(group.len());
        let mut writes = tokio::task::JoinSet::new();
        for w in group {
            let Ok(place) = self.singles.places.clone().acquire_owned().await else {
                return;
            };
            self.singles.keys().insert(w.key.clone());
            let (kv, singles) = (self.kv.clone(), self.singles.clone());
            writes.spawn(async move {
                let result = single(&kv, w.deadline, &w.key, w.value, w.expected).await;
                // The key is free before the claim hears: its next write may follow.
                singles.keys().remove(&w.key);
                let _ = w.done.send(result);
                drop(place);
                singles.answered.notify_one();
            });
        }
        let slow = tokio::time::sleep(self.timeout / 8);
        tokio::pin!(slow);
        let mut answered = 0usize;
        loop {
            tokio::select! {
                next = writes.join_next() => match next {
                    Some(_) => answered += 1,
                    None => break,
                },
                () = &mut slow, if answered > 0 => break,
            }
        }
        // Those still in flight go on, each answering its claim.
        writes.detach_all();
    }

    /// Sends `group` as one atomic batch; the revision of each write, in order.
    async fn atomic_batch(&self, group: &[Write], batch: u64) -> Result<Vec<u64>, BatchError> {
        let id = format!("{}-{batch:x}", self.batch_prefix);
        let prefix = self.kv.put_prefix.as_deref().unwrap_or(&self.kv.prefix);
        let unknown = |e: String| BatchError::Unknown(StoreError(e));
        let send = async {
            let last = group.len() - 1;
            for (i, w) in group.iter().enumerate() {
                let mut headers = HeaderMap::new();
                headers.insert(
                    "Nats-Expected-Last-Subject-Sequence",
                    w.expected.to_string().as_str(),
                );
                headers.insert("Nats-Batch-Id", id.as_str());
                headers.insert("Nats-Batch-Sequence", (i + 1).to_string().as_str());
                let subject = format!("{prefix}{}", w.key);
                if i < last {
                    self.client
                        .publish_with_headers(subject, headers, w.value.clone())
                        .await
                        .map_err(|e| unknown(e.to_string()))?;
                } else {
                    headers.insert("Nats-Batch-Commit", "1");
                    return self
                        .client
                        .request_with_headers(subject, headers, w.value.clone())
                        .await
                        .map_err(|e| unknown(e.to_string()));
                }
            }
            Err(unknown("an empty batch".into()))
        };
        // Ends when the first of its claims stops waiting.
        let deadline = group
            .iter()
            .map(|w| w.deadline)
            .min()
            .unwrap_or_else(Instant::now);
        let reply = tokio::time::timeout_at(deadline, send)
            .await
            .map_err(|_| unknown("timed out".into()))??;
        let ack: Ack = serde_json::from_slice(&reply.payload)
            .map_err(|e| unknown(format!("unreadable batch answer: {e}")))?;
        if let Some(error) = ack.error {
            return Err(BatchError::Refused {
                code: error.err_code,
                description: error.description,
            });
        }
        let n = group.len() as u64;
        match (ack.seq, ack.count) {
            (Some(seq), Some(count)) if count == n && seq >= n => Ok((seq + 1 - n..=seq).collect()),
            _ => Err(unknown(format!(
                "a batch answer without its revisions: {:?}",
                String::from_utf8_lossy(&reply.payload)
            ))),
        }
    }
}

/// The group that starts with `first`: the carried writes, then the waiting ones, up to
/// [`MAX_GROUP`], one write per key and none of a key `busy` (a single write in
/// flight): a second write of a key waits for the next group after the first's answer,
/// so that the engine takes them in order.
fn gather(
    first: Write,
    carried: &mut VecDeque<Write>,
    rx: &mut mpsc::Receiver<Write>,
    busy: impl Fn(&str) -> bool,
) -> Vec<Write> {
    let mut keys: HashSet<String> = HashSet::from([first.key.clone()]);
    let mut group = vec![first];
    let mut still: VecDeque<Write> = VecDeque::new();
    let mut take = |w: Write, group: &mut Vec<Write>| {
        if group.len() < MAX_GROUP && !busy(&w.key) && keys.insert(w.key.clone()) {
            group.push(w);
        } else {
            still.push_back(w);
        }
    };
    while let Some(w) = carried.pop_front() {
        take(w, &mut group);
    }
    while group.len() < MAX_GROUP {
        let Ok(w) = rx.try_recv() else { break };
        take(w, &mut group);
    }
    *carried = still;
    group
}

/// The engine's answer to a publish (the batch's commit).
#[derive(serde::Deserialize)]
struct Ack {
    seq: Option<u64>,
    count: Option<u64>,
    error: Option<AckError>,
}

#[derive(serde::Deserialize)]
struct AckError {
    #[serde(default)]
    err_code: u64,
    #[serde(default)]
    description: String,
}

/// Turns on atomic batches on the owners bucket's stream; false when the engine does
/// not take them (older than nats-server 2.12, or no permission to update the stream):
/// claims are then written one by one.
pub(crate) async fn allow_atomic(js: &async_nats::jetstream::Context, kv: &mut kv::Store) -> bool {
    let Ok(info) = kv.stream.info().await else {
        return false;
    };
    if info.config.allow_atomic_publish {
        return true;
    }
    let mut config = info.config.clone();
    config.allow_atomic_publish = true;
    match js.update_stream(config).await {
        Ok(info) => info.config.allow_atomic_publish,
        Err(e) => {
            tracing::warn!(bucket = %kv.name, error = %e, "cannot turn on atomic batches: claims are written one by one");
            false
        }
    }
}
