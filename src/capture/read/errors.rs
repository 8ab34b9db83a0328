//! Why a capture could not be read: [`ReadError`].

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a capture could not be read: the file could not be read, or its bytes are not a
/// capture this build can read. Its message names the file (when read from a path), the byte
/// offset and what is wrong there, as in
/// `run.tscope: at byte 4128: no chunk starts here: found [00, 00, 00, 00], expected the magic "TSCP"`.
#[derive(Debug)]
pub struct ReadError {
    pub(super) path: Option<PathBuf>,
    pub(super) offset: Option<u64>,
    pub(super) what: String,
    pub(super) io: Option<io::Error>,
}

impl ReadError {
    /// A problem with the bytes at `offset`.
    pub(super) fn at(offset: usize, what: impl Into<String>) -> Self {
        Self {
            path: None,
            offset: Some(offset as u64),
            what: what.into(),
            io: None,
        }
    }

    /// The file at `path` could not be read (or decompressed).
    pub(super) fn io(path: Option<&Path>, what: &str, e: io::Error) -> Self {
        Self {
            path: path.map(Path::to_path_buf),
            offset: None,
            what: what.to_owned(),
            io: Some(e),
        }
    }

    /// The file the capture was read from; `None` for
    /// [`Capture::from_bytes`](crate::Capture::from_bytes).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The byte offset of the problem in the file (in the decompressed data for a gzipped
    /// one); `None` when the file could not be read at all.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(e) = &self.io {
            return match &self.path {
                Some(path) => write!(f, "{} {}: {e}", self.what, path.display()),
                None => write!(f, "{}: {e}", self.what),
            };
        }
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        if let Some(offset) = self.offset {
            write!(f, "at byte {offset}: ")?;
        }
        f.write_str(&self.what)
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io.as_ref().map(|e| e as _)
    }
}
