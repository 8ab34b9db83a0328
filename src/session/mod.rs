//! [`Profiler`] sessions: start, stop, restart, nesting and thread scopes.
//!
//! This file holds a session's state; its behaviour is in the files beside it: `builder`
//! (the options, [`ProfilerBuilder`]), `lifecycle` (start, stop, restart, joining threads),
//! `steps` ([`Profiler::step`] and schedules), `results` (capture, trace, report, table,
//! files), `listen` (attaches), `calibrate` (the probe overhead) and `dump` (a flight
//! recorder's window written on panic).

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crate::capture::stream::{self, Stream};
use crate::capture::{self, Capture, Handover, StreamStats};
use crate::collector::{CollectorError, Slot};
use crate::record::clock::{self, Calibration, Compensation};
use crate::record::flight;
use crate::record::pool;
use crate::record::registry::{self, Members};
use crate::record::sync::lock;
use crate::record::thread;
use crate::trace::Trace;

mod builder;
mod calibrate;
mod dump;
mod lifecycle;
mod listen;
#[cfg(all(test, feature = "otlp"))]
mod otlp_recorded_tests;
#[cfg(test)]
mod parts_tests;
mod results;
mod steps;

#[allow(deprecated)]
pub use builder::Config;
pub use builder::ProfilerBuilder;
#[cfg(all(unix, feature = "enabled"))]
pub(crate) use listen::{Recording, WeakProfiler};

/// The control socket of a session that listens (`attach::server::Listener`, opened through
/// the crate root's [`open_control_socket`](crate::open_control_socket) so that this file,
/// below the attach front end in the pipeline, does not refer to it): dropping it closes the
/// socket and stops its thread.
type Listener = Box<dyn std::fmt::Debug + Send + Sync>;

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
