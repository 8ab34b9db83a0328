//! What a [`Trace`] adds up to, the data behind [`Profiler::table`](crate::Profiler::table):
//! per-name statistics ([`Report`]), the memory still live at stop ([`LiveAtStop`]) and the
//! call tree the table draws.

mod build;
pub mod compare;
mod counters;
mod live;
mod pieces;
pub(crate) mod tree;

use std::cmp::{Ordering, Reverse};

use crate::trace::MemoryStats;
#[cfg(doc)]
use crate::trace::Trace;

pub use compare::{Diff, DiffRow, Metric, Verdict};
pub use counters::{CounterStats, ValueStats};
pub use live::LiveAtStop;

/// Statistics of every scope with one name (and, in a per-thread report, on one thread).
///
/// In a trace of several processes ([`Trace::from_captures`]) a row sums the scopes of its
/// name in every process; a per-thread row is one thread of one process.
///
/// A call of a `#[profile] async fn` counts once, with its wall time from first poll to
/// completion as its duration and the time its own polls ran (minus the scopes they opened) as
/// its self time; in a per-thread report it belongs to the thread of its first poll.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ScopeStats {
    /// The scope name.
    pub name: &'static str,
    /// The thread, in a per-thread report ([`Report::by_thread`]); `None` otherwise.
    pub thread: Option<u64>,
    /// The thread's process, in a per-thread report: its index in
    /// [`Trace::processes`](crate::trace::Trace::processes) (0 in a trace of one process);
    /// `None` otherwise.
    pub process: Option<u32>,
    /// In a report split by origin ([`Report::by_origin`]): the name of the scope where the
    /// link these calls followed from was captured. `None` for calls that followed from no
    /// link (or from one whose capture the trace does not hold), and in other reports.
    pub caused_by: Option<&'static str>,
    /// In a report grouped by an argument ([`Report::by_arg`]): the argument's value for these
    /// calls; `None` for calls without the argument, and in other reports.
    pub arg: Option<String>,
    /// Number of calls.
    pub calls: u64,
    /// Sum of durations. Recursive scopes count every level.
    pub total_ns: u64,
    /// Sum of self times: duration minus direct children on the same thread.
    pub self_ns: u64,
    /// Shortest call.
    pub min_ns: u64,
    /// Longest call.
    pub max_ns: u64,
    /// Median duration (exact, nearest rank).
    pub p50_ns: u64,
    /// 99th-percentile duration (exact, nearest rank).
    pub p99_ns: u64,
    /// Calls still open at stop, closed at the stop time.
    pub open_at_stop: u64,
    /// Of a row of async calls (`#[profile] async fn`, `tracing` spans entered several
    /// times): the time their polls ran, summed; `total_ns` is their wall time, first poll to
    /// completion. `None` for plain scopes.
    pub busy_ns: Option<u64>,
    /// The row's time on threads as a percentage of the time in scopes
    /// ([`Report::scope_ns`], every thread's): `total_ns`, with an async call's `busy_ns`
    /// (the time its polls ran) in place of its wall time, which is not time on a thread. The table's
    /// "Total %". A root scope that runs the whole of every recording thread's time in scopes
    /// has 100; a name that nests in itself (recursion) counts every level and can pass 100.
    pub total_percent: f64,
    /// `self_ns` as a percentage of the time in scopes ([`Report::scope_ns`]): the table's
    /// "Self %". Over all rows these add up to 100 (as PyTorch's "Self CPU %").
    pub self_percent: f64,
    /// What the calls allocated and freed, summed over calls (peak: the largest call's), when
    /// the session tracked memory ([`ProfilerBuilder::track_memory`](crate::ProfilerBuilder::track_memory)). An
    /// async call counts what its polls did.
    pub memory: Option<MemoryStats>,
}

impl ScopeStats {
    /// Mean duration, rounded down.
    pub fn avg_ns(&self) -> u64 {
        self.total_ns.checked_div(self.calls).unwrap_or(0)
    }

    /// The process and thread of a per-thread row.
    pub(crate) fn process_thread(&self) -> Option<ThreadKey> {
        self.process.zip(self.thread)
    }

    /// The order of rows: by process and thread, then by `key` (largest first), then by name,
    /// originating scope and argument value. Reports sort by total time, tables by the column
    /// asked for.
    pub(crate) fn cmp_by(&self, other: &Self, key: impl Fn(&Self) -> u64) -> Ordering {
        rank(self.process_thread(), key(self), self.name)
            .cmp(&rank(other.process_thread(), key(other), other.name))
            .then_with(|| self.caused_by.cmp(&other.caused_by))
            .then_with(|| self.arg.cmp(&other.arg))
    }
}

/// A thread of a trace: its process (index in [`Trace::processes`]) and id.
pub(crate) type ThreadKey = (u32, u64);

