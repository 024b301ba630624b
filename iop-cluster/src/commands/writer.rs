//! The task that writes one replica's command records: each write is a
//! compare-and-set on the revision it last wrote or read; a write that fails is retried
//! until it lands or the Edge is no longer held here; events the writer may have missed
//! (its queue overflowed, or its subscription fell behind) make it write every record
//! it keeps open again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use iop_driver::{ControlPlaneHandle, Runtime};
use prost::Message;
use tokio::sync::{mpsc, oneshot};

use super::records::{Bucket, Put, cas_put};
use super::{Job, MAX_INDEXED, MAX_KEPT, bounded, index_key, parse_index, pointer_key, record_key};
use crate::driver::{HolderRef, held_session};
use crate::stats::ClusterStats;
use crate::stored::StoredCommand;

/// What one write came to.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Written {
    /// The record (and the index, if it changed) is in the engine.
    Done,
    /// Nothing to write any more: the Edge is not held here, or the core no longer
    /// knows the command.
    Moot,
    /// The engine did not take it: to be retried.
    Failed,
    /// A write-ahead found the command recorded already, by another replica, with the
    /// same content: its record.
    Exists(Box<iop_driver::CommandRecord>),
    /// A write-ahead found another command under its id.
    Conflict,
}

pub(super) struct Writer<R: Runtime> {
    pub(super) kv: kv::Store,
    /// The same bucket, as the record writes see it.
    pub(super) bucket: Bucket,
    pub(super) cp: ControlPlaneHandle<R>,
    pub(super) owned: HolderRef,
    pub(super) stats: Arc<ClusterStats>,
    pub(super) timeout: Duration,
    /// Set when a note could not be queued, or the events feeding notes were lost.
    pub(super) missed: Arc<AtomicBool>,
    /// (Edge, command) → the revision of its record last written or read (finished
    /// records are dropped).
    pub(super) revisions: HashMap<(String, String), u64>,
    /// Edge → (index revision, the unfinished ids it lists).
    pub(super) indexes: HashMap<String, (Option<u64>, Vec<String>)>,
    /// Edge → commands whose finished record this writer has written since its index
    /// was last written: the only ones the index may stop listing. A command the core
    /// has finished stays listed until its end is in the engine, so that no replica
    /// takes a sent command whose answer is not recorded yet for an orphan.
    pub(super) ended: HashMap<String, BTreeSet<String>>,
    /// Writes that failed, retried every `timeout`.
    pub(super) retry: BTreeSet<(String, String)>,
    /// Refused commands whose records are to be finished UNRECORDED (with the
    /// session they were refused under), retried every `timeout` until the engine
    /// answers. Each request is read from the core when its record is written.
    pub(super) unrecord: BTreeMap<(String, String), u64>,
}

