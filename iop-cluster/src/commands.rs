//! Command records in the engine (PROTOCOL.md §8 "Command records"), so that a
//! command's outcome survives the crash of the replica that sent it.
//!
//! One key-value bucket (`iop-commands`) holds, per command, its record
//! `c.<edge>.<command>` ([`StoredCommand`]) and a pointer `i.<command>` to its Edge (so
//! `GET /v1/commands/{id}` finds it on any replica), and per Edge the index
//! `o.<edge>` of its unfinished commands (first line: the writer's session id).
//!
//! * **Writes** — the replica holding the Edge writes a command's record when it sends
//!   it and at every change the core reports (response, event, lost, undeliverable),
//!   and the index whenever the Edge's set of unfinished commands changes: record
//!   first, so an id in an index always has its record. Every write is a
//!   compare-and-set on the revision this replica last wrote or read; on a conflict
//!   the value is read again, and a record written for a newer session of the Edge (a
//!   replica that took the Edge over) is left as it is. A replica that no longer holds
//!   the Edge writes nothing.
//! * **Durable answers** — a caller that sends a command waits
//!   ([`CommandLog::flushed`]) until its record, with the Edge's answer, is in the
//!   engine before it answers its own caller: a command acknowledged to an operator
//!   is one another replica will find.
//! * **Adoption** — a replica that wins the claim of an Edge that had a session before
//!   reads its index and records ([`CommandLog::unfinished`]) and hands them to its
//!   core ([`ControlPlaneHandle::adopt_commands`]) before it grants the claim.
//!
//! Records expire with the bucket's `max_age` ([`ClusterConfig::command_retention`]).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_lite::StreamExt;
use iop_driver::iop_core::cp::{CommandHandover, CpEvent, CpEventKind};
use iop_driver::{CommandRecord, ControlPlaneHandle, Notice, Runtime, SubscribeOptions};
use prost::Message;
use tokio::sync::{mpsc, oneshot};

use crate::driver::{HolderRef, held_session};
use crate::key::edge_key;
use crate::nats::{ClusterConfig, engine};
use crate::ownership::StoreError;
use crate::stats::ClusterStats;
use crate::stored::StoredCommand;

/// Writes queued before a note is dropped (a dropped note is made good by the
/// command's next change, or by the write of a caller waiting on it).
const QUEUE: usize = 8192;
/// Compare-and-set attempts of one write.
const ATTEMPTS: usize = 3;
/// Unfinished commands an index lists at most (the core's in-flight limit is lower).
const MAX_INDEXED: usize = 4096;
/// Revisions and indexes the writer keeps at most. Those of Edges that moved to
/// another replica are written no more; past this they are all forgotten, and the
/// next write of each reads its revision again (a conflict, then a read).
const MAX_KEPT: usize = 100_000;

fn record_key(edge_id: &str, command_id: &str) -> String {
    format!("c.{}.{}", edge_key(edge_id), edge_key(command_id))
}

fn pointer_key(command_id: &str) -> String {
    format!("i.{}", edge_key(command_id))
}

fn index_key(edge_id: &str) -> String {
    format!("o.{}", edge_key(edge_id))
}

/// Opens (or creates) the command bucket of `config`.
pub(crate) async fn open_bucket(
    js: &jetstream::Context,
    config: &ClusterConfig,
) -> Result<kv::Store, StoreError> {
    crate::nats::bucket(
        js,
        kv::Config {
            bucket: config.commands_bucket.clone(),
            description: "IOP: command records (request, answer, events, outcome)".into(),
            history: 1,
            max_age: config.command_retention,
            storage: jetstream::stream::StorageType::File,
            num_replicas: config.bucket_replicas,
            ..Default::default()
        },
    )
    .await
}

enum Job {
    /// Write the record of a command (and the Edge's index if it changed).
    Write {
        edge_id: String,
        command_id: String,
        done: Option<oneshot::Sender<()>>,
    },
    /// Revisions read at adoption: the next writes compare against them.
    Seed {
        edge_id: String,
        records: Vec<(String, u64)>,
        index: Option<u64>,
        listed: Vec<String>,
    },
}

/// The command records of one replica; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct CommandLog {
    jobs: mpsc::Sender<Job>,
    kv: kv::Store,
    timeout: Duration,
    stats: std::sync::Arc<ClusterStats>,
}

