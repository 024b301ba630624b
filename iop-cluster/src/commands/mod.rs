//! Command records in the engine (PROTOCOL.md §8 "Command records"), so that a
//! command's outcome survives the crash of the replica that sent it.
//!
//! One key-value bucket (`iop-commands`) holds, per command, its record
//! `c.<edge>.<command>` ([`StoredCommand`]) and a pointer `i.<command>` to its Edge (so
//! `GET /v1/commands/{id}` finds it on any replica), and per Edge the index
//! `o.<edge>` of its unfinished commands (first line: the writer's session id).
//!
//! * **Write-ahead** — a command's record, the pointer and the Edge's index listing it
//!   are written, and acknowledged by the engine, *before* the command is sent: the
//!   replica's Control Plane holds each new command back until its
//!   [`CommandJournal`] (this log) says so, and drops it,
//!   never sent, when the engine cannot take it. Any replica therefore knows every
//!   command an Edge may run.
//! * **Later notes** — the replica holding the Edge writes the record again at every
//!   change the core reports (response, event, lost, undeliverable), and the index
//!   whenever the Edge's set of unfinished commands changes. Every write is a
//!   compare-and-set on the revision this replica last wrote or read; on a conflict
//!   the value is read again, and a record written for a newer session of the Edge (a
//!   replica that took the Edge over) is left as it is, and so is a command's ending:
//!   the first to land is the command's, whichever session wrote it
//!   ([`StoredCommand::stands_over`]). A write that fails is retried
//!   until it lands or the Edge is no longer held here; notes that could not be queued
//!   (or events lost to a lagging subscription) have every open record written again.
//! * **Durable answers** — a caller that sends a command waits
//!   ([`CommandLog::flushed`]) until its record, with the Edge's answer, is in the
//!   engine before it answers its own caller.
//! * **Adoption** — a replica that wins the claim of an Edge that had a session before
//!   reads its index and records ([`CommandLog::unfinished`]) and hands them to its
//!   core ([`ControlPlaneHandle::adopt_commands`]) before it grants the claim.
//!
//! Records expire with the bucket's `max_age` ([`ClusterConfig::command_retention`]).

mod records;
mod truth;
mod writer;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use futures_lite::StreamExt;
use iop_driver::iop_core::cp::{CommandState, CpEvent, CpEventKind};
use iop_driver::iop_core::proto::EdgeCommandRequest;
use iop_driver::{
    CommandJournal, CommandRecord, ControlPlaneHandle, JournalError, Notice, Recording, Runtime,
    SubscribeOptions,
};
use tokio::sync::{mpsc, oneshot};

use crate::driver::HolderRef;
use crate::key::edge_key;
use crate::nats::{ClusterConfig, engine};
use crate::ownership::StoreError;
use crate::stats::ClusterStats;
use crate::stored::StoredCommand;

/// Writes queued at most; a note that finds the queue full has the writer write every
/// open record again.
const QUEUE: usize = 8192;
/// Compare-and-set attempts of one write.
const ATTEMPTS: usize = 3;
/// How many engine operation timeouts old a record never answered nor indexed must be
/// to be an orphan: a write-ahead gives up after three (its writes go together), and
/// a record, its pointer and the index land within them or not at all.
const ORPHAN_AGE_TIMEOUTS: u32 = 6;
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
    /// Write the record of a command (and the Edge's index if it changed); `ahead`:
    /// the command's write-ahead, create-only.
    Write {
        edge_id: String,
        command_id: String,
        ahead: bool,
        done: Option<oneshot::Sender<writer::Written>>,
    },
    /// The write-ahead of this command did not all land (or not in time) and the
    /// command was not sent: finish its record UNRECORDED, retried until the engine
    /// answers ([`truth`]).
    Unrecord { edge_id: String, command_id: String },
    /// Notes were lost: write every open record again.
    Resync,
    /// Revisions read at adoption (command id, revision): the next writes compare
    /// against them.
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
    stats: Arc<ClusterStats>,
    /// A note was not queued: the writer writes every open record again.
    missed: Arc<AtomicBool>,
}

