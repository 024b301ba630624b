//! The cross-side oracle of PROTOCOL.md §4.6: whatever a sending API is given, it either
//! refuses with its typed error, or everything it queued is accepted by the *peer's*
//! decoder with the peer's limits.
//!
//! Per-side fuzzing cannot find a frame the peer must refuse: each side is right about
//! what it receives. [`check`] drives one sending API of one side with a [`Case`] and
//! decodes every byte that side writes with a decoder set up as the peer's is
//! ([`DecodeLimits::SPEC`], the peer's frame limit), and, where the peer is a core of
//! this crate, hands the bytes to it and checks it found no fault. The proptest
//! `tests/sender_limits.rs` and the fuzz target `sender_limits` both run it.
//!
//! ```
//! use iop_core::testing::sender::{Case, CommandCase, Verdict, check};
//!
//! let case = Case::Command(CommandCase {
//!     operation: "edge.ping".into(),
//!     selector: String::new(),
//!     metadata: vec![("note".into(), "x".repeat(5_000))],
//!     command_id: None,
//! });
//! // Over the 4 KiB a metadata value may have: refused, nothing sent.
//! assert!(matches!(check(&case), Ok(Verdict::Refused(_))));
//! ```

use std::collections::BTreeMap;

use iop_proto::{
    Body, DecodeLimits, EdgeHelloResponse, Envelope, FrameDecoder, PRE_HELLO_MAX_FRAME_LEN,
    encode_frame,
};

use crate::Instant;
use crate::cp::{self, CommandSpec, ConnectionId, ControlPlane, CpConfig, CpEvent};
use crate::edge::{self, Edge, EdgeConfig, EdgeEvent, EdgeRegistry, Outcome, TargetLevel};
use crate::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};

mod cases;

pub use cases::{
    Case, CommandCase, ConfigCase, NodeShape, RegistryCase, ReportCase, StatusCase, Verdict,
};

/// Runs `case`; `Err` says how the property broke.
pub fn check(case: &Case) -> Result<Verdict, String> {
    match case {
        Case::Command(c) => command(c),
        Case::Status(c) => status(c),
        Case::Report(c) => report(c),
        Case::Config(c) => config(c),
        Case::Registry(c) => registry(c),
    }
}

/// Decodes every frame in `bytes` as the peer does.
fn decode_all(bytes: &[u8], max_frame_len: u32, who: &str) -> Result<Vec<Envelope>, String> {
    let mut decoder = FrameDecoder::with_limits(max_frame_len, DecodeLimits::SPEC);
    let mut input = bytes;
    let mut frames = Vec::new();
    loop {
        match decoder.decode(&mut input) {
            Ok(Some(e)) => frames.push(e),
            Ok(None) => break,
            Err(e) => return Err(format!("{who} wrote a frame its peer refuses: {e}")),
        }
    }
    decoder
        .finish()
        .map_err(|e| format!("{who} left a partial frame: {e}"))?;
    Ok(frames)
}

fn pull_edge<R: EdgeRegistry>(edge: &mut Edge<R>) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = crate::drain_transmits(&mut out, usize::MAX, |b| edge.poll_transmit(b));
    out
}

fn pull_cp(cp: &mut ControlPlane, conn: ConnectionId) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = crate::drain_transmits(&mut out, usize::MAX, |b| cp.poll_transmit(conn, b));
    out
}

/// A real Control Plane and a real Edge on one connection, every byte checked with
/// the receiver's decoder on the way.
struct Link {
    cp: ControlPlane,
    edge: Edge<NodeRegistry>,
    conn: ConnectionId,
    now: Instant,
    /// Frames the Edge received, in order.
    to_edge: Vec<Envelope>,
}

