//! The seam between recording and everything after it: [`Capture`], the complete raw result of
//! a session.
//!
//! A session's stop hands its threads' chunks over to a capture as they were recorded: no
//! copy, no decoding. Each chunk already has the layout of a capture file's event chunk (a
//! 16-byte header of magic, type, version and length, then the thread id and the 16-byte
//! records). Decoding a capture into a
//! [`Trace`](crate::trace::Trace) is the next stage's job ([`Capture::decode`]).
//!
//! A capture is also a file: [`Capture::write_to`] (or
//! [`Profiler::write_capture`](crate::Profiler::write_capture)) writes it as a sequence of
//! chunks, the event chunks copied straight from memory, and [`Capture::read`],
//! [`Capture::read_all`] and [`Capture::from_bytes`] read it back. The layout, field by field,
//! is in the repository's `docs/FORMAT.md`; [`FORMAT_VERSION`] is the version this build
//! writes.
//!
//! ```
//! use tickscope::Capture;
//!
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! for _ in 0..3 {
//!     let _g = tickscope::scope!("step");
//! }
//! prof.stop();
//! let path = std::env::temp_dir().join(format!("doc-{}.tscope", std::process::id()));
//! prof.write_capture(&path)?;
//!
//! let capture = Capture::read(&path)?;
//! assert!(capture.warnings().is_empty());
//! assert_eq!(capture.decode().threads[0].spans.len(), 3);
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod chunk;
pub(crate) mod compress;
mod file;
mod footer;
// The layout's constants: internal, documented in the repository's docs/FORMAT.md (the tests
// read them through the `test-hooks` feature).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod format;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod format;
pub(crate) mod origin;
pub(crate) mod output;
pub(crate) mod panic;
mod read;
#[cfg(all(target_os = "linux", feature = "enabled", feature = "gzip"))]
pub(crate) use read::file_size_unlimited;
pub(crate) mod stream;
mod write;

use std::sync::OnceLock;

use crate::record::callsite::{self, Callsite};
use crate::record::chunk::SharedChunk;
use crate::record::clock::{self, Calibration, ClockSource, Compensation};
use crate::record::event::RawEvent;
use crate::record::flight::CutScope;
use crate::record::memory::MemoryMode;

pub(crate) use chunk::{Chunk, FileRecords, LazyRecords};
// The CLI's parallel reading of a file into memory; not public API.
#[doc(hidden)]
pub use file::read_file;
pub use format::FORMAT_VERSION;
pub use read::ReadError;
pub use stream::{DEFAULT_STREAM_MEMORY, StreamStats};

/// The complete raw result of one session window: header, clock calibration, callsite table,
/// thread table, every thread's chunks of raw records, and the count of dropped events.
///
/// Made by [`Profiler::capture`](crate::Profiler::capture); turned into a
/// [`Trace`](crate::trace::Trace) by [`Capture::decode`] (or
/// [`Trace::from_capture`](crate::trace::Trace::from_capture)). A capture holds the recorded
/// memory itself: its chunks go back to the recorder's pool when the last capture holding them
/// is dropped.
///
/// ```
/// let prof = tickscope::Profiler::builder().current_thread().start();
/// for _ in 0..3 {
///     let _g = tickscope::scope!("step");
/// }
/// prof.stop();
/// let capture = prof.capture();
/// assert_eq!(capture.record_count(), 6); // an entry and an exit per scope
/// let trace = capture.decode();
/// assert_eq!(trace.threads[0].spans.len(), 3);
/// ```
#[derive(Debug)]
pub struct Capture {
    pub(crate) header: Header,
    pub(crate) clock: ClockPairs,
    /// Callsite id `n` is at index `n - 1`.
    pub(crate) callsites: Vec<&'static Callsite>,
    pub(crate) threads: Vec<CaptureThread>,
    /// The window: records from `start_tick` to `end_tick` (inclusive) belong to it.
    pub(crate) start_tick: u64,
    pub(crate) end_tick: u64,
    /// What the session recorded of allocations.
    pub(crate) memory: MemoryMode,
    pub(crate) dropped_events: u64,
    /// Events a flight recorder overwrote before the window it retains.
    pub(crate) overwritten_events: u64,
    /// Per thread id, sorted, the scopes open at the start of the thread's window whose
    /// entries a flight recorder overwrote, outermost first: decoding opens them before the
    /// thread's first record. (Kept here rather than in each thread: most captures have none.)
    pub(crate) cut: Vec<(u64, Vec<CutScope>)>,
    /// A flight recorder's window start common to every thread, once it overwrote events: the
    /// tick from which every thread's records are all there. Async calls are built only from
    /// records from this tick on; a call begun before it is cut there.
    pub(crate) cut_start: Option<u64>,
    /// Problems met while reading it from a file; empty for a live capture.
    pub(crate) warnings: Vec<String>,
    /// `Some(bytes lost at the cut)` for a session read from a file without its footer,
    /// salvaged up to its last whole record (see [`Salvage`](crate::trace::Salvage)); `None`
    /// for a whole session, a live capture and a streaming session's live snapshot.
    pub(crate) salvaged: Option<u64>,
}

/// Who made a capture, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) format_version: u16,
    /// `tickscope <version>`.
    pub(crate) producer: String,
    pub(crate) process_id: u32,
    /// The file name of the process's executable (empty when unknown).
    pub(crate) process_name: String,
    /// The machine's host name (empty when unknown).
    pub(crate) host_name: String,
    /// Unix nanoseconds at the window's start (0 when unknown).
    pub(crate) start_unix_ns: u64,
    /// Of a session taken by an attach: where it comes from and the Unix nanoseconds of the
    /// attach, as its `ORIGIN` chunk says (written back after the header).
    pub(crate) origin: Option<(crate::capture::origin::Origin, u64)>,
}

