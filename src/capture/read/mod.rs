//! Reading capture files back into [`Capture`]s: every session of a file, each checked chunk
//! by chunk.
//!
//! Reading never trusts a length: every one is checked against the input left before it is
//! used, and what is allocated is proportional to the input's size. What cannot be read is an
//! error that names the byte offset ([`ReadError`]); what can be read past (an unknown chunk
//! type or version, a last chunk cut short, a session without footer) is read past with a
//! warning ([`Capture::warnings`]).
//!
//! Records are not copied: the captures keep the input's bytes and use each event chunk's
//! records where they lie ([`FileRecords`]), once their kinds are checked.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::record::hash::FxHashMap;
use std::fmt;
use std::fs::File;
use std::io;
#[cfg(feature = "gzip")]
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::record::callsite::{self, Callsite};
use crate::record::clock::{Calibration, ClockSource, Compensation};
use crate::record::event::{RawEvent, RawKind};
use crate::record::memory::MemoryMode;
use crate::record::registry::Untracked;

use super::format::ORIGIN;
use super::format::{
    ALIGN, CALLSITE_ENTRY, CALLSITES, CHUNK_HEADER, CHUNK_MAGIC, CLOCK, CLOCK_COMPENSATED,
    CLOCK_FIXED, CLOCK_IDENTITY, CLOCK_SOURCE_CPU, CLOCK_SOURCE_CPU_UNVERIFIED, CLOCK_SOURCE_MASK,
    CLOCK_SOURCE_MONOTONIC, CLOCK_UNCOMPENSATED, EVENT_CHUNK, EVENT_CHUNK_VERSION, EVENT_PREFIX,
    FOOTER_MEMORY, FOOTER_MEMORY_COUNTS, FORMAT_VERSION, NO_STRING, RECORD, SESSION_FOOTER,
    SESSION_FOOTER_LEN, SESSION_FOOTER_LEN_CUT, SESSION_FOOTER_LEN_OVERWRITTEN,
    SESSION_FOOTER_LEN_SALVAGED, SESSION_HEADER, SESSION_HEADER_FIXED, SESSION_HEADER_VERSION,
    STRINGS, THREAD_ENTRY, THREADS, chunk_name, chunk_version,
};
use super::format::{EVENTS_CUT, EVENTS_PACKED};
#[cfg(feature = "gzip")]
use super::format::{GZIP_ALLOWANCE, GZIP_MAX_RATIO};
use super::{Capture, CaptureThread, Chunk, ClockPairs, FileRecords, Header, LazyRecords};
use crate::record::flight::CutScope;

/// Bytes of an event chunk's prefix and of a record, as `usize`.
const PREFIX: usize = EVENT_PREFIX as usize;
const RECORD_LEN: usize = RECORD as usize;

/// Bytes of a file's start that say what it is when it is not a capture.
const SNIFF: usize = 1 << 20;

/// Why a capture could not be read: the file could not be read, or its bytes are not a
/// capture this build can read. Its message names the file (when read from a path), the byte
/// offset and what is wrong there, as in
/// `run.tscope: at byte 4128: no chunk starts here: found [00, 00, 00, 00], expected the magic "TSCP"`.
#[derive(Debug)]
pub struct ReadError {
    path: Option<PathBuf>,
    offset: Option<u64>,
    what: String,
    io: Option<io::Error>,
}

impl ReadError {
    /// A problem with the bytes at `offset`.
    fn at(offset: usize, what: impl Into<String>) -> Self {
        Self {
            path: None,
            offset: Some(offset as u64),
            what: what.into(),
            io: None,
        }
    }

    /// The file at `path` could not be read (or decompressed).
    fn io(path: Option<&Path>, what: &str, e: io::Error) -> Self {
        Self {
            path: path.map(Path::to_path_buf),
            offset: None,
            what: what.to_owned(),
            io: Some(e),
        }
    }

    /// The file the capture was read from; `None` for [`Capture::from_bytes`].
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
    /// file is decompressed into memory, whole.
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
    /// window ends. A gzipped file is decompressed whole.
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

/// True when `bytes` start with the gzip magic.
fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// The most bytes a gzipped input of `compressed` bytes may decompress to:
/// [`GZIP_MAX_RATIO`] times its size plus [`GZIP_ALLOWANCE`].
#[cfg(feature = "gzip")]
fn gzip_limit(compressed: usize) -> u64 {
    (compressed as u64)
        .saturating_mul(GZIP_MAX_RATIO)
        .saturating_add(GZIP_ALLOWANCE)
}

/// `gz` decompressed (every gzip member, one after the other), unless it decompresses to more
/// than [`gzip_limit`] allows: an error then, once that much is decompressed (not more).
///
/// A stream cut short (a `.tscope.gz` of a program killed while writing it, or truncated) or
/// damaged past its start gives the bytes decompressed before the problem, and a warning that
/// says so (the second value): they are read as a plain file cut there would be. A stream that
/// gives no byte at all is an error.
#[cfg(feature = "gzip")]
fn gunzip(gz: &[u8], path: Option<&Path>) -> Result<(Vec<u8>, Option<String>), ReadError> {
    let limit = gzip_limit(gz.len());
    let mut out = Vec::new();
    let result = flate2::read::MultiGzDecoder::new(gz)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out);
    let cut = match result {
        Ok(_) => None,
        // `read_to_end` keeps what was read before the error.
        Err(e) if !out.is_empty() => Some(format!(
            "the gzip stream ends early or is damaged ({e}) after {} decompressed bytes: they \
             are read as they are, as a file cut there",
            out.len()
        )),
        Err(e) => return Err(ReadError::io(path, "cannot decompress", e)),
    };
    if out.len() as u64 > limit {
        return Err(ReadError {
            path: path.map(Path::to_path_buf),
            offset: None,
            what: format!(
                "gzipped, it decompresses to more than {limit} bytes ({GZIP_MAX_RATIO} times its \
                 {} bytes plus {} MiB): not read, as no capture compresses that well (a gzip \
                 bomb?)",
                gz.len(),
                GZIP_ALLOWANCE >> 20
            ),
            io: None,
        });
    }
    Ok((out, cut))
}

/// Without the `gzip` feature a gzipped capture is an error that says so.
#[cfg(not(feature = "gzip"))]
fn gunzip(_gz: &[u8], path: Option<&Path>) -> Result<(Vec<u8>, Option<String>), ReadError> {
    Err(ReadError {
        path: path.map(Path::to_path_buf),
        offset: None,
        what: "gzipped, and tickscope was built without its `gzip` feature, which reads gzipped \
               captures"
            .to_owned(),
        io: None,
    })
}

