//! The envelope, its body oneof, and map entries.

use std::collections::BTreeMap;

use prost::encoding::WireType;

use super::wire::{Class, ENVELOPE_FIELDS};
use super::{Decoder, Step};
use crate::{Body, Envelope};

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
                15 => variant!(env, LoadUpdate, entries, |m| self.load_update(wt, m, buf)),
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
}