/// Where a row goes among rows sorted by process and thread, then by `key` (largest first),
/// then by name: the order of report rows and of call tree siblings.
pub(crate) fn rank(
    thread: Option<ThreadKey>,
    key: u64,
    name: &str,
) -> (Option<ThreadKey>, Reverse<u64>, &str) {
    (thread, Reverse(key), name)
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub(crate) fn percent_of(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Statistics per scope name over one session window.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Report {
    rows: Vec<ScopeStats>,
    /// Wall time of the window the data covers ([`Trace::covered_ns`]: of a flight recorder
    /// that overwrote events, from the start common to every thread's retained records).
    pub wall_ns: u64,
    /// The time threads spent inside scopes, summed over every thread: the self times of all
    /// rows added up (a scope inside another counts once). The base of
    /// [`ScopeStats::self_percent`] and [`ScopeStats::total_percent`].
    pub scope_ns: u64,
    /// Threads with events in the window ([`Trace::thread_count`]: a thread of one process
    /// that several sessions recorded counts once).
    pub threads: usize,
    /// Events that could not be recorded (see [`Trace::dropped_events`]).
    pub dropped_events: u64,
    /// Observer callbacks that panicked during the window on threads the session records
    /// (each was caught, and deactivated its observer: see
    /// [callbacks that panic](crate::Observer#callbacks-that-panic)); 0 in a healthy run.
    /// [`Profiler::report`](crate::Profiler::report) fills it in; a report built from a
    /// [`Trace`] alone has 0, as a trace does not carry it.
    pub observer_panics: u64,
    /// The memory live at stop: allocated in the window and not freed by its end, by
    /// allocating scope, most bytes first; empty when the session did not track memory.
    pub live_at_stop: Vec<LiveAtStop>,
    /// One row per counter (`counter!`), ordered by process then name.
    pub counters: Vec<CounterStats>,
    /// One row per value distribution (`value!`), ordered by process then name.
    pub values: Vec<ValueStats>,
    /// A streaming session's stream that failed: its file could not be opened or written.
    /// [`Profiler::report`](crate::Profiler::report) fills it in; `None` for a stream that
    /// did not fail, a session that does not stream, and a report built from a [`Trace`].
    pub stream_failure: Option<StreamFailure>,
    /// True when the rows' p50 and p99 come from histograms, within 0.2 % of the exact values
    /// (calls, total, self, min and max stay exact): a table of captures
    /// ([`Table::from_captures`](crate::table::Table::from_captures), `tickscope table`) that
    /// hold more than 8 Mi scopes keeps its memory bounded so. False for every report built
    /// from a [`Trace`], whose quantiles are exact.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "std::ops::Not::not"))]
    pub approximate_quantiles: bool,
}

/// Why a streaming session's stream failed, and what that cost
/// ([`Report::stream_failure`]; the table's footer says it too).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct StreamFailure {
    /// The error, naming the file: it could not be opened (the window then recorded in
    /// memory instead), or written (the disk is full, the file was deleted or moved).
    pub error: String,
    /// Events recorded and lost to it: in neither the file nor the session's memory
    /// ([`StreamStats::records_lost`](crate::capture::StreamStats::records_lost)).
    pub lost_events: u64,
}

impl StreamFailure {
    /// A failure of `error` that lost `lost_events` events.
    pub fn new(error: impl Into<String>, lost_events: u64) -> Self {
        Self {
            error: error.into(),
            lost_events,
        }
    }
}

impl std::fmt::Display for StreamFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.lost_events;
        write!(
            f,
            "{}; {n} event{} lost (in neither the file nor memory)",
            self.error,
            if n == 1 { "" } else { "s" }
        )
    }
}

/// How a report splits a name's calls beyond threads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Split<'a> {
    /// One row per name.
    None,
    /// By originating scope: [`Report::by_origin`].
    Origin,
    /// By the value of the argument: [`Report::by_arg`].
    Arg(&'a str),
}

/// What a row stands for beyond its name.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Label {
    Origin(&'static str),
    Arg(Box<str>),
}

impl Report {
    /// The counter row for `name` (of the first process that has one).
    pub fn counter(&self, name: &str) -> Option<&CounterStats> {
        self.counters.iter().find(|c| c.name == name)
    }

    /// The value distribution row for `name` (of the first process that has one).
    pub fn value(&self, name: &str) -> Option<&ValueStats> {
        self.values.iter().find(|v| v.name == name)
    }