/// The sessions of the file at `path`, of its first `limit` bytes when given: read chunk by
/// chunk and left in the file ([`Input::File`]; only chunk headers and tables when `skim`),
/// or, gzipped or not a regular file, read whole into memory.
pub(super) fn read_path(
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
    let lazy = cfg!(any(unix, windows))
        && metadata.is_file()
        && super::file::read_at(&file, &mut magic, 0) == 2
        && !is_gzip(&magic);
    if !lazy {
        let mut bytes = super::read_file(path, on_read).map_err(cannot_read)?;
        if let Some(limit) = limit {
            bytes.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        return parse(bytes, Some(path));
    }
    let size = limit.map_or(metadata.len(), |limit| limit.min(metadata.len()));
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
    let sessions = Parser {
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
    })?;
    on_read(size);
    Ok(sessions)
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
fn parse_with(
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

/// What is being read, which the captures read share.
enum Input {
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
trait Source {
    /// Bytes in all.
    fn len(&self) -> usize;
    /// The `len` bytes at `at`, which lie within [`Source::len`].
    fn get(&mut self, at: usize, len: usize) -> Result<&[u8], ReadError>;
}

/// Bytes in memory.
struct Memory<'a>(&'a [u8]);

impl Source for Memory<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&mut self, at: usize, len: usize) -> Result<&[u8], ReadError> {
        Ok(&self.0[at..at + len])
    }
}

/// A file, read a piece at a time into a buffer that holds the largest piece asked for
/// (a chunk's content: a recorded chunk is 64 KiB).
struct FileSource<'a> {
    file: &'a File,
    len: usize,
    buffer: Vec<u8>,
    /// Told how far the reading got, every [`PROGRESS_EVERY`] bytes.
    on_read: &'a (dyn Fn(u64) + Sync),
    /// Where the reading was when last told.
    reported: usize,
}

/// Bytes read between calls of [`FileSource::on_read`].
const PROGRESS_EVERY: usize = 4 << 20;

