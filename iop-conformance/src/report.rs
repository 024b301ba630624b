//! What a run found: one [`CaseResult`] per case, printed as it ends and summed up at
//! the end, as text or as JSON for CI.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

/// A case's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The peer did what the rule says.
    Pass,
    /// It did not; the detail says what was seen.
    Fail,
    /// The case could not run against this peer (it lacks what the case needs).
    Skip,
}

impl Verdict {
    /// `PASS`, `FAIL` or `SKIP`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Skip => "SKIP",
        }
    }
}

/// A case: its id (a check of PROTOCOL.md §11 where one exists), the section of its
/// rule, and what it tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// `edge.command.operation`, `cp.flow.hello`, ...
    pub id: &'static str,
    /// The PROTOCOL.md section, without `§`.
    pub section: &'static str,
    /// What the case does and expects, in words.
    pub title: &'static str,
}

/// A case's entry in a list of cases.
pub(crate) const fn case(id: &'static str, section: &'static str, title: &'static str) -> Case {
    Case { id, section, title }
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// Its verdict.
    pub verdict: Verdict,
    /// What the peer did (for a failure: what was expected and what was seen).
    pub detail: String,
    /// How long it took.
    pub elapsed: Duration,
}

impl fmt::Display for CaseResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} (§{}) {}: {}",
            self.verdict.as_str(),
            self.case.id,
            self.case.section,
            self.case.title,
            self.detail
        )
    }
}

/// A whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The results, in the order the cases ran.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// Results with `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.results.iter().filter(|r| r.verdict == verdict).count()
    }

    /// The result of case `id`, if it ran.
    pub fn result(&self, id: &str) -> Option<&CaseResult> {
        self.results.iter().find(|r| r.case.id == id)
    }

    /// True when no case failed.
    pub fn passed(&self) -> bool {
        self.count(Verdict::Fail) == 0
    }

    /// `N passed, N failed, N skipped`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.count(Verdict::Pass),
            self.count(Verdict::Fail),
            self.count(Verdict::Skip)
        )
    }

    /// The report as JSON: `mode`, `target`, `passed`, the counts, and each case's
    /// `id`, `section`, `title`, `verdict`, `detail` and `elapsedMs`.
    pub fn to_json(&self, mode: &str, target: &str) -> Value {
        json!({
            "mode": mode,
            "target": target,
            "passed": self.passed(),
            "counts": {
                "pass": self.count(Verdict::Pass),
                "fail": self.count(Verdict::Fail),
                "skip": self.count(Verdict::Skip),
            },
            "cases": self.results.iter().map(|r| json!({
                "id": r.case.id,
                "section": r.case.section,
                "title": r.case.title,
                "verdict": r.verdict.as_str(),
                "detail": r.detail,
                "elapsedMs": r.elapsed.as_millis() as u64,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Why a case did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotPassed {
    /// The peer broke the rule: what was seen.
    Fail(String),
    /// The case cannot run against this peer: why.
    Skip(String),
}

/// What a case returns: what it saw when it passed.
pub type CaseOutcome = Result<String, NotPassed>;

/// Fails the case with a formatted message.
#[macro_export]
macro_rules! fail {
    ($($t:tt)*) => { return Err($crate::report::NotPassed::Fail(format!($($t)*))) };
}

/// Skips the case with a formatted message.
#[macro_export]
macro_rules! skip {
    ($($t:tt)*) => { return Err($crate::report::NotPassed::Skip(format!($($t)*))) };
}

/// Which cases to run: all, or those whose id starts with one of `only`.
pub fn selected(case: &Case, only: &[String]) -> bool {
    only.is_empty() || only.iter().any(|o| case.id.starts_with(o.as_str()))
}
