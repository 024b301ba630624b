//! The hello request and response (PROTOCOL.md §4.1).

use prost::encoding::WireType;

use super::envelope::{BODY_FIELDS, MapNames};
use super::wire::Class;
use super::{Decoder, Step};
use crate::{EdgeHelloRequest, EdgeHelloResponse};

impl Decoder<'_> {
    pub(super) fn hello_request(
        &mut self,
        wt: WireType,
        m: &mut EdgeHelloRequest,
        buf: &mut &[u8],
        entries: &mut u32,
    ) -> Step {
        const M: &str = "EdgeHelloRequest";
        const METADATA: MapNames = map_names!("EdgeHelloRequest", "metadata");
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "EdgeHelloRequest", m.edge_id, Id),
            2 => d.uint32(wt, &mut m.protocol_version, buf, M, "protocol_version"),
            3 => string_field!(d, wt, buf, "EdgeHelloRequest", m.software_version, Text),
            4 => repeated_string_field!(
                d,
                wt,
                buf,
                "EdgeHelloRequest",
                m.operations,
                Id,
                max_operations
            ),
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
            7 => repeated_string_field!(
                d,
                wt,
                buf,
                "EdgeHelloRequest",
                m.inflight_command_ids,
                Id,
                max_inflight_command_ids
            ),
            8 => d.boolean(wt, &mut m.load_updates, buf, M, "load_updates"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    pub(super) fn hello_response(
        &mut self,
        wt: WireType,
        m: &mut EdgeHelloResponse,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "EdgeHelloResponse";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.boolean(wt, &mut m.accepted, buf, M, "accepted"),
            2 => d.int32(wt, &mut m.reject_reason, buf, M, "reject_reason"),
            3 => string_field!(d, wt, buf, "EdgeHelloResponse", m.message, Text),
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
            11 => d.uint32(
                wt,
                &mut m.load_update_interval_ms,
                buf,
                M,
                "load_update_interval_ms",
            ),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }
}
