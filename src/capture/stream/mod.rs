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
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::record::buffer::StreamedChunk;
use crate::record::callsite;
use crate::record::chunk::{CHUNK_EVENTS, CHUNK_MAGIC, EVENT_PREFIX, RECORD};
use crate::record::clock::{self, Calibration, Compensation};
use crate::record::memory::MemoryMode;
use crate::record::pool::{SlowWriter, StreamPool};
use crate::record::registry::{self, Untracked};
use crate::record::sync::lock;

use super::format::{
    CALLSITES, CALLSITES_VERSION, CHUNK_HEADER, CLOCK, CLOCK_VERSION, SESSION_FOOTER,
    SESSION_FOOTER_VERSION, SESSION_HEADER, SESSION_HEADER_VERSION, STRINGS, STRINGS_VERSION,
    THREADS, THREADS_VERSION, padded,
};
use super::read::NO_FOOTER;
use super::write::{
    Footer, Strings, Writer, callsite_entries, clock_content, header_content, thread_entry,
};
use super::{Capture, ClockPairs, Header};

/// The default size of a streaming session's chunk pool: 16 MiB (256 chunks of 64 KiB).
pub const DEFAULT_STREAM_MEMORY: usize = 16 << 20;

/// The most a stream's pool may hold: 2²⁰ chunks, 64 GiB.
const MAX_STREAM_CHUNKS: usize = 1 << 20;

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
    /// Raw 16-byte records written: in the file, whole.
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
    /// The pool's size in bytes: the memory the session's chunks take (64 KiB of records
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