/// An Edge's unfinished commands as the engine holds them, for adoption.
#[derive(Debug, Default)]
pub struct Unfinished {
    /// Each command's handover and record, oldest first.
    pub commands: Vec<(CommandHandover, CommandRecord)>,
    records: Vec<(String, u64)>,
    index: Option<u64>,
    listed: Vec<String>,
}

impl CommandLog {
    /// Starts the writer of replica `owned`'s command records on `kv`, fed by `cp`'s
    /// command events.
    pub(crate) fn start<R: Runtime>(
        kv: kv::Store,
        cp: ControlPlaneHandle<R>,
        owned: HolderRef,
        stats: std::sync::Arc<ClusterStats>,
        timeout: Duration,
    ) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let log = CommandLog {
            jobs: tx,
            kv: kv.clone(),
            timeout,
            stats: stats.clone(),
        };
        let events = cp.subscribe_with(SubscribeOptions::default().kinds([
            CpEventKind::CommandResponded,
            CpEventKind::CommandEvent,
            CpEventKind::CommandLost,
            CpEventKind::CommandUndeliverable,
        ]));
        let notes = tokio::spawn({
            let log = log.clone();
            let mut events = events;
            async move {
                while let Some(notice) = events.next().await {
                    let Notice::Event(event) = notice else {
                        continue;
                    };
                    let command_id = match &event {
                        CpEvent::CommandResponded { command_id, .. }
                        | CpEvent::CommandLost { command_id, .. }
                        | CpEvent::CommandUndeliverable { command_id, .. } => command_id,
                        CpEvent::CommandEvent { event, .. } => &event.command_id,
                        _ => continue,
                    };
                    if let Some(edge_id) = event.edge_id() {
                        log.note(edge_id, command_id);
                    }
                }
            }
        });
        let writer = Writer {
            kv,
            cp,
            owned,
            stats,
            timeout,
            revisions: HashMap::new(),
            indexes: HashMap::new(),
        };
        (log, vec![notes, tokio::spawn(writer.run(rx))])
    }

    /// Queues a write of the record of `command_id` of `edge_id` as the core and the
    /// record book hold it when the write happens.
    pub fn note(&self, edge_id: &str, command_id: &str) {
        let job = Job::Write {
            edge_id: edge_id.to_owned(),
            command_id: command_id.to_owned(),
            done: None,
        };
        let _ = self.jobs.try_send(job);
    }

    /// Writes the record of `command_id` of `edge_id` and returns once it is in the
    /// engine (or after the engine's operation timeout: the caller goes on without).
    /// With the engine down (the replica's last liveness renewal failed) it returns
    /// at once: the replica serves its own Edges without records until it is back.
    pub async fn flushed(&self, edge_id: &str, command_id: &str) {
        if !self.stats.engine_up() {
            self.note(edge_id, command_id);
            return;
        }
        let (done, written) = oneshot::channel();
        let job = Job::Write {
            edge_id: edge_id.to_owned(),
            command_id: command_id.to_owned(),
            done: Some(done),
        };
        if self.jobs.send(job).await.is_ok() {
            let _ = tokio::time::timeout(self.timeout * 2, written).await;
        }
    }

    async fn entry(&self, key: &str) -> Result<Option<kv::Entry>, StoreError> {
        bounded(self.timeout, self.kv.entry(key)).await
    }

    /// The stored record of `command_id` (of whichever Edge), if the engine has one.
    pub async fn get(&self, command_id: &str) -> Result<Option<CommandRecord>, StoreError> {
        let Some(pointer) = self.entry(&pointer_key(command_id)).await? else {
            return Ok(None);
        };
        let edge_id = String::from_utf8_lossy(&pointer.value).into_owned();
        let Some(entry) = self.entry(&record_key(&edge_id, command_id)).await? else {
            return Ok(None);
        };
        Ok(live_value(&entry)
            .and_then(StoredCommand::decode_value)
            .filter(|s| s.edge_id == edge_id)
            .map(|s| s.record()))
    }

    /// `edge_id`'s unfinished commands as the engine holds them.
    pub async fn unfinished(&self, edge_id: &str) -> Result<Unfinished, StoreError> {
        let mut out = Unfinished::default();
        let Some(index) = self.entry(&index_key(edge_id)).await? else {
            return Ok(out);
        };
        out.index = Some(index.revision);
        let (_, mut ids) = live_value(&index).map(parse_index).unwrap_or_default();
        ids.truncate(MAX_INDEXED);
        out.listed = ids.clone();
        for command_id in ids {
            let key = record_key(edge_id, &command_id);
            let Some(entry) = self.entry(&key).await? else {
                continue;
            };
            if let Some(stored) = live_value(&entry)
                .and_then(StoredCommand::decode_value)
                .filter(|s| s.edge_id == edge_id && !s.finished())
            {
                // Only a command carried on is written again: only its revision is kept.
                out.records.push((key, entry.revision));
                out.commands.push((stored.handover(), stored.record()));
            }
        }
        Ok(out)
    }

    /// The revisions `unfinished` read become those the next writes compare against.
    pub(crate) async fn seed(&self, edge_id: &str, unfinished: &Unfinished) {
        let job = Job::Seed {
            edge_id: edge_id.to_owned(),
            records: unfinished.records.clone(),
            index: unfinished.index,
            listed: unfinished.listed.clone(),
        };
        let _ = self.jobs.send(job).await;
    }
}

