//! The zero-allocation, schema-aware walk of an `iop.Envelope`'s wire bytes behind
//! [`check_envelope`](crate::limits::check_envelope).
//!
//! The schema is not recursive, so the walk recurses at most five levels (envelope,
//! body, node, provider or config, map entry); unknown groups are skipped with a
//! counter, not recursion.
//!
//! The walk reads the bytes exactly as prost does, so that it never stops where prost
//! goes on. In particular a length-delimited field is bounded by the end of the whole
//! body, not by the end of the message that holds it: prost decodes a field that runs
//! past its parent's end (allocating for it) and only then reports the parent's
//! length as exceeded. A walk that cut sub-messages to their parent's bytes would
//! stop there and let a hostile frame hide, say, a million providers from the caps
//! (found by the `envelope_roundtrip` fuzz target).

use std::mem::size_of;

use crate::limits::heap::{map_growth, string_bytes, vec_growth};
use crate::limits::{DecodeLimits, LimitError};
use crate::{EdgeNodeSnapshot, ProviderLoad, ProviderSnapshot};

/// Field numbers 1..=15 index the per-message counters.
const MAX_FIELD: usize = 16;
/// Heap bytes of the `DecodeError` prost returns for malformed bytes: its boxed
/// inner part (about 72 bytes) and its stack of (message, field) names, 32 bytes per
/// level of nesting in a `Vec` growing from 4 slots. The schema nests at most 4
/// levels (envelope, body, node, provider or config); 512 bytes cover 8. It is added
/// to every estimate, so that the estimate also bounds what prost allocates to reject
/// a frame the walk could not tell was malformed (found by the `envelope_roundtrip`
/// fuzz target: a truncated body cost 200 bytes, estimated 0). It is not charged to
/// the budget: a tiny frame under a tiny budget stays acceptable.
const DECODE_ERROR_BYTES: usize = 512;

/// Per-message element counters, indexed by field number.
type Counts = [u32; MAX_FIELD];

/// Why the walk stopped early.
enum Stop {
    Limit(LimitError),
    /// The bytes are not valid protobuf; prost will say why.
    Malformed,
}

impl From<LimitError> for Stop {
    fn from(err: LimitError) -> Self {
        Stop::Limit(err)
    }
}

#[derive(Clone, Copy)]
enum Msg {
    Envelope,
    HelloRequest,
    HelloResponse,
    StatusRequest,
    StatusResponse,
    NodeSnapshot,
    ConfigSummary,
    Provider,
    CommandRequest,
    CommandResponse,
    CommandEvent,
    NodeEvent,
    GoAway,
    LoadUpdate,
    ProviderLoad,
    /// A message with scalar fields only (heartbeat, heartbeat ack).
    Scalars,
}

#[derive(Clone, Copy)]
enum Class {
    Id,
    Text,
}

#[derive(Clone, Copy)]
enum Cap {
    Nodes,
    Providers,
    Operations,
    InflightCommandIds,
    NodeIds,
    ProviderIds,
    Models,
    LoadProviders,
}

