//! The ordered outbound queue of one connection (PROTOCOL.md §4.5, §7).
//!
//! Frames are encoded when queued, into one contiguous byte buffer that the driver's
//! pulls copy from. The queue therefore holds exactly the bytes it counts: past its
//! cap the peer is too slow and the connection is dropped (PROTOCOL.md §7, default 8 MiB),
//! and the cap bounds memory too. (Queuing decoded `Envelope`s instead held 168 bytes
//! per entry whatever the frame's size: a peer that sent heartbeats without reading
//! their 10-byte acks made 8 MiB of cap hold about 140 MiB.)

use iop_proto::{EncodeError, Envelope, LENGTH_PREFIX_LEN, encode_frame};

use iop_proto::encoding::{MAX_VARINT_LEN, encode_varint, varint_len};

/// The least the buffer grows by: the small frames of an idle session (heartbeat acks,
/// status requests) fit in it, so a kept buffer of this size serves them all.
pub(crate) const MIN_RESERVE: usize = 128;

pub use crate::limits::DEFAULT_OUTBOUND_CAP;

/// Why a frame could not be queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutboundError {
    /// Queuing the frame would exceed the connection's outbound cap: the peer is not
    /// reading fast enough.
    #[error(
        "outbound buffer full: {queued} bytes queued, {frame} more would pass the cap of {cap}"
    )]
    Full {
        /// Bytes already queued.
        queued: usize,
        /// Size of the refused frame (prefix included).
        frame: usize,
        /// The cap.
        cap: usize,
    },
    /// The frame is larger than the peer accepts.
    #[error("frame of {len} bytes exceeds the peer's limit of {max} bytes")]
    FrameTooLarge {
        /// Encoded body length.
        len: usize,
        /// The peer's `max_frame_len`.
        max: u32,
    },
}

/// Bytes of the longest varint of a `u32`.
const MAX_U32_VARINT: usize = 5;

/// An ordered queue of frames waiting to be written to one connection.
pub(crate) struct Outbound {
    /// Encoded frames (length prefixes included); those before `head` are sent.
    bytes: Vec<u8>,
    head: usize,
    cap: usize,
    max_frame_len: u32,
}

/// Sizes only: the queued bytes may hold a hello's credential.
impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("queued_bytes", &self.queued_bytes())
            .field("cap", &self.cap)
            .field("max_frame_len", &self.max_frame_len)
            .finish()
    }
}

impl Outbound {
    /// An empty queue holding at most `cap` encoded bytes of frames no larger than
    /// `max_frame_len`.
    pub(crate) fn new(cap: usize, max_frame_len: u32) -> Self {
        Self {
            bytes: Vec::new(),
            head: 0,
            cap,
            max_frame_len,
        }
    }

    /// Changes the largest body the peer accepts (learned from its hello response).
    pub(crate) fn set_max_frame_len(&mut self, max_frame_len: u32) {
        self.max_frame_len = max_frame_len;
    }

    /// The largest body the peer accepts.
    pub(crate) fn max_frame_len(&self) -> u32 {
        self.max_frame_len
    }

    /// Queues `envelope` behind everything already queued.
    pub(crate) fn push(&mut self, envelope: &Envelope) -> Result<(), OutboundError> {
        self.push_frame(|max_frame_len, dst| encode_frame(envelope, max_frame_len, dst))
    }

    /// Queues the frame `encode` appends to the buffer (given the peer's frame limit),
    /// as [`encode_frame`] would: the frame's length on success, nothing written on
    /// an error.
    pub(crate) fn push_frame(
        &mut self,
        encode: impl FnOnce(u32, &mut Vec<u8>) -> Result<usize, EncodeError>,
    ) -> Result<(), OutboundError> {
        let queued = self.queued_bytes();
        // Drop the sent prefix once it is at least half the buffer: each byte is
        // moved at most once on average.
        if self.head > 0 && self.head >= queued {
            self.bytes.drain(..self.head);
            self.head = 0;
        }
        // A kept buffer of a small frame's worth at least, so that the few-byte frames
        // of a session reuse it.
        if self.bytes.capacity() == 0 {
            self.bytes.reserve(MIN_RESERVE);
        }
        // Written in place, then checked against the cap: `encode_frame` sizes the
        // frame once (small frames without prost at all), and a refused frame is
        // taken back, so the queue never holds more than the cap.
        let before = self.bytes.len();
        match encode(self.max_frame_len, &mut self.bytes) {
            Ok(frame) if queued + frame <= self.cap => Ok(()),
            Ok(frame) => {
                self.bytes.truncate(before);
                Err(OutboundError::Full {
                    queued,
                    frame,
                    cap: self.cap,
                })
            }
            Err(EncodeError::TooLarge { len, max }) => {
                Err(OutboundError::FrameTooLarge { len, max })
            }
            Err(_) => Err(OutboundError::FrameTooLarge {
                len: 0,
                max: self.max_frame_len,
            }),
        }
    }

