//! The ownership records and replica liveness in JetStream key-value buckets.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, kv};

use iop_driver::{DirectoryFactory, ServerConfig};

use crate::directory::ReplicaDirectory;
use crate::group_commit::{self, GroupCommit};
use crate::holder::HolderConfig;
use crate::ownership::{OwnershipStore, StoreError, WriteError};
use crate::record::{Current, OwnerRecord};
use crate::stats::ClusterStats;

/// Where and how a replica keeps its records in the engine, and the counters its
/// Control Plane's directory shares with it: make one per replica, bind its server
/// with [`directory`](Self::directory), and start the [`Replica`](crate::Replica)
/// with it (clones share the counters).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClusterConfig {
    /// This replica's id: unique in the cluster, stable across its restarts (records
    /// it held before a restart are released when it starts again).
    pub replica_id: String,
    /// The bucket of ownership records (`iop-owners`).
    pub owners_bucket: String,
    /// The bucket of replica liveness entries (`iop-replicas`).
    pub replicas_bucket: String,
    /// How often a replica renews its liveness entry (2 s); the entry expires after
    /// three of these.
    pub heartbeat: Duration,
    /// Copies of each bucket in a NATS cluster (1; 3 for a three-node NATS cluster).
    pub bucket_replicas: usize,
    /// How long one engine operation may take before the claim is `Unavailable` (2 s).
    pub op_timeout: Duration,
    /// The bucket of command records (`iop-commands`).
    pub commands_bucket: String,
    /// How long a command record is kept after its last change (24 h).
    pub command_retention: Duration,
    /// The ownership holder's timings: reconcile interval, retry backoff
    /// ([`HolderConfig`]).
    pub holder: HolderConfig,
    /// How often the client made by [`connect_options`](Self::connect_options) pings
    /// the engine (2 s): three unanswered pings — a silent partition — end the
    /// connection, which then reconnects, rather than hanging for minutes.
    pub engine_ping: Duration,
    /// Requests from other replicas this one answers at once (256): past it a request
    /// is answered `busy` at once, so a flood of them holds no more tasks than this.
    pub max_routed_requests: usize,
    /// The longest a routed command waits for its Edge's first answer (30 s), whatever
    /// wait the asking replica names.
    pub max_routed_wait: Duration,
    /// The fewest ownership writes that go to the engine as one atomic batch (default
    /// [`ATOMIC_MIN`](crate::group_commit::ATOMIC_MIN)); smaller groups go as single
    /// writes. `usize::MAX` writes every claim on its own.
    pub atomic_batch_min: usize,
    /// The replica's counters, made before the replica so that its Control Plane's
    /// directory can read them from the start.
    pub(crate) stats: Arc<ClusterStats>,
    /// Told each time the client made by `connect_options` (re)connects.
    pub(crate) connected: Arc<tokio::sync::Notify>,
}

impl ClusterConfig {
    /// The defaults, for replica `replica_id`.
    pub fn new(replica_id: impl Into<String>) -> Self {
        Self {
            replica_id: replica_id.into(),
            owners_bucket: "iop-owners".into(),
            replicas_bucket: "iop-replicas".into(),
            heartbeat: Duration::from_secs(2),
            bucket_replicas: 1,
            op_timeout: Duration::from_secs(2),
            commands_bucket: "iop-commands".into(),
            command_retention: Duration::from_secs(24 * 3600),
            holder: HolderConfig::default(),
            engine_ping: Duration::from_secs(2),
            max_routed_requests: 256,
            max_routed_wait: Duration::from_secs(30),
            atomic_batch_min: group_commit::ATOMIC_MIN,
            stats: Arc::default(),
            connected: Arc::default(),
        }
    }

    /// The options to connect this replica's NATS client with (add credentials and
    /// TLS to them): the replica's name, a ping every [`engine_ping`](Self::engine_ping),
    /// and a callback that has the replica reconcile its ownership each time the
    /// client reconnects.
    pub fn connect_options(&self) -> async_nats::ConnectOptions {
        let connected = self.connected.clone();
        async_nats::ConnectOptions::new()
            .name(format!("iop-control-plane {}", self.replica_id))
            // Its replies arrive where only it may read (crate::permissions).
            .custom_inbox_prefix(crate::permissions::replica_inbox_prefix(&self.replica_id))
            .ping_interval(self.engine_ping)
            .event_callback(move |event| {
                let connected = connected.clone();
                async move {
                    match event {
                        async_nats::Event::Connected => connected.notify_one(),
                        async_nats::Event::Disconnected => {
                            tracing::warn!("disconnected from the cluster engine");
                        }
                        other => tracing::debug!(event = %other, "cluster engine"),
                    }
                }
            })
    }

    /// The [`Directory`](iop_driver::iop_core::cp::Directory) for the core of this
    /// replica's Control Plane ([`ReplicaDirectory`](crate::directory::ReplicaDirectory)):
    /// set it as [`ServerConfig::directory`] before binding the server.
    pub fn directory(&self) -> DirectoryFactory {
        ReplicaDirectory::factory(self.stats.clone())
    }

    /// Makes `server` a replica's: this [`directory`](Self::directory), and no
    /// abandoning of a disconnected Edge's commands
    /// (`CpConfig::edge_command_retention` is `None`): an Edge away from this
    /// replica may be live on another, which carries its commands on.
    pub fn configure(&self, server: &mut ServerConfig) {
        server.directory = Some(self.directory());
        server.cp.edge_command_retention = None;
    }
}

