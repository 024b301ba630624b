//! Plain-text tables with aligned columns, for the demo and terminal output.

use std::fmt;

/// A table of text cells: a header row and data rows, printed with columns padded to
/// their widest cell (counted in `char`s) and two spaces between columns.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new<I, S>(header: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells print empty, extra cells are kept).
    pub fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    /// Number of data rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True with no data rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = Vec::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate() {
                let w = cell.chars().count();
                match widths.get_mut(i) {
                    Some(old) => *old = (*old).max(w),
                    None => widths.push(w),
                }
            }
        }
        widths
    }
}

fn write_row(f: &mut fmt::Formatter<'_>, row: &[String], widths: &[usize]) -> fmt::Result {
    let mut line = String::new();
    for (i, width) in widths.iter().enumerate() {
        let cell = row.get(i).map_or("", String::as_str);
        if i > 0 {
            line.push_str("  ");
        }
        line.push_str(cell);
        let pad = width.saturating_sub(cell.chars().count());
        line.extend(std::iter::repeat_n(' ', pad));
    }
    writeln!(f, "{}", line.trim_end())
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let widths = self.widths();
        write_row(f, &self.header, &widths)?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        write_row(f, &rule, &widths)?;
        for row in &self.rows {
            write_row(f, row, &widths)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut t = Table::new(["node", "state"]);
        t.row(["gpu-1", "READY"])
            .row(["cpu-long-name", "DISCONNECTED"]);
        let text = t.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "node           state");
        assert_eq!(lines[1], "-------------  ------------");
        assert_eq!(lines[2], "gpu-1          READY");
        assert_eq!(lines[3], "cpu-long-name  DISCONNECTED");
    }
}
