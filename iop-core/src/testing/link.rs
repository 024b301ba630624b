//! One simulated TCP connection between the CP and an Edge process.

use std::collections::VecDeque;
use std::time::Duration;

use crate::Instant;
use crate::proto::{Envelope, LENGTH_PREFIX_LEN, Message};

/// What travels on one direction of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Bytes written by the sender.
    Data(Vec<u8>),
    /// The sender closed its end (FIN).
    Fin,
}

/// A link's state as the harness sees it.
#[derive(Debug)]
pub(crate) struct Link {
    /// Index of the Edge process at the other end; `None`: a scripted fake Edge
    /// ([`Pair::connect_scripted`](super::Pair::connect_scripted)).
    pub(crate) edge: Option<usize>,
    /// Segments on their way to the CP, with their arrival times (FIFO).
    pub(crate) to_cp: VecDeque<(Instant, Segment)>,
    /// Segments on their way to the Edge, with their arrival times (FIFO).
    pub(crate) to_edge: VecDeque<(Instant, Segment)>,
    pub(crate) latency_to_cp: Duration,
    pub(crate) latency_to_edge: Duration,
    /// The Control Plane end is scripted by the test
    /// ([`Pair::add_edge_to_scripted_cp`](super::Pair::add_edge_to_scripted_cp)), not
    /// the pair's real one.
    pub(crate) cp_scripted: bool,
    /// Everything sent from now on is lost, FINs included; neither end is told.
    pub(crate) cut: bool,
    /// The CP has not closed (or been told of the close of) this connection.
    pub(crate) cp_open: bool,
    /// The Edge process has not closed (or been told of the close of) this connection.
    pub(crate) edge_open: bool,
    /// Frames written by the Edge, for the invariant checks.
    pub(crate) tap_to_cp: FrameTap,
    /// Frames written by the CP, for the invariant checks.
    pub(crate) tap_to_edge: FrameTap,
}

impl Link {
    pub(crate) fn new(
        edge: Option<usize>,
        latency_to_cp: Duration,
        latency_to_edge: Duration,
    ) -> Self {
        Self {
            edge,
            to_cp: VecDeque::new(),
            to_edge: VecDeque::new(),
            latency_to_cp,
            latency_to_edge,
            cp_scripted: false,
            cut: false,
            cp_open: true,
            edge_open: true,
            tap_to_cp: FrameTap::default(),
            tap_to_edge: FrameTap::default(),
        }
    }

    /// Queues what the Edge wrote at `now`.
    pub(crate) fn send_to_cp(&mut self, now: Instant, segment: Segment) {
        if !self.cut {
            self.to_cp.push_back((now + self.latency_to_cp, segment));
        }
    }

    /// Queues what the CP wrote at `now`.
    pub(crate) fn send_to_edge(&mut self, now: Instant, segment: Segment) {
        if !self.cut {
            self.to_edge
                .push_back((now + self.latency_to_edge, segment));
        }
    }

    /// Loses everything in flight and everything sent later.
    pub(crate) fn cut(&mut self) {
        self.cut = true;
        self.to_cp.clear();
        self.to_edge.clear();
    }

    /// Both ends closed and nothing in flight: the link can be forgotten.
    pub(crate) fn is_done(&self) -> bool {
        !self.cp_open && !self.edge_open && self.to_cp.is_empty() && self.to_edge.is_empty()
    }
}

/// Splits one direction's byte stream into frames, with no limits, so the checks can
/// see every frame's true length.
#[derive(Debug, Default)]
pub(crate) struct FrameTap {
    buf: Vec<u8>,
    seen: usize,
}

/// One frame seen on the wire.
#[derive(Debug)]
pub(crate) struct TappedFrame {
    /// Body length from the prefix.
    pub(crate) len: usize,
    /// The body decoded, or `None` if it is not a valid `Envelope`.
    pub(crate) envelope: Option<Envelope>,
}

impl FrameTap {
    /// Complete frames seen so far.
    pub(crate) fn frames_seen(&self) -> usize {
        self.seen
    }

    /// Feeds written bytes; returns the frames they complete.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<TappedFrame> {
        self.buf.extend_from_slice(bytes);
        let mut frames = Vec::new();
        while let Some(prefix) = self.buf.get(..LENGTH_PREFIX_LEN) {
            let mut len_bytes = [0u8; 4];
            len_bytes.copy_from_slice(prefix);
            let len = u32::from_be_bytes(len_bytes) as usize;
            let end = LENGTH_PREFIX_LEN + len;
            let Some(body) = self.buf.get(LENGTH_PREFIX_LEN..end) else {
                break;
            };
            let envelope = Envelope::decode(body).ok();
            frames.push(TappedFrame { len, envelope });
            self.seen += 1;
            self.buf.drain(..end);
        }
        frames
    }
}