impl Source for FileSource<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&mut self, at: usize, len: usize) -> Result<&[u8], ReadError> {
        self.buffer.resize(len, 0);
        let read = super::file::read_at(self.file, &mut self.buffer, at as u64);
        if read < len {
            return Err(ReadError::at(
                at + read,
                format!(
                    "the file ends after {} bytes, shorter than when its reading began ({}                      bytes): was it cut while being read?",
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

/// Reads chunk after chunk, gathering sessions.
struct Parser {
    input: Input,
    /// Bytes of thread names that may still be copied: each thread holds its name as a string
    /// of its own, so that many thread entries naming one long string would cost far more
    /// than the input; names are copied up to the input's size in all, and cut short past it.
    names_left: usize,
    sessions: Vec<Capture>,
    /// The session being read: its header was read, its footer not yet.
    session: Option<Session>,
}

impl Parser {
    fn run(mut self, source: &mut dyn Source) -> Result<Vec<Capture>, ReadError> {
        let total = source.len();
        if total == 0 {
            return Err(ReadError::at(
                0,
                "the input is empty: a capture starts with a session header chunk",
            ));
        }
        let skim = matches!(self.input, Input::File { skim: true, .. });
        let mut pos = 0;
        while pos < total {
            let left = total - pos;
            if left < CHUNK_HEADER {
                if pos == 0 {
                    return Err(ReadError::at(
                        0,
                        format!(
                            "{left} bytes are too few for a chunk header ({CHUNK_HEADER} bytes): \
                             not a capture"
                        ),
                    ));
                }
                self.warn(format!(
                    "byte {pos}: the last {left} bytes are too few for a chunk header \
                     ({CHUNK_HEADER} bytes): ignored (the file was cut short?)"
                ));
                if let Some(session) = &mut self.session {
                    session.lost_bytes = session.lost_bytes.saturating_add(left as u64);
                }
                break;
            }
            let head: [u8; CHUNK_HEADER] = array(source.get(pos, CHUNK_HEADER)?, 0);
            if u32_at(&head, 0) != CHUNK_MAGIC {
                if pos == 0
                    && let Some(what) = other_format(source.get(0, total.min(SNIFF))?)
                {
                    return Err(ReadError::at(0, format!("{what}, not a tickscope capture")));
                }
                return Err(ReadError::at(
                    pos,
                    format!(
                        "no chunk starts here: found {:02x?}, expected the magic \"TSCP\"",
                        &head[..4]
                    ),
                ));
            }
            let (kind, version, len) = (u16_at(&head, 4), u16_at(&head, 6), u64_at(&head, 8));
            if pos == 0 && kind != SESSION_HEADER {
                return Err(ReadError::at(
                    0,
                    format!(
                        "a capture starts with a session header chunk (type {SESSION_HEADER}), \
                         not {}",
                        describe(kind)
                    ),
                ));
            }
            let body_len = left - CHUNK_HEADER;
            let Some(len) = usize::try_from(len).ok().filter(|&len| len <= body_len) else {
                let body = source.get(pos + CHUNK_HEADER, body_len)?;
                self.cut_short(pos, kind, version, len, body)?;
                break;
            };
            let next = CHUNK_HEADER + len.next_multiple_of(ALIGN);
            if next > left {
                self.warn(format!(
                    "byte {pos}: the {} chunk misses {} bytes of padding at the end of the \
                     input (the file was cut short?)",
                    describe(kind),
                    next - left
                ));
            }
            // Skimming, an event chunk's records are not read: its prefix says whose they
            // are (and whether they are the entries of cut scopes, which are read).
            let skimmed = skim
                && kind == EVENT_CHUNK
                && len >= PREFIX
                && u64_at(source.get(pos + CHUNK_HEADER, PREFIX)?, 8) != EVENTS_CUT;
            let content = source.get(pos + CHUNK_HEADER, if skimmed { PREFIX } else { len })?;
            self.chunk(pos, kind, version, content, len)?;
            pos += next.min(left);
        }
        self.end_session(None, total);
        Ok(self.sessions)
    }

    /// A warning for the session being read, or the last one read.
    fn warn(&mut self, warning: String) {
        if let Some(session) = &mut self.session {
            session.warnings.push(warning);
        } else if let Some(last) = self.sessions.last_mut() {
            last.warnings.push(warning);
        }
    }

    /// One whole chunk at `pos`, of `len` bytes of content: `content`, or when skimming an
    /// event chunk its prefix only.
    fn chunk(
        &mut self,
        pos: usize,
        kind: u16,
        version: u16,
        content: &[u8],
        len: usize,
    ) -> Result<(), ReadError> {
        if kind == SESSION_HEADER {
            self.end_session(None, pos);
            if version != SESSION_HEADER_VERSION {
                return Err(ReadError::at(
                    pos,
                    format!(
                        "session header chunk version {version} is not supported (this build \
                         reads version {SESSION_HEADER_VERSION})"
                    ),
                ));
            }
            self.session = Some(Session::new(pos, header(pos, content)?));
            return Ok(());
        }
        let Some(name) = chunk_name(kind) else {
            self.warn(format!(
                "byte {pos}: unknown chunk type {kind} (version {version}, {len} bytes): skipped"
            ));
            return Ok(());
        };
        // Event chunks of older versions are read as the current one (which adds record
        // kinds).
        let readable = |known: u16| known == version || (kind == EVENT_CHUNK && version < known);
        if let Some(known) = chunk_version(kind).filter(|&known| !readable(known)) {
            self.warn(format!(
                "byte {pos}: {name} chunk version {version} is not supported (this build reads \
                 version {known}): skipped"
            ));
            return Ok(());
        }
        let Some(session) = &mut self.session else {
            self.warn(format!(
                "byte {pos}: a {name} chunk outside any session (after a footer, before the \
                 next header): skipped"
            ));
            return Ok(());
        };
        match kind {
            CLOCK => session.clock(pos, content)?,
            STRINGS => session.strings(pos, content),
            CALLSITES => session.callsites(pos, content)?,
            THREADS => session.threads(pos, content, &mut self.names_left)?,
            EVENT_CHUNK => {
                session.events(&self.input, pos, content, len, false)?;
            }
            EVENTS_PACKED => session.packed(&self.input, pos, content)?,
            SESSION_FOOTER => {
                let footer = footer(pos, content)?;
                self.end_session(Some(footer), pos);
            }
            ORIGIN => match crate::capture::origin::parse_origin(content) {
                Some(origin) => session.header.origin = Some(origin),
                None => session.warnings.push(format!(
                    "byte {pos}: an origin chunk of {len} bytes that says no origin this build \
                     knows: skipped"
                )),
            },
            // `chunk_name` knows no other type.
            _ => {}
        }
        Ok(())
    }

    /// The chunk at `pos` announces `len` bytes of content where only `body` is left: a
    /// file cut short. An event chunk keeps its whole records; other chunks are lost.
    fn cut_short(
        &mut self,
        pos: usize,
        kind: u16,
        version: u16,
        len: u64,
        body: &[u8],
    ) -> Result<(), ReadError> {
        if kind == SESSION_HEADER {
            return Err(ReadError::at(
                pos,
                format!(
                    "the session header chunk announces {len} bytes of content, but only {} \
                     are left",
                    body.len()
                ),
            ));
        }
        let salvaged = match &mut self.session {
            Some(session)
                if kind == EVENT_CHUNK
                    && (1..=EVENT_CHUNK_VERSION).contains(&version)
                    && body.len() >= PREFIX =>
            {
                let whole = PREFIX + (body.len() - PREFIX) / RECORD_LEN * RECORD_LEN;
                session.events(&self.input, pos, &body[..whole], whole, true)?
            }
            _ => 0,
        };
        if let Some(session) = &mut self.session {
            // Of the chunk's content, what its header announces beyond the whole records kept.
            let lost = len.saturating_sub(salvaged as u64);
            session.lost_bytes = session.lost_bytes.saturating_add(lost);
        }
        self.warn(format!(
            "byte {pos}: the {} chunk is cut short by the end of the input: salvaged {salvaged} \
             of {len} bytes",
            describe(kind)
        ));
        Ok(())
    }

    /// Ends the session being read, if any, at `pos`: with its footer, or salvaged without.
    fn end_session(&mut self, footer: Option<Footer>, pos: usize) {
        if let Some(session) = self.session.take() {
            self.sessions.push(session.finish(footer, pos));
        }
    }
}

/// "type N" or the type's name, for messages.
fn describe(kind: u16) -> Cow<'static, str> {
    match chunk_name(kind) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(format!("type {kind}")),
    }
}

/// The session header chunk's content, at `pos`.
fn header(pos: usize, content: &[u8]) -> Result<Header, ReadError> {
    if content.len() < SESSION_HEADER_FIXED {
        return Err(ReadError::at(
            pos,
            format!(
                "the session header holds {} bytes, fewer than its fixed {SESSION_HEADER_FIXED}",
                content.len()
            ),
        ));
    }
    let format_version = u16_at(content, 0);
    if format_version != FORMAT_VERSION {
        return Err(ReadError::at(
            pos + CHUNK_HEADER,
            format!(
                "capture format version {format_version} is not supported (this build reads \
                 version {FORMAT_VERSION})"
            ),
        ));
    }
    let mut strings = content[SESSION_HEADER_FIXED..].split(|&b| b == 0);
    let mut next = || {
        strings
            .next()
            .map(|s| String::from_utf8_lossy(s).into_owned())
    };
    let (producer, process_name, host_name) = (next(), next(), next());
    // `split` gives one piece more than there are NULs: three strings need a fourth piece.
    let (Some(producer), Some(process_name), Some(host_name), Some(_)) =
        (producer, process_name, host_name, next())
    else {
        return Err(ReadError::at(
            pos + CHUNK_HEADER + SESSION_HEADER_FIXED,
            "the session header's producer, process name and host name are not three \
             NUL-terminated strings",
        ));
    };
    Ok(Header {
        format_version,
        producer,
        process_id: u32_at(content, 4),
        process_name,
        host_name,
        start_unix_ns: u64_at(content, 8),
        origin: None,
    })
}

/// A string table: its bytes (the last NUL left out) and where each string starts, 4 bytes a
/// string however short it is. String `n` ends at the NUL before string `n + 1`, the last one
/// at the end of the bytes.
#[derive(Default)]
struct StringTable {
    bytes: Vec<u8>,
    starts: Vec<u32>,
}

impl StringTable {
    /// The strings of `bytes` (copied), NUL-separated; `None` past 4 GiB.
    fn new(bytes: &[u8]) -> Option<Self> {
        u32::try_from(bytes.len()).ok()?;
        let mut starts = Vec::with_capacity(1 + bytes.iter().filter(|&&b| b == 0).count());
        starts.push(0);
        // Each start is at most the length, which fits.
        starts.extend(
            bytes
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == 0)
                .map(|(at, _)| at as u32 + 1),
        );
        Some(Self {
            bytes: bytes.to_vec(),
            starts,
        })
    }

    /// Strings in the table.
    fn len(&self) -> usize {
        self.starts.len()
    }

    /// String `id`, without its NUL.
    fn get(&self, id: u32) -> Option<&[u8]> {
        let index = id as usize;
        let start = *self.starts.get(index)? as usize;
        let end = self
            .starts
            .get(index + 1)
            .map_or(self.bytes.len(), |&next| next as usize - 1);
        self.bytes.get(start..end)
    }
}

/// What a session footer says.
struct Footer {
    start_tick: u64,
    end_tick: u64,
    records: u64,
    dropped_events: u64,
    memory: MemoryMode,
    /// Events a flight recorder overwrote (0 in a footer of 40 bytes).
    overwritten_events: u64,
    /// A flight recorder's window start common to every thread (in a footer of 56 bytes).
    cut_start: Option<u64>,
    /// The bytes a session salvaged when read before, and written back since, lost at its
    /// cut (in a footer of 64 bytes).
    salvaged: Option<u64>,
}

/// The session footer chunk's content, at `pos`.
fn footer(pos: usize, content: &[u8]) -> Result<Footer, ReadError> {
    if content.len() < SESSION_FOOTER_LEN {
        return Err(ReadError::at(
            pos,
            format!(
                "the session footer holds {} bytes, fewer than its {SESSION_FOOTER_LEN}",
                content.len()
            ),
        ));
    }
    Ok(Footer {
        start_tick: u64_at(content, 0),
        end_tick: u64_at(content, 8),
        records: u64_at(content, 16),
        dropped_events: u64_at(content, 24),
        memory: match u32_at(content, 32) {
            flags if flags & FOOTER_MEMORY == 0 => MemoryMode::Off,
            flags if flags & FOOTER_MEMORY_COUNTS != 0 => MemoryMode::Counts,
            _ => MemoryMode::Timeline,
        },
        overwritten_events: match content.len() >= SESSION_FOOTER_LEN + 8 {
            true => u64_at(content, SESSION_FOOTER_LEN),
            false => 0,
        },
        cut_start: (content.len() >= SESSION_FOOTER_LEN_CUT)
            .then(|| u64_at(content, SESSION_FOOTER_LEN_OVERWRITTEN))
            .filter(|&tick| tick != u64::MAX),
        salvaged: (content.len() >= SESSION_FOOTER_LEN_SALVAGED)
            .then(|| u64_at(content, SESSION_FOOTER_LEN_CUT))
            .and_then(|marked| marked.checked_sub(1)),
    })
}

/// A session being read.
struct Session {
    /// Where its header starts.
    offset: usize,
    header: Header,
    clock: Option<ClockPairs>,
    /// The current string table.
    strings: StringTable,
    /// The strings of the current table interned (see `callsite::intern_str`) by id, as
    /// callsites ask for them: each string is hashed and leaked once, however many callsites
    /// name it.
    interned: FxHashMap<u32, &'static str>,
    /// `(id, offset of the entry, callsite)`, as declared.
    callsites: Vec<(u32, usize, &'static Callsite)>,
    threads: Vec<ThreadBuild>,
    /// Index in `threads` by thread id.
    thread_index: HashMap<u64, usize>,
    records: u64,
    /// Per thread id, the scopes cut at the start of a flight recorder's window (from its
    /// cut-scopes chunks).
    cut: Vec<(u64, Vec<CutScope>)>,
    warnings: Vec<String>,
    /// A thread name was cut short (warned once).
    names_cut: bool,
    /// Bytes lost at the cut, for a session without footer (see `Capture::salvaged`).
    lost_bytes: u64,
}

/// A thread of a session being read: its records go into chunks as they come.
struct ThreadBuild {
    id: u64,
    name: Option<String>,
    from_tick: u64,
    /// The thread's records so far, in file order: one chunk per event chunk of the file
    /// that holds any.
    chunks: Vec<Chunk>,
    /// The tick of the last record that is not data, for a session without footer.
    last_tick: Option<u64>,
    /// The most the allocations and frees seen say of the memory mode, for a session without
    /// footer.
    memory: MemoryMode,
}

impl ThreadBuild {
    /// Adds the records of an event chunk; `memory`: an allocation or a free is among them.
    fn push(&mut self, chunk: Chunk, memory: MemoryMode) {
        let records = chunk.records();
        if records.is_empty() {
            return;
        }
        let last = records
            .iter()
            .rev()
            .find(|r| !r.kind.carries_data())
            .map(|r| r.tick);
        drop(records);
        self.push_checked(chunk, memory, last);
    }

    /// Adds the records of an event chunk, which holds some, checked by the caller: `memory`
    /// as for [`ThreadBuild::push`], `last` the tick of its last record that is not data.
    fn push_checked(&mut self, chunk: Chunk, memory: MemoryMode, last: Option<u64>) {
        if last.is_some() {
            self.last_tick = last;
        }
        self.memory = self.memory.max(memory);
        self.chunks.push(chunk);
    }

    /// Adds the records of an event chunk that were not read ([`Capture::read_index`]): they
    /// say nothing of the thread's last tick nor of the memory mode.
    fn push_unread(&mut self, records: LazyRecords) {
        if records.len > 0 {
            self.chunks.push(Chunk::Lazy(records));
        }
    }
}

impl Session {
    fn new(offset: usize, header: Header) -> Self {
        Self {
            offset,
            header,
            clock: None,
            strings: StringTable::default(),
            interned: FxHashMap::default(),
            callsites: Vec::new(),
            threads: Vec::new(),
            thread_index: HashMap::new(),
            records: 0,
            cut: Vec::new(),
            warnings: Vec::new(),
            names_cut: false,
            lost_bytes: 0,
        }
    }

    /// The clock chunk at `pos`.
    fn clock(&mut self, pos: usize, content: &[u8]) -> Result<(), ReadError> {
        if content.len() < CLOCK_FIXED {
            return Err(ReadError::at(
                pos,
                format!(
                    "the clock chunk holds {} bytes, fewer than its fixed {CLOCK_FIXED}",
                    content.len()
                ),
            ));
        }
        let flags = u32_at(content, 0);
        let (starts, stops) = (u32_at(content, 4) as usize, u32_at(content, 8) as usize);
        let middles = u32_at(content, 28) as usize;
        // At most 3 × u32::MAX pairs of 16 bytes: no overflow in 64 bits.
        let need = CLOCK_FIXED as u64 + 16 * (starts as u64 + stops as u64 + middles as u64);
        if need > content.len() as u64 {
            return Err(ReadError::at(
                pos,
                format!(
                    "the clock chunk announces {starts} start, {stops} stop and {middles} \
                     checkpoint pairs ({need} bytes), but holds {} bytes",
                    content.len()
                ),
            ));
        }
        let pairs = |from: usize, n: usize| Calibration {
            pairs: content[from..from + 16 * n]
                .chunks_exact(16)
                .map(|p| (u64_at(p, 0), u64_at(p, 8)))
                .collect(),
        };
        let clock = ClockPairs {
            start: pairs(CLOCK_FIXED, starts),
            stop: pairs(CLOCK_FIXED + 16 * starts, stops),
            checkpoints: pairs(CLOCK_FIXED + 16 * (starts + stops), middles).pairs,
            ns_per_tick: (flags & CLOCK_IDENTITY == 0).then(|| f64::from_bits(u64_at(content, 16))),
            compensation: if flags & CLOCK_COMPENSATED != 0 {
                Compensation::Ticks {
                    inner: u32_at(content, 12),
                    outer: u32_at(content, 24),
                }
            } else if flags & CLOCK_UNCOMPENSATED != 0 {
                Compensation::Off
            } else {
                Compensation::Unknown
            },
            source: match flags & CLOCK_SOURCE_MASK {
                _ if flags & CLOCK_IDENTITY != 0 => Some(ClockSource::Mock),
                CLOCK_SOURCE_CPU => Some(ClockSource::Cpu),
                CLOCK_SOURCE_CPU_UNVERIFIED => Some(ClockSource::CpuUnverified),
                CLOCK_SOURCE_MONOTONIC => Some(ClockSource::Monotonic),
                _ => None,
            },
        };
        let previous = self.clock.replace(clock);
        // A streaming session writes its start calibration first, and again with the stop
        // pairs at its end: that one completes the first.
        let completes = |first: &ClockPairs| {
            self.clock.as_ref().is_some_and(|now| {
                now.start == first.start
                    && now.ns_per_tick == first.ns_per_tick
                    && now.compensation == first.compensation
            }) && first.stop.pairs.is_empty()
        };
        if previous.as_ref().is_some_and(|first| !completes(first)) {
            self.warnings.push(format!(
                "byte {pos}: a second clock chunk in the session replaces the first"
            ));
        }
        Ok(())
    }

    /// The string table at `pos`: it replaces the one before.
    fn strings(&mut self, pos: usize, content: &[u8]) {
        let content = match content.split_last() {
            Some((0, strings)) => strings,
            Some(_) => {
                self.warnings.push(format!(
                    "byte {pos}: the string table does not end with a NUL: its last string is \
                     taken as it is"
                ));
                content
            }
            None => {
                self.strings = StringTable::default();
                self.interned.clear();
                return;
            }
        };
        self.interned.clear();
        let Some(table) = StringTable::new(content) else {
            self.strings = StringTable::default();
            self.warnings.push(format!(
                "byte {pos}: a string table of {} bytes (4 GiB or more) is not read: it holds no \
                 strings",
                content.len()
            ));
            return;
        };
        self.strings = table;
        let bad = content
            .split(|&b| b == 0)
            .filter(|s| std::str::from_utf8(s).is_err())
            .count();
        if bad > 0 {
            self.warnings.push(format!(
                "byte {pos}: {bad} strings of the string table are not UTF-8: their bad bytes \
                 read as U+FFFD"
            ));
        }
    }

    /// String `id` of the current table, which entry `what` at `at` names.
    fn string(
        &self,
        at: usize,
        what: &dyn fmt::Display,
        id: u32,
    ) -> Result<Cow<'_, str>, ReadError> {
        match self.strings.get(id) {
            Some(s) => Ok(String::from_utf8_lossy(s)),
            None => Err(ReadError::at(
                at,
                format!(
                    "{what} names string {id}, but the session's string table holds {} strings",
                    self.strings.len()
                ),
            )),
        }
    }

    /// String `id` of the current table (which exists: checked with [`Session::string`]),
    /// interned.
    fn interned_string(&mut self, id: u32) -> &'static str {
        let strings = &self.strings;
        self.interned.entry(id).or_insert_with(|| {
            let string = strings.get(id).unwrap_or_default();
            callsite::intern_str(&String::from_utf8_lossy(string))
        })
    }

    /// The callsite table at `pos`.
    fn callsites(&mut self, pos: usize, content: &[u8]) -> Result<(), ReadError> {
        if !content.len().is_multiple_of(CALLSITE_ENTRY) {
            return Err(ReadError::at(
                pos,
                format!(
                    "a callsite table holds {CALLSITE_ENTRY}-byte entries: {} bytes are not a \
                     whole number of them",
                    content.len()
                ),
            ));
        }
        self.callsites.reserve(content.len() / CALLSITE_ENTRY);
        for (i, entry) in content.chunks_exact(CALLSITE_ENTRY).enumerate() {
            let at = pos + CHUNK_HEADER + i * CALLSITE_ENTRY;
            let id = u32_at(entry, 0);
            let field = |what: &str, offset: usize| -> Result<Cow<'_, str>, ReadError> {
                self.string(
                    at,
                    &format_args!("callsite {id}'s {what}"),
                    u32_at(entry, offset),
                )
            };
            if u32_at(entry, 4) == NO_STRING {
                // Declared without a name: an id the writer's table held but knew nothing of.
                self.callsites.push((id, at, &callsite::UNDECLARED));
                continue;
            }
            // Check every field before interning any.
            field("name", 4)?;
            field("file", 8)?;
            field("module path", 16)?;
            let name = self.interned_string(u32_at(entry, 4));
            let file = self.interned_string(u32_at(entry, 8));
            let module_path = self.interned_string(u32_at(entry, 16));
            let site = callsite::intern_callsite(name, file, u32_at(entry, 12), module_path);
            self.callsites.push((id, at, site));
        }
        Ok(())
    }

