//! [`Profiler`] sessions: start, stop, restart, nesting and thread scopes.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crate::capture::stream::{self, Stream, StreamOptions};
use crate::capture::{self, Capture, Handover, StreamStats};
use crate::collector::{Collector, CollectorError, Slot};
use crate::record::clock::{self, Calibration, Compensation};
use crate::record::flight;
use crate::record::memory::MemoryMode;
use crate::record::pool::{self, SlowWriter};
use crate::record::registry::{self, Members};
use crate::record::scope::ScopeGuard;
use crate::record::sync::lock;
use crate::record::thread;
use crate::report::{Report, StreamFailure};
use crate::schedule::{Action, Callback, Schedule, ScheduledWindow};
use crate::table::Table;
use crate::trace::Trace;

/// The control socket of a session that listens (`attach::server::Listener`, opened through
/// the crate root's [`open_control_socket`](crate::open_control_socket) so that this file,
/// below the attach front end in the pipeline, does not refer to it): dropping it closes the
/// socket and stops its thread.
type Listener = Box<dyn std::fmt::Debug + Send + Sync>;

/// What the running session of a program is, for an attach ([`Profiler::recording`]).
#[cfg(all(unix, feature = "enabled"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recording {
    /// Its window is a flight recorder's.
    pub(crate) flight: bool,
    /// It streams to a file.
    pub(crate) stream: bool,
    /// The tick at which its window started.
    pub(crate) start_tick: u64,
}

/// Which threads a session records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Threads {
    /// Every thread of the process (the default).
    #[default]
    All,
    /// The thread that starts the session, plus threads that call
    /// [`Profiler::join_current_thread`]. Sessions of this kind see nothing of other threads, so
    /// tests running in parallel in one process each get exact counts.
    Joined,
}

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
    threads: Threads,
    memory: MemoryMode,
    stream: Option<std::path::PathBuf>,
    stream_memory: Option<usize>,
    slow_disk: SlowWriter,
    schedule: Option<Schedule>,
    on_trace_ready: Option<Callback>,
    /// Overhead compensation switched off ([`ProfilerBuilder::compensate_overhead`]).
    uncompensated: bool,
    /// Collectors run beside the threads ([`ProfilerBuilder::collector`]).
    collectors: Vec<Slot>,
    /// Plug-ins to load at start ([`ProfilerBuilder::plugin`]).
    plugins: Vec<std::path::PathBuf>,
    /// Bytes of records a flight recorder keeps ([`ProfilerBuilder::flight_recorder`]).
    flight: Option<usize>,
    /// Where a flight recorder writes its window when a thread panics.
    dump_on_panic: Option<std::path::PathBuf>,
    /// Bytes of records prepared at each start ([`ProfilerBuilder::reserve_memory`]).
    reserve: usize,
    /// Listen for attaches ([`ProfilerBuilder::listen`]); `None`: as `TICKSCOPE_LISTEN` says.
    listen: Option<bool>,
    /// A TCP endpoint to open ([`ProfilerBuilder::listen_tcp`]).
    tcp: Option<TcpOptions>,
}

