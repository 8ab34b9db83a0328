//! [`Profiler`] sessions: start, stop, restart, nesting and thread scopes.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crate::capture::{self, Capture, Handover};
use crate::record::clock::{self, Calibration};
use crate::record::pool;
use crate::record::registry::{self, Members};
use crate::record::sync::lock;
use crate::record::thread;
use crate::report::Report;
use crate::table::Table;
use crate::trace::Trace;

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

/// Options for a session; start it with [`Config::start`].
#[must_use]
#[derive(Clone, Debug, Default)]
pub struct Config {
    threads: Threads,
    memory: bool,
}

impl Config {
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
    pub fn track_memory(mut self, on: bool) -> Self {
        self.memory = on;
        self
    }

    /// Shorthand for `threads(Threads::Joined)`: record the current thread (and threads that
    /// join explicitly) only.
    pub fn current_thread(self) -> Self {
        self.threads(Threads::Joined)
    }

    /// Starts a session with these options.
    #[must_use = "the session records until it is stopped or dropped: keep it in a variable"]
    pub fn start(self) -> Profiler {
        let inner = Arc::new(Inner {
            id: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            config: self,
            state: Mutex::new(State {
                window: None,
                members: None,
                stopped: None,
                observer_panics: 0,
            }),
        });
        let profiler = Profiler { inner };
        profiler.restart();
        profiler
    }
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Sessions started or joined on this thread, innermost last (TVM's profiler stack).
    static STACK: RefCell<Vec<Weak<Inner>>> = const { RefCell::new(Vec::new()) };
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
    config: Config,
    state: Mutex<State>,
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
}

#[derive(Debug)]
struct Stopped {
    capture: Arc<Capture>,
    trace: OnceLock<Arc<Trace>>,
}

#[derive(Debug)]
struct Window {
    start_tick: u64,
    calibration: Calibration,
    dropped_at_start: u64,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The window's capture up to `end_tick`: the chunks of the threads it records, handed
    /// over as they are.
    fn capture(&self, window: &Window, end_tick: u64, stop: Calibration) -> Capture {
        let threads = registry::take_chunks(self.id)
            .into_iter()
            .map(|t| Handover {
                id: t.id,
                name: t.name,
                from_tick: t.from_tick,
                chunks: t.chunks,
            })
            .collect();
        let window = capture::Window {
            start_tick: window.start_tick,
            end_tick,
            start: window.calibration.clone(),
            stop,
            memory: self.config.memory,
            dropped_events: registry::dropped_events() - window.dropped_at_start,
        };
        Capture::new(window, threads)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let running = self.state.get_mut().map_or(true, |s| s.window.is_some());
        if running {
            registry::stop_recording(self.id);
            registry::finish_session(self.id);
        }
    }
}

impl Profiler {
    /// Starts a session that records every thread.
    #[must_use = "the session records until it is stopped or dropped: keep it in a variable"]
    pub fn start() -> Self {
        Config::new().start()
    }

    /// Options for a new session.
    pub fn builder() -> Config {
        Config::new()
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
    /// replaces it. Does nothing if the session is running.
    pub fn restart(&self) {
        let mut state = self.inner.state();
        if state.window.is_some() {
            return;
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
        let calibration = Calibration::sample();
        let dropped_at_start = registry::dropped_events();
        let start_tick = clock::now();
        registry::add_session(self.inner.id, start_tick, members, self.inner.config.memory);
        state.window = Some(Window {
            start_tick,
            calibration,
            dropped_at_start,
        });
        drop(state);
        self.push_on_stack();
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

    /// Stops recording and collects the window's events. Does nothing if already stopped.
    pub fn stop(&self) {
        let _untracked = registry::Untracked::enter();
        let mut state = self.inner.state();
        let Some(window) = state.window.take() else {
            return;
        };
        let end_tick = clock::now();
        let calibration = Calibration::sample();
        registry::stop_recording(self.inner.id);
        let capture = self.inner.capture(&window, end_tick, calibration);
        state.observer_panics = registry::observer_panics(self.inner.id);
        state.members = registry::finish_session(self.inner.id);
        state.stopped = Some(Stopped {
            capture: Arc::new(capture),
            trace: OnceLock::new(),
        });
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
            (Some(window), _) => Arc::new(self.inner.capture(
                window,
                clock::now(),
                Calibration::sample(),
            )),
            (None, Some(stopped)) => stopped.capture.clone(),
            (None, None) => Arc::new(Capture::empty()),
        }
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
                let capture = self
                    .inner
                    .capture(window, clock::now(), Calibration::sample());
                let panics = registry::observer_panics(self.inner.id);
                (Arc::new(capture.decode()), panics)
            }
            (None, Some(stopped)) => {
                let trace = stopped
                    .trace
                    .get_or_init(|| Arc::new(stopped.capture.decode()));
                (trace.clone(), state.observer_panics)
            }
            (None, None) => (Arc::new(Trace::empty()), state.observer_panics),
        }
    }

    /// Per-name statistics of [`Profiler::trace`], with the window's
    /// [`observer_panics`](Report::observer_panics).
    pub fn report(&self) -> Report {
        let _untracked = registry::Untracked::enter();
        let (trace, observer_panics) = self.observed();
        let mut report = Report::new(&trace);
        report.observer_panics = observer_panics;
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
    pub fn write(
        &self,
        path: impl AsRef<std::path::Path>,
        format: &(impl crate::export::Format + ?Sized),
    ) -> std::io::Result<()> {
        crate::export::write_file(&self.trace(), path, format)
    }

    /// Writes [`Profiler::trace`] as Chrome Trace Event JSON (open it in ui.perfetto.dev or
    /// chrome://tracing), gzipped when `path` ends in `.gz`: shorthand for
    /// [`Profiler::write`] with the default [`chrome::Options`](crate::export::chrome::Options).
    pub fn write_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<()> {
        self.write(path, &crate::export::chrome::Options::default())
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
        let capture = self.capture();
        crate::export::write_file_with(path.as_ref(), |out| capture.write_to(out).map(drop))
    }

    /// A printable table of [`Profiler::trace`], sorted by total time; see [`Table`] for sort
    /// keys, row limits, per-thread rows and the call tree. Its footer counts the window's
    /// [`observer_panics`](Report::observer_panics), if any.
    pub fn table(&self) -> Table {
        let (trace, observer_panics) = self.observed();
        Table::new(trace).with_observer_panics(observer_panics)
    }
}