    /// The thread table at `pos`; thread names are copied while `names_left` allows.
    fn threads(
        &mut self,
        pos: usize,
        content: &[u8],
        names_left: &mut usize,
    ) -> Result<(), ReadError> {
        if !content.len().is_multiple_of(THREAD_ENTRY) {
            return Err(ReadError::at(
                pos,
                format!(
                    "a thread table holds {THREAD_ENTRY}-byte entries: {} bytes are not a whole \
                     number of them",
                    content.len()
                ),
            ));
        }
        for (i, entry) in content.chunks_exact(THREAD_ENTRY).enumerate() {
            let at = pos + CHUNK_HEADER + i * THREAD_ENTRY;
            let id = u64_at(entry, 0);
            let name = match u32_at(entry, 16) {
                NO_STRING => None,
                string => Some(
                    self.string(at, &format_args!("thread {id}'s name"), string)?
                        .into_owned(),
                ),
            };
            if self.thread_index.contains_key(&id) {
                self.warnings.push(format!(
                    "byte {at}: thread {id} is declared again: the first entry is kept"
                ));
                continue;
            }
            let name = name.map(|name| {
                let kept = name.floor_char_boundary(*names_left);
                *names_left -= kept;
                if kept < name.len() && !std::mem::replace(&mut self.names_cut, true) {
                    self.warnings.push(format!(
                        "byte {at}: thread names are cut short past the input's size in all: \
                         thread {id}'s name of {} bytes keeps {kept} (and the names after it, \
                         what is left)",
                        name.len()
                    ));
                }
                name[..kept].to_owned()
            });
            self.thread_index.insert(id, self.threads.len());
            self.threads.push(ThreadBuild {
                id,
                name,
                from_tick: u64_at(entry, 8),
                chunks: Vec::new(),
                last_tick: None,
                memory: MemoryMode::Off,
            });
        }
        Ok(())
    }

