//! The figures of a run, and of a campaign (docs/benchmarks/chaos.md), from what was
//! recorded: per fault, how long after it began the Edges its replica held were live
//! on another replica (failover); how long after it ended every Edge was again held
//! by exactly one replica, by every replica's own account (settled); and how long
//! after it ended the first command was answered 200 (commands back). A figure that
//! another fault overlaps is not taken: it would measure both.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::checker::Sample;
use super::faults::Applied;

/// How far apart the replicas' samples may be to count as one moment.
const MOMENT: Duration = Duration::from_millis(1_500);

/// What one fault measured.
#[derive(Debug, Clone)]
pub struct FaultFigures {
    pub kind: &'static str,
    /// Per Edge its replica held when it began and that went live elsewhere.
    pub failover: Vec<Duration>,
    pub settled: Option<Duration>,
    pub commands_back: Option<Duration>,
}

/// The figures of each of `faults`, from the samples of `replicas` replicas holding
/// `edges`, and the times commands were answered.
pub fn per_fault(
    samples: &[Sample],
    faults: &[Applied],
    answers: &[Instant],
    replicas: usize,
    edges: &[String],
) -> Vec<FaultFigures> {
    let mut order: Vec<&Sample> = samples.iter().collect();
    order.sort_by_key(|s| s.at);
    let mut answers = answers.to_vec();
    answers.sort();
    faults
        .iter()
        .enumerate()
        .map(|(i, f)| {
            // Another fault in effect between `f`'s end and `until`.
            let overlapped = |until: Instant| {
                faults
                    .iter()
                    .enumerate()
                    .any(|(j, g)| j != i && g.start <= until && g.end > f.end)
            };
            let settled = settled_at(&order, replicas, edges, f.end)
                .filter(|t| !overlapped(*t))
                .map(|t| t.duration_since(f.end));
            let commands_back = answers
                .iter()
                .find(|a| **a >= f.end)
                .filter(|a| !overlapped(**a))
                .map(|a| a.duration_since(f.end));
            FaultFigures {
                kind: f.kind.label(),
                failover: f
                    .kind
                    .replica()
                    .map_or(Vec::new(), |r| failover(&order, r, f)),
                settled,
                commands_back,
            }
        })
        .collect()
}

/// The first moment at or after `from` when every replica's latest sample is recent
/// and lists every Edge as live on exactly one of them.
fn settled_at(
    order: &[&Sample],
    replicas: usize,
    edges: &[String],
    from: Instant,
) -> Option<Instant> {
    let mut latest: BTreeMap<usize, &Sample> = BTreeMap::new();
    for sample in order {
        latest.insert(sample.cp, sample);
        if sample.at < from || latest.len() < replicas {
            continue;
        }
        let recent = latest
            .values()
            .all(|s| sample.at.duration_since(s.at) < MOMENT);
        let single = edges
            .iter()
            .all(|e| latest.values().filter(|s| s.live.contains_key(e)).count() == 1);
        if recent && single {
            return Some(sample.at);
        }
    }
    None
}

/// For each Edge replica `r` held just before `f` began: how long after it began
/// another replica listed it live (Edges that stayed, as a short pause allows, are
/// not counted).
fn failover(order: &[&Sample], r: usize, f: &Applied) -> Vec<Duration> {
    let Some(before) = order
        .iter()
        .rev()
        .find(|s| s.cp == r && s.at <= f.start && f.start.duration_since(s.at) < MOMENT)
    else {
        return Vec::new();
    };
    before
        .live
        .keys()
        .filter_map(|edge| {
            order
                .iter()
                .find(|s| s.at >= f.start && s.cp != r && s.live.contains_key(edge))
                .filter(|s| s.at <= f.end + Duration::from_secs(30))
                .map(|s| s.at.duration_since(f.start))
        })
        .collect()
}

/// Figures gathered over many runs.
#[derive(Debug, Default)]
pub struct Tally {
    /// Fault kind → its figures.
    pub faults: BTreeMap<&'static str, Vec<FaultFigures>>,
    pub outcomes: BTreeMap<String, usize>,
    pub tried: usize,
    pub answered: usize,
    /// The longest any run's commands took to read identically terminal everywhere,
    /// after its last fault healed.
    pub commands_settled: Duration,
}

impl Tally {
    pub fn add(&mut self, figures: &[FaultFigures]) {
        for f in figures {
            self.faults.entry(f.kind).or_default().push(f.clone());
        }
    }

    /// A table of the figures, as docs/benchmarks/chaos.md shows them.
    pub fn print(&self) {
        println!(
            "| fault | injected | failover (Edges: median / max) | settled (median / max) | commands back (median / max) |"
        );
        println!("|---|---:|---|---|---|");
        for (kind, figures) in &self.faults {
            let failover: Vec<Duration> = figures
                .iter()
                .flat_map(|f| f.failover.iter().copied())
                .collect();
            let settled: Vec<Duration> = figures.iter().filter_map(|f| f.settled).collect();
            let back: Vec<Duration> = figures.iter().filter_map(|f| f.commands_back).collect();
            println!(
                "| {kind} | {} | {} | {} | {} |",
                figures.len(),
                spread(&failover),
                spread(&settled),
                spread(&back)
            );
        }
        let attempts: usize = self.outcomes.values().sum();
        println!(
            "commands: {} tried, {} answered 200; {attempts} attempts: {:?}; every command read identically terminal everywhere within {:.1}s of the last fault healing",
            self.tried,
            self.answered,
            self.outcomes,
            self.commands_settled.as_secs_f64()
        );
    }
}

/// `n: median / max` of `values` in seconds, or `–` for none.
fn spread(values: &[Duration]) -> String {
    if values.is_empty() {
        return "–".to_owned();
    }
    let mut v = values.to_vec();
    v.sort();
    format!(
        "{}: {:.1}s / {:.1}s",
        v.len(),
        v[v.len() / 2].as_secs_f64(),
        v[v.len() - 1].as_secs_f64()
    )
}
