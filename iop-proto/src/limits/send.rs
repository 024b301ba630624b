//! Checks of what a side is about to send (PROTOCOL.md §4.6): the receiver's caps, applied
//! by the sender before it queues a message.
//!
//! One function per message a side builds: each checks every field the receiver caps
//! against the [table](super) and names the first one over its limit. The frame's
//! length against the peer's `max_frame_len` is checked when it is encoded
//! ([`frame`] says the same in these terms). A status response, which the Edge writes
//! as bytes and whose decoded size matters too, is checked on those bytes by
//! [`status_response_body`], the decoder's own walk.
//!
//! A message that passes its check and fits the peer's frame limit is accepted by a
//! receiver with the protocol's limits ([`DecodeLimits::SPEC`](super::DecodeLimits::SPEC));
//! property tests hold every check to that.
//!
//! ```
//! use iop_proto::EdgeCommandRequest;
//! use iop_proto::limits::{self, send};
//!
//! let mut request = EdgeCommandRequest { command_id: "c1".into(), operation: "edge.ping".into(), ..Default::default() };
//! request.metadata.insert("note".into(), "x".repeat(5_000));
//! let err = send::command_request(&request).unwrap_err();
//! assert_eq!(err.field, "iop.EdgeCommandRequest.metadata.value");
//! assert_eq!((err.size, err.limit), (5_000, limits::MAX_TEXT_LEN));
//! ```

use std::collections::BTreeMap;

use super::{
    DecodeLimits, LimitError, MAX_HELLO_INFLIGHT_IDS, MAX_HELLO_METADATA_ENTRIES,
    MAX_HELLO_METADATA_VALUE_LEN, MAX_HELLO_OPERATIONS, MAX_ID_LEN, MAX_MAP_ENTRIES, MAX_NODES,
    MAX_SOFTWARE_VERSION_LEN, MAX_TEXT_LEN,
};
use crate::{
    EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse, EdgeHelloRequest, EdgeNodeEvent,
    GoAway,
};

/// What [`ExceedsLimit::size`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizeUnit {
    /// Bytes of a string, a bytes field or a frame.
    Bytes,
    /// Elements of a repeated field or entries of a map.
    Entries,
}

impl std::fmt::Display for SizeUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SizeUnit::Bytes => "bytes",
            SizeUnit::Entries => "entries",
        })
    }
}

/// A field of a message about to be sent is over the receiver's limit (PROTOCOL.md §4.6):
/// nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} is {size} {unit}, over the limit of {limit}")]
#[non_exhaustive]
pub struct ExceedsLimit {
    /// The field, by its protobuf name (`iop.EdgeCommandRequest.metadata.value`), or
    /// `frame` for the whole encoded frame body.
    pub field: &'static str,
    /// Its size.
    pub size: usize,
    /// The limit it broke.
    pub limit: usize,
    /// What `size` and `limit` count.
    pub unit: SizeUnit,
}

impl ExceedsLimit {
    /// `field` is `size` bytes long, over `limit`.
    pub fn bytes(field: &'static str, size: usize, limit: usize) -> Self {
        Self {
            field,
            size,
            limit,
            unit: SizeUnit::Bytes,
        }
    }

    /// `field` has `size` entries, over `limit`.
    pub fn entries(field: &'static str, size: usize, limit: usize) -> Self {
        Self {
            field,
            size,
            limit,
            unit: SizeUnit::Entries,
        }
    }
}

fn len(field: &'static str, value: &str, limit: usize) -> Result<(), ExceedsLimit> {
    if value.len() > limit {
        return Err(ExceedsLimit::bytes(field, value.len(), limit));
    }
    Ok(())
}

fn count(field: &'static str, n: usize, limit: usize) -> Result<(), ExceedsLimit> {
    if n > limit {
        return Err(ExceedsLimit::entries(field, n, limit));
    }
    Ok(())
}

