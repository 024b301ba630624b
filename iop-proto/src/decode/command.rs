//! The command request, response and events (PROTOCOL.md §6).

use prost::encoding::WireType;

use super::envelope::{BODY_FIELDS, MapNames};
use super::wire::Class;
use super::{Decoder, Step};
use crate::{EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse};

impl Decoder<'_> {
    pub(super) fn command_request(
        &mut self,
        wt: WireType,
        m: &mut EdgeCommandRequest,
        buf: &mut &[u8],
        entries: &mut u32,
    ) -> Step {
        const M: &str = "EdgeCommandRequest";
        const METADATA: MapNames = map_names!("EdgeCommandRequest", "metadata");
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "EdgeCommandRequest", m.command_id, Id),
            2 => string_field!(d, wt, buf, "EdgeCommandRequest", m.operation, Id),
            3 => string_field!(d, wt, buf, "EdgeCommandRequest", m.target_selector, Text),
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

    pub(super) fn command_response(
        &mut self,
        wt: WireType,
        m: &mut EdgeCommandResponse,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "EdgeCommandResponse";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "EdgeCommandResponse", m.command_id, Id),
            2 => d.boolean(wt, &mut m.accepted, buf, M, "accepted"),
            3 => d.int32(wt, &mut m.reject_reason, buf, M, "reject_reason"),
            4 => string_field!(d, wt, buf, "EdgeCommandResponse", m.message, Text),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    pub(super) fn command_event(
        &mut self,
        wt: WireType,
        m: &mut EdgeCommandEvent,
        buf: &mut &[u8],
        entries: &mut u32,
    ) -> Step {
        const M: &str = "EdgeCommandEvent";
        const DETAIL: MapNames = map_names!("EdgeCommandEvent", "detail");
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "EdgeCommandEvent", m.command_id, Id),
            2 => d.int32(wt, &mut m.phase, buf, M, "phase"),
            3 => d.uint32(wt, &mut m.sequence, buf, M, "sequence"),
            4 => string_field!(d, wt, buf, "EdgeCommandEvent", m.message, Text),
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
}
