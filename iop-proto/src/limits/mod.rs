//! The limits of the wire (PROTOCOL.md §7): one table, read by every decoder **and** every
//! encoder of both sides.
//!
//! A side checks what it receives against these caps ([`DecodeLimits`], built from this
//! table) and checks what it is about to send against the same caps before it queues
//! it ([`send`], PROTOCOL.md §4.6). A frame the peer must refuse ends the session, and a frame
//! that is re-sent on every new session — a command, a replayed event, the hello —
//! would end every session; so nothing the receiver's limits refuse is ever queued.
//!
//! Every row of PROTOCOL.md §7 is a constant here; the config structs of `iop-core` take
//! their defaults from them. [`TABLE`] lists them all, for documentation and for the
//! test that keeps `PROTOCOL.md` equal to the code.
//!
//! | constant | value | what |
//! |---|---:|---|
//! | [`DEFAULT_MAX_FRAME_LEN`] | 4 MiB | frame body limit after the hello (each side's default receive limit) |
//! | [`PRE_HELLO_MAX_FRAME_LEN`] | 256 KiB | frame body limit before the hello is accepted |
//! | [`MIN_MAX_FRAME_LEN`] | 64 KiB | lowest `max_frame_len` a Control Plane may announce |
//! | [`MAX_PENDING_HELLOS`] | 1 024 | connections a CP holds that have not been accepted yet |
//! | [`MAX_ID_LEN`] | 128 B | ids (`edge_id`, `node_id`, `provider_id`, `command_id`, operations) and every map key |
//! | [`MAX_TEXT_LEN`] | 4 KiB | messages, reasons, selectors, map values, the credential |
//! | [`MAX_LABEL_LEN`] | 63 B | label keys and values (grammar of PROTOCOL.md §3) |
//! | [`MAX_MAP_ENTRIES`] | 64 | entries of `metadata`, `labels`, `detail` |
//! | [`MAX_NODES`] | 10 000 | nodes per status response, node ids per status request |
//! | [`MAX_PROVIDERS_PER_NODE`] | 256 | providers of one node, provider ids of one config summary |
//! | [`MAX_MODELS`] | 256 | models of one provider or config summary |
//! | [`MAX_HELLO_OPERATIONS`] | 256 | operations one hello advertises |
//! | [`MAX_HELLO_METADATA_ENTRIES`] | 16 | hello metadata entries (`iop.instance_id` included) |
//! | [`MAX_HELLO_METADATA_VALUE_LEN`] | 256 B | one hello metadata value |
//! | [`MAX_SOFTWARE_VERSION_LEN`] | 128 B | the hello's `software_version` |
//! | [`MAX_INFLIGHT_COMMANDS`] | 256 | unfinished commands per Edge (carried-over included) |
//! | [`MAX_RETAINED_COMMANDS`] | 1 024 | finished command ids an Edge remembers |
//! | [`MAX_HELLO_INFLIGHT_IDS`] | 1 280 | ids in `inflight_command_ids` (the two above) |
//! | [`MAX_UNDELIVERED_SESSIONS`] | 3 | sessions a command's request may end unanswered before it is FAILED "undeliverable" |
//! | [`MAX_DISCONNECTED_VIEWS`] | 100 000 | Edge views a CP keeps while they are disconnected |
//! | [`MAX_LOAD_UPDATE_PROVIDERS`] | 1 024 | providers per load update (PROTOCOL.md §4.8) |
//! | [`LOAD_UPDATE_BURST`] | 4 | load updates a CP allows at once, one more per interval |
//! | [`MAX_AMPLIFICATION`] / [`AMPLIFICATION_FLOOR`] | 8 / 8 MiB | decoded heap per wire byte, and the budget any frame may use |
//!
//! Timeouts and intervals are here too ([`DEFAULT_HELLO_TIMEOUT`] and the rest).
//!
//! # Why the largest hello fits
//!
//! The hello is the one frame sent before the Control Plane has said what it accepts,
//! and it must list every command the Edge holds (PROTOCOL.md §4.4). Its field caps make the
//! largest legal hello [`MAX_HELLO_LEN`] bytes, below [`PRE_HELLO_MAX_FRAME_LEN`]:
//! a test builds it and checks both numbers.
//!
//! # Decoding: what is capped
//!
//! Decode caps are checked on the bytes of a frame before each allocation decoding it
//! would make, so that no frame can make the receiver allocate much more than it sent.
//!
//! Protobuf is compact where Rust structs are not: an empty `EdgeNodeSnapshot` costs
//! 2 bytes on the wire and 168 bytes in a `Vec` (twice that while the `Vec` grows). A
//! hostile 4 MiB frame of empty sub-messages would make prost allocate hundreds of
//! MB. [`check_envelope`] walks the protobuf wire format of an `iop.Envelope` once,
//! schema-aware and without allocating, and refuses a frame that breaks a cap. It is
//! the reference: [`FrameDecoder`](crate::FrameDecoder) and
//! [`decode_envelope`](crate::decode_envelope) do not run it on every frame but decode
//! in a single pass that makes the same checks, in the same order, each before the
//! allocation it guards, and so reach the same verdict (a differential test and a fuzz
//! target hold them equal). The caps:
//!
//! - element counts per repeated field and entries per map, per message (a singular
//!   sub-message that occurs several times is merged by prost, so its counts add up);
//! - the length of every string and bytes field, by class: *ids* (`edge_id`,
//!   `node_id`, `provider_id`, `command_id`, operation names, the elements of
//!   `node_ids`, `provider_ids`, `inflight_command_ids`, and map keys) are capped at
//!   [`DecodeLimits::max_id_len`]; every other text (messages, reasons, selectors,
//!   versions, model names, map values) at [`DecodeLimits::max_text_len`];
//! - nesting depth of unknown groups (unknown length-delimited fields are skipped
//!   whole and never parsed);
//! - the estimated heap size of the decoded message, computed from the exact
//!   allocation pattern of prost's decoders (`Vec` doubling from 4, strings of at
//!   least 8 bytes, `BTreeMap` nodes), which may not exceed
//!   `max_amplification × wire size`, or [`DecodeLimits::amplification_floor`] for
//!   small frames.
//!
//! Scalars and unknown fields cost nothing to decode and are only skipped.
//!
//! ## An over-long id is a frame error
//!
//! A string longer than its class cap makes the whole frame a
//! [`FrameError::LimitExceeded`](crate::FrameError::LimitExceeded), that is a protocol
//! error (the receiver answers `GoAway{PROTOCOL_ERROR}` and closes). In particular a
//! hello whose `edge_id` is longer than 128 bytes is not answered with
//! `INVALID_HELLO`: the limit is enforced where it is cheap, before any allocation,
//! and a peer that sends such an id is broken or hostile. Ids of at most 128 bytes
//! that break the id grammar (§3) decode fine and are the state machines' business.
//!
//! ## The amplification floor
//!
//! PROTOCOL.md §7 asks for decoded size ≤ 8 × wire size. For small frames that cannot hold
//! with prost's types (one 1-byte string in a repeated field already costs a
//! 96-byte `Vec` of 4 slots), and a legitimate status response of 10 000 configured,
//! never-connected nodes (an id and a state each: 160 KB on the wire) decodes to
//! about 2.9 MB, 18× its wire size. So the budget of a frame is
//! `max(max_amplification × wire_len, amplification_floor)`: default 8 × wire size,
//! but at least 8 MiB. For a frame of 1 MiB or more the protocol's 8× holds exactly.
//!
//! Malformed input is not judged by the pre-scan: it stops where the bytes stop making
//! sense and lets prost's decoder report the error, which it does at the same point,
//! having done no more than the work checked so far. The single-pass decoder reports
//! prost's own error there, unless the pre-scan, which reads on past some faults prost
//! stops at, finds a broken cap further on: then, as with the pre-scan run first, the
//! frame is refused with that [`LimitError`].
//!
//! A rejected frame may have allocated up to its budget before the cap that stopped
//! it (what was built is dropped at once); the pre-scan rejected it before any
//! allocation. The bound on a frame's heap is the same either way.
use std::time::Duration;

