//! Schedules: which steps of a long-running program a session records, and what it does with
//! each recorded window (PyTorch's `schedule` and `on_trace_ready`).
//!
//! A program that works in steps (training iterations, frames, request batches) calls
//! [`Profiler::step`](crate::Profiler::step) once per step. With a [`Schedule`]
//! ([`ProfilerBuilder::schedule`](crate::ProfilerBuilder::schedule)) the session records only some steps: after
//! `skip_first` steps, cycles of `wait` steps with nothing recorded, `warmup` steps recorded and
//! thrown away (caches, buffers and the recorder's chunks get warm), and `active` steps
//! recorded; `repeat` cycles (0: until stop). At the end of each active window the callback
//! given to [`ProfilerBuilder::on_trace_ready`](crate::ProfilerBuilder::on_trace_ready) gets the window
//! ([`ScheduledWindow`]): its trace, report and capture, and helpers that write them to files
//! named by the window's index ([`chrome_trace_handler`], [`capture_handler`]).
//!
//! While a step is recorded, it is a scope named `ProfilerStep#N` (N: the step's number, from
//! 0) on the thread that calls `step`, as in PyTorch and Kineto: HolisticTraceAnalysis reads
//! iterations from them.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use tickscope::schedule::Schedule;
//!
//! let windows = Arc::new(Mutex::new(Vec::new()));
//! let seen = windows.clone();
//! let prof = tickscope::Profiler::builder()
//!     .current_thread()
//!     .schedule(Schedule::new(1, 1, 2).repeat(2))
//!     .on_trace_ready(move |window| {
//!         let report = window.report();
//!         seen.lock().unwrap().push((window.steps(), report.get("work").unwrap().calls));
//!         Ok(())
//!     })
//!     .start();
//! for _ in 0..10 {
//!     let _g = tickscope::scope!("work");
//!     drop(_g);
//!     prof.step()?;
//! }
//! prof.stop();
//! // Each cycle: step 0 waits, step 1 warms up, steps 2 and 3 are recorded.
//! assert_eq!(*windows.lock().unwrap(), [(2..4, 2), (6..8, 2)]);
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::capture::Capture;
use crate::report::Report;
use crate::trace::Trace;

/// Which steps a session records: `skip_first` steps, then cycles of `wait` steps (nothing
/// recorded), `warmup` steps (recorded, then thrown away) and `active` steps (recorded and
/// handed to [`ProfilerBuilder::on_trace_ready`](crate::ProfilerBuilder::on_trace_ready)), `repeat` cycles (0:
/// until the session stops). A schedule with no active step records nothing.
///
/// ```
/// use tickscope::schedule::{Action, Schedule};
///
/// let schedule = Schedule::new(1, 1, 2).skip_first(3).repeat(1);
/// let actions: Vec<Action> = (0..9).map(|step| schedule.action(step)).collect();
/// use Action::*;
/// assert_eq!(
///     actions,
///     [Idle, Idle, Idle, Idle, Warmup, Record, RecordAndHand, Idle, Idle]
/// );
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// Steps at the start that are not part of any cycle.
    pub skip_first: u64,
    /// Steps of each cycle with nothing recorded.
    pub wait: u64,
    /// Steps of each cycle recorded and thrown away, before the active ones.
    pub warmup: u64,
    /// Steps of each cycle recorded and handed over.
    pub active: u64,
    /// Cycles, then nothing; 0: cycles until the session stops.
    pub repeat: u64,
}

/// What a [`Schedule`] does in a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing is recorded.
    Idle,
    /// Recorded, to be thrown away when the active steps begin.
    Warmup,
    /// Recorded.
    Record,
    /// Recorded, the last active step of its cycle: the window is handed over when it ends.
    RecordAndHand,
}

impl Action {
    /// The session records in this step.
    pub fn records(self) -> bool {
        self != Self::Idle
    }
}

impl Schedule {
    /// Cycles of `wait`, `warmup` and `active` steps, from the first step, until the session
    /// stops.
    pub const fn new(wait: u64, warmup: u64, active: u64) -> Self {
        Self {
            skip_first: 0,
            wait,
            warmup,
            active,
            repeat: 0,
        }
    }

