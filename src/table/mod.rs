//! The text table of [`Profiler::table`](crate::Profiler::table): flat, per thread, split by
//! origin or argument, or as a call tree. Formatting only: the rows come from
//! [`Report`](crate::report::Report) and the call tree from the report module.

use std::sync::{Arc, OnceLock};

use crate::capture::Capture;
use crate::decode::pieces::Pieces;
use crate::decode::summary::Summary;
use crate::report::tree::CallTree;
use crate::report::{LiveAtStop, Split, StreamFailure};
use crate::trace::Trace;

#[cfg(test)]
mod async_split_tests;
mod footer;
mod format;
mod grid;
mod output;
mod rows;
mod sort;
#[cfg(test)]
mod tests;

pub(crate) use footer::footer_text;
pub use format::{Format, Unit, format_ns};
pub(crate) use grid::json_string;
pub use grid::{Align, Grid, MAX_CELL_CHARS, csv_record, markdown_grid};
pub use sort::{ParseSortByError, SortBy};

/// A printable table of a session's scopes; build it with
/// [`Profiler::table`](crate::Profiler::table) and adjust it with the builder methods, then
/// print it with `{}`.
///
/// Columns: name, calls, total, total %, self, self %, avg, min, max, p50 and p99. A `*` after
/// a name marks scopes still open at stop.
///
/// # Percentages
///
/// Both percentage columns are shares of one base, named in the footer: the **time in
/// scopes**, summed over every thread, which is every row's self time added up
/// ([`Report::scope_ns`](crate::report::Report::scope_ns); a scope inside another counts once). So:
///
/// - **Self %** (`self / time in scopes`) adds up to 100 over all rows (as PyTorch's
///   "Self CPU %"): where the recorded time went, each instant of a thread counted once.
/// - **Total %** (`total / time in scopes`) is a row's share with its children: 100 for a
///   root scope that holds every recording thread's time in scopes, the share of its
///   subtree for any other. A name that nests in itself (recursion) counts every level and
///   can pass 100. An async call (`#[profile] async fn`) counts its busy time, the time its
///   polls ran, not its wall time (a call that waits is not on a thread while it waits).
/// - With async calls, **Busy %** is a row's busy time as a share of its own total.
///
/// The footer says `Total % and Self %: of 100 ns in scopes, all threads (every row's Self
/// added up)`. The call tree's columns share the same base (every node's self time added
/// up). A [`Table::limit`] leaves the base as it is (the hidden rows still count), and says
/// below the table how many rows it hid (`2 rows hidden by the limit of 2`).
///
/// When the session tracked memory, five more columns: bytes allocated (child scopes
/// included), bytes allocated by the scope itself, allocation count, bytes freed and the
/// largest call's peak; and below the table, the memory live at stop (allocated in the window
/// and not freed) by allocating scope ([`LiveAtStop`]).
///
/// The footer gives the wall time, threads, scopes and dropped events, the base of the
/// percentages and the rows the limit hid, and for a table made by
/// [`Profiler::table`](crate::Profiler::table), the observer callbacks that panicked in the
/// window ([`Report::observer_panics`](crate::report::Report::observer_panics)) if there were any, and a streaming session's stream
/// that failed, with the events lost ([`Report::stream_failure`](crate::report::Report::stream_failure): `Stream failed:
/// /data/run.tscope: cannot write: No space left on device (os error 28); 5120 events lost
/// (in neither the file nor memory)`). A line states the overhead
/// compensation applied ([`Trace::compensation`]: `Overhead compensation: 8.4 ns per scope +
/// 11.2 ns per child scope subtracted`, or `off`); a trace that says nothing about it (the mock
/// clock, whose times are exact) has no such line. With memory tracked, a line says which
/// [`MemoryMode`](crate::record::memory::MemoryMode) produced the memory columns (`Memory: counted per scope …` or
/// `Memory: timeline …`). A clock other than the CPU's invariant counter is named
/// (`Clock: OS monotonic clock …`, see [`ClockSource`](crate::record::clock::ClockSource)). A trace of a session salvaged from a
/// file cut short ([`Trace::salvage`]) has a line `Salvaged: 1 session cut short (no footer):
/// 6416 bytes lost at the cut, 2 scopes cut open (*)`, and the count of declared threads left
/// with no record when there are some.
///
/// A trace of several processes ([`Trace::from_captures`]) sums each name over every process;
/// split by thread, a thread is named after its process
/// ([`Trace::process_label`]: `server 4242/main`), and the footer counts the processes too.
///
/// Rows split one way at a time: by thread ([`Table::by_thread`]), else by origin
/// ([`Table::by_origin`]), else by an argument ([`Table::by_arg`]); the call tree
/// ([`Table::tree`]) splits by thread only.
#[must_use]
#[derive(Clone, Debug)]
pub struct Table {
    source: Source,
    sort: SortBy,
    limit: Option<usize>,
    by_thread: bool,
    by_origin: bool,
    /// The argument whose values split the rows.
    by_arg: Option<String>,
    tree: bool,
    /// Shown in the footer when not 0.
    observer_panics: u64,
    /// Collector failures, a footer line each.
    errors: Vec<String>,
    /// A streaming session's failed stream, a footer line.
    stream_failure: Option<StreamFailure>,
    /// The unit of the durations in the rows.
    unit: Unit,
    /// A session's table in a build without the `enabled` feature: the footer says so
    /// instead of counting threads and scopes.
    compiled_out: bool,
}

