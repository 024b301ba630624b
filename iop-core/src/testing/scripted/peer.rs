//! Scripted fake peers on a [`Pair`]'s connections, over the pair's network (latency,
//! read splits, cut links) beside its real ends: a fake Edge the pair's Control
//! Plane serves ([`Pair::connect_scripted`]), and a fake Control Plane an Edge process
//! of the pair dials ([`Pair::add_edge_to_scripted_cp`]). The test writes the fake
//! peer's bytes and reads the frames the real end wrote to it.
//!
//! ```
//! use iop_core::cp::CpConfig;
//! use iop_core::proto::Body;
//! use iop_core::testing::scripted::edges::hello;
//! use iop_core::testing::{NetConfig, Pair};
//!
//! let mut pair = Pair::new(1, CpConfig::default(), NetConfig::default())?;
//! let conn = pair.connect_scripted(None);
//! pair.send_scripted(conn, hello("edge-1", &[]));
//! let frames = pair.take_scripted_frames(conn);
//! assert!(matches!(&frames[0].body, Some(Body::HelloResponse(r)) if r.accepted));
//! assert!(pair.monitor().violations().is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use super::wire::{Reader, frame};
use crate::cp::{ConnectionId, PeerIdentity};
use crate::edge::{self, EdgeConfig};
use crate::proto::Envelope;
use crate::registry::NodeRegistry;
use crate::testing::link::{Link, Segment};
use crate::testing::{Pair, Side};

/// What one scripted fake peer has received: a fake Edge from the Control Plane, or
/// a fake Control Plane from an Edge process.
#[derive(Debug)]
pub struct Peer {
    reader: Reader,
    /// Frames received and not yet taken.
    pub frames: Vec<Envelope>,
    /// The other end closed the connection, or the fake peer closed its own.
    pub closed: bool,
    /// Every byte received.
    pub bytes: Vec<u8>,
}

impl Peer {
    pub(crate) fn new() -> Self {
        Self {
            reader: Reader::new(u32::MAX),
            frames: Vec::new(),
            closed: false,
            bytes: Vec::new(),
        }
    }

    /// Takes in what arrived; false once the connection is closed.
    pub(crate) fn receive(&mut self, segment: Segment) -> bool {
        match segment {
            Segment::Data(bytes) => {
                let frames = self.reader.read(&bytes);
                self.frames.extend(frames);
                self.bytes.extend_from_slice(&bytes);
            }
            Segment::Fin => self.closed = true,
        }
        !self.closed
    }
}

impl Pair {
    /// Opens a connection whose Edge end the test scripts (its transport authenticated
    /// the peer as `identity`, if given); the monitor checks the CP's side of it only
    /// ([`Monitor::on_scripted`](crate::testing::Monitor::on_scripted)).
    ///
    /// # Panics
    /// If the CP refuses the connection id (it is new, so it never does).
    pub fn connect_scripted(&mut self, identity: Option<Box<dyn PeerIdentity>>) -> ConnectionId {
        self.next_conn += 1;
        let conn = ConnectionId(self.next_conn);
        self.monitor.on_scripted(conn);
        self.scripted.insert(conn, Peer::new());
        self.cp
            .handle_connect_with_identity(self.now, conn, identity)
            .expect("a new connection id");
        self.inputs.insert(conn);
        let link = self.new_link(None);
        self.links.insert(conn, link);
        self.pump();
        conn
    }

    /// The scripted Edge on `conn` writes `bytes` (delivered after the link's latency;
    /// call [`pump`](Self::pump) or [`advance`](Self::advance)). Nothing is written
    /// once its end is closed.
    pub fn write_scripted(&mut self, conn: ConnectionId, bytes: &[u8]) {
        self.scripted_write(conn, Side::Edge, bytes);
    }

    /// The scripted Edge on `conn` sends `envelope` as one frame, then the pair pumps.
    pub fn send_scripted(&mut self, conn: ConnectionId, envelope: impl Into<Envelope>) {
        self.write_scripted(conn, &frame(&envelope.into()));
        self.pump();
    }

    /// The scripted Edge on `conn` closes its end (FIN), then the pair pumps.
    pub fn close_scripted(&mut self, conn: ConnectionId) {
        self.scripted_close(conn, Side::Edge);
    }

    /// The scripted Edge on `conn`.
    pub fn scripted(&self, conn: ConnectionId) -> Option<&Peer> {
        self.scripted.get(&conn)
    }