/// The TCP endpoint a session opens ([`ProfilerBuilder::listen_tcp`]).
#[derive(Clone, Debug)]
struct TcpOptions {
    /// The addresses to bind (the first that binds), or why they could not be resolved.
    addrs: Result<Vec<std::net::SocketAddr>, String>,
    /// Other than loopback addresses allowed ([`ProfilerBuilder::listen_tcp_any`]).
    remote: bool,
}

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

    /// The memory a streaming session records into, in bytes: a pool of 64 KiB chunks,
    /// prepared (touched) at start and reused as the writer writes them out. 16 MiB by
    /// default ([`DEFAULT_STREAM_MEMORY`](crate::capture::DEFAULT_STREAM_MEMORY)); at least one
    /// chunk. Give each recording thread a few chunks. Only for [`ProfilerBuilder::stream_to`].
    pub fn stream_memory(mut self, bytes: usize) -> Self {
        self.stream_memory = Some(bytes);
        self
    }

    /// Prepares memory for `bytes` of records before the session starts recording (at start
    /// and at each restart): 64 KiB chunks, the recycled ones first, the rest allocated and
    /// touched on every core before [`ProfilerBuilder::start`] returns, which the recording threads
    /// take before any other. A scope
    /// takes 32 bytes (two records), so a session of known size, reserved for, never writes
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
    /// // One thread, 1 M scopes: 32 MB of records, plus a chunk.
    /// let prof = tickscope::Profiler::builder()
    ///     .current_thread()
    ///     .reserve_memory(1_000_000 * 32 + (64 << 10))
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
    /// The recorder's chunks (64 KiB of records each, `bytes / 64 KiB` of them, at least one)
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
    ///     .flight_recorder(64 << 10) // one chunk: 4096 records
    ///     .start();
    /// for _ in 0..5000 {
    ///     let _g = tickscope::scope!("request"); // two records
    /// }
    /// // Still recording: the 10 000 records fill chunks of 4096, the last one holds 1808.
    /// let trace = prof.trace();
    /// assert_eq!(trace.threads[0].spans.len(), 904);
    /// assert_eq!(trace.overwritten_events, 8192);
    /// println!("{}", prof.table()); // … 8192 overwritten events (flight recorder)
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
    fn listens(&self) -> bool {
        self.listen.unwrap_or_else(|| {
            std::env::var_os("TICKSCOPE_LISTEN").is_some_and(|v| v == "1" || v == "true")
        })
    }

    /// The options of a streaming session, if this is one.
    fn stream_options(&self) -> Option<StreamOptions> {
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

/// The running sessions of a thread, to be joined by other threads: what
/// [`thread::spawn`](crate::thread::spawn) hands to the threads it spawns, and what a thread
/// pool's start hook joins (see [`crate::thread`]). It holds the sessions weakly: a session
/// dropped meanwhile is not kept alive, and is not joined.
#[derive(Clone, Debug, Default)]
pub struct Sessions(Vec<Weak<Inner>>);

impl Sessions {
    /// The sessions running on the calling thread (started or joined on it), outermost first.
    pub fn current() -> Self {
        let running = STACK.try_with(|stack| {
            stack
                .borrow()
                .iter()
                .filter(|w| {
                    w.upgrade()
                        .is_some_and(|inner| inner.state().window.is_some())
                })
                .cloned()
                .collect()
        });
        Self(running.unwrap_or_default())
    }

    /// The calling thread joins each of the sessions that still runs
    /// ([`Profiler::join_current_thread`]), outermost first.
    pub fn join(&self) {
        for inner in self.0.iter().filter_map(Weak::upgrade) {
            Profiler { inner }.join_current_thread();
        }
    }

    /// The number of sessions held (running when taken).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no session was running.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The most a window whose stream cannot start keeps in memory instead: 64 MiB (a stream's
/// memory larger than that, or too large to be allowed, is not allocated for a failed start).
const MAX_FALLBACK_WINDOW: usize = 64 << 20;

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Sessions started or joined on this thread, innermost last (TVM's profiler stack).
    static STACK: RefCell<Vec<Weak<Inner>>> = const { RefCell::new(Vec::new()) };
}

/// A [`Profiler`] held weakly: see [`Profiler::downgrade`].
#[cfg(all(unix, feature = "enabled"))]
#[derive(Debug, Clone)]
pub(crate) struct WeakProfiler(Weak<Inner>);

#[cfg(all(unix, feature = "enabled"))]
impl WeakProfiler {
    /// The session, while some handle of it lives.
    pub(crate) fn upgrade(&self) -> Option<Profiler> {
        self.0.upgrade().map(|inner| Profiler { inner })
    }
}

/// A profiling session: records scopes from `start` to `stop` and reports on them.
///
/// Sessions nest: an inner session reports only its own window, an outer one everything,
/// the inner window included. A session can be restarted; each stop keeps its own data,
/// replacing the previous stop's. Cloning gives another handle to the same session (for
/// instance to join from another thread); dropping the last handle of a running session
/// discards it.
///
/// ```
/// let prof = tickscope::Profiler::builder().current_thread().start();
/// for _ in 0..3 {
///     let _g = tickscope::scope!("step");
/// }
/// prof.stop();
/// assert_eq!(prof.report().get("step").unwrap().calls, 3);
/// ```
#[derive(Clone, Debug)]
pub struct Profiler {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    id: u64,
    config: ProfilerBuilder,
    /// The collectors and loaded plug-ins.
    collectors: Vec<Slot>,
    /// The plug-ins that could not be loaded.
    load_errors: Vec<CollectorError>,
    state: Mutex<State>,
    /// The control socket of a session that listens ([`ProfilerBuilder::listen`]).
    listener: Mutex<Option<Listener>>,
    /// The TCP endpoint ([`ProfilerBuilder::listen_tcp`]) and the address it is bound to.
    tcp: Mutex<Option<crate::TcpGuard>>,
}

#[derive(Debug)]
struct State {
    /// Set while the session records.
    window: Option<Window>,
    /// Members of a `Joined` session, kept across restarts.
    members: Option<Members>,
    /// What the last stop captured, and its trace once decoded.
    stopped: Option<Stopped>,
    /// Observer callbacks that panicked in the last stop's window, on the threads it recorded.
    observer_panics: u64,
    /// A window of this streaming session wrote its file: the next one appends to it.
    streamed_before: bool,
    /// Why the last window could not stream (it recorded in memory instead).
    stream_error: Option<String>,
    /// What the last window did instead of streaming, for the warning.
    stream_fallback: Option<String>,
    /// Where a scheduled session is in its steps.
    steps: Steps,
    /// The collectors' failures in the last window.
    collector_errors: Vec<CollectorError>,
}

/// The steps of a session ([`Profiler::step`]).
#[derive(Debug, Default)]
struct Steps {
    /// The step in progress (the first is 0).
    current: u64,
    /// The first step of the window of active steps being recorded.
    first_active: u64,
    /// Windows handed to [`ProfilerBuilder::on_trace_ready`] so far.
    handed: u64,
    /// Stopped by the user: later steps record nothing.
    ended: bool,
}

thread_local! {
    /// The `ProfilerStep#N` scope open on this thread, by session id.
    static STEP_SCOPES: RefCell<Vec<(u64, ScopeGuard)>> = const { RefCell::new(Vec::new()) };
}

#[derive(Debug)]
struct Stopped {
    /// The window's capture: handed over at stop, or read back from a streaming session's
    /// file on first use.
    capture: OnceLock<Arc<Capture>>,
    /// The streaming session's file and figures.
    streamed: Option<StreamStats>,
    /// The streaming session's file holds the window (not when it had none, or it was
    /// deleted or moved).
    readable: bool,
    /// The collectors' sessions.
    collected: Vec<Capture>,
    trace: OnceLock<Arc<Trace>>,
}

impl Stopped {
    fn capture(&self) -> &Arc<Capture> {
        self.capture.get_or_init(|| {
            let Some(stats) = &self.streamed else {
                return Arc::new(Capture::empty());
            };
            let mut capture = match self.readable {
                true => stream::read_back(&stats.path, None),
                false => Capture::empty(),
            };
            if let Some(error) = &stats.error {
                // The file ends where the writing failed, without its footer: what it lacks
                // counts as dropped, and the capture says why.
                capture.dropped_events = capture
                    .dropped_events
                    .max(stats.dropped_events)
                    .saturating_add(stats.records_lost);
                capture.warnings.push(format!(
                    "{error}: {} records lost (in neither the file nor memory)",
                    stats.records_lost
                ));
            }
            Arc::new(capture)
        })
    }
}

#[derive(Debug)]
struct Window {
    start_tick: u64,
    calibration: Calibration,
    compensation: Compensation,
    dropped_at_start: u64,
    /// The writer of a streaming session.
    stream: Option<Stream>,
    /// The collectors that started (by index).
    started: Vec<usize>,
    /// A flight recorder runs for this window.
    flight: bool,
    /// The chunks reserved for this window ([`ProfilerBuilder::reserve_memory`]); dropped at stop.
    reservation: Option<pool::Reservation>,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The window's capture up to `end_tick`: the chunks of the threads it records, handed
    /// over as they are.
    fn capture(&self, window: &Window, end_tick: u64, stop: Calibration) -> Capture {
        let handover = |(t, cut): (registry::ThreadChunks, Vec<flight::CutScope>)| Handover {
            id: t.id,
            name: t.name,
            from_tick: t.from_tick,
            cut,
            chunks: t.chunks,
        };
        let retained = window
            .flight
            .then(|| flight::retained(self.id, || registry::take_chunks(self.id)))
            .flatten();
        let (threads, overwritten_events, cut_start) = match retained {
            Some(retained) => (
                retained.threads.into_iter().map(handover).collect(),
                retained.overwritten,
                retained.cut_start,
            ),
            None => (
                registry::take_chunks(self.id)
                    .into_iter()
                    .map(|t| handover((t, Vec::new())))
                    .collect(),
                0,
                None,
            ),
        };
        let window = capture::Window {
            start_tick: window.start_tick,
            end_tick,
            start: window.calibration.clone(),
            stop,
            compensation: window.compensation,
            memory: self.config.memory,
            dropped_events: registry::dropped_events() - window.dropped_at_start,
            overwritten_events,
            cut_start,
        };
        Capture::new(window, threads)
    }
}

impl Inner {
    /// The running window's capture up to now: its chunks in memory, or what a streaming
    /// session has written, read back.
    fn snapshot(&self, window: &Window) -> Capture {
        match &window.stream {
            Some(stream) => stream.snapshot(),
            None => {
                thread::flush_counted_here();
                self.capture(window, clock::now(), Calibration::sample())
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(window) = state.window.take() {
            registry::stop_recording(self.id);
            if window.flight {
                flight::uninstall(self.id);
            }
            // A streaming session's file gets its end: everything recorded, and the footer.
            if let Some(stream) = window.stream {
                let dropped = registry::dropped_events() - window.dropped_at_start;
                stream.finish(clock::now(), &Calibration::sample(), dropped);
            }
            registry::finish_session(self.id);
            // The collectors stop too; what they collected is dropped with the session.
            let mut errors = Vec::new();
            for &i in &window.started {
                drop(self.collectors[i].finish(&mut errors));
            }
        }
    }
}

impl Profiler {
    /// Starts a session that records every thread.
    #[must_use = "the session records until it is stopped or dropped: keep it in a variable"]
    pub fn start() -> Self {
        ProfilerBuilder::new().start()
    }

    /// Options for a new session.
    pub fn builder() -> ProfilerBuilder {
        ProfilerBuilder::new()
    }

    /// The innermost running session started or joined on this thread.
    pub fn current() -> Option<Self> {
        STACK
            .try_with(|stack| {
                let mut stack = stack.borrow_mut();
                stack.retain(|w| w.strong_count() > 0);
                stack
                    .iter()
                    .rev()
                    .filter_map(Weak::upgrade)
                    .map(|inner| Self { inner })
                    .find(Self::is_running)
            })
            .ok()
            .flatten()
    }

    /// Starts a new window: the data of the previous stop is kept until the next stop
    /// replaces it. Does nothing if the session is running. A streaming session appends the
    /// new window to its file as a new session; if the file cannot be opened, the window
    /// keeps a bounded amount in memory instead, as at [`ProfilerBuilder::start`] (which warns on
    /// stderr when the error is not the last window's).
    pub fn restart(&self) {
        let before = self.inner.state().stream_error.clone();
        if self.try_restart(true).is_err() && self.inner.state().stream_error != before {
            self.warn_stream_fallback();
        }
        self.open_listener();
    }

    /// Opens the control socket of a session that listens ([`ProfilerBuilder::listen`]), unless it is
    /// open; says on stderr, in one line, why it cannot.
    fn open_listener(&self) {
        if let Some(options) = &self.inner.config.tcp {
            let mut tcp = lock(&self.inner.tcp);
            if tcp.is_none() {
                let opened = options
                    .addrs
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|addrs| {
                        crate::open_tcp_endpoint(self, addrs, options.remote)
                            .map_err(|e| e.to_string())
                    });
                match opened {
                    Ok(opened) => *tcp = Some(opened),
                    Err(e) => eprintln!("tickscope: not listening on TCP: {e}"),
                }
            }
        }
        if !self.inner.config.listens() {
            return;
        }
        let mut listener = lock(&self.inner.listener);
        if listener.is_some() {
            return;
        }
        match crate::open_control_socket(self) {
            Ok(opened) => *listener = Some(opened),
            Err(e) => eprintln!("tickscope: not listening for attaches: {e}"),
        }
    }

    /// The address of the session's TCP endpoint ([`ProfilerBuilder::listen_tcp`]) while it
    /// is open, with the port the system chose for port 0; `None` without one (not asked, or
    /// refused), and once the session is stopped.
    pub fn listen_addr(&self) -> Option<std::net::SocketAddr> {
        lock(&self.inner.tcp).as_ref().map(|tcp| tcp.addr)
    }

    /// The token of the session's TCP endpoint ([`ProfilerBuilder::listen_tcp`]) while it is
    /// open, as printed on stderr: for a program that hands it to its clients another way.
    pub fn listen_token(&self) -> Option<String> {
        lock(&self.inner.tcp).as_ref().map(|tcp| tcp.token.clone())
    }

    /// A handle that does not keep the session alive (for its listening thread).
    #[cfg(all(unix, feature = "enabled"))]
    pub(crate) fn downgrade(&self) -> WeakProfiler {
        WeakProfiler(Arc::downgrade(&self.inner))
    }

    /// The flight recorder's window in bytes ([`ProfilerBuilder::flight_recorder`]), if any.
    #[cfg(all(unix, feature = "enabled"))]
    pub(crate) fn flight_bytes(&self) -> Option<usize> {
        self.inner.config.flight
    }

    /// What the running window is, for an attach; `None` when stopped.
    #[cfg(all(unix, feature = "enabled"))]
    pub(crate) fn recording(&self) -> Option<Recording> {
        let state = self.inner.state();
        let window = state.window.as_ref()?;
        Some(Recording {
            flight: window.flight,
            stream: window.stream.is_some(),
            start_tick: window.start_tick,
        })
    }

    /// Says on stderr, in one line, why the window just started could not stream, and what
    /// it does instead.
    fn warn_stream_fallback(&self) {
        let state = self.inner.state();
        if let (Some(error), Some(instead)) = (&state.stream_error, &state.stream_fallback) {
            eprintln!("tickscope: {error}; {instead}");
        }
    }

    /// [`Profiler::restart`], failing when a streaming session's file cannot be opened.
    ///
    /// With `fallback`, a window whose stream cannot start keeps a bounded amount in memory
    /// instead (see [`ProfilerBuilder::start`]); without, the caller drops the session on the error.
    fn try_restart(&self, fallback: bool) -> std::io::Result<()> {
        let mut state = self.inner.state();
        if state.window.is_some() {
            return Ok(());
        }
        let _untracked = registry::Untracked::enter();
        // Nothing reads the previous stop while the session runs (snapshots are taken
        // instead), and the next stop replaces it: its chunks go back to the pool now, warm for
        // this window, unless a caller still holds its capture.
        state.stopped = None;
        clock::init();
        pool::prepare();
        let members = match self.inner.config.threads {
            Threads::All => Members::All,
            Threads::Joined => match (state.members.take(), thread::current_entry()) {
                (Some(members), _) => members,
                (None, Some(me)) => Members::Threads(vec![(me.id, 0)]),
                (None, None) => Members::Threads(Vec::new()),
            },
        };
        let compensation = if self.inner.config.uncompensated {
            Compensation::Off
        } else {
            probe_overhead()
        };
        let calibration = Calibration::sample();
        let dropped_at_start = registry::dropped_events();
        let start_tick = clock::now();
        let memory = self.inner.config.memory;
        let options = self.inner.config.stream_options().map(|mut options| {
            options.compensation = compensation;
            options
        });
        let (mut stream, result) = match &options {
            None => (None, Ok(())),
            Some(options) => {
                let append = state.streamed_before;
                match Stream::start(
                    options,
                    append,
                    self.inner.id,
                    start_tick,
                    &calibration,
                    memory,
                ) {
                    Ok(stream) => (Some(stream), Ok(())),
                    Err(e) => (None, Err(e)),
                }
            }
        };
        state.streamed_before |= stream.is_some();
        state.stream_error = result.as_ref().err().map(ToString::to_string);
        // A stream that cannot start: the window keeps its last records in memory instead, as
        // a flight recorder of the stream's memory (or of its own window, when it is one).
        let fallback = fallback && result.is_err();
        // A flight recorder recycles only while flight recorders are the only sessions
        // recording: beside another session its window would grow without bound, so the
        // window then keeps nothing and counts what it records as lost (below).
        let alone = !registry::any_recording();
        let window_bytes = match &options {
            Some(_) if fallback && !alone && self.inner.config.flight.is_none() => None,
            Some(options) if fallback => Some(
                self.inner
                    .config
                    .flight
                    .unwrap_or(options.memory.min(MAX_FALLBACK_WINDOW)),
            ),
            _ => self.inner.config.flight,
        };
        let (flight, result) = match window_bytes {
            Some(bytes) => match flight::install(self.inner.id, bytes) {
                Ok(()) => (true, result),
                Err(flight::StartError::Running) => (
                    false,
                    result.and(Err(std::io::Error::other(
                        "another flight recorder is running (one at a time): this window \
                         records in memory, unbounded",
                    ))),
                ),
            },
            None => (false, result),
        };
        state.stream_fallback = match (&options, &state.stream_error) {
            _ if !fallback => None,
            (Some(_), Some(_)) if flight => {
                let bytes =
                    (window_bytes.unwrap_or(0) / flight::CHUNK_BYTES).max(1) * flight::CHUNK_BYTES;
                Some(format!(
                    "the session records its last {} in memory instead",
                    size(bytes)
                ))
            }
            // Not even that (another flight recorder runs, or another session records, so
            // that the recorder could not recycle): the window keeps nothing, and counts
            // every event it records as lost.
            (Some(options), Some(error)) => match Stream::sink(
                options,
                error.clone(),
                self.inner.id,
                start_tick,
                &calibration,
                memory,
            ) {
                Ok(sink) => {
                    stream = Some(sink);
                    let why = if alone {
                        "another flight recorder is running"
                    } else {
                        "other sessions are recording"
                    };
                    Some(format!(
                        "{why}: the session keeps nothing and counts every event it records \
                         as lost"
                    ))
                }
                Err(e) => Some(format!(
                    "the session records in memory instead, unbounded (no writer: {e})"
                )),
            },
            _ => None,
        };
        if flight && let Some(path) = &self.inner.config.dump_on_panic {
            dump::register(&self.inner, path.clone());
        }
        // After the overhead probe, whose scopes would take reserved chunks.
        let reservation = (self.inner.config.reserve > 0 && self.inner.config.stream.is_none())
            .then(|| pool::Reservation::new(self.inner.config.reserve));
        registry::add_session(
            self.inner.id,
            start_tick,
            members,
            memory,
            (stream.is_some(), flight),
        );
        state.collector_errors.clear();
        let mut started = Vec::new();
        for (i, slot) in self.inner.collectors.iter().enumerate() {
            match slot.start() {
                Ok(()) => started.push(i),
                Err(e) => state.collector_errors.push(e),
            }
        }
        state.window = Some(Window {
            start_tick,
            calibration,
            compensation,
            dropped_at_start,
            stream,
            started,
            flight,
            reservation,
        });
        drop(state);
        self.push_on_stack();
        result
    }

    fn push_on_stack(&self) {
        let weak = Arc::downgrade(&self.inner);
        let _ = STACK.try_with(|stack| {
            let mut stack = stack.borrow_mut();
            if !stack.iter().any(|w| w.ptr_eq(&weak)) {
                stack.push(weak);
            }
        });
    }

    /// Stops recording and collects the window's events. Does nothing if already stopped. A
    /// streaming session writes what is left and the file's footer. A scheduled session
    /// ([`ProfilerBuilder::schedule`]) hands a window of active steps cut short by the stop to
    /// [`ProfilerBuilder::on_trace_ready`] (use [`Profiler::try_stop`] for what that returns), and
    /// records nothing in later steps.
    pub fn stop(&self) {
        let _ = self.try_stop();
    }

    /// [`Profiler::stop`], returning what [`ProfilerBuilder::on_trace_ready`] returned for the window
    /// the stop cut short, if any.
    pub fn try_stop(&self) -> std::io::Result<()> {
        // The session ends for clients too: its socket goes.
        *lock(&self.inner.listener) = None;
        *lock(&self.inner.tcp) = None;
        // The step in progress ends here.
        self.close_step_scope();
        let Some(schedule) = self.inner.config.schedule else {
            self.stop_window();
            return Ok(());
        };
        let running = self.is_running();
        self.stop_window();
        let (current, first) = {
            let mut state = self.inner.state();
            state.steps.ended = true;
            (state.steps.current, state.steps.first_active)
        };
        match schedule.action(current) {
            Action::Record | Action::RecordAndHand if running => self.hand(first..current + 1),
            _ => Ok(()),
        }
    }

    /// Ends step N and begins step N + 1 (the first step, 0, begins at start): marks the
    /// steps in the trace (a `ProfilerStep#N` scope on this thread while the session records)
    /// and, for a scheduled session ([`ProfilerBuilder::schedule`]), starts and stops recording as the
    /// schedule says, handing each window of active steps to [`ProfilerBuilder::on_trace_ready`] as it
    /// ends. Returns what that callback returned, or why a streaming session's file could
    /// not be opened when recording started again (the window then keeps a bounded amount
    /// in memory, as at [`ProfilerBuilder::start`]). Call it from
    /// one thread.
    pub fn step(&self) -> std::io::Result<()> {
        self.close_step_scope();
        let (done, ended, first) = {
            let mut state = self.inner.state();
            let done = state.steps.current;
            state.steps.current += 1;
            (done, state.steps.ended, state.steps.first_active)
        };
        let step = done + 1;
        let Some(schedule) = self.inner.config.schedule else {
            if self.is_running() {
                self.open_step_scope(step);
            }
            return Ok(());
        };
        if ended {
            return Ok(());
        }
        let (was, now) = (schedule.action(done), schedule.action(step));
        let running = self.is_running();
        let mut result = Ok(());
        let active = |a: Action| matches!(a, Action::Record | Action::RecordAndHand);
        match was {
            Action::RecordAndHand => {
                self.stop_window();
                if running {
                    result = self.hand(first..step);
                }
            }
            Action::Record if !active(now) => {
                self.stop_window();
                if running {
                    result = self.hand(first..step);
                }
            }
            // The warmup is thrown away: the next stop replaces it.
            Action::Warmup if now != Action::Warmup => self.stop_window(),
            _ => {}
        }
        if active(now) && was != Action::Record {
            self.inner.state().steps.first_active = step;
        }
        if now.records() {
            if !self.is_running() {
                result = result.and(self.try_restart(true));
            }
            self.open_step_scope(step);
        }
        result
    }

    /// Starts recording at the session's start: at once, or when its schedule says.
    /// `fallback` as in [`Profiler::try_restart`].
    fn begin(&self, fallback: bool) -> std::io::Result<()> {
        match self.inner.config.schedule {
            None => self.try_restart(fallback),
            Some(schedule) if schedule.action(0).records() => {
                let result = self.try_restart(fallback);
                self.open_step_scope(0);
                result
            }
            Some(_) => Ok(()),
        }
    }

    /// Hands the window just stopped, of `steps`, to [`ProfilerBuilder::on_trace_ready`].
    fn hand(&self, steps: std::ops::Range<u64>) -> std::io::Result<()> {
        let index = {
            let mut state = self.inner.state();
            state.steps.handed += 1;
            state.steps.handed - 1
        };
        match &self.inner.config.on_trace_ready {
            Some(Callback(callback)) => {
                callback(&ScheduledWindow::new(index, steps, self.capture()))
            }
            None => Ok(()),
        }
    }

    /// Opens this thread's `ProfilerStep#step` scope for this session.
    fn open_step_scope(&self, step: u64) {
        let guard = ScopeGuard::enter_dynamic(&format!("ProfilerStep#{step}"));
        let _ = STEP_SCOPES.try_with(|scopes| scopes.borrow_mut().push((self.inner.id, guard)));
    }

    /// Closes this thread's `ProfilerStep#N` scope of this session, if one is open.
    fn close_step_scope(&self) {
        let id = self.inner.id;
        let guard = STEP_SCOPES.try_with(|scopes| {
            let mut scopes = scopes.borrow_mut();
            let at = scopes.iter().position(|(session, _)| *session == id)?;
            Some(scopes.remove(at).1)
        });
        // Dropped outside the borrow: closing a scope may call observers.
        drop(guard);
    }

    /// Stops recording and collects the window's events; does nothing if already stopped.
    fn stop_window(&self) {
        let _untracked = registry::Untracked::enter();
        let mut state = self.inner.state();
        let Some(mut window) = state.window.take() else {
            return;
        };
        // This thread's counted allocations go in before the window ends (see
        // `MemoryMode::Counts`).
        thread::flush_counted_here();
        let end_tick = clock::now();
        let calibration = Calibration::sample();
        registry::stop_recording(self.inner.id);
        // The reserved chunks no thread took go back to the pool.
        drop(window.reservation.take());
        let mut collected = Vec::new();
        for &i in &window.started {
            collected.extend(self.inner.collectors[i].finish(&mut state.collector_errors));
        }
        let stopped = match window.stream.take() {
            Some(stream) => {
                let dropped = registry::dropped_events() - window.dropped_at_start;
                let (stats, readable) = stream.finish(end_tick, &calibration, dropped);
                Stopped {
                    capture: OnceLock::new(),
                    streamed: Some(stats),
                    readable,
                    collected,
                    trace: OnceLock::new(),
                }
            }
            None => Stopped {
                capture: OnceLock::from(Arc::new(self.inner.capture(
                    &window,
                    end_tick,
                    calibration,
                ))),
                streamed: None,
                readable: false,
                collected,
                trace: OnceLock::new(),
            },
        };
        if window.flight {
            flight::uninstall(self.inner.id);
        }
        state.observer_panics = registry::observer_panics(self.inner.id);
        state.members = registry::finish_session(self.inner.id);
        state.stopped = Some(stopped);
    }

    /// What a streaming session ([`ProfilerBuilder::stream_to`]) has written so far (while it runs)
    /// or in its last window (once stopped): bytes, chunks and records written, events
    /// dropped and time waited for a slow disk. `None` for a session that does not stream.
    ///
    /// A stream that failed has its [`StreamStats::error`] and, in
    /// [`StreamStats::records_lost`], the records lost to it (in neither the file nor
    /// memory): when the file could not be opened, nothing written and the records the
    /// in-memory window overwrote (see [`ProfilerBuilder::start`]); when a write failed or the file
    /// was deleted or moved mid-session, those the file did not get (everything, for a file
    /// deleted).
    pub fn stream_stats(&self) -> Option<StreamStats> {
        let state = self.inner.state();
        let path = self.inner.config.stream.clone()?;
        // Without a stream, the window kept its last records in memory: those it overwrote
        // are lost.
        let overwritten = match (&state.window, &state.stopped) {
            (Some(window), _) => {
                if let Some(stream) = &window.stream {
                    return Some(stream.stats());
                }
                flight::overwritten(self.inner.id).filter(|_| window.flight)
            }
            (None, Some(stopped)) => {
                if let Some(stats) = &stopped.streamed {
                    return Some(stats.clone());
                }
                Some(stopped.capture().overwritten_events())
            }
            (None, None) => None,
        };
        let error = state.stream_error.clone();
        Some(StreamStats {
            path,
            records_lost: error.as_ref().and(overwritten).unwrap_or(0),
            error,
            ..StreamStats::default()
        })
    }

    /// The session's stream, if it failed: why, and the events lost.
    fn stream_failure(&self) -> Option<StreamFailure> {
        let stats = self.stream_stats()?;
        Some(StreamFailure::new(stats.error?, stats.records_lost))
    }

    /// True between start (or restart) and stop.
    pub fn is_running(&self) -> bool {
        self.inner.state().window.is_some()
    }

    /// Adds the calling thread to a session that records [`Threads::Joined`] threads, from now
    /// until the session stops (and after restarts). Has no effect on an all-threads session
    /// other than making it this thread's [`Profiler::current`].
    pub fn join_current_thread(&self) {
        if let Some(me) = thread::current_entry() {
            registry::join_session(self.inner.id, me.id, clock::now());
        }
        self.push_on_stack();
    }

    /// The raw result of the window: the last stop's capture, or a snapshot up to now while
    /// running. Decode it with [`Capture::decode`]; an empty capture when the session never
    /// stopped.
    ///
    /// A stopped session's capture holds the chunks its threads recorded until the next stop
    /// replaces it or the session is dropped: they then go back to the recorder's pool.
    pub fn capture(&self) -> Arc<Capture> {
        let _untracked = registry::Untracked::enter();
        let state = self.inner.state();
        match (&state.window, &state.stopped) {
            (Some(window), _) => Arc::new(self.inner.snapshot(window)),
            (None, Some(stopped)) => stopped.capture().clone(),
            (None, None) => Arc::new(Capture::empty()),
        }
    }

    /// The old name of [`Profiler::trace`], which gives a running session's window so far
    /// (a flight recorder's retained window as it is now) as well as a stopped one's.
    #[deprecated(since = "0.1.0", note = "use Profiler::trace, the same trace")]
    pub fn snapshot(&self) -> Arc<Trace> {
        self.trace()
    }

    /// The decoded trace: the last stop's (decoded once, on first use), or a snapshot up to
    /// now while running (scopes still open are then closed at the snapshot time and flagged).
    pub fn trace(&self) -> Arc<Trace> {
        self.observed().0
    }

    /// [`Profiler::trace`], and the observer callbacks that panicked in its window on the
    /// threads the session records (up to now while running).
    fn observed(&self) -> (Arc<Trace>, u64) {
        // Decoding allocates; that is the profiler's work, not the program's.
        let _untracked = registry::Untracked::enter();
        let state = self.inner.state();
        match (&state.window, &state.stopped) {
            (Some(window), _) => {
                let capture = self.inner.snapshot(window);
                let panics = registry::observer_panics(self.inner.id);
                (Arc::new(capture.decode()), panics)
            }
            (None, Some(stopped)) => {
                let trace = stopped.trace.get_or_init(|| {
                    let own = stopped.capture();
                    Arc::new(Trace::from_captures(
                        std::iter::once(&**own).chain(&stopped.collected),
                    ))
                });
                (trace.clone(), state.observer_panics)
            }
            (None, None) => (Arc::new(Trace::empty()), state.observer_panics),
        }
    }

    /// The captures of a stopped streaming session whose trace is not decoded yet and that
    /// has no collector's sessions, and its observer panics: what [`Profiler::table`] and
    /// [`Profiler::report`] sum from the file rather than decode whole. `None` otherwise.
    fn streamed_captures(&self) -> Option<(Vec<Arc<Capture>>, u64)> {
        let state = self.inner.state();
        match (&state.window, &state.stopped) {
            (None, Some(stopped))
                if stopped.streamed.is_some()
                    && stopped.collected.is_empty()
                    && stopped.trace.get().is_none() =>
            {
                Some((vec![stopped.capture().clone()], state.observer_panics))
            }
            _ => None,
        }
    }

    /// Per-name statistics of [`Profiler::trace`], with the window's
    /// [`observer_panics`](Report::observer_panics).
    ///
    /// Of a stopped streaming session ([`ProfilerBuilder::stream_to`]) not decoded yet, the report is
    /// summed from its file chunk by chunk, in memory bounded by its rows rather than by the
    /// file's size, when sums can stand for the spans (no memory tracking, no async calls);
    /// its p50 and p99 are then within 0.2 % of the exact values past 8 Mi scopes
    /// ([`Report::approximate_quantiles`]).
    pub fn report(&self) -> Report {
        let _untracked = registry::Untracked::enter();
        if let Some((captures, observer_panics)) = self.streamed_captures()
            && let Some(summary) = crate::decode::summary::Summary::of(&captures)
        {
            let mut report = Report::from_summary(&summary, false);
            report.observer_panics = observer_panics;
            report.stream_failure = self.stream_failure();
            return report;
        }
        let (trace, observer_panics) = self.observed();
        let mut report = Report::new(&trace);
        report.observer_panics = observer_panics;
        report.stream_failure = self.stream_failure();
        report
    }

    /// Writes [`Profiler::trace`] to the file at `path` in `format`: any of the
    /// [`export`](crate::export) formats ([`chrome::Options`](crate::export::chrome::Options),
    /// [`kineto::Options`](crate::export::kineto::Options),
    /// [`folded::Options`](crate::export::folded::Options), `flamegraph::Options`) or one of
    /// your own ([`Format`](crate::export::Format)). Gzipped when `path` ends in `.gz`. The
    /// file appears only when complete: it is written beside `path` and renamed into place, so
    /// an error never leaves a truncated file (see
    /// [`export::write_file`](crate::export::write_file)).
    ///
    /// ```no_run
    /// use tickscope::export::{chrome, folded};
    ///
    /// let prof = tickscope::Profiler::start();
    /// prof.stop();
    /// prof.write("trace.json", &chrome::Options::new().allocation_instants(true))?;
    /// prof.write("stacks.folded", &folded::Options::new())?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// Of a stopped streaming session ([`ProfilerBuilder::stream_to`]) not decoded yet, a format that
    /// writes captures as they are decoded ([`Format::write_captures`](crate::export::Format::write_captures):
    /// folded stacks, pprof, Chrome JSON, Perfetto) reads the file chunk by chunk, in memory
    /// bounded by its stacks or the scopes open at once rather than the file's size; other
    /// formats decode the trace whole.
    pub fn write(
        &self,
        path: impl AsRef<std::path::Path>,
        format: &(impl crate::export::Format + ?Sized),
    ) -> std::io::Result<()> {
        if let Some((captures, _)) = self.streamed_captures() {
            let captures: Vec<&Capture> = captures.iter().map(|c| &**c).collect();
            return crate::capture::output::atomic_write(path.as_ref(), |out| {
                match format.write_captures(&captures, &mut *out) {
                    Some(result) => result,
                    None => format.write(&self.trace(), out),
                }
            });
        }
        crate::export::write_file(&self.trace(), path, format)
    }

    /// Writes [`Profiler::trace`] as Chrome Trace Event JSON (open it in ui.perfetto.dev or
    /// chrome://tracing), gzipped when `path` ends in `.gz`: shorthand for
    /// [`Profiler::write`] with the default [`chrome::Options`](crate::export::chrome::Options).
    pub fn write_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        self.write(path, &crate::export::chrome::Options::default())
    }

    /// Writes [`Profiler::trace`] as a native Perfetto trace (`trace.pftrace`), for
    /// ui.perfetto.dev and the trace processor, with exact nanosecond times; see
    /// [`export::perfetto`](crate::export::perfetto). Gzipped when `path` ends in `.gz`.
    pub fn write_perfetto(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        self.write(path, &crate::export::perfetto::Options::new())
    }

    /// Writes [`Profiler::trace`] as a pprof profile (`go tool pprof`, Grafana Pyroscope,
    /// speedscope): one sample per distinct stack of scopes, with calls and self time (and
    /// allocations, with memory tracking); see [`export::pprof`](crate::export::pprof).
    /// Gzipped when `path` ends in `.gz`, as pprof files usually are (`profile.pb.gz`).
    pub fn write_pprof(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        self.write(path, &crate::export::pprof::Options::new())
    }

    /// Writes [`Profiler::capture`] to the file at `path` as a capture file (see
    /// [`Capture::write_to`]), to be read back with [`Capture::read`] (by this process, another
    /// one, or the `tickscope` command) and decoded as if live. Gzipped when `path` ends in
    /// `.gz` ([`Capture::read`] reads either); a plain file is already compact, 16 bytes per
    /// record. The file appears only when complete, as for [`Profiler::write`]: written beside
    /// `path` and renamed into place, so an error never leaves a truncated file.
    ///
    /// ```no_run
    /// let prof = tickscope::Profiler::start();
    /// // ... the code to profile ...
    /// prof.stop();
    /// prof.write_capture("run.tscope")?;
    /// let trace = tickscope::Capture::read("run.tscope").unwrap().decode();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_capture(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        let _untracked = registry::Untracked::enter();
        let capture = self.capture();
        let state = self.inner.state();
        let collected = match (&state.window, &state.stopped) {
            (None, Some(stopped)) => stopped.collected.as_slice(),
            _ => &[],
        };
        crate::capture::output::atomic_write(path.as_ref(), |out| {
            capture.write_to(out)?;
            for c in collected {
                c.write_to(out)?;
            }
            Ok(())
        })
    }

    /// The failures of the session's collectors and plug-ins: those that could not be loaded,
    /// and those that failed in the last window (at start, stop or collect: an error, a
    /// panic, bytes that do not read). The session went on without them and kept everything
    /// else; the table's footer lists them too.
    pub fn errors(&self) -> Vec<CollectorError> {
        let state = self.inner.state();
        self.inner
            .load_errors
            .iter()
            .chain(&state.collector_errors)
            .cloned()
            .collect()
    }

    /// A printable table of [`Profiler::trace`], sorted by total time; see [`Table`] for sort
    /// keys, row limits, per-thread rows and the call tree. Its footer counts the window's
    /// [`observer_panics`](Report::observer_panics), if any; in a program built without the
    /// `enabled` feature, it says that nothing was recorded instead of counting threads and
    /// scopes.
    ///
    /// Of a stopped streaming session ([`ProfilerBuilder::stream_to`]) not decoded yet, the table is
    /// made from its file as `tickscope table` makes it ([`Table::from_captures`]): a flat
    /// table is summed chunk by chunk in memory bounded by its rows, not by the file's size.
    pub fn table(&self) -> Table {
        let errors = self.errors().iter().map(ToString::to_string).collect();
        let table = match self.streamed_captures() {
            Some((captures, observer_panics)) => {
                Table::from_shared_captures(captures).with_observer_panics(observer_panics)
            }
            None => {
                let (trace, observer_panics) = self.observed();
                Table::new(trace).with_observer_panics(observer_panics)
            }
        };
        table
            .with_errors(errors)
            .with_stream_failure(self.stream_failure())
            .with_compiled_out(!cfg!(feature = "enabled"))
    }
}

/// `bytes` (a whole number of 64 KiB chunks) in MiB, or KiB below a whole MiB.
fn size(bytes: usize) -> String {
    match bytes % (1 << 20) {
        0 => format!("{} MiB", bytes >> 20),
        _ => format!("{} KiB", bytes >> 10),
    }
}

/// The probe overhead to subtract in this process's sessions: calibrated once, by the first
/// session that compensates; [`Compensation::Unknown`] with the mock clock (exact times).
fn probe_overhead() -> Compensation {
    static OVERHEAD: OnceLock<Compensation> = OnceLock::new();
    if clock::is_mock() {
        return Compensation::Unknown;
    }
    *OVERHEAD.get_or_init(calibrate_overhead)
}

/// Times empty scopes through the real probe, in short sessions of this thread of their own
/// that compensate nothing (observers do not see them): the middle of their durations is the
/// probe's part inside a scope, the middle of the gaps between one's exit and the next one's
/// entry the part outside it (what a child adds to its parent). Each is the mean of the typical
/// values (interruptions left out: [`clock::typical_mean`]), and of [`ROUNDS`] rounds the
/// least: the first ones warm the caches and the core up, and other
/// work on the core only adds time. The part outside includes the switches to a fresh chunk
/// (one per 2 048 scopes), shared among the scopes. About 33 000 scopes, under a millisecond.
fn calibrate_overhead() -> Compensation {
    // On a thread of its own that sessions of all threads leave out: the calibration's scopes
    // are the profiler's, not the program's.
    std::thread::Builder::new()
        .name("tickscope-calibrate".into())
        .spawn(|| {
            if let Some(entry) = thread::current_entry() {
                registry::make_private(entry.id);
            }
            calibrate_here()
        })
        .ok()
        .and_then(|handle| handle.join().ok())
        .unwrap_or(Compensation::Unknown)
}

/// [`calibrate_overhead`] on the calling thread.
fn calibrate_here() -> Compensation {
    let mut least: Option<(u64, u64)> = None;
    for _ in 0..ROUNDS {
        if let Some((inner, outer)) = calibration_round() {
            let (i, o) = least.get_or_insert((inner, outer));
            (*i, *o) = ((*i).min(inner), (*o).min(outer));
        }
    }
    match least {
        Some((inner, outer)) => Compensation::Ticks {
            inner: u32::try_from(inner).unwrap_or(u32::MAX),
            outer: u32::try_from(outer).unwrap_or(u32::MAX),
        },
        // Nothing recorded (a thread tearing down, instrumentation compiled out): nothing
        // known, nothing subtracted.
        None => Compensation::Unknown,
    }
}

/// Rounds of [`calibrate_overhead`].
const ROUNDS: usize = 8;

/// One round of [`calibrate_overhead`]: the probe's parts inside and outside a scope, in
/// 1/[`PROBE_UNIT`](clock::PROBE_UNIT) tick; `None` when nothing was recorded.
fn calibration_round() -> Option<(u64, u64)> {
    /// Scopes of a round: 4 096 fill two chunks, so a round switches chunks twice, as
    /// often as any scope does.
    const SCOPES: usize = 4096;
    static CALLSITE: crate::Callsite =
        crate::record::callsite::Callsite::new("tickscope::calibrate", file!(), line!(), "");
    let session = ProfilerBuilder::new()
        .current_thread()
        .compensate_overhead(false)
        .start();
    for _ in 0..SCOPES {
        let _g = crate::record::scope::ScopeGuard::enter_unobserved(&CALLSITE);
    }
    session.stop();
    let capture = session.capture();
    let (mut inner, mut outer) = (Vec::with_capacity(SCOPES), Vec::with_capacity(SCOPES));
    // Gaps that hold a switch to the next chunk (the entry is stamped after the switch).
    let mut switches = Vec::new();
    let (mut begin, mut end) = (None, None);
    for (n, chunk) in capture.threads.iter().flat_map(|t| &t.chunks).enumerate() {
        for (i, record) in chunk.records().iter().enumerate() {
            match record.kind {
                crate::record::event::RawKind::Begin => {
                    if let Some(end) = end.take() {
                        let gap = record.tick.saturating_sub(end);
                        if n > 0 && i == 0 {
                            switches.push(gap)
                        } else {
                            outer.push(gap)
                        }
                    }
                    begin = Some(record.tick);
                }
                crate::record::event::RawKind::End => {
                    if let Some(begin) = begin.take() {
                        inner.push(record.tick.saturating_sub(begin));
                    }
                    end = Some(record.tick);
                }
                _ => {}
            }
        }
    }
    if inner.is_empty() || outer.is_empty() {
        return None;
    }
    let gap = clock::typical_mean(&mut outer);
    // What the switches cost beyond a plain gap, shared among all the scopes.
    let extra: u64 = switches
        .iter()
        .map(|&s| (s * clock::PROBE_UNIT).saturating_sub(gap))
        .sum();
    let scopes = (outer.len() + switches.len()) as u64;
    Some((clock::typical_mean(&mut inner), gap + extra / scopes))
}

/// Flight recorders that write their window when a thread panics
/// ([`ProfilerBuilder::flight_recorder_dump_on_panic`]).
mod dump {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex, Once, Weak};

    use super::Inner;
    use crate::record::clock::{self, Calibration};
    use crate::record::registry::Untracked;

    static DUMPS: Mutex<Vec<(Weak<Inner>, PathBuf)>> = Mutex::new(Vec::new());
    static HOOK: Once = Once::new();

    /// Dumps `inner`'s window to `path` on panic (while it records), installing the hook once.
    pub(super) fn register(inner: &Arc<Inner>, path: PathBuf) {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                dump_all();
                previous(info);
            }));
        });
        let mut dumps = crate::record::sync::lock(&DUMPS);
        dumps.retain(|(d, _)| d.strong_count() > 0 && !d.ptr_eq(&Arc::downgrade(inner)));
        dumps.push((Arc::downgrade(inner), path));
    }

    /// Writes the window of every flight recorder that asked for it. A lock another thread
    /// holds is not waited for: a panic hook must not hang.
    fn dump_all() {
        let _untracked = Untracked::enter();
        let dumps: Vec<(Arc<Inner>, PathBuf)> = match DUMPS.try_lock() {
            Ok(dumps) => upgrade(&dumps),
            Err(std::sync::TryLockError::Poisoned(p)) => upgrade(&p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        for (inner, path) in dumps {
            let Ok(state) = inner.state.try_lock() else {
                continue;
            };
            let Some(window) = &state.window else {
                continue;
            };
            let capture = inner.capture(window, clock::now(), Calibration::sample());
            drop(state);
            if let Err(e) = write(&capture, &path) {
                eprintln!("tickscope: flight recorder dump on panic: {e}");
            }
        }
    }

    fn upgrade(dumps: &[(Weak<Inner>, PathBuf)]) -> Vec<(Arc<Inner>, PathBuf)> {
        dumps
            .iter()
            .filter_map(|(d, p)| Some((d.upgrade()?, p.clone())))
            .collect()
    }

    /// Writes `capture` to `path`: a Chrome trace for `.json` and `.json.gz`, the HTML report
    /// for `.html` and `.html.gz`, else a capture file.
    fn write(capture: &crate::Capture, path: &Path) -> std::io::Result<()> {
        let name = path.to_string_lossy();
        if name.ends_with(".json") || name.ends_with(".json.gz") {
            let trace = capture.decode();
            crate::export::write_file(&trace, path, &crate::export::chrome::Options::default())
        } else if name.ends_with(".html") || name.ends_with(".html.gz") {
            let trace = capture.decode();
            let report =
                crate::export::html::Options::new().title("tickscope flight recorder dump");
            crate::export::write_file(&trace, path, &report)
        } else {
            crate::capture::output::atomic_write(path, |out| capture.write_to(out).map(drop))
        }
    }
}
