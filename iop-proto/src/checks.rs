//! Every check each side makes of what its peer sends, and what follows (PROTOCOL.md
//! §11): one catalogue, from which PROTOCOL.md's two tables are written and to which
//! every protocol violation of either end of `iop-core` and every
//! [`FrameError`](crate::FrameError) maps (`ProtocolViolation::rule`), so that the
//! document cannot drift from the code. It is data about the wire, kept beside the
//! schema: a conformance tester names its cases by these ids without depending on any
//! implementation.
//!
//! ```
//! use iop_proto::checks::{self, Outcome};
//!
//! let check = checks::find("cp.node_event.sequence").unwrap();
//! assert_eq!(check.section, "4.5");
//! assert_eq!(check.outcome, Outcome::ProtocolError);
//! ```

use std::fmt::{self, Write as _};

use crate::{CommandRejectReason, GoAwayReason, HelloRejectReason};

/// Which side makes a check (of what the other sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checker {
    /// The Control Plane, of an Edge.
    ControlPlane,
    /// The Edge, of a Control Plane.
    Edge,
}

/// What follows when a check fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `GoAway{PROTOCOL_ERROR}` (when it can be sent), then close.
    ProtocolError,
    /// The hello is answered rejected with this reason; the Control Plane closes.
    HelloRejected(HelloRejectReason),
    /// The command is answered rejected with this reason; the session goes on.
    CommandRejected(CommandRejectReason),
    /// `GoAway` with this reason, then close.
    GoAway(GoAwayReason),
    /// Closed without a `GoAway`.
    Close,
    /// Counted, dropped; the session goes on.
    Dropped,
    /// Counted; the Control Plane asks for a fresh status and trusts no view until
    /// it has one.
    Resync,
    /// Accepted as it is; the effect is written beside it.
    Tolerated,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ProtocolError => f.write_str("protocol error"),
            Self::HelloRejected(r) => write!(f, "hello rejected `{}`", short(r.as_str_name())),
            Self::CommandRejected(r) => {
                write!(f, "command rejected `{}`", short(r.as_str_name()))
            }
            Self::GoAway(r) => write!(f, "GoAway `{}`, close", short(r.as_str_name())),
            Self::Close => f.write_str("close"),
            Self::Dropped => f.write_str("counted and dropped"),
            Self::Resync => f.write_str("resync"),
            Self::Tolerated => f.write_str("tolerated"),
        }
    }
}

/// `HELLO_REJECT_REASON_BAD_CREDENTIAL` → `BAD_CREDENTIAL`.
fn short(name: &str) -> &str {
    for prefix in [
        "HELLO_REJECT_REASON_",
        "COMMAND_REJECT_REASON_",
        "GO_AWAY_REASON_",
    ] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return rest;
        }
    }
    name
}

/// One check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    /// A stable id: `cp.` for the Control Plane's checks, `edge.` for the Edge's.
    pub id: &'static str,
    /// Who makes it.
    pub checker: Checker,
    /// The PROTOCOL.md section of the rule, without `§`.
    pub section: &'static str,
    /// What is checked, in words.
    pub what: &'static str,
    /// What follows when the check fails.
    pub outcome: Outcome,
    /// The `CpStats` / `EdgeStats` field that counts it, if one does.
    pub counter: Option<&'static str>,
}