/// [`OwnershipStore`] over two JetStream key-value buckets.
#[derive(Debug, Clone)]
pub struct NatsStore {
    pub(crate) owners: kv::Store,
    pub(crate) replicas: kv::Store,
    /// Claims and releases, written in groups.
    writes: GroupCommit,
    timeout: Duration,
}

pub(crate) fn engine<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError(e.to_string())
}

pub(crate) async fn bucket(
    js: &jetstream::Context,
    config: kv::Config,
) -> Result<kv::Store, StoreError> {
    if let Ok(store) = js.get_key_value(&config.bucket).await {
        return Ok(store);
    }
    match js.create_key_value(config.clone()).await {
        Ok(store) => Ok(store),
        // Another replica created it meanwhile.
        Err(e) => js
            .get_key_value(&config.bucket)
            .await
            .map_err(|_| engine(e)),
    }
}

impl NatsStore {
    /// Opens (or creates) the buckets of `config` on `js`.
    pub async fn open(js: &jetstream::Context, config: &ClusterConfig) -> Result<Self, StoreError> {
        let mut owners = bucket(
            js,
            kv::Config {
                bucket: config.owners_bucket.clone(),
                description: "IOP: which replica holds each Edge's live session".into(),
                history: 1,
                storage: jetstream::stream::StorageType::File,
                num_replicas: config.bucket_replicas,
                ..Default::default()
            },
        )
        .await?;
        let replicas = bucket(
            js,
            kv::Config {
                bucket: config.replicas_bucket.clone(),
                description: "IOP: live Control Plane replicas".into(),
                history: 1,
                max_age: config.heartbeat * 3,
                // Kept across an engine restart, as the owners bucket is.
                storage: jetstream::stream::StorageType::File,
                num_replicas: config.bucket_replicas,
                ..Default::default()
            },
        )
        .await?;
        let atomic = group_commit::allow_atomic(js, &mut owners).await;
        let writes = GroupCommit::spawn(
            owners.clone(),
            js.client(),
            config.op_timeout,
            atomic.then_some(config.atomic_batch_min.max(2)),
            config.stats.clone(),
        );
        Ok(Self {
            owners,
            replicas,
            writes,
            timeout: config.op_timeout,
        })
    }

    async fn bounded<T, E: std::fmt::Display>(
        &self,
        f: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<Result<T, E>, StoreError> {
        tokio::time::timeout(self.timeout, f)
            .await
            .map_err(|_| StoreError("timed out".into()))
    }
}

/// The latest message of `key` in `kv`'s stream as its leader has it: the revision,
/// and the value (`None` for a delete or purge marker). A key-value `entry` is a
/// direct get, which any copy of a replicated stream may serve, possibly behind.
pub(crate) async fn leader_entry(
    kv: &kv::Store,
    key: &str,
    timeout: Duration,
) -> Result<Option<(u64, Option<bytes::Bytes>)>, StoreError> {
    let subject = format!("{}{key}", kv.prefix);
    let read = tokio::time::timeout(timeout, kv.stream.get_last_raw_message_by_subject(&subject))
        .await
        .map_err(|_| StoreError("timed out".into()))?;
    match read {
        Ok(message) => {
            let marker = message
                .headers
                .get("KV-Operation")
                .is_some_and(|op| matches!(op.as_str(), "DEL" | "PURGE"));
            Ok(Some((
                message.sequence,
                (!marker).then_some(message.payload),
            )))
        }
        Err(e)
            if matches!(
                e.kind(),
                jetstream::stream::LastRawMessageErrorKind::NoMessageFound
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(engine(e)),
    }
}

impl OwnershipStore for NatsStore {
    async fn entry(&self, key: &str) -> Result<Option<Current>, StoreError> {
        let entry = self
            .bounded(self.owners.entry(key))
            .await?
            .map_err(engine)?;
        Ok(entry.map(|e| Current {
            record: match e.operation {
                kv::Operation::Put => OwnerRecord::decode(&e.value),
                kv::Operation::Delete | kv::Operation::Purge => None,
            },
            revision: e.revision,
        }))
    }

    async fn leader_entry(&self, key: &str) -> Result<Option<Current>, StoreError> {
        leader_entry(&self.owners, key, self.timeout)
            .await
            .map(|e| {
                e.map(|(revision, value)| Current {
                    record: value.and_then(|v| OwnerRecord::decode(&v)),
                    revision,
                })
            })
    }

    async fn create(&self, key: &str, record: &OwnerRecord) -> Result<u64, WriteError> {
        self.writes.write(key, record.encode(), 0).await
    }

    async fn update(
        &self,
        key: &str,
        record: &OwnerRecord,
        expected: u64,
    ) -> Result<u64, WriteError> {
        self.writes.write(key, record.encode(), expected).await
    }

    async fn replica_alive(&self, replica: &str) -> Result<bool, StoreError> {
        // Decides whether a live record may be taken under `Reject`: from the leader.
        let entry = leader_entry(&self.replicas, replica, self.timeout).await?;
        Ok(entry.is_some_and(|(_, value)| value.is_some()))
    }
}