impl Link {
    fn new(config: EdgeConfig, registry: NodeRegistry) -> Result<Self, String> {
        let cp = ControlPlane::new(CpConfig::default(), cp::EnrolmentPolicy::AcceptAny)
            .map_err(|e| e.to_string())?;
        let edge = Edge::new(config, registry).map_err(|e| format!("edge config: {e}"))?;
        let mut link = Link {
            cp,
            edge,
            conn: ConnectionId(1),
            now: Instant::ZERO,
            to_edge: Vec::new(),
        };
        link.cp
            .handle_connect(link.now, link.conn)
            .map_err(|e| e.to_string())?;
        link.edge
            .handle_connected(link.now)
            .map_err(|e| e.to_string())?;
        link.pump()?;
        if !link.edge.is_connected() {
            return Err("the hello was not accepted".into());
        }
        Ok(link)
    }

    /// Moves bytes both ways until neither side writes; fails on a frame the receiver
    /// refuses or a fault either side finds.
    fn pump(&mut self) -> Result<(), String> {
        for _ in 0..64 {
            let up = pull_edge(&mut self.edge);
            let limit = match self.cp.session_of(self.conn) {
                Some(_) => self.cp.config().max_frame_len,
                None => PRE_HELLO_MAX_FRAME_LEN,
            };
            decode_all(&up, limit, "the Edge")?;
            self.cp.handle_bytes(self.now, self.conn, &up);
            let down = pull_cp(&mut self.cp, self.conn);
            self.to_edge.extend(decode_all(
                &down,
                self.edge.config().max_frame_len,
                "the CP",
            )?);
            self.edge.handle_bytes(self.now, &down);
            while self.cp.poll_wakeup().is_some() {}
            while let Some(e) = self.cp.poll_event() {
                if let CpEvent::Closed { reason, .. } = e {
                    return Err(format!("the CP closed the session: {reason:?}"));
                }
            }
            while let Some(e) = self.edge.poll_event() {
                if let EdgeEvent::Closed { reason, .. } = e {
                    return Err(format!("the Edge closed the session: {reason:?}"));
                }
            }
            if up.is_empty() && down.is_empty() {
                return Ok(());
            }
        }
        Err("the link never settled".into())
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= iop_proto::limits::MAX_ID_LEN
}

fn command(c: &CommandCase) -> Result<Verdict, String> {
    let mut config = EdgeConfig::new("edge-1", 1).with_operation("edge.ping", TargetLevel::Edge);
    if valid_name(&c.operation) {
        config = config.with_operation(c.operation.clone(), TargetLevel::Edge);
    }
    let mut link = Link::new(config, NodeRegistry::new())?;
    let before = link.to_edge.len();
    let mut spec = CommandSpec::new(c.operation.clone()).with_target(c.selector.clone());
    spec.metadata = c.metadata.iter().cloned().collect();
    spec.command_id = c.command_id.clone().unwrap_or_default();
    match link.cp.send_command(link.now, "edge-1", spec) {
        Err(e) => Ok(Verdict::Refused(e.to_string())),
        Ok(_) => {
            link.pump()?;
            let sent = link.to_edge.len() - before;
            if sent == 0 {
                return Err("send_command returned Ok and sent nothing".into());
            }
            Ok(Verdict::Sent(sent))
        }
    }
}

fn status(c: &StatusCase) -> Result<Verdict, String> {
    let mut link = Link::new(EdgeConfig::new("edge-1", 1), NodeRegistry::new())?;
    let before = link.to_edge.len();
    match link
        .cp
        .request_status(link.now, "edge-1", c.node_ids.clone())
    {
        Err(e) => Ok(Verdict::Refused(e.to_string())),
        Ok(_) => {
            link.pump()?;
            Ok(Verdict::Sent(link.to_edge.len() - before))
        }
    }
}

/// A hand-made Control Plane for the Edge-side cases: it accepts with any announced
/// `max_frame_len` of at least 64 KiB, which a [`ControlPlane`] of this crate (256 KiB
/// at least) does not.
struct FakeCp {
    max_frame_len: u32,
    session: u64,
}

impl FakeCp {
    /// Dials, checks the hello as the CP's pre-hello decoder would, accepts.
    fn accept<R: EdgeRegistry>(
        &mut self,
        edge: &mut Edge<R>,
        now: Instant,
    ) -> Result<Vec<Envelope>, String> {
        edge.handle_connected(now).map_err(|e| e.to_string())?;
        let hello = decode_all(&pull_edge(edge), PRE_HELLO_MAX_FRAME_LEN, "the Edge")?;
        self.session += 1;
        let accept = EdgeHelloResponse {
            accepted: true,
            protocol_version: 1,
            session_id: self.session,
            max_frame_len: self.max_frame_len,
            ..Default::default()
        };
        self.deliver(edge, now, Envelope::new(accept))?;
        let mut frames = hello;
        frames.extend(decode_all(
            &pull_edge(edge),
            self.max_frame_len,
            "the Edge",
        )?);
        Ok(frames)
    }

