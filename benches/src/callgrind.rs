//! Instruction counts with valgrind's callgrind, without a helper crate.
//!
//! The bench binary re-runs itself under
//! `valgrind --tool=callgrind --toggle-collect=*iop_bench::callgrind::measured*`, one
//! scenario per run (named in the `IOP_BENCH_SCENARIO` variable). Callgrind then
//! counts only the instructions executed while [`measured`] is on the stack — the
//! operation and everything it calls (allocator included), not the setup, the
//! warm-up or the loop around it. The count is read from the `totals:` line of the
//! output file and divided by the number of measured calls.

use std::hint::black_box;
use std::io;
use std::path::Path;
use std::process::Command;

/// The environment variable naming the scenario a child run executes.
pub const SCENARIO_VAR: &str = "IOP_BENCH_SCENARIO";

/// The callgrind function pattern matching [`measured`] (every instantiation).
pub const TOGGLE_PATTERN: &str = "*iop_bench::callgrind::measured*";

/// Runs `f` inside the one function whose instructions callgrind counts.
#[inline(never)]
pub fn measured<R>(f: impl FnOnce() -> R) -> R {
    black_box(f())
}

/// The total event count (`Ir`) of a callgrind output file's text.
pub fn parse_totals(callgrind_out: &str) -> Option<u64> {
    let line = callgrind_out
        .lines()
        .find(|l| l.starts_with("totals:"))
        .or_else(|| callgrind_out.lines().find(|l| l.starts_with("summary:")))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `exe` under callgrind with `scenario` in [`SCENARIO_VAR`], writing the profile
/// to `out_file`, and returns the instructions counted inside [`measured`].
pub fn count(exe: &Path, scenario: &str, out_file: &Path) -> io::Result<u64> {
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--toggle-collect={TOGGLE_PATTERN}"))
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(exe)
        .env(SCENARIO_VAR, scenario)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "valgrind failed on scenario {scenario}: {status}"
        )));
    }
    let text = std::fs::read_to_string(out_file)?;
    parse_totals(&text)
        .ok_or_else(|| io::Error::other(format!("no totals line in {}", out_file.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_are_read_from_a_callgrind_file() {
        let text = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 1234\nfn=(1) x\n5 6\ntotals: 1234\n";
        assert_eq!(parse_totals(text), Some(1234));
        assert_eq!(parse_totals("events: Ir\nsummary: 77\n"), Some(77));
        assert_eq!(parse_totals("events: Ir\n"), None);
    }

    #[test]
    fn measured_returns_its_closures_value() {
        assert_eq!(measured(|| 6 * 7), 42);
    }
}