/// An Edge's unfinished commands as the engine holds them, for adoption.
#[derive(Debug, Default)]
pub struct Unfinished {
    /// Each command's state (as the core carries it on) and record, oldest first.
    pub commands: Vec<(CommandState, CommandRecord)>,
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
        stats: Arc<ClusterStats>,
        timeout: Duration,
    ) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let missed = Arc::new(AtomicBool::new(false));
        let log = CommandLog {
            jobs: tx,
            kv: kv.clone(),
            timeout,
            stats: stats.clone(),
            missed: missed.clone(),
        };
        let events = cp.subscribe_with(SubscribeOptions::default().kinds([
            CpEventKind::CommandResponded,
            CpEventKind::CommandEvent,
            CpEventKind::CommandEnded,
        ]));
        let notes = tokio::spawn({
            let log = log.clone();
            let mut events = events;
            async move {
                while let Some(notice) = events.next().await {
                    let event = match notice {
                        Notice::Event(event) => event,
                        Notice::Lagged(_) => {
                            log.missed();
                            continue;
                        }
                        _ => continue,
                    };
                    let command_id = match &event {
                        CpEvent::CommandResponded { response, .. } => &response.command_id,
                        CpEvent::CommandEnded { command_id, .. } => command_id,
                        CpEvent::CommandEvent { event, .. } => &event.command_id,
                        _ => continue,
                    };
                    if let Some(edge_id) = event.edge_id() {
                        log.note(edge_id, command_id);
                    }
                }
            }
        });
        let writer = writer::Writer {
            bucket: records::Bucket {
                kv: kv.clone(),
                timeout,
            },
            kv,
            cp,
            owned,
            stats,
            timeout,
            missed,
            revisions: HashMap::new(),
            indexes: HashMap::new(),
            ended: HashMap::new(),
            retry: BTreeSet::new(),
            unrecord: Default::default(),
        };
        (log, vec![notes, tokio::spawn(writer.run(rx))])
    }

    /// Notes were lost: the writer writes every open record again.
    fn missed(&self) {
        self.missed.store(true, Ordering::Relaxed);
        // Wakes the writer if it is idle; a full queue wakes it anyway.
        let _ = self.jobs.try_send(Job::Resync);
    }

    /// Queues a write of the record of `command_id` of `edge_id` as the core and the
    /// record book hold it when the write happens.
    pub fn note(&self, edge_id: &str, command_id: &str) {
        let job = Job::Write {
            edge_id: edge_id.to_owned(),
            command_id: command_id.to_owned(),
            ahead: false,
            done: None,
        };
        if self.jobs.try_send(job).is_err() {
            self.missed.store(true, Ordering::Relaxed);
        }
    }

    /// Writes the record of `command_id` of `edge_id` and returns whether it is in the
    /// engine, within three engine operation timeouts. With the engine down (the
    /// replica's last liveness renewal failed) it is false at once; the write is
    /// retried until it lands.
    pub async fn flushed(&self, edge_id: &str, command_id: &str) -> bool {
        if !self.stats.engine_up() {
            self.note(edge_id, command_id);
            return false;
        }
        self.written(edge_id, command_id, false).await == writer::Written::Done
    }

    /// Queues a write and waits (within three operation timeouts) for what it came to.
    async fn written(&self, edge_id: &str, command_id: &str, ahead: bool) -> writer::Written {
        let (done, written) = oneshot::channel();
        let job = Job::Write {
            edge_id: edge_id.to_owned(),
            command_id: command_id.to_owned(),
            ahead,
            done: Some(done),
        };
        if self.jobs.send(job).await.is_err() {
            return writer::Written::Failed;
        }
        match tokio::time::timeout(self.timeout * 3, written).await {
            Ok(Ok(written)) => written,
            _ => writer::Written::Failed,
        }
    }

    /// `key`'s revision and value (`None`: deleted) as the stream's leader has them.
    async fn leader(&self, key: &str) -> Result<Option<(u64, Option<bytes::Bytes>)>, StoreError> {
        crate::nats::leader_entry(&self.kv, key, self.timeout).await
    }

    async fn entry(&self, key: &str) -> Result<Option<kv::Entry>, StoreError> {
        bounded(self.timeout, self.kv.entry(key)).await
    }

    /// The stored record of `command_id` (of whichever Edge), if the engine has one.
    /// An orphan — never answered nor finished, older than a write-ahead takes, listed
    /// by no index — is finished UNRECORDED first (see `truth::finish_orphan`).
    pub async fn get(&self, command_id: &str) -> Result<Option<CommandRecord>, StoreError> {
        let Some(pointer) = self.entry(&pointer_key(command_id)).await? else {
            return Ok(None);
        };
        let edge_id = String::from_utf8_lossy(&pointer.value).into_owned();
        if iop_driver::iop_core::ids::validate_id("edge_id", &edge_id).is_err() {
            return Ok(None);
        }
        let bucket = records::Bucket {
            kv: self.kv.clone(),
            timeout: self.timeout,
        };
        let orphan_age = self.timeout * ORPHAN_AGE_TIMEOUTS;
        match truth::finish_orphan(&bucket, &edge_id, command_id, orphan_age).await {
            Some(stored) => Ok(Some(stored)
                .filter(|s| s.edge_id == edge_id)
                .map(|s| s.record())),
            // None there, or the engine did not answer: told apart by a plain read.
            None => {
                let Some(entry) = self.entry(&record_key(&edge_id, command_id)).await? else {
                    return Ok(None);
                };
                Ok(live_value(&entry)
                    .and_then(StoredCommand::decode_value)
                    .filter(|s| s.edge_id == edge_id)
                    .map(|s| s.record()))
            }
        }
    }

    /// `edge_id`'s unfinished commands as the engine's leader holds them (a
    /// follower's copy may lag: a command missing from it would not be carried on).
    pub async fn unfinished(&self, edge_id: &str) -> Result<Unfinished, StoreError> {
        let mut out = Unfinished::default();
        let Some((revision, index)) = self.leader(&index_key(edge_id)).await? else {
            return Ok(out);
        };
        out.index = Some(revision);
        let (_, mut ids) = index.as_deref().map(parse_index).unwrap_or_default();
        ids.truncate(MAX_INDEXED);
        out.listed = ids.clone();
        for command_id in ids {
            let key = record_key(edge_id, &command_id);
            let Some((revision, value)) = self.leader(&key).await? else {
                continue;
            };
            if let Some(stored) = value
                .as_deref()
                .and_then(StoredCommand::decode_value)
                .filter(|s| s.edge_id == edge_id && !s.finished())
            {
                // Only a command carried on is written again: only its revision is kept.
                out.records.push((command_id.clone(), revision));
                out.commands.push((stored.state(), stored.record()));
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

/// An index value: its writer's session id, then one command id per line (a line
/// that is not a command id is skipped).
fn parse_index(value: &[u8]) -> (u64, Vec<String>) {
    let text = String::from_utf8_lossy(value);
    let mut lines = text.lines();
    let session = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    let ids = lines
        .filter(|l| iop_driver::iop_core::ids::validate_id("command_id", l).is_ok())
        .map(str::to_owned)
        .collect();
    (session, ids)
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

/// The write-ahead: a command the replica's Control Plane is about to send is sent
/// once its record (with the pointer and the Edge's index) is in the engine.
impl CommandJournal for CommandLog {
    fn record(&self, edge_id: &str, request: &EdgeCommandRequest) -> Recording {
        let (log, edge_id, command_id) =
            (self.clone(), edge_id.to_owned(), request.command_id.clone());
        Box::pin(async move {
            if !log.stats.engine_up() {
                // Not sent: its end is written once the engine is back, so that every
                // replica reads it the same.
                let _ = log
                    .jobs
                    .send(Job::Unrecord {
                        edge_id,
                        command_id,
                    })
                    .await;
                return Err(JournalError::Unavailable(
                    "the cluster engine is unreachable".into(),
                ));
            }
            match log.written(&edge_id, &command_id, true).await {
                writer::Written::Done => Ok(()),
                writer::Written::Exists(record) => Err(JournalError::Exists(record)),
                writer::Written::Conflict => Err(JournalError::Conflict),
                writer::Written::Moot => Err(JournalError::Unavailable(
                    "the edge moved to another replica before the command was recorded".into(),
                )),
                _ => {
                    // Not sent; what did land must not read as running.
                    let job = Job::Unrecord {
                        edge_id,
                        command_id,
                    };
                    if log.jobs.send(job).await.is_err() {
                        tracing::warn!("the command writer is gone: a refused record stays");
                    }
                    Err(JournalError::Unavailable(
                        "the cluster engine could not record the command".into(),
                    ))
                }
            }
        })
    }
}
