//! JSON of commands: the Edge's answer with its protobuf JSON mapping (pbjson), and
//! the record of a command with the control plane's conventions (lowerCamelCase
//! names, enums by name, 64-bit integers as strings).

use iop_core::cp::{CommandOutcome, EndingKind};
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
    let ending = r
        .outcome
        .as_ref()
        .and_then(CommandOutcome::ending)
        .map(|e| e.kind());
    let lost = ending == Some(EndingKind::Lost);
    // Ended by the Control Plane: FAILED whatever the Edge last said.
    let phase = match (ending, last_phase) {
        (Some(_), _) => phase_name(CommandPhase::Failed),
        (_, Some(p)) => phase_name(p),
        (_, None) => phase_name(CommandPhase::Unspecified),
    };
    let outcome = r.outcome.as_ref().map(|o| match o {
        CommandOutcome::Rejected(reason) => format!("REJECTED:{}", reason.as_str_name()),
        CommandOutcome::Finished(p) => p.as_str_name().to_owned(),
        CommandOutcome::Ended(e) => e.kind().name().to_owned(),
        _ => "UNKNOWN".to_owned(),
    });
    let outcome_message = ending.map(EndingKind::meaning);
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
