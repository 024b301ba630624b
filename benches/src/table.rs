//! The result table every bench prints: our figure, the baseline's, the ratio, the
//! goal, met / not met — as Markdown, so it can go into `BENCHMARKS.md` as is.

use std::fmt;

/// One measured row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What was measured.
    pub what: String,
    /// Our figure, formatted with its unit.
    pub ours: String,
    /// The baseline's figure, formatted with its unit ("—" when there is none).
    pub baseline: String,
    /// Ours relative to the baseline, formatted ("—" when there is none).
    pub ratio: String,
    /// The goal, in words or as a bound.
    pub goal: String,
    /// Whether the goal is met; `None` for an informational row with no goal.
    pub met: Option<bool>,
}

impl Row {
    /// A row with every column given.
    pub fn new(
        what: impl Into<String>,
        ours: impl Into<String>,
        baseline: impl Into<String>,
        ratio: impl Into<String>,
        goal: impl Into<String>,
        met: Option<bool>,
    ) -> Self {
        Self {
            what: what.into(),
            ours: ours.into(),
            baseline: baseline.into(),
            ratio: ratio.into(),
            goal: goal.into(),
            met,
        }
    }
}

/// A titled table of rows, with the names of the figure columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    title: String,
    ours: String,
    baseline: String,
    rows: Vec<Row>,
}

impl Table {
    /// An empty table; `ours` and `baseline` name the two figure columns.
    pub fn new(
        title: impl Into<String>,
        ours: impl Into<String>,
        baseline: impl Into<String>,
    ) -> Self {
        Self {
            title: title.into(),
            ours: ours.into(),
            baseline: baseline.into(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    /// The rows so far.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// True when no row has a goal that is not met.
    pub fn all_met(&self) -> bool {
        self.rows.iter().all(|r| r.met != Some(false))
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "### {}", self.title)?;
        writeln!(f)?;
        writeln!(
            f,
            "| what | {} | {} | ratio | goal | met |",
            self.ours, self.baseline
        )?;
        writeln!(f, "|---|---:|---:|---:|---|---|")?;
        for r in &self.rows {
            let met = match r.met {
                Some(true) => "met",
                Some(false) => "**not met**",
                None => "—",
            };
            writeln!(
                f,
                "| {} | {} | {} | {} | {} | {} |",
                r.what, r.ours, r.baseline, r.ratio, r.goal, met
            )?;
        }
        Ok(())
    }
}

/// Formats nanoseconds with a unit that keeps three significant digits or so.
pub fn format_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

/// Formats an integer with thin spaces between thousands (`1 234 567`).
pub fn format_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_renders_as_markdown_with_met_flags() {
        let mut t = Table::new("Decode", "ours", "prost");
        t.push(Row::new("a", "1 ns", "1 ns", "1.000", "≤ 1.02", Some(true)));
        t.push(Row::new(
            "b",
            "2 ns",
            "1 ns",
            "2.000",
            "≤ 1.02",
            Some(false),
        ));
        t.push(Row::new("c", "3", "—", "—", "—", None));
        let s = t.to_string();
        assert!(s.starts_with("### Decode\n\n| what | ours | prost | ratio | goal | met |\n"));
        assert!(s.contains("| a | 1 ns | 1 ns | 1.000 | ≤ 1.02 | met |"));
        assert!(s.contains("| b | 2 ns | 1 ns | 2.000 | ≤ 1.02 | **not met** |"));
        assert!(s.contains("| c | 3 | — | — | — | — |"));
        assert!(!t.all_met());
    }

    #[test]
    fn numbers_are_formatted_for_reading() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1_000), "1 000");
        assert_eq!(format_count(1_234_567), "1 234 567");
        assert_eq!(format_ns(12.34), "12.3 ns");
        assert_eq!(format_ns(12_345.0), "12.35 µs");
        assert_eq!(format_ns(3_210_000.0), "3.21 ms");
    }
}
