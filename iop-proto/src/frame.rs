//! The length-prefixed frame codec (PROTOCOL.md §2).
//!
//! A frame is a 4-byte unsigned big-endian length `N` followed by `N` bytes holding one
//! protobuf-encoded [`Envelope`]. `N = 0` and `N > max_frame_len` are invalid and are
//! rejected as soon as the four length bytes arrive, before any body is buffered.
//! Each complete body is decoded by [`decode_envelope`], which checks the decoder's
//! [`DecodeLimits`] (PROTOCOL.md §7, see [`limits`](crate::limits)) as it goes, before each
//! allocation, so a frame can never make the receiver allocate much more than its own
//! size.

use bytes::BufMut;
use prost::Message;

use crate::Envelope;
use crate::limits::{DecodeLimits, LimitError};

/// Size of the length prefix in bytes.
pub const LENGTH_PREFIX_LEN: usize = 4;

pub use crate::limits::{DEFAULT_MAX_FRAME_LEN, PRE_HELLO_MAX_FRAME_LEN};

/// A body buffer larger than this is released after its frame is decoded, so that an
/// idle connection does not keep the memory of the largest frame it ever saw.
const RETAINED_BODY_CAPACITY: usize = 8 * 1024;

/// Why a byte stream could not be decoded into frames.
///
/// Every variant is a protocol error by the peer (PROTOCOL.md §2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length prefix announced a zero-length frame.
    #[error("zero-length frame")]
    ZeroLength,
    /// The length prefix announced a frame larger than the receiver's limit.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The announced body length.
        len: u32,
        /// The receiver's `max_frame_len`.
        max: u32,
    },
    /// The frame body is not a valid protobuf `iop.Envelope`.
    #[error("frame body is not a valid iop.Envelope: {0}")]
    Undecodable(#[source] prost::DecodeError),
    /// The frame body breaks a decode limit (PROTOCOL.md §7); decoding stopped before the
    /// allocation that would have broken it, and what it had built was dropped.
    #[error("frame body exceeds a decode limit: {0}")]
    LimitExceeded(#[source] LimitError),
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame: {buffered} of {expected} bytes received")]
    Truncated {
        /// Bytes of the frame (prefix included) received before the end.
        buffered: usize,
        /// Bytes the whole frame (prefix included) would have had, when known.
        expected: usize,
    },
}

/// Why a frame could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The encoded envelope is larger than the limit the frame must respect.
    #[error("encoded envelope of {len} bytes exceeds the frame limit of {max} bytes")]
    TooLarge {
        /// The encoded body length.
        len: usize,
        /// The limit it had to respect.
        max: u32,
    },
    /// The envelope encodes to zero bytes (no body and no correlation id), which the
    /// wire cannot carry.
    #[error("an empty envelope encodes to a zero-length frame, which is invalid")]
    Empty,
    /// The destination buffer has no room for the frame.
    #[error("destination buffer has room for {remaining} bytes, the frame needs {needed}")]
    BufferFull {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes the buffer could still take.
        remaining: usize,
    },
}

/// Encodes the frame of `Envelope::correlated(correlation_id, EdgeStatusRequest {
/// node_ids, start_after_node_id })` — the same bytes as [`encode_frame`] — without
/// building the envelope, for a sender that holds the ids already (the Control Plane's
/// hot path). `start_after_node_id` is empty for the first page.
///
/// ```
/// use iop_proto::{EdgeStatusRequest, Envelope, encode_frame, encode_status_request_frame};
///
/// let mut direct = Vec::new();
/// encode_status_request_frame(7, &[] as &[&str], "node-a", 1 << 20, &mut direct)?;
/// let mut via_envelope = Vec::new();
/// let request = EdgeStatusRequest { node_ids: vec![], start_after_node_id: "node-a".into() };
/// encode_frame(&Envelope::correlated(7, request), 1 << 20, &mut via_envelope)?;
/// assert_eq!(direct, via_envelope);
/// # Ok::<(), iop_proto::EncodeError>(())
/// ```
pub fn encode_status_request_frame<S: AsRef<str>>(
    correlation_id: u64,
    node_ids: &[S],
    start_after_node_id: &str,
    max_frame_len: u32,
    dst: &mut impl BufMut,
) -> Result<usize, EncodeError> {
    crate::small_frames::status_request(
        correlation_id,
        node_ids,
        start_after_node_id,
        max_frame_len,
        dst,
    )
}

/// Encodes `envelope` as one frame appended to `dst`, with no intermediate buffer.
///
/// Returns the number of bytes written (prefix included). Refuses, without writing
/// anything, a frame whose body would exceed `max_frame_len`, or an envelope that
/// encodes to nothing.
pub fn encode_frame(
    envelope: &Envelope,
    max_frame_len: u32,
    dst: &mut impl BufMut,
) -> Result<usize, EncodeError> {
    if let Some(done) = crate::small_frames::encode(envelope, max_frame_len, dst) {
        return done;
    }
    let len = envelope.encoded_len();
    if len == 0 {
        return Err(EncodeError::Empty);
    }
    let len32 = u32::try_from(len)
        .ok()
        .filter(|l| *l <= max_frame_len)
        .ok_or(EncodeError::TooLarge {
            len,
            max: max_frame_len,
        })?;
    let needed = LENGTH_PREFIX_LEN + len;
    if dst.remaining_mut() < needed {
        return Err(EncodeError::BufferFull {
            needed,
            remaining: dst.remaining_mut(),
        });
    }
    dst.put_u32(len32);
    envelope.encode_raw(dst);
    Ok(needed)
}

