//! Starting, stopping and restarting a session, and joining threads to it.

use std::sync::{Arc, OnceLock, Weak};

use crate::capture::stream::Stream;
use crate::record::clock::{self, Calibration, Compensation};
use crate::record::flight;
use crate::record::pool;
use crate::record::registry::{self, Members};
use crate::record::sync::lock;
use crate::record::thread;
use crate::schedule::Action;

use super::calibrate::probe_overhead;
use super::dump;
use super::{Profiler, ProfilerBuilder, STACK, Stopped, Threads, Window};

/// The most a window whose stream cannot start keeps in memory instead: 64 MiB (a stream's
/// memory larger than that, or too large to be allowed, is not allocated for a failed start).
const MAX_FALLBACK_WINDOW: usize = 64 << 20;

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

    /// Says on stderr, in one line, why the window just started could not stream, and what
    /// it does instead.
    pub(super) fn warn_stream_fallback(&self) {
        let state = self.inner.state();
        if let (Some(error), Some(instead)) = (&state.stream_error, &state.stream_fallback) {
            eprintln!("tickscope: {error}; {instead}");
        }
    }

    /// [`Profiler::restart`], failing when a streaming session's file cannot be opened.
    ///
    /// With `fallback`, a window whose stream cannot start keeps a bounded amount in memory
    /// instead (see [`ProfilerBuilder::start`]); without, the caller drops the session on the error.
    pub(super) fn try_restart(&self, fallback: bool) -> std::io::Result<()> {
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

    /// Stops recording and collects the window's events; does nothing if already stopped.
    pub(super) fn stop_window(&self) {
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
}

/// `bytes` (a whole number of 32 KiB chunks) in MiB, or KiB below a whole MiB.
fn size(bytes: usize) -> String {
    match bytes % (1 << 20) {
        0 => format!("{} MiB", bytes >> 20),
        _ => format!("{} KiB", bytes >> 10),
    }
}