impl Header {
    /// The header of a capture made by this process and build, of a window that started at
    /// `start_unix_ns`.
    fn this_process(start_unix_ns: u64) -> Self {
        static NAMES: OnceLock<(String, String)> = OnceLock::new();
        let (process_name, host_name) = NAMES.get_or_init(|| (process_name(), host_name()));
        Self {
            format_version: FORMAT_VERSION,
            producer: concat!("tickscope ", env!("CARGO_PKG_VERSION")).to_owned(),
            process_id: std::process::id(),
            process_name: process_name.clone(),
            host_name: host_name.clone(),
            start_unix_ns,
            origin: None,
        }
    }
}

/// The file name of this process's executable, or an empty string.
fn process_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

/// The machine's host name where the standard library can read it cheaply (Linux's
/// `/proc/sys/kernel/hostname`, Windows' `COMPUTERNAME`), or an empty string.
fn host_name() -> String {
    let name = if cfg!(windows) {
        std::env::var("COMPUTERNAME").unwrap_or_default()
    } else {
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default()
    };
    name.trim().to_owned()
}

/// The clock calibration of a capture: tick/Unix-nanosecond pairs read at start and stop, and
/// the clock's own rate (`None` when ticks are nanoseconds already: a mock clock).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClockPairs {
    pub(crate) start: Calibration,
    pub(crate) stop: Calibration,
    pub(crate) ns_per_tick: Option<f64>,
    /// The probe overhead decoding subtracts.
    pub(crate) compensation: Compensation,
    /// Where the ticks came from; `None` when the file does not say.
    pub(crate) source: Option<ClockSource>,
    /// `(tick, unix_ns)` pairs taken while the window ran, between its start and stop,
    /// ascending (see [`clock::checkpoint`]): decoding interpolates between them.
    pub(crate) checkpoints: Vec<(u64, u64)>,
}

impl ClockPairs {
    /// A clock whose ticks are taken as nanoseconds: no calibration, no compensation, no
    /// source (a capture made of hand-written records, or a file without a clock chunk).
    pub(crate) fn nanoseconds() -> Self {
        Self {
            start: Calibration::default(),
            stop: Calibration::default(),
            ns_per_tick: None,
            compensation: Compensation::Unknown,
            source: None,
            checkpoints: Vec::new(),
        }
    }
}

