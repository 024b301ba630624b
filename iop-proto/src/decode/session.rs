//! The other session bodies: node events, heartbeats and their acks, go away.

use prost::encoding::WireType;

use super::envelope::BODY_FIELDS;
use super::wire::Class;
use super::{Decoder, Step};
use crate::{EdgeNodeEvent, GoAway, Heartbeat, HeartbeatAck};

impl Decoder<'_> {
    pub(super) fn node_event(
        &mut self,
        wt: WireType,
        m: &mut EdgeNodeEvent,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "EdgeNodeEvent";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "EdgeNodeEvent", m.edge_id, Id),
            2 => string_field!(d, wt, buf, "EdgeNodeEvent", m.node_id, Id),
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
            7 => string_field!(d, wt, buf, "EdgeNodeEvent", m.reason, Text),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    pub(super) fn heartbeat(&mut self, wt: WireType, m: &mut Heartbeat, buf: &mut &[u8]) -> Step {
        const M: &str = "Heartbeat";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.uint64(wt, &mut m.sequence, buf, M, "sequence"),
            2 => d.uint64(wt, &mut m.sent_at_unix_ms, buf, M, "sent_at_unix_ms"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    pub(super) fn heartbeat_ack(
        &mut self,
        wt: WireType,
        m: &mut HeartbeatAck,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "HeartbeatAck";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.uint64(wt, &mut m.sequence, buf, M, "sequence"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    pub(super) fn go_away(&mut self, wt: WireType, m: &mut GoAway, buf: &mut &[u8]) -> Step {
        const M: &str = "GoAway";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.int32(wt, &mut m.reason, buf, M, "reason"),
            2 => string_field!(d, wt, buf, "GoAway", m.message, Text),
            3 => d.uint32(wt, &mut m.retry_after_ms, buf, M, "retry_after_ms"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }
}