const fn check(
    checker: Checker,
    (id, section, what): (&'static str, &'static str, &'static str),
    outcome: Outcome,
) -> Check {
    Check {
        id,
        checker,
        section,
        what,
        outcome,
        counter: None,
    }
}

const fn cp(id: &'static str, section: &'static str, what: &'static str, o: Outcome) -> Check {
    check(Checker::ControlPlane, (id, section, what), o)
}

const fn edge(id: &'static str, section: &'static str, what: &'static str, o: Outcome) -> Check {
    check(Checker::Edge, (id, section, what), o)
}

const fn counted(mut check: Check, counter: &'static str) -> Check {
    check.counter = Some(counter);
    check
}

use CommandRejectReason as C;
use HelloRejectReason as H;
use Outcome::*;

/// What a Control Plane checks of an Edge, in the order a session meets them.
#[rustfmt::skip]
pub const CONTROL_PLANE: &[Check] = &[
    cp("cp.frame.zero_length", "2", "a length prefix of 0", ProtocolError),
    cp("cp.frame.too_large", "2", "a frame body over the receive limit (256 KiB before the hello is accepted, `max_frame_len` after)", ProtocolError),
    cp("cp.frame.undecodable", "2", "a body that is not a protobuf `iop.Envelope` (wire types, lengths, UTF-8 of strings)", ProtocolError),
    cp("cp.frame.limit", "7", "a string, repeated field or map over its cap, unknown groups nested over 16, or a decoded size over `max(8 × N, 8 MiB)`", ProtocolError),
    cp("cp.hello.first", "4.1", "the first frame is not `hello_request` (an empty or unknown body included)", ProtocolError),
    counted(cp("cp.hello.timeout", "4.1", "no hello within `hello_timeout` (10 s)", GoAway(GoAwayReason::HelloTimeout)), "hello_timeouts"),
    counted(cp("cp.hello.empty_id", "4.1", "`edge_id` empty or only whitespace", HelloRejected(H::EmptyEdgeId)), "hello_rejections"),
    counted(cp("cp.hello.invalid", "4.1", "`edge_id` outside `[A-Za-z0-9._-]{1,128}`, `protocol_version` 0, over 16 metadata entries, a metadata value over 256 bytes, a `software_version` over 128 bytes, an empty operation, metadata key or inflight id (more operations or inflight ids than the frame's caps is a protocol error)", HelloRejected(H::InvalidHello)), "hello_rejections"),
    counted(cp("cp.hello.version", "4.1", "no common protocol version: min(Edge's, CP's highest) below the CP's lowest", HelloRejected(H::UnsupportedProtocolVersion)), "hello_rejections"),
    counted(cp("cp.hello.unknown_edge", "4.1", "the enrolment policy does not know `edge_id`", HelloRejected(H::UnknownEdge)), "hello_rejections"),
    counted(cp("cp.hello.credential", "4.1", "the credential is not the one enrolled (compared in constant time)", HelloRejected(H::BadCredential)), "hello_rejections"),
    counted(cp("cp.hello.draining", "4.1", "the Control Plane is draining", HelloRejected(H::Draining)), "hello_rejections"),
    counted(cp("cp.hello.duplicate", "4.1", "the id has a live session and the duplicate policy is `Reject` (under `Replace`, the default, the old session gets `GoAway{SUPERSEDED}`)", HelloRejected(H::DuplicateEdge)), "hello_rejections"),
    cp("cp.hello.second", "4.1", "a second `hello_request` on an accepted session", ProtocolError),
    cp("cp.direction", "3", "a body only a Control Plane sends (`hello_response`, `status_request`, `command_request`)", ProtocolError),
    cp("cp.heartbeat_ack", "3", "a `heartbeat_ack` from an Edge (a Control Plane sends no heartbeats)", Tolerated),
    counted(cp("cp.unknown_body", "3", "an empty or unknown body after the hello", Dropped), "unknown_bodies"),
    counted(cp("cp.liveness", "4.2", "nothing received for 3 heartbeat intervals", GoAway(GoAwayReason::HeartbeatTimeout)), "heartbeat_timeouts"),
    cp("cp.status.never_issued", "4.3", "a `status_response` whose `correlation_id` was never issued on this session", ProtocolError),
    counted(cp("cp.status.late", "4.3", "a `status_response` to a request issued on this session that already timed out", Dropped), "late_status_responses"),
    cp("cp.status.edge_id", "4.3", "a `status_response` naming another `edge_id`", ProtocolError),
    counted(cp("cp.status.cursor_ignored", "4.3", "a truncated page that does not start after `start_after_node_id` (an Edge that ignores the cursor)", Tolerated), "status_views_partial"),
    cp("cp.node_event.edge_id", "4.5", "a `node_event` whose `edge_id` is not the session's (empty included)", ProtocolError),
    cp("cp.node_event.sequence", "4.5", "a `node_event` with `sequence` 0, or not above the last one of the session", ProtocolError),
    counted(cp("cp.node_event.gap", "4.5", "a `node_event` sequence that skips numbers (events were lost)", Resync), "event_gaps"),
    cp("cp.node_event.first_not_ready", "4.5", "the session's first `node_event` is not `EDGE_READY`", Resync),
    counted(cp("cp.command.unknown_id", "4.4", "a `command_response` or `command_event` for a `command_id` the CP does not know, or gave up on (lost, undeliverable, abandoned)", Dropped), "unknown_command_ids"),
    cp("cp.command.response_unsolicited", "4.4", "a `command_response` for a command not awaiting one on this session (a second response)", ProtocolError),
    cp("cp.command.response_contradicts", "4.4", "a rejecting `command_response` after the command's events were seen", ProtocolError),
    cp("cp.command.event_before_response", "4.4", "a `command_event` before the command's `command_response`, unless the hello listed the command in `inflight_command_ids` (its replayed event may come first)", ProtocolError),
    cp("cp.command.event_after_rejection", "4.4", "a `command_event` for a command the Edge rejected", ProtocolError),
    counted(cp("cp.command.event_duplicate", "4.4", "a `command_event` repeating the last sequence, or an older one replayed after a reconnect", Dropped), "duplicate_command_events"),
    cp("cp.command.event_sequence", "4.4", "a `command_event` with `sequence` 0 or below the last one", ProtocolError),
    cp("cp.command.event_first_not_accepted", "4.4", "a `command_event` with `sequence` 1 that is not `ACCEPTED`", ProtocolError),
    cp("cp.command.event_phase", "4.4", "a `command_event` whose phase is `UNSPECIFIED` or unknown", ProtocolError),
    cp("cp.command.event_backwards", "4.4", "a phase that goes back, or `ACCEPTED` or a terminal phase repeated", ProtocolError),
    cp("cp.command.event_after_terminal", "4.4", "a `command_event` after the command's terminal phase", ProtocolError),
    counted(cp("cp.command.lost", "4.4", "a command believed accepted and unfinished that the next hello does not list: FAILED \"lost by the Edge\"", Tolerated), "commands_lost"),
    cp("cp.load_update.not_negotiated", "4.8", "a `load_update` on a session whose hello did not negotiate them (the Edge did not offer them, or the CP answered `load_update_interval_ms` 0)", ProtocolError),
    cp("cp.load_update.before_status", "4.8", "a `load_update` before the session's first full status answer (its last page, when paged)", ProtocolError),
    cp("cp.load_update.rate", "4.8", "a `load_update` past the burst of 4, refilled one per interval", ProtocolError),
    cp("cp.load_update.duplicate_provider", "4.8", "a `load_update` naming one (`node_id`, `provider_id`) twice (more than 1 024 providers is a frame limit)", ProtocolError),
    counted(cp("cp.load_update.gap", "4.8", "a `load_update` whose `sequence` is not the last one plus 1", Resync), "load_update_gaps"),
    counted(cp("cp.load_update.unknown_provider", "4.8", "a `load_update` naming a provider the CP's view of the Edge does not hold (its known providers are applied)", Resync), "load_update_unknown_providers"),
    counted(cp("cp.load_update.resync", "4.8", "a `load_update` with `resync` set (a node or provider came or went, a config changed)", Resync), "load_update_resyncs"),
    counted(cp("cp.slow_peer", "4.6", "the Edge reads so slowly that 8 MiB wait in its outbound queue", Close), "slow_peers"),
];

/// What an Edge checks of a Control Plane, in the order a session meets them.
#[rustfmt::skip]
pub const EDGE: &[Check] = &[
    edge("edge.frame.zero_length", "2", "a length prefix of 0", ProtocolError),
    edge("edge.frame.too_large", "2", "a frame body over the Edge's receive limit (4 MiB by default; at least 1 310 015 bytes, the largest status request)", ProtocolError),
    edge("edge.frame.undecodable", "2", "a body that is not a protobuf `iop.Envelope`", ProtocolError),
    edge("edge.frame.limit", "7", "a string, repeated field or map over its cap, or a decoded size over `max(8 × N, 8 MiB)`", ProtocolError),
    edge("edge.hello.timeout", "4.1", "no `hello_response` (or `GoAway`) within `hello_timeout` (10 s)", Close),
    edge("edge.hello.unexpected", "4.1", "a body other than `hello_response` or `GoAway` before the hello is answered (an empty or unknown one included)", ProtocolError),
    edge("edge.hello.version", "9", "accepted with a `protocol_version` above the one the Edge offered (0 reads as the one offered)", ProtocolError),
    edge("edge.hello.frame_limit", "4.1", "accepted with a `max_frame_len` below 64 KiB (0 reads as 4 MiB)", ProtocolError),
    edge("edge.hello.rejected", "4.1", "a rejected hello: the Edge closes and waits the longer of `retry_after_ms` and its backoff", Close),
    edge("edge.direction", "3", "a body only an Edge sends, or a second `hello_response`", ProtocolError),
    counted(edge("edge.unknown_body", "3", "an empty or unknown body after the hello", Dropped), "ignored_frames"),
    edge("edge.liveness", "4.2", "nothing received for 3 heartbeat intervals; the Edge reconnects", GoAway(GoAwayReason::HeartbeatTimeout)),
    edge("edge.go_away", "4.7", "a `GoAway`: close, and dial again no sooner than its `retry_after_ms`", Close),
    edge("edge.load_update.interval", "4.8", "accepted with a `load_update_interval_ms` under 50 (other than 0) or over 60 000: the Edge keeps to the nearest bound", Tolerated),
    edge("edge.status.scope", "4.3", "a `status_request`'s `node_ids` and `start_after_node_id` choose the nodes; ids it does not know are left out", Tolerated),
    edge("edge.command.id", "4.4", "a `command_id` empty or over 128 bytes", CommandRejected(C::InvalidCommand)),
    edge("edge.command.repeat", "4.4", "a `command_id` the Edge holds, with the same request (every field equal): the original response and the latest event again, nothing run", Tolerated),
    edge("edge.command.conflict", "4.4", "a `command_id` the Edge holds, with a different request", CommandRejected(C::InvalidCommand)),
    edge("edge.command.draining", "4.7", "any new command while the Edge drains", CommandRejected(C::Draining)),
    edge("edge.command.operation", "4.4", "an operation the Edge did not advertise", CommandRejected(C::UnknownOperation)),
    edge("edge.command.selector", "6", "a selector that does not parse, or of the wrong level for the operation", CommandRejected(C::InvalidSelector)),
    edge("edge.command.no_target", "6", "a node-level selector that matches no configured node", CommandRejected(C::NoMatchingTarget)),
    edge("edge.command.busy", "4.4", "256 commands already running (carried-over ones included)", CommandRejected(C::Busy)),
];

/// Every check of either side.
pub fn all() -> impl Iterator<Item = &'static Check> {
    CONTROL_PLANE.iter().chain(EDGE)
}

