//! The simulated command handlers of a [`Sim`]: each command an Edge process
//! receives gets a plan — RUNNING reports at random times, then an outcome, or a
//! handler that hangs until the Edge times the command out.

use std::collections::BTreeMap;
use std::time::Duration;

use super::sim::Sim;
use crate::Instant;
use crate::edge::{EdgeEvent, Outcome};

/// How the simulated handler runs one command.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    /// When the handler reports next.
    pub(super) next_at: Instant,
    pub(super) running_reports: u8,
    /// `None`: the handler hangs and the Edge times the command out.
    pub(super) outcome: Option<Outcome>,
}

impl Sim {
    /// Lets `ms` pass; handlers report when their plans say.
    pub(super) fn advance_ms(&mut self, ms: u64) {
        let end = self.pair.now + Duration::from_millis(ms);
        loop {
            self.read_edge_events();
            let due = self
                .held
                .values()
                .flatten()
                .map(|(_, plan)| plan.next_at)
                .min();
            match due {
                Some(at) if at <= end => {
                    let wait = at.saturating_duration_since(self.pair.now);
                    if !wait.is_zero() {
                        self.pair.advance(wait);
                    }
                    self.run_due_handlers();
                }
                _ => break,
            }
        }
        self.pair
            .advance(end.saturating_duration_since(self.pair.now));
        self.read_edge_events();
    }

    pub(super) fn run_due_handlers(&mut self) {
        let now = self.pair.now;
        let due: Vec<(usize, String)> = self
            .held
            .iter()
            .flat_map(|(i, held)| {
                held.iter()
                    .filter(|(_, plan)| plan.next_at <= now)
                    .map(|(id, _)| (*i, id.clone()))
            })
            .collect();
        for (i, id) in due {
            self.act(i, &id);
        }
        self.pair.pump();
    }

    /// The handler of `id` on process `i` takes its next step: a RUNNING report, its
    /// outcome, or (a hung handler) nothing ever again.
    pub(super) fn act(&mut self, i: usize, id: &str) {
        let now = self.pair.now;
        let delay = self.rng.range(50, 4_000);
        let Some(held) = self.held.get_mut(&i) else {
            return;
        };
        let Some(j) = held.iter().position(|(h, _)| h == id) else {
            return;
        };
        let Some((_, plan)) = held.get_mut(j) else {
            return;
        };
        let Some(p) = self.pair.edges.get_mut(i) else {
            held.remove(j);
            return;
        };
        let done = if plan.running_reports > 0 {
            plan.running_reports -= 1;
            plan.next_at = now + Duration::from_millis(delay);
            p.edge
                .report_running(now, id, "working", BTreeMap::new())
                .is_err()
        } else if let Some(outcome) = plan.outcome {
            let _ = p
                .edge
                .report_outcome(now, id, outcome, "done", BTreeMap::new());
            true
        } else {
            // A hung handler: the Edge's own deadline ends it.
            true
        };
        if done {
            held.remove(j);
        }
    }

    /// A handler makes progress on one command it holds, ahead of its plan.
    pub(super) fn work(&mut self) {
        let i = self.any_process();
        let Some(held) = self.held.get(&i).filter(|h| !h.is_empty()) else {
            return;
        };
        let Some(id) = held
            .get(self.rng.index(held.len()))
            .map(|(id, _)| id.clone())
        else {
            return;
        };
        self.act(i, &id);
        self.advance_ms(1);
    }

    /// Hands every newly received command to its process's handler.
    pub(super) fn read_edge_events(&mut self) {
        for (i, p) in self.pair.edges.iter().enumerate() {
            let from = self.cursor.get(&i).copied().unwrap_or(0);
            for e in p.events.iter().skip(from) {
                if let EdgeEvent::CommandReceived { command_id, .. } = e {
                    let outcome = match self.rng.range(0, 5) {
                        0 => None,
                        1 => Some(Outcome::Failed),
                        2 => Some(Outcome::Cancelled),
                        _ => Some(Outcome::Succeeded),
                    };
                    let plan = Plan {
                        next_at: self.pair.now + Duration::from_millis(self.rng.range(10, 4_000)),
                        running_reports: self.rng.range(0, 3) as u8,
                        outcome,
                    };
                    self.held
                        .entry(i)
                        .or_default()
                        .push((command_id.clone(), plan));
                }
            }
            self.cursor.insert(i, p.events.len());
        }
    }
}
