//! The ordered outbound queue of one connection (SPEC §4.5, §7).
//!
//! Frames are queued as [`Envelope`]s and encoded only when the driver pulls them,
//! straight into the driver's buffer: no intermediate copy per frame. The queue counts
//! the encoded size of what it holds; past its cap the peer is too slow and the
//! connection is dropped (SPEC §7, default 8 MiB).

use std::collections::VecDeque;

use iop_proto::{Envelope, LENGTH_PREFIX_LEN, Message, encode_frame};

/// Default cap on bytes queued for one connection before the peer is dropped as too
/// slow (SPEC §7).
pub const DEFAULT_OUTBOUND_CAP: usize = 8 * 1024 * 1024;

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

/// An ordered queue of frames waiting to be written to one connection.
#[derive(Debug)]
pub(crate) struct Outbound {
    frames: VecDeque<(Envelope, usize)>,
    queued_bytes: usize,
    cap: usize,
    max_frame_len: u32,
}

impl Outbound {
    /// An empty queue holding at most `cap` encoded bytes of frames no larger than
    /// `max_frame_len`.
    pub(crate) fn new(cap: usize, max_frame_len: u32) -> Self {
        Self {
            frames: VecDeque::new(),
            queued_bytes: 0,
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
    pub(crate) fn push(&mut self, envelope: Envelope) -> Result<(), OutboundError> {
        let len = envelope.encoded_len();
        if len > self.max_frame_len as usize || len == 0 {
            return Err(OutboundError::FrameTooLarge {
                len,
                max: self.max_frame_len,
            });
        }
        let frame = LENGTH_PREFIX_LEN + len;
        if self.queued_bytes + frame > self.cap {
            return Err(OutboundError::Full {
                queued: self.queued_bytes,
                frame,
                cap: self.cap,
            });
        }
        self.queued_bytes += frame;
        self.frames.push_back((envelope, frame));
        Ok(())
    }

    /// Encodes queued frames onto the end of `buf`, oldest first, stopping before the
    /// frame that would take `buf` past `soft_limit` bytes (at least one frame is
    /// always written if any is queued). Returns the bytes written.
    pub(crate) fn write_to(&mut self, buf: &mut Vec<u8>, soft_limit: usize) -> usize {
        let start = buf.len();
        while let Some((_, frame)) = self.frames.front() {
            if buf.len() > start && buf.len() + frame > soft_limit {
                break;
            }
            let Some((envelope, frame)) = self.frames.pop_front() else {
                break;
            };
            self.queued_bytes -= frame;
            // Cannot fail: the size was checked against the limit when queued, and a
            // Vec always has room.
            let _ = encode_frame(&envelope, u32::MAX, buf);
        }
        buf.len() - start
    }

    /// True when nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Encoded bytes queued (prefixes included).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Releases the queue's slots when it is empty and holds more than `keep`, so an
    /// idle connection does not keep the memory of its largest burst.
    pub(crate) fn shrink_idle(&mut self, keep: usize) {
        if self.frames.is_empty() && self.frames.capacity() > keep {
            self.frames = VecDeque::new();
        }
    }

    /// Drops everything queued.
    pub(crate) fn clear(&mut self) {
        self.frames.clear();
        self.queued_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iop_proto::{FrameDecoder, Heartbeat};

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
            q.push(hb(s)).unwrap();
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
        q.push(hb(1)).unwrap();
        q.push(hb(2)).unwrap();
        assert!(matches!(q.push(hb(3)), Err(OutboundError::Full { .. })));
        assert_eq!(q.queued_bytes(), 2 * one);
    }

    #[test]
    fn soft_limit_splits_writes_but_always_makes_progress() {
        let mut q = Outbound::new(1024, 1024);
        q.push(hb(1)).unwrap();
        q.push(hb(2)).unwrap();
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
            q.push(big),
            Err(OutboundError::FrameTooLarge { max: 4, .. })
        ));
    }
}
