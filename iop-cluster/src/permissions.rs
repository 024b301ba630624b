//! What the engine must let a replica do, and nothing more (PROTOCOL.md §8 "The
//! engine's contract"): the subjects of the replicas' NATS users, as a nats-server
//! configuration block. `iop-control-plane cluster-permissions` prints it, and
//! `examples/nats/accounts.conf` holds it, so an operator's own configuration can be
//! checked against it.
//!
//! The replicas live in a NATS account of their own: a client of any other account
//! sees none of their subjects, buckets or stream. Inside that account each replica's
//! user may publish to the cluster's subjects only (routing, supersede notices, load
//! changes, events), write and read the three buckets and the event stream through
//! JetStream's API for those streams only, and answer the requests it receives; it
//! may read every replica's load changes (observation, for placement and the load
//! watch) and otherwise only its own: the commands and status requests routed to it,
//! the notices for it, and the replies to its own requests, under an inbox prefix of
//! its own ([`replica_inbox_prefix`]) — no other replica reads what is routed to
//! another, and no observer reads any replica's replies. An observer's user may read
//! the event stream and the ownership and command records, through replies under its
//! own prefix ([`OBSERVER_INBOX_PREFIX`], `nats --inbox-prefix`), and write nothing.
//!
//! ```
//! let config = iop_cluster::ClusterConfig::new("a");
//! let block = iop_cluster::permissions::config_block(&config, &["a", "b"]);
//! assert!(block.contains("\"iop.cluster.*.edge\""));
//! assert!(block.contains("IOP_REPLICA_B = {"));
//! assert!(block.contains("\"_INBOX_IOP.b.>\""));
//! assert!(block.contains("\"$KV.iop-owners.>\""));
//! ```

use crate::ClusterConfig;
use crate::events::STREAM;
use crate::key::edge_key;

/// The JetStream API subjects a client needs to create, read and watch stream
/// `stream`, and to publish to it with acknowledgements.
fn stream_api(stream: &str, write: bool) -> Vec<String> {
    let mut subjects = vec![
        format!("$JS.API.STREAM.INFO.{stream}"),
        format!("$JS.API.STREAM.MSG.GET.{stream}"),
        format!("$JS.API.DIRECT.GET.{stream}"),
        format!("$JS.API.DIRECT.GET.{stream}.>"),
        format!("$JS.API.CONSUMER.CREATE.{stream}"),
        format!("$JS.API.CONSUMER.CREATE.{stream}.>"),
        format!("$JS.API.CONSUMER.INFO.{stream}.>"),
        format!("$JS.API.CONSUMER.DELETE.{stream}.>"),
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.>"),
        format!("$JS.ACK.{stream}.>"),
        format!("$JS.FC.{stream}.>"),
    ];
    if write {
        subjects.push(format!("$JS.API.STREAM.CREATE.{stream}"));
        subjects.push(format!("$JS.API.STREAM.UPDATE.{stream}"));
    }
    subjects
}

/// The subjects a replica of a cluster configured as `config` publishes to.
pub fn replica_publish(config: &ClusterConfig) -> Vec<String> {
    let mut subjects = vec![
        "iop.cluster.*.edge".to_owned(),
        "iop.cluster.*.superseded".to_owned(),
        crate::load_bus::LOAD_SUBJECTS.to_owned(),
        "iop.events.>".to_owned(),
        "$JS.API.INFO".to_owned(),
    ];
    for bucket in buckets(config) {
        subjects.push(format!("$KV.{bucket}.>"));
        subjects.extend(stream_api(&format!("KV_{bucket}"), true));
    }
    subjects.extend(stream_api(STREAM, true));
    subjects
}

/// The inbox prefix of replica `replica_id`'s NATS client
/// ([`ClusterConfig::connect_options`] sets it): the replies to its requests (routed
/// answers, JetStream's API, its watches) arrive under it, where only it may read.
pub fn replica_inbox_prefix(replica_id: &str) -> String {
    format!("_INBOX_IOP.{}", edge_key(replica_id))
}