    /// The same, after `steps` steps that belong to no cycle.
    pub const fn skip_first(mut self, steps: u64) -> Self {
        self.skip_first = steps;
        self
    }

    /// The same, for `cycles` cycles only (0: until stop).
    pub const fn repeat(mut self, cycles: u64) -> Self {
        self.repeat = cycles;
        self
    }

    /// What the schedule does in step `step` (the first step is 0).
    pub fn action(&self, step: u64) -> Action {
        let Some(step) = step.checked_sub(self.skip_first) else {
            return Action::Idle;
        };
        let cycle = self
            .wait
            .saturating_add(self.warmup)
            .saturating_add(self.active);
        if self.active == 0 || (self.repeat > 0 && step / cycle >= self.repeat) {
            return Action::Idle;
        }
        let at = step % cycle;
        if at < self.wait {
            Action::Idle
        } else if at < self.wait + self.warmup {
            Action::Warmup
        } else if at + 1 < cycle {
            Action::Record
        } else {
            Action::RecordAndHand
        }
    }
}

/// What [`ProfilerBuilder::on_trace_ready`](crate::ProfilerBuilder::on_trace_ready) is given: what fails in it
/// is returned by the [`Profiler::step`](crate::Profiler::step) (or
/// [`Profiler::try_stop`](crate::Profiler::try_stop)) that ended the window.
pub type OnTraceReady = dyn Fn(&ScheduledWindow) -> io::Result<()> + Send + Sync;

/// The callback of a scheduled session, shared by its handles.
#[derive(Clone)]
pub(crate) struct Callback(pub(crate) Arc<OnTraceReady>);

impl fmt::Debug for Callback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Callback(..)")
    }
}

/// One recorded window of a scheduled session: its active steps (all of them, or those up to
/// the stop that cut it short), decoded on first use.
#[derive(Debug)]
pub struct ScheduledWindow {
    index: u64,
    steps: Range<u64>,
    capture: Arc<Capture>,
    trace: OnceLock<Arc<Trace>>,
}

impl ScheduledWindow {
    pub(crate) fn new(index: u64, steps: Range<u64>, capture: Arc<Capture>) -> Self {
        Self {
            index,
            steps,
            capture,
            trace: OnceLock::new(),
        }
    }

    /// The window's number: 0 for the first one handed over, then 1, 2, …
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The steps recorded (the step numbers [`Profiler::step`](crate::Profiler::step) counts,
    /// from 0).
    pub fn steps(&self) -> Range<u64> {
        self.steps.clone()
    }

    /// The window's capture.
    pub fn capture(&self) -> &Arc<Capture> {
        &self.capture
    }

    /// The window's trace, decoded once.
    pub fn trace(&self) -> Arc<Trace> {
        self.trace
            .get_or_init(|| Arc::new(self.capture.decode()))
            .clone()
    }

    /// Per-name statistics of the window.
    pub fn report(&self) -> Report {
        Report::new(&self.trace())
    }

    /// Writes the window as Chrome JSON to `path` (gzipped for `.gz`; atomically, as
    /// [`Profiler::write_chrome_trace`](crate::Profiler::write_chrome_trace)).
    pub fn write_chrome_trace(&self, path: impl AsRef<Path>) -> io::Result<()> {
        crate::export::write_file(
            &self.trace(),
            path,
            &crate::export::chrome::Options::default(),
        )
    }

    /// Writes the window to `path` in `format` (any [`Format`](crate::export::Format): the
    /// HTML report, folded stacks, …; gzipped for `.gz`, atomically, as
    /// [`Profiler::write`](crate::Profiler::write)).
    pub fn write(
        &self,
        path: impl AsRef<Path>,
        format: &(impl crate::export::Format + ?Sized),
    ) -> io::Result<()> {
        crate::export::write_file(&self.trace(), path, format)
    }

    /// Writes the window's capture file to `path` (as
    /// [`Profiler::write_capture`](crate::Profiler::write_capture)).
    pub fn write_capture(&self, path: impl AsRef<Path>) -> io::Result<()> {
        crate::capture::output::atomic_write(path.as_ref(), |out| {
            self.capture.write_to(out).map(drop)
        })
    }
}

/// A callback for [`ProfilerBuilder::on_trace_ready`](crate::ProfilerBuilder::on_trace_ready) that writes each
/// window as Chrome JSON to `dir/{prefix}window-{index}.json` (PyTorch's
/// `tensorboard_trace_handler`); the directory is created if needed.
pub fn chrome_trace_handler(
    dir: impl Into<PathBuf>,
    prefix: &str,
) -> impl Fn(&ScheduledWindow) -> io::Result<()> + Send + Sync + 'static {
    per_window(dir.into(), prefix, "json", |window, path| {
        window.write_chrome_trace(path)
    })
}

