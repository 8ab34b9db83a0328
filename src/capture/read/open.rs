//! The ways in: [`Capture::read`] and its kin, from a path or from bytes.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::record::registry::Untracked;

use super::errors::ReadError;
use super::gzip::{gunzip, is_gzip};
use super::parser::Parser;
use super::source::{FileSource, Input, Memory};
use crate::capture::Capture;

impl Capture {
    /// Reads the capture file at `path`: the first session it holds (a file written by
    /// [`Profiler::write_capture`](crate::Profiler::write_capture) holds one; for a file of
    /// several, see [`Capture::read_all`], and the capture's [`warnings`](Capture::warnings)
    /// say how many there were). A gzipped file (such as one written to a `.gz` path) is
    /// decompressed first, to at most 64 times its size plus 64 MiB: a file that decompresses past that is an error (a
    /// gzip bomb).
    ///
    /// What can be read past is, with a warning: a chunk type or version this build does not
    /// know is skipped, a last chunk cut short keeps the records it holds, a session without
    /// footer (its process stopped abruptly) ends at its last record (and decoding ends each
    /// scope it left open at its own thread's last record: see
    /// [`Salvage`](crate::trace::Salvage)), a gzip stream cut short gives the bytes it
    /// decompresses to before the cut. Anything else is a
    /// [`ReadError`] naming the file, the byte offset and the problem. Reading never panics,
    /// and allocates no more than the file's size asks for, whatever its lengths say.
    ///
    /// Callsites read from a file are interned for the rest of the process (once per distinct
    /// name, file, line and module, so reading a file again costs nothing more).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let prof = tickscope::Profiler::builder().current_thread().start();
    /// {
    ///     let _g = tickscope::scope!("load", bytes = 4096);
    /// }
    /// prof.stop();
    /// let path = std::env::temp_dir().join(format!("read-{}.tscope", std::process::id()));
    /// prof.write_capture(&path)?;
    ///
    /// let capture = tickscope::Capture::read(&path)?;
    /// let report = tickscope::report::Report::new(&capture.decode());
    /// assert_eq!(report.get("load").unwrap().calls, 1);
    ///
    /// std::fs::write(&path, b"not a capture")?;
    /// let error = tickscope::Capture::read(&path).unwrap_err();
    /// assert_eq!(error.offset(), Some(0));
    /// assert!(error.to_string().contains("at byte 0"));
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn read(path: impl AsRef<Path>) -> Result<Capture, ReadError> {
        let mut sessions = Self::read_all(path)?;
        let count = sessions.len();
        sessions.truncate(1);
        let Some(mut first) = sessions.pop() else {
            // `parse` gives at least one session or an error.
            return Err(ReadError::at(0, "no session"));
        };
        if count > 1 {
            first.warnings.push(format!(
                "the file holds {count} sessions: this is the first (Capture::read_all reads \
                 them all)"
            ));
        }
        Ok(first)
    }

    /// Reads every session of the capture file at `path`, in file order: a file made by
    /// concatenating capture files (`cat a.tscope b.tscope > both.tscope`) gives both
    /// sessions, which [`Trace::from_captures`](crate::trace::Trace::from_captures) decodes
    /// into one trace, each process with its threads, on Unix time. See [`Capture::read`] for
    /// what is an error and what a warning.
    ///
    /// A plain (not gzipped) regular file is not held in memory: it is read chunk by chunk,
    /// each event chunk's records checked and let go, and read again from the file when the
    /// capture is decoded or written, a chunk at a time. The memory the captures take is then
    /// a few words per event chunk and their tables, whatever the file's size; the file must
    /// stay as it is while they are used (records it lost since read as cut there). A gzipped
    /// file is decompressed into a temporary file (in [`std::env::temp_dir`], removed from
    /// its folder at once; on Linux, and into memory where no such file can be made or
    /// written, or the process may write files only up to a size), read the same way.
    pub fn read_all(path: impl AsRef<Path>) -> Result<Vec<Capture>, ReadError> {
        Self::read_all_with_progress(path, &|_| {})
    }

    /// [`Capture::read_all`], calling `on_read` with the number of bytes of the file read so
    /// far as it goes (for a progress display).
    pub fn read_all_with_progress(
        path: impl AsRef<Path>,
        on_read: &(dyn Fn(u64) + Sync),
    ) -> Result<Vec<Capture>, ReadError> {
        read_path(path.as_ref(), None, false, on_read)
    }

