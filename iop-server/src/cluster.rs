//! `iop-control-plane --cluster`: this Control Plane as one replica of several, its
//! ownership decisions made in NATS JetStream ([`iop_cluster`], PROTOCOL.md §8).

use std::path::PathBuf;

use iop_cluster::liveness::LivenessError;
use iop_cluster::{ClusterConfig, ClusterError, Replica};

use super::exit::Failure;

use super::private_file::read_private;
use iop_tokio::ControlPlaneHandle;

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

    /// The fewest claims and releases written to the engine as one atomic batch (one
    /// durable commit for the group): writes that arrive while earlier ones are in
    /// flight wait and go together. Smaller groups go one write each, which costs
    /// less below about two dozen.
    #[arg(
        long,
        value_name = "N",
        default_value_t = iop_cluster::group_commit::ATOMIC_MIN as u64,
        value_parser = clap::value_parser!(u64).range(2..=1_000),
        requires = "cluster"
    )]
    pub cluster_batch_min: u64,

    /// PEM file of the CA that signs the NATS server's certificate: TLS to NATS.
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_ca: Option<PathBuf>,

    /// This replica's PEM client certificate for mutual TLS with NATS (with
    /// --cluster-key and --cluster-ca): the engine knows each replica by its own.
    #[arg(long, value_name = "FILE", requires_all = ["cluster_key", "cluster_ca"])]
    pub cluster_cert: Option<PathBuf>,

    /// The PEM private key of --cluster-cert (readable by its owner only).
    #[arg(long, value_name = "FILE", requires = "cluster_cert")]
    pub cluster_key: Option<PathBuf>,

    /// This replica's NATS credentials file (a user JWT and its NKey seed, as `nsc`
    /// writes them; readable by its owner only).
    #[arg(long, value_name = "FILE", requires = "cluster", conflicts_with_all = ["cluster_nkey", "cluster_token_file"])]
    pub cluster_creds: Option<PathBuf>,

    /// File holding this replica's NATS user NKey seed (`SU...`, as
    /// `iop-control-plane cluster-nkey` writes it; readable by its owner only).
    #[arg(
        long,
        value_name = "FILE",
        requires = "cluster",
        conflicts_with = "cluster_token_file"
    )]
    pub cluster_nkey: Option<PathBuf>,

    /// File holding the NATS token (readable by its owner only). One token shared by
    /// every replica: prefer --cluster-nkey or --cluster-creds, one identity each.
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_token_file: Option<PathBuf>,
}

/// Writes a new NATS user NKey seed to `file` (created, mode 0600 on Unix; an
/// existing file is an error, never overwritten); its public key, for the engine's
/// configuration.
pub fn write_nkey(file: &std::path::Path) -> Result<String, String> {
    use std::io::Write as _;
    let pair = nkeys::KeyPair::new_user();
    let seed = zeroize::Zeroizing::new(pair.seed().map_err(|e| e.to_string())?);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options
        .open(file)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    out.write_all(format!("{}\n", seed.as_str()).as_bytes())
        .map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(pair.public_key())
}