/// The check `id`.
pub fn find(id: &str) -> Option<&'static Check> {
    all().find(|c| c.id == id)
}

/// The Markdown table of `checks`, as PROTOCOL.md §11 holds it.
pub fn table(checks: &[Check]) -> String {
    let mut out = String::from("| check | § | what | result |\n|---|---|---|---|\n");
    for c in checks {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            c.id, c.section, c.what, c.outcome
        );
    }
    out
}

/// The check a frame error fails.
pub fn frame_rule(checker: Checker, err: &crate::FrameError) -> &'static str {
    use crate::FrameError as F;
    let cp = checker == Checker::ControlPlane;
    match (err, cp) {
        (F::ZeroLength, true) => "cp.frame.zero_length",
        (F::ZeroLength, false) => "edge.frame.zero_length",
        (F::TooLarge { .. }, true) => "cp.frame.too_large",
        (F::TooLarge { .. }, false) => "edge.frame.too_large",
        (F::LimitExceeded(_), true) => "cp.frame.limit",
        (F::LimitExceeded(_), false) => "edge.frame.limit",
        // Undecodable, and a stream that ended inside a frame (a transport end the
        // decoder reports as a frame it could not decode).
        (_, true) => "cp.frame.undecodable",
        (_, false) => "edge.frame.undecodable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_prefixed_by_their_side_and_sections_exist() {
        let mut seen = std::collections::HashSet::new();
        for c in all() {
            assert!(seen.insert(c.id), "{} twice", c.id);
            let prefix = match c.checker {
                Checker::ControlPlane => "cp.",
                Checker::Edge => "edge.",
            };
            assert!(c.id.starts_with(prefix), "{}", c.id);
            let major: u32 = c.section.split('.').next().unwrap().parse().unwrap();
            assert!((1..=11).contains(&major), "{}: §{}", c.id, c.section);
        }
    }

    #[test]
    fn every_reject_reason_is_a_check() {
        for r in 1..=8 {
            let Ok(reason) = HelloRejectReason::try_from(r) else {
                continue;
            };
            assert!(
                CONTROL_PLANE
                    .iter()
                    .any(|c| c.outcome == Outcome::HelloRejected(reason)),
                "{reason:?}"
            );
        }
        for r in 1..=8 {
            let Ok(reason) = CommandRejectReason::try_from(r) else {
                continue;
            };
            assert!(
                EDGE.iter()
                    .any(|c| c.outcome == Outcome::CommandRejected(reason)),
                "{reason:?}"
            );
        }
    }
}
