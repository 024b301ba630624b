//! The envelope, its body oneof, and every body but the status messages.

use std::collections::BTreeMap;

use prost::encoding::WireType;

use super::wire::{Class, ENVELOPE_FIELDS};
use super::{Decoder, Step};
use crate::{
    Body, EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse, EdgeHelloRequest,
    EdgeHelloResponse, EdgeNodeEvent, Envelope, GoAway, Heartbeat, HeartbeatAck,
};

/// prost's recursion budget left for the fields of a body message.
pub(super) const BODY_FIELDS: u32 = ENVELOPE_FIELDS - 1;

/// The names a map field's errors carry.
pub(super) struct MapNames {
    pub(super) map: &'static str,
    pub(super) key: &'static str,
    pub(super) value: &'static str,
}

/// Decodes a body variant in place: merged into the current body when it is the same
/// variant, into a fresh default otherwise (where prost would build the fresh value
/// aside and replace the body only on success: the difference cannot be seen, a
/// failure fails the whole frame). `$entries`, the map entries read into the current
/// body, restarts with a fresh body.
macro_rules! variant {
    ($env:ident, $variant:ident, $entries:ident, |$m:ident| $decode:expr) => {{
        if !matches!($env.body, Some(Body::$variant(_))) {
            $entries = 0;
            let fresh = Some(Body::$variant(Default::default()));
            match $env.body {
                // Filled without assigning over the `None`, which would run the drop
                // glue of `Option<Body>` (a call) for nothing: forgetting `None`
                // leaks nothing.
                None => std::mem::forget(std::mem::replace(&mut $env.body, fresh)),
                Some(_) => $env.body = fresh,
            }
        }
        match &mut $env.body {
            Some(Body::$variant($m)) => $decode,
            _ => Ok(()),
        }
    }};
}

