//! Calls from the Edge application: command phases, drain, shutdown.

use std::collections::BTreeMap;

use iop_proto::{CommandPhase, GoAwayReason, NodeEventKind};

use super::commands::{Commands, Outcome, ReportError};
use super::event::CloseReason;
use super::registry_seam::EdgeRegistry;
use super::session::{Conn, Edge};
use crate::Instant;

impl<R: EdgeRegistry> Edge<R> {
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

    /// Starts draining: new commands are rejected DRAINING and the CP is told
    /// `EDGE_DRAINING` (now if connected, else after `EDGE_READY` of the next session).
    /// Running commands go on. Idempotent.
    pub fn drain(&mut self, now: Instant) {
        if self.draining {
            return;
        }
        self.pump_registry();
        self.draining = true;
        if self.is_connected() {
            self.send_edge_event(now, NodeEventKind::EdgeDraining, "edge is draining");
        }
    }

    /// Shuts the Edge down for good: running commands are CANCELLED, the CP gets
    /// `GoAway{SHUTDOWN}`, and the driver is asked to close (no reconnect). Idempotent.
    pub fn shutdown(&mut self, now: Instant) {
        if self.shut_down {
            return;
        }
        self.pump_registry();
        self.draining = true;
        let unix_ms = self.config.wall_clock.unix_ms(now);
        for event in self.commands.cancel_all(now, unix_ms) {
            self.send_command_event(now, event);
        }
        self.shut_down = true;
        match self.conn {
            Conn::AwaitingHello | Conn::Active(_) => self.close(
                now,
                CloseReason::Shutdown,
                Some((GoAwayReason::Shutdown, "edge shutting down")),
            ),
            _ => self.shut_down_now(),
        }
    }

    /// True once [`shutdown`](Self::shutdown) was called (the transport may still be
    /// closing).
    pub fn shutdown_requested(&self) -> bool {
        self.shut_down
    }

    /// True once shut down and the transport is gone: the driver can stop.
    pub fn is_shut_down(&self) -> bool {
        matches!(self.conn, Conn::ShutDown)
    }
}
