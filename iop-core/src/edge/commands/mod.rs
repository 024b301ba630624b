//! Commands on the Edge (PROTOCOL.md §4.4): requests in — checked, de-duplicated by
//! id, resolved against the registry, answered with one response then events — and
//! the application's reports out, within the Control Plane's limits. The table that
//! holds them across sessions is `table`.

use std::collections::BTreeMap;
use std::time::Duration;

use iop_proto::limits::send;
use iop_proto::{
    CommandPhase, CommandRejectReason, EdgeCommandRequest, EdgeCommandResponse, Envelope,
};

use super::event::EdgeEvent;
use super::link::{Conn, Edge};
use super::registry_seam::EdgeRegistry;
use crate::Instant;
use crate::limits::MAX_COMMAND_ID_LEN;
use crate::registry::{ResolveError, Selector, Target, TargetError, TargetLevel};

mod table;

pub(crate) use table::{Commands, Known, fit_event};
pub use table::{Outcome, ReportError};

impl<R: EdgeRegistry> Edge<R> {
    pub(super) fn handle_command_request(&mut self, now: Instant, request: EdgeCommandRequest) {
        self.commands.evict(now);
        let id = request.command_id.clone();
        if id.is_empty() || id.len() > MAX_COMMAND_ID_LEN {
            // Echo no more than a peer's decoder accepts (cut at a char boundary).
            let mut echo = id;
            let mut cut = MAX_COMMAND_ID_LEN.min(echo.len());
            while !echo.is_char_boundary(cut) {
                cut -= 1;
            }
            echo.truncate(cut);
            let message = "command_id must be 1-128 bytes";
            return self.reject_command(now, echo, CommandRejectReason::InvalidCommand, message);
        }
        match self.commands.known(&request) {
            Known::Same(response, latest) => {
                let (response, latest) = (response.clone(), latest.clone());
                if self.send(now, Envelope::new(response)) {
                    self.send(now, Envelope::new(latest));
                }
                return;
            }
            Known::Conflict => {
                let message = "command_id already used for a different request";
                return self.reject_command(now, id, CommandRejectReason::InvalidCommand, message);
            }
            Known::New => {}
        }
        if self.draining {
            return self.reject_command(now, id, CommandRejectReason::Draining, "edge is draining");
        }
        let Some(level) = self.config.operations.get(&request.operation).copied() else {
            let message = format!(
                "operation {:?} is not offered by this edge",
                request.operation
            );
            return self.reject_command(now, id, CommandRejectReason::UnknownOperation, message);
        };
        let target = match self.resolve_target(&request.target_selector, level) {
            Ok(target) => target,
            Err(err) => {
                // The selector is echoed: the operator sees what the Edge was given.
                let message = format!("selector {:?}: {err}", request.target_selector);
                return self.reject_command(now, id, err.reject_reason(), message);
            }
        };
        if self.commands.running() >= self.config.max_inflight_commands {
            let message = "too many commands in flight";
            return self.reject_command(now, id, CommandRejectReason::Busy, message);
        }
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let operation = request.operation.clone();
        let metadata = request.metadata.clone();
        let deadline = now + self.command_timeout(request.timeout_ms);
        let (response, accepted) = self.commands.accept(now, unix_ms, request);
        if self.send(now, Envelope::new(response)) {
            self.send(now, Envelope::new(accepted));
        }
        self.events.push_back(EdgeEvent::CommandReceived {
            command_id: id,
            operation,
            target,
            metadata,
            deadline,
        });
    }

    fn reject_command(
        &mut self,
        now: Instant,
        command_id: String,
        reason: CommandRejectReason,
        message: impl Into<String>,
    ) {
        // The message may quote what the CP sent (a selector): held to the cap.
        let mut message = message.into();
        send::truncate_text(&mut message, iop_proto::limits::MAX_TEXT_LEN);
        let response = EdgeCommandResponse {
            command_id,
            accepted: false,
            reject_reason: reason as i32,
            message,
        };
        self.send(now, Envelope::new(response));
    }

    /// Parses `selector`, checks it against the operation's level (an edge-level
    /// operation takes empty or `*`), and resolves it against the registry.
    fn resolve_target(&self, selector: &str, level: TargetLevel) -> Result<Target, TargetError> {
        let parsed = Selector::parse(selector)?;
        match (level, &parsed) {
            (TargetLevel::Edge, Selector::Edge | Selector::All) => Ok(Target::Edge),
            (TargetLevel::Edge, _) | (TargetLevel::Node, Selector::Edge) => {
                Err(TargetError::WrongLevel { level })
            }
            (TargetLevel::Node, _) => self
                .registry
                .resolve(&parsed)
                .map_err(|ResolveError::NoMatchingTarget| TargetError::NoMatchingTarget),
        }
    }

    fn command_timeout(&self, timeout_ms: u32) -> Duration {
        match timeout_ms {
            0 => self.config.default_command_timeout,
            ms => Duration::from_millis(u64::from(ms)),
        }
    }

    /// Reports progress (a RUNNING event) of a command the application is running.
    pub fn report_running(
        &mut self,
        now: Instant,
        command_id: &str,
        message: impl Into<String>,
        detail: BTreeMap<String, String>,
    ) -> Result<(), ReportError> {
        self.report(
            now,
            command_id,
            CommandPhase::Running,
            message.into(),
            detail,
        )
    }

    /// Reports how a command finished: its one terminal event.
    pub fn report_outcome(
        &mut self,
        now: Instant,
        command_id: &str,
        outcome: Outcome,
        message: impl Into<String>,
        detail: BTreeMap<String, String>,
    ) -> Result<(), ReportError> {
        let phase = Commands::outcome_phase(outcome);
        self.report(now, command_id, phase, message.into(), detail)
    }

    fn report(
        &mut self,
        now: Instant,
        command_id: &str,
        phase: CommandPhase,
        message: String,
        detail: BTreeMap<String, String>,
    ) -> Result<(), ReportError> {
        if self.shut_down {
            return Err(ReportError::ShutDown);
        }
        self.pump_registry();
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let limit = self.report_frame_limit();
        let event = self
            .commands
            .report(now, unix_ms, command_id, phase, message, detail, limit)?;
        self.send_command_event(now, event);
        Ok(())
    }

    /// The phase the command `command_id` is at while this Edge holds it (running, or
    /// finished within the retention window); `None` for an id it does not hold.
    pub fn command_phase(&self, command_id: &str) -> Option<CommandPhase> {
        self.commands.phase(command_id)
    }

    /// Sends a command event if a session is up; otherwise it stays the command's
    /// latest event and is re-sent on the next accepted session. An event recorded
    /// under a higher frame limit than this session's goes out without its detail
    /// ([`fit_event`](super::commands::fit_event)).
    pub(crate) fn send_command_event(&mut self, now: Instant, event: iop_proto::EdgeCommandEvent) {
        if self.is_connected() {
            let event = super::commands::fit_event(&event, self.outbound.max_frame_len());
            self.send(now, Envelope::new(event));
        }
    }

    /// The frame limit a report must respect now: the Control Plane's, or while
    /// disconnected the last one announced.
    pub(crate) fn report_frame_limit(&self) -> u32 {
        match self.conn {
            Conn::Active(_) => self.outbound.max_frame_len(),
            _ => self.peer_max_frame_len,
        }
    }
}
