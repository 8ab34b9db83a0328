//! [`ProfilerBuilder`]: the options of a session, and its start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::capture;
use crate::capture::stream::StreamOptions;
#[cfg(doc)]
use crate::capture::{Capture, StreamStats};
use crate::collector::{Collector, Slot};
use crate::record::clock::Compensation;
use crate::record::memory::MemoryMode;
use crate::record::pool::SlowWriter;
#[cfg(doc)]
use crate::report::Report;
use crate::schedule::{Callback, Schedule, ScheduledWindow};
#[cfg(doc)]
use crate::trace::Trace;

use super::{Inner, Profiler, State, Steps, Threads};

/// The old name of [`ProfilerBuilder`].
#[deprecated(
    since = "0.1.0",
    note = "renamed ProfilerBuilder (what Profiler::builder() returns)"
)]
pub type Config = ProfilerBuilder; // old name (renames.sh)

/// Options for a session, from [`Profiler::builder`]; start it with [`ProfilerBuilder::start`].
#[must_use]
#[derive(Clone, Debug, Default)]
pub struct ProfilerBuilder {
    pub(super) threads: Threads,
    pub(super) memory: MemoryMode,
    pub(super) stream: Option<std::path::PathBuf>,
    pub(super) stream_memory: Option<usize>,
    pub(super) slow_disk: SlowWriter,
    pub(super) schedule: Option<Schedule>,
    pub(super) on_trace_ready: Option<Callback>,
    /// Overhead compensation switched off ([`ProfilerBuilder::compensate_overhead`]).
    pub(super) uncompensated: bool,
    /// Collectors run beside the threads ([`ProfilerBuilder::collector`]).
    pub(super) collectors: Vec<Slot>,
    /// Plug-ins to load at start ([`ProfilerBuilder::plugin`]).
    pub(super) plugins: Vec<std::path::PathBuf>,
    /// Bytes of records a flight recorder keeps ([`ProfilerBuilder::flight_recorder`]).
    pub(super) flight: Option<usize>,
    /// Where a flight recorder writes its window when a thread panics.
    pub(super) dump_on_panic: Option<std::path::PathBuf>,
    /// Bytes of records prepared at each start ([`ProfilerBuilder::reserve_memory`]).
    pub(super) reserve: usize,
    /// Listen for attaches ([`ProfilerBuilder::listen`]); `None`: as `TICKSCOPE_LISTEN` says.
    pub(super) listen: Option<bool>,
    /// A TCP endpoint to open ([`ProfilerBuilder::listen_tcp`]).
    pub(super) tcp: Option<TcpOptions>,
}

/// The TCP endpoint a session opens ([`ProfilerBuilder::listen_tcp`]).
#[derive(Clone, Debug)]
pub(super) struct TcpOptions {
    /// The addresses to bind (the first that binds), or why they could not be resolved.
    pub(super) addrs: Result<Vec<std::net::SocketAddr>, String>,
    /// Other than loopback addresses allowed ([`ProfilerBuilder::listen_tcp_any`]).
    pub(super) remote: bool,
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

impl ProfilerBuilder {
    /// Default options: all threads.
    pub fn new() -> Self {
        Self::default()
    }

    /// Chooses which threads the session records.
    pub fn threads(mut self, threads: Threads) -> Self {
        self.threads = threads;
        self
    }