/// The three names of a map field: the map, its keys, its values.
type MapNames = (&'static str, &'static str, &'static str);

fn map(
    names: MapNames,
    map: &BTreeMap<String, String>,
    max_entries: usize,
    max_value: usize,
) -> Result<(), ExceedsLimit> {
    count(names.0, map.len(), max_entries)?;
    for (k, v) in map {
        len(names.1, k, MAX_ID_LEN)?;
        len(names.2, v, max_value)?;
    }
    Ok(())
}

/// A frame body of `len` bytes against the peer's `max_frame_len`.
pub fn frame(len: usize, max_frame_len: u32) -> Result<(), ExceedsLimit> {
    if len > max_frame_len as usize {
        return Err(ExceedsLimit::bytes("frame", len, max_frame_len as usize));
    }
    Ok(())
}

/// An Edge's hello (PROTOCOL.md §4.1, §7): the hello's own caps, stricter than the generic
/// ones, so that the largest legal hello fits the pre-hello frame limit. A Control
/// Plane refuses a hello that breaks one with `INVALID_HELLO`.
pub fn hello_request(hello: &EdgeHelloRequest) -> Result<(), ExceedsLimit> {
    len("iop.EdgeHelloRequest.edge_id", &hello.edge_id, MAX_ID_LEN)?;
    len(
        "iop.EdgeHelloRequest.software_version",
        &hello.software_version,
        MAX_SOFTWARE_VERSION_LEN,
    )?;
    count(
        "iop.EdgeHelloRequest.operations",
        hello.operations.len(),
        MAX_HELLO_OPERATIONS,
    )?;
    for op in &hello.operations {
        len("iop.EdgeHelloRequest.operations", op, MAX_ID_LEN)?;
    }
    map(
        (
            "iop.EdgeHelloRequest.metadata",
            "iop.EdgeHelloRequest.metadata.key",
            "iop.EdgeHelloRequest.metadata.value",
        ),
        &hello.metadata,
        MAX_HELLO_METADATA_ENTRIES,
        MAX_HELLO_METADATA_VALUE_LEN,
    )?;
    if hello.credential.len() > MAX_TEXT_LEN {
        return Err(ExceedsLimit::bytes(
            "iop.EdgeHelloRequest.credential",
            hello.credential.len(),
            MAX_TEXT_LEN,
        ));
    }
    count(
        "iop.EdgeHelloRequest.inflight_command_ids",
        hello.inflight_command_ids.len(),
        MAX_HELLO_INFLIGHT_IDS,
    )?;
    for id in &hello.inflight_command_ids {
        len("iop.EdgeHelloRequest.inflight_command_ids", id, MAX_ID_LEN)?;
    }
    Ok(())
}

/// A Control Plane's status request for `node_ids`, after `start_after_node_id`.
pub fn status_request<S: AsRef<str>>(
    node_ids: &[S],
    start_after_node_id: &str,
) -> Result<(), ExceedsLimit> {
    count("iop.EdgeStatusRequest.node_ids", node_ids.len(), MAX_NODES)?;
    for id in node_ids {
        len("iop.EdgeStatusRequest.node_ids", id.as_ref(), MAX_ID_LEN)?;
    }
    len(
        "iop.EdgeStatusRequest.start_after_node_id",
        start_after_node_id,
        MAX_ID_LEN,
    )
}

/// A Control Plane's command request.
pub fn command_request(request: &EdgeCommandRequest) -> Result<(), ExceedsLimit> {
    len(
        "iop.EdgeCommandRequest.command_id",
        &request.command_id,
        MAX_ID_LEN,
    )?;
    len(
        "iop.EdgeCommandRequest.operation",
        &request.operation,
        MAX_ID_LEN,
    )?;
    len(
        "iop.EdgeCommandRequest.target_selector",
        &request.target_selector,
        MAX_TEXT_LEN,
    )?;
    map(
        (
            "iop.EdgeCommandRequest.metadata",
            "iop.EdgeCommandRequest.metadata.key",
            "iop.EdgeCommandRequest.metadata.value",
        ),
        &request.metadata,
        MAX_MAP_ENTRIES,
        MAX_TEXT_LEN,
    )
}

/// An Edge's command response.
pub fn command_response(response: &EdgeCommandResponse) -> Result<(), ExceedsLimit> {
    len(
        "iop.EdgeCommandResponse.command_id",
        &response.command_id,
        MAX_ID_LEN,
    )?;
    len(
        "iop.EdgeCommandResponse.message",
        &response.message,
        MAX_TEXT_LEN,
    )
}

/// An Edge's command event.
pub fn command_event(event: &EdgeCommandEvent) -> Result<(), ExceedsLimit> {
    len(
        "iop.EdgeCommandEvent.command_id",
        &event.command_id,
        MAX_ID_LEN,
    )?;
    len("iop.EdgeCommandEvent.message", &event.message, MAX_TEXT_LEN)?;
    map(
        (
            "iop.EdgeCommandEvent.detail",
            "iop.EdgeCommandEvent.detail.key",
            "iop.EdgeCommandEvent.detail.value",
        ),
        &event.detail,
        MAX_MAP_ENTRIES,
        MAX_TEXT_LEN,
    )
}

/// An Edge's node event.
pub fn node_event(event: &EdgeNodeEvent) -> Result<(), ExceedsLimit> {
    len("iop.EdgeNodeEvent.edge_id", &event.edge_id, MAX_ID_LEN)?;
    len("iop.EdgeNodeEvent.node_id", &event.node_id, MAX_ID_LEN)?;
    len("iop.EdgeNodeEvent.reason", &event.reason, MAX_TEXT_LEN)
}

/// A `GoAway` from either side.
pub fn go_away(go_away: &GoAway) -> Result<(), ExceedsLimit> {
    len("iop.GoAway.message", &go_away.message, MAX_TEXT_LEN)
}

/// The bytes of an `EdgeStatusResponse` (the message's own fields, as an Edge's
/// registry writes them, without a key or length) against the protocol's limits, decoded
/// size included: the walk the receiver's decoder makes. `frame_len`, the body length
/// of the frame that will carry them, sets the decoded-size budget.
pub fn status_response_body(body: &[u8], frame_len: usize) -> Result<(), LimitError> {
    let estimated = status_response_heap(body)?;
    let budget = DecodeLimits::SPEC.decoded_budget(frame_len);
    if estimated > budget {
        return Err(LimitError::DecodedTooLarge { estimated, budget });
    }
    Ok(())
}

/// The heap a receiver with the protocol's limits allocates to decode the status response
/// `body` (as for [`status_response_body`]), with every cap but the decoded-size
/// budget checked: a sender over the budget learns by how much.
pub fn status_response_heap(body: &[u8]) -> Result<usize, LimitError> {
    let limits = DecodeLimits::SPEC;
    let mut scan = crate::scan::Scan::new(&limits, usize::MAX);
    scan.status_response(body)
}

/// Cuts `text` to at most `max` bytes, at a character boundary: for text a side
/// composes itself (an error message that quotes a peer's selector, say), so that it
/// never breaks the peer's limit.
pub fn truncate_text(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_check_names_the_first_field_over() {
        let mut request = EdgeCommandRequest {
            command_id: "c".into(),
            operation: "op".into(),
            ..Default::default()
        };
        assert_eq!(command_request(&request), Ok(()));
        request.target_selector = "s".repeat(MAX_TEXT_LEN + 1);
        let err = command_request(&request).unwrap_err();
        assert_eq!(err.field, "iop.EdgeCommandRequest.target_selector");
        assert_eq!(
            err.to_string(),
            "iop.EdgeCommandRequest.target_selector is 4097 bytes, over the limit of 4096"
        );
        request.target_selector.clear();
        request.metadata = (0..65).map(|i| (i.to_string(), String::new())).collect();
        let err = command_request(&request).unwrap_err();
        assert_eq!((err.size, err.limit, err.unit), (65, 64, SizeUnit::Entries));

        let ids: Vec<String> = (0..MAX_NODES + 1).map(|i| i.to_string()).collect();
        assert_eq!(status_request(&ids, "").unwrap_err().size, MAX_NODES + 1);
        assert_eq!(status_request(&ids[..MAX_NODES], ""), Ok(()));
        let long = "n".repeat(MAX_ID_LEN + 1);
        let refused = status_request(&ids[..1], &long).unwrap_err();
        assert_eq!(refused.field, "iop.EdgeStatusRequest.start_after_node_id");
        assert_eq!(status_request(&ids[..1], &long[1..]), Ok(()));
    }

    #[test]
    fn hello_caps_are_the_hellos_own() {
        let mut hello = EdgeHelloRequest {
            edge_id: "e".into(),
            ..Default::default()
        };
        hello.metadata = (0..17).map(|i| (i.to_string(), String::new())).collect();
        assert_eq!(hello_request(&hello).unwrap_err().limit, 16);
        hello.metadata = [("k".to_owned(), "v".repeat(257))].into();
        assert_eq!(
            hello_request(&hello).unwrap_err().field,
            "iop.EdgeHelloRequest.metadata.value"
        );
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        let mut s = "ééé".to_owned();
        truncate_text(&mut s, 3);
        assert_eq!(s, "é");
        let mut s = "abc".to_owned();
        truncate_text(&mut s, 5);
        assert_eq!(s, "abc");
    }
}