    fn deliver<R: EdgeRegistry>(
        &self,
        edge: &mut Edge<R>,
        now: Instant,
        envelope: Envelope,
    ) -> Result<(), String> {
        let mut wire = Vec::new();
        encode_frame(&envelope, u32::MAX, &mut wire).map_err(|e| e.to_string())?;
        edge.handle_bytes(now, &wire);
        while let Some(e) = edge.poll_event() {
            if let EdgeEvent::Closed { reason, .. } = e {
                return Err(format!("the Edge closed the session: {reason:?}"));
            }
        }
        Ok(())
    }

    /// What the Edge wrote since, decoded as this CP does.
    fn read<R: EdgeRegistry>(&self, edge: &mut Edge<R>) -> Result<Vec<Envelope>, String> {
        decode_all(&pull_edge(edge), self.max_frame_len, "the Edge")
    }
}

fn legal_cp_limit(n: u32) -> u32 {
    n.max(iop_proto::limits::MIN_MAX_FRAME_LEN)
}

fn report(c: &ReportCase) -> Result<Verdict, String> {
    let config = EdgeConfig::new("edge-1", 1).with_operation("edge.ping", TargetLevel::Edge);
    let mut edge = Edge::new(config, ()).map_err(|e| e.to_string())?;
    let mut cp = FakeCp {
        max_frame_len: legal_cp_limit(c.cp_max_frame_len),
        session: 0,
    };
    let now = Instant::ZERO;
    cp.accept(&mut edge, now)?;
    let request = iop_proto::EdgeCommandRequest {
        command_id: "c1".into(),
        operation: "edge.ping".into(),
        ..Default::default()
    };
    cp.deliver(&mut edge, now, Envelope::new(request))?;
    cp.read(&mut edge)?;
    if c.while_disconnected {
        edge.handle_closed(now);
        while edge.poll_event().is_some() {}
    }
    let detail: BTreeMap<String, String> = c.detail.iter().cloned().collect();
    let reported = if c.terminal {
        edge.report_outcome(now, "c1", Outcome::Succeeded, c.message.clone(), detail)
    } else {
        edge.report_running(now, "c1", c.message.clone(), detail)
    };
    if let Err(e) = reported {
        return Ok(Verdict::Refused(e.to_string()));
    }
    let frames = if c.while_disconnected {
        let at = edge.poll_connect_at().unwrap_or(now);
        cp.max_frame_len = legal_cp_limit(c.next_cp_max_frame_len);
        cp.accept(&mut edge, at)?
    } else {
        cp.read(&mut edge)?
    };
    let events: Vec<&iop_proto::EdgeCommandEvent> = frames
        .iter()
        .filter_map(|f| match &f.body {
            Some(Body::CommandEvent(e)) => Some(e),
            _ => None,
        })
        .collect();
    let [event] = events[..] else {
        return Err(format!(
            "report() returned Ok and {} events went out",
            events.len()
        ));
    };
    // Reported on a live session, it goes out as given; only a replay to a CP with
    // a lower limit than the one it was reported under may leave its detail out.
    let same = event.message == c.message && event.detail == c.detail.iter().cloned().collect();
    if !same && !c.while_disconnected {
        return Err("report() returned Ok but the event went out changed".into());
    }
    Ok(Verdict::Sent(1))
}

fn config(c: &ConfigCase) -> Result<Verdict, String> {
    let mut config = EdgeConfig::new(c.edge_id.clone(), 1);
    for op in &c.operations {
        config = config.with_operation(op.clone(), TargetLevel::Edge);
    }
    config.metadata = c.metadata.iter().cloned().collect();
    config.software_version = c.software_version.clone();
    config.credential = c.credential.clone().into();
    config.max_inflight_commands = c.max_inflight_commands;
    config.max_retained_commands = c.max_retained_commands;
    config.max_frame_len = c.max_frame_len;
    let mut edge = match Edge::new(config, ()) {
        Ok(edge) => edge,
        Err(e) => return Ok(Verdict::Refused(e.to_string())),
    };
    // A real CP takes the hellos: a config the Edge accepted must say a hello the CP
    // accepts, also once it lists every command it holds.
    let mut cp = ControlPlane::new(CpConfig::default(), cp::EnrolmentPolicy::AcceptAny)
        .map_err(|e| e.to_string())?;
    let mut now = Instant::ZERO;
    let mut hellos = 0;
    for (round, conn) in [ConnectionId(1), ConnectionId(2)].into_iter().enumerate() {
        cp.handle_connect(now, conn).map_err(|e| e.to_string())?;
        edge.handle_connected(now).map_err(|e| e.to_string())?;
        let hello = pull_edge(&mut edge);
        decode_all(&hello, PRE_HELLO_MAX_FRAME_LEN, "the Edge")?;
        hellos += 1;
        cp.handle_bytes(now, conn, &hello);
        let answer = decode_all(&pull_cp(&mut cp, conn), u32::MAX, "the CP")?;
        match answer.first().and_then(|f| f.body.as_ref()) {
            Some(Body::HelloResponse(r)) if r.accepted => {}
            other => return Err(format!("the CP did not accept the hello: {other:?}")),
        }
        edge.handle_bytes(now, &encoded(&answer)?);
        if round == 1 {
            // Every command the Edge holds is listed.
            let listed = decode_all(&hello, PRE_HELLO_MAX_FRAME_LEN, "the Edge")?
                .into_iter()
                .find_map(|f| match f.body {
                    Some(Body::HelloRequest(h)) => Some(h.inflight_command_ids.len()),
                    _ => None,
                })
                .unwrap_or(0);
            // Each finished one ran alone first: none is accepted with no room to run.
            let held = match c.max_inflight_commands {
                0 => 0,
                room => c.finished.min(c.max_retained_commands) + c.running.min(room),
            };
            if c.operations.first().is_some_and(|op| valid_name(op)) && listed != held {
                return Err(format!("the hello listed {listed} of {held} held commands"));
            }
            break;
        }
        // Hold commands (finished ones first), then reconnect.
        for i in 0..c.finished + c.running {
            let id = format!("{i:0>128}");
            let request = iop_proto::EdgeCommandRequest {
                command_id: id.clone(),
                operation: c.operations.first().cloned().unwrap_or_default(),
                ..Default::default()
            };
            let mut wire = Vec::new();
            encode_frame(&Envelope::new(request), u32::MAX, &mut wire)
                .map_err(|e| e.to_string())?;
            edge.handle_bytes(now, &wire);
            if i < c.finished {
                let _ = edge.report_outcome(now, &id, Outcome::Succeeded, "", BTreeMap::new());
            }
            // The Edge's answers are read as they come (its outbound cap stands).
            decode_all(&pull_edge(&mut edge), u32::MAX, "the Edge")?;
        }
        pull_edge(&mut edge);
        edge.handle_closed(now);
        cp.handle_closed(now, conn);
        now = edge.poll_connect_at().unwrap_or(now);
        while edge.poll_event().is_some() {}
        while cp.poll_event().is_some() {}
    }
    Ok(Verdict::Sent(hellos))
}

fn encoded(frames: &[Envelope]) -> Result<Vec<u8>, String> {
    let mut wire = Vec::new();
    for f in frames {
        encode_frame(f, u32::MAX, &mut wire).map_err(|e| e.to_string())?;
    }
    Ok(wire)
}

fn registry(c: &RegistryCase) -> Result<Verdict, String> {
    let mut registry = NodeRegistry::new();
    for (i, shape) in c.nodes.iter().enumerate() {
        let mut node = NodeConfig::new(shape.node_id.clone());
        for l in 0..shape.labels {
            node = node.with_label(format!("l{l}"), "v");
        }
        for p in 0..shape.providers {
            let mut provider =
                ProviderConfig::new(format!("p{p}"), ProviderCategory::LocalInference, 4, 1);
            for m in 0..shape.models {
                provider = provider.with_model(format!("{m}{}", "m".repeat(shape.model_len)));
            }
            node = node.with_provider(provider);
        }
        if registry.configure(node, i as u64).is_err() {
            continue;
        }
        if shape.ready
            && let Ok(generation) = registry.connect(&shape.node_id, 0)
        {
            let _ = registry.mark_ready(&shape.node_id, generation, 0);
        }
    }
    if c.naive {
        // Node by node: the registry's own answers would already keep to the limits.
        let ids: Vec<String> = registry.node_ids().map(str::to_owned).collect();
        let nodes = ids
            .iter()
            .flat_map(|id| registry.snapshot("edge-1", 0, &[id], usize::MAX).nodes)
            .collect();
        let naive = Naive(nodes);
        let edge = Edge::new(EdgeConfig::new("edge-1", 1), naive).map_err(|e| e.to_string())?;
        return answer(edge, c);
    }
    let edge = Edge::new(EdgeConfig::new("edge-1", 1), registry).map_err(|e| e.to_string())?;
    answer(edge, c)
}

/// A custom registry that fills a snapshot while the byte budget lasts, and knows no
/// other limit: the Edge must check what it writes.
struct Naive(Vec<iop_proto::EdgeNodeSnapshot>);

impl EdgeRegistry for Naive {
    fn snapshot(
        &self,
        edge_id: &str,
        scope: edge::StatusScope<'_>,
        observed_at_unix_ms: u64,
        max_encoded_len: usize,
    ) -> iop_proto::EdgeStatusResponse {
        use iop_proto::Message;
        let mut response = iop_proto::EdgeStatusResponse {
            edge_id: edge_id.to_owned(),
            observed_at_unix_ms,
            ..Default::default()
        };
        let mut used = response.encoded_len() + 2;
        for node in &self.0 {
            if !scope.includes(&node.node_id) {
                continue;
            }
            let len = node.encoded_len();
            used += iop_proto::encoding::delimited_len(len);
            if used > max_encoded_len {
                response.truncated = true;
                break;
            }
            response.nodes.push(node.clone());
        }
        response
    }