/// Incremental frame decoder: feed it any split of the byte stream.
///
/// It buffers at most one partial frame — never more than `max_frame_len + 4` bytes —
/// and decodes a frame that arrives whole in one input slice without copying it.
/// Every body is checked against the [`DecodeLimits`] as it is decoded
/// ([`decode_envelope`]).
/// Errors are sticky: after one, every call returns the same error.
#[derive(Debug)]
pub struct FrameDecoder {
    max_frame_len: u32,
    header: [u8; LENGTH_PREFIX_LEN],
    header_len: usize,
    /// Body length announced by the current header, once it is complete.
    body_len: Option<usize>,
    body: Vec<u8>,
    error: Option<FrameError>,
    limits: DecodeLimits,
}

impl FrameDecoder {
    /// A decoder that accepts frame bodies of at most `max_frame_len` bytes, with the
    /// protocol's [`DecodeLimits`].
    pub fn new(max_frame_len: u32) -> Self {
        Self::with_limits(max_frame_len, DecodeLimits::default())
    }

    /// A decoder that accepts frame bodies of at most `max_frame_len` bytes and checks
    /// each body against `limits` before decoding it.
    pub fn with_limits(max_frame_len: u32, limits: DecodeLimits) -> Self {
        Self {
            limits,
            max_frame_len,
            header: [0; LENGTH_PREFIX_LEN],
            header_len: 0,
            body_len: None,
            body: Vec::new(),
            error: None,
        }
    }

    /// The current limit on frame bodies.
    pub fn max_frame_len(&self) -> u32 {
        self.max_frame_len
    }

    /// Changes the limit, for example once the hello is accepted. It applies to every
    /// frame whose length prefix is not yet complete.
    pub fn set_max_frame_len(&mut self, max_frame_len: u32) {
        self.max_frame_len = max_frame_len;
    }

    /// The decode limits checked on every frame body.
    pub fn limits(&self) -> &DecodeLimits {
        &self.limits
    }

    /// Changes the decode limits; they apply to every frame not yet returned.
    pub fn set_limits(&mut self, limits: DecodeLimits) {
        self.limits = limits;
    }

    /// Bytes of the current partial frame held by the decoder (prefix included).
    pub fn buffered(&self) -> usize {
        self.header_len + self.body.len()
    }

    /// Heap bytes the decoder holds for partial frames.
    pub fn capacity(&self) -> usize {
        self.body.capacity()
    }

    /// True when the decoder sits between frames (nothing partial buffered).
    pub fn is_at_boundary(&self) -> bool {
        self.header_len == 0 && self.body_len.is_none()
    }

    /// The sticky error, if decoding has failed.
    pub fn error(&self) -> Option<&FrameError> {
        self.error.as_ref()
    }

