//! A cluster replica's figures on `/metrics`.

use iop_cluster::ClusterSnapshot;
use prometheus_client::encoding::DescriptorEncoder;

use super::encode::{counter, gauge};

pub(super) fn encode_cluster(
    e: &mut DescriptorEncoder<'_>,
    c: &ClusterSnapshot,
    remote_load_edges: usize,
) -> Result<(), std::fmt::Error> {
    gauge(
        e,
        "iop_cluster_remote_load_edges",
        "Edges other replicas hold, as this replica's placement and load watch know them.",
        remote_load_edges as u64,
    )?;
    gauge(
        e,
        "iop_cluster_engine_up",
        "1 while this replica's last liveness renewal reached the cluster engine (NATS).",
        u8::from(c.engine_up),
    )?;
    gauge(
        e,
        "iop_cluster_engine_rtt_seconds",
        "Round-trip time of the last liveness renewal.",
        c.engine_rtt_us as f64 / 1e6,
    )?;
    gauge(
        e,
        "iop_cluster_owner_largest_batch",
        "The most ownership writes one atomic batch carried.",
        c.owner_largest_batch,
    )?;
    gauge(
        e,
        "iop_cluster_fenced",
        "1 once another process took this replica's liveness entry (same --replica-id): it decides no more claims.",
        u8::from(c.fenced),
    )?;
    gauge(
        e,
        "iop_cluster_events_outbox",
        "Events waiting in this replica's outbox for the fleet's stream.",
        c.events_outbox,
    )?;
    let counters: [(&str, &str, u64); 24] = [
        (
            "iop_cluster_commands_recorded",
            "Command records written to the cluster engine.",
            c.commands_recorded,
        ),
        (
            "iop_cluster_command_records_failed",
            "Command records that could not be written to the cluster engine.",
            c.command_records_failed,
        ),
        (
            "iop_cluster_commands_adopted",
            "Unfinished commands another replica sent, carried on by this one.",
            c.commands_adopted,
        ),
        (
            "iop_cluster_claims_granted",
            "Ownership claims granted.",
            c.claims_granted,
        ),
        (
            "iop_cluster_claims_held",
            "Ownership claims refused: a live replica holds the Edge.",
            c.claims_held,
        ),
        (
            "iop_cluster_claims_unavailable",
            "Ownership claims the engine could not decide (OVERLOADED).",
            c.claims_unavailable,
        ),
        (
            "iop_cluster_cas_conflicts",
            "Compare-and-set writes that found the record moved on.",
            c.cas_conflicts,
        ),
        (
            "iop_cluster_ownership_lost",
            "Sessions closed because another replica took their Edge.",
            c.ownership_lost,
        ),
        (
            "iop_cluster_routed_requests",
            "Requests sent to the replica holding an Edge.",
            c.routed_requests,
        ),
        (
            "iop_cluster_routed_failures",
            "Routed requests without an answer from the Edge.",
            c.routed_failures,
        ),
        (
            "iop_cluster_events_published",
            "Events published on the fleet's stream.",
            c.events_published,
        ),
        (
            "iop_cluster_events_lost",
            "Events lost before the fleet's stream had them (outbox full or past its horizon, or a lagging subscription).",
            c.events_lost,
        ),
        (
            "iop_cluster_events_retried",
            "Publishes of the event outbox that failed and were retried.",
            c.events_retried,
        ),
        (
            "iop_cluster_claims_overtaken",
            "Ownership claims refused because their record moved on while they were pending.",
            c.claims_overtaken,
        ),
        (
            "iop_cluster_releases_failed",
            "Releases of an ownership record that failed and were retried.",
            c.releases_failed,
        ),
        (
            "iop_cluster_phantoms_released",
            "Live ownership records naming this replica without a session here, released.",
            c.phantoms_released,
        ),
        (
            "iop_cluster_rollbacks",
            "Sessions closed because the engine's record was behind them (lost writes).",
            c.rollbacks,
        ),
        (
            "iop_cluster_watch_restarts",
            "Watches of the ownership records that ended or failed and were restarted.",
            c.watch_restarts,
        ),
        (
            "iop_cluster_reconciles",
            "Ownership reconciles run (periodic, after a watch restart, after a reconnect).",
            c.reconciles,
        ),
        (
            "iop_cluster_owner_writes",
            "Ownership records written (claims and releases), through the group commit.",
            c.owner_writes,
        ),
        (
            "iop_cluster_owner_batches",
            "Atomic batches of ownership writes sent to the engine (one durable commit each).",
            c.owner_batches,
        ),
        (
            "iop_cluster_owner_batched_writes",
            "Ownership writes that went in an atomic batch.",
            c.owner_batched_writes,
        ),
        (
            "iop_cluster_owner_single_writes",
            "Ownership writes sent on their own (a small group, or a refused batch's writes again).",
            c.owner_single_writes,
        ),
        (
            "iop_cluster_owner_batches_refused",
            "Atomic batches the engine refused, storing nothing; their writes went one by one.",
            c.owner_batches_refused,
        ),
    ];
    for (name, help, value) in counters {
        counter(e, name, help, value)?;
    }
    Ok(())
}