use crate::encoding::{delimited_len, varint_len};

mod decode;
pub mod heap;
pub mod send;

pub use decode::{DecodeLimits, LimitError, check_envelope};

/// The caps a decoder holds one field of the schema to (PROTOCOL.md §7): past any of
/// them a frame is a protocol error. [`field_caps`] lists every field with a cap;
/// `proto/iop/limits.toml` writes the same list for other languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldCap {
    /// `iop.Message.field` (a map's key and value as `.key` and `.value`).
    pub field: &'static str,
    /// Elements of a repeated field, entries of a map.
    pub max_items: Option<u32>,
    /// Bytes of a string or bytes field, of each element of a repeated one, of a map
    /// key or value.
    pub max_bytes: Option<u32>,
}

/// Every field a decoder bounds under [`DecodeLimits::SPEC`], in schema order (the
/// table [`check_envelope`] walks with). Fields not listed are scalars or messages,
/// bounded by the caps of what they hold.
pub fn field_caps() -> Vec<FieldCap> {
    crate::scan::field_caps(&DecodeLimits::SPEC)
}
pub use send::{ExceedsLimit, SizeUnit};

/// Default frame body limit once the hello is accepted: 4 MiB. Each side's default
/// receive limit; the Control Plane announces its own in the hello response.
pub const DEFAULT_MAX_FRAME_LEN: u32 = 4 * 1024 * 1024;
/// Frame body limit before the hello is accepted: 256 KiB, a protocol constant. The
/// largest legal hello fits in it ([`MAX_HELLO_LEN`]).
pub const PRE_HELLO_MAX_FRAME_LEN: u32 = 256 * 1024;
/// The lowest `max_frame_len` a Control Plane may announce: 64 KiB. An Edge treats a
/// lower one as a protocol error.
pub const MIN_MAX_FRAME_LEN: u32 = 64 * 1024;
/// Connections a Control Plane holds that have not had their hello accepted; past it
/// a new one gets `GoAway{OVERLOADED}`. With the pre-hello frame cap, unauthenticated
/// peers pin at most 256 MiB.
pub const MAX_PENDING_HELLOS: usize = 1_024;
/// Connections one Control Plane holds.
pub const DEFAULT_MAX_CONNECTIONS: usize = 20_000;
/// Outbound bytes queued for one connection before its peer is dropped as too slow.
pub const DEFAULT_OUTBOUND_CAP: usize = 8 * 1024 * 1024;

