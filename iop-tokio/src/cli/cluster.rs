//! `iop-control-plane --cluster`: this Control Plane as one replica of several, its
//! ownership decisions made in NATS JetStream ([`iop_cluster`], PROTOCOL.md §8).

use std::path::PathBuf;

use iop_cluster::liveness::LivenessError;
use iop_cluster::{ClusterConfig, ClusterError, Replica};

use super::exit::Failure;

use super::private_file::read_private;
use crate::ControlPlaneHandle;

/// The cluster flags of `iop-control-plane`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterArgs {
    /// Run as one replica of a cluster whose replicas agree through this NATS server
    /// (JetStream on, 2.10 or newer), e.g. nats://127.0.0.1:4222; the servers of a
    /// NATS cluster separated by commas. Without it the Control Plane is alone, as
    /// always.
    #[arg(long, value_name = "URL", env = "IOP_CLUSTER")]
    pub cluster: Option<String>,

    /// Copies of each bucket and of the event stream in a NATS cluster: 3 in
    /// production, over a three-server cluster whose servers run JetStream with
    /// `sync_interval: always` (examples/nats/); 1 for one server.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "cluster")]
    pub cluster_replicas: usize,

    /// This replica's id: unique in the cluster and the same across restarts (at
    /// start a replica releases the Edges its earlier run held).
    #[arg(long, value_name = "ID", env = "IOP_REPLICA_ID", requires = "cluster")]
    pub replica_id: Option<String>,

    /// How often this replica reads the record of every Edge it holds from the
    /// engine's leader, releases records naming it for Edges it does not hold, and
    /// rebuilds its fleet map (also on every reconnect to the engine): the bound, after
    /// the engine is reachable again, on two sessions of one Edge and on a stale fleet
    /// view.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 30_000,
        value_parser = clap::value_parser!(u64).range(1_000..=600_000),
        requires = "cluster"
    )]
    pub cluster_reconcile_ms: u64,

    /// PEM file of the CA that signs the NATS server's certificate: TLS to NATS.
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_ca: Option<PathBuf>,

    /// File holding the NATS token (readable by its owner only).
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_token_file: Option<PathBuf>,
}

impl ClusterArgs {
    /// The replica config, when `--cluster` is given; a usage error without
    /// `--replica-id` or with an id that is not `[A-Za-z0-9._-]{1,128}`.
    pub fn config(&self) -> Result<Option<ClusterConfig>, String> {
        if self.cluster.is_none() {
            return Ok(None);
        }
        let Some(id) = &self.replica_id else {
            return Err("--cluster needs --replica-id (or IOP_REPLICA_ID)".into());
        };
        let valid = !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !valid {
            return Err(format!(
                "--replica-id {id:?}: use 1 to 128 of A-Z a-z 0-9 . _ -"
            ));
        }
        let mut config = ClusterConfig::new(id.clone());
        config.bucket_replicas = self.cluster_replicas.clamp(1, 5);
        config.holder.reconcile_every =
            std::time::Duration::from_millis(self.cluster_reconcile_ms.max(1_000));
        Ok(Some(config))
    }

    /// Connects to the NATS server and starts this replica for `cp`.
    pub async fn start(
        &self,
        config: ClusterConfig,
        cp: ControlPlaneHandle,
    ) -> Result<Replica, Failure> {
        let url = self.cluster.clone().unwrap_or_default();
        // Once connected, the client reconnects on its own when the server comes back;
        // a server that does not answer at start is a failure to start.
        let mut options = config.connect_options();
        if let Some(ca) = &self.cluster_ca {
            options = options.require_tls(true).add_root_certificates(ca.clone());
        }
        if let Some(path) = &self.cluster_token_file {
            let raw = read_private(path).map_err(|e| Failure::Usage(e.to_string()))?;
            let token = std::str::from_utf8(&raw)
                .map_err(|_| Failure::Usage(format!("{}: the token is not UTF-8", path.display())))?
                .trim()
                .to_owned();
            options = options.token(token);
        }
        let servers = url
            .split(',')
            .map(|u| u.trim().parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Failure::Usage(format!("--cluster {url}: {e}")))?;
        let client = tokio::time::timeout(config.op_timeout * 5, options.connect(servers))
            .await
            .map_err(|_| Failure::Runtime(format!("--cluster {url}: no answer")))?
            .map_err(|e| Failure::Runtime(format!("--cluster {url}: {e}")))?;
        Replica::start(client, cp, config)
            .await
            .map_err(|e| match e {
                ClusterError::Liveness(e @ LivenessError::InUse { .. }) => {
                    Failure::Usage(e.to_string())
                }
                e => Failure::Runtime(format!("--cluster {url}: {e}")),
            })
    }
}
