//! Testing an Edge: the tester plays a Control Plane on an address the Edge dials,
//! and runs the Edge-side rules against whatever dials it, one session after another
//! (the Edge redials after each end, as PROTOCOL.md §4.2 says it must).
//!
//! An Edge that ends many short sessions in a row waits longer and longer before
//! dialling again (its backoff, up to 30 s). Between cases that end sessions, the
//! tester holds a session past the Edge's liveness window (3 heartbeat intervals of
//! 1 s), after which a conforming Edge resets its backoff.

mod cases;
mod commands;
mod endings;
mod flow;
mod load;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iop_proto::{Body, EdgeHelloRequest, EdgeHelloResponse, Envelope};

use crate::report::{CaseOutcome, CaseResult, NotPassed, Report, Verdict, selected};
use crate::wire::{Conn, Keepalive, Listener};

pub use cases::CASES;

/// What the tester needs to know of the Edge under test.
#[derive(Debug, Clone)]
pub struct EdgeOptions {
    /// Where the tester listens for the Edge.
    pub listen: SocketAddr,
    /// The id the Edge must say in its hello, when known.
    pub edge_id: Option<String>,
    /// An edge-level operation the Edge advertises that succeeds on its own (the
    /// command cases run it): `edge.ping` by default.
    pub operation: String,
    /// Values that must never leave the Edge (node addresses, tokens): no frame may
    /// hold them.
    pub secrets: Vec<String>,
    /// Cases to run: those whose id starts with one of these (all when empty).
    pub only: Vec<String>,
    /// How long to wait for the Edge to dial (its backoff may reach 30 s).
    pub dial_timeout: Duration,
}

impl EdgeOptions {
    /// Options for an Edge dialling `listen`.
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            edge_id: None,
            operation: "edge.ping".into(),
            secrets: Vec::new(),
            only: Vec::new(),
            dial_timeout: Duration::from_secs(45),
        }
    }
}

/// The frame limit the tester announces: the least a Control Plane may (64 KiB), so
/// that an Edge with many nodes must truncate its status to fit (§4.3), and any frame
/// over it is one the Edge must not send (§4.6).
pub(crate) const MAX_FRAME_LEN: u32 = iop_proto::limits::MIN_MAX_FRAME_LEN;

/// The heartbeat interval the tester gives every session.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(1);
/// A session longer than this outlived the Edge's liveness window.
const HEALTHY: Duration = Duration::from_millis(3_500);

/// A Control Plane of the tester's own, one session at a time.
pub(crate) struct Tester {
    listener: Listener,
    pub(crate) opts: EdgeOptions,
    /// The live session, and when it was accepted.
    live: Option<(Conn, Instant)>,
    /// The latest hello.
    pub(crate) hello: Option<EdgeHelloRequest>,
    short_sessions: u32,
    next_session_id: u64,
    /// Frames the Edge sent that the protocol refuses, over the whole run.
    pub(crate) refused: Vec<String>,
    /// Every byte the Edge sent, over the whole run.
    pub(crate) read: Vec<u8>,
    /// The command the flow case ran: its request, and its last event's sequence.
    pub(crate) command: Option<(iop_proto::EdgeCommandRequest, u32)>,
}

impl Tester {
    /// Waits for the Edge to dial and reads its hello (its first frame), first
    /// holding a long session if the Edge's backoff may have grown.
    pub(crate) fn dialled(&mut self) -> Result<(Conn, EdgeHelloRequest, Instant), NotPassed> {
        if self.short_sessions >= 2 {
            self.refresh()?;
        }
        self.dial()
    }

    /// [`dialled`](Self::dialled), however long the Edge's backoff (a case timing
    /// the redial uses it).
    pub(crate) fn dial(&mut self) -> Result<(Conn, EdgeHelloRequest, Instant), NotPassed> {
        let Some((mut conn, at)) = self.listener.accept(self.opts.dial_timeout) else {
            return Err(NotPassed::Fail(format!(
                "the Edge did not dial within {} s",
                self.opts.dial_timeout.as_secs()
            )));
        };
        let hello = conn.expect(Duration::from_secs(10), |env| match &env.body {
            Some(Body::HelloRequest(h)) => Some(h.clone()),
            _ => None,
        });
        self.absorb(&mut conn);
        let hello = hello.map_err(|e| NotPassed::Fail(format!("no hello first: {e}")))?;
        self.hello = Some(hello.clone());
        Ok((conn, hello, at))
    }

    /// Accepts `hello` on `conn` with the tester's heartbeat interval and `max_frame_len`.
    pub(crate) fn accept(&mut self, conn: &mut Conn, hello: &EdgeHelloRequest, max_frame_len: u32) {
        self.accept_with(conn, hello, max_frame_len, 0);
    }

