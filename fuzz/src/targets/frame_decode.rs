//! `frame_decode`: raw bytes, cut into fuzzer-chosen reads, into a [`FrameDecoder`].
//!
//! Input: one config byte, then a [`Splits`] header, then the byte stream.
//! Config bits 0–1 pick `max_frame_len` (4 MiB, 64 KiB, 64, 7), bit 2 picks
//! [`tight_limits`] instead of the protocol's, bit 3 raises `max_frame_len` to 4 MiB after
//! the first frame (what a CP does once the hello is accepted).
//!
//! Checked: no panic; the decoder never holds more than `max_frame_len + 4` bytes nor
//! a body buffer larger than `max_frame_len`; `Ok(None)` only once the read is used
//! up; errors are sticky (same error, nothing consumed, buffer released) and
//! `finish` repeats them; and the frames and the final outcome are exactly those of
//! decoding the whole stream in one read (PROTOCOL.md §2: any split, same frames).

use iop_proto::{
    DEFAULT_MAX_FRAME_LEN, DecodeLimits, Envelope, FrameDecoder, FrameError, LENGTH_PREFIX_LEN,
    PRE_HELLO_MAX_FRAME_LEN,
};

use super::tight_limits;
use crate::split::Splits;

#[derive(Debug, Clone, Copy)]
struct Config {
    max_frame_len: u32,
    limits: DecodeLimits,
    raise_after_first: bool,
}

impl Config {
    fn from_byte(byte: u8) -> Self {
        Self {
            max_frame_len: match byte & 3 {
                0 => DEFAULT_MAX_FRAME_LEN,
                1 => PRE_HELLO_MAX_FRAME_LEN,
                2 => 64,
                _ => 7,
            },
            limits: if byte & 4 == 0 {
                DecodeLimits::default()
            } else {
                tight_limits()
            },
            raise_after_first: byte & 8 != 0,
        }
    }

    fn decoder(&self) -> FrameDecoder {
        FrameDecoder::with_limits(self.max_frame_len, self.limits)
    }

    /// What the receiver does after each frame.
    fn after_frame(&self, decoder: &mut FrameDecoder) {
        if self.raise_after_first {
            decoder.set_max_frame_len(DEFAULT_MAX_FRAME_LEN);
        }
    }
}

/// The frames decoded and how the stream ended (an error, or `finish`'s verdict).
type Outcome = (Vec<Envelope>, Result<(), FrameError>);

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some((&config, rest)) = data.split_first() else {
        return;
    };
    let config = Config::from_byte(config);
    let (splits, stream) = Splits::parse(rest);

    let mut decoder = config.decoder();
    let mut frames = Vec::new();
    let mut ended = None;
    'reads: for chunk in splits.chunks(stream) {
        let mut input = chunk;
        loop {
            let before = input.len();
            let result = decoder.decode(&mut input);
            check_bounds(&decoder);
            match result {
                Ok(Some(envelope)) => {
                    assert!(input.len() < before, "a frame out of no bytes");
                    assert!(decoder.is_at_boundary());
                    frames.push(envelope);
                    config.after_frame(&mut decoder);
                }
                Ok(None) => {
                    assert!(input.is_empty(), "Ok(None) with {} bytes left", input.len());
                    break;
                }
                Err(err) => {
                    check_sticky(&mut decoder, &err, input);
                    ended = Some(Err(err));
                    break 'reads;
                }
            }
        }
    }
    let ended = ended.unwrap_or_else(|| decoder.finish());
    assert_eq!((frames, ended), decode_in_one_read(config, stream));
}

fn check_bounds(decoder: &FrameDecoder) {
    let max = decoder.max_frame_len() as usize;
    assert!(
        decoder.buffered() <= max + LENGTH_PREFIX_LEN,
        "buffered {} > max {max} + 4",
        decoder.buffered()
    );
    assert!(
        decoder.capacity() <= max,
        "body capacity {} > max {max}",
        decoder.capacity()
    );
    assert_eq!(decoder.is_at_boundary(), decoder.buffered() == 0);
}

fn check_sticky(decoder: &mut FrameDecoder, err: &FrameError, rest: &[u8]) {
    assert_eq!(decoder.error(), Some(err));
    assert_eq!(decoder.capacity(), 0, "buffer kept after an error");
    for more in [rest, &[0, 0, 0, 5, 0x62, 0x03, 0x08, 0x01, 0x10][..], &[]] {
        let mut input = more;
        assert_eq!(decoder.decode(&mut input).as_ref(), Err(err));
        assert_eq!(input.len(), more.len(), "consumed bytes after an error");
    }
    assert_eq!(decoder.finish().as_ref(), Err(err));
}

fn decode_in_one_read(config: Config, stream: &[u8]) -> Outcome {
    let mut decoder = config.decoder();
    let mut input = stream;
    let mut frames = Vec::new();
    loop {
        match decoder.decode(&mut input) {
            Ok(Some(envelope)) => {
                frames.push(envelope);
                config.after_frame(&mut decoder);
            }
            Ok(None) => return (frames, decoder.finish()),
            Err(err) => return (frames, Err(err)),
        }
    }
}