/// What the walk needs to know about a length-delimited field. Scalar fields are
/// absent from the table: they are skipped like unknown fields.
#[derive(Clone, Copy)]
enum Field {
    Str(&'static str, Class),
    /// A `bytes` field: prost copies it through a temporary `Bytes`, so it costs
    /// twice its length while decoding.
    Bytes(&'static str),
    RepStr(&'static str, Class, Cap),
    Msg(Msg),
    RepMsg(&'static str, Msg, Cap, usize),
    Map(&'static str, &'static str, &'static str),
}

fn field(msg: Msg, number: u64) -> Option<Field> {
    use Class::{Id, Text};
    use Field::{Map, Msg as M, RepMsg, RepStr, Str};
    Some(match (msg, number) {
        (Msg::Envelope, 2) => M(Msg::HelloRequest),
        (Msg::Envelope, 3) => M(Msg::HelloResponse),
        (Msg::Envelope, 4) => M(Msg::StatusRequest),
        (Msg::Envelope, 5) => M(Msg::StatusResponse),
        (Msg::Envelope, 6) => M(Msg::CommandRequest),
        (Msg::Envelope, 7) => M(Msg::CommandResponse),
        (Msg::Envelope, 8) => M(Msg::CommandEvent),
        (Msg::Envelope, 9) => M(Msg::NodeEvent),
        (Msg::Envelope, 12 | 13) => M(Msg::Scalars),
        (Msg::Envelope, 14) => M(Msg::GoAway),
        (Msg::Envelope, 15) => M(Msg::LoadUpdate),
        (Msg::HelloRequest, 1) => Str("iop.EdgeHelloRequest.edge_id", Id),
        (Msg::HelloRequest, 3) => Str("iop.EdgeHelloRequest.software_version", Text),
        (Msg::HelloRequest, 4) => RepStr("iop.EdgeHelloRequest.operations", Id, Cap::Operations),
        (Msg::HelloRequest, 5) => Map(
            "iop.EdgeHelloRequest.metadata",
            "iop.EdgeHelloRequest.metadata.key",
            "iop.EdgeHelloRequest.metadata.value",
        ),
        (Msg::HelloRequest, 6) => Field::Bytes("iop.EdgeHelloRequest.credential"),
        (Msg::HelloRequest, 7) => RepStr(
            "iop.EdgeHelloRequest.inflight_command_ids",
            Id,
            Cap::InflightCommandIds,
        ),
        (Msg::HelloResponse, 3) => Str("iop.EdgeHelloResponse.message", Text),
        (Msg::StatusRequest, 1) => RepStr("iop.EdgeStatusRequest.node_ids", Id, Cap::NodeIds),
        (Msg::StatusRequest, 2) => Str("iop.EdgeStatusRequest.start_after_node_id", Id),
        (Msg::StatusResponse, 1) => Str("iop.EdgeStatusResponse.edge_id", Id),
        (Msg::StatusResponse, 2) => RepMsg(
            "iop.EdgeStatusResponse.nodes",
            Msg::NodeSnapshot,
            Cap::Nodes,
            size_of::<EdgeNodeSnapshot>(),
        ),
        (Msg::NodeSnapshot, 1) => Str("iop.EdgeNodeSnapshot.node_id", Id),
        (Msg::NodeSnapshot, 3) => M(Msg::ConfigSummary),
        (Msg::NodeSnapshot, 4) => RepMsg(
            "iop.EdgeNodeSnapshot.provider_snapshots",
            Msg::Provider,
            Cap::Providers,
            size_of::<ProviderSnapshot>(),
        ),
        (Msg::NodeSnapshot, 8) => Map(
            "iop.EdgeNodeSnapshot.labels",
            "iop.EdgeNodeSnapshot.labels.key",
            "iop.EdgeNodeSnapshot.labels.value",
        ),
        (Msg::ConfigSummary, 1) => Str("iop.NodeConfigSummary.revision", Text),
        (Msg::ConfigSummary, 2) => {
            RepStr("iop.NodeConfigSummary.provider_ids", Id, Cap::ProviderIds)
        }
        (Msg::ConfigSummary, 3) => RepStr("iop.NodeConfigSummary.models", Text, Cap::Models),
        (Msg::Provider, 1) => Str("iop.ProviderSnapshot.provider_id", Id),
        (Msg::Provider, 11) => RepStr("iop.ProviderSnapshot.models", Text, Cap::Models),
        (Msg::CommandRequest, 1) => Str("iop.EdgeCommandRequest.command_id", Id),
        (Msg::CommandRequest, 2) => Str("iop.EdgeCommandRequest.operation", Id),
        (Msg::CommandRequest, 3) => Str("iop.EdgeCommandRequest.target_selector", Text),
        (Msg::CommandRequest, 4) => Map(
            "iop.EdgeCommandRequest.metadata",
            "iop.EdgeCommandRequest.metadata.key",
            "iop.EdgeCommandRequest.metadata.value",
        ),
        (Msg::CommandResponse, 1) => Str("iop.EdgeCommandResponse.command_id", Id),
        (Msg::CommandResponse, 4) => Str("iop.EdgeCommandResponse.message", Text),
        (Msg::CommandEvent, 1) => Str("iop.EdgeCommandEvent.command_id", Id),
        (Msg::CommandEvent, 4) => Str("iop.EdgeCommandEvent.message", Text),
        (Msg::CommandEvent, 5) => Map(
            "iop.EdgeCommandEvent.detail",
            "iop.EdgeCommandEvent.detail.key",
            "iop.EdgeCommandEvent.detail.value",
        ),
        (Msg::NodeEvent, 1) => Str("iop.EdgeNodeEvent.edge_id", Id),
        (Msg::NodeEvent, 2) => Str("iop.EdgeNodeEvent.node_id", Id),
        (Msg::NodeEvent, 7) => Str("iop.EdgeNodeEvent.reason", Text),
        (Msg::GoAway, 2) => Str("iop.GoAway.message", Text),
        (Msg::LoadUpdate, 3) => RepMsg(
            "iop.EdgeLoadUpdate.providers",
            Msg::ProviderLoad,
            Cap::LoadProviders,
            size_of::<ProviderLoad>(),
        ),
        (Msg::ProviderLoad, 1) => Str("iop.ProviderLoad.node_id", Id),
        (Msg::ProviderLoad, 2) => Str("iop.ProviderLoad.provider_id", Id),
        _ => return None,
    })
}

/// Every message the walk knows, for [`field_caps`].
const MESSAGES: [Msg; 16] = [
    Msg::Envelope,
    Msg::HelloRequest,
    Msg::HelloResponse,
    Msg::StatusRequest,
    Msg::StatusResponse,
    Msg::NodeSnapshot,
    Msg::ConfigSummary,
    Msg::Provider,
    Msg::CommandRequest,
    Msg::CommandResponse,
    Msg::CommandEvent,
    Msg::NodeEvent,
    Msg::GoAway,
    Msg::LoadUpdate,
    Msg::ProviderLoad,
    Msg::Scalars,
];

/// Every field the walk bounds, with its caps under `limits`, in schema order: the
/// table the walk itself reads, written out.
pub(crate) fn field_caps(limits: &DecodeLimits) -> Vec<crate::limits::FieldCap> {
    use crate::limits::FieldCap;
    let scan = Scan::new(limits, 0);
    let mut caps = Vec::new();
    for msg in MESSAGES {
        for number in 1..MAX_FIELD as u64 {
            let Some(f) = field(msg, number) else {
                continue;
            };
            let cap = |field, max_items, max_bytes| FieldCap {
                field,
                max_items,
                max_bytes,
            };
            match f {
                Field::Msg(_) => {}
                Field::Str(name, class) => caps.push(cap(name, None, Some(scan.max_len(class)))),
                Field::Bytes(name) => caps.push(cap(name, None, Some(scan.max_len(Class::Text)))),
                Field::RepStr(name, class, c) => {
                    caps.push(cap(name, Some(scan.cap(c)), Some(scan.max_len(class))));
                }
                Field::RepMsg(name, _, c, _) => caps.push(cap(name, Some(scan.cap(c)), None)),
                Field::Map(name, key, value) => {
                    caps.push(cap(name, Some(limits.max_map_entries), None));
                    caps.push(cap(key, None, Some(scan.max_len(Class::Id))));
                    caps.push(cap(value, None, Some(scan.max_len(Class::Text))));
                }
            }
        }
    }
    caps
}

/// One pass over a frame: the limits, the budget, and the running estimate.
pub(crate) struct Scan<'l> {
    limits: &'l DecodeLimits,
    budget: usize,
    estimated: usize,
}

impl<'l> Scan<'l> {
    pub(crate) fn new(limits: &'l DecodeLimits, budget: usize) -> Self {
        Self {
            limits,
            budget,
            estimated: 0,
        }
    }

    /// Walks an envelope. Malformed bytes end the walk with `Ok`: prost rejects them.
    /// Returns the estimated heap bytes, [`DECODE_ERROR_BYTES`] included.
    pub(crate) fn envelope(&mut self, body: &[u8]) -> Result<usize, LimitError> {
        let mut counts = [0; MAX_FIELD];
        let mut buf = body;
        match self.message(Msg::Envelope, &mut buf, body.len(), &mut counts) {
            Ok(()) | Err(Stop::Malformed) => Ok(self.estimated.saturating_add(DECODE_ERROR_BYTES)),
            Err(Stop::Limit(err)) => Err(err),
        }
    }

    /// Walks the bytes of an `EdgeStatusResponse` alone (no envelope around it), as
    /// [`envelope`](Self::envelope) walks an envelope's.
    pub(crate) fn status_response(&mut self, body: &[u8]) -> Result<usize, LimitError> {
        let mut counts = [0; MAX_FIELD];
        let mut buf = body;
        match self.message(Msg::StatusResponse, &mut buf, body.len(), &mut counts) {
            Ok(()) | Err(Stop::Malformed) => Ok(self.estimated.saturating_add(DECODE_ERROR_BYTES)),
            Err(Stop::Limit(err)) => Err(err),
        }
    }

    fn charge(&mut self, bytes: usize) -> Result<(), Stop> {
        self.estimated = self.estimated.saturating_add(bytes);
        if self.estimated > self.budget {
            return Err(LimitError::DecodedTooLarge {
                estimated: self.estimated,
                budget: self.budget,
            }
            .into());
        }
        Ok(())
    }

    fn cap(&self, cap: Cap) -> u32 {
        let l = self.limits;
        match cap {
            Cap::Nodes => l.max_nodes,
            Cap::Providers => l.max_providers_per_node,
            Cap::Operations => l.max_operations,
            Cap::InflightCommandIds => l.max_inflight_command_ids,
            Cap::NodeIds => l.max_node_ids,
            Cap::ProviderIds => l.max_provider_ids,
            Cap::Models => l.max_models,
            Cap::LoadProviders => l.max_load_providers,
        }
    }

    fn max_len(&self, class: Class) -> u32 {
        match class {
            Class::Id => self.limits.max_id_len,
            Class::Text => self.limits.max_text_len,
        }
    }

    /// Counts one more element of a repeated field (cap checked), charging the
    /// growth of its `Vec`, or of its map when `elem` is `None`.
    fn push(
        &mut self,
        count: &mut u32,
        limit: u32,
        field: &'static str,
        elem: Option<usize>,
    ) -> Result<(), Stop> {
        if *count >= limit {
            return Err(LimitError::TooManyElements { field, limit }.into());
        }
        let before = *count as usize;
        *count += 1;
        let growth = match elem {
            Some(size) => vec_growth(before, size),
            None => map_growth(before),
        };
        self.charge(growth)
    }

    fn string(&mut self, field: &'static str, class: Class, len: usize) -> Result<(), Stop> {
        let limit = self.max_len(class);
        if len > limit as usize {
            return Err(LimitError::StringTooLong { field, len, limit }.into());
        }
        self.charge(string_bytes(len))
    }

    /// Walks one message of `len` bytes at the front of `buf` (the rest of the whole
    /// body), advancing `buf` past it. Like prost, a field is read whole even when it
    /// runs past the message's end, which is then malformed. `counts` belongs to
    /// this message instance (prost merges repeated occurrences of a singular
    /// sub-message, so their counts add up).
    fn message(
        &mut self,
        msg: Msg,
        buf: &mut &[u8],
        len: usize,
        counts: &mut Counts,
    ) -> Result<(), Stop> {
        let limit = buf.len().checked_sub(len).ok_or(Stop::Malformed)?;
        // Counters of the singular sub-message being merged into, with its field
        // number. One is enough: the envelope's singular sub-messages are the `body`
        // oneof, where prost starts a fresh value whenever another variant arrives
        // (so its counts restart), and every other message has at most one singular
        // sub-message field (checked by a test below). A per-field table here would
        // zero 900 bytes for every message walked, nodes and providers included.
        let mut child: (usize, Counts) = (0, [0; MAX_FIELD]);
        while buf.len() > limit {
            let key = varint(buf)?;
            let number = key >> 3;
            let wire_type = key & 7;
            // Scalars (most fields of a provider or node) are skipped in place: this
            // walk runs over every byte of every frame.
            if wire_type == 0 {
                varint(buf)?;
                continue;
            }
            let known = if wire_type == 2 {
                field(msg, number)
            } else {
                None
            };
            let Some(known) = known else {
                self.skip(wire_type, buf)?;
                continue;
            };
            let slot = usize::try_from(number).map_err(|_| Stop::Malformed)?;
            let count = counts.get_mut(slot).ok_or(Stop::Malformed)?;
            match known {
                Field::Str(name, class) => {
                    self.string(name, class, length_delimited(buf)?.len())?;
                }
                Field::Bytes(name) => {
                    let len = length_delimited(buf)?.len();
                    self.string(name, Class::Text, len)?;
                    self.charge(len)?;
                }
                Field::RepStr(name, class, cap) => {
                    self.push(count, self.cap(cap), name, Some(size_of::<String>()))?;
                    self.string(name, class, length_delimited(buf)?.len())?;
                }
                Field::Msg(sub) => {
                    if child.0 != slot {
                        child = (slot, [0; MAX_FIELD]);
                    }
                    let len = length(buf)?;
                    self.message(sub, buf, len, &mut child.1)?;
                }
                Field::RepMsg(name, child, cap, size) => {
                    self.push(count, self.cap(cap), name, Some(size))?;
                    let len = length(buf)?;
                    self.message(child, buf, len, &mut [0; MAX_FIELD])?;
                }
                Field::Map(name, key_name, value_name) => {
                    self.push(count, self.limits.max_map_entries, name, None)?;
                    let len = length(buf)?;
                    self.map_entry(buf, len, key_name, value_name)?;
                }
            }
        }
        if buf.len() == limit {
            Ok(())
        } else {
            Err(Stop::Malformed)
        }
    }

    /// Walks one map entry of `len` bytes at the front of `buf`, as
    /// [`message`](Self::message) walks a message.
    fn map_entry(
        &mut self,
        buf: &mut &[u8],
        len: usize,
        key_name: &'static str,
        value_name: &'static str,
    ) -> Result<(), Stop> {
        let limit = buf.len().checked_sub(len).ok_or(Stop::Malformed)?;
        while buf.len() > limit {
            let key = varint(buf)?;
            match key {
                // Field 1 (key) and 2 (value), length-delimited.
                0x0a => {
                    let bytes = length_delimited(buf)?;
                    self.string(key_name, Class::Id, bytes.len())?;
                }
                0x12 => {
                    let bytes = length_delimited(buf)?;
                    self.string(value_name, Class::Text, bytes.len())?;
                }
                _ => self.skip(key & 7, buf)?,
            }
        }
        if buf.len() == limit {
            Ok(())
        } else {
            Err(Stop::Malformed)
        }
    }

    /// Skips one field's value (its key already read). Groups are walked with a
    /// depth counter, never recursion.
    fn skip(&self, wire_type: u64, buf: &mut &[u8]) -> Result<(), Stop> {
        match wire_type {
            3 => {}
            _ => return skip_flat(wire_type, buf),
        }
        let mut depth: u32 = 1;
        if depth > self.limits.max_unknown_depth {
            return Err(LimitError::TooDeep {
                limit: self.limits.max_unknown_depth,
            }
            .into());
        }
        while depth > 0 {
            let key = varint(buf)?;
            match key & 7 {
                3 => {
                    depth += 1;
                    if depth > self.limits.max_unknown_depth {
                        return Err(LimitError::TooDeep {
                            limit: self.limits.max_unknown_depth,
                        }
                        .into());
                    }
                }
                4 => depth -= 1,
                other => skip_flat(other, buf)?,
            }
        }
        Ok(())
    }
}

/// Skips a value that is not a group.
fn skip_flat(wire_type: u64, buf: &mut &[u8]) -> Result<(), Stop> {
    let len = match wire_type {
        0 => {
            varint(buf)?;
            return Ok(());
        }
        1 => 8,
        2 => {
            length_delimited(buf)?;
            return Ok(());
        }
        5 => 4,
        _ => return Err(Stop::Malformed),
    };
    *buf = buf.get(len..).ok_or(Stop::Malformed)?;
    Ok(())
}

/// Reads a length prefix, which may not exceed the bytes left in the whole body.
fn length(buf: &mut &[u8]) -> Result<usize, Stop> {
    let len = usize::try_from(varint(buf)?).map_err(|_| Stop::Malformed)?;
    if len > buf.len() {
        return Err(Stop::Malformed);
    }
    Ok(len)
}

/// Reads a length prefix and returns that many bytes.
fn length_delimited<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], Stop> {
    let len = length(buf)?;
    let (bytes, rest) = buf.split_at(len);
    *buf = rest;
    Ok(bytes)
}

/// Reads a base-128 varint of at most 10 bytes.
fn varint(buf: &mut &[u8]) -> Result<u64, Stop> {
    let mut value: u64 = 0;
    for (i, byte) in buf.iter().copied().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *buf = buf.get(i + 1..).ok_or(Stop::Malformed)?;
            return Ok(value);
        }
    }
    Err(Stop::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::heap::vec_bytes;

    const ALL: [Msg; 16] = MESSAGES;

    /// `vec_growth` is the difference of `vec_bytes` it stands for.
    #[test]
    fn vec_growth_is_the_difference() {
        for elem in [1, 24, 168, 200] {
            for len in 0..5000 {
                assert_eq!(
                    vec_growth(len, elem),
                    vec_bytes(len + 1, elem) - vec_bytes(len, elem),
                    "{len} × {elem}"
                );
            }
        }
        assert_eq!(vec_growth(1 << 62, 8), usize::MAX);
    }

    /// `Scan::message` keeps the counts of one singular sub-message at a time: exact
    /// only while no message but the envelope (a oneof) has two such fields.
    #[test]
    fn one_singular_sub_message_per_message() {
        for msg in ALL {
            let singular = (0..=MAX_FIELD as u64 + 1)
                .filter(|n| matches!(field(msg, *n), Some(Field::Msg(_))))
                .count();
            if matches!(msg, Msg::Envelope) {
                assert_eq!(singular, 12, "the body oneof");
            } else {
                assert!(
                    singular <= 1,
                    "a second singular sub-message field needs its own counts"
                );
            }
        }
    }
}
