//! Cancellation of a running command (PROTOCOL.md §4.4): the token a handler watches,
//! and the built-in `command.cancel` operation that sets it.
//!
//! A `command.cancel` asks the target's handler to stop (its [`CommandContext`] sees
//! it: [`is_cancelled`](CommandContext::is_cancelled), [`cancelled`](CommandContext::cancelled)),
//! then waits up to the Edge's cancel grace for the handler to return. A handler that
//! does not stop in time has its command ended CANCELLED by the Edge (its late result is
//! ignored, as after a timeout): the target ends exactly once, and the cancel says how.

use std::collections::BTreeMap;
use std::time::Duration;

use iop_core::cancel::CANCEL_TARGET_KEY;
use iop_core::edge::{EdgeRegistry, Outcome};
use iop_core::proto::CommandPhase;

use super::flag::Flag;
use super::handler::{CommandContext, CommandResult};
use super::shared::EdgeShared;
use crate::Runtime;
use crate::signal::lock;

/// What asking a command to stop found.
enum StopAsk {
    /// Its handler was asked; the flag is set once it returned.
    Asked(Flag),
    /// The Edge holds it finished, in this phase.
    Finished(CommandPhase),
    /// The Edge holds no command of this id.
    NotHeld,
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeShared<R, G> {
    /// Asks the handler of `command_id` to stop, if the command is running here.
    fn ask_to_stop(&self, command_id: &str) -> StopAsk {
        let state = lock(&self.state);
        match state.edge.command_phase(command_id) {
            None => StopAsk::NotHeld,
            Some(phase) if phase.is_terminal() => StopAsk::Finished(phase),
            Some(_) => match state.running.get(command_id) {
                Some(running) => {
                    running.cancel.set();
                    StopAsk::Asked(running.returned.clone())
                }
                // Accepted but with no handler of its own: its end is the core's.
                None => StopAsk::NotHeld,
            },
        }
    }
}

/// The built-in `command.cancel` handler.
pub(crate) async fn cancel_command<R: Runtime, G: EdgeRegistry + Send + 'static>(
    ctx: CommandContext,
) -> CommandResult {
    let Some(target) = ctx.metadata().get(CANCEL_TARGET_KEY).cloned() else {
        return CommandResult::failed(format!(
            "metadata {CANCEL_TARGET_KEY:?} names no command to cancel"
        ));
    };
    if target == ctx.command_id() {
        return CommandResult::failed("a cancellation cannot cancel itself");
    }
    let Some(shared) = ctx
        .reporter
        .edge()
        .and_then(|any| any.downcast::<EdgeShared<R, G>>().ok())
    else {
        return CommandResult::failed("the edge is shutting down");
    };
    let returned = match shared.ask_to_stop(&target) {
        StopAsk::NotHeld => {
            return CommandResult::failed(format!("this edge holds no running command {target:?}"));
        }
        StopAsk::Finished(phase) => {
            return CommandResult::failed(format!(
                "command {target:?} is not running: it finished as {}",
                phase.as_str_name()
            ))
            .with_detail("phase", phase.as_str_name());
        }
        StopAsk::Asked(returned) => returned,
    };
    let _ = ctx.running(format!("asked {target:?} to stop"), BTreeMap::new());
    let grace = shared.cancel_grace;
    let deadline = (std::time::Instant::now() + grace).min(ctx.deadline());
    let _ = crate::runtime::before::<R, _>(deadline, returned.wait()).await;
    // A handler that did not stop in time: the Edge ends its command itself.
    let phase = shared.with_app(|edge, now| {
        if edge
            .command_phase(&target)
            .is_some_and(|p| !p.is_terminal())
        {
            let message = format!(
                "cancelled; the handler did not stop within {} ms",
                grace.as_millis()
            );
            let _ = edge.report_outcome(now, &target, Outcome::Cancelled, message, BTreeMap::new());
        }
        edge.command_phase(&target)
    });
    match phase {
        Some(CommandPhase::Cancelled) => {
            CommandResult::succeeded(format!("command {target:?} cancelled"))
                .with_detail("phase", CommandPhase::Cancelled.as_str_name())
        }
        Some(phase) if phase.is_terminal() => CommandResult::succeeded(format!(
            "command {target:?} finished first, as {}",
            phase.as_str_name()
        ))
        .with_detail("phase", phase.as_str_name()),
        _ => CommandResult::failed(format!("command {target:?} could not be ended")),
    }
}

/// The default cancel grace: how long a cancelled handler has to return.
pub(crate) const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);
