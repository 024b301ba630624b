//! The faults a [`Pair`] can inject.

use std::time::Duration;

use super::link::Segment;
use super::pair::{Pair, Side};
use crate::cp::{self, ConfigError, ConnectionId, ControlPlane, CpConfig};

impl Pair {
    /// The transport of process `index` fails: both ends are told at once.
    pub fn disconnect(&mut self, index: usize) {
        let Some(conn) = self.conn_of(index) else {
            return;
        };
        if let Some(link) = self.links.get_mut(&conn) {
            link.cut();
            if link.cp_open {
                link.cp_open = false;
                self.cp.handle_closed(self.now, conn);
            }
            link.edge_open = false;
        }
        if let Some(p) = self.edges.get_mut(index) {
            p.conn = None;
            p.edge.handle_closed(self.now);
        }
        self.pump();
    }

    /// The link of process `index` goes dark: every byte (and FIN) in flight or sent
    /// later is lost, and neither end is told; liveness must notice.
    pub fn cut(&mut self, index: usize) {
        if let Some(link) = self.conn_of(index).and_then(|c| self.links.get_mut(&c)) {
            link.cut();
        }
    }

    /// The link of process `index` becomes half-open: `told` learns it is closed, the
    /// other end does not, and nothing more crosses it.
    pub fn half_open(&mut self, index: usize, told: Side) {
        let Some(conn) = self.conn_of(index) else {
            return;
        };
        self.cut(index);
        match told {
            Side::Cp => {
                if let Some(link) = self.links.get_mut(&conn)
                    && link.cp_open
                {
                    link.cp_open = false;
                    self.cp.handle_closed(self.now, conn);
                }
            }
            Side::Edge => {
                if let Some(link) = self.links.get_mut(&conn) {
                    link.edge_open = false;
                }
                if let Some(p) = self.edges.get_mut(index) {
                    p.conn = None;
                    p.edge.handle_closed(self.now);
                }
            }
        }
        self.pump();
    }

    /// Partitions process `index` from the CP (its link is cut, its dials fail) or
    /// heals the partition.
    pub fn partition(&mut self, index: usize, on: bool) {
        if on {
            self.cut(index);
        }
        if let Some(p) = self.edges.get_mut(index) {
            p.partitioned = on;
        }
    }

    /// Process `index` dies. With `fin` its OS closes the socket (the CP hears of it
    /// after the latency); without, the CP's end stays half-open.
    pub fn crash(&mut self, index: usize, fin: bool) {
        let now = self.now;
        let Some(p) = self.edges.get_mut(index) else {
            return;
        };
        p.alive = false;
        if let Some(link) = p.conn.take().and_then(|c| self.links.get_mut(&c)) {
            link.edge_open = false;
            if fin {
                link.send_to_cp(now, Segment::Fin);
            } else {
                link.cut();
            }
        }
    }

    /// The CP's host stalls for `d`: it reads, writes and handles timers only after.
    pub fn silence_cp(&mut self, d: Duration) {
        self.cp_silent_until = self.cp_silent_until.max(self.now + d);
    }

    /// The runtime reports a close for a connection the CP already forgot (or never
    /// had): it must change nothing.
    pub fn stale_close(&mut self) {
        let live: Vec<ConnectionId> = self.links.keys().copied().collect();
        let stale = (1..=self.next_conn)
            .map(ConnectionId)
            .find(|c| !live.contains(c))
            .unwrap_or(ConnectionId(u64::MAX));
        self.cp.handle_closed(self.now, stale);
        self.pump();
    }

    /// The CP restarts with `config` (its `session_id_floor` should exceed every
    /// session id issued so far): every connection drops and the new CP knows nothing.
    pub fn restart_cp(&mut self, config: CpConfig) -> Result<(), ConfigError> {
        self.cp = ControlPlane::new(config, cp::EnrolmentPolicy::AcceptAny)?;
        let conns: Vec<ConnectionId> = self.links.keys().copied().collect();
        for conn in conns {
            if let Some(index) = self.links.get(&conn).and_then(|l| l.edge)
                && let Some(p) = self.edges.get_mut(index)
                && p.conn == Some(conn)
            {
                p.conn = None;
                p.edge.handle_closed(self.now);
            }
        }
        self.links.clear();
        self.monitor.forget_cp();
        self.pump();
        Ok(())
    }
}