    /// Queues, behind everything already queued, one frame whose `Envelope` is `head`
    /// followed by a length-delimited field whose bytes `write` appends to the buffer
    /// it is given: `head` holds the envelope's fields before that one and its key.
    /// The frame is written in place, its length prefix and the field's length filled
    /// in afterwards: no message is built and no bytes are copied from elsewhere.
    /// When `write` returns `false`, what it wrote is taken back and nothing is queued
    /// (`Ok(false)`).
    ///
    /// `write` must only append to the buffer: the bytes already in it are queued
    /// frames (if it removes some, the queue is dropped whole, so that no broken
    /// frame goes out, and the frame is refused as too large). Same checks as [`push`](Self::push), made once the frame is written:
    /// a refused frame is taken back. The buffer thus briefly holds up to one frame
    /// past the cap, as a built message would have.
    pub(crate) fn push_with(
        &mut self,
        head: &[u8],
        write: impl FnOnce(&mut Vec<u8>) -> bool,
    ) -> Result<bool, OutboundError> {
        let queued = self.queued_bytes();
        if self.head > 0 && self.head >= queued {
            self.bytes.drain(..self.head);
            self.head = 0;
        }
        let start = self.bytes.len();
        // Room for the prefix, `head` and the longest length a frame can have (its
        // body fits a u32, or it is refused).
        let reserved = LENGTH_PREFIX_LEN + head.len() + MAX_U32_VARINT;
        self.bytes.resize(start + reserved, 0);
        let body_at = start + reserved;
        let keep = write(&mut self.bytes);
        if !keep && self.bytes.len() >= start {
            self.bytes.truncate(start);
            return Ok(false);
        }
        let Some(field) = self.bytes.len().checked_sub(body_at) else {
            // `write` took bytes away, maybe from queued frames: send none of them
            // rather than a broken stream.
            self.clear();
            return Err(OutboundError::FrameTooLarge {
                len: 0,
                max: self.max_frame_len,
            });
        };
        let len = head.len() + varint_len(field as u64) + field;
        let frame = LENGTH_PREFIX_LEN + len;
        let refused = match u32::try_from(len) {
            Ok(len32) if len32 <= self.max_frame_len => {
                (queued + frame > self.cap).then_some(OutboundError::Full {
                    queued,
                    frame,
                    cap: self.cap,
                })
            }
            _ => Some(OutboundError::FrameTooLarge {
                len,
                max: self.max_frame_len,
            }),
        };
        if let Some(err) = refused {
            self.bytes.truncate(start);
            return Err(err);
        }
        // The header ends where the field's bytes start; `gap` unused bytes before it.
        let gap = reserved - (frame - field);
        let mut length = [0u8; MAX_VARINT_LEN];
        let length = encode_varint(field as u64, &mut length);
        let prefix = (len as u32).to_be_bytes();
        let mut at = start + gap;
        for part in [&prefix[..], head, length] {
            if let Some(dst) = self.bytes.get_mut(at..at + part.len()) {
                dst.copy_from_slice(part);
            }
            at += part.len();
        }
        if gap > 0 {
            if start == self.head {
                // Nothing was queued: start the queue after the gap instead of
                // moving the frame (the gap counts as sent).
                self.head = start + gap;
            } else {
                self.bytes.copy_within(start + gap.., start);
                self.bytes.truncate(self.bytes.len() - gap);
            }
        }
        Ok(true)
    }

