//! Checks on bytes a state machine wrote: they must be whole, valid frames.

use iop_proto::{DecodeLimits, Envelope, FrameDecoder};

/// Decodes everything a peer would read from `wire`, as it arrives in pieces.
///
/// Keeps a decoder with the protocol's limits; every frame must decode under them (what
/// we send, our peer must accept), and [`OutboundFrames::finish`] checks that the
/// stream ends on a frame boundary.
#[derive(Debug)]
pub struct OutboundFrames {
    decoder: FrameDecoder,
    frames: Vec<Envelope>,
}

impl OutboundFrames {
    /// A reader that accepts frames of at most `max_frame_len` bytes.
    pub fn new(max_frame_len: u32) -> Self {
        Self {
            decoder: FrameDecoder::with_limits(max_frame_len, DecodeLimits::default()),
            frames: Vec::new(),
        }
    }

    /// Changes the frame limit, for example once a hello response raised it.
    pub fn set_max_frame_len(&mut self, max_frame_len: u32) {
        self.decoder.set_max_frame_len(max_frame_len);
    }

    /// Feeds written bytes; returns how many new frames they completed.
    ///
    /// # Panics
    /// When the bytes are not valid frames.
    pub fn feed(&mut self, mut wire: &[u8]) -> usize {
        let before = self.frames.len();
        loop {
            match self.decoder.decode(&mut wire) {
                Ok(Some(envelope)) => self.frames.push(envelope),
                Ok(None) => break,
                Err(err) => panic!("wrote an invalid frame: {err}"),
            }
        }
        self.frames.len() - before
    }

    /// Every frame decoded so far, in order.
    pub fn frames(&self) -> &[Envelope] {
        &self.frames
    }

    /// Asserts the written stream ends between two frames.
    ///
    /// # Panics
    /// When a partial frame was written.
    pub fn finish(&self) {
        if let Err(err) = self.decoder.finish() {
            panic!("wrote a partial frame: {err}");
        }
    }
}