/// Bytes of an id (`edge_id`, `node_id`, `provider_id`, `command_id`, an operation
/// name, the elements of `node_ids`, `provider_ids` and `inflight_command_ids`) and
/// of every map key.
pub const MAX_ID_LEN: usize = 128;
/// Bytes of every other string — messages, reasons, selectors, versions, model names,
/// config revisions, map values — and of the credential.
pub const MAX_TEXT_LEN: usize = 4 * 1024;
/// Bytes of a label key or value (`[A-Za-z0-9._/-]{1,63}`, PROTOCOL.md §3).
pub const MAX_LABEL_LEN: usize = 63;
/// Entries of one map (`metadata`, `labels`, `detail`).
pub const MAX_MAP_ENTRIES: usize = 64;
/// Nodes per status response, and node ids per status request.
pub const MAX_NODES: usize = 10_000;
/// Providers of one node (and provider ids of one node config summary).
pub const MAX_PROVIDERS_PER_NODE: usize = 256;
/// Models of one provider or node config summary.
pub const MAX_MODELS: usize = 256;
/// Operations one hello advertises.
pub const MAX_HELLO_OPERATIONS: usize = 256;
/// Entries of the hello's `metadata`, the Edge's own `iop.instance_id` included.
pub const MAX_HELLO_METADATA_ENTRIES: usize = 16;
/// Bytes of one hello metadata value.
pub const MAX_HELLO_METADATA_VALUE_LEN: usize = 256;
/// Bytes of the hello's `software_version`.
pub const MAX_SOFTWARE_VERSION_LEN: usize = 128;
/// Unfinished commands per Edge, carried-over ones included; over it the Edge rejects
/// `BUSY`. Also the most running commands a hello lists.
pub const MAX_INFLIGHT_COMMANDS: usize = 256;
/// Finished command ids an Edge remembers (and lists in its hello).
pub const MAX_RETAINED_COMMANDS: usize = 1_024;
/// Ids one hello lists in `inflight_command_ids`: every command the Edge may hold.
pub const MAX_HELLO_INFLIGHT_IDS: usize = MAX_INFLIGHT_COMMANDS + MAX_RETAINED_COMMANDS;
/// Sessions a command's request may be sent on and end without its
/// `command_response` before the Control Plane marks it FAILED "undeliverable".
pub const MAX_UNDELIVERED_SESSIONS: u32 = 3;
/// Views of disconnected Edges a Control Plane keeps (oldest forgotten first).
pub const MAX_DISCONNECTED_VIEWS: usize = 100_000;
/// Status requests in flight per Edge session.
pub const MAX_INFLIGHT_STATUS: usize = 64;
/// Providers one load update carries (PROTOCOL.md §4.8); more changed is a `resync`.
pub const MAX_LOAD_UPDATE_PROVIDERS: usize = 1_024;
/// Load updates a Control Plane allows at once; one more each interval after that.
pub const LOAD_UPDATE_BURST: u32 = 4;
/// Decoded heap bytes per wire byte a frame may cost.
pub const MAX_AMPLIFICATION: u32 = 8;
/// Decoded heap bytes any frame may cost, however small.
pub const AMPLIFICATION_FLOOR: u32 = 8 * 1024 * 1024;
/// Nesting depth of unknown groups a decoder walks.
pub const MAX_UNKNOWN_DEPTH: u32 = 16;