    /// Appends queued frames to `buf`, oldest first, stopping before the frame that
    /// would take `buf` past `soft_limit` bytes (at least one frame is always written
    /// if any is queued). Returns the bytes written.
    pub(crate) fn write_to(&mut self, buf: &mut Vec<u8>, soft_limit: usize) -> usize {
        let start = buf.len();
        // Everything queued fits: no need to find the frame boundaries.
        if start.saturating_add(self.queued_bytes()) <= soft_limit {
            buf.extend_from_slice(self.bytes.get(self.head..).unwrap_or_default());
            self.bytes.clear();
            self.head = 0;
            return buf.len() - start;
        }
        let mut end = self.head;
        while let Some(prefix) = self.bytes.get(end..end + LENGTH_PREFIX_LEN) {
            let mut len = [0u8; LENGTH_PREFIX_LEN];
            len.copy_from_slice(prefix);
            let frame = LENGTH_PREFIX_LEN + u32::from_be_bytes(len) as usize;
            if end > self.head && start + (end - self.head) + frame > soft_limit {
                break;
            }
            end += frame;
        }
        buf.extend_from_slice(self.bytes.get(self.head..end).unwrap_or_default());
        self.head = end;
        if self.head == self.bytes.len() {
            self.bytes.clear();
            self.head = 0;
        }
        buf.len() - start
    }

