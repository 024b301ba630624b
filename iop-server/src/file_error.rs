//! Errors about an operator's file, naming the file, the line and the field.

use std::fmt;
use std::path::{Path, PathBuf};

/// A config or enrolment file that could not be used: which file, where, and why.
///
/// Displays as `FILE:LINE: MESSAGE` (or `FILE: MESSAGE` when no line applies), the form
/// editors and terminals link to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line of the offending value, when known.
    pub line: Option<usize>,
    /// What is wrong, naming the field.
    pub message: String,
}

impl FileError {
    pub(crate) fn new(path: &Path, line: Option<usize>, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            line,
            message: message.into(),
        }
    }

    /// A file that could not be read at all.
    pub(crate) fn read(path: &Path, err: &std::io::Error) -> Self {
        Self::new(path, None, format!("cannot read: {err}"))
    }

    /// A TOML syntax or shape error; the line is taken from the error's span.
    pub(crate) fn toml(path: &Path, text: &str, err: &toml::de::Error) -> Self {
        let line = err.span().map(|s| line_of(text, s.start));
        // The toml message is multi-line with a snippet; its first line is the cause.
        let message = err.message().trim().to_owned();
        Self::new(path, line, message)
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for FileError {}

/// The 1-based line holding byte `offset` of `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()
        .get(..end)
        .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
        + 1
}

/// Reads a whole UTF-8 file, as a [`FileError`] on failure.
pub(crate) fn read_text(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|e| FileError::read(path, &e))
}