    /// Every session of the capture file at `path` as [`Capture::read_all`] reads it, but
    /// without reading the records of its event chunks: only the chunk headers, the session
    /// headers, tables and footers, and each event chunk's 16-byte prefix (whose thread it
    /// is), seeking over the records. It takes the same time and memory whatever the file's
    /// size: what `tickscope info` reads.
    ///
    /// The counts ([`Capture::record_count`], [`Capture::chunk_count`]) come from the chunks'
    /// lengths, and the window from the footer; records are not checked, so a record of an
    /// unknown kind, which [`Capture::read_all`] refuses, is counted here (decoding the
    /// capture reads the records and stops a chunk at it). A session without footer (salvaged)
    /// is read as [`Capture::read_all`] reads it, records and all, as only they say where its
    /// window ends. A gzipped file is decompressed whole first.
    ///
    /// ```
    /// let prof = tickscope::Profiler::builder().current_thread().start();
    /// for _ in 0..3 {
    ///     let _g = tickscope::scope!("step");
    /// }
    /// prof.stop();
    /// let path = std::env::temp_dir().join(format!("doc-index-{}.tscope", std::process::id()));
    /// prof.write_capture(&path)?;
    /// let index = tickscope::Capture::read_index(&path)?;
    /// assert_eq!(index[0].record_count(), 6);
    /// assert_eq!(index[0].decode().threads[0].spans.len(), 3);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_index(path: impl AsRef<Path>) -> Result<Vec<Capture>, ReadError> {
        let path = path.as_ref();
        let sessions = read_path(path, None, true, &|_| {})?;
        if sessions.iter().any(|s| s.salvaged.is_some()) {
            // Let go first: a gzipped file's temporary copy goes with them.
            drop(sessions);
            return read_path(path, None, false, &|_| {});
        }
        Ok(sessions)
    }

    /// Reads every session of a capture file held in memory, as [`Capture::read_all`] (errors
    /// then name no file). Gzipped bytes are decompressed first.
    ///
    /// ```
    /// let prof = tickscope::Profiler::builder().current_thread().start();
    /// prof.stop();
    /// let mut both = Vec::new();
    /// prof.capture().write_to(&mut both)?;
    /// prof.capture().write_to(&mut both)?; // files concatenate
    /// assert_eq!(tickscope::Capture::from_bytes(&both).unwrap().len(), 2);
    ///
    /// let error = tickscope::Capture::from_bytes(&both[..20]).unwrap_err();
    /// assert_eq!(error.offset(), Some(0)); // the session header is cut short
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Vec<Capture>, ReadError> {
        let _untracked = Untracked::enter();
        if is_gzip(bytes) {
            let (owned, cut) = gunzip(bytes, None)?;
            return parse_with(owned, None, true, cut);
        }
        parse(bytes.to_vec(), None)
    }

    /// Reads every session of a capture file held in memory, as [`Capture::from_bytes`], but
    /// keeps `bytes` instead of copying them: the captures hold the records where they lie in
    /// `bytes` (what [`Capture::read_all`] does with the file it reads). For a caller that
    /// reads the file itself, say in pieces to show progress.
    ///
    /// ```
    /// let prof = tickscope::Profiler::builder().current_thread().start();
    /// {
    ///     let _g = tickscope::scope!("step");
    /// }
    /// prof.stop();
    /// let mut file = Vec::new();
    /// prof.capture().write_to(&mut file)?;
    /// let captures = tickscope::Capture::from_vec(file).unwrap();
    /// assert_eq!(captures[0].record_count(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_vec(bytes: Vec<u8>) -> Result<Vec<Capture>, ReadError> {
        parse(bytes, None)
    }
}