/// A streaming session's writer: the background thread and what it shares with the session.
#[derive(Debug)]
pub(crate) struct Stream {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    session: u64,
    pool: Arc<StreamPool>,
    stop: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    path: PathBuf,
    /// `None` once finished, after a write error, or for a stream without a file.
    out: Option<BufWriter<Counted>>,
    /// The event chunks handed to `out` since its last flush: where each starts (in
    /// [`StreamStats::bytes_written`]), where it ends, and its records. A flush makes them
    /// written; a write error, written as far as the file took their records whole (a reader
    /// keeps those of a last event chunk cut short, none of a packed chunk cut short), lost
    /// beyond.
    unflushed: Vec<(u64, u64, u64)>,
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

impl Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.file.write(bytes)?;
        self.took += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Streaming sessions alive, for the panic hook.
static STREAMS: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

impl Stream {
    /// Creates (or, with `append`, extends) the file and starts the writer of session
    /// `session`, whose window starts at `start_tick` with calibration `start`. Fails when
    /// the file cannot be opened or written, or when another streaming session runs.
    pub(crate) fn start(
        options: &StreamOptions,
        append: bool,
        session: u64,
        start_tick: u64,
        start: &Calibration,
        memory: MemoryMode,
    ) -> io::Result<Self> {
        let _untracked = Untracked::enter();
        // Chunks of 64 KiB of records (each with 48 bytes of header on top).
        let chunks = options.memory / (CHUNK_EVENTS * RECORD as usize);
        if chunks > MAX_STREAM_CHUNKS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: a stream's memory of {} bytes is more than the {} bytes allowed",
                    options.path.display(),
                    options.memory,
                    MAX_STREAM_CHUNKS * CHUNK_EVENTS * RECORD as usize
                ),
            ));
        }
        // The pool first: a session refused for another's stream must not touch any file.
        let pool = StreamPool::install(chunks, options.policy, registry::refused_events())
            .ok_or_else(|| {
                io::Error::other(format!(
                    "{}: another streaming session is running (one at a time)",
                    options.path.display()
                ))
            })?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(!append)
            .open(&options.path)
            .map_err(|e| annotate(&options.path, "cannot open", e))
            // A restart appends after the whole chunks of the file: a chunk cut short (the
            // earlier window's write error) would otherwise swallow the new session.
            .and_then(|mut file| match append {
                true => trim_to_whole_chunks(&mut file)
                    .map(|_| file)
                    .map_err(|e| annotate(&options.path, "cannot append to", e)),
                false => Ok(file),
            });
        let file = match file {
            Ok(file) => file,
            Err(e) => {
                pool.uninstall(registry::refused_events());
                return Err(e);
            }
        };
        let mut out = BufWriter::with_capacity(64 << 10, Counted { file, took: 0 });
        let head = first_chunks(start, options.compensation, &mut out)
            .and_then(|n| out.flush().map(|()| n));
        let bytes = match head {
            Ok(bytes) => bytes,
            Err(e) => {
                pool.uninstall(registry::refused_events());
                return Err(annotate(&options.path, "cannot write", e));
            }
        };
        let mut state = State::new(options, Some(out), start_tick, start, memory);
        state.stats.bytes_written = bytes;
        state.stats.pool_bytes =
            pool.capacity() * std::mem::size_of::<crate::record::chunk::Chunk>();
        Self::launch(session, pool, state)
    }

    /// A stream of session `session` that has no file (it could not be opened: `error`
    /// says why) and cannot keep its window in memory either: its writer gives back every
    /// chunk the threads complete, as a stream does, and counts its records in
    /// [`StreamStats::records_lost`]. The session's memory stays bounded and nothing it loses
    /// goes uncounted.
    pub(crate) fn sink(
        options: &StreamOptions,
        error: String,
        session: u64,
        start_tick: u64,
        start: &Calibration,
        memory: MemoryMode,
    ) -> io::Result<Self> {
        let _untracked = Untracked::enter();
        let mut state = State::new(options, None, start_tick, start, memory);
        state.stats.error = Some(error);
        Self::launch(session, StreamPool::detached(options.policy), state)
    }

    /// Starts the writer of session `session`, writing as `state` says.
    fn launch(session: u64, pool: Arc<StreamPool>, state: State) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            session,
            pool,
            stop: AtomicBool::new(false),
            state: Mutex::new(state),
        });
        super::panic::register(super::panic::Slot::StreamFlush, flush_all);
        {
            let mut streams = lock(&STREAMS);
            streams.retain(|s| s.strong_count() > 0);
            streams.push(Arc::downgrade(&shared));
        }
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("tickscope-stream".into())
            .spawn(move || worker.run());
        match thread {
            Ok(thread) => Ok(Self {
                shared,
                thread: Some(thread),
            }),
            Err(e) => {
                shared.pool.uninstall(registry::refused_events());
                Err(e)
            }
        }
    }

    /// The stream's figures so far.
    pub(crate) fn stats(&self) -> StreamStats {
        self.shared.stats(&lock(&self.shared.state))
    }

    /// The window so far: everything recorded is written (chunks still being filled too),
    /// and the file's last session read back as it stands.
    pub(crate) fn snapshot(&self) -> Capture {
        let _untracked = Untracked::enter();
        // Write under the lock, read without it: the writer goes on meanwhile, and the bytes
        // up to the length seen here are whole chunks.
        let (path, len) = {
            let mut state = lock(&self.shared.state);
            self.shared.pass(&mut state, true);
            if state.gone {
                // Nothing to read: what was recorded is lost, and counted.
                let mut capture = Capture::empty();
                capture.dropped_events =
                    self.shared.pool.refused_events(registry::refused_events())
                        + state.stats.records_lost;
                capture.warnings.extend(state.stats.error.clone());
                return capture;
            }
            let len = state
                .out
                .as_ref()
                .and_then(|o| o.get_ref().file.metadata().ok());
            (state.path.clone(), len.map(|m| m.len()))
        };
        let mut capture = read_back(&path, len);
        // It has no footer yet: that is no problem of the file's, and nothing was lost (scopes
        // still open close at the snapshot's end, as live).
        capture.warnings.retain(|w| !w.contains(NO_FOOTER));
        capture.salvaged = None;
        capture
    }

    /// Ends the stream when its session stops: stops the writer, writes what is left, the
    /// stop calibration and the footer (`end_tick`, `dropped_events`), and hands the pool's
    /// chunks back. Call it after the session stopped recording and before it is finished in
    /// the registry. Returns the stream's figures, and whether its path holds the window
    /// (not when the stream had no file, or its file was deleted or moved).
    pub(crate) fn finish(
        mut self,
        end_tick: u64,
        stop: &Calibration,
        dropped_events: u64,
    ) -> (StreamStats, bool) {
        let _untracked = Untracked::enter();
        self.shared.stop.store(true, Ordering::Release);
        self.shared.pool.wake_writer();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let mut state = lock(&self.shared.state);
        self.shared.pass(&mut state, true);
        let clock = ClockPairs {
            start: state.start.clone(),
            stop: stop.clone(),
            ns_per_tick: clock::tick_rate(),
            compensation: state.compensation,
            source: Some(clock::source()),
            checkpoints: clock::checkpoints_between(state.start_tick, end_tick),
        };
        let footer = Footer {
            start_tick: state.start_tick,
            end_tick,
            records: state.stats.records_written,
            dropped_events,
            memory: state.memory,
            overwritten_events: 0,
            cut_start: None,
            salvaged: None,
        };
        let result = state.out.as_mut().map(|out| {
            let mut w = Writer { out, written: 0 };
            w.chunk(CLOCK, CLOCK_VERSION, &clock_content(&clock))?;
            w.chunk(SESSION_FOOTER, SESSION_FOOTER_VERSION, &footer.content())?;
            let written = w.written;
            out.flush().map(|()| written)
        });
        match result {
            Some(Ok(written)) => state.stats.bytes_written += written,
            Some(Err(e)) => state.fail(&e),
            None => {}
        }
        state.out = None;
        state.finished = true;
        self.shared.pool.uninstall(registry::refused_events());
        (self.shared.stats(&state), !state.gone)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // A stream dropped without `finish` (its session never stopped cleanly): stop the
        // writer; the file ends at its last pass, as after a crash.
        if let Some(thread) = self.thread.take() {
            self.shared.stop.store(true, Ordering::Release);
            self.shared.pool.wake_writer();
            let _ = thread.join();
            self.shared.pool.uninstall(registry::refused_events());
        }
    }
}