    /// Records allocations and frees too (off by default). They are seen only when the
    /// program's global allocator is a [`TrackingAlloc`](crate::TrackingAlloc); the report
    /// then has allocation figures per scope ([`ScopeStats::memory`](crate::report::ScopeStats::memory)),
    /// the table shows them, [`Trace::memory`] lists every allocation and free, and the
    /// Chrome export draws live bytes over time.
    ///
    /// Frees are matched to allocations by address across the recorded threads: a block
    /// freed by a thread the session does not record stays live in its view.
    ///
    /// Takes a [`MemoryMode`] or a `bool`: `true` is [`MemoryMode::Timeline`], every
    /// allocation with its time and address (two records and a clock read each);
    /// [`MemoryMode::Counts`] keeps only the per-scope figures (bytes and counts, self and
    /// total, peak), at one record and no clock read per allocation, cheap enough to leave on.
    ///
    /// ```
    /// use tickscope::{MemoryMode, Profiler, TrackingAlloc};
    ///
    /// #[global_allocator]
    /// static ALLOC: TrackingAlloc = TrackingAlloc::new(std::alloc::System);
    ///
    /// let prof = Profiler::builder()
    ///     .current_thread()
    ///     .track_memory(MemoryMode::Counts)
    ///     .start();
    /// {
    ///     let _g = tickscope::scope!("fill");
    ///     let v: Vec<u8> = Vec::with_capacity(1000);
    ///     drop(v);
    /// }
    /// prof.stop();
    /// let fill = prof.report().get("fill").unwrap().memory.unwrap();
    /// assert_eq!((fill.allocs, fill.alloc_bytes, fill.peak_bytes), (1, 1000, 1000));
    /// assert!(prof.trace().memory.as_ref().unwrap().events.is_empty()); // no timeline
    /// ```
    pub fn track_memory(mut self, mode: impl Into<MemoryMode>) -> Self {
        self.memory = mode.into();
        self
    }

    /// Subtracts the profiler's own cost from the times it reports (on by default).
    ///
    /// A scope's probe (the work its guard does at entry and exit around the two ticks it
    /// stamps) costs about 20 ns on a current x86 machine: part of it falls inside the scope's
    /// recorded duration, the rest in its parent's, whose self time would otherwise grow by
    /// that much per child scope. The first session that compensates calibrates both parts
    /// once per process (the median of a few thousand empty scopes timed through the real
    /// probe, well under a millisecond; not with the [mock clock](crate::clock::use_mock_clock),
    /// whose times are exact and stay uncompensated), and decoding subtracts them: from each
    /// span's duration the part of its own probe inside it, and from each parent's duration
    /// every probe of its children ([`Span::overhead_ns`](crate::trace::Span::overhead_ns)),
    /// so that a scope's self time loses its own inner part and, per child scope, the child's
    /// outer part. Nothing goes below zero, and a span's duration stays its self time plus its
    /// children's durations. The timeline (span starts and ends) is left as recorded.
    ///
    /// The capture stores the calibration, so a capture file decodes to the same numbers; the
    /// table's footer and the Chrome trace's metadata state the compensation applied
    /// ([`Trace::compensation`]).
    ///
    /// ```
    /// let prof = tickscope::Profiler::builder()
    ///     .current_thread()
    ///     .compensate_overhead(false)
    ///     .start();
    /// drop(tickscope::scope!("raw"));
    /// prof.stop();
    /// assert_eq!(
    ///     prof.trace().compensation,
    ///     Some(tickscope::trace::Compensation::Off)
    /// );
    /// ```
    pub fn compensate_overhead(mut self, on: bool) -> Self {
        self.uncompensated = !on;
        self
    }

    /// Shorthand for `threads(Threads::Joined)`: record the current thread (and threads that
    /// join explicitly) only.
    pub fn current_thread(self) -> Self {
        self.threads(Threads::Joined)
    }

    /// Streams the session to the capture file at `path` as it records: a background
    /// writer appends the chunks the threads fill, so the session holds a fixed amount of
    /// memory ([`ProfilerBuilder::stream_memory`], 16 MiB by default) however long it runs, and a
    /// process that dies mid-session leaves a file that reads up to its last write (every
    /// few milliseconds; a panic writes everything up to it). Read the file with
    /// [`Capture::read`] or the `tickscope` command; the session's own
    /// [`report`](Profiler::report), [`trace`](Profiler::trace) and
    /// [`capture`](Profiler::capture) read it back too.
    ///
    /// The file is created (or truncated) at start; each restart appends a new session to it
    /// (a capture file holds sessions one after the other). One streaming session runs at a
    /// time. Memory stays bounded while streaming sessions are the only ones recording: a
    /// session that keeps its window in memory beside it keeps what it records, as always.
    /// When the disk is slower than the program, [`ProfilerBuilder::on_slow_disk`] says what happens.
    /// [`Profiler::stream_stats`] tells what was written, waited for and dropped.
    ///
    /// A stream never fails silently, nor grows without bound. A file that cannot be opened
    /// is [`ProfilerBuilder::try_start`]'s error; [`ProfilerBuilder::start`] warns on stderr and keeps a bounded
    /// window in memory instead. A file that fails mid-session (the disk is full, the file is
    /// deleted or moved) stops the writing: the writer goes on giving the chunks back and
    /// counts every record it could not write. Either way [`Profiler::stream_stats`],
    /// [`Report::stream_failure`] and the table's footer say what failed and how many events
    /// were lost.
    ///
    /// ```no_run
    /// let prof = match tickscope::Profiler::builder().stream_to("run.tscope").try_start() {
    ///     Ok(prof) => prof,
    ///     Err(e) => {
    ///         eprintln!("not profiling: {e}");
    ///         return;
    ///     }
    /// };
    /// // ... hours of work ...
    /// prof.stop();
    /// if let Some(error) = prof.stream_stats().and_then(|s| s.error) {
    ///     eprintln!("the capture is incomplete: {error}");
    /// }
    /// println!("{}", prof.table());
    /// ```
    pub fn stream_to(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.stream = Some(path.into());
        self
    }

