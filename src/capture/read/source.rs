//! What is read ([`Input`]) and where the parser reads chunks from ([`Source`]): bytes in
//! memory or a file read piece by piece.

use std::fs::File;
use std::sync::Arc;

use super::errors::ReadError;

/// What is being read, which the captures read share.
pub(super) enum Input {
    /// Bytes in memory.
    Memory {
        bytes: Arc<Vec<u8>>,
        /// Records are read where they lie in `bytes` when the machine allows it
        /// ([`FileRecords::scan`]); copied otherwise.
        in_place: bool,
    },
    /// A file that is not held in memory: each event chunk's records are checked as they
    /// are read, then let go, and read again from the file when used ([`Chunk::Lazy`]).
    File {
        file: Arc<File>,
        /// Event chunks' records are not even read ([`Capture::read_index`]): only their
        /// prefix (the thread), the count coming from the chunk's length.
        skim: bool,
    },
}

/// Where the parser reads chunks from: bytes in memory, or a file read piece by piece.
pub(super) trait Source {
    /// Bytes in all.
    fn len(&self) -> usize;
    /// The `len` bytes at `at`, which lie within [`Source::len`].
    fn get(&mut self, at: usize, len: usize) -> Result<&[u8], ReadError>;
}

/// Bytes in memory.
pub(super) struct Memory<'a>(pub(super) &'a [u8]);

impl Source for Memory<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&mut self, at: usize, len: usize) -> Result<&[u8], ReadError> {
        Ok(&self.0[at..at + len])
    }
}

/// A file, read a piece at a time into a buffer that holds the largest piece asked for
/// (a chunk's content: a recorded chunk is 32 KiB).
pub(super) struct FileSource<'a> {
    pub(super) file: &'a File,
    pub(super) len: usize,
    pub(super) buffer: Vec<u8>,
    /// Told how far the reading got, every [`PROGRESS_EVERY`] bytes.
    pub(super) on_read: &'a (dyn Fn(u64) + Sync),
    /// Where the reading was when last told.
    pub(super) reported: usize,
}

/// Bytes read between calls of [`FileSource::on_read`].
const PROGRESS_EVERY: usize = 4 << 20;

impl Source for FileSource<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&mut self, at: usize, len: usize) -> Result<&[u8], ReadError> {
        self.buffer.resize(len, 0);
        let read = crate::capture::file::read_at(self.file, &mut self.buffer, at as u64);
        if read < len {
            return Err(ReadError::at(
                at + read,
                format!(
                    "the file ends after {} bytes, shorter than when its reading began ({} bytes): was it cut while being read?",
                    at + read,
                    self.len
                ),
            ));
        }
        if at + len >= self.reported + PROGRESS_EVERY {
            self.reported = at + len;
            (self.on_read)(self.reported as u64);
        }
        Ok(&self.buffer)
    }
}
