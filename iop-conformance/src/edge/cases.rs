//! The cases run against an Edge, in the order they run: the session's flow first
//! (hello, heartbeats, status, commands), then what ends sessions.

use super::CaseFn;
use super::commands::{command, command_id, conflict, operation, repeat, replay, selector};
use super::endings::{
    accepted_then_closes, closes_on, direction, go_away, limit, liveness, rejected, unexpected,
};
use super::flow::{heartbeats, hello, redaction, scope, send_limits, status, unknown_body};
use crate::report::{Case, case};

const HELLO: Case = case("edge.flow.hello", "4.1", "the first frame is a valid hello");
const HEARTBEATS: Case = case(
    "edge.flow.heartbeat",
    "4.2",
    "a heartbeat every interval, sequence increasing",
);
const STATUS: Case = case(
    "edge.flow.status",
    "4.3",
    "a status answer: same correlation id, this Edge, nodes in id order, provider numbers by §5.2",
);
const SCOPE: Case = case(
    "edge.status.scope",
    "4.3",
    "node_ids and start_after_node_id choose the nodes",
);
const UNKNOWN_BODY: Case = case(
    "edge.unknown_body",
    "3",
    "an unknown body after the hello is ignored",
);
const COMMAND: Case = case(
    "edge.flow.command",
    "4.4",
    "a command: its response, then events from ACCEPTED (1) to one terminal phase",
);
const REPEAT: Case = case(
    "edge.command.repeat",
    "4.4",
    "the same request again: the original response and latest event, not run again",
);
const CONFLICT: Case = case(
    "edge.command.conflict",
    "4.4",
    "a held id with another request: INVALID_COMMAND",
);
const OPERATION: Case = case(
    "edge.command.operation",
    "4.4",
    "an operation not advertised: UNKNOWN_OPERATION",
);
const COMMAND_ID: Case = case(
    "edge.command.id",
    "4.4",
    "an empty command_id: INVALID_COMMAND",
);
const SELECTOR: Case = case(
    "edge.command.selector",
    "6",
    "a selector that does not parse: INVALID_SELECTOR",
);
const REPLAY: Case = case(
    "edge.flow.replay",
    "4.4",
    "after a reconnect the hello lists the command and its latest event is sent again",
);
const LOAD_UPDATES: Case = case(
    "edge.flow.load_update",
    "4.8",
    "asked for load updates: none before a full status, then in sequence, within one per interval (burst 4), each provider once, §5 zeros",
);
const GO_AWAY: Case = case(
    "edge.go_away",
    "4.7",
    "after GoAway{retry_after_ms: 2000} the Edge dials no sooner",
);
const REJECTED: Case = case(
    "edge.hello.rejected",
    "4.1",
    "after a hello rejected with retry_after_ms 2000 the Edge dials no sooner",
);
const LIVENESS: Case = case(
    "edge.liveness",
    "4.2",
    "a silent Control Plane is left after 3 heartbeat intervals",
);
const DIRECTION: Case = case(
    "edge.direction",
    "3",
    "a second hello_response is a protocol error",
);
const ZERO_LENGTH: Case = case(
    "edge.frame.zero_length",
    "2",
    "a length prefix of 0 is a protocol error",
);
const TOO_LARGE: Case = case(
    "edge.frame.too_large",
    "2",
    "a frame over the receive limit is refused from its prefix",
);
const UNDECODABLE: Case = case(
    "edge.frame.undecodable",
    "2",
    "a body that is not an Envelope is a protocol error",
);
const LIMIT: Case = case(
    "edge.frame.limit",
    "7",
    "a node id of 129 bytes is a protocol error",
);
const UNEXPECTED: Case = case(
    "edge.hello.unexpected",
    "4.1",
    "a status request before the hello is answered is a protocol error",
);
const FRAME_LIMIT: Case = case(
    "edge.hello.frame_limit",
    "4.1",
    "an accepted hello with max_frame_len 1024 is a protocol error",
);
const VERSION: Case = case(
    "edge.hello.version",
    "9",
    "an accepted hello with a version above the one offered is a protocol error",
);
const SEND_LIMITS: Case = case(
    "edge.send_limits",
    "4.6",
    "no frame of the whole run broke a limit of §7",
);
const REDACTION: Case = case(
    "edge.redaction",
    "5.4",
    "no frame holds a secret of the Edge's configuration",
);

/// Every case against an Edge, in the order they run.
pub const CASES: &[Case] = &[
    HELLO,
    HEARTBEATS,
    STATUS,
    SCOPE,
    UNKNOWN_BODY,
    COMMAND,
    REPEAT,
    CONFLICT,
    OPERATION,
    COMMAND_ID,
    SELECTOR,
    REPLAY,
    LOAD_UPDATES,
    GO_AWAY,
    REJECTED,
    LIVENESS,
    DIRECTION,
    ZERO_LENGTH,
    TOO_LARGE,
    UNDECODABLE,
    LIMIT,
    UNEXPECTED,
    FRAME_LIMIT,
    VERSION,
    SEND_LIMITS,
    REDACTION,
];

pub(super) const RUN: &[(&Case, CaseFn)] = &[
    (&HELLO, hello),
    (&HEARTBEATS, heartbeats),
    (&STATUS, status),
    (&SCOPE, scope),
    (&UNKNOWN_BODY, unknown_body),
    (&COMMAND, command),
    (&REPEAT, repeat),
    (&CONFLICT, conflict),
    (&OPERATION, operation),
    (&COMMAND_ID, command_id),
    (&SELECTOR, selector),
    (&REPLAY, replay),
    (&LOAD_UPDATES, super::load::load_updates),
    (&GO_AWAY, go_away),
    (&REJECTED, rejected),
    (&LIVENESS, liveness),
    (&DIRECTION, direction),
    (&ZERO_LENGTH, |t| closes_on(t, &[0, 0, 0, 0], "length 0")),
    (&TOO_LARGE, |t| {
        closes_on(t, &[0x7f, 0xff, 0xff, 0xff], "length 2^31 − 1")
    }),
    (&UNDECODABLE, |t| {
        closes_on(t, &[0, 0, 0, 1, 0x0f], "body 0x0f")
    }),
    (&LIMIT, limit),
    (&UNEXPECTED, unexpected),
    (&FRAME_LIMIT, |t| {
        accepted_then_closes(t, 1024, 0, "max_frame_len 1024")
    }),
    (&VERSION, |t| {
        let offered = t.hello.as_ref().map_or(1, |h| h.protocol_version);
        accepted_then_closes(
            t,
            0,
            offered + 1,
            &format!("protocol_version {}", offered + 1),
        )
    }),
    (&SEND_LIMITS, send_limits),
    (&REDACTION, redaction),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_runs_once_in_the_listed_order() {
        let run: Vec<&str> = RUN.iter().map(|(c, _)| c.id).collect();
        let listed: Vec<&str> = CASES.iter().map(|c| c.id).collect();
        assert_eq!(run, listed);
    }

    #[test]
    fn a_case_named_as_a_check_has_its_section() {
        for c in CASES {
            if let Some(check) = iop_proto::checks::find(c.id) {
                assert_eq!(check.section, c.section, "{}", c.id);
            }
        }
    }
}