/// A callback for [`ProfilerBuilder::on_trace_ready`](crate::ProfilerBuilder::on_trace_ready) that writes each
/// window's capture to `dir/{prefix}window-{index}.tscope`; the directory is created if
/// needed.
pub fn capture_handler(
    dir: impl Into<PathBuf>,
    prefix: &str,
) -> impl Fn(&ScheduledWindow) -> io::Result<()> + Send + Sync + 'static {
    per_window(dir.into(), prefix, "tscope", |window, path| {
        window.write_capture(path)
    })
}

/// A callback for [`ProfilerBuilder::on_trace_ready`](crate::ProfilerBuilder::on_trace_ready) that writes each
/// window as the single-file HTML report ([`export::html`](crate::export::html)) to
/// `dir/{prefix}window-{index}.html`; the directory is created if needed.
pub fn html_report_handler(
    dir: impl Into<PathBuf>,
    prefix: &str,
) -> impl Fn(&ScheduledWindow) -> io::Result<()> + Send + Sync + 'static {
    per_window(dir.into(), prefix, "html", |window, path| {
        let title = format!(
            "tickscope window {} (steps {:?})",
            window.index, window.steps
        );
        window.write(path, &crate::export::html::Options::new().title(title))
    })
}

/// A callback that writes each window with `write` to `dir/{prefix}window-{index}.{extension}`.
fn per_window(
    dir: PathBuf,
    prefix: &str,
    extension: &'static str,
    write: fn(&ScheduledWindow, PathBuf) -> io::Result<()>,
) -> impl Fn(&ScheduledWindow) -> io::Result<()> + Send + Sync + 'static {
    let prefix = prefix.to_owned();
    move |window| {
        std::fs::create_dir_all(&dir)?;
        write(
            window,
            dir.join(format!("{prefix}window-{}.{extension}", window.index)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{Action, Schedule};

    #[test]
    fn actions_follow_pytorch_schedules() {
        use Action::*;
        let run = |s: Schedule, n: u64| (0..n).map(|i| s.action(i)).collect::<Vec<_>>();
        assert_eq!(
            run(Schedule::new(0, 0, 1), 3),
            [RecordAndHand, RecordAndHand, RecordAndHand]
        );
        assert_eq!(
            run(Schedule::new(2, 0, 2).repeat(2), 10),
            [
                Idle,
                Idle,
                Record,
                RecordAndHand,
                Idle,
                Idle,
                Record,
                RecordAndHand,
                Idle,
                Idle
            ]
        );
        assert_eq!(
            run(Schedule::new(0, 2, 1).skip_first(1), 5),
            [Idle, Warmup, Warmup, RecordAndHand, Warmup]
        );
        // No active step: nothing ever, whatever else.
        assert_eq!(run(Schedule::new(1, 1, 0), 4), [Idle; 4]);
        assert_eq!(run(Schedule::default(), 2), [Idle; 2]);
        // Huge numbers neither overflow nor panic.
        let huge = Schedule::new(u64::MAX, u64::MAX, u64::MAX).skip_first(u64::MAX);
        assert_eq!(huge.action(u64::MAX), Idle);
        assert_eq!(Schedule::new(u64::MAX, 0, 1).action(u64::MAX), Idle);
    }
}