    /// The memory a streaming session records into, in bytes: a pool of 32 KiB chunks,
    /// prepared (touched) at start and reused as the writer writes them out. 16 MiB by
    /// default ([`DEFAULT_STREAM_MEMORY`](crate::capture::DEFAULT_STREAM_MEMORY)); at least one
    /// chunk. Give each recording thread a few chunks. Only for [`ProfilerBuilder::stream_to`].
    pub fn stream_memory(mut self, bytes: usize) -> Self {
        self.stream_memory = Some(bytes);
        self
    }

    /// Prepares memory for `bytes` of records before the session starts recording (at start
    /// and at each restart): 32 KiB chunks, the recycled ones first, the rest allocated and
    /// touched on every core before [`ProfilerBuilder::start`] returns, which the recording threads
    /// take before any other. A scope
    /// takes 16 bytes (two 8-byte words; the first record of each chunk 8 more), so a session of
    /// known size, reserved for, never writes
    /// into fresh memory on the hot path: each first write to a 4 KiB page costs a page fault
    /// (about 2 µs on a VM), and when every core is busy recording no background thread can
    /// take those faults off the recording threads (a session that never stops then costs
    /// about 1.7 × the warm figure per scope on two busy cores). Add a chunk per thread for
    /// the chunk each has partly filled. The preparing takes time at start, about half a
    /// second per GiB on a 2-vCPU VM.
    ///
    /// Reserved chunks serve every recording thread, whichever session they record for. At
    /// stop, those not taken go back to the recycling pool (kept up to its 64 MiB bound,
    /// the rest freed; [`release_memory`](crate::release_memory) frees the kept ones). A
    /// reservation takes at most half the memory the system reports available (Linux's
    /// `MemAvailable`; 1 GiB where there is no such figure), so a mistaken size cannot
    /// exhaust the machine. Not for streaming sessions ([`ProfilerBuilder::stream_to`]), which record
    /// into [`ProfilerBuilder::stream_memory`] prepared at start.
    ///
    /// ```
    /// // One thread, 1 M scopes: 16 MB of records, plus a chunk.
    /// let prof = tickscope::Profiler::builder()
    ///     .current_thread()
    ///     .reserve_memory(1_000_000 * 16 + (32 << 10))
    ///     .start();
    /// for _ in 0..1_000_000 {
    ///     let _g = tickscope::scope!("step");
    /// }
    /// prof.stop();
    /// assert_eq!(prof.report().get("step").unwrap().calls, 1_000_000);
    /// ```
    pub fn reserve_memory(mut self, bytes: usize) -> Self {
        self.reserve = bytes;
        self
    }

    /// What threads do when a streaming session's writer falls behind and no chunk is free:
    /// wait for it ([`SlowWriter::Block`], the default: nothing is lost) or record nothing
    /// until a chunk is free ([`SlowWriter::Drop`]: every event not recorded is counted in
    /// the session's dropped events, the table's footer and [`StreamStats::dropped_events`]).
    /// Only for [`ProfilerBuilder::stream_to`].
    pub fn on_slow_disk(mut self, policy: SlowWriter) -> Self {
        self.slow_disk = policy;
        self
    }