/// One thread of a capture: its identity, where its window starts, and its chunks.
#[derive(Debug)]
pub(crate) struct CaptureThread {
    /// tickscope's id of the thread: unique in the process, never reused.
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    /// The tick from which the session wanted this thread's records.
    pub(crate) from_tick: u64,
    pub(crate) chunks: Vec<Chunk>,
}

impl CaptureThread {
    /// An upper bound on the thread's records.
    pub(crate) fn record_bound(&self) -> usize {
        self.chunks.iter().map(Chunk::len).sum()
    }
}

/// What a stop hands over for one thread (see [`Capture::new`]).
pub(crate) struct Handover {
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    pub(crate) from_tick: u64,
    pub(crate) cut: Vec<CutScope>,
    pub(crate) chunks: Vec<SharedChunk>,
}

/// The window and calibration of a capture being made.
pub(crate) struct Window {
    pub(crate) start_tick: u64,
    pub(crate) end_tick: u64,
    pub(crate) start: Calibration,
    pub(crate) stop: Calibration,
    pub(crate) memory: MemoryMode,
    pub(crate) dropped_events: u64,
    pub(crate) overwritten_events: u64,
    /// The flight recorder's window start common to every thread (see `Capture`).
    pub(crate) cut_start: Option<u64>,
    pub(crate) compensation: Compensation,
}

impl Capture {
    /// A capture of `threads` over `window`, with this process's callsite table and clock.
    pub(crate) fn new(window: Window, threads: Vec<Handover>) -> Self {
        let mut cut = Vec::new();
        let threads = threads
            .into_iter()
            .map(|t| {
                if !t.cut.is_empty() {
                    cut.push((t.id, t.cut));
                }
                CaptureThread {
                    id: t.id,
                    name: t.name,
                    from_tick: t.from_tick,
                    chunks: t.chunks.into_iter().map(|c| Chunk::Held(Some(c))).collect(),
                }
            })
            .collect();
        cut.sort_unstable_by_key(|&(id, _)| id);
        let start_unix_ns = window.start.pairs.first().map_or(0, |&(_, ns)| ns);
        // A snapshot or a stop is a moment to read the clocks too.
        clock::checkpoint();
        let checkpoints = clock::checkpoints_between(window.start_tick, window.end_tick);
        Self {
            header: Header::this_process(start_unix_ns),
            clock: ClockPairs {
                start: window.start,
                stop: window.stop,
                ns_per_tick: clock::tick_rate(),
                compensation: window.compensation,
                source: Some(clock::source()),
                checkpoints,
            },
            callsites: callsite::table(),
            threads,
            start_tick: window.start_tick,
            end_tick: window.end_tick,
            memory: window.memory,
            dropped_events: window.dropped_events,
            overwritten_events: window.overwritten_events,
            cut,
            cut_start: window.cut_start,
            warnings: Vec::new(),
            salvaged: None,
        }
    }

    /// A capture of a session that never ran.
    pub(crate) fn empty() -> Self {
        Self {
            header: Header::this_process(0),
            clock: ClockPairs::nanoseconds(),
            callsites: Vec::new(),
            threads: Vec::new(),
            start_tick: 0,
            end_tick: 0,
            memory: MemoryMode::Off,
            dropped_events: 0,
            overwritten_events: 0,
            cut: Vec::new(),
            cut_start: None,
            warnings: Vec::new(),
            salvaged: None,
        }
    }

    /// Format version of this capture ([`FORMAT_VERSION`] for captures of this build).
    pub fn format_version(&self) -> u16 {
        self.header.format_version
    }

    /// The program that made it: `tickscope <version>`.
    pub fn producer(&self) -> &str {
        &self.header.producer
    }

    /// The id of the process that recorded it.
    pub fn process_id(&self) -> u32 {
        self.header.process_id
    }

    /// The file name of the executable that recorded it (empty when unknown).
    pub fn process_name(&self) -> &str {
        &self.header.process_name
    }