fn live_value(entry: &kv::Entry) -> Option<&[u8]> {
    (entry.operation == kv::Operation::Put).then_some(&entry.value[..])
}

/// An index value: its writer's session id, then one command id per line.
fn parse_index(value: &[u8]) -> (u64, Vec<String>) {
    let text = String::from_utf8_lossy(value);
    let mut lines = text.lines();
    let session = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    (session, lines.map(str::to_owned).collect())
}

struct Writer<R: Runtime> {
    kv: kv::Store,
    cp: ControlPlaneHandle<R>,
    owned: HolderRef,
    stats: std::sync::Arc<ClusterStats>,
    timeout: Duration,
    /// Record key → the revision last written or read (finished records are dropped).
    revisions: HashMap<String, u64>,
    /// Edge → (index revision, the unfinished ids it lists).
    indexes: HashMap<String, (Option<u64>, Vec<String>)>,
}

impl<R: Runtime> Writer<R> {
    async fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        while let Some(job) = jobs.recv().await {
            // Everything queued meanwhile goes in one pass, each command written once.
            let mut batch = vec![job];
            while batch.len() < 512
                && let Ok(job) = jobs.try_recv()
            {
                batch.push(job);
            }
            let mut seen = HashSet::new();
            let mut acks = Vec::new();
            for job in batch {
                match job {
                    Job::Seed {
                        edge_id,
                        records,
                        index,
                        listed,
                    } => {
                        self.forget_if_full();
                        self.revisions.extend(records);
                        self.indexes.insert(edge_id, (index, listed));
                    }
                    Job::Write {
                        edge_id,
                        command_id,
                        done,
                    } => {
                        if seen.insert((edge_id.clone(), command_id.clone())) {
                            self.write(&edge_id, &command_id).await;
                        }
                        acks.extend(done);
                    }
                }
            }
            for ack in acks {
                let _ = ack.send(());
            }
        }
    }

    /// Bounds the writer's caches (see [`MAX_KEPT`]).
    fn forget_if_full(&mut self) {
        if self.revisions.len() >= MAX_KEPT {
            self.revisions.clear();
        }
        if self.indexes.len() >= MAX_KEPT {
            self.indexes.clear();
        }
    }

    async fn write(&mut self, edge_id: &str, command_id: &str) {
        self.forget_if_full();
        let Some(session_id) = held_session(&self.owned, edge_id) else {
            return;
        };
        if !self.stats.engine_up() {
            // Each write would wait out its timeout: the queue would only grow.
            self.stats.record_failed();
            return;
        }
        let Some(handover) = self.cp.command_handover(edge_id, command_id) else {
            return;
        };
        let record = self.cp.command(command_id);
        let stored = StoredCommand::new(edge_id, session_id, handover, record.as_ref());
        let finished = stored.finished();
        let key = record_key(edge_id, command_id);
        let expected = self.revisions.get(&key).copied();
        // The pointer is create-only (the first Edge to use an id keeps it), written
        // with the record's first write.
        let pointer = async {
            if expected.is_none() {
                let create = self
                    .kv
                    .create(pointer_key(command_id), edge_id.to_owned().into());
                let kept = match tokio::time::timeout(self.timeout, create).await {
                    Ok(Ok(_)) => true,
                    Ok(Err(e)) => e.kind() == kv::CreateErrorKind::AlreadyExists,
                    Err(_) => false,
                };
                if !kept {
                    self.stats.record_failed();
                }
            }
        };
        let value: Bytes = stored.encode_to_vec().into();
        let record_write = cas_put(
            &self.kv,
            self.timeout,
            &key,
            value,
            expected,
            session_id,
            |v| StoredCommand::decode_value(v).map_or(0, |s| s.session_id),
        );
        // The index goes with them: a reader skips an id whose record is not there yet.
        let index = self.index_change(edge_id, session_id);
        let index_write = async {
            match &index {
                Some((_, value, expected)) => Some(
                    cas_put(
                        &self.kv,
                        self.timeout,
                        &index_key(edge_id),
                        value.clone(),
                        *expected,
                        session_id,
                        |v| parse_index(v).0,
                    )
                    .await,
                ),
                None => None,
            }
        };
        let ((), written, indexed) = tokio::join!(pointer, record_write, index_write);
        // A finished record is written no more: its revision is not kept.
        match written {
            Some(revision) if !finished => {
                self.revisions.insert(key, revision);
            }
            _ => {
                self.revisions.remove(&key);
            }
        }
        match written {
            Some(_) => self.stats.recorded(),
            None => self.stats.record_failed(),
        }
        if let (Some((open, _, _)), Some(indexed)) = (index, indexed) {
            match indexed {
                // An Edge with nothing open keeps its index key, but not a place here.
                Some(_) if open.is_empty() => {
                    self.indexes.remove(edge_id);
                }
                Some(r) => {
                    self.indexes.insert(edge_id.to_owned(), (Some(r), open));
                }
                None => {
                    self.indexes.remove(edge_id);
                    self.stats.record_failed();
                }
            }
        }
    }

    /// The Edge's unfinished commands, the index value listing them and the revision
    /// to write it on, when they are not what the index was last written with.
    fn index_change(
        &self,
        edge_id: &str,
        session_id: u64,
    ) -> Option<(Vec<String>, Bytes, Option<u64>)> {
        let mut open = self.cp.unfinished_commands(edge_id);
        open.truncate(MAX_INDEXED);
        let (revision, listed) = self
            .indexes
            .get(edge_id)
            .cloned()
            .unwrap_or((None, Vec::new()));
        if revision.is_some() && listed == open {
            return None;
        }
        let mut value = session_id.to_string();
        for id in &open {
            value.push('\n');
            value.push_str(id);
        }
        Some((open, value.into(), revision))
    }
}