    /// True when nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.head == self.bytes.len()
    }

    /// Encoded bytes queued (prefixes included).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.bytes.len() - self.head
    }

    /// Releases the queue's buffer when it is empty and its capacity is above `keep`
    /// bytes, so an idle connection does not keep the memory of its largest burst.
    pub(crate) fn shrink_idle(&mut self, keep: usize) {
        if self.is_empty() && self.bytes.capacity() > keep {
            self.bytes = Vec::new();
            self.head = 0;
        }
    }

    /// Drops everything queued and releases the buffer.
    pub(crate) fn clear(&mut self) {
        self.bytes = Vec::new();
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iop_proto::{FrameDecoder, Heartbeat, Message};

    fn hb(sequence: u64) -> Envelope {
        Envelope::from(Heartbeat {
            sequence,
            sent_at_unix_ms: 0,
        })
    }

    #[test]
    fn frames_come_out_in_order_and_decode() {
        let mut q = Outbound::new(1024, 1024);
        for s in 1..=3 {
            q.push(&hb(s)).unwrap();
        }
        let mut buf = Vec::new();
        assert!(q.write_to(&mut buf, usize::MAX) > 0);
        assert!(q.is_empty());
        assert_eq!(q.queued_bytes(), 0);
        let mut dec = FrameDecoder::new(1024);
        let mut input = buf.as_slice();
        for s in 1..=3 {
            assert_eq!(dec.decode(&mut input).unwrap(), Some(hb(s)));
        }
    }

    #[test]
    fn the_cap_refuses_what_would_pass_it() {
        let one = LENGTH_PREFIX_LEN + hb(1).encoded_len();
        let mut q = Outbound::new(2 * one, 1024);
        q.push(&hb(1)).unwrap();
        q.push(&hb(2)).unwrap();
        assert!(matches!(q.push(&hb(3)), Err(OutboundError::Full { .. })));
        assert_eq!(q.queued_bytes(), 2 * one);
    }

    #[test]
    fn soft_limit_splits_writes_but_always_makes_progress() {
        let mut q = Outbound::new(1024, 1024);
        q.push(&hb(1)).unwrap();
        q.push(&hb(2)).unwrap();
        let mut buf = Vec::new();
        let n = q.write_to(&mut buf, 1);
        assert!(n > 0);
        assert!(!q.is_empty());
        q.write_to(&mut buf, 1);
        assert!(q.is_empty());
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut q = Outbound::new(1 << 20, 4);
        let big = Envelope::go_away(iop_proto::GoAwayReason::Shutdown, "x".repeat(100), 0);
        assert!(matches!(
            q.push(&big),
            Err(OutboundError::FrameTooLarge { max: 4, .. })
        ));
    }

    /// `push_with` of a status response: the head prost puts before the body.
    fn status_head(correlation_id: u64) -> Vec<u8> {
        let mut head = Vec::new();
        if correlation_id != 0 {
            head.push(0x08);
            let mut v = correlation_id;
            while v >= 0x80 {
                head.push((v as u8 & 0x7f) | 0x80);
                v >>= 7;
            }
            head.push(v as u8);
        }
        head.push(0x2a);
        head
    }

    fn status(correlation_id: u64, edge_id_len: usize) -> (Vec<u8>, Envelope) {
        let response = iop_proto::EdgeStatusResponse {
            edge_id: "e".repeat(edge_id_len),
            ..Default::default()
        };
        (
            response.encode_to_vec(),
            Envelope::correlated(correlation_id, response),
        )
    }

    #[test]
    fn push_with_writes_what_push_writes() {
        // Bodies whose length takes 1, 2 and 3 varint bytes (the gap before the
        // header varies), into an empty queue and behind queued frames.
        let mut with = Outbound::new(1 << 20, 1 << 20);
        let mut plain = Outbound::new(1 << 20, 1 << 20);
        for (i, (cid, len)) in [(0, 0), (1, 5), (300, 200), (u64::MAX, 20_000), (7, 127)]
            .into_iter()
            .enumerate()
        {
            let (body, envelope) = status(cid, len);
            assert!(
                with.push_with(&status_head(cid), |out| {
                    out.extend_from_slice(&body);
                    true
                })
                .unwrap()
            );
            plain.push(&envelope).unwrap();
            assert_eq!(with.queued_bytes(), plain.queued_bytes());
            if i % 2 == 0 {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                with.write_to(&mut a, usize::MAX);
                plain.write_to(&mut b, usize::MAX);
                assert_eq!(a, b);
                assert!(with.is_empty());
            }
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        with.write_to(&mut a, usize::MAX);
        plain.write_to(&mut b, usize::MAX);
        assert_eq!(a, b);
    }

    #[test]
    fn push_with_refuses_what_push_refuses_and_takes_it_back() {
        let (body, envelope) = status(9, 100);
        let frame = LENGTH_PREFIX_LEN + envelope.encoded_len();
        // Over the cap, behind a queued frame.
        let mut q = Outbound::new(frame + 4, 1024);
        q.push(&hb(1)).unwrap();
        let queued = q.queued_bytes();
        let err = q.push_with(&status_head(9), |out| {
            out.extend_from_slice(&body);
            true
        });
        assert_eq!(
            err,
            Err(OutboundError::Full {
                queued,
                frame,
                cap: frame + 4
            })
        );
        assert_eq!(q.queued_bytes(), queued);
        assert_eq!(q.bytes.len(), queued);
        // Over the frame limit.
        let mut q = Outbound::new(1 << 20, 50);
        let err = q.push_with(&status_head(9), |out| {
            out.extend_from_slice(&body);
            true
        });
        assert!(matches!(
            err,
            Err(OutboundError::FrameTooLarge { max: 50, .. })
        ));
        assert!(q.is_empty() && q.bytes.is_empty());
        // A writer that removes bytes loses the queue rather than send it broken.
        let mut q = Outbound::new(1 << 20, 1 << 20);
        q.push(&hb(1)).unwrap();
        let err = q.push_with(&status_head(9), |out| {
            out.truncate(2);
            true
        });
        assert!(matches!(err, Err(OutboundError::FrameTooLarge { .. })));
        assert!(q.is_empty());
        assert_eq!(q.write_to(&mut Vec::new(), usize::MAX), 0);
        // A writer that declines leaves the queue as it was.
        let mut q = Outbound::new(1 << 20, 1 << 20);
        q.push(&hb(1)).unwrap();
        let declined = q.push_with(&status_head(9), |out| {
            out.extend_from_slice(&body);
            false
        });
        assert_eq!(declined, Ok(false));
        assert_eq!(q.queued_bytes(), LENGTH_PREFIX_LEN + hb(1).encoded_len());
        assert_eq!(q.bytes.len(), q.queued_bytes());
    }

    #[test]
    fn memory_held_is_the_bytes_counted() {
        // 10-byte frames up to a 64 KiB cap: the buffer holds about the cap, not an
        // `Envelope` (168 bytes) per frame.
        let mut q = Outbound::new(64 * 1024, 1024);
        let mut n = 0;
        while q.push(&hb(1_000_000 + n)).is_ok() {
            n += 1;
        }
        assert!(n > 6_000, "{n} frames");
        assert!(q.queued_bytes() <= 64 * 1024);
        assert!(q.bytes.capacity() <= 128 * 1024, "{}", q.bytes.capacity());
        // Half sent, the rest still comes out whole and in order after more pushes.
        let mut buf = Vec::new();
        q.write_to(&mut buf, 32 * 1024);
        let sent = buf.len();
        q.push(&hb(1)).unwrap();
        while !q.is_empty() {
            q.write_to(&mut buf, usize::MAX);
        }
        let mut dec = FrameDecoder::new(1024);
        let mut input = buf.as_slice();
        for s in 0..n {
            assert_eq!(dec.decode(&mut input).unwrap(), Some(hb(1_000_000 + s)));
        }
        assert_eq!(dec.decode(&mut input).unwrap(), Some(hb(1)));
        assert!(input.is_empty() && sent > 0);
    }
}
