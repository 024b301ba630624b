//! JSON of commands: the Edge's answer with its protobuf JSON mapping (pbjson), and
//! the record of a command with the control plane's conventions (lowerCamelCase
//! names, enums by name, 64-bit integers as strings).

use iop_core::cp::CommandOutcome;
use iop_core::proto::{CommandPhase, EdgeCommandResponse};
use iop_tokio::CommandRecord;
use serde_json::{Value, json};

use crate::admin::views::json::to_value;

/// The Edge's answer to a command, as it sent it.
pub fn command_response(r: &EdgeCommandResponse) -> Value {
    to_value(r)
}

fn phase_name(p: CommandPhase) -> &'static str {
    p.as_str_name()
}

/// Everything known about a command: response, every event, latest phase, outcome.
pub fn command_record(r: &CommandRecord) -> Value {
    let events: Vec<Value> = r.events().map(to_value).collect();
    let last_phase = r
        .events()
        .last()
        .and_then(|e| CommandPhase::try_from(e.phase).ok());
    let lost = matches!(r.outcome, Some(CommandOutcome::Lost));
    // Given up on by the Control Plane: FAILED whatever the Edge last said.
    let given_up = matches!(
        r.outcome,
        Some(
            CommandOutcome::Lost
                | CommandOutcome::Undeliverable { .. }
                | CommandOutcome::Forgotten
                | CommandOutcome::Unrecorded
                | CommandOutcome::Abandoned
        )
    );
    let phase = match (given_up, last_phase) {
        (true, _) => phase_name(CommandPhase::Failed),
        (_, Some(p)) => phase_name(p),
        (_, None) => phase_name(CommandPhase::Unspecified),
    };
    let outcome = r.outcome.as_ref().map(|o| match o {
        CommandOutcome::Rejected(reason) => format!("REJECTED:{}", reason.as_str_name()),
        CommandOutcome::Finished(p) => p.as_str_name().to_owned(),
        CommandOutcome::Lost => "LOST".to_owned(),
        CommandOutcome::Undeliverable { .. } => "UNDELIVERABLE".to_owned(),
        CommandOutcome::Forgotten => "FORGOTTEN".to_owned(),
        CommandOutcome::Unrecorded => "UNRECORDED".to_owned(),
        CommandOutcome::Abandoned => "ABANDONED".to_owned(),
        _ => "UNKNOWN".to_owned(),
    });
    let outcome_message = r.outcome.as_ref().and_then(|o| match o {
        CommandOutcome::Lost => Some("the edge came back without the command: it was lost"),
        CommandOutcome::Undeliverable { .. } => Some(
            "sessions of the edge kept ending without answering the command: it is not sent again",
        ),
        CommandOutcome::Forgotten => Some("the edge was forgotten before the command finished"),
        CommandOutcome::Unrecorded => {
            Some("the command's record could not be written first: it was never sent")
        }
        CommandOutcome::Abandoned => Some(
            "the edge stayed disconnected longer than it remembers a command: \
             its outcome can never be learned",
        ),
        _ => None,
    });
    json!({
        "edgeId": r.edge_id,
        "commandId": r.command_id,
        "operation": r.operation,
        "response": r.response().map(command_response),
        "events": events,
        "phase": phase,
        "terminal": r.outcome.is_some(),
        "lost": lost,
        "outcome": outcome,
        "outcomeMessage": outcome_message,
        "coalescedEvents": r.coalesced_events.to_string(),
    })
}
