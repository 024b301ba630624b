//! The monitor's rules of commands (PROTOCOL.md §4.4), as the Control Plane's events
//! show them: a response before events (but for a replay), forward-only phases, one
//! end, and the endings the Control Plane gives an unanswered command.

use crate::cp::CpEvent;
use crate::proto::CommandPhase;

use super::Monitor;

/// Where a command stands, as seen from the CP's events.
#[derive(Debug, Default, Clone)]
pub(super) struct CommandTrack {
    responded: bool,
    last_sequence: u32,
    last_rank: u8,
    pub(super) ended: bool,
}

fn phase_rank(phase: i32) -> Option<(u8, bool)> {
    match CommandPhase::try_from(phase).ok()? {
        CommandPhase::Accepted => Some((1, false)),
        CommandPhase::Running => Some((2, false)),
        CommandPhase::Succeeded
        | CommandPhase::Failed
        | CommandPhase::Cancelled
        | CommandPhase::TimedOut => Some((3, true)),
        CommandPhase::Unspecified => None,
    }
}

/// The Edge id of a command's event.
pub(super) fn command_edge(event: &CpEvent) -> Option<&str> {
    match event {
        CpEvent::CommandResponded { edge_id, .. }
        | CpEvent::CommandEvent { edge_id, .. }
        | CpEvent::CommandEnded { edge_id, .. } => Some(edge_id),
        _ => None,
    }
}

impl Monitor {
    /// A command's event from the Control Plane.
    pub(super) fn on_command(&mut self, at_ms: u64, event: &CpEvent) {
        match event {
            CpEvent::CommandResponded {
                edge_id,
                response,
                outcome,
                ..
            } => {
                let (command_id, accepted) = (&response.command_id, response.accepted);
                let key = (edge_id.clone(), command_id.clone());
                let ended_before = self.commands.get(&key).is_some_and(|t| t.ended);
                // The event carries the command's outcome after the answer: the
                // rejection itself, or the end its replayed events already brought.
                let reason = response.reject_reason_enum().known();
                let rejected = crate::cp::CommandOutcome::Rejected(
                    reason.unwrap_or(iop_proto::CommandRejectReason::Unspecified),
                );
                let agrees = match outcome {
                    None => accepted,
                    Some(o) if !accepted => *o == rejected,
                    Some(_) => ended_before,
                };
                if !agrees {
                    self.fail(
                        at_ms,
                        format!(
                            "{command_id}: answer {accepted} with outcome {outcome:?} \
                     (ended before: {ended_before})"
                        ),
                    );
                }
                let t = self.commands.entry(key).or_default();
                let twice = t.responded;
                t.responded = true;
                // An answer may follow the end: a command the Edge held across a
                // reconnect replays its (terminal) event before answering the re-sent
                // request (PROTOCOL.md §4.4).
                let ended = t.ended;
                if !accepted {
                    t.ended = true;
                }
                if twice {
                    self.fail(at_ms, format!("{command_id}: answered twice"));
                }
                if ended && !accepted {
                    self.fail(at_ms, format!("{command_id}: rejected after it ended"));
                }
            }
            CpEvent::CommandEvent {
                edge_id,
                event,
                outcome,
                ..
            } => {
                let key = (edge_id.clone(), event.command_id.clone());
                let t = self.commands.entry(key).or_default().clone();
                let id = &event.command_id;
                let Some((rank, terminal)) = phase_rank(event.phase) else {
                    self.fail(at_ms, format!("{id}: unknown phase {}", event.phase));
                    return;
                };
                // The event carries the outcome exactly when its phase ends the command.
                let ends = outcome.as_ref().is_some_and(
            |o| matches!(o, crate::cp::CommandOutcome::Finished(p) if *p as i32 == event.phase),
        );
                if ends != terminal || (outcome.is_some() && !ends) {
                    self.fail(
                        at_ms,
                        format!("{id}: event {event:?} with outcome {outcome:?}"),
                    );
                }
                if t.ended {
                    self.fail(
                        at_ms,
                        format!("{id}: event {} after its end", event.sequence),
                    );
                }
                if event.sequence <= t.last_sequence {
                    let last = t.last_sequence;
                    self.fail(
                        at_ms,
                        format!("{id}: sequence {} after {last}", event.sequence),
                    );
                }
                if event.sequence == 1 && rank != 1 {
                    self.fail(at_ms, format!("{id}: sequence 1 is not ACCEPTED"));
                }
                if rank < t.last_rank || (rank == t.last_rank && rank != 2) {
                    self.fail(at_ms, format!("{id}: phase {} goes backwards", event.phase));
                }
                let entry = self
                    .commands
                    .entry((edge_id.clone(), id.clone()))
                    .or_default();
                entry.last_sequence = entry.last_sequence.max(event.sequence);
                entry.last_rank = entry.last_rank.max(rank);
                entry.ended |= terminal;
            }
            CpEvent::CommandEnded {
                edge_id,
                command_id,
                ending:
                    crate::cp::Ending::Undeliverable {
                        sessions,
                        session_ids,
                    },
            } => {
                let key = (edge_id.clone(), command_id.clone());
                let t = self.commands.entry(key).or_default();
                let (ended, responded) = (t.ended, t.responded);
                t.ended = true;
                if ended || responded {
                    self.fail(
                        at_ms,
                        format!("{command_id}: undeliverable after it ended or was answered"),
                    );
                }
                if session_ids.len() > *sessions as usize {
                    self.fail(
                        at_ms,
                        format!("{command_id}: {sessions} sessions named as {session_ids:?}"),
                    );
                }
            }
            CpEvent::CommandEnded {
                edge_id,
                command_id,
                ending,
            } => self.ends_once(at_ms, edge_id, command_id, ending.code()),
            _ => {}
        }
    }
}

impl Monitor {
    /// The Control Plane ended `command_id` (`how`): a command ends once.
    fn ends_once(&mut self, at_ms: u64, edge_id: &str, command_id: &str, how: &str) {
        let key = (edge_id.to_owned(), command_id.to_owned());
        let t = self.commands.entry(key).or_default();
        let ended = t.ended;
        t.ended = true;
        if ended {
            self.fail(at_ms, format!("{command_id}: {how} after it ended"));
        }
    }
}