    /// Takes bytes from the front of `input` until one frame is complete and returns
    /// it, leaving the rest of `input` for the next call. Returns `Ok(None)` once
    /// `input` is exhausted without completing a frame (the partial frame is kept).
    ///
    /// Call it in a loop until it returns `Ok(None)` to drain every frame of a read.
    #[inline]
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Envelope>, FrameError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        // No frame can complete without a byte (a zero length is an error, raised
        // when the prefix completes): the call that drains a read returns at once.
        if input.is_empty() {
            return Ok(None);
        }
        self.decode_input(input)
    }

    /// Every path returns its callee's result as it is, and errors are made sticky
    /// where they arise, so that the decoded `Envelope` (168 bytes) is written once,
    /// in place, never copied on its way out.
    fn decode_input(&mut self, input: &mut &[u8]) -> Result<Option<Envelope>, FrameError> {
        // Fast path: between frames, a whole frame at the front of `input`.
        if self.is_at_boundary()
            && let Some((prefix, rest)) = input.split_first_chunk::<LENGTH_PREFIX_LEN>()
        {
            let len = u32::from_be_bytes(*prefix);
            if len != 0
                && len <= self.max_frame_len
                && let Some((body, rest)) = rest.split_at_checked(len as usize)
            {
                *input = rest;
                let sticky = Sticky {
                    error: &mut self.error,
                    buffer: &mut self.body,
                };
                return crate::decode::decode(body, &self.limits, Some(sticky));
            }
        }
        self.decode_partial(input)
    }

    /// Records `err` as the sticky error and releases the buffer.
    #[cold]
    fn fail(&mut self, err: FrameError) -> FrameError {
        self.error = Some(err.clone());
        self.body = Vec::new();
        err
    }

    fn decode_partial(&mut self, input: &mut &[u8]) -> Result<Option<Envelope>, FrameError> {
        let body_len = match self.body_len {
            Some(len) => len,
            None => {
                // Fill the length prefix.
                let want = LENGTH_PREFIX_LEN - self.header_len;
                let take = want.min(input.len());
                let (head, rest) = input.split_at(take);
                if let Some(dst) = self.header.get_mut(self.header_len..self.header_len + take) {
                    dst.copy_from_slice(head);
                }
                self.header_len += take;
                *input = rest;
                if self.header_len < LENGTH_PREFIX_LEN {
                    return Ok(None);
                }
                let len = u32::from_be_bytes(self.header);
                if len == 0 {
                    return Err(self.fail(FrameError::ZeroLength));
                }
                if len > self.max_frame_len {
                    let max = self.max_frame_len;
                    return Err(self.fail(FrameError::TooLarge { len, max }));
                }
                let len = len as usize;
                self.body_len = Some(len);
                len
            }
        };

        // The whole body is in `input` and nothing is buffered.
        if self.body.is_empty() && input.len() >= body_len {
            let (body, rest) = input.split_at(body_len);
            *input = rest;
            self.reset_frame();
            let sticky = Sticky {
                error: &mut self.error,
                buffer: &mut self.body,
            };
            return crate::decode::decode(body, &self.limits, Some(sticky));
        }

        let missing = body_len - self.body.len();
        let take = missing.min(input.len());
        let (chunk, rest) = input.split_at(take);
        *input = rest;
        self.grow_body(body_len, take);
        self.body.extend_from_slice(chunk);
        if self.body.len() < body_len {
            return Ok(None);
        }
        self.reset_frame();
        let mut body = std::mem::take(&mut self.body);
        let mut released = Vec::new();
        let sticky = Sticky {
            error: &mut self.error,
            buffer: &mut released,
        };
        let result = crate::decode::decode(&body, &self.limits, Some(sticky));
        // Kept for the next partial frame, unless large or the decoder failed.
        if result.is_ok() && body.capacity() <= RETAINED_BODY_CAPACITY {
            body.clear();
            self.body = body;
        }
        result
    }

    /// Reserves room for `extra` more body bytes, doubling as needed but never past
    /// the announced body length.
    fn grow_body(&mut self, body_len: usize, extra: usize) {
        let needed = self.body.len() + extra;
        if needed <= self.body.capacity() {
            return;
        }
        let target = (self.body.capacity() * 2).max(needed).min(body_len);
        self.body.reserve_exact(target - self.body.len());
    }

    fn reset_frame(&mut self) {
        self.header_len = 0;
        self.body_len = None;
    }

    /// Declares the end of the stream: an error if a frame was left incomplete.
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        if self.is_at_boundary() {
            return Ok(());
        }
        Err(FrameError::Truncated {
            buffered: self.buffered(),
            expected: self
                .body_len
                .map_or(LENGTH_PREFIX_LEN, |len| LENGTH_PREFIX_LEN + len),
        })
    }
}

/// Where a failing decode leaves its error: a [`FrameDecoder`]'s sticky error, and the
/// buffer it releases then.
pub(crate) struct Sticky<'a> {
    error: &'a mut Option<FrameError>,
    buffer: &'a mut Vec<u8>,
}

impl Sticky<'_> {
    /// Makes `err` sticky and releases the buffer.
    #[cold]
    pub(crate) fn fail(self, err: &FrameError) {
        *self.error = Some(err.clone());
        *self.buffer = Vec::new();
    }
}

/// Decodes one frame body (no length prefix) into an [`Envelope`], enforcing `limits`
/// (PROTOCOL.md §7) as it decodes: what [`FrameDecoder`] does with each complete body.
///
/// The verdict is the same as [`check_envelope`](crate::check_envelope) followed by
/// prost's `Envelope::decode`, in one pass over the bytes: the same envelope when both
/// accept; [`FrameError::LimitExceeded`] with the pre-scan's error when it rejects;
/// [`FrameError::Undecodable`] with prost's error otherwise. No cap is checked after
/// the allocation it guards, so decoding never allocates more than
/// [`DecodeLimits::decoded_budget`] for the message, plus what a `DecodeError` costs.
///
/// ```
/// use iop_proto::{DecodeLimits, Envelope, FrameError, Heartbeat, LimitError, Message};
///
/// let body = Envelope::from(Heartbeat { sequence: 7, sent_at_unix_ms: 0 }).encode_to_vec();
/// let envelope = iop_proto::decode_envelope(&body, &DecodeLimits::default())?;
/// assert_eq!(envelope, Envelope::decode(body.as_slice())?);
///
/// // A status request for one 200-byte node id: over the 128-byte id cap.
/// let mut limited = vec![0x22, 0xcb, 0x01, 0x0a, 0xc8, 0x01];
/// limited.extend([b'n'; 200]);
/// assert!(matches!(
///     iop_proto::decode_envelope(&limited, &DecodeLimits::default()),
///     Err(FrameError::LimitExceeded(LimitError::StringTooLong { len: 200, .. }))
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn decode_envelope(body: &[u8], limits: &DecodeLimits) -> Result<Envelope, FrameError> {
    let mut envelope = Envelope::default();
    crate::decode::decode_into(&mut envelope, body, limits)?;
    Ok(envelope)
}