/// The inbox prefix an observer's client uses (`nats --inbox-prefix
/// _INBOX_IOP_OBSERVER`): the only replies an observer may read.
pub const OBSERVER_INBOX_PREFIX: &str = "_INBOX_IOP_OBSERVER";

/// The subjects replica `replica_id` subscribes to: the requests routed to it, the
/// notices for it, every replica's load changes, and the replies to its own
/// requests.
pub fn replica_subscribe(replica_id: &str) -> Vec<String> {
    subscribe_as(&edge_key(replica_id))
}

/// [`replica_subscribe`] for the subject token `token` (`*`: any replica).
fn subscribe_as(token: &str) -> Vec<String> {
    vec![
        format!("iop.cluster.{token}.edge"),
        format!("iop.cluster.{token}.superseded"),
        // Every replica's load changes (observation, for placement and the watch).
        crate::load_bus::LOAD_SUBJECTS.to_owned(),
        format!("_INBOX_IOP.{token}.>"),
    ]
}

/// The subjects an observer publishes to: requests that read the event stream, the
/// ownership records and the command records.
pub fn observer_publish(config: &ClusterConfig) -> Vec<String> {
    let mut subjects = vec!["$JS.API.INFO".to_owned()];
    subjects.extend(stream_api(STREAM, false));
    for bucket in [&config.owners_bucket, &config.commands_bucket] {
        subjects.extend(stream_api(&format!("KV_{bucket}"), false));
    }
    subjects
}

fn buckets(config: &ClusterConfig) -> [&str; 3] {
    [
        &config.owners_bucket,
        &config.replicas_bucket,
        &config.commands_bucket,
    ]
}

fn list(subjects: &[String], indent: &str) -> String {
    subjects
        .iter()
        .map(|s| format!("{indent}\"{s}\""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The nats-server configuration variables of a cluster configured as `config`, whose
/// replicas are `replica_ids`: `IOP_REPLICA_PUBLISH` (what every replica publishes),
/// one `IOP_REPLICA_<ID>` per replica (its permissions: that, and its own subjects to
/// read; `<ID>` is [`replica_variable`]'s) and `IOP_OBSERVER`, for users'
/// `permissions` in the replicas' account.
pub fn config_block(config: &ClusterConfig, replica_ids: &[&str]) -> String {
    let replicas: Vec<(String, String)> = replica_ids
        .iter()
        .map(|id| (replica_variable(id), edge_key(id)))
        .collect();
    block(config, &replicas)
}

/// The configuration variable of replica `replica_id`'s permissions:
/// `IOP_REPLICA_` and its subject token in capitals, `-` as `_`.
pub fn replica_variable(replica_id: &str) -> String {
    format!(
        "IOP_REPLICA_{}",
        edge_key(replica_id).to_uppercase().replace('-', "_")
    )
}

/// [`config_block`] for replicas named by (variable, subject token); the token `*`
/// lets one user be any replica (a test's).
pub(crate) fn block(config: &ClusterConfig, replicas: &[(String, String)]) -> String {
    let i = "    ";
    let ii = "      ";
    let mut out = format!(
        "# The permissions of iop-control-plane replicas' NATS users, one each, and of a\n\
         # read-only observer's (iop-control-plane cluster-permissions prints this block).\n\
         IOP_REPLICA_PUBLISH = {{\n  allow: [\n{}\n  ]\n}}\n",
        list(&replica_publish(config), i),
    );
    for (variable, token) in replicas {
        out.push_str(&format!(
            "{variable} = {{\n  publish: $IOP_REPLICA_PUBLISH\n  subscribe: {{\n    allow: [\n{}\n    ]\n  }}\n  \
             # Answers to the requests it receives (other replicas' inboxes).\n  allow_responses: true\n}}\n",
            list(&subscribe_as(token), ii),
        ));
    }
    out.push_str(&format!(
        "IOP_OBSERVER = {{\n  publish: {{\n    allow: [\n{}\n    ]\n  }}\n  subscribe: {{\n    allow: [\n{}\n    ]\n  }}\n}}\n",
        list(&observer_publish(config), ii),
        list(
            &[
                "iop.events.>".to_owned(),
                format!("{OBSERVER_INBOX_PREFIX}.>")
            ],
            ii
        ),
    ));
    out
}