/// How long the Control Plane waits for a hello, and the Edge for its answer.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Default heartbeat interval chosen by the Control Plane.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// Shortest heartbeat interval a Control Plane may choose.
pub const MIN_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// Longest heartbeat interval a Control Plane may choose.
pub const MAX_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(60);
/// Silent heartbeat intervals after which a side declares its peer dead.
pub const LIVENESS_INTERVALS: u32 = 3;
/// How long the Control Plane waits for a status response.
pub const DEFAULT_STATUS_TIMEOUT: Duration = Duration::from_secs(10);
/// Command timeout when a request says 0.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an Edge remembers a finished command id.
pub const DEFAULT_COMMAND_RETENTION: Duration = Duration::from_secs(600);
/// How long a Control Plane keeps the view of an Edge after its last session ended.
pub const DEFAULT_DISCONNECTED_VIEW_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// First reconnect backoff step.
pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(250);
/// Longest reconnect backoff.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// `retry_after_ms` sent with `GoAway{SUPERSEDED}` (and a `DUPLICATE_EDGE` rejection).
pub const DEFAULT_RETRY_AFTER_SUPERSEDED: Duration = Duration::from_secs(5);
/// `retry_after_ms` sent with `DRAINING`.
pub const DEFAULT_RETRY_AFTER_DRAINING: Duration = Duration::from_secs(10);
/// `retry_after_ms` sent with `GoAway{OVERLOADED}`.
pub const DEFAULT_RETRY_AFTER_OVERLOADED: Duration = Duration::from_secs(10);
/// The least time between two load updates a Control Plane asks for by default
/// (PROTOCOL.md §4.8; 0 in the hello response means none).
pub const DEFAULT_LOAD_UPDATE_INTERVAL: Duration = Duration::from_millis(250);
/// The shortest load update interval a Control Plane may ask for.
pub const MIN_LOAD_UPDATE_INTERVAL: Duration = Duration::from_millis(50);
/// The longest load update interval a Control Plane may ask for.
pub const MAX_LOAD_UPDATE_INTERVAL: Duration = Duration::from_secs(60);
/// The least `retry_after_ms` a Control Plane names when it refuses a connection
/// `OVERLOADED` at its pending-hello caps in a burst (the connection's turn).
pub const MIN_RETRY_AFTER_BURST: Duration = Duration::from_millis(200);