/// The last session of the capture file at `path` (a streaming session appends its windows
/// to its file), of its first `len` bytes when given; an empty capture whose warning says why
/// when it cannot be read.
pub(crate) fn read_back(path: &Path, len: Option<u64>) -> Capture {
    let unreadable = |why: String| {
        let mut capture = Capture::empty();
        capture.warnings.push(why);
        capture
    };
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        // A FIFO or a device: what was written is the reader's, not ours to read again.
        return unreadable(format!(
            "{}: not a regular file: the stream cannot be read back",
            path.display()
        ));
    }
    // Read chunk by chunk and left in the file: the capture holds a few words per chunk.
    let sessions = super::read::read_path(path, len, false, &|_| {});
    match sessions {
        Ok(mut sessions) => sessions.pop().unwrap_or_else(Capture::empty),
        Err(e) => unreadable(e.to_string()),
    }
}

impl Shared {
    /// The writer thread: a pass whenever woken or every [`POLL`], the records of chunks
    /// being filled every [`TAIL_EVERY`], until the session stops.
    fn run(&self) {
        let _untracked = Untracked::enter();
        let mut tails_at = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            self.pool.wait_for_work(POLL);
            let tails = tails_at.elapsed() >= TAIL_EVERY;
            if tails {
                tails_at = Instant::now();
                // Off the recording threads: a clock checkpoint, at most one a second.
                clock::checkpoint();
            }
            let mut state = lock(&self.state);
            if state.finished {
                return;
            }
            if tails {
                state.check_file();
            }
            self.pass(&mut state, tails);
        }
    }

    /// Writes every record of the session not written yet (of complete chunks only, unless
    /// `tails`), declares the callsites and threads they need first, flushes, and gives back
    /// the chunks written.
    fn pass(&self, state: &mut State, tails: bool) {
        if state.finished {
            return;
        }
        let threads = registry::stream_share(self.session, tails, |thread| {
            state.cursors.get(&thread).map_or(0, |c| c.0)
        });
        if let Err(e) = state.declare(&threads) {
            state.fail(&e);
        }
        for thread in threads {
            for held in thread.chunks {
                let done = state.cursors.get(&thread.id).map_or(0, |c| c.0);
                if let Err(e) = state.write_chunk(thread.id, &held) {
                    state.fail(&e);
                }
                // Let go of the hold first, so that giving the chunk back hands it to the
                // pool, at once: the threads waiting for one need not wait for the pass.
                drop(held);
                let written = state.cursors.get(&thread.id).map_or(0, |c| c.0);
                if written > done {
                    registry::streamed(self.session, thread.id, written);
                }
            }
        }
        match state.out.as_mut().map(Write::flush) {
            Some(Ok(())) => state.flushed(),
            Some(Err(e)) => state.fail(&e),
            None => {}
        }
    }

    fn stats(&self, state: &State) -> StreamStats {
        let (waits, waited_ns) = self.pool.waits();
        StreamStats {
            dropped_events: self.pool.refused_events(registry::refused_events()),
            waits,
            waited: Duration::from_nanos(waited_ns),
            overflow_chunks: self.pool.overflow_chunks(),
            ..state.stats.clone()
        }
    }
}

