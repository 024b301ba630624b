//! What the engine must let a replica do, and nothing more (PROTOCOL.md §8 "The
//! engine's contract"): the subjects of the replicas' NATS users, as a nats-server
//! configuration block. `iop-control-plane cluster-permissions` prints it, and
//! `examples/nats/accounts.conf` holds it, so an operator's own configuration can be
//! checked against it.
//!
//! The replicas live in a NATS account of their own: a client of any other account
//! sees none of their subjects, buckets or stream. Inside that account the replicas'
//! users may publish and subscribe to the cluster's subjects only (routing, supersede
//! notices, events), write and read the three buckets and the event stream through
//! JetStream's API for those streams only, and answer the requests they receive; an
//! observer's user may read the event stream and the ownership and command records,
//! and write nothing.
//!
//! ```
//! let block = iop_cluster::permissions::config_block(&iop_cluster::ClusterConfig::new("a"));
//! assert!(block.contains("\"iop.cluster.*.edge\""));
//! assert!(block.contains("\"$KV.iop-owners.>\""));
//! ```

use crate::ClusterConfig;
use crate::events::STREAM;

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

/// The subjects a replica subscribes to: its requests and notices, and the replies to
/// its own requests.
pub fn replica_subscribe() -> Vec<String> {
    vec![
        "iop.cluster.*.edge".to_owned(),
        "iop.cluster.*.superseded".to_owned(),
        "_INBOX.>".to_owned(),
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

/// The nats-server configuration variables `IOP_REPLICA` and `IOP_OBSERVER`: the
/// permissions of a replica's user and of an observer's, for a user's `permissions:`.
pub fn config_block(config: &ClusterConfig) -> String {
    let i = "      ";
    format!(
        "# The permissions of an iop-control-plane replica's NATS user, and of a read-only\n\
         # observer's (iop-control-plane cluster-permissions prints this block).\n\
         IOP_REPLICA = {{\n  publish: {{\n    allow: [\n{}\n    ]\n  }}\n  subscribe: {{\n    allow: [\n{}\n    ]\n  }}\n  \
         # Answers to the requests it receives (other replicas' inboxes).\n  allow_responses: true\n}}\n\
         IOP_OBSERVER = {{\n  publish: {{\n    allow: [\n{}\n    ]\n  }}\n  subscribe: {{\n    allow: [\n{}\n    ]\n  }}\n}}\n",
        list(&replica_publish(config), i),
        list(&replica_subscribe(), i),
        list(&observer_publish(config), i),
        list(&["iop.events.>".to_owned(), "_INBOX.>".to_owned()], i),
    )
}