/// Bytes of one map entry (a delimited field) whose key and value are `key` and
/// `value` bytes long.
const fn map_entry(key: usize, value: usize) -> usize {
    delimited_len(delimited_len(key) + delimited_len(value))
}

/// Body bytes of the largest hello the caps allow: every field at its cap, every
/// held command listed. Below [`PRE_HELLO_MAX_FRAME_LEN`], so the hello always fits.
pub const MAX_HELLO_LEN: usize = {
    let hello = delimited_len(MAX_ID_LEN) // edge_id
        + 1 + varint_len(u32::MAX as u64) // protocol_version
        + delimited_len(MAX_SOFTWARE_VERSION_LEN)
        + MAX_HELLO_OPERATIONS * delimited_len(MAX_ID_LEN)
        + MAX_HELLO_METADATA_ENTRIES * map_entry(MAX_ID_LEN, MAX_HELLO_METADATA_VALUE_LEN)
        + delimited_len(MAX_TEXT_LEN) // credential
        + MAX_HELLO_INFLIGHT_IDS * delimited_len(MAX_ID_LEN)
        + 2; // load_updates
    delimited_len(hello)
};
const _: () = assert!(MAX_HELLO_LEN <= PRE_HELLO_MAX_FRAME_LEN as usize);

/// Body bytes of the largest frame a Control Plane sends within the caps: a status
/// request for [`MAX_NODES`] ids of [`MAX_ID_LEN`] bytes. An Edge must accept frames
/// this large (`EdgeConfig::max_frame_len` may not be lower), since it does not
/// announce a limit of its own.
pub const MAX_CONTROL_PLANE_FRAME_LEN: usize = {
    let request = MAX_NODES * delimited_len(MAX_ID_LEN);
    1 + varint_len(u64::MAX) + delimited_len(request)
};

/// One row of [`TABLE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limit {
    /// The constant's name in this module.
    pub name: &'static str,
    /// Its value, as `PROTOCOL.md` writes it (`4 MiB`, `10 000`, `10 s`).
    pub value: &'static str,
    /// What it bounds.
    pub what: &'static str,
}

macro_rules! table {
    ($($name:ident = $value:literal : $what:literal;)*) => {
        /// Every limit of PROTOCOL.md §7 with its value, as `PROTOCOL.md` lists them (a test
        /// checks both this table against the constants and `PROTOCOL.md` against it).
        pub const TABLE: &[Limit] = &[$(Limit { name: stringify!($name), value: $value, what: $what }),*];

        /// The constants of [`TABLE`] in their own units, for the test that checks the
        /// written values: sizes and counts as numbers, durations in milliseconds.
        #[doc(hidden)]
        pub fn table_values() -> Vec<(&'static str, u128)> {
            vec![$((stringify!($name), as_number($name))),*]
        }
    };
}

/// A table constant as one number (durations in milliseconds).
trait AsNumber {
    fn as_number(&self) -> u128;
}
impl AsNumber for u32 {
    fn as_number(&self) -> u128 {
        u128::from(*self)
    }
}
impl AsNumber for usize {
    fn as_number(&self) -> u128 {
        *self as u128
    }
}
impl AsNumber for Duration {
    fn as_number(&self) -> u128 {
        self.as_millis()
    }
}
fn as_number(v: impl AsNumber) -> u128 {
    v.as_number()
}