    /// The event chunk at `pos` of `input` with `content` (whole records); returns the bytes
    /// read. `salvage` (a chunk cut short) keeps the records before a bad one instead of
    /// failing.
    fn events(
        &mut self,
        input: &Input,
        pos: usize,
        content: &[u8],
        len: usize,
        salvage: bool,
    ) -> Result<usize, ReadError> {
        if len < PREFIX || !(len - PREFIX).is_multiple_of(RECORD_LEN) || content.len() < PREFIX {
            return Err(ReadError::at(
                pos,
                format!(
                    "an events chunk holds {PREFIX} bytes (thread id, reserved) and then \
                     {RECORD_LEN}-byte records: {len} bytes are not that"
                ),
            ));
        }
        let id = u64_at(content, 0);
        let Some(&index) = self.thread_index.get(&id) else {
            return Err(ReadError::at(
                pos,
                format!(
                    "an events chunk of thread {id}, which no thread table of the session \
                     declares"
                ),
            ));
        };
        let records = &content[PREFIX..];
        let count = (len - PREFIX) / RECORD_LEN;
        let start = pos + CHUNK_HEADER + PREFIX;
        if records.len() < count * RECORD_LEN {
            // Skimmed: the records are neither read nor checked; they are counted.
            if let Input::File { file, .. } = input {
                self.threads[index].push_unread(LazyRecords {
                    file: Arc::clone(file),
                    offset: start as u64,
                    len: count,
                    packed: None,
                });
            }
            self.records += count as u64;
            return Ok(len);
        }
        if u64_at(content, 8) == EVENTS_CUT {
            // The entries of the scopes cut at the window's start, outermost first.
            for (n, record) in records.chunks_exact(RECORD_LEN).enumerate() {
                let kind = RawKind::from_u32(u32_at(record, 12));
                let event = kind.map(|k| RawEvent::new(k, u32_at(record, 8), u64_at(record, 0)));
                let Some(scope) = event.as_ref().and_then(CutScope::from_record) else {
                    return Err(ReadError::at(
                        start + n * RECORD_LEN,
                        format!(
                            "record {n} of the cut-scopes chunk at byte {pos} is not a scope's \
                             entry"
                        ),
                    ));
                };
                match self.cut.last_mut() {
                    Some((thread, scopes)) if *thread == id => scopes.push(scope),
                    _ => self.cut.push((id, vec![scope])),
                }
            }
            self.records += count as u64;
            return Ok(content.len());
        }
        let in_place = match input {
            Input::Memory {
                bytes,
                in_place: true,
            } => FileRecords::scan(bytes, start, count),
            _ => None,
        };
        let (chunk, taken, memory) = match (in_place, input) {
            (Some(scanned), _) => {
                let taken = scanned.records.records().len();
                (Chunk::File(scanned.records), taken, scanned.memory)
            }
            (None, Input::File { file, .. }) => {
                // Checked here, read again from the file when used.
                let mut memory = MemoryMode::Off;
                let mut taken = 0;
                for record in records.chunks_exact(RECORD_LEN) {
                    let Some(kind) = RawKind::from_u32(u32_at(record, 12)) else {
                        break;
                    };
                    memory = memory.max(MemoryMode::of_kind(kind as u32));
                    taken += 1;
                }
                let lazy = LazyRecords {
                    file: Arc::clone(file),
                    offset: start as u64,
                    len: taken,
                    packed: None,
                };
                let last = records[..taken * RECORD_LEN]
                    .chunks_exact(RECORD_LEN)
                    .rev()
                    .filter_map(|r| Some((RawKind::from_u32(u32_at(r, 12))?, u64_at(r, 0))))
                    .find(|(kind, _)| !kind.carries_data())
                    .map(|(_, tick)| tick);
                if taken > 0 {
                    self.threads[index].push_checked(Chunk::Lazy(lazy), memory, last);
                }
                self.records += taken as u64;
                return self.events_end(records, pos, start, taken, count, salvage, len);
            }
            (None, Input::Memory { .. }) => {
                // Bounded by the chunk's bytes, which are in the input.
                let mut owned = Vec::with_capacity(count);
                let mut memory = MemoryMode::Off;
                for record in records.chunks_exact(RECORD_LEN) {
                    let Some(kind) = RawKind::from_u32(u32_at(record, 12)) else {
                        break;
                    };
                    memory = memory.max(MemoryMode::of_kind(kind as u32));
                    owned.push(RawEvent::new(kind, u32_at(record, 8), u64_at(record, 0)));
                }
                let taken = owned.len();
                (Chunk::Owned(owned), taken, memory)
            }
        };
        self.threads[index].push(chunk, memory);
        self.records += taken as u64;
        self.events_end(records, pos, start, taken, count, salvage, len)
    }

