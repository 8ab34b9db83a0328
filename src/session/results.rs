//! What a session recorded: its capture, trace, report, table and files.

use std::sync::Arc;

use crate::capture::{Capture, StreamStats};
use crate::collector::CollectorError;
use crate::record::flight;
use crate::record::registry;
use crate::report::{Report, StreamFailure};
use crate::table::Table;
use crate::trace::Trace;

use super::Profiler;
#[cfg(doc)]
use super::ProfilerBuilder;

impl Profiler {
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
    /// file's size, when sums can stand for the spans (`#[profile] async fn` calls and
    /// `tracing` spans entered several times or on several threads summed as the file is
    /// read again, memory tracked or not);
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
    /// folded stacks, pprof, Chrome JSON, Kineto JSON, Perfetto, the HTML report) reads the file chunk by chunk, in memory
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