    /// The row for `name` (the first one, in a per-thread report).
    pub fn get(&self, name: &str) -> Option<&ScopeStats> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The row for `name` on `thread`, in a per-thread report (of a trace of several
    /// processes: on that thread of the first process that has one).
    pub fn get_on_thread(&self, name: &str, thread: u64) -> Option<&ScopeStats> {
        self.rows
            .iter()
            .find(|r| r.name == name && r.thread == Some(thread))
    }

    /// The row for `name` caused by `origin` (`None`: calls that followed from no link), in a
    /// report split by origin.
    pub fn get_by_origin(&self, name: &str, origin: Option<&str>) -> Option<&ScopeStats> {
        self.rows
            .iter()
            .find(|r| r.name == name && r.caused_by == origin)
    }

    /// The old name of [`Report::get_by_origin`].
    #[deprecated(since = "0.1.0", note = "renamed get_by_origin, as Report::by_origin")]
    // old name (renames.sh)
    pub fn get_caused_by(&self, name: &str, origin: Option<&str>) -> Option<&ScopeStats> {
        self.get_by_origin(name, origin)
    }

    /// The row for `name` whose grouping argument had `value` (`None`: calls without it), in
    /// a report grouped by an argument.
    pub fn get_with_arg(&self, name: &str, value: Option<&str>) -> Option<&ScopeStats> {
        self.rows
            .iter()
            .find(|r| r.name == name && r.arg.as_deref() == value)
    }

    /// All rows.
    pub fn rows(&self) -> &[ScopeStats] {
        &self.rows
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no scope was recorded.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Total calls over all rows.
    pub fn total_calls(&self) -> u64 {
        self.rows.iter().map(|r| r.calls).sum()
    }
}

/// The smallest value with at least `pct`% of the values at or below it. Reorders `values`
/// (a selection, linear time, instead of a sort). `values` must not be empty.
fn nearest_rank(values: &mut [u64], pct: usize) -> u64 {
    let rank = (values.len() * pct).div_ceil(100).max(1);
    *values.select_nth_unstable(rank - 1).1
}

#[cfg(test)]
pub(crate) mod summary_async_tests;
#[cfg(test)]
mod summary_tests;

#[cfg(test)]
mod tests {
    use super::{Report, Split, nearest_rank};
    use crate::capture::Capture;
    use crate::record::callsite::Callsite;
    use crate::record::event::{RawEvent, RawKind};

    static OUTER: Callsite = Callsite::new("outer", file!(), line!(), module_path!());
    static INNER: Callsite = Callsite::new("inner", file!(), line!(), module_path!());
    static KEY: Callsite = Callsite::new("key", file!(), line!(), module_path!());

    #[test]
    fn rows_summed_on_several_cores_are_the_rows_summed_in_turn() {
        let (outer, inner, key) = (OUTER.id(), INNER.id(), KEY.id());
        let threads = (1..=5u64)
            .map(|thread| {
                let mut records = Vec::new();
                for i in 0..200 * thread {
                    let t = i * 100 + thread;
                    if thread == 1 {
                        records.push(RawEvent::begin(outer, t));
                        records.push(RawEvent::new(RawKind::Link, i as u32, t + 1));
                    } else {
                        records.extend(RawEvent::begin_follows(outer, t, 1, i as u32));
                    }
                    records.push(RawEvent::new(RawKind::ArgU64, key, i % 3));
                    records.push(RawEvent::begin(inner, t + 2));
                    records.push(RawEvent::end(
                        RawEvent::end_key(inner, t + 2),
                        t + 2 + i % 7,
                    ));
                    records.push(RawEvent::end(RawEvent::end_key(outer, t), t + 50 + thread));
                }
                (thread, records)
            })
            .collect();
        let trace = Capture::from_records(threads, 0, 1_000_000).decode();
        for split_threads in [false, true] {
            for split in [Split::None, Split::Origin, Split::Arg("key")] {
                let in_turn = Report::build_with(&trace, split_threads, split, usize::MAX);
                let parallel = Report::build_with(&trace, split_threads, split, 0);
                assert!(in_turn == parallel, "the reports differ");
                let outer_calls: u64 = parallel
                    .rows()
                    .iter()
                    .filter(|r| r.name == "outer")
                    .map(|r| r.calls)
                    .sum();
                assert_eq!(outer_calls, 200 * (1 + 2 + 3 + 4 + 5));
            }
        }
        let by_arg = Report::build_with(&trace, false, Split::Arg("key"), 0);
        // i % 3 == 0 for i below 200, 400, …, 1000: 67 + 134 + 200 + 267 + 334 calls.
        assert_eq!(by_arg.get_with_arg("outer", Some("0")).unwrap().calls, 1002);
        let by_thread = Report::build_with(&trace, true, Split::None, 0);
        assert_eq!(by_thread.get_on_thread("inner", 4).unwrap().calls, 800);
        assert_eq!(by_thread.len(), 10);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(nearest_rank(&mut v, 50), 50);
        assert_eq!(nearest_rank(&mut v, 99), 99);
        assert_eq!(nearest_rank(&mut [7], 99), 7);
        assert_eq!(nearest_rank(&mut [3, 1, 2], 50), 2);
        assert_eq!(nearest_rank(&mut [2, 3, 1], 99), 3);
    }
}