    /// Records only the steps `schedule` picks ([`Profiler::step`] counts them): the session
    /// starts recording at the first warmup or active step, throws the warmup away when the
    /// active steps begin, and hands each window of active steps to
    /// [`ProfilerBuilder::on_trace_ready`] when it ends. See [`schedule`](crate::schedule).
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = Some(schedule);
        self
    }

    /// Makes the session a flight recorder that keeps only the most recent `bytes` of events,
    /// across all threads, for a program that runs forever and dumps its last moments on
    /// demand: [`Profiler::trace`], [`Profiler::write_chrome_trace`],
    /// [`Profiler::write_capture`] (and the other readers of a session) give the retained
    /// window at any time without stopping, and
    /// [`ProfilerBuilder::flight_recorder_dump_on_panic`] writes it when a thread panics.
    ///
    /// The recorder's chunks (32 KiB of records each, `bytes / 32 KiB` of them, at least one)
    /// are allocated and touched at start, and recycled whole, oldest first, when the threads
    /// need more: the memory it holds stays at `bytes` (plus 48 bytes per chunk) however long
    /// it runs, as long as flight recorders are the only sessions recording (a session that
    /// keeps its whole window beside it keeps every chunk, and the recorder gives the extra
    /// ones back when it records alone again), each recording thread having at least its own
    /// chunk, and a capture that is held (a snapshot being decoded) keeping the chunks it holds
    /// until it is dropped. The hot path is that of any session: recycling happens when a
    /// chunk fills up.
    ///
    /// The retained window is exact: every record after each thread's last recycled chunk. A
    /// scope entered before it and exited inside it keeps its name and entry time and is marked
    /// [`cut_at_start`](crate::trace::Span::cut_at_start); its exit never closes anything
    /// else. The threads' retained records start at different times (each at its own oldest
    /// chunk); async calls, whose polls move between threads, are built only from the records
    /// after the latest record overwritten ([`Trace::cut_start_ns`]), where every thread's
    /// records are all there: a call that finished is never left open at stop, none is longer
    /// than that window, and a call begun before it starts there, marked
    /// [`cut_at_start`](crate::trace::AsyncSpan::cut_at_start). The trace, the capture and the
    /// table's footer count the events overwritten
    /// ([`Trace::overwritten_events`]). One flight recorder runs at a time: the start of a
    /// second records its window in memory, unbounded ([`ProfilerBuilder::try_start`] fails instead).
    ///
    /// ```
    /// let prof = tickscope::Profiler::builder()
    ///     .current_thread()
    ///     .flight_recorder(32 << 10) // one chunk: 4096 words, 8 bytes each
    ///     .start();
    /// for _ in 0..5000 {
    ///     let _g = tickscope::scope!("request"); // two records, a word each
    /// }
    /// // Still recording: the 10 000 records fill chunks of 4095 (a chunk's first record takes
    /// // two words: its tick is the chunk's base), the last one holds 1810.
    /// let trace = prof.trace();
    /// assert_eq!(trace.threads[0].spans.len(), 905);
    /// assert_eq!(trace.overwritten_events, 8190);
    /// println!("{}", prof.table()); // … 8190 overwritten events (flight recorder)
    /// ```
    pub fn flight_recorder(mut self, bytes: usize) -> Self {
        self.flight = Some(bytes);
        self
    }

    /// Writes the flight recorder's window ([`ProfilerBuilder::flight_recorder`]) to the file at
    /// `path` when a thread panics, before the panic goes on (a panic hook, chained to the one
    /// in place): as a Chrome trace when `path` ends in `.json` or `.json.gz`, as the HTML
    /// report ([`export::html`](crate::export::html)) when it ends in `.html` or `.html.gz`,
    /// else as a capture file ([`Profiler::write_capture`]). Scopes still open are closed at the dump
    /// and flagged `open_at_stop`. Nothing is written if the session is not recording then.
    pub fn flight_recorder_dump_on_panic(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.dump_on_panic = Some(path.into());
        self
    }

    /// What a scheduled session does with each window of active steps, when it ends (in the
    /// [`Profiler::step`] that ends it, or at stop for a window cut short): on the thread that
    /// calls `step`, with the window's trace, report and capture. What it returns is returned
    /// by that `step` ([`Profiler::try_stop`] at stop). [`schedule::chrome_trace_handler`](crate::schedule::chrome_trace_handler),
    /// [`schedule::html_report_handler`](crate::schedule::html_report_handler) and
    /// [`schedule::capture_handler`](crate::schedule::capture_handler) write each window to a file.
    pub fn on_trace_ready(
        mut self,
        callback: impl Fn(&ScheduledWindow) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.on_trace_ready = Some(Callback(Arc::new(callback)));
        self
    }