    /// Takes the frames the scripted Edge on `conn` received.
    pub fn take_scripted_frames(&mut self, conn: ConnectionId) -> Vec<Envelope> {
        take_frames(&mut self.scripted, conn)
    }

    /// Starts an Edge process (as [`add_edge`](Self::add_edge)) whose every dial
    /// reaches a Control Plane the test scripts instead of the pair's: the test reads
    /// what it writes ([`take_cp_frames`](Self::take_cp_frames)) and answers
    /// ([`send_to_edge`](Self::send_to_edge)). Returns its index; its connection is
    /// [`conn_of`](Self::conn_of) once it dialled.
    pub fn add_edge_to_scripted_cp(
        &mut self,
        config: EdgeConfig,
        registry: NodeRegistry,
    ) -> Result<usize, edge::ConfigError> {
        let index = self.push_edge(config, registry, true)?;
        self.monitor.on_scripted_cp(index);
        Ok(index)
    }

    /// The scripted Control Plane on `conn` writes `bytes` to its Edge (delivered
    /// after the link's latency). Nothing is written once its end is closed.
    pub fn write_to_edge(&mut self, conn: ConnectionId, bytes: &[u8]) {
        self.scripted_write(conn, Side::Cp, bytes);
    }

    /// The scripted Control Plane on `conn` sends `envelope` as one frame, then the
    /// pair pumps.
    pub fn send_to_edge(&mut self, conn: ConnectionId, envelope: impl Into<Envelope>) {
        self.write_to_edge(conn, &frame(&envelope.into()));
        self.pump();
    }

    /// The scripted Control Plane on `conn` closes its end (FIN), then the pair pumps.
    pub fn close_to_edge(&mut self, conn: ConnectionId) {
        self.scripted_close(conn, Side::Cp);
    }

    /// The scripted Control Plane on `conn`.
    pub fn scripted_cp(&self, conn: ConnectionId) -> Option<&Peer> {
        self.scripted_cps.get(&conn)
    }

    /// Takes the frames the scripted Control Plane on `conn` received.
    pub fn take_cp_frames(&mut self, conn: ConnectionId) -> Vec<Envelope> {
        take_frames(&mut self.scripted_cps, conn)
    }

    /// The link of `conn` if its `end` is scripted and still open.
    fn scripted_link(&mut self, conn: ConnectionId, end: Side) -> Option<&mut Link> {
        let link = self.links.get_mut(&conn)?;
        let open = match end {
            Side::Edge => link.edge.is_none() && link.edge_open,
            Side::Cp => link.cp_scripted && link.cp_open,
        };
        open.then_some(link)
    }

    /// The scripted `end` of `conn` writes `bytes` toward the other end.
    fn scripted_write(&mut self, conn: ConnectionId, end: Side, bytes: &[u8]) {
        let now = self.now;
        if bytes.is_empty() {
            return;
        }
        let Some(link) = self.scripted_link(conn, end) else {
            return;
        };
        let data = Segment::Data(bytes.to_vec());
        match end {
            Side::Edge => link.send_to_cp(now, data),
            Side::Cp => link.send_to_edge(now, data),
        }
        self.hash
            .record(if end == Side::Edge { b's' } else { b'S' }, bytes);
    }

    /// The scripted `end` of `conn` closes (FIN), then the pair pumps.
    fn scripted_close(&mut self, conn: ConnectionId, end: Side) {
        let now = self.now;
        if let Some(link) = self.scripted_link(conn, end) {
            match end {
                Side::Edge => {
                    link.edge_open = false;
                    link.send_to_cp(now, Segment::Fin);
                }
                Side::Cp => {
                    link.cp_open = false;
                    link.send_to_edge(now, Segment::Fin);
                }
            }
        }
        let peers = match end {
            Side::Edge => &mut self.scripted,
            Side::Cp => &mut self.scripted_cps,
        };
        if let Some(peer) = peers.get_mut(&conn) {
            peer.closed = true;
        }
        self.pump();
    }
}

/// Takes the frames the peer on `conn` received.
fn take_frames(peers: &mut BTreeMap<ConnectionId, Peer>, conn: ConnectionId) -> Vec<Envelope> {
    peers
        .get_mut(&conn)
        .map(|p| std::mem::take(&mut p.frames))
        .unwrap_or_default()
}