    fn resolve(
        &self,
        _selector: &crate::registry::Selector,
    ) -> Result<crate::registry::Target, crate::registry::ResolveError> {
        Err(crate::registry::ResolveError::NoMatchingTarget)
    }

    fn poll_lifecycle_event(&mut self) -> Option<edge::LifecycleEvent> {
        None
    }
}

fn answer<R: EdgeRegistry>(mut edge: Edge<R>, c: &RegistryCase) -> Result<Verdict, String> {
    let mut cp = FakeCp {
        max_frame_len: legal_cp_limit(c.cp_max_frame_len),
        session: 0,
    };
    let now = Instant::ZERO;
    cp.accept(&mut edge, now)?;
    // The CP side is hand-made: it asks only what a CP may (PROTOCOL.md §4.6).
    let node_ids: Vec<String> = c
        .node_ids
        .iter()
        .filter(|id| valid_name(id))
        .take(iop_proto::limits::MAX_NODES)
        .cloned()
        .collect();
    let request = iop_proto::EdgeStatusRequest {
        node_ids,
        ..Default::default()
    };
    cp.deliver(&mut edge, now, Envelope::correlated(1, request))?;
    let frames = cp.read(&mut edge)?;
    let answers = frames
        .iter()
        .filter(|f| matches!(f.body, Some(Body::StatusResponse(_))))
        .count();
    if answers != 1 {
        return Err(format!("{answers} status answers to one request"));
    }
    Ok(Verdict::Sent(frames.len()))
}
