//! Streaming sessions: a background writer appends a session's chunks to its capture file as
//! its threads fill them, so a session that never stops holds a bounded amount of memory.
//!
//! The file is an ordinary capture file, written as the session goes: a session header and
//! the start calibration first; then, pass after pass, a string table with the callsite and
//! thread table entries that are new since the last pass, and the event chunks the threads
//! completed; at stop the remaining records, a clock chunk with the stop calibration too
//! (it replaces the first), and the footer. Every chunk is complete when it reaches the file,
//! and each pass is flushed: a process killed mid-session leaves a file that reads up to its
//! last pass (a reader salvages a session without footer, and says so).
//!
//! Threads take their chunks from a fixed pool ([`StreamPool`]) while only streaming
//! sessions record; the writer gives each chunk back once written. When the writer falls
//! behind (a disk slower than the program), threads wait for it or drop events, as the
//! session's [`SlowWriter`] policy says; both are counted ([`StreamStats`]).
//!
//! The panic hook ([`super::panic`]), installed with the first streaming session and chained to
//! the hook before it, writes what every streaming session has recorded when a thread panics: a panic that ends
//! the program leaves everything up to it in the file.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::Duration;

use crate::record::clock::{Calibration, Compensation};
use crate::record::memory::MemoryMode;
use crate::record::pool::SlowWriter;

mod state;
mod writer;

pub(crate) use writer::{Stream, read_back};

/// The default size of a streaming session's chunk pool: 16 MiB (512 chunks of 32 KiB).
pub const DEFAULT_STREAM_MEMORY: usize = 16 << 20;

/// The most a stream's pool may hold: 2²¹ chunks, 64 GiB.
const MAX_STREAM_CHUNKS: usize = 1 << 21;

/// How often the writer looks for chunks that the threads completed.
const POLL: Duration = Duration::from_millis(2);

/// How often the writer also writes the records of chunks still being filled, so that a
/// process killed mid-session loses at most this much of a thread that records slowly.
const TAIL_EVERY: Duration = Duration::from_millis(250);

/// What a streaming session has written, and what it cost; see
/// [`Profiler::stream_stats`](crate::Profiler::stream_stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamStats {
    /// The file written.
    pub path: PathBuf,
    /// Bytes written to it so far, by this window (after a write error: those the file
    /// took).
    pub bytes_written: u64,
    /// Event chunks written (a chunk written in parts counts each part).
    pub chunks_written: u64,
    /// Raw records written: in the file, whole.
    pub records_written: u64,
    /// Events the threads could not record because no chunk was free
    /// ([`SlowWriter::Drop`]); they are also in the session's dropped events.
    pub dropped_events: u64,
    /// Times a thread waited for the writer ([`SlowWriter::Block`]), and how long in all.
    pub waits: u64,
    /// Total time threads waited for the writer.
    pub waited: Duration,
    /// Chunks taken beyond the pool because the writer gave none back for a second.
    pub overflow_chunks: u64,
    /// The pool's size in bytes: the memory the session's chunks take (32 KiB of words
    /// and 48 bytes of header each).
    pub pool_bytes: usize,
    /// Why the stream failed: the file could not be opened (the window then recorded in
    /// memory instead, see [`ProfilerBuilder::start`](crate::ProfilerBuilder::start)), or the first write
    /// error (the disk is full, the file was deleted or moved): the writer then stops writing,
    /// counts what it could not write in [`StreamStats::records_lost`] and keeps giving
    /// chunks back, so memory stays bounded.
    pub error: Option<String>,
    /// Records (events) recorded and lost because of [`StreamStats::error`]: in neither the
    /// file nor the session's memory. Those recorded after a write error, those the file did
    /// not take whole when it failed, everything the file held when it was deleted; when the
    /// file could not be opened, those the in-memory window overwrote (or, when it could not
    /// keep one, every record).
    pub records_lost: u64,
}

/// The options of a streaming session.
#[derive(Clone, Debug)]
pub(crate) struct StreamOptions {
    pub(crate) path: PathBuf,
    pub(crate) memory: usize,
    pub(crate) policy: SlowWriter,
    /// The probe overhead decoding subtracts, written in the clock chunks.
    pub(crate) compensation: Compensation,
}

#[derive(Debug)]
struct State {
    path: PathBuf,
    /// `None` once finished, after a write error, or for a stream without a file.
    out: Option<BufWriter<Counted>>,
    /// The event chunks handed to `out` since its last flush: where each starts (in
    /// [`StreamStats::bytes_written`]), where it ends, its records, and for an unpacked chunk
    /// where each record ends (bytes after the chunk's prefix). A flush makes them written; a
    /// write error, written as far as the file took their records whole (a reader keeps those
    /// of a last event chunk cut short, none of a packed chunk cut short), lost beyond.
    unflushed: Vec<(u64, u64, u64, Vec<u32>)>,
    /// Nothing of this window can be read back at `path`: the stream has no file
    /// ([`Stream::sink`]), or its file was deleted or moved.
    gone: bool,
    start_tick: u64,
    start: Calibration,
    compensation: Compensation,
    memory: MemoryMode,
    /// Per thread: the index of the first chunk not completely written, and how many of its
    /// records are.
    cursors: HashMap<u64, (u64, usize)>,
    /// Callsite ids `1..=callsites` are declared in the file.
    callsites: usize,
    stats: StreamStats,
    finished: bool,
}

/// The file a stream writes, counting the bytes it took.
#[derive(Debug)]
struct Counted {
    file: File,
    /// Bytes the file took since it was opened.
    took: u64,
}
