//! The Control Plane's protocol counters, as `/metrics` names them.

use iop_core::cp::CpStats;

pub(super) fn protocol_counters(s: &CpStats) -> [(&'static str, &'static str, u64); 29] {
    [
        (
            "iop_connections_accepted",
            "Connections accepted.",
            s.connections_accepted,
        ),
        (
            "iop_sessions_accepted",
            "Edge sessions accepted (hellos accepted).",
            s.sessions_accepted,
        ),
        (
            "iop_hello_rejections",
            "Hellos refused.",
            s.hello_rejections,
        ),
        ("iop_frames_received", "Frames decoded.", s.frames_in),
        (
            "iop_frames_sent",
            "Frames queued for sending.",
            s.frames_out,
        ),
        (
            "iop_bytes_received",
            "Bytes received from Edges.",
            s.bytes_in,
        ),
        ("iop_bytes_sent", "Bytes sent to Edges.", s.bytes_out),
        (
            "iop_protocol_errors",
            "Connections closed for breaking the protocol.",
            s.protocol_errors,
        ),
        (
            "iop_hello_timeouts",
            "Connections closed for not sending a hello in time.",
            s.hello_timeouts,
        ),
        (
            "iop_heartbeat_timeouts",
            "Sessions ended by the liveness window.",
            s.heartbeat_timeouts,
        ),
        (
            "iop_supersessions",
            "Sessions replaced by a newer one of the same Edge.",
            s.supersessions,
        ),
        (
            "iop_overloaded",
            "Connections refused at the connection cap.",
            s.overloaded,
        ),
        (
            "iop_slow_peers",
            "Connections dropped because the Edge read too slowly.",
            s.slow_peers,
        ),
        (
            "iop_status_timeouts",
            "Status requests that timed out.",
            s.status_timeouts,
        ),
        (
            "iop_late_status_responses",
            "Status responses that came after their request timed out.",
            s.late_status_responses,
        ),
        (
            "iop_unknown_command_ids",
            "Command responses/events for unknown command ids, dropped.",
            s.unknown_command_ids,
        ),
        (
            "iop_duplicate_command_events",
            "Duplicate command events dropped.",
            s.duplicate_command_events,
        ),
        (
            "iop_commands_resent",
            "Commands re-sent on a new session.",
            s.commands_resent,
        ),
        (
            "iop_commands_lost",
            "Commands marked lost by the Edge.",
            s.commands_lost,
        ),
        (
            "iop_commands_abandoned",
            "Commands FAILED as abandoned: their Edge stayed away longer than it remembers them.",
            s.commands_abandoned,
        ),
        (
            "iop_event_gaps",
            "Node event sequence gaps seen.",
            s.event_gaps,
        ),
        (
            "iop_commands_undeliverable",
            "Commands failed undeliverable: sent on too many sessions that ended unanswered.",
            s.commands_undeliverable,
        ),
        (
            "iop_views_forgotten",
            "Views of disconnected Edges forgotten by age or count.",
            s.views_forgotten,
        ),
        (
            "iop_pending_hellos_refused",
            "Connections refused because too many hellos were pending.",
            s.pending_hellos_refused,
        ),
        (
            "iop_connections_refused",
            "Connections refused OVERLOADED by the runtime (too many pending hellos from one address).",
            s.connections_refused,
        ),
        (
            "iop_load_updates",
            "Load updates pushed by Edges and applied (PROTOCOL.md 4.8).",
            s.load_updates,
        ),
        (
            "iop_load_update_gaps",
            "Load updates whose sequence skipped: a status was asked for.",
            s.load_update_gaps,
        ),
        (
            "iop_load_update_unknown_providers",
            "Load updates naming a provider the view does not hold: a status was asked for.",
            s.load_update_unknown_providers,
        ),
        (
            "iop_load_update_resyncs",
            "Load updates that said resync (a structural change): a status was asked for.",
            s.load_update_resyncs,
        ),
    ]
}