    /// Runs `collector` beside the session's threads: started at each start, stopped and
    /// collected at each stop, its events decoded with the session's as processes and tracks
    /// of their own (see [`collector`](crate::collector)). Its failures are reported by
    /// [`Profiler::errors`] and the table's footer; the session goes on without it.
    ///
    /// Collectors are collected at stop: a snapshot of a running session
    /// ([`Profiler::trace`] while it runs) and [`Profiler::capture`] hold the threads' events
    /// only; the stopped session's trace, report, table, exports and
    /// [`Profiler::write_capture`] hold the collectors' too.
    pub fn collector(mut self, collector: impl Collector + 'static) -> Self {
        self.collectors.push(Slot::new(Box::new(collector)));
        self
    }

    /// Loads the plug-in (a shared library implementing `include/tickscope_plugin.h`) at
    /// `path` when the session is created, and runs it as a [`ProfilerBuilder::collector`]. The paths in
    /// the `TICKSCOPE_PLUGINS` environment variable (separated by `:`) are loaded too. A
    /// plug-in that cannot be loaded is reported by [`Profiler::errors`], naming it; the
    /// session runs without it.
    pub fn plugin(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.plugins.push(path.into());
        self
    }

    /// Lets `tickscope ps`, `tickscope record --pid` and [`attach::record`](crate::attach::record)
    /// find the session and take captures of it while it runs (see [`attach`](crate::attach)):
    /// a control socket, `<pid>.sock` in [`attach::socket_dir`](crate::attach::socket_dir)
    /// (`$XDG_RUNTIME_DIR/tickscope`, else a per-user directory of mode 0700 in the temporary
    /// directory), of mode 0600. When not called, `TICKSCOPE_LISTEN=1` in the environment
    /// turns it on; `listen(false)` keeps it off whatever the environment says.
    ///
    /// A capture taken by a client is the flight recorder's window at the attach (when the
    /// session is one, [`ProfilerBuilder::flight_recorder`]), then everything recorded for the time
    /// the client asks, in a nested session of all threads: the session itself goes on as if
    /// nothing happened. Listening costs one thread, asleep until a client connects, and
    /// nothing on the recording path. The socket is removed when the session stops or is
    /// dropped, or the process exits. One session per process listens: a second one, or a
    /// socket that cannot be opened (or a platform without Unix domain sockets), is a warning
    /// on stderr, and the session runs without listening.
    pub fn listen(mut self, on: bool) -> Self {
        self.listen = Some(on);
        self
    }

    /// Lets clients attach over TCP as well (Unix only, like [`ProfilerBuilder::listen`]):
    /// `tickscope record --tcp HOST:PORT --token T`, `tickscope top --tcp HOST:PORT --token
    /// T`, or [`attach::Endpoint::Tcp`](crate::attach::Endpoint::Tcp). Nothing listens on TCP
    /// unless this (or [`ProfilerBuilder::listen_tcp_any`]) is called; the Unix socket is
    /// still opened only as [`ProfilerBuilder::listen`] says.
    ///
    /// `addr` must be a loopback address (`127.0.0.1:7000`, `[::1]:7000`, `localhost:7000`;
    /// port 0 lets the system choose, see [`Profiler::listen_addr`]; a name is resolved
    /// here, when this is called, and every address it resolves to must be one): any other is refused,
    /// in one line on stderr, and the session runs without TCP. At start the session draws a
    /// token of 16 random bytes (`/dev/urandom`) and prints it once on stderr, with the
    /// address bound (`tickscope: listening on 127.0.0.1:40123, token 5f0c…`); a client must
    /// send it first, or gets one line of error and its connection closed (the program and
    /// its session are unharmed). A restart ([`Profiler::restart`]) after a stop opens the
    /// endpoint again, with a new token. The endpoint has a thread of its own, asleep until
    /// a client connects; it and the Unix socket serve one client at a time between them.
    pub fn listen_tcp(self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.tcp(addr, false)
    }

