//! Errors from reading and building traces. Every parse error names the file, the line and what
//! was expected there.

use std::path::{Path, PathBuf};

/// A trace could not be read, parsed or built.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A line of a trace file is malformed.
    #[error("{}:{line}: {msg}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What was found and what was expected.
        msg: String,
    },
    /// A trace file is well-formed line by line but unusable as a whole (e.g. empty).
    #[error("{}: {msg}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// A trace file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A named scenario or baseline does not exist.
    #[error("unknown {what} `{name}` (expected one of: {expected})")]
    Unknown {
        /// "scenario" or "baseline".
        what: &'static str,
        /// The name given.
        name: String,
        /// The valid names.
        expected: String,
    },
    /// The operation does not apply to this input.
    #[error("{0}")]
    Unsupported(String),
    /// A measured trace shipped outside the repository could not be found.
    #[error("cannot find trace `{name}` (looked in: {searched}); set ROAM_TRACES to the directory holding cellular/ and wifi/")]
    NotFound {
        /// Relative name of the trace, e.g. `cellular/Verizon-EVDO-driving.down`.
        name: String,
        /// The directories searched.
        searched: String,
    },
}

impl TraceError {
    pub(crate) fn parse(path: &Path, line: usize, msg: impl Into<String>) -> TraceError {
        TraceError::Parse {
            path: path.to_path_buf(),
            line,
            msg: msg.into(),
        }
    }
    pub(crate) fn invalid(path: &Path, msg: impl Into<String>) -> TraceError {
        TraceError::Invalid {
            path: path.to_path_buf(),
            msg: msg.into(),
        }
    }
    pub(crate) fn io(path: &Path, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Read a whole text file, mapping errors to [`TraceError::Io`].
pub(crate) fn read_text(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|e| TraceError::io(path, e))
}

/// Lines of a text file with their 1-based numbers, skipping blanks and `#` comments.
pub(crate) fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}
