//! Log lines about what peers cause, at most one a second.

use std::time::{Duration, Instant};

/// Counts occurrences of one thing worth a log line — a connection refused, a
/// handshake that failed — and lets through at most one line a second, with the count
/// since the last one, so that a flood of them cannot flood the log.
///
/// ```
/// let mut refused = iop_driver::RateLog::default();
/// let mut lines = Vec::new();
/// for _ in 0..1_000 {
///     refused.hit(|count| lines.push(count));
/// }
/// assert_eq!(lines, [1]); // the first at once; the other 999 go into the next line
/// ```
#[derive(Debug, Default)]
pub struct RateLog {
    last: Option<Instant>,
    /// Occurrences not yet logged.
    pending: u64,
}

impl RateLog {
    /// How often a line may be logged.
    pub const INTERVAL: Duration = Duration::from_secs(1);

    /// One more occurrence: `log` is called with the occurrences since the last line
    /// (this one included) when a line is due, and not otherwise.
    pub fn hit(&mut self, log: impl FnOnce(u64)) {
        self.pending += 1;
        let now = Instant::now();
        if self
            .last
            .is_none_or(|at| now.duration_since(at) >= Self::INTERVAL)
        {
            self.last = Some(now);
            log(std::mem::take(&mut self.pending));
        }
    }
}