/// The version of the table's JSON (`docs/REPORT-SCHEMA.md`): 2 since the rows' `percent`
/// became `total_percent` and `self_percent`, shares of the time in scopes.
const TABLE_SCHEMA: u32 = 2;

/// The footer of a session's table in a build without the `enabled` feature.
const COMPILED_OUT: &str =
    "tickscope was built without its `enabled` feature: nothing was recorded";
/// The same, below the counts, when collectors recorded what the table shows.
const COMPILED_OUT_COLLECTORS: &str =
    "tickscope was built without its `enabled` feature: only collectors recorded";

/// What a table is made of.
#[derive(Clone, Debug)]
enum Source {
    /// A decoded trace.
    Trace(Arc<Trace>),
    /// Captures, summed or decoded when the table is printed ([`Table::from_captures`]).
    Captures(Arc<Captures>),
}

/// Captures of [`Table::from_captures`], with what was made of them so far.
#[derive(Debug)]
struct Captures {
    captures: Vec<Arc<Capture>>,
    /// Their spans summed ([`Summary::of`]); `None` inside when sums cannot stand for them.
    summary: OnceLock<Option<Summary>>,
    /// Their trace ([`Trace::from_captures`]).
    trace: OnceLock<Trace>,
}

/// A table ready to print.
struct Rows<'a> {
    headers: Vec<&'a str>,
    rows: Vec<Vec<String>>,
    /// Columns aligned left (names, threads, labels); the rest are numbers, aligned right.
    left: usize,
    /// Calls still open at stop among the rows shown.
    open: u64,
    live: Vec<LiveAtStop>,
    /// The base of the percentages: the time in scopes, every row's self time added up.
    scope_ns: u64,
    /// Rows (or call tree nodes) left out by the limit.
    hidden: usize,
    /// The rows have the "Busy" and "Busy %" columns of async calls.
    busy: bool,
}

impl Table {
    /// A table of `trace`, sorted by total time.
    pub fn new(trace: Arc<Trace>) -> Self {
        Self::with_source(Source::Trace(trace))
    }