/// The sessions of the file at `path`, of its first `limit` bytes when given: read chunk by
/// chunk and left in the file ([`Input::File`]; only chunk headers and tables when `skim`),
/// gzipped ones first decompressed into a temporary file (on Linux), or, not a regular file,
/// read whole into memory.
pub(in crate::capture) fn read_path(
    path: &Path,
    limit: Option<u64>,
    skim: bool,
    on_read: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Capture>, ReadError> {
    let _untracked = Untracked::enter();
    let cannot_read = |e| ReadError::io(Some(path), "cannot read", e);
    let file = File::open(path).map_err(cannot_read)?;
    let metadata = file.metadata().map_err(cannot_read)?;
    let mut magic = [0u8; 2];
    let magic_read = metadata.is_file() && crate::capture::file::read_at(&file, &mut magic, 0) == 2;
    // A gzipped file: decompressed into a temporary file, whose records are then read as a
    // plain file's are, chunk by chunk.
    #[cfg(all(target_os = "linux", feature = "enabled", feature = "gzip"))]
    if magic_read
        && is_gzip(&magic)
        && limit.is_none()
        && let Some(plain) = super::gzip::gunzip_to_file(&file, metadata.len(), path, on_read)
    {
        let super::gzip::Gunzipped { file, len, cut } = plain?;
        let mut sessions = read_lazily(file, len, skim, &|_| {}, path)?;
        if let (Some(cut), Some(last)) = (cut, sessions.last_mut()) {
            last.warnings.push(cut);
        }
        on_read(metadata.len());
        return Ok(sessions);
    }
    let lazy = cfg!(any(unix, windows)) && magic_read && !is_gzip(&magic);
    if !lazy {
        let mut bytes = crate::capture::read_file(path, on_read).map_err(cannot_read)?;
        if let Some(limit) = limit {
            bytes.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        return parse(bytes, Some(path));
    }
    let size = limit.map_or(metadata.len(), |limit| limit.min(metadata.len()));
    let sessions = read_lazily(file, size, skim, on_read, path)?;
    on_read(size);
    Ok(sessions)
}

/// The sessions of the first `size` bytes of `file` (read from `path`), read chunk by chunk
/// and left in the file ([`Input::File`]; only chunk headers and tables when `skim`).
fn read_lazily(
    file: File,
    size: u64,
    skim: bool,
    on_read: &(dyn Fn(u64) + Sync),
    path: &Path,
) -> Result<Vec<Capture>, ReadError> {
    let len = usize::try_from(size).map_err(|_| {
        ReadError::io(
            Some(path),
            "cannot read",
            io::Error::other("the file is too large for this machine's address space"),
        )
    })?;
    if skim {
        advise_random(&file);
    }
    let file = Arc::new(file);
    let mut source = FileSource {
        file: &file,
        len,
        buffer: Vec::new(),
        on_read,
        reported: 0,
    };
    Parser {
        input: Input::File {
            file: Arc::clone(&file),
            skim,
        },
        names_left: len,
        sessions: Vec::new(),
        session: None,
    }
    .run(&mut source)
    .map_err(|mut e| {
        e.path = Some(path.to_path_buf());
        e
    })
}

/// Tells the OS that `file` is read at scattered places (chunk headers, skimming): without
/// it, reading ahead after each header would read the records between them too, all of a
/// file that is not in the page cache.
fn advise_random(file: &File) {
    #[cfg(all(target_os = "linux", feature = "enabled"))]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: `posix_fadvise` only reads its arguments; the descriptor is open (`file` is
        // borrowed for the call). Its result is advice taken or not: nothing to check.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        }
    }
    #[cfg(not(all(target_os = "linux", feature = "enabled")))]
    let _ = file;
}

/// The sessions of `bytes`, read from `path` if given; decompressed first when gzipped.
fn parse(bytes: Vec<u8>, path: Option<&Path>) -> Result<Vec<Capture>, ReadError> {
    parse_with(bytes, path, true, None)
}

/// [`parse`], reading records in place when `in_place` (and the machine allows it); `gz_cut`:
/// the warning of a gzip stream cut short that `bytes` were decompressed from, for the last
/// session.
pub(super) fn parse_with(
    bytes: Vec<u8>,
    path: Option<&Path>,
    in_place: bool,
    mut gz_cut: Option<String>,
) -> Result<Vec<Capture>, ReadError> {
    // Reading allocates: the profiler's work, not the program's.
    let _untracked = Untracked::enter();
    let bytes = if is_gzip(&bytes) {
        let (bytes, cut) = gunzip(&bytes, path)?;
        gz_cut = gz_cut.or(cut);
        bytes
    } else {
        bytes
    };
    let bytes = Arc::new(bytes);
    Parser {
        input: Input::Memory {
            bytes: Arc::clone(&bytes),
            in_place,
        },
        names_left: bytes.len(),
        sessions: Vec::new(),
        session: None,
    }
    .run(&mut Memory(&bytes))
    .map(|mut sessions| {
        if let (Some(cut), Some(last)) = (gz_cut, sessions.last_mut()) {
            last.warnings.push(cut);
        }
        sessions
    })
    .map_err(|mut e| {
        e.path = path.map(Path::to_path_buf);
        e
    })
}
