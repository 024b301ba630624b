//! Counters for metrics.

/// Monotonic counters (and three gauges) of a Control Plane, for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CpStats {
    /// Connections held now (gauge).
    pub connections: usize,
    /// Live Edge sessions now (gauge).
    pub live_sessions: usize,
    /// Edges with a view now, connected or not (gauge).
    pub edges_known: usize,
    /// Connections ever handed to `handle_connect`.
    pub connections_accepted: u64,
    /// Frames decoded.
    pub frames_in: u64,
    /// Frames queued for sending.
    pub frames_out: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes handed out by `poll_transmit`.
    pub bytes_out: u64,
    /// Sessions accepted.
    pub sessions_accepted: u64,
    /// Hellos refused.
    pub hello_rejections: u64,
    /// Connections closed for breaking the protocol.
    pub protocol_errors: u64,
    /// Connections closed for not sending a hello in time.
    pub hello_timeouts: u64,
    /// Sessions ended by the liveness window.
    pub heartbeat_timeouts: u64,
    /// Sessions replaced by a newer one of the same Edge.
    pub supersessions: u64,
    /// Connections refused at the connection cap.
    pub overloaded: u64,
    /// Connections dropped because their peer read too slowly.
    pub slow_peers: u64,
    /// Envelopes with no or an unknown body, ignored.
    pub unknown_bodies: u64,
    /// Status responses that came after their request timed out.
    pub late_status_responses: u64,
    /// Status requests that timed out.
    pub status_timeouts: u64,
    /// Command responses and events for command ids the CP does not know, dropped.
    pub unknown_command_ids: u64,
    /// Command events dropped as duplicates of one already seen.
    pub duplicate_command_events: u64,
    /// Commands re-sent on a new session.
    pub commands_resent: u64,
    /// Commands marked lost by the Edge.
    pub commands_lost: u64,
    /// Commands FAILED "undeliverable": sent on too many sessions that ended unanswered.
    pub commands_undeliverable: u64,
    /// Commands FAILED "abandoned": their Edge stayed away longer than it remembers
    /// them.
    pub commands_abandoned: u64,
    /// Views of disconnected Edges forgotten by age or by count.
    pub views_forgotten: u64,
    /// Connections refused `OVERLOADED` because too many hellos were pending.
    pub pending_hellos_refused: u64,
    /// Connections the runtime refused (`ControlPlane::handle_connect_refused`).
    pub connections_refused: u64,
    /// Node event gaps seen.
    pub event_gaps: u64,
    /// Status refreshes the Control Plane asked for on its own.
    pub status_refreshes: u64,
    /// Refreshes put off because `max_refreshes_in_flight` were in flight.
    pub status_refreshes_deferred: u64,
    /// Pages asked for after a truncated answer (`start_after_node_id`).
    pub status_pages: u64,
    /// Full answers that could not be paged into a complete view: an Edge that
    /// ignores `start_after_node_id` (or answers out of node-id order), too many
    /// pages, or a page that was not answered.
    pub status_views_partial: u64,
    /// Full answers whose `registry_revision` was the view's: nothing to merge.
    pub status_unchanged: u64,
    /// Commands taken for an Edge (sent, or held for their record first).
    pub commands_issued: u64,
    /// Commands the Edge rejected.
    pub commands_rejected: u64,
    /// Commands that ended SUCCEEDED.
    pub commands_succeeded: u64,
    /// Commands that ended FAILED on the Edge.
    pub commands_failed: u64,
    /// Commands that ended CANCELLED.
    pub commands_cancelled: u64,
    /// Commands that ended TIMED_OUT.
    pub commands_timed_out: u64,
    /// Load updates applied (PROTOCOL.md §4.8).
    pub load_updates: u64,
    /// Load updates whose sequence skipped (a status was asked for).
    pub load_update_gaps: u64,
    /// Load updates naming a provider the view does not hold (a status was asked for).
    pub load_update_unknown_providers: u64,
    /// Load updates with `resync` set (a status was asked for).
    pub load_update_resyncs: u64,
}

impl CpStats {
    /// Counts how a command ended, by the outcome an answer of the Edge brought.
    pub(crate) fn command_ended(&mut self, outcome: Option<&super::CommandOutcome>) {
        use iop_proto::CommandPhase as P;
        let counter = match outcome {
            Some(super::CommandOutcome::Rejected(_)) => &mut self.commands_rejected,
            Some(super::CommandOutcome::Finished(P::Succeeded)) => &mut self.commands_succeeded,
            Some(super::CommandOutcome::Finished(P::Failed)) => &mut self.commands_failed,
            Some(super::CommandOutcome::Finished(P::Cancelled)) => &mut self.commands_cancelled,
            Some(super::CommandOutcome::Finished(P::TimedOut)) => &mut self.commands_timed_out,
            _ => return,
        };
        *counter += 1;
    }
}
