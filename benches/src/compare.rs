//! Paired, interleaved timing of "ours" against a baseline in the same process.
//!
//! Timings on a shared machine drift (other builds, frequency changes), so a figure is
//! only ever reported as a ratio to a baseline measured alongside it:
//!
//! 0. **CPU time**: a batch is timed with the calling thread's CPU time
//!    (`CLOCK_THREAD_CPUTIME_ID`), so time spent descheduled while other processes run
//!    is not counted; caches those processes disturb still are, hence the rest.
//! 1. **Calibrate**: after a warm-up, the iteration count of a batch is chosen so that
//!    the slower of the two closures takes about [`CompareConfig::batch`].
//! 2. **Interleave**: each round times one batch of ours and one batch of the baseline,
//!    back to back; the order alternates every round (AB, BA, AB, …) so neither side
//!    always runs first on a warm cache or a freshly boosted clock.
//! 3. **Pair**: each round gives one ratio `ours / baseline`. Drift slower than a
//!    round (a few ms) hits both halves alike and cancels in the ratio.
//! 4. **Medians**: the reported ratio is the median of the per-round ratios (with its
//!    quartiles as the spread); the ns/iteration figures are the medians of each
//!    side's batches, shown for scale only.

use std::hint::black_box;
use std::time::Duration;

use cpu_time::ThreadTime;

/// How long and how often to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompareConfig {
    /// Rounds (pairs of batches). Odd, so the median is one round's ratio.
    pub rounds: usize,
    /// Target duration of the slower side's batch.
    pub batch: Duration,
}

impl Default for CompareConfig {
    fn default() -> Self {
        Self {
            rounds: 101,
            batch: Duration::from_millis(2),
        }
    }
}

/// The outcome of [`compare`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// Median time of one iteration of ours, in nanoseconds.
    pub ours_ns: f64,
    /// Median time of one iteration of the baseline, in nanoseconds.
    pub baseline_ns: f64,
    /// Median of the per-round ratios `ours / baseline`.
    pub ratio: f64,
    /// First quartile of the per-round ratios.
    pub ratio_q1: f64,
    /// Third quartile of the per-round ratios.
    pub ratio_q3: f64,
    /// Iterations in each batch.
    pub iterations: u64,
    /// Rounds measured.
    pub rounds: usize,
}

fn time_batch<R>(iterations: u64, f: &mut impl FnMut() -> R) -> Duration {
    let start = ThreadTime::now();
    for _ in 0..iterations {
        black_box(f());
    }
    start.elapsed()
}

/// Iterations needed for the slower side to take about `target`.
fn calibrate<A, B>(
    target: Duration,
    ours: &mut impl FnMut() -> A,
    base: &mut impl FnMut() -> B,
) -> u64 {
    let mut iterations = 1u64;
    loop {
        let t = time_batch(iterations, ours).max(time_batch(iterations, base));
        if t >= target / 4 || iterations >= 1 << 30 {
            let per_iter = t.as_secs_f64() / iterations as f64;
            let wanted = (target.as_secs_f64() / per_iter.max(1e-12)).ceil();
            return (wanted as u64).clamp(1, 1 << 32);
        }
        iterations *= 2;
    }
}

/// The value at quantile `q` (0..=1) of sorted `xs` (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * (sorted.len() - 1) as f64).round() as usize;
    sorted
        .get(rank.min(sorted.len() - 1))
        .copied()
        .unwrap_or(f64::NAN)
}

fn sorted(mut xs: Vec<f64>) -> Vec<f64> {
    xs.sort_by(f64::total_cmp);
    xs
}

/// Times `ours` against `baseline` as described in the [module docs](self).
pub fn compare<A, B>(
    config: CompareConfig,
    mut ours: impl FnMut() -> A,
    mut baseline: impl FnMut() -> B,
) -> Comparison {
    // Warm-up: caches, allocator pools, branch predictors.
    let _ = time_batch(3, &mut ours);
    let _ = time_batch(3, &mut baseline);
    let iterations = calibrate(config.batch, &mut ours, &mut baseline);
    let rounds = config.rounds.max(1);
    let mut ours_ns = Vec::with_capacity(rounds);
    let mut base_ns = Vec::with_capacity(rounds);
    let mut ratios = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let (a, b) = if round.is_multiple_of(2) {
            let a = time_batch(iterations, &mut ours);
            (a, time_batch(iterations, &mut baseline))
        } else {
            let b = time_batch(iterations, &mut baseline);
            (time_batch(iterations, &mut ours), b)
        };
        let (a, b) = (a.as_secs_f64(), b.as_secs_f64());
        ours_ns.push(a * 1e9 / iterations as f64);
        base_ns.push(b * 1e9 / iterations as f64);
        ratios.push(a / b.max(1e-12));
    }
    let ratios = sorted(ratios);
    Comparison {
        ours_ns: quantile(&sorted(ours_ns), 0.5),
        baseline_ns: quantile(&sorted(base_ns), 0.5),
        ratio: quantile(&ratios, 0.5),
        ratio_q1: quantile(&ratios, 0.25),
        ratio_q3: quantile(&ratios, 0.75),
        iterations,
        rounds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_nearest_rank() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&xs, 0.5), 3.0);
        assert_eq!(quantile(&xs, 0.25), 2.0);
        assert_eq!(quantile(&xs, 1.0), 5.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn twice_the_work_measures_about_twice_the_time() {
        let work = |n: u64| {
            (0..n).fold(0u64, |acc, i| {
                acc.wrapping_mul(31).wrapping_add(black_box(i))
            })
        };
        let c = compare(
            CompareConfig {
                rounds: 11,
                batch: Duration::from_micros(200),
            },
            || work(black_box(2_000)),
            || work(black_box(1_000)),
        );
        assert_eq!(c.rounds, 11);
        assert!(c.iterations >= 1);
        assert!(c.ratio_q1 <= c.ratio && c.ratio <= c.ratio_q3);
        // Loose bounds: unit tests run unoptimised on a shared machine.
        assert!(c.ratio > 1.3 && c.ratio < 3.0, "ratio {}", c.ratio);
    }
}
