//! The cores floor of the 0-node status round trip: our two Sans-IO cores
//! (`ControlPlane`, `Edge`) each driven by a hand-written loop in one task, with no
//! driver (see the `codec_floor` bench). What the cores cost on the round trip, over
//! the codec floor of [`crate::floor`], with the least driving they allow.
//!
//! Each loop follows the core's driving contract (after every input, pull every
//! output) and reads the clock as our drivers do: once per input and once per
//! request. Timers are not driven: a run lasts seconds, less than a heartbeat
//! interval's worth of the liveness window, and nothing else times out in it.

use std::time::Duration;

use iop_tokio::Clock;
use iop_tokio::core::NodeRegistry;
use iop_tokio::core::cp::{ConnectionId, ControlPlane, CpConfig, CpEvent, EnrolmentPolicy};
use iop_tokio::core::edge::{Edge, EdgeConfig};
use iop_tokio::core::proto::EdgeStatusResponse;
use iop_tokio::core::{Transmit, drain_transmits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The connection id the floor's Control Plane gives its one Edge.
const CONN: ConnectionId = ConnectionId(1);

/// The cores floor's Control Plane end: a `ControlPlane` with one connection to a
/// cores-floor Edge, driven in the caller's task.
pub struct CoreFloorCp {
    stream: TcpStream,
    cp: ControlPlane,
    clock: Clock,
    edge_id: &'static str,
    out: Vec<u8>,
    buf: Vec<u8>,
}

impl CoreFloorCp {
    /// Spawns a cores-floor Edge as `edge_id` on `edge_rt`, accepts it, and brings
    /// its session to enrolled and fresh (hello accepted, first status answered).
    pub async fn connect(
        edge_rt: &tokio::runtime::Handle,
        edge_id: &'static str,
    ) -> Result<Self, BoxError> {
        let stream = accept_spawned(edge_rt, "cores floor edge", move |addr| {
            core_floor_edge(addr, edge_id)
        })
        .await?;
        let clock = Clock::new();
        let mut config = CpConfig::default();
        config.wall_clock = clock.wall_clock();
        let mut cp = ControlPlane::new(config, EnrolmentPolicy::AcceptAny)?;
        cp.handle_connect(clock.now(), CONN)?;
        let mut floor = Self {
            stream,
            cp,
            clock,
            edge_id,
            out: Vec::new(),
            buf: vec![0; 2048],
        };
        let enrol = async {
            while !floor.cp.edge(edge_id).is_some_and(|v| v.fresh) {
                floor.flush().await?;
                floor.read().await?;
                while floor.cp.poll_event().is_some() {}
            }
            Ok::<(), BoxError>(())
        };
        tokio::time::timeout(Duration::from_secs(10), enrol)
            .await
            .map_err(|_| "the cores floor edge never enrolled")??;
        floor.flush().await?;
        Ok(floor)
    }

    /// Writes everything the core has for the connection.
    async fn flush(&mut self) -> Result<(), BoxError> {
        self.out.clear();
        let (cp, out) = (&mut self.cp, &mut self.out);
        if drain_transmits(out, usize::MAX, |b| cp.poll_transmit(CONN, b)) == Transmit::Close {
            return Err("the core closed the connection".into());
        }
        while self.cp.poll_wakeup().is_some() {}
        if !self.out.is_empty() {
            self.stream.write_all(&self.out).await?;
        }
        Ok(())
    }

    /// One read, given to the core.
    async fn read(&mut self) -> Result<(), BoxError> {
        let n = self.stream.read(&mut self.buf).await?;
        if n == 0 {
            return Err("the cores floor edge closed".into());
        }
        let now = self.clock.now();
        self.cp
            .handle_bytes(now, CONN, self.buf.get(..n).unwrap_or_default());
        Ok(())
    }

    /// One status request out, its answer back (as the core's `StatusReceived`).
    pub async fn round_trip(&mut self) -> Result<EdgeStatusResponse, BoxError> {
        let now = self.clock.now();
        let request = self.cp.request_status(now, self.edge_id, vec![])?;
        self.flush().await?;
        loop {
            self.read().await?;
            self.flush().await?;
            while let Some(event) = self.cp.poll_event() {
                if let CpEvent::StatusReceived {
                    request: answered,
                    response,
                } = event
                    && answered == request
                {
                    return Ok(response);
                }
            }
        }
    }
}

/// The cores floor's Edge end: an `Edge` with an empty registry, connected to `addr`,
/// driven by one loop: read, give it to the core, write what it has.
async fn core_floor_edge(
    addr: std::net::SocketAddr,
    edge_id: &'static str,
) -> Result<(), BoxError> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let clock = Clock::new();
    let mut config = EdgeConfig::new(edge_id, iop_tokio::process_seed());
    config.wall_clock = clock.wall_clock();
    let mut edge = Edge::new(config, NodeRegistry::default())?;
    edge.handle_connected(clock.now())?;
    let mut buf = [0u8; 2048];
    let mut out = Vec::new();
    loop {
        out.clear();
        if drain_transmits(&mut out, usize::MAX, |b| edge.poll_transmit(b)) == Transmit::Close {
            return Ok(());
        }
        while edge.poll_event().is_some() {}
        if !out.is_empty() {
            stream.write_all(&out).await?;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        edge.handle_bytes(clock.now(), buf.get(..n).unwrap_or_default());
    }
}

/// Listens on 127.0.0.1, spawns `edge(address)` on `edge_rt` (a hand-written Edge that
/// connects there; its failure is printed as `what`'s), and returns the connection it
/// makes, with `TCP_NODELAY` on.
async fn accept_spawned<F, Fut>(
    edge_rt: &tokio::runtime::Handle,
    what: &'static str,
    edge: F,
) -> Result<TcpStream, BoxError>
where
    F: FnOnce(std::net::SocketAddr) -> Fut,
    Fut: std::future::Future<Output = Result<(), BoxError>> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let running = edge(listener.local_addr()?);
    edge_rt.spawn(async move {
        if let Err(e) = running.await {
            eprintln!("{what} failed: {e}");
        }
    });
    let (stream, _) = listener.accept().await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_answers_every_request_as_its_edge() -> Result<(), BoxError> {
        let rts = crate::TwoRuntimes::start()?;
        let edge = rts.edge().clone();
        rts.cp().block_on(async move {
            let mut cores = CoreFloorCp::connect(&edge, "edge-cores").await?;
            for _ in 0..3 {
                assert_eq!(cores.round_trip().await?.edge_id, "edge-cores");
            }
            // A round trip is one frame each way through the Control Plane's core,
            // on a session that stays up.
            let before = cores.cp.stats();
            cores.round_trip().await?;
            let after = cores.cp.stats();
            assert_eq!(after.frames_out - before.frames_out, 1);
            assert_eq!(after.frames_in - before.frames_in, 1);
            assert_eq!((after.live_sessions, after.protocol_errors), (1, 0));
            Ok(())
        })
    }
}