    /// [`ProfilerBuilder::listen_tcp`] on any address, `0.0.0.0:7000` included: clients of
    /// other machines may connect, with the token. The protocol is neither encrypted nor
    /// authenticated beyond the token: use it on a network you trust, or through a tunnel.
    pub fn listen_tcp_any(self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.tcp(addr, true)
    }

    fn tcp(mut self, addr: impl std::net::ToSocketAddrs, remote: bool) -> Self {
        let addrs = addr
            .to_socket_addrs()
            .map(Iterator::collect)
            .map_err(|e| format!("cannot resolve the address: {e}"));
        self.tcp = Some(TcpOptions { addrs, remote });
        self
    }

    /// True when the session should listen: [`ProfilerBuilder::listen`], else `TICKSCOPE_LISTEN=1`.
    pub(super) fn listens(&self) -> bool {
        self.listen.unwrap_or_else(|| {
            std::env::var_os("TICKSCOPE_LISTEN").is_some_and(|v| v == "1" || v == "true")
        })
    }

    /// The options of a streaming session, if this is one.
    pub(super) fn stream_options(&self) -> Option<StreamOptions> {
        Some(StreamOptions {
            path: self.stream.clone()?,
            memory: self.stream_memory.unwrap_or(capture::DEFAULT_STREAM_MEMORY),
            policy: self.slow_disk,
            compensation: Compensation::Unknown,
        })
    }

    /// Starts a session with these options.
    ///
    /// A streaming session ([`ProfilerBuilder::stream_to`]) whose file cannot be opened (a missing
    /// directory, no permission, another streaming session running) says so in one line on
    /// stderr, naming the file and the error (`tickscope: /ro/run.tscope: cannot open:
    /// Permission denied (os error 13); the session records its last 16 MiB in memory
    /// instead`), and keeps a bounded window in memory instead: a flight recorder
    /// ([`ProfilerBuilder::flight_recorder`]) of the stream's memory ([`ProfilerBuilder::stream_memory`], 16 MiB
    /// by default, at most 64 MiB; the session's own window when it is a flight recorder),
    /// which overwrites the oldest records and counts them. Where another flight recorder
    /// runs (one at a time), the session keeps nothing and counts every event it records as
    /// lost. [`Profiler::stream_stats`], [`Report::stream_failure`] and the table's footer say
    /// what failed and how many events were lost. Use [`ProfilerBuilder::try_start`] to get the error
    /// instead.
    #[must_use = "the session records until it is stopped or dropped: keep it in a variable"]
    pub fn start(self) -> Profiler {
        let profiler = self.session();
        if profiler.begin(true).is_err() {
            profiler.warn_stream_fallback();
        }
        profiler.open_listener();
        profiler
    }

    /// Starts a session with these options, or fails when a streaming session's file cannot
    /// be opened or written, or another streaming session runs.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join("no-such-dir-for-tickscope");
    /// let err = tickscope::Profiler::builder()
    ///     .stream_to(dir.join("run.tscope"))
    ///     .try_start()
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("run.tscope"));
    /// ```
    pub fn try_start(self) -> std::io::Result<Profiler> {
        let profiler = self.session();
        profiler.begin(false)?;
        profiler.open_listener();
        Ok(profiler)
    }

    fn session(self) -> Profiler {
        let mut collectors = self.collectors.clone();
        let mut load_errors = Vec::new();
        let from_env = std::env::var_os("TICKSCOPE_PLUGINS").unwrap_or_default();
        let from_env = std::env::split_paths(&from_env).filter(|p| !p.as_os_str().is_empty());
        for path in self.plugins.iter().cloned().chain(from_env) {
            match Slot::plugin(&path) {
                Ok(slot) => collectors.push(slot),
                Err(e) => load_errors.push(e),
            }
        }
        let inner = Arc::new(Inner {
            listener: Mutex::new(None),
            tcp: Mutex::new(None),
            id: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            config: self,
            collectors,
            load_errors,
            state: Mutex::new(State {
                window: None,
                members: None,
                stopped: None,
                observer_panics: 0,
                streamed_before: false,
                stream_error: None,
                stream_fallback: None,
                steps: Steps::default(),
                collector_errors: Vec::new(),
            }),
        });
        Profiler { inner }
    }
}