    /// The table of the trace `captures` decode to, as
    /// `Table::new(Arc::new(Trace::from_captures(&captures)))` gives (the same text), made
    /// when printed without keeping the trace's spans when it can: a flat table, by name or
    /// by thread, is summed straight from the records, which takes a fraction of the time and
    /// memory of the whole trace (async calls matched as the threads are read again). A call
    /// tree and rows split by origin or by an argument take the spans, decoded again a piece
    /// at a time (in memory bounded by the scopes open at once, and a few words per link);
    /// split so, async calls are matched again, each split by the label of its latest poll
    /// that has one. What cannot be read so (a `tracing` span's `follows_from` of a span
    /// entered on another thread, async marks out of order) needs every span: the trace is
    /// then decoded (once per table).
    ///
    /// What `tickscope table` prints.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tickscope::{Capture, Profiler, scope, table::Table, trace::Trace};
    ///
    /// let prof = Profiler::builder().current_thread().start();
    /// for _ in 0..3 {
    ///     let _g = scope!("step");
    /// }
    /// prof.stop();
    /// let mut file = Vec::new();
    /// prof.capture().write_to(&mut file)?;
    /// let captures = Capture::from_bytes(&file).unwrap();
    /// let decoded = Table::new(Arc::new(Trace::from_captures(&captures))).to_string();
    /// assert_eq!(Table::from_captures(captures).to_string(), decoded);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_captures(captures: Vec<Capture>) -> Self {
        Self::from_shared_captures(captures.into_iter().map(Arc::new).collect())
    }

    /// [`Table::from_captures`] of captures shared with others (a streaming session's, read
    /// back from its file).
    pub(crate) fn from_shared_captures(captures: Vec<Arc<Capture>>) -> Self {
        Self::with_source(Source::Captures(Arc::new(Captures {
            captures,
            summary: OnceLock::new(),
            trace: OnceLock::new(),
        })))
    }

    fn with_source(source: Source) -> Self {
        Self {
            source,
            sort: SortBy::Total,
            limit: None,
            by_thread: false,
            by_origin: false,
            by_arg: None,
            tree: false,
            observer_panics: 0,
            errors: Vec::new(),
            stream_failure: None,
            compiled_out: false,
            unit: Unit::Auto,
        }
    }

    /// Writes the durations of the rows in `unit` (text and Markdown; JSON and CSV are always
    /// in ns). By default [`Unit::Auto`]: a unit per value.
    pub fn unit(mut self, unit: Unit) -> Self {
        self.unit = unit;
        self
    }

    /// Counts `panics` observer callback panics in the footer (when not 0).
    pub(crate) fn with_observer_panics(mut self, panics: u64) -> Self {
        self.observer_panics = panics;
        self
    }

    /// Lists `errors` (collector failures) in the footer, a line each.
    pub(crate) fn with_errors(mut self, errors: Vec<String>) -> Self {
        self.errors = errors;
        self
    }

    /// Says in the footer, instead of its counts, that nothing was recorded because the
    /// program was built without the `enabled` feature (a session's table in such a build).
    pub(crate) fn with_compiled_out(mut self, compiled_out: bool) -> Self {
        self.compiled_out = compiled_out;
        self
    }

    /// States `failure` (a streaming session's failed stream) in the footer.
    pub(crate) fn with_stream_failure(mut self, failure: Option<StreamFailure>) -> Self {
        self.stream_failure = failure;
        self
    }

    /// Sorts rows by `column`.
    pub fn sort_by(mut self, column: SortBy) -> Self {
        self.sort = column;
        self
    }

    /// Shows at most `rows` rows (per thread when split by thread).
    pub fn limit(mut self, rows: usize) -> Self {
        self.limit = Some(rows);
        self
    }

    /// One row per (thread, name) instead of one per name.
    pub fn by_thread(mut self, split: bool) -> Self {
        self.by_thread = split;
        self
    }

    /// Splits the rows of scopes that followed from a [`Link`](crate::Link) by the scope the
    /// link was captured in, shown in a "Caused by" column (see
    /// [`Report::by_origin`](crate::report::Report::by_origin)). Ignored when split by thread.
    pub fn by_origin(mut self, split: bool) -> Self {
        self.by_origin = split;
        self
    }

    /// Splits the rows of scopes that recorded argument `key` (`scope!("name", key = value)`)
    /// by its value, shown in a column headed `key` (see [`Report::by_arg`](crate::report::Report::by_arg)); calls without
    /// the argument keep one row per name, with an empty cell. Ignored when split by thread or
    /// by origin.
    ///
    /// ```
    /// use tickscope::{Profiler, scope};
    ///
    /// let prof = Profiler::builder().current_thread().start();
    /// for bytes in [512u32, 4096, 512] {
    ///     let _g = scope!("read", bytes = bytes);
    /// }
    /// prof.stop();
    /// let table = prof.table().by_arg("bytes").to_string();
    /// assert!(table.starts_with("Name  bytes  Calls"));
    /// assert_eq!(table.lines().filter(|l| l.starts_with("read")).count(), 2);
    /// ```
    pub fn by_arg(mut self, key: impl Into<String>) -> Self {
        self.by_arg = Some(key.into());
        self
    }

    /// Shows the call tree: each distinct call path once, indented under its caller, with its
    /// calls, total and self time. Children sort by total time. The polls of an async call
    /// appear where they ran, marked `(poll)`, and count polls rather than calls.
    pub fn tree(mut self, tree: bool) -> Self {
        self.tree = tree;
        self
    }

    /// How the flat table splits a name's rows beyond threads: the column after the name.
    fn split(&self) -> Split<'_> {
        match &self.by_arg {
            _ if self.by_thread => Split::None,
            _ if self.by_origin => Split::Origin,
            Some(key) => Split::Arg(key),
            None => Split::None,
        }
    }

    /// The trace to print, and its summary when the table is made from it: what the table's
    /// settings need.
    fn view(&self) -> (&Trace, Option<&Summary>) {
        match &self.source {
            Source::Trace(trace) => (trace, None),
            Source::Captures(c) => {
                // A flat table with no split but by thread needs only the sums. The call tree
                // and a table split by argument or by origin take the spans piece by piece
                // ([`Table::call_tree`], [`Table::report`]), each follower labelled with the
                // callsite of its origin that the first pass found. Summed async calls stand
                // for a flat table's rows (by thread or not) and the call tree (polls where
                // they ran); the splits match them again, each labelled by its polls, which
                // needs the kinds of the `tracing` enters' slices.
                if let Some(summary) = c.summary.get_or_init(|| Summary::of(&c.captures))
                    && !(summary.streamed_calls
                        && summary.tracing_unresolved
                        && !self.tree
                        && self.split() != Split::None)
                {
                    return (&summary.trace, Some(summary));
                }
                let trace = c
                    .trace
                    .get_or_init(|| Trace::from_captures(c.captures.iter().map(|c| &**c)));
                (trace, None)
            }
        }
    }

    /// True when the table's captures were decoded whole ([`Trace::from_captures`]).
    #[cfg(test)]
    fn decoded_whole(&self) -> bool {
        matches!(&self.source, Source::Captures(c) if c.trace.get().is_some())
    }

    /// The call tree of `trace`; of the trace without spans that [`Table::view`] gives for
    /// captures, from their spans decoded piece by piece.
    fn call_tree(&self, trace: &Trace) -> CallTree {
        if let Source::Captures(c) = &self.source
            && let Some(Some(summary)) = c.summary.get()
            && std::ptr::eq(trace, &summary.trace)
        {
            let captures: Vec<&Capture> = c.captures.iter().map(|c| &**c).collect();
            if let Some(pieces) = Pieces::of_summary_with_polls(&captures, summary) {
                return CallTree::from_source(&pieces, self.by_thread);
            }
        }
        CallTree::new(trace, self.by_thread)
    }
}