table! {
    DEFAULT_MAX_FRAME_LEN = "4 MiB": "frame body length after the hello (each side's default receive limit)";
    PRE_HELLO_MAX_FRAME_LEN = "256 KiB": "frame body length before the hello is accepted";
    MIN_MAX_FRAME_LEN = "64 KiB": "lowest max_frame_len a Control Plane may announce";
    MAX_PENDING_HELLOS = "1 024": "connections a Control Plane holds before their hello is accepted";
    DEFAULT_MAX_CONNECTIONS = "20 000": "connections per Control Plane";
    DEFAULT_OUTBOUND_CAP = "8 MiB": "outbound bytes queued per connection before the peer is dropped as too slow";
    MAX_ID_LEN = "128 B": "ids and every map key";
    MAX_TEXT_LEN = "4 KiB": "messages, reasons, selectors, versions, model names, map values, the credential";
    MAX_LABEL_LEN = "63 B": "label keys and values";
    MAX_MAP_ENTRIES = "64": "entries per map (metadata, labels, detail)";
    MAX_NODES = "10 000": "nodes per status response, node ids per status request";
    MAX_PROVIDERS_PER_NODE = "256": "providers per node, provider ids per config summary";
    MAX_MODELS = "256": "models per provider or config summary";
    MAX_HELLO_OPERATIONS = "256": "operations per hello";
    MAX_HELLO_METADATA_ENTRIES = "16": "hello metadata entries (iop.instance_id included)";
    MAX_HELLO_METADATA_VALUE_LEN = "256 B": "one hello metadata value";
    MAX_SOFTWARE_VERSION_LEN = "128 B": "the hello's software_version";
    MAX_INFLIGHT_COMMANDS = "256": "unfinished commands per Edge (carried-over included)";
    MAX_RETAINED_COMMANDS = "1 024": "finished command ids an Edge remembers";
    MAX_HELLO_INFLIGHT_IDS = "1 280": "ids in the hello's inflight_command_ids";
    MAX_UNDELIVERED_SESSIONS = "3": "sessions a command's request may end unanswered before it is FAILED \"undeliverable\"";
    MAX_DISCONNECTED_VIEWS = "100 000": "Edge views a Control Plane keeps while disconnected";
    MAX_INFLIGHT_STATUS = "64": "status requests in flight per session";
    MAX_LOAD_UPDATE_PROVIDERS = "1 024": "providers per load update";
    LOAD_UPDATE_BURST = "4": "load updates a Control Plane allows at once (one more per interval)";
    MAX_AMPLIFICATION = "8": "decoded heap bytes per wire byte of a frame";
    AMPLIFICATION_FLOOR = "8 MiB": "decoded heap bytes any frame may use";
    MAX_UNKNOWN_DEPTH = "16": "nesting of unknown groups";
    DEFAULT_HELLO_TIMEOUT = "10 s": "hello timeout (both sides)";
    DEFAULT_HEARTBEAT_INTERVAL = "5 s": "heartbeat interval";
    MIN_HEARTBEAT_INTERVAL = "1 s": "shortest heartbeat interval";
    MAX_HEARTBEAT_INTERVAL = "60 s": "longest heartbeat interval";
    LIVENESS_INTERVALS = "3": "silent intervals before the peer is declared dead";
    DEFAULT_STATUS_TIMEOUT = "10 s": "status request timeout";
    DEFAULT_COMMAND_TIMEOUT = "60 s": "command timeout when the request says 0";
    DEFAULT_COMMAND_RETENTION = "10 min": "how long an Edge remembers a finished command id";
    DEFAULT_DISCONNECTED_VIEW_TTL = "24 h": "how long a Control Plane keeps the view of a disconnected Edge";
    DEFAULT_BACKOFF_BASE = "250 ms": "first reconnect backoff step (doubling, full jitter)";
    DEFAULT_BACKOFF_MAX = "30 s": "longest reconnect backoff";
    DEFAULT_RETRY_AFTER_SUPERSEDED = "5 s": "retry_after on SUPERSEDED and DUPLICATE_EDGE";
    DEFAULT_RETRY_AFTER_DRAINING = "10 s": "retry_after on DRAINING";
    DEFAULT_RETRY_AFTER_OVERLOADED = "10 s": "retry_after on OVERLOADED";
    MIN_RETRY_AFTER_BURST = "200 ms": "least retry_after on OVERLOADED at the pending-hello caps (the connection's turn)";
    DEFAULT_LOAD_UPDATE_INTERVAL = "250 ms": "load update interval a Control Plane asks for";
    MIN_LOAD_UPDATE_INTERVAL = "50 ms": "shortest load update interval";
    MAX_LOAD_UPDATE_INTERVAL = "60 s": "longest load update interval";
}