    /// The host name of the machine that recorded it (empty when unknown).
    pub fn host_name(&self) -> &str {
        &self.header.host_name
    }

    /// Of a session taken by an attach (`tickscope record --pid`,
    /// [`attach::record`](crate::attach::record)): where it comes from (the flight
    /// recorder's window at the attach, or what was recorded while attached) and the Unix
    /// nanoseconds of the attach, as its `ORIGIN` chunk says. `None` for any other session.
    /// [`Capture::write_to`] writes it back, so a merged file keeps it.
    pub fn origin(&self) -> Option<(crate::capture::origin::Origin, u64)> {
        self.header.origin
    }

    /// Problems met while reading the capture from a file that did not stop the reading: an
    /// unknown chunk type or version skipped, a truncated last chunk salvaged, a session
    /// without its footer, more than one session where one was asked for, and the like. Each
    /// names the byte offset it is about. Empty for a live capture.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Threads in the capture's thread table (also those with no record in the window).
    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    /// Chunks of raw records held.
    pub fn chunk_count(&self) -> usize {
        self.threads.iter().map(|t| t.chunks.len()).sum()
    }

    /// Raw records held (16 bytes each decoded, 8 or 16 recorded), all threads (a chunk may hold some from before the window,
    /// which decoding leaves out), and the entries a flight recorder keeps of the scopes cut
    /// at the start of its window.
    pub fn record_count(&self) -> u64 {
        let cut: usize = self.cut.iter().map(|(_, scopes)| scopes.len()).sum();
        cut as u64
            + self
                .threads
                .iter()
                .map(|t| t.record_bound() as u64)
                .sum::<u64>()
    }

    /// The scopes of thread `thread` cut at the start of a flight recorder's window.
    pub(crate) fn cut_of(&self, thread: u64) -> &[CutScope] {
        match self.cut.binary_search_by_key(&thread, |&(id, _)| id) {
            Ok(at) => &self.cut[at].1,
            Err(_) => &[],
        }
    }

    /// Events that could not be recorded (threads tearing down) during the window.
    pub fn dropped_events(&self) -> u64 {
        self.dropped_events
    }

    /// Events a flight recorder ([`ProfilerBuilder::flight_recorder`](crate::ProfilerBuilder::flight_recorder))
    /// overwrote before the window it retains: recorded, then recycled to make room for newer
    /// ones. 0 for other sessions.
    pub fn overwritten_events(&self) -> u64 {
        self.overwritten_events
    }

    /// True when the session recorded allocations and frees.
    pub fn tracks_memory(&self) -> bool {
        self.memory.is_on()
    }

    /// What the session recorded of allocations and frees.
    pub fn memory_mode(&self) -> MemoryMode {
        self.memory
    }
}

impl Capture {
    /// A capture of records made by hand, one `(thread id, records)` per thread, with ticks
    /// that are nanoseconds (the identity clock) and the window `start_tick..=end_tick`.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
    pub(crate) fn from_records(
        threads: Vec<(u64, Vec<RawEvent>)>,
        start_tick: u64,
        end_tick: u64,
    ) -> Self {
        let memory = threads
            .iter()
            .flat_map(|(_, r)| r)
            .map(|r| MemoryMode::of_kind(r.kind as u32))
            .max()
            .unwrap_or_default();
        let owned: Vec<CaptureThread> = threads
            .into_iter()
            .map(|(id, records)| CaptureThread {
                id,
                name: None,
                from_tick: 0,
                chunks: vec![Chunk::Owned(records)],
            })
            .collect();
        let mut capture = Self::new(
            Window {
                start_tick,
                end_tick,
                start: Calibration::default(),
                stop: Calibration::default(),
                memory,
                dropped_events: 0,
                overwritten_events: 0,
                cut_start: None,
                compensation: Compensation::Unknown,
            },
            Vec::new(),
        );
        capture.threads = owned;
        capture.clock.ns_per_tick = None;
        capture
    }
}
