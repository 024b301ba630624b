//! Medians and quantiles of measured samples.

/// The value at quantile `q` of `xs` (nearest rank); sorts `xs`. NaN when empty.
pub fn quantile(xs: &mut [f64], q: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let rank = (q * xs.len().saturating_sub(1) as f64).round() as usize;
    xs.get(rank).copied().unwrap_or(f64::NAN)
}

/// The median of `xs`.
pub fn median(xs: &mut [f64]) -> f64 {
    quantile(xs, 0.5)
}

/// "1.234 (1.200–1.300)": median with first and third quartiles.
pub fn ratio_cell(ratios: &mut [f64]) -> String {
    let m = quantile(ratios, 0.5);
    let q1 = quantile(ratios, 0.25);
    let q3 = quantile(ratios, 0.75);
    format!("{m:.3} ({q1:.3}–{q3:.3})")
}

/// `a[i] / b[i]`, pairwise.
pub fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| a / b).collect()
}

/// Times three systems round after round: each round runs `$batch` calls of each
/// system's expression (an `.await?` inside is the caller's), in a rotating order
/// (round `r` starts with system `r mod 3`), so that none always runs first on a warm
/// cache. Evaluates to `[Vec<f64>; 3]`: per system, per round, nanoseconds per call.
#[macro_export]
macro_rules! rotating {
    ($rounds:expr, $batch:expr, [$a:expr, $b:expr, $c:expr $(,)?]) => {{
        let mut per: [Vec<f64>; 3] = Default::default();
        for round in 0..$rounds {
            for k in 0..3 {
                let system = (round + k) % 3;
                let t = std::time::Instant::now();
                for _ in 0..$batch {
                    match system {
                        0 => {
                            std::hint::black_box($a);
                        }
                        1 => {
                            std::hint::black_box($b);
                        }
                        _ => {
                            std::hint::black_box($c);
                        }
                    }
                }
                if let Some(samples) = per.get_mut(system) {
                    samples.push(t.elapsed().as_nanos() as f64 / $batch as f64);
                }
            }
        }
        per
    }};
}