/// Reads a value as [`TABLE`] writes it: `4 MiB`, `10 000`, `128 B`, `10 min`.
/// Sizes and counts come back as numbers, durations in milliseconds; `None` for a
/// form the table does not use.
#[doc(hidden)]
pub fn parse_table_value(text: &str) -> Option<u128> {
    let (number, unit) = match text.rsplit_once(' ') {
        Some((n, u)) if u.chars().all(|c| c.is_ascii_alphabetic()) => (n, u),
        _ => (text, ""),
    };
    let n: u128 = number.replace(' ', "").parse().ok()?;
    let scale = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "ms" => 1,
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    Some(n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EdgeHelloRequest, EdgeStatusRequest, Envelope, Message};

    #[test]
    fn every_written_value_is_the_constant() {
        for (row, (name, value)) in TABLE.iter().zip(table_values()) {
            assert_eq!(row.name, name);
            assert_eq!(parse_table_value(row.value), Some(value), "{name}");
        }
    }

    #[test]
    fn the_largest_hello_is_as_computed_and_fits_before_the_hello() {
        let id = |c: char| c.to_string().repeat(MAX_ID_LEN);
        let hello = EdgeHelloRequest {
            edge_id: id('e'),
            protocol_version: u32::MAX,
            software_version: "v".repeat(MAX_SOFTWARE_VERSION_LEN),
            operations: (0..MAX_HELLO_OPERATIONS)
                .map(|i| format!("{i:0>128}"))
                .collect(),
            metadata: (0..MAX_HELLO_METADATA_ENTRIES)
                .map(|i| {
                    (
                        format!("{i:0>128}"),
                        "m".repeat(MAX_HELLO_METADATA_VALUE_LEN),
                    )
                })
                .collect(),
            credential: vec![7; MAX_TEXT_LEN],
            inflight_command_ids: (0..MAX_HELLO_INFLIGHT_IDS)
                .map(|i| format!("{i:0>128}"))
                .collect(),
            load_updates: true,
        };
        let len = Envelope::new(hello).encoded_len();
        assert_eq!(len, MAX_HELLO_LEN);
        assert!(len <= PRE_HELLO_MAX_FRAME_LEN as usize);
    }

    #[test]
    fn the_largest_control_plane_frame_is_a_full_status_request() {
        // A Control Plane sends node ids or a page's cursor, never both (the cursor is
        // ignored beside ids): a page's request is a few hundred bytes.
        let request = EdgeStatusRequest {
            node_ids: (0..MAX_NODES).map(|i| format!("{i:0>128}")).collect(),
            ..Default::default()
        };
        let len = Envelope::correlated(u64::MAX, request).encoded_len();
        assert_eq!(len, MAX_CONTROL_PLANE_FRAME_LEN);
        assert!(len <= DEFAULT_MAX_FRAME_LEN as usize);
    }

    #[test]
    fn table_values_parse() {
        assert_eq!(parse_table_value("4 MiB"), Some(4 << 20));
        assert_eq!(parse_table_value("10 000"), Some(10_000));
        assert_eq!(parse_table_value("128 B"), Some(128));
        assert_eq!(parse_table_value("250 ms"), Some(250));
        assert_eq!(parse_table_value("10 min"), Some(600_000));
        assert_eq!(parse_table_value("about"), None);
    }
}