    /// The packed events chunk at `pos` ([`EVENTS_PACKED`]), whole: unpacked and checked;
    /// kept as the file's bytes when read from a file (unpacked again when used), else as
    /// its records. A damaged chunk is an error, never records made up or cut short.
    fn packed(&mut self, input: &Input, pos: usize, content: &[u8]) -> Result<(), ReadError> {
        let damaged = |e: super::compress::PackError| ReadError::at(pos, e.to_string());
        let prefix = super::compress::Prefix::read(content).map_err(damaged)?;
        if prefix.version > EVENT_CHUNK_VERSION {
            self.warnings.push(format!(
                "byte {pos}: packed events chunk of events chunk version {} is not supported \
                 (this build reads up to version {EVENT_CHUNK_VERSION}): skipped",
                prefix.version
            ));
            return Ok(());
        }
        let file = match input {
            Input::File { file, skim } => Some((file, *skim)),
            Input::Memory { .. } => None,
        };
        // (A file's chunk is kept where it lies, unpacked when used; from memory, unpacked.)
        let lazy = |file: &Arc<File>| LazyRecords {
            file: Arc::clone(file),
            offset: (pos + CHUNK_HEADER) as u64,
            len: prefix.count,
            packed: Some(content.len()),
        };
        if let Some((file, true)) = file
            && prefix.reserved != EVENTS_CUT
        {
            // Skimmed: counted, not unpacked.
            let Some(&index) = self.thread_index.get(&prefix.thread) else {
                return Err(self.undeclared(pos, prefix.thread));
            };
            self.threads[index].push_unread(lazy(file));
            self.records += prefix.count as u64;
            return Ok(());
        }
        if let Some((file, _)) = file
            && prefix.reserved != EVENTS_CUT
        {
            // Checked here (as unpacking would), unpacked again when used.
            let checked = super::compress::check(content).map_err(damaged)?;
            let Some(&index) = self.thread_index.get(&prefix.thread) else {
                return Err(self.undeclared(pos, prefix.thread));
            };
            if prefix.count > 0 {
                let chunk = Chunk::Lazy(lazy(file));
                self.threads[index].push_checked(chunk, checked.memory, checked.last_tick);
            }
            self.records += prefix.count as u64;
            return Ok(());
        }
        let mut records = Vec::new();
        super::compress::unpack(content, &mut records).map_err(damaged)?;
        if prefix.reserved != EVENTS_CUT {
            let Some(&index) = self.thread_index.get(&prefix.thread) else {
                return Err(self.undeclared(pos, prefix.thread));
            };
            self.records += records.len() as u64;
            let memory = records
                .iter()
                .map(|r| MemoryMode::of_kind(r.kind as u32))
                .max();
            let memory = memory.unwrap_or(MemoryMode::Off);
            self.threads[index].push(Chunk::Owned(records), memory);
            return Ok(());
        }
        // The entries of cut scopes: as the event chunk it packs, read from memory.
        let mut plain = Vec::with_capacity(PREFIX + RECORD_LEN * records.len());
        plain.extend_from_slice(&prefix.thread.to_le_bytes());
        plain.extend_from_slice(&prefix.reserved.to_le_bytes());
        for r in &records {
            plain.extend_from_slice(&r.tick.to_le_bytes());
            plain.extend_from_slice(&r.id.to_le_bytes());
            plain.extend_from_slice(&(r.kind as u32).to_le_bytes());
        }
        let memory = Input::Memory {
            bytes: Arc::new(Vec::new()),
            in_place: false,
        };
        self.events(&memory, pos, &plain, plain.len(), false)?;
        Ok(())
    }

    /// The error of an events chunk at `pos` of thread `id`, which the session does not
    /// declare.
    fn undeclared(&self, pos: usize, id: u64) -> ReadError {
        ReadError::at(
            pos,
            format!(
                "an events chunk of thread {id}, which no thread table of the session declares"
            ),
        )
    }

