//! The load update (PROTOCOL.md §4.8): at most 1 024 providers' numbers.

use std::mem::size_of;

use prost::encoding::WireType;

use super::envelope::BODY_FIELDS;
use super::wire::Class;
use super::{Decoder, Step};
use crate::{EdgeLoadUpdate, ProviderLoad};

/// prost's recursion budget left for the fields of a provider's load.
const PROVIDER_FIELDS: u32 = BODY_FIELDS - 1;

impl Decoder<'_> {
    pub(super) fn load_update(
        &mut self,
        wt: WireType,
        m: &mut EdgeLoadUpdate,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "EdgeLoadUpdate";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => d.uint64(wt, &mut m.sequence, buf, M, "sequence"),
            2 => d.uint64(
                wt,
                &mut m.observed_at_unix_ms,
                buf,
                M,
                "observed_at_unix_ms",
            ),
            3 => {
                let s = d.provider_load(wt, &mut m.providers, buf);
                d.at(s, M, "providers")
            }
            4 => d.boolean(wt, &mut m.resync, buf, M, "resync"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    /// One more provider's load, pushed first and decoded in place.
    fn provider_load(
        &mut self,
        wt: WireType,
        providers: &mut Vec<ProviderLoad>,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "ProviderLoad";
        if wt != WireType::LengthDelimited {
            return Err(self.wire_type_error(wt));
        }
        let limit = self.limits.max_load_providers;
        self.admit(
            providers.len(),
            limit,
            "iop.EdgeLoadUpdate.providers",
            size_of::<ProviderLoad>(),
        )?;
        providers.push(ProviderLoad::default());
        let Some(m) = providers.last_mut() else {
            return Ok(());
        };
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "ProviderLoad", m.node_id, Id),
            2 => string_field!(d, wt, buf, "ProviderLoad", m.provider_id, Id),
            3 => d.int32(wt, &mut m.status, buf, M, "status"),
            4 => d.int32(wt, &mut m.health, buf, M, "health"),
            5 => d.uint32(wt, &mut m.capacity, buf, M, "capacity"),
            6 => d.uint32(wt, &mut m.in_flight, buf, M, "in_flight"),
            7 => d.uint32(wt, &mut m.queued, buf, M, "queued"),
            8 => d.uint32(
                wt,
                &mut m.long_context_capacity,
                buf,
                M,
                "long_context_capacity",
            ),
            9 => d.uint32(
                wt,
                &mut m.long_context_in_flight,
                buf,
                M,
                "long_context_in_flight",
            ),
            10 => d.uint32(
                wt,
                &mut m.long_context_queued,
                buf,
                M,
                "long_context_queued",
            ),
            11 => d.boolean(wt, &mut m.admission_eligible, buf, M, "admission_eligible"),
            12 => d.boolean(wt, &mut m.node_connected, buf, M, "node_connected"),
            _ => d.skip(wt, tag, buf, PROVIDER_FIELDS),
        })
    }
}
