//! Medians and quantiles of measured samples.

/// The value at quantile `q` of `xs` (nearest rank); sorts `xs`.
pub fn quantile(xs: &mut [f64], q: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    iop_bench::compare::quantile(xs, q)
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