    /// What [`Session::events`] returns once `taken` of the `count` records of the chunk at
    /// `pos` (`records`, from byte `start`; `len` bytes of content) are taken: the bytes read,
    /// or the error of a record of unknown kind (kept up to it when salvaging).
    #[allow(clippy::too_many_arguments)]
    fn events_end(
        &self,
        records: &[u8],
        pos: usize,
        start: usize,
        taken: usize,
        count: usize,
        salvage: bool,
        len: usize,
    ) -> Result<usize, ReadError> {
        if taken < count {
            if salvage {
                return Ok(PREFIX + taken * RECORD_LEN);
            }
            let kind = u32_at(records, taken * RECORD_LEN + 12);
            return Err(ReadError::at(
                start + taken * RECORD_LEN,
                format!("record {taken} of the events chunk at byte {pos} has unknown kind {kind}"),
            ));
        }
        Ok(len)
    }

    /// The capture of the session, which ends at `end` (its footer, or where the next session
    /// or the input begins).
    fn finish(mut self, footer: Option<Footer>, end: usize) -> Capture {
        let callsites = self.callsite_table();
        let clock = self.clock.take().unwrap_or_else(|| {
            self.warnings.push(format!(
                "the session at byte {} has no clock chunk: its ticks are taken as nanoseconds",
                self.offset
            ));
            ClockPairs {
                start: Calibration::default(),
                stop: Calibration::default(),
                ns_per_tick: None,
                compensation: Compensation::Unknown,
                source: None,
                checkpoints: Vec::new(),
            }
        });
        let overwritten_events = footer.as_ref().map_or(0, |f| f.overwritten_events);
        // Salvaged now, or when read before and written back with its footer since.
        let salvaged = match &footer {
            None => Some(self.lost_bytes),
            Some(footer) => footer.salvaged,
        };
        let cut_start = footer.as_ref().and_then(|f| f.cut_start);
        let (start_tick, end_tick, dropped_events, memory) = match footer {
            Some(footer) => {
                if footer.records != self.records {
                    self.warnings.push(format!(
                        "byte {end}: the footer counts {} records, the session holds {}",
                        footer.records, self.records
                    ));
                }
                (
                    footer.start_tick,
                    footer.end_tick,
                    footer.dropped_events,
                    footer.memory,
                )
            }
            None => {
                let start = self
                    .threads
                    .iter()
                    .map(|t| t.from_tick)
                    .min()
                    .or_else(|| clock.start.pairs.first().map(|p| p.0))
                    .unwrap_or(0);
                let end_tick = self
                    .threads
                    .iter()
                    .filter_map(|t| t.last_tick)
                    .max()
                    .unwrap_or(start);
                // Where the window ends, as a time since the session start and the thread
                // whose record it is: ticks mean nothing to a reader.
                let last = self
                    .threads
                    .iter()
                    .filter(|t| t.last_tick == Some(end_tick))
                    .map(|t| match &t.name {
                        Some(name) => format!("thread {} \"{name}\"", t.id),
                        None => format!("thread {}", t.id),
                    })
                    .next()
                    .map_or_else(String::new, |thread| format!(", on {thread}"));
                let ticks = end_tick.saturating_sub(start) as f64;
                let since = clock.ns_per_tick.map_or(ticks, |rate| ticks * rate);
                self.warnings.push(format!(
                    "the session at byte {} {NO_FOOTER} (it ends at byte {end}; its process \
                     may have stopped abruptly): salvaged {} records of {} threads, {} bytes \
                     ({} bytes lost at the cut), its window ending at its last record, {} \
                     after the session start{last}; scopes left open end at their own \
                     thread's last record",
                    self.offset,
                    self.records,
                    self.threads.len(),
                    end - self.offset,
                    self.lost_bytes,
                    crate::record::clock::format_ns(since as u64),
                ));
                let memory = self
                    .threads
                    .iter()
                    .map(|t| t.memory)
                    .max()
                    .unwrap_or_default();
                (start, end_tick, 0, memory)
            }
        };
        let threads = self
            .threads
            .into_iter()
            .map(|t| CaptureThread {
                id: t.id,
                name: t.name,
                from_tick: t.from_tick,
                chunks: t.chunks,
            })
            .collect();
        Capture {
            header: self.header,
            clock,
            callsites,
            threads,
            start_tick,
            end_tick,
            memory,
            dropped_events,
            overwritten_events,
            cut: {
                let mut cut = self.cut;
                cut.sort_by_key(|&(id, _)| id);
                cut
            },
            cut_start,
            warnings: self.warnings,
            salvaged,
        }
    }

    /// The callsite table by id (id `n` at index `n - 1`). Ids run from 1 to the number of
    /// entries the session declares, so a forged id allocates nothing: entries outside that
    /// range are skipped, ids no entry declares are [`callsite::UNDECLARED`].
    fn callsite_table(&mut self) -> Vec<&'static Callsite> {
        let declared = self.callsites.len();
        let in_range = |id: u32| (1..=declared).contains(&(id as usize));
        let len = self
            .callsites
            .iter()
            .map(|&(id, ..)| id)
            .filter(|&id| in_range(id))
            .max()
            .unwrap_or(0) as usize;
        let mut table = vec![&callsite::UNDECLARED; len];
        for &(id, at, site) in &self.callsites {
            if !in_range(id) {
                self.warnings.push(format!(
                    "byte {at}: callsite id {id} is out of range (the session declares {declared} \
                     callsites, numbered from 1): skipped"
                ));
                continue;
            }
            let slot = &mut table[id as usize - 1];
            if std::ptr::eq(*slot, &callsite::UNDECLARED) {
                *slot = site;
            } else if !std::ptr::eq(*slot, site) {
                self.warnings.push(format!(
                    "byte {at}: callsite {id} is declared again, differently: the first entry is \
                     kept"
                ));
            }
        }
        table
    }
}

/// What the input is, when it is a file of another kind that users give tickscope's readers
/// by mistake: the traces tickscope writes (Chrome JSON, Perfetto protobuf, folded stacks) and
/// other JSON. `None` when it is none of those.
fn other_format(bytes: &[u8]) -> Option<&'static str> {
    if is_perfetto(bytes) {
        // pprof's `Profile` starts the same way (its field 1, `sample_type`, a message).
        return Some(
            "this looks like a protobuf file: a Perfetto trace (it opens in ui.perfetto.dev) \
             or a pprof profile",
        );
    }
    let text = bytes.trim_ascii_start();
    let head = &text[..text.len().min(4096)];
    let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
    if head.starts_with(b"<?xml") || head.starts_with(b"<svg") {
        return Some(if has(b"<svg") {
            "this is an SVG image (a flame graph?)"
        } else {
            "this is an XML file"
        });
    }
    match text.first() {
        Some(b'{' | b'[') if has(b"\"traceEvents\"") || has(b"\"ph\"") => {
            Some("this is a Chrome JSON trace (it opens in ui.perfetto.dev)")
        }
        Some(b'{') if has(b"\"resourceSpans\"") => Some("this is an OTLP JSON trace"),
        Some(b'{' | b'[') => Some("this is a JSON file"),
        Some(_) if is_folded(head) => Some("this looks like a text file of folded stacks"),
        _ => None,
    }
}

