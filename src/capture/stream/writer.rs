//! The background writer of a streaming session: its thread, its passes, and the panic hook's
//! flush.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::record::chunk::CHUNK_BYTES;
use crate::record::clock::{self, Calibration};
use crate::record::memory::MemoryMode;
use crate::record::pool::StreamPool;
use crate::record::registry::{self, Untracked};
use crate::record::sync::lock;

use super::super::footer::Footer;
use super::super::format::{CLOCK, CLOCK_VERSION, SESSION_FOOTER, SESSION_FOOTER_VERSION};
use super::super::read::NO_FOOTER;
use super::super::write::{Writer, clock_content};
use super::super::{Capture, ClockPairs};
use super::state::{annotate, first_chunks, trim_to_whole_chunks};
use super::{Counted, MAX_STREAM_CHUNKS, POLL, State, StreamOptions, StreamStats, TAIL_EVERY};

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
        // Chunks of 32 KiB of words (each with 48 bytes of header on top).
        let chunks = options.memory / CHUNK_BYTES;
        if chunks > MAX_STREAM_CHUNKS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: a stream's memory of {} bytes is more than the {} bytes allowed",
                    options.path.display(),
                    options.memory,
                    MAX_STREAM_CHUNKS * CHUNK_BYTES
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
        super::super::panic::register(super::super::panic::Slot::StreamFlush, flush_all);
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
    let sessions = super::super::read::read_path(path, len, false, &|_| {});
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
