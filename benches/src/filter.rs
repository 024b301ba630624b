//! Which rows a bench runs: `cargo bench -p iop-bench --bench <bench> -- <NAME>...`.

/// The row names asked for on the command line: the arguments that do not start
/// with `-` (cargo passes `--bench` to every bench binary).
#[derive(Debug, Clone, Default)]
pub struct Filter(Vec<String>);

impl Filter {
    /// The filter of this process's arguments.
    pub fn from_args() -> Self {
        Self(
            std::env::args()
                .skip(1)
                .filter(|a| !a.starts_with('-'))
                .collect(),
        )
    }

    /// Whether the row `name` runs: every row when no name was given, else those
    /// whose name contains one of them.
    pub fn wants(&self, name: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|f| name.contains(f.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_name_keeps_every_row_and_names_keep_rows_containing_one() {
        assert!(Filter::default().wants("status-0"));
        let f = Filter(vec!["status".into(), "command".into()]);
        assert!(f.wants("status-0-fleet") && f.wants("command"));
        assert!(!f.wants("heartbeat"));
    }
}