/// `url` (servers separated by commas) with the user and password of each server
/// replaced by `***`: what is printed of it.
pub fn redacted(url: &str) -> String {
    url.split(',')
        .map(|server| {
            let server = server.trim();
            let (scheme, rest) = match server.split_once("://") {
                Some((scheme, rest)) => (format!("{scheme}://"), rest),
                None => (String::new(), server),
            };
            match rest.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}***@{host}"),
                None => server.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `text` (an engine error, say) with every user and password of `url` replaced by
/// `***`.
fn scrubbed(text: String, url: &str) -> String {
    url.split(',')
        .filter_map(|server| {
            let rest = server
                .trim()
                .split_once("://")
                .map_or(server.trim(), |(_, r)| r);
            rest.rsplit_once('@')
                .map(|(userinfo, _)| userinfo.to_owned())
        })
        .filter(|userinfo| !userinfo.is_empty())
        .fold(text, |text, userinfo| text.replace(&userinfo, "***"))
}

/// Whether a server of `url` carries a user or password, which anyone on the host
/// can read from the process list.
fn has_userinfo(url: &str) -> bool {
    url.split(',').any(|server| {
        let rest = server.split_once("://").map_or(server, |(_, rest)| rest);
        rest.contains('@')
    })
}

/// The contents of a secret file as text, trimmed; an error naming the file and
/// never its contents.
fn secret_text(path: &std::path::Path, what: &str) -> Result<zeroize::Zeroizing<String>, Failure> {
    let text = secret_file_text(path, what)?;
    Ok(zeroize::Zeroizing::new(text.trim().to_owned()))
}

/// [`secret_text`], whole: for a file whose layout counts (a credentials file's
/// decorated blocks end in a newline).
fn secret_file_text(
    path: &std::path::Path,
    what: &str,
) -> Result<zeroize::Zeroizing<String>, Failure> {
    let raw = read_private(path).map_err(|e| Failure::Usage(e.to_string()))?;
    let text = std::str::from_utf8(&raw)
        .map_err(|_| Failure::Usage(format!("{}: the {what} is not UTF-8", path.display())))?;
    Ok(zeroize::Zeroizing::new(text.to_owned()))
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
        config.atomic_batch_min =
            usize::try_from(self.cluster_batch_min.max(2)).unwrap_or(usize::MAX);
        Ok(Some(config))
    }

    /// Connects to the NATS server and starts this replica for `cp`.
    pub async fn start(
        &self,
        config: ClusterConfig,
        cp: ControlPlaneHandle,
    ) -> Result<Replica, Failure> {
        let url = self.cluster.clone().unwrap_or_default();
        let shown = redacted(&url);
        if has_userinfo(&url) {
            tracing::warn!(
                "--cluster carries a user or password, which the process list shows: \
                 prefer --cluster-nkey or --cluster-creds"
            );
        }
        // Once connected, the client reconnects on its own when the server comes back;
        // a server that does not answer at start is a failure to start.
        let mut options = config.connect_options();
        if let Some(ca) = &self.cluster_ca {
            options = options.require_tls(true).add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&self.cluster_cert, &self.cluster_key) {
            super::private_file::check_private(key).map_err(|e| Failure::Usage(e.to_string()))?;
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        if let Some(path) = &self.cluster_token_file {
            let token = secret_text(path, "token")?;
            options = options.token(token.to_string());
        }
        if let Some(path) = &self.cluster_nkey {
            let seed = secret_text(path, "NKey seed")?;
            nkeys::KeyPair::from_seed(&seed).map_err(|_| {
                Failure::Usage(format!("{}: not a NATS user NKey seed", path.display()))
            })?;
            options = options.nkey(seed.to_string());
        }
        if let Some(path) = &self.cluster_creds {
            let creds = secret_file_text(path, "credentials file")?;
            options = options.credentials(&creds).map_err(|_| {
                Failure::Usage(format!(
                    "{}: not a NATS credentials file (a user JWT and its NKey seed)",
                    path.display()
                ))
            })?;
        }
        let servers = url
            .split(',')
            .map(|u| u.trim().parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Failure::Usage(scrubbed(format!("--cluster {shown}: {e}"), &url)))?;
        let client = tokio::time::timeout(config.op_timeout * 5, options.connect(servers))
            .await
            .map_err(|_| Failure::Runtime(format!("--cluster {shown}: no answer")))?
            .map_err(|e| Failure::Runtime(scrubbed(format!("--cluster {shown}: {e}"), &url)))?;
        Replica::start(client, cp, config)
            .await
            .map_err(|e| match e {
                ClusterError::Liveness(e @ LivenessError::InUse { .. }) => {
                    Failure::Usage(e.to_string())
                }
                e => Failure::Runtime(scrubbed(format!("--cluster {shown}: {e}"), &url)),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_printed_without_its_user_and_password() {
        assert_eq!(redacted("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(
            redacted("nats://iop:s3cret@10.0.0.1:4222, tls://u:p@nats-2:4222"),
            "nats://***@10.0.0.1:4222,tls://***@nats-2:4222"
        );
        assert_eq!(redacted("tok@host:4222"), "***@host:4222");
        assert_eq!(
            scrubbed(
                "cannot parse nats://iop:s3cret@h:1".into(),
                "nats://iop:s3cret@h:1"
            ),
            "cannot parse nats://***@h:1"
        );
        assert!(has_userinfo("nats://a:b@h:1"));
        assert!(!has_userinfo("nats://h:1,nats://h:2"));
    }
}