async fn bounded<T, E: std::fmt::Display>(
    timeout: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(timeout, f)
        .await
        .map_err(|_| StoreError("timed out".into()))?
        .map_err(engine)
}

/// Writes `value` at `key` by compare-and-set on `expected` (or create); on a
/// conflict reads the value again, and gives way to one written for a newer session
/// (`session_of` reads it). The new revision, or `None`.
async fn cas_put(
    kv: &kv::Store,
    timeout: Duration,
    key: &str,
    value: Bytes,
    mut expected: Option<u64>,
    session_id: u64,
    session_of: impl Fn(&[u8]) -> u64,
) -> Option<u64> {
    for _ in 0..ATTEMPTS {
        let result = match expected {
            Some(r) => bounded(timeout, kv.update(key, value.clone(), r)).await,
            None => bounded(timeout, kv.create(key, value.clone())).await,
        };
        let Err(e) = result else {
            return result.ok();
        };
        match bounded(timeout, kv.entry(key)).await {
            Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                if session_of(&entry.value) > session_id {
                    // A replica that took the Edge over wrote it.
                    return None;
                }
                expected = Some(entry.revision);
            }
            // Deleted or purged: `update` on its revision writes it again.
            Ok(Some(entry)) => expected = Some(entry.revision),
            Ok(None) => expected = None,
            Err(_) => {
                tracing::warn!(key, error = %e, "cannot write a command record");
                return None;
            }
        }
    }
    None
}
