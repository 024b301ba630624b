//! IOP Control Plane replicas over NATS JetStream (PROTOCOL.md §8).
//!
//! Several `iop-control-plane` processes serve one fleet: an Edge connects to any of
//! them, and the replicas agree on which one holds each Edge's live session through
//! an existing engine — NATS with JetStream — never a protocol of their own. This crate
//! answers the core's ownership-claim seam (the core's
//! [`Directory`](iop_driver::iop_core::cp::Directory), here a [`ReplicaDirectory`])
//! from the engine:
//!
//! * one **ownership record** per Edge id in a key-value bucket ([`key`] says how ids
//!   become keys), written only by compare-and-set; the winning write's revision is
//!   the session's `session_id`, so session ids increase per Edge across the whole
//!   cluster (the fencing token of PROTOCOL.md §5.3); a record is marked closed, never
//!   deleted;
//! * each replica's rules over those records are a deterministic state machine, its
//!   [`Holder`](holder::Holder): claims that are never granted once overtaken,
//!   releases retried until done, a supervised watch, and a periodic reconcile from
//!   the engine's leader that closes sessions whose record moved on and releases
//!   records the replica no longer holds; the [`Replica`]'s tasks only drive it, and
//!   `tests/simulation` runs three of them under faults over 10 000 seeds;
//! * **replica liveness** entries that expire after three heartbeats, fenced to one
//!   process per replica id ([`liveness`]);
//! * **supersede across replicas**: the winner tells the former owner, whose watch
//!   and reconcile close the session anyway if the message is lost.
//!
//! The claim decision ([`ownership::decide`]) is a pure function of the record.
//!
//! * **routing**: any replica's [`Router`] reaches an Edge through the replica that
//!   holds it, for status, commands and views, carrying the session id it expects.
//!
//! * **events**: each replica publishes its Edges' events on one JetStream stream, at
//!   least once through a bounded outbox, de-duplicated by what identifies them on the
//!   wire; any replica reads them all, resuming from any event's id.
//!
//! * **command records**: a command's record is in the engine before the command is
//!   sent — the replica's [`CommandLog`] is its Control Plane's
//!   [`CommandJournal`](iop_driver::CommandJournal) — and every change after; a
//!   replica that wins the Edge next hands the unfinished ones to its core, so an
//!   outcome survives the crash of the replica that sent it.
//!
//! # Example
//!
//! A Control Plane server (here `iop-tokio`'s, any runtime of `iop-driver` works) whose
//! core leaves ownership to the replica's directory, made one replica of a cluster:
//!
//! ```no_run
//! use iop_cluster::{ClusterConfig, Replica};
//! use iop_driver::iop_core::cp::EnrolmentPolicy;
//! use iop_driver::{ControlPlaneHandle, Runtime, ServerConfig};
//!
//! /// The server config of replica `cluster` (bind the server with it).
//! fn config(cluster: &ClusterConfig) -> ServerConfig {
//!     let mut config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
//!     cluster.configure(&mut config);
//!     config
//! }
//!
//! /// `cp` is the handle of a server bound with `config(&cluster)`.
//! async fn join<R: Runtime>(cp: ControlPlaneHandle<R>, cluster: ClusterConfig) -> Result<Replica, Box<dyn std::error::Error>> {
//!     // The replica's options: a 2 s ping (a silent partition is a disconnect), and a
//!     // reconcile on every reconnect.
//!     let nats = cluster.connect_options().connect("nats://127.0.0.1:4222").await?;
//!     Ok(Replica::start(nats, cp, cluster).await?)
//! }
//! # let _ = config(&ClusterConfig::new("cp-1"));
//! ```
//!
//! `iop-control-plane --cluster nats://HOST:PORT --replica-id ID` does this (see the
//! README); a replica is stopped after its server ([`Replica::shutdown`]), so that
//! the sessions' closes release their records.
#![forbid(unsafe_code)]

pub mod commands;
pub mod directory;
mod driver;
pub mod events;
pub mod group_commit;
pub mod holder;
pub mod key;
pub mod liveness;
pub mod load_bus;
mod memory;
mod nats;
pub mod ownership;
pub mod permissions;
mod record;
pub mod replica;
pub mod route;
mod route_error;
mod route_list;
pub mod route_load;
mod stats;
pub mod stored;
pub mod testing;

pub use commands::CommandLog;
pub use directory::ReplicaDirectory;
pub use memory::MemoryStore;
pub use nats::{ClusterConfig, NatsStore};
pub use record::{Current, OwnerRecord};
pub use replica::{ClusterError, Replica};
pub use route::{RouteError, RouteErrorKind, RoutedCommand, Router};
pub use route_list::RemoteList;
pub use route_load::LoadQuery;
pub use stats::{ClusterSnapshot, ClusterStats};
