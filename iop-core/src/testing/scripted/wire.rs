//! What every scripted fake peer needs, whichever end it plays: frames encoded with
//! no limit (so tests can send what a real peer would refuse), and a reader that
//! decodes whatever the end under test wrote, in any split.

use crate::proto::{self, Envelope, FrameDecoder};

/// `envelope` as one frame on the wire (empty if it encodes to nothing: such a frame
/// cannot be on the wire).
pub fn frame(envelope: &Envelope) -> Vec<u8> {
    frames([envelope])
}

/// `envelopes` as consecutive frames on the wire.
pub fn frames<'a>(envelopes: impl IntoIterator<Item = &'a Envelope>) -> Vec<u8> {
    let mut wire = Vec::new();
    for e in envelopes {
        match proto::encode_frame(e, u32::MAX, &mut wire) {
            Err(proto::EncodeError::Empty) => {}
            r => {
                r.unwrap();
            }
        }
    }
    wire
}

/// Decodes one direction of a connection as the fake peer reads it.
#[derive(Debug)]
pub struct Reader {
    decoder: FrameDecoder,
}

impl Reader {
    /// A reader accepting frames up to `max_frame_len`.
    pub fn new(max_frame_len: u32) -> Self {
        Self {
            decoder: FrameDecoder::new(max_frame_len),
        }
    }

    /// Every frame `bytes` completes (a partial frame stays buffered).
    pub fn read(&mut self, bytes: &[u8]) -> Vec<Envelope> {
        let mut input = bytes;
        let mut out = Vec::new();
        while let Some(f) = self.decoder.decode(&mut input).unwrap() {
            out.push(f);
        }
        assert!(input.is_empty(), "the decoder buffers what it does not use");
        out
    }
}

/// `transmit`, checked: `Bytes` always hands out at least one byte.
pub(super) fn non_empty(transmit: crate::Transmit) -> crate::Transmit {
    assert_ne!(
        transmit,
        crate::Transmit::Bytes(0),
        "poll_transmit handed out no bytes"
    );
    transmit
}