    /// [`accept`](Self::accept), asking for load updates every `load_update_interval_ms`
    /// (0: none).
    pub(crate) fn accept_with(
        &mut self,
        conn: &mut Conn,
        hello: &EdgeHelloRequest,
        max_frame_len: u32,
        load_update_interval_ms: u32,
    ) {
        self.next_session_id += 1;
        let response = EdgeHelloResponse {
            accepted: true,
            protocol_version: hello.protocol_version.min(iop_proto::PROTOCOL_VERSION),
            heartbeat_interval_ms: HEARTBEAT.as_millis() as u32,
            session_id: self.next_session_id,
            max_frame_len,
            min_protocol_version: 1,
            max_protocol_version: iop_proto::PROTOCOL_VERSION,
            load_update_interval_ms,
            ..Default::default()
        };
        let _ = conn.send(&Envelope::new(response));
        conn.accept_frames(max_frame_len);
        conn.keep_alive(Keepalive::Ack);
    }

    /// The live session, opening one (the Edge dials, its hello is accepted) if none.
    pub(crate) fn session(&mut self) -> Result<&mut Conn, NotPassed> {
        if self.live.is_none() {
            let (mut conn, hello, _) = self.dialled()?;
            self.accept(&mut conn, &hello, MAX_FRAME_LEN);
            self.live = Some((conn, Instant::now()));
        }
        match self.live.as_mut() {
            Some((conn, _)) => Ok(conn),
            None => Err(NotPassed::Fail("no session".into())),
        }
    }

    /// Takes the live session (opening one) for a case that ends it.
    pub(crate) fn take(&mut self) -> Result<(Conn, Instant), NotPassed> {
        self.session()?;
        self.live
            .take()
            .ok_or_else(|| NotPassed::Fail("no session".into()))
    }

    /// A session that began at `began` is over (`conn` dropped: closed here if the
    /// Edge has not).
    pub(crate) fn ended(&mut self, mut conn: Conn, began: Instant) {
        conn.finish(Duration::from_millis(500));
        self.absorb(&mut conn);
        drop(conn);
        if began.elapsed() < HEALTHY {
            self.short_sessions += 1;
        } else {
            self.short_sessions = 0;
        }
    }

    /// Ends the live session from the tester's side.
    pub(crate) fn hang_up(&mut self) {
        if let Some((conn, began)) = self.live.take() {
            self.ended(conn, began);
        }
    }

    /// Holds a session past the Edge's liveness window, so that its backoff resets.
    fn refresh(&mut self) -> Result<(), NotPassed> {
        let (mut conn, hello, _) = self.dial()?;
        self.accept(&mut conn, &hello, MAX_FRAME_LEN);
        let began = Instant::now();
        let held = conn.idle(HEALTHY + Duration::from_millis(200));
        self.ended(conn, began);
        held.map(|_| ())
            .map_err(|e| NotPassed::Fail(format!("a quiet, healthy session ended: {e}")))
    }

    /// Keeps what `conn` saw for the run-wide checks.
    pub(crate) fn absorb(&mut self, conn: &mut Conn) {
        self.refused.append(&mut conn.refused);
        self.read.append(&mut conn.read);
    }

    /// The live session's next frame that `wanted` takes, within `within`.
    pub(crate) fn expect<T>(
        &mut self,
        within: Duration,
        wanted: impl FnMut(&Envelope) -> Option<T>,
    ) -> Result<T, NotPassed> {
        let conn = self.session()?;
        let got = conn.expect(within, wanted);
        if let Some((mut conn, began)) = self.live.take() {
            if got.is_err() && conn.is_closed() {
                self.ended(conn, began);
            } else {
                self.absorb(&mut conn);
                self.live = Some((conn, began));
            }
        }
        got.map_err(NotPassed::Fail)
    }

    /// Sends `envelope` on the live session.
    pub(crate) fn send(&mut self, envelope: &Envelope) -> Result<(), NotPassed> {
        self.session()?
            .send(envelope)
            .map_err(|e| NotPassed::Fail(format!("the connection failed: {e}")))
    }
}

/// Runs the selected cases against the Edge that dials `opts.listen`, calling
/// `on_result` as each ends.
pub fn run(opts: EdgeOptions, mut on_result: impl FnMut(&CaseResult)) -> std::io::Result<Report> {
    let listener = Listener::bind(opts.listen)?;
    run_on(listener, opts, &mut on_result)
}

/// [`run`] on a listener already bound (a test binds port 0 and tells its Edge).
pub fn run_on(
    listener: Listener,
    opts: EdgeOptions,
    on_result: &mut dyn FnMut(&CaseResult),
) -> std::io::Result<Report> {
    let mut t = Tester {
        listener,
        opts,
        live: None,
        hello: None,
        short_sessions: 0,
        next_session_id: 0,
        refused: Vec::new(),
        read: Vec::new(),
        command: None,
    };
    let mut report = Report::default();
    for (case, body) in cases::RUN {
        if !selected(case, &t.opts.only) {
            continue;
        }
        let started = Instant::now();
        let outcome = body(&mut t);
        let (verdict, detail) = match outcome {
            Ok(detail) => (Verdict::Pass, detail),
            Err(NotPassed::Fail(d)) => (Verdict::Fail, d),
            Err(NotPassed::Skip(d)) => (Verdict::Skip, d),
        };
        let result = CaseResult {
            case: **case,
            verdict,
            detail,
            elapsed: started.elapsed(),
        };
        on_result(&result);
        report.results.push(result);
    }
    t.hang_up();
    Ok(report)
}

/// What the cases are run with: the case and its body.
pub(crate) type CaseFn = fn(&mut Tester) -> CaseOutcome;
