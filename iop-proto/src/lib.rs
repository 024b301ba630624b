//! Wire types and the length-prefixed frame codec of the IOP Control Plane ⇄ Edge
//! protocol.
//!
//! ```
//! use iop_proto::{Envelope, FrameDecoder, Heartbeat, encode_frame, DEFAULT_MAX_FRAME_LEN};
//!
//! // Encode two frames straight into a caller-owned buffer.
//! let mut wire = Vec::new();
//! let hb = Envelope::from(Heartbeat { sequence: 1, sent_at_unix_ms: 1_700_000_000_000 });
//! encode_frame(&hb, DEFAULT_MAX_FRAME_LEN, &mut wire)?;
//! encode_frame(&Envelope::from(Heartbeat { sequence: 2, sent_at_unix_ms: 0 }), DEFAULT_MAX_FRAME_LEN, &mut wire)?;
//!
//! // Decode them back, whatever the read split (here: 3 bytes at a time).
//! let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
//! let mut frames = Vec::new();
//! for chunk in wire.chunks(3) {
//!     let mut input = chunk;
//!     while let Some(envelope) = decoder.decode(&mut input)? {
//!         frames.push(envelope);
//!     }
//! }
//! decoder.finish()?; // no partial frame left at end of stream
//! assert_eq!(frames.len(), 2);
//! assert_eq!(frames[0], hb);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The schema lives in `proto/iop/control.proto` (SPEC §3); the types below are
//! generated from it at build time by `prost-build` with `protox`, so no `protoc`
//! binary is needed. Maps are `BTreeMap`s, so a message always encodes to the same
//! bytes.
//!
//! [`FrameDecoder`] enforces the SPEC §7 decode limits ([`DecodeLimits`]) with a
//! zero-allocation pre-scan of every frame body, before prost decodes it: see the
//! [`limits`] module for what is capped and why.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

mod body;
pub mod frame;
pub mod limits;
mod redact;
mod scan;

/// Types generated from `proto/iop/control.proto` (package `iop`).
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
mod wire {
    include!(concat!(env!("OUT_DIR"), "/iop.rs"));
}

pub use body::BodyKind;
pub use frame::{
    DEFAULT_MAX_FRAME_LEN, EncodeError, FrameDecoder, FrameError, LENGTH_PREFIX_LEN,
    PRE_HELLO_MAX_FRAME_LEN, encode_frame,
};
pub use limits::{DecodeLimits, LimitError, check_envelope};
pub use prost::Message;
pub use wire::envelope::Body;
pub use wire::*;

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The compiled `FileDescriptorSet` of `control.proto`, as protobuf bytes.
///
/// Useful for reflection, for building a JSON mapping, and for checking the schema's
/// contract (tombstones, numbering) against what was actually compiled.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/iop_descriptor.bin"));