impl Decoder<'_> {
    /// The whole frame body, as `Message::merge` reads it.
    pub(super) fn envelope(&mut self, env: &mut Envelope, mut body: &[u8]) -> Step {
        const M: &str = "Envelope";
        let buf = &mut body;
        // Map entries read into the current body: prost merges a body variant that
        // occurs again, so its counts add up (the pre-scan counts per message
        // instance, not per map content, so duplicate keys count too).
        let mut entries = 0;
        while !buf.is_empty() {
            let (tag, wt) = self.key(buf)?;
            let step = match tag {
                1 => {
                    self.uint64(wt, &mut env.correlation_id, buf, M, "correlation_id")?;
                    continue;
                }
                2 => variant!(env, HelloRequest, entries, |m| self.hello_request(
                    wt,
                    m,
                    buf,
                    &mut entries
                )),
                3 => variant!(env, HelloResponse, entries, |m| self
                    .hello_response(wt, m, buf)),
                4 => variant!(env, StatusRequest, entries, |m| self
                    .status_request(wt, m, buf)),
                5 => variant!(env, StatusResponse, entries, |m| self
                    .status_response(wt, m, buf)),
                6 => variant!(env, CommandRequest, entries, |m| self.command_request(
                    wt,
                    m,
                    buf,
                    &mut entries
                )),
                7 => variant!(env, CommandResponse, entries, |m| self
                    .command_response(wt, m, buf)),
                8 => variant!(env, CommandEvent, entries, |m| self.command_event(
                    wt,
                    m,
                    buf,
                    &mut entries
                )),
                9 => variant!(env, NodeEvent, entries, |m| self.node_event(wt, m, buf)),
                12 => variant!(env, Heartbeat, entries, |m| self.heartbeat(wt, m, buf)),
                13 => variant!(env, HeartbeatAck, entries, |m| self
                    .heartbeat_ack(wt, m, buf)),
                14 => variant!(env, GoAway, entries, |m| self.go_away(wt, m, buf)),
                _ => {
                    self.skip(wt, tag, buf, ENVELOPE_FIELDS)?;
                    continue;
                }
            };
            self.at(step, M, "body")?;
        }
        Ok(())
    }

    /// One map entry, `count` being the entries this map field has read so far.
    pub(super) fn map_entry(
        &mut self,
        wt: WireType,
        map: &mut BTreeMap<String, String>,
        buf: &mut &[u8],
        count: &mut u32,
        names: &MapNames,
        ctx: u32,
    ) -> Step {
        if wt != WireType::LengthDelimited {
            return Err(self.wire_type_error(wt));
        }
        self.admit_entry(count, names.map)?;
        let mut key = String::new();
        let mut value = String::new();
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.string(wt, &mut key, buf, names.key, Class::Id),
            2 => d.string(wt, &mut value, buf, names.value, Class::Text),
            _ => d.skip(wt, tag, buf, ctx),
        })?;
        map.insert(key, value);
        Ok(())
    }

    fn hello_request(
        &mut self,
        wt: WireType,
        m: &mut EdgeHelloRequest,
        buf: &mut &[u8],
        entries: &mut u32,
    ) -> Step {
        const M: &str = "EdgeHelloRequest";
        const METADATA: MapNames = MapNames {
            map: "iop.EdgeHelloRequest.metadata",
            key: "iop.EdgeHelloRequest.metadata.key",
            value: "iop.EdgeHelloRequest.metadata.value",
        };
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => {
                let s = d.string(
                    wt,
                    &mut m.edge_id,
                    buf,
                    "iop.EdgeHelloRequest.edge_id",
                    Class::Id,
                );
                d.at(s, M, "edge_id")
            }
            2 => d.uint32(wt, &mut m.protocol_version, buf, M, "protocol_version"),
            3 => {
                let s = d.string(
                    wt,
                    &mut m.software_version,
                    buf,
                    "iop.EdgeHelloRequest.software_version",
                    Class::Text,
                );
                d.at(s, M, "software_version")
            }
            4 => {
                let limit = d.limits.max_operations;
                let s = d.push_string(
                    wt,
                    &mut m.operations,
                    buf,
                    "iop.EdgeHelloRequest.operations",
                    Class::Id,
                    limit,
                );
                d.at(s, M, "operations")
            }
            5 => {
                let s = d.map_entry(
                    wt,
                    &mut m.metadata,
                    buf,
                    entries,
                    &METADATA,
                    BODY_FIELDS - 1,
                );
                d.at(s, M, "metadata")
            }
            6 => {
                let s = d.bytes(
                    wt,
                    &mut m.credential,
                    buf,
                    "iop.EdgeHelloRequest.credential",
                );
                d.at(s, M, "credential")
            }
            7 => {
                let limit = d.limits.max_inflight_command_ids;
                let s = d.push_string(
                    wt,
                    &mut m.inflight_command_ids,
                    buf,
                    "iop.EdgeHelloRequest.inflight_command_ids",
                    Class::Id,
                    limit,
                );
                d.at(s, M, "inflight_command_ids")
            }
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    fn hello_response(&mut self, wt: WireType, m: &mut EdgeHelloResponse, buf: &mut &[u8]) -> Step {
        const M: &str = "EdgeHelloResponse";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.boolean(wt, &mut m.accepted, buf, M, "accepted"),
            2 => d.int32(wt, &mut m.reject_reason, buf, M, "reject_reason"),
            3 => {
                let s = d.string(
                    wt,
                    &mut m.message,
                    buf,
                    "iop.EdgeHelloResponse.message",
                    Class::Text,
                );
                d.at(s, M, "message")
            }
            4 => d.uint32(wt, &mut m.protocol_version, buf, M, "protocol_version"),
            5 => d.uint32(
                wt,
                &mut m.heartbeat_interval_ms,
                buf,
                M,
                "heartbeat_interval_ms",
            ),
            6 => d.uint64(wt, &mut m.session_id, buf, M, "session_id"),
            7 => d.uint32(wt, &mut m.retry_after_ms, buf, M, "retry_after_ms"),
            8 => d.uint32(wt, &mut m.max_frame_len, buf, M, "max_frame_len"),
            9 => d.uint32(
                wt,
                &mut m.min_protocol_version,
                buf,
                M,
                "min_protocol_version",
            ),
            10 => d.uint32(
                wt,
                &mut m.max_protocol_version,
                buf,
                M,
                "max_protocol_version",
            ),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    fn command_request(
        &mut self,
        wt: WireType,
        m: &mut EdgeCommandRequest,
        buf: &mut &[u8],
        entries: &mut u32,
    ) -> Step {
        const M: &str = "EdgeCommandRequest";
        const METADATA: MapNames = MapNames {
            map: "iop.EdgeCommandRequest.metadata",
            key: "iop.EdgeCommandRequest.metadata.key",
            value: "iop.EdgeCommandRequest.metadata.value",
        };
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => {
                let s = d.string(
                    wt,
                    &mut m.command_id,
                    buf,
                    "iop.EdgeCommandRequest.command_id",
                    Class::Id,
                );
                d.at(s, M, "command_id")
            }
            2 => {
                let s = d.string(
                    wt,
                    &mut m.operation,
                    buf,
                    "iop.EdgeCommandRequest.operation",
                    Class::Id,
                );
                d.at(s, M, "operation")
            }
            3 => {
                let s = d.string(
                    wt,
                    &mut m.target_selector,
                    buf,
                    "iop.EdgeCommandRequest.target_selector",
                    Class::Text,
                );
                d.at(s, M, "target_selector")
            }
            4 => {
                let s = d.map_entry(
                    wt,
                    &mut m.metadata,
                    buf,
                    entries,
                    &METADATA,
                    BODY_FIELDS - 1,
                );
                d.at(s, M, "metadata")
            }
            5 => d.uint32(wt, &mut m.timeout_ms, buf, M, "timeout_ms"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    fn command_response(
        &mut self,
        wt: WireType,
        m: &mut EdgeCommandResponse,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "EdgeCommandResponse";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => {
                let s = d.string(
                    wt,
                    &mut m.command_id,
                    buf,
                    "iop.EdgeCommandResponse.command_id",
                    Class::Id,
                );
                d.at(s, M, "command_id")
            }
            2 => d.boolean(wt, &mut m.accepted, buf, M, "accepted"),
            3 => d.int32(wt, &mut m.reject_reason, buf, M, "reject_reason"),
            4 => {
                let s = d.string(
                    wt,
                    &mut m.message,
                    buf,
                    "iop.EdgeCommandResponse.message",
                    Class::Text,
                );
                d.at(s, M, "message")
            }
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    fn command_event(
        &mut self,
        wt: WireType,
        m: &mut EdgeCommandEvent,
        buf: &mut &[u8],
        entries: &mut u32,
    ) -> Step {
        const M: &str = "EdgeCommandEvent";
        const DETAIL: MapNames = MapNames {
            map: "iop.EdgeCommandEvent.detail",
            key: "iop.EdgeCommandEvent.detail.key",
            value: "iop.EdgeCommandEvent.detail.value",
        };
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => {
                let s = d.string(
                    wt,
                    &mut m.command_id,
                    buf,
                    "iop.EdgeCommandEvent.command_id",
                    Class::Id,
                );
                d.at(s, M, "command_id")
            }
            2 => d.int32(wt, &mut m.phase, buf, M, "phase"),
            3 => d.uint32(wt, &mut m.sequence, buf, M, "sequence"),
            4 => {
                let s = d.string(
                    wt,
                    &mut m.message,
                    buf,
                    "iop.EdgeCommandEvent.message",
                    Class::Text,
                );
                d.at(s, M, "message")
            }
            5 => {
                let s = d.map_entry(wt, &mut m.detail, buf, entries, &DETAIL, BODY_FIELDS - 1);
                d.at(s, M, "detail")
            }
            6 => d.uint64(
                wt,
                &mut m.occurred_at_unix_ms,
                buf,
                M,
                "occurred_at_unix_ms",
            ),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    fn node_event(&mut self, wt: WireType, m: &mut EdgeNodeEvent, buf: &mut &[u8]) -> Step {
        const M: &str = "EdgeNodeEvent";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => {
                let s = d.string(
                    wt,
                    &mut m.edge_id,
                    buf,
                    "iop.EdgeNodeEvent.edge_id",
                    Class::Id,
                );
                d.at(s, M, "edge_id")
            }
            2 => {
                let s = d.string(
                    wt,
                    &mut m.node_id,
                    buf,
                    "iop.EdgeNodeEvent.node_id",
                    Class::Id,
                );
                d.at(s, M, "node_id")
            }
            3 => d.int32(wt, &mut m.kind, buf, M, "kind"),
            4 => d.uint64(wt, &mut m.generation, buf, M, "generation"),
            5 => d.uint64(wt, &mut m.sequence, buf, M, "sequence"),
            6 => d.uint64(
                wt,
                &mut m.occurred_at_unix_ms,
                buf,
                M,
                "occurred_at_unix_ms",
            ),
            7 => {
                let s = d.string(
                    wt,
                    &mut m.reason,
                    buf,
                    "iop.EdgeNodeEvent.reason",
                    Class::Text,
                );
                d.at(s, M, "reason")
            }
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    fn heartbeat(&mut self, wt: WireType, m: &mut Heartbeat, buf: &mut &[u8]) -> Step {
        const M: &str = "Heartbeat";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.uint64(wt, &mut m.sequence, buf, M, "sequence"),
            2 => d.uint64(wt, &mut m.sent_at_unix_ms, buf, M, "sent_at_unix_ms"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    fn heartbeat_ack(&mut self, wt: WireType, m: &mut HeartbeatAck, buf: &mut &[u8]) -> Step {
        const M: &str = "HeartbeatAck";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.uint64(wt, &mut m.sequence, buf, M, "sequence"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    fn go_away(&mut self, wt: WireType, m: &mut GoAway, buf: &mut &[u8]) -> Step {
        const M: &str = "GoAway";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.int32(wt, &mut m.reason, buf, M, "reason"),
            2 => {
                let s = d.string(wt, &mut m.message, buf, "iop.GoAway.message", Class::Text);
                d.at(s, M, "message")
            }
            3 => d.uint32(wt, &mut m.retry_after_ms, buf, M, "retry_after_ms"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }
}