impl State {
    /// The state of a stream of `options` writing to `out` (`None`: it has no file, and its
    /// path names none of its own), whose window starts at `start_tick` with calibration
    /// `start`.
    fn new(
        options: &StreamOptions,
        out: Option<BufWriter<Counted>>,
        start_tick: u64,
        start: &Calibration,
        memory: MemoryMode,
    ) -> Self {
        Self {
            path: options.path.clone(),
            gone: out.is_none(),
            out,
            unflushed: Vec::new(),
            start_tick,
            start: start.clone(),
            compensation: options.compensation,
            memory,
            cursors: HashMap::new(),
            callsites: 0,
            stats: StreamStats {
                path: options.path.clone(),
                ..StreamStats::default()
            },
            finished: false,
        }
    }

    /// Declares what the records about to be written name: the callsites registered so far
    /// (a record's callsite is registered before the record is made), and new threads.
    fn declare(&mut self, threads: &[registry::StreamThread]) -> io::Result<()> {
        let new_sites = callsite::table_from(self.callsites);
        let mut strings = Strings::default();
        let sites = callsite_entries(
            new_sites
                .iter()
                .enumerate()
                .map(|(i, &site)| (self.callsites + i + 1, site)),
            &mut strings,
        );
        let mut thread_table = Vec::new();
        for thread in threads {
            if let std::collections::hash_map::Entry::Vacant(new) = self.cursors.entry(thread.id) {
                new.insert((0, 0));
                thread_entry(
                    &mut thread_table,
                    thread.id,
                    thread.from_tick,
                    thread.name.as_deref(),
                    &mut strings,
                );
            }
        }
        self.callsites += new_sites.len();
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        if sites.is_empty() && thread_table.is_empty() {
            return Ok(());
        }
        let mut w = Writer { out, written: 0 };
        let result = (|| {
            w.chunk(STRINGS, STRINGS_VERSION, &strings.bytes)?;
            if !sites.is_empty() {
                w.chunk(CALLSITES, CALLSITES_VERSION, &sites)?;
            }
            if !thread_table.is_empty() {
                w.chunk(THREADS, THREADS_VERSION, &thread_table)?;
            }
            Ok(())
        })();
        self.stats.bytes_written += w.written;
        result
    }

    /// Writes the records of `held` that are not written yet and advances thread `thread`'s
    /// cursor past them; once the file has failed, counts them as lost instead.
    fn write_chunk(&mut self, thread: u64, held: &StreamedChunk) -> io::Result<()> {
        let cursor = self.cursors.entry(thread).or_insert((0, 0));
        let from = if held.index == cursor.0 { cursor.1 } else { 0 };
        let records = held.chunk.records().len();
        *cursor = if held.complete {
            (held.index + 1, 0)
        } else {
            (held.index, records)
        };
        let new = records.saturating_sub(from) as u64;
        if new == 0 {
            return Ok(());
        }
        let Some(out) = self.out.as_mut() else {
            self.stats.records_lost += new;
            return Ok(());
        };
        let mut w = Writer { out, written: 0 };
        let result = w.events_from(&held.chunk, from);
        let start = self.stats.bytes_written;
        self.stats.bytes_written += w.written;
        // Written once flushed; on an error (`fail`), as far as the file took it.
        self.unflushed.push((start, self.stats.bytes_written, new));
        result
    }

    /// Fails the stream when its path no longer names the file it writes: the file was
    /// deleted (everything it held is lost with it, and its disk space would grow unseen), or
    /// moved or replaced (what it holds stays there). Two `stat`s, every [`TAIL_EVERY`].
    fn check_file(&mut self) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let Some(out) = &self.out else {
                return;
            };
            let Ok(open) = out.get_ref().file.metadata() else {
                return;
            };
            if !open.is_file() {
                // A FIFO or a device: whoever reads it has what was written.
                return;
            }
            let named = std::fs::metadata(&self.path)
                .is_ok_and(|m| (m.dev(), m.ino()) == (open.dev(), open.ino()));
            if open.nlink() == 0 || !named {
                self.gone = true;
            }
            if open.nlink() == 0 {
                self.fail(&io::Error::new(
                    io::ErrorKind::NotFound,
                    "the file was deleted while the session streamed to it",
                ));
                // Nothing written is left: it counts as lost too.
                self.stats.records_lost += std::mem::take(&mut self.stats.records_written);
                self.stats.chunks_written = 0;
                self.stats.bytes_written = 0;
            } else if !named {
                self.fail(&io::Error::new(
                    io::ErrorKind::NotFound,
                    "the file was moved or replaced while the session streamed to it",
                ));
            }
        }
    }

    /// The file took every chunk handed to it: their records are written.
    fn flushed(&mut self) {
        for (_, _, records) in self.unflushed.drain(..) {
            self.stats.chunks_written += 1;
            self.stats.records_written += records;
        }
    }

    /// Keeps the first write error and stops writing: the chunks not flushed yet are written
    /// as far as the file took them whole, and lost beyond (the buffer's rest is dropped,
    /// never written later).
    fn fail(&mut self, error: &io::Error) {
        if self.stats.error.is_none() {
            let message = format!("{}: cannot write: {error}", self.path.display());
            // Said once, as a stream that cannot start says it: a program that never prints
            // the table still learns that its capture is incomplete.
            if self.out.is_some() {
                eprintln!(
                    "tickscope: {message}; the stream stops writing: what the session records \
                     from now on is lost, and counted (`Profiler::stream_stats`, the table's \
                     footer)"
                );
            }
            self.stats.error = Some(message);
        }
        let Some(out) = self.out.take() else {
            return;
        };
        // The bytes handed to the file since it was opened (the header first) are counted
        // from where it was opened, as those it took.
        let (file, _unwritten) = out.into_parts();
        let took = file.took;
        for (start, end, records) in std::mem::take(&mut self.unflushed) {
            let first = start + CHUNK_HEADER as u64 + EVENT_PREFIX;
            let whole = match took >= end {
                true => records,
                // A packed chunk is read whole or not at all.
                false if super::compress::packing() => 0,
                false => (took.saturating_sub(first) / RECORD).min(records),
            };
            if whole > 0 {
                self.stats.chunks_written += 1;
            }
            self.stats.records_written += whole;
            self.stats.records_lost += records - whole;
        }
        self.stats.bytes_written = took;
    }
}

