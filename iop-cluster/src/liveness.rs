//! A replica's liveness entry, fenced to one process (PROTOCOL.md §8 "Failure of a
//! replica": two processes started with the same replica id never both run).
//!
//! The entry (`iop-replicas/<replica>`) holds the token of the process that writes it,
//! a random value drawn at start, and is renewed every heartbeat by compare-and-set on
//! the revision this process last wrote; it expires after three heartbeats without a
//! renewal. So:
//! * a process starting while the entry is fresh — renewed since it first looked, or
//!   not yet three heartbeats old — refuses to start ([`LivenessError::InUse`]), after
//!   waiting out at most three heartbeats for an entry a crashed process left behind;
//! * a running process that finds the entry written by another token (it was paused
//!   past its expiry and a second process started meanwhile) is *fenced*: it stops
//!   deciding claims and says so ([`ClusterSnapshot::fenced`](crate::ClusterSnapshot::fenced)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;

use crate::nats::{engine, leader_entry};
use crate::ownership::StoreError;

/// Why a replica may not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LivenessError {
    /// Another process runs with this replica id: its liveness entry was renewed while
    /// this one waited.
    #[error(
        "another process runs as replica {replica:?}: its liveness entry was renewed \
         within {waited_ms} ms (stop it, or give this one another --replica-id)"
    )]
    InUse {
        /// The replica id.
        replica: String,
        /// How long this process watched the entry.
        waited_ms: u64,
    },
    /// The engine could not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The entry is this process's, renewed.
    Renewed,
    /// Another process wrote the entry: this one is fenced.
    Fenced,
}

/// One process's liveness entry.
#[derive(Debug)]
pub(crate) struct Liveness {
    kv: kv::Store,
    replica: String,
    token: String,
    revision: AtomicU64,
    timeout: Duration,
    /// When the entry was last written by this process.
    renewed: std::sync::Mutex<Instant>,
    heartbeat: Duration,
}

impl Liveness {
    /// Takes `replica`'s entry for this process, waiting out (at most three heartbeats
    /// and one more) an entry nobody renews.
    pub(crate) async fn take(
        kv: kv::Store,
        replica: &str,
        heartbeat: Duration,
        timeout: Duration,
    ) -> Result<Self, LivenessError> {
        let token = format!("{:016x}", iop_driver::process_seed());
        let started = Instant::now();
        let mut first: Option<u64> = None;
        loop {
            let current = leader_entry(&kv, replica, timeout).await?;
            match (current, first) {
                // None, expired, or purged by a clean stop: free.
                (None | Some((_, None)), _) => break,
                (Some((revision, Some(_))), None) => first = Some(revision),
                (Some((revision, Some(_))), Some(seen)) if revision != seen => {
                    return Err(LivenessError::InUse {
                        replica: replica.to_owned(),
                        waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    });
                }
                _ => {}
            }
            if started.elapsed() > heartbeat * 4 {
                // Not renewed for longer than it lives: a crashed process's.
                tracing::info!(
                    replica,
                    "taking over the liveness entry of a process that stopped renewing it"
                );
                break;
            }
            tokio::time::sleep(heartbeat / 2).await;
        }
        let liveness = Self {
            kv,
            replica: replica.to_owned(),
            token,
            revision: AtomicU64::new(0),
            timeout,
            renewed: std::sync::Mutex::new(Instant::now()),
            heartbeat,
        };
        let put = tokio::time::timeout(
            timeout,
            liveness.kv.put(replica, liveness.token.clone().into()),
        )
        .await
        .map_err(|_| StoreError("timed out".into()))?
        .map_err(engine)?;
        liveness.revision.store(put, Ordering::Relaxed);
        liveness.mark_renewed();
        Ok(liveness)
    }

    fn mark_renewed(&self) {
        *self.renewed.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Whether this process may write ownership records: its entry was renewed within
    /// the time it lives (three heartbeats). A process paused past that may have been
    /// replaced by another with its id, and writes nothing until a renewal says it was
    /// not.
    pub(crate) fn confirmed(&self) -> bool {
        let renewed = *self.renewed.lock().unwrap_or_else(|p| p.into_inner());
        renewed.elapsed() < self.heartbeat * 3
    }

    /// Renews the entry, unless another process wrote it.
    pub(crate) async fn renew(&self) -> Result<Renewal, StoreError> {
        let expected = self.revision.load(Ordering::Relaxed);
        let update = self
            .kv
            .update(&self.replica, self.token.clone().into(), expected);
        match tokio::time::timeout(self.timeout, update).await {
            Err(_) => Err(StoreError("timed out".into())),
            Ok(Ok(revision)) => {
                self.revision.store(revision, Ordering::Relaxed);
                self.mark_renewed();
                Ok(Renewal::Renewed)
            }
            Ok(Err(e)) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                match leader_entry(&self.kv, &self.replica, self.timeout).await? {
                    // This process's own write (an acknowledgement lost): go on from it.
                    Some((revision, Some(value))) if value == self.token.as_bytes() => {
                        self.revision.store(revision, Ordering::Relaxed);
                        self.mark_renewed();
                        Ok(Renewal::Renewed)
                    }
                    Some((_, Some(_))) => Ok(Renewal::Fenced),
                    // Expired while the engine was out of reach: written anew, unless
                    // another process got there first.
                    _ => match self
                        .kv
                        .create(&self.replica, self.token.clone().into())
                        .await
                    {
                        Ok(revision) => {
                            self.revision.store(revision, Ordering::Relaxed);
                            self.mark_renewed();
                            Ok(Renewal::Renewed)
                        }
                        Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                            Ok(Renewal::Fenced)
                        }
                        Err(e) => Err(engine(e)),
                    },
                }
            }
            Ok(Err(e)) => Err(engine(e)),
        }
    }

    /// Removes the entry (a clean stop), if it is still this process's.
    pub(crate) async fn retire(&self) {
        let expected = self.revision.load(Ordering::Relaxed);
        let _ = tokio::time::timeout(
            self.timeout,
            self.kv.purge_expect_revision(&self.replica, Some(expected)),
        )
        .await;
    }
}