/// True when `bytes` start as a Perfetto trace does: a `packet` field (field 1,
/// length-delimited) whose length fits in the input.
fn is_perfetto(bytes: &[u8]) -> bool {
    let Some((&0x0a, rest)) = bytes.split_first() else {
        return false;
    };
    let mut len = 0u64;
    for (i, &b) in rest.iter().take(10).enumerate() {
        len |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return len > 0 && len <= (rest.len() - i - 1) as u64;
        }
    }
    false
}

/// True when the first line of `head` reads as folded stacks do: `a;b;c 42`.
fn is_folded(head: &[u8]) -> bool {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    std::str::from_utf8(line).is_ok_and(|line| {
        line.trim_end()
            .rsplit_once(' ')
            .is_some_and(|(stack, n)| !stack.trim().is_empty() && n.parse::<u64>().is_ok())
    })
}

/// What a session without footer is said to have, in its warning.
pub(super) const NO_FOOTER: &str = "has no footer";

/// The little-endian `u16` at `at` of `bytes`, which the caller checked holds it.
fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(array(bytes, at))
}

/// The little-endian `u32` at `at` of `bytes`, which the caller checked holds it.
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(array(bytes, at))
}

/// The little-endian `u64` at `at` of `bytes`, which the caller checked holds it.
fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(array(bytes, at))
}

/// The `N` bytes at `at`; zeros past the end (callers check lengths first, so never).
fn array<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let field = bytes.get(at..).and_then(|b| b.first_chunk::<N>());
    debug_assert!(field.is_some(), "{N} bytes at {at} of {}", bytes.len());
    field.copied().unwrap_or([0; N])
}

#[cfg(test)]
mod tests {
    use super::{ReadError, parse_with};
    use crate::capture::{Capture, Chunk};
    use crate::record::callsite::Callsite;
    use crate::record::event::{RawEvent, RawKind};

    static STEP: Callsite = Callsite::new("step", "read.rs", 1, "tests");

    /// A capture file of one thread: two scopes, an allocation and its free.
    fn file() -> Vec<u8> {
        let id = STEP.id();
        let mut records = vec![RawEvent::begin(id, 10)];
        records.extend(RawEvent::memory(RawKind::Alloc, 64, 0x1000, 11));
        records.extend(RawEvent::memory(RawKind::Free, 64, 0x1000, 12));
        records.extend([
            RawEvent::end(RawEvent::end_key(id, 10), 20),
            RawEvent::begin(id, 30),
            RawEvent::end(RawEvent::end_key(id, 30), 40),
        ]);
        let mut bytes = Vec::new();
        // The format before packed chunks: records as recorded, read in place.
        crate::capture::compress::unpacked(|| {
            Capture::from_records(vec![(1, records)], 0, 100).write_to(&mut bytes)
        })
        .unwrap();
        bytes
    }

    fn read(bytes: Vec<u8>, in_place: bool) -> Result<Capture, ReadError> {
        parse_with(bytes, None, in_place, None).map(|mut sessions| sessions.remove(0))
    }

    /// Records read where they lie in the file and records copied out of it read the same,
    /// decode the same and write the same bytes back.
    #[test]
    fn records_read_in_place_or_copied_are_the_same() {
        let bytes = file();
        let in_place = read(bytes.clone(), true).unwrap();
        let copied = read(bytes.clone(), false).unwrap();
        let chunk = |c: &Capture| match &c.threads[0].chunks[..] {
            [Chunk::File(_)] => "file",
            [Chunk::Owned(_)] => "owned",
            _ => "other",
        };
        let expected = if cfg!(target_endian = "little") {
            "file"
        } else {
            "owned"
        };
        assert_eq!(chunk(&in_place), expected);
        assert_eq!(chunk(&copied), "owned");
        assert_eq!(
            *in_place.threads[0].chunks[0].records(),
            *copied.threads[0].chunks[0].records()
        );
        assert_eq!(in_place.record_count(), 8);
        assert!(in_place.tracks_memory() && copied.tracks_memory());
        assert_eq!(in_place.decode(), copied.decode());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        crate::capture::compress::unpacked(|| {
            in_place.write_to(&mut a).unwrap();
            copied.write_to(&mut b).unwrap();
        });
        assert_eq!(a, b);
        assert_eq!(a, bytes);
    }

    /// A record of unknown kind is the same error either way, and a chunk cut short keeps
    /// the same records.
    #[test]
    fn bad_records_read_the_same_in_place_or_copied() {
        let bytes = file();
        // The event chunk is the last before the footer (48 bytes with its header): its
        // records end 64 bytes before the end of the file. Record 5 of 8 gets kind 99.
        let records_end = bytes.len() - 64;
        let bad_at = records_end - 3 * 16;
        let mut bad = bytes.clone();
        bad[bad_at + 12..bad_at + 16].copy_from_slice(&99u32.to_le_bytes());
        for in_place in [true, false] {
            let e = read(bad.clone(), in_place).unwrap_err();
            assert_eq!(e.offset(), Some(bad_at as u64), "{e}");
            assert!(
                e.to_string().contains("record 5 of the events chunk"),
                "{e}"
            );
        }
        // Cut in the middle of the last record: seven whole records are kept, the footer is
        // lost.
        let cut = &bad[..records_end - 8];
        let mut fixed = cut.to_vec();
        fixed[bad_at + 12..bad_at + 16].copy_from_slice(&(RawKind::End as u32).to_le_bytes());
        for in_place in [true, false] {
            let capture = read(fixed.clone(), in_place).unwrap();
            assert_eq!(capture.record_count(), 7);
            let salvaged = read(cut.to_vec(), in_place).unwrap();
            assert_eq!(
                salvaged.record_count(),
                5,
                "up to the record of unknown kind"
            );
        }
    }

    /// Clock checkpoints go through a file as they were; a file that announces more than it
    /// holds is refused with the counts named.
    #[test]
    fn clock_checkpoints_are_kept() {
        let mut capture = read(file(), true).unwrap();
        capture.clock.ns_per_tick = Some(0.5);
        capture.clock.checkpoints = vec![(20, 1_000), (60, 2_000)];
        let mut bytes = Vec::new();
        capture.write_to(&mut bytes).unwrap();
        let back = read(bytes.clone(), true).unwrap();
        assert_eq!(back.clock.checkpoints, [(20, 1_000), (60, 2_000)]);
        // The clock chunk follows the session header: its checkpoint count at byte 28 of
        // its content.
        let clock = bytes
            .windows(4)
            .position(|w| w == b"TSCP")
            .and_then(|first| {
                bytes[first + 4..]
                    .windows(4)
                    .position(|w| w == b"TSCP")
                    .map(|at| first + 4 + at)
            })
            .unwrap();
        bytes[clock + 16 + 28] = 200;
        let error = read(bytes, true).unwrap_err().to_string();
        assert!(error.contains("200 checkpoint pairs"), "{error}");
    }
}