/// Writes the session header and the start calibration; returns the bytes written.
fn first_chunks(
    start: &Calibration,
    compensation: Compensation,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let start_unix_ns = start.pairs.first().map_or(0, |&(_, ns)| ns);
    let clock = ClockPairs {
        start: start.clone(),
        stop: Calibration::default(),
        ns_per_tick: clock::tick_rate(),
        compensation,
        source: Some(clock::source()),
        checkpoints: Vec::new(),
    };
    let mut w = Writer { out, written: 0 };
    w.chunk(
        SESSION_HEADER,
        SESSION_HEADER_VERSION,
        &header_content(&Header::this_process(start_unix_ns)),
    )?;
    w.chunk(CLOCK, CLOCK_VERSION, &clock_content(&clock))?;
    Ok(w.written)
}

/// Cuts `file` after its last whole chunk (a chunk whose header has the magic and whose
/// content, padded, ends within the file), leaving it positioned at its new end; returns the
/// bytes cut. A file of whole chunks is left as it is.
fn trim_to_whole_chunks(file: &mut File) -> io::Result<u64> {
    let len = file.metadata()?.len();
    let mut whole = 0u64;
    let mut header = [0u8; CHUNK_HEADER];
    while len - whole >= CHUNK_HEADER as u64 {
        file.seek(SeekFrom::Start(whole))?;
        file.read_exact(&mut header)?;
        let magic = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let mut content = [0u8; 8];
        content.copy_from_slice(&header[8..]);
        let next = (CHUNK_HEADER as u64)
            .checked_add(padded(u64::from_le_bytes(content)))
            .and_then(|n| whole.checked_add(n));
        match next {
            Some(next) if magic == CHUNK_MAGIC && next <= len => whole = next,
            _ => break,
        }
    }
    if whole < len {
        file.set_len(whole)?;
    }
    file.seek(SeekFrom::Start(whole))?;
    Ok(len - whole)
}

/// `error`, its message prefixed with the path and what failed.
fn annotate(path: &Path, what: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {what}: {error}", path.display()))
}

/// Writes what every running streaming session has recorded, from the panic hook. A stream
/// whose lock another thread holds (its writer mid-pass, which flushes by itself) is given a
/// moment, then skipped: a panic hook must not hang.
fn flush_all() {
    let streams: Vec<Arc<Shared>> = match STREAMS.try_lock() {
        Ok(streams) => streams.iter().filter_map(Weak::upgrade).collect(),
        Err(std::sync::TryLockError::Poisoned(p)) => {
            p.into_inner().iter().filter_map(Weak::upgrade).collect()
        }
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for stream in streams {
        let deadline = Instant::now() + Duration::from_millis(200);
        loop {
            match stream.state.try_lock() {
                Ok(mut state) => {
                    stream.pass(&mut state, true);
                    break;
                }
                Err(std::sync::TryLockError::Poisoned(p)) => {
                    stream.pass(&mut p.into_inner(), true);
                    break;
                }
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(std::sync::TryLockError::WouldBlock) => break,
            }
        }
    }
}
