//! What a core hands its driver to write: the one [`Transmit`] of both ends, and
//! [`drain_transmits`], the loop every driver runs after an input.
//!
//! ```
//! use iop_core::cp::{ConnectionId, ControlPlane, CpConfig, EnrolmentPolicy};
//! use iop_core::{Instant, Transmit, drain_transmits};
//!
//! let mut cp = ControlPlane::new(CpConfig::default(), EnrolmentPolicy::AcceptAny)?;
//! let conn = ConnectionId(1);
//! cp.handle_connect(Instant::ZERO, conn)?;
//! // Not a frame: the CP answers `GoAway{PROTOCOL_ERROR}`, then closes.
//! cp.handle_bytes(Instant::ZERO, conn, &[0xff; 8]);
//! let mut out = Vec::new();
//! assert_eq!(drain_transmits(&mut out, usize::MAX, |buf| cp.poll_transmit(conn, buf)), Transmit::Close);
//! assert!(!out.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// What one `poll_transmit` call did, on either end.
///
/// Exhaustive on purpose: a new instruction must break a driver's build rather than
/// fall into a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Transmit {
    /// This many bytes were appended to the buffer: write them, and poll again.
    Bytes(usize),
    /// Nothing to send now: wait for input, a timeout or (Control Plane) a wakeup.
    Idle,
    /// Every final byte has been handed out and the core is done with this transport:
    /// write what you hold, then close it. The core needs no further call about it
    /// (`handle_closed` afterwards is harmless).
    Close,
}

/// Polls `poll` (a core's `poll_transmit`) into `out` until the core has nothing more
/// ([`Transmit::Idle`]), is done with the transport ([`Transmit::Close`]), or `out`
/// holds at least `limit` bytes (`Transmit::Bytes` with the bytes this call appended:
/// write them, then drain again). `usize::MAX` drains everything.
pub fn drain_transmits(
    out: &mut Vec<u8>,
    limit: usize,
    mut poll: impl FnMut(&mut Vec<u8>) -> Transmit,
) -> Transmit {
    let start = out.len();
    while out.len() < limit {
        match poll(out) {
            Transmit::Bytes(_) => {}
            done => return done,
        }
    }
    Transmit::Bytes(out.len() - start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::{Edge, EdgeConfig, EdgeEvent};
    use crate::time::Instant;

    #[test]
    fn an_edge_that_closes_needs_no_handle_closed() {
        let mut edge = Edge::new(EdgeConfig::new("edge-1", 7), ()).expect("valid config");
        let now = Instant::ZERO;
        edge.handle_connected(now).expect("dialled when asked");
        let mut out = Vec::new();
        assert_eq!(
            drain_transmits(&mut out, usize::MAX, |b| edge.poll_transmit(b)),
            Transmit::Idle
        );
        assert_eq!(edge.poll_connect_at(), None, "a transport is up");
        // Not a frame: the Edge says GoAway{PROTOCOL_ERROR} and ends the session.
        edge.handle_bytes(now, &[0xff; 8]);
        out.clear();
        assert_eq!(
            drain_transmits(&mut out, usize::MAX, |b| edge.poll_transmit(b)),
            Transmit::Close
        );
        assert!(!out.is_empty(), "the GoAway went out first");
        let connect_at = edge
            .poll_connect_at()
            .expect("disconnected, with a time to dial");
        // A transport error reported afterwards changes nothing.
        edge.handle_closed(now);
        assert_eq!(edge.poll_connect_at(), Some(connect_at));
        let closed = std::iter::from_fn(|| edge.poll_event())
            .filter(|e| matches!(e, EdgeEvent::Closed { .. }))
            .count();
        assert_eq!(closed, 1);
        assert_eq!(
            edge.poll_transmit(&mut out),
            Transmit::Close,
            "no transport is up"
        );
    }

    #[test]
    fn a_full_buffer_stops_the_drain_with_what_it_appended() {
        let mut calls = 0;
        let mut out = vec![0u8; 3];
        let got = drain_transmits(&mut out, 10, |b| {
            calls += 1;
            b.extend_from_slice(&[1; 4]);
            Transmit::Bytes(4)
        });
        assert_eq!((got, calls, out.len()), (Transmit::Bytes(8), 2, 11));
    }
}