impl<R: Runtime> Writer<R> {
    pub(super) async fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        // Retries run every `timeout` while any are pending, on a deadline rather than
        // after `timeout` of quiet: a replica kept busy by new commands would otherwise
        // never retry, and a refused command's end would not reach the engine.
        let mut next_retry = tokio::time::Instant::now() + self.timeout;
        loop {
            let job = if self.retry.is_empty() && self.unrecord.is_empty() {
                let job = jobs.recv().await;
                next_retry = tokio::time::Instant::now() + self.timeout;
                job
            } else if tokio::time::Instant::now() >= next_retry {
                self.retry_failed().await;
                next_retry = tokio::time::Instant::now() + self.timeout;
                continue;
            } else {
                match tokio::time::timeout_at(next_retry, jobs.recv()).await {
                    Ok(job) => job,
                    Err(_) => continue,
                }
            };
            let Some(job) = job else { return };
            if self.missed.swap(false, Ordering::Relaxed) {
                self.resync();
            }
            // Everything queued meanwhile goes in one pass, each command written once.
            let mut batch = vec![job];
            while batch.len() < 512
                && let Ok(job) = jobs.try_recv()
            {
                batch.push(job);
            }
            let mut seen: HashMap<(String, String), Written> = HashMap::new();
            let mut acks: Vec<(oneshot::Sender<Written>, (String, String))> = Vec::new();
            for job in batch {
                match job {
                    Job::Seed {
                        edge_id,
                        records,
                        index,
                        listed,
                    } => {
                        self.forget_if_full();
                        for (command_id, revision) in records {
                            self.revisions
                                .insert((edge_id.clone(), command_id), revision);
                        }
                        self.indexes.insert(edge_id, (index, listed));
                    }
                    Job::Resync => self.resync(),
                    Job::Unrecord {
                        edge_id,
                        command_id,
                    } => {
                        // The session it was refused under (0: none held here): the
                        // record is finished even once the Edge has moved on, so that
                        // no replica reads the refused command as running, and none
                        // as unknown while this one reads its end.
                        let session_id = held_session(&self.owned, &edge_id).unwrap_or(0);
                        let key = (edge_id, command_id);
                        self.revisions.remove(&key);
                        self.unrecord.insert(key, session_id);
                        self.finish_unrecorded().await;
                    }
                    Job::Write {
                        edge_id,
                        command_id,
                        ahead,
                        done,
                    } => {
                        let key = (edge_id, command_id);
                        if ahead {
                            // A caller's retry of a refused command: written ahead anew.
                            self.unrecord.remove(&key);
                        }
                        if !seen.contains_key(&key) {
                            let written = if ahead {
                                self.write_ahead(&key.0, &key.1).await
                            } else {
                                self.write(&key.0, &key.1).await
                            };
                            seen.insert(key.clone(), written);
                        }
                        if let Some(done) = done {
                            acks.push((done, key));
                        }
                    }
                }
            }
            for (ack, key) in acks {
                let _ = ack.send(seen.get(&key).cloned().unwrap_or(Written::Failed));
            }
        }
    }

    /// Retries every failed write once, and every record still to finish.
    async fn retry_failed(&mut self) {
        for (edge_id, command_id) in std::mem::take(&mut self.retry) {
            self.write(&edge_id, &command_id).await;
        }
        self.finish_unrecorded().await;
    }

    /// Finishes UNRECORDED the records of the commands this replica refused, as far as
    /// the engine answers; the rest wait for the next round. A record a newer session
    /// wrote (the caller's retry through the Edge's next replica) is left as it is
    /// ([`truth::finish_unrecorded`](super::truth::finish_unrecorded)).
    async fn finish_unrecorded(&mut self) {
        if !self.stats.engine_up() {
            return;
        }
        let pending = std::mem::take(&mut self.unrecord);
        for ((edge_id, command_id), session_id) in pending {
            // The core keeps the refused command, ended UNRECORDED, as it keeps finished
            // ones; one it has let go of since is left to the orphan rule
            // (`truth::finish_orphan`), which any replica applies.
            let Some(state) = self.cp.command_state(&edge_id, &command_id) else {
                continue;
            };
            let finished =
                super::truth::finish_unrecorded(&self.bucket, &edge_id, &state.request, session_id)
                    .await;
            if finished == super::truth::Finish::Retry {
                self.unrecord.insert((edge_id, command_id), session_id);
            } else {
                // Its end is in the engine (or the record is not this replica's): the
                // index, which may list it from the write-ahead, may drop it.
                self.ended.entry(edge_id).or_default().insert(command_id);
            }
        }
        if self.unrecord.len() >= MAX_KEPT {
            self.unrecord.clear();
        }
    }

    /// Notes may have been lost: every record kept open is written again (each write
    /// reads the core's state of the command, so a lost terminal note is made good).
    fn resync(&mut self) {
        tracing::warn!("command notes were lost; writing every open command record again");
        self.retry.extend(self.revisions.keys().cloned());
    }

    /// Bounds the writer's caches (see [`MAX_KEPT`]).
    fn forget_if_full(&mut self) {
        if self.revisions.len() >= MAX_KEPT {
            self.revisions.clear();
        }
        if self.indexes.len() >= MAX_KEPT {
            self.indexes.clear();
        }
        if self.ended.len() >= MAX_KEPT {
            self.ended.clear();
        }
        if self.retry.len() >= MAX_KEPT {
            self.retry.clear();
        }
    }

    /// Writes the record of `command_id` of `edge_id` as the core holds it now; a
    /// failure is queued for a retry.
    async fn write(&mut self, edge_id: &str, command_id: &str) -> Written {
        let written = self.try_write(edge_id, command_id).await;
        let key = (edge_id.to_owned(), command_id.to_owned());
        match written {
            Written::Failed => {
                self.stats.record_failed();
                self.retry.insert(key);
            }
            Written::Done => self.stats.recorded(),
            _ => {}
        }
        written
    }

    /// The write-ahead of a command about to be sent: its record, the pointer to its
    /// Edge, the index listing it. A record already there with the same content and no
    /// answer is written over (the command was not sent, or is in flight elsewhere:
    /// the Edge runs an id once); one with an answer is that command, sent before
    /// ([`Written::Exists`]); one with other content is another command
    /// ([`Written::Conflict`]). Not retried: the caller is told.
    async fn write_ahead(&mut self, edge_id: &str, command_id: &str) -> Written {
        let key = (edge_id.to_owned(), command_id.to_owned());
        if !self.revisions.contains_key(&key) {
            let at = record_key(edge_id, command_id);
            match bounded(self.timeout, self.kv.entry(&at)).await {
                Ok(None) => {}
                Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                    let stored = StoredCommand::decode_value(&entry.value);
                    let known = self.cp.command_state(edge_id, command_id);
                    let same = |s: &StoredCommand| {
                        s.edge_id == edge_id
                            && known.as_ref().is_some_and(|k| {
                                s.request.as_ref().is_some_and(|r| {
                                    let mut asked = k.request.clone();
                                    asked.command_id = r.command_id.clone();
                                    *r == asked
                                })
                            })
                    };
                    match stored {
                        // Never answered: a write-ahead whose command was not sent (its
                        // caller was told), or one in flight elsewhere; sending it (again)
                        // is safe, the Edge runs an id once.
                        // Or refused and finished UNRECORDED: a caller's retry under
                        // its key tries it anew.
                        Some(s)
                            if same(&s)
                                && s.answer == 0
                                && (!s.finished() || s.unrecorded_ending()) =>
                        {
                            self.revisions.insert(key.clone(), entry.revision);
                        }
                        // Answered: this command, sent before.
                        Some(s) if same(&s) => return Written::Exists(Box::new(s.record())),
                        _ => return Written::Conflict,
                    }
                }
                // Deleted or purged: written anew on its revision.
                Ok(Some(entry)) => {
                    self.revisions.insert(key.clone(), entry.revision);
                }
                Err(_) => return Written::Failed,
            }
        }
        let written = self.try_write(edge_id, command_id).await;
        match &written {
            Written::Done => self.stats.recorded(),
            Written::Failed => self.stats.record_failed(),
            _ => {}
        }
        written
    }

    async fn try_write(&mut self, edge_id: &str, command_id: &str) -> Written {
        self.forget_if_full();
        let Some(session_id) = held_session(&self.owned, edge_id) else {
            return Written::Moot;
        };
        if !self.stats.engine_up() {
            // Each write would wait out its timeout: retried once the engine is back.
            return Written::Failed;
        }
        let Some(state) = self.cp.command_state(edge_id, command_id) else {
            return Written::Moot;
        };
        let record = self.cp.command(command_id);
        let stored = StoredCommand::new(edge_id, session_id, state, record.as_ref());
        let finished = stored.finished();
        let key = (edge_id.to_owned(), command_id.to_owned());
        let expected = self.revisions.get(&key).copied();
        // The pointer is create-only (the first Edge to use an id keeps it), written
        // with the record's first write.
        let pointer = async {
            if expected.is_some() {
                return Some(true);
            }
            let at = pointer_key(command_id);
            let create = self.kv.create(&at, edge_id.to_owned().into());
            match tokio::time::timeout(self.timeout, create).await {
                Ok(Ok(_)) => Some(true),
                // The id is taken: by this Edge's command (written before), or another's.
                Ok(Err(e)) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                    match bounded(self.timeout, self.kv.entry(&at)).await {
                        Ok(Some(p)) if p.value == edge_id.as_bytes() => Some(true),
                        Ok(Some(_)) => None,
                        _ => Some(false),
                    }
                }
                _ => Some(false),
            }
        };
        let value: Bytes = stored.encode_to_vec().into();
        let record_at = record_key(edge_id, command_id);
        let record_write = cas_put(&self.bucket, &record_at, value, expected, |v| {
            StoredCommand::decode_value(v).is_some_and(|there| there.stands_over(&stored))
        });
        // A record that ends its command lands before the index stops listing it: a
        // reader that finds an unfinished record listed by no index takes it for an
        // orphan. Otherwise the index goes with them: a reader skips an id whose record
        // is not there yet.
        let record_and_pointer = async { tokio::join!(pointer, record_write) };
        let ((pointed, written), index, indexed) = if finished {
            let (pointed, written) = record_and_pointer.await;
            let ended = matches!(written, Put::Written(_) | Put::Stands).then_some(command_id);
            let index = self.index_change(edge_id, session_id, ended);
            let indexed = self.write_index(edge_id, session_id, &index).await;
            ((pointed, written), index, indexed)
        } else {
            let index = self.index_change(edge_id, session_id, None);
            let (both, indexed) = tokio::join!(
                record_and_pointer,
                self.write_index(edge_id, session_id, &index)
            );
            (both, index, indexed)
        };
        if finished && matches!(written, Put::Written(_) | Put::Stands) {
            self.ended
                .entry(edge_id.to_owned())
                .or_default()
                .insert(command_id.to_owned());
        }
        // A finished record is written no more: its revision is not kept.
        match written {
            Put::Written(revision) if !finished => {
                self.revisions.insert(key, revision);
            }
            _ => {
                self.revisions.remove(&key);
            }
        }
        let index_done = match (index, indexed) {
            (Some((open, _, _)), Some(Put::Written(r))) => {
                // What it stopped listing ended in the engine: no longer kept.
                self.ended.remove(edge_id);
                if open.is_empty() {
                    // An Edge with nothing open keeps its index key, but not a place here.
                    self.indexes.remove(edge_id);
                } else {
                    self.indexes.insert(edge_id.to_owned(), (Some(r), open));
                }
                true
            }
            (Some(_), Some(Put::Stands)) => true,
            (Some(_), _) => {
                // Its revision is unknown now; what it lists is kept, so that nothing
                // whose end is not in the engine drops out of it.
                if let Some(index) = self.indexes.get_mut(edge_id) {
                    index.0 = None;
                }
                false
            }
            (None, _) => true,
        };
        match (written, pointed) {
            // The id points at another Edge's command.
            (_, None) => Written::Conflict,
            // A replica that took the Edge over wrote it, or another ending stands: not
            // ours to write.
            (Put::Stands, _) => Written::Moot,
            (Put::Written(_), Some(true)) if index_done => Written::Done,
            _ => Written::Failed,
        }
    }

    /// Writes `index` (from [`index_change`](Self::index_change)), if any.
    async fn write_index(
        &self,
        edge_id: &str,
        session_id: u64,
        index: &Option<(Vec<String>, Bytes, Option<u64>)>,
    ) -> Option<Put> {
        let (_, value, expected) = index.as_ref()?;
        let key = index_key(edge_id);
        Some(
            cas_put(&self.bucket, &key, value.clone(), *expected, |v| {
                parse_index(v).0 > session_id
            })
            .await,
        )
    }

    /// What the Edge's index should list ([`listing`]), its value and the revision to
    /// write it on, when that is not what the index was last written with.
    fn index_change(
        &self,
        edge_id: &str,
        session_id: u64,
        also_ended: Option<&str>,
    ) -> Option<(Vec<String>, Bytes, Option<u64>)> {
        let (revision, listed) = self
            .indexes
            .get(edge_id)
            .cloned()
            .unwrap_or((None, Vec::new()));
        let ended = self.ended.get(edge_id);
        let open = listing(self.cp.unfinished_commands(edge_id), &listed, |id| {
            also_ended == Some(id) || ended.is_some_and(|e| e.contains(id))
        });
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

/// The ids an Edge's index lists, in order: the commands the core has not finished,
/// and those it lists already whose end is not in the engine yet (`ended` says which
/// are), at most [`MAX_INDEXED`].
fn listing(
    unfinished: Vec<String>,
    listed: &[String],
    ended: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut ids: BTreeSet<String> = unfinished.into_iter().collect();
    ids.extend(listed.iter().filter(|id| !ended(id)).cloned());
    ids.into_iter().take(MAX_INDEXED).collect()
}

#[cfg(test)]
mod tests {
    use super::listing;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_finished_command_stays_listed_until_its_end_is_written() {
        // c-1 finished in the core, its record not written yet: still listed.
        let listed = ids(&["c-1", "c-2"]);
        let open = listing(ids(&["c-2", "c-3"]), &listed, |_| false);
        assert_eq!(open, ids(&["c-1", "c-2", "c-3"]));
        // Written: dropped.
        let open = listing(ids(&["c-2", "c-3"]), &listed, |id| id == "c-1");
        assert_eq!(open, ids(&["c-2", "c-3"]));
        // Unfinished in the core is listed whatever `ended` says.
        let open = listing(ids(&["c-2"]), &listed, |_| true);
        assert_eq!(open, ids(&["c-2"]));
    }
}
