//! The text table of [`Profiler::table`](crate::Profiler::table): flat, per thread, split by
//! origin or argument, or as a call tree. Formatting only: the rows come from
//! [`Report`] and the call tree from the report module.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use crate::capture::Capture;
use crate::decode::pieces::Pieces;
use crate::decode::quantiles::{RELATIVE_ERROR, exact_budget};
use crate::decode::summary::Summary;
use crate::record::clock::ClockSource;
use crate::record::memory::MemoryMode;
use crate::report::tree::CallTree;
use crate::report::{
    CounterStats, LiveAtStop, Report, ScopeStats, Split, StreamFailure, ThreadKey, ValueStats,
    percent_of,
};
use crate::trace::{Compensation, Number, SpanKind, Trace};

/// Column to sort a [`Table`] by. Names sort ascending, everything else descending.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Scope name.
    Name,
    /// Number of calls.
    Calls,
    /// Total time (the default).
    #[default]
    Total,
    /// Self time.
    SelfTime,
    /// Mean duration.
    Avg,
    /// Shortest call.
    Min,
    /// Longest call.
    Max,
    /// Median duration.
    P50,
    /// 99th-percentile duration.
    P99,
    /// Bytes allocated, child scopes included (0 without memory tracking).
    Alloc,
    /// Bytes allocated by the scope itself.
    SelfAlloc,
    /// Peak live bytes of a call.
    Peak,
}

impl SortBy {
    /// Every column, in the order the table shows them.
    pub const ALL: [SortBy; 12] = [
        Self::Name,
        Self::Calls,
        Self::Total,
        Self::SelfTime,
        Self::Avg,
        Self::Min,
        Self::Max,
        Self::P50,
        Self::P99,
        Self::Alloc,
        Self::SelfAlloc,
        Self::Peak,
    ];

    /// The column's key, as [`str::parse`] reads it (and `tickscope table --sort` takes it):
    /// `name`, `calls`, `total`, `self`, `avg`, `min`, `max`, `p50`, `p99`, `alloc`,
    /// `self-alloc`, `peak`.
    pub const fn key_name(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Calls => "calls",
            Self::Total => "total",
            Self::SelfTime => "self",
            Self::Avg => "avg",
            Self::Min => "min",
            Self::Max => "max",
            Self::P50 => "p50",
            Self::P99 => "p99",
            Self::Alloc => "alloc",
            Self::SelfAlloc => "self-alloc",
            Self::Peak => "peak",
        }
    }

    /// What the column holds, in a few words (for help texts).
    pub const fn description(self) -> &'static str {
        match self {
            Self::Name => "scope name",
            Self::Calls => "number of calls",
            Self::Total => "total time",
            Self::SelfTime => "self time",
            Self::Avg => "mean duration",
            Self::Min => "shortest call",
            Self::Max => "longest call",
            Self::P50 => "median duration",
            Self::P99 => "99th-percentile duration",
            Self::Alloc => "bytes allocated, child scopes included",
            Self::SelfAlloc => "bytes allocated by the scope itself",
            Self::Peak => "peak live bytes of a call",
        }
    }

    fn key(self, row: &ScopeStats) -> u64 {
        match self {
            Self::Name => 0,
            Self::Calls => row.calls,
            Self::Total => row.total_ns,
            Self::SelfTime => row.self_ns,
            Self::Avg => row.avg_ns(),
            Self::Min => row.min_ns,
            Self::Max => row.max_ns,
            Self::P50 => row.p50_ns,
            Self::P99 => row.p99_ns,
            Self::Alloc => row.memory.map_or(0, |m| m.alloc_bytes),
            Self::SelfAlloc => row.memory.map_or(0, |m| m.self_alloc_bytes),
            Self::Peak => row.memory.map_or(0, |m| m.peak_bytes),
        }
    }
}

/// The column of its key ([`SortBy::key_name`]), ASCII case ignored.
///
/// ```
/// use tickscope::table::SortBy;
///
/// assert_eq!("self".parse::<SortBy>(), Ok(SortBy::SelfTime));
/// assert_eq!("P99".parse::<SortBy>(), Ok(SortBy::P99));
/// let error = "colour".parse::<SortBy>().unwrap_err();
/// assert!(error.to_string().starts_with("unknown sort key \"colour\": valid keys are name, calls,"));
/// ```
impl FromStr for SortBy {
    type Err = ParseSortByError;

    fn from_str(key: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|column| column.key_name().eq_ignore_ascii_case(key))
            .ok_or_else(|| ParseSortByError {
                key: key.to_owned(),
            })
    }
}

/// Shows the column's key ([`SortBy::key_name`]).
impl fmt::Display for SortBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key_name())
    }
}

/// A sort key that names no column: its message lists the valid keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseSortByError {
    key: String,
}

impl fmt::Display for ParseSortByError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown sort key {:?}: valid keys are ", self.key)?;
        for (i, column) in SortBy::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{}", column.key_name())?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseSortByError {}

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
/// ([`Report::scope_ns`]; a scope inside another counts once). So:
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
/// window ([`Report::observer_panics`]) if there were any, and a streaming session's stream
/// that failed, with the events lost ([`Report::stream_failure`]: `Stream failed:
/// /data/run.tscope: cannot write: No space left on device (os error 28); 5120 events lost
/// (in neither the file nor memory)`). A line states the overhead
/// compensation applied ([`Trace::compensation`]: `Overhead compensation: 8.4 ns per scope +
/// 11.2 ns per child scope subtracted`, or `off`); a trace that says nothing about it (the mock
/// clock, whose times are exact) has no such line. With memory tracked, a line says which
/// [`MemoryMode`] produced the memory columns (`Memory: counted per scope …` or
/// `Memory: timeline …`). A clock other than the CPU's invariant counter is named
/// (`Clock: OS monotonic clock …`, see [`ClockSource`]). A trace of a session salvaged from a
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
    /// by thread, of sessions that did not track memory and have no async calls is summed
    /// straight from the records, which takes a fraction of the time and memory of the whole
    /// trace. A call tree, rows split by origin or by an argument, memory columns and async
    /// calls need the spans: the trace is then decoded (once per table).
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

    /// The table in `format`: [`Format::Text`] is its `Display`; [`Format::Markdown`] a
    /// GitHub-flavoured table with the footer after it; [`Format::Json`] the schema of
    /// `docs/REPORT-SCHEMA.md` (`"kind": "table"`, rows with times in ns, the counters,
    /// values and footer lines); [`Format::Csv`] a header row and a row per table row, times
    /// in ns (the counters and values sections are in the JSON only).
    ///
    /// ```
    /// use tickscope::{Profiler, scope, table::Format};
    ///
    /// let prof = Profiler::builder().current_thread().start();
    /// drop(scope!("step"));
    /// prof.stop();
    /// let csv = prof.table().render(Format::Csv);
    /// assert!(csv.starts_with("thread,name,caused_by,arg,calls,total_ns,"));
    /// assert_eq!(csv.lines().count(), 2);
    /// ```
    #[must_use]
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Text => self.to_string(),
            Format::Markdown => self.to_markdown(),
            Format::Json => self.to_json(),
            Format::Csv => self.to_csv(),
        }
    }

    /// [`Table::render`] in [`Format::Markdown`].
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let (trace, summary) = self.view();
        let rows = self.rows(trace, summary);
        let mut out = markdown_grid(&rows.headers, &rows.rows, rows.left);
        let mut footer = String::new();
        // Writing to a `String` cannot fail.
        let _ = self.footer(&mut footer, trace, summary, &rows);
        // The summary line and the notes on the percentages and the limit are paragraphs;
        // the lines after them (aligned sections among them) keep their layout in a code
        // block.
        let lead = 1 + self.notes(&rows).len();
        let lines: Vec<&str> = footer.lines().collect();
        let (lead, rest) = lines.split_at(lead.min(lines.len()));
        for line in lead {
            out.push('\n');
            out.push_str(line);
            out.push('\n');
        }
        if !rest.is_empty() {
            out.push_str("\n```text\n");
            for line in rest {
                out.push_str(line);
                out.push('\n');
            }
            out.push_str("```\n");
        }
        out
    }

    /// [`Table::render`] in [`Format::Csv`].
    #[must_use]
    pub fn to_csv(&self) -> String {
        let (trace, summary) = self.view();
        let records = self.records(trace, summary);
        let mut out = csv_record(&self.record_keys(trace));
        for record in records {
            let cells: Vec<String> = record.iter().map(|(_, v)| v.csv()).collect();
            out.push_str(&csv_record(&cells));
        }
        out
    }

    /// [`Table::render`] in [`Format::Json`].
    #[must_use]
    pub fn to_json(&self) -> String {
        let (trace, summary) = self.view();
        let rows = self.records(trace, summary);
        let scopes: usize = summary.map_or_else(
            || trace.threads.iter().map(|t| t.spans.len()).sum(),
            Summary::spans,
        );
        let shown = self.rows(trace, summary);
        let mut footer = String::new();
        let _ = self.footer(&mut footer, trace, summary, &shown);
        let object = |fields: &[(&str, Val)]| {
            let inner: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}: {}", json_string(k), v.json()))
                .collect();
            format!("{{{}}}", inner.join(", "))
        };
        let list = |items: Vec<String>, indent: &str| {
            if items.is_empty() {
                "[]".to_owned()
            } else {
                format!(
                    "[\n{indent}  {}\n{indent}]",
                    items.join(&format!(",\n{indent}  "))
                )
            }
        };
        let rows: Vec<String> = rows.iter().map(|r| object(r)).collect();
        let label = |name: &str, process: u32| {
            if trace.processes.len() > 1 {
                format!("{}/{name}", trace.process_label(process))
            } else {
                name.to_owned()
            }
        };
        let counters: Vec<String> = CounterStats::of(trace)
            .iter()
            .map(|c| {
                object(&[
                    ("name", Val::Str(label(c.name, c.process))),
                    ("samples", Val::Int(c.samples)),
                    ("first", Val::Num(c.first)),
                    ("last", Val::Num(c.last)),
                    ("min", Val::Num(c.min)),
                    ("max", Val::Num(c.max)),
                    ("mean", Val::Float(c.mean)),
                ])
            })
            .collect();
        let values: Vec<String> = ValueStats::of(trace)
            .iter()
            .map(|v| {
                object(&[
                    ("name", Val::Str(label(v.name, v.process))),
                    ("count", Val::Int(v.count)),
                    ("min", Val::Float(v.min)),
                    ("max", Val::Float(v.max)),
                    ("mean", Val::Float(v.mean)),
                    ("p50", Val::Float(v.p50)),
                    ("p99", Val::Float(v.p99)),
                ])
            })
            .collect();
        let footer: Vec<String> = footer.lines().map(json_string).collect();
        format!(
            "{{\n  \"schema\": {TABLE_SCHEMA},\n  \"kind\": \"table\",\n  \"tree\": {},\n  \
             \"wall_ns\": {},\n  \"scope_ns\": {},\n  \
             \"processes\": {},\n  \"threads\": {},\n  \"scopes\": {},\n  \
             \"dropped_events\": {},\n  \"overwritten_events\": {},\n  \"hidden_rows\": {},\n  \
             \"rows\": {},\n  \"counters\": {},\n  \"values\": {},\n  \"footer\": {}\n}}\n",
            self.tree,
            trace.wall_ns(),
            shown.scope_ns,
            trace.processes.len(),
            trace.thread_count(),
            scopes,
            trace.dropped_events,
            trace.overwritten_events,
            shown.hidden,
            list(rows, "  "),
            list(counters, "  "),
            list(values, "  "),
            list(footer, "  "),
        )
    }

    /// The rows to print: the call tree's or the flat table's.
    fn rows(&self, trace: &Trace, summary: Option<&Summary>) -> Rows<'_> {
        if self.tree {
            self.tree_rows(trace)
        } else {
            self.flat_rows(trace, summary)
        }
    }

    /// The keys of [`Table::records`], the CSV header.
    fn record_keys(&self, trace: &Trace) -> Vec<&'static str> {
        if self.tree {
            return vec![
                "thread",
                "depth",
                "name",
                "poll",
                "calls",
                "total_ns",
                "self_ns",
                "total_percent",
                "self_percent",
                "open_at_stop",
            ];
        }
        let mut keys = vec![
            "thread",
            "name",
            "caused_by",
            "arg",
            "calls",
            "total_ns",
            "self_ns",
            "avg_ns",
            "min_ns",
            "max_ns",
            "p50_ns",
            "p99_ns",
            "total_percent",
            "self_percent",
            "open_at_stop",
        ];
        if !trace.async_spans.is_empty() {
            keys.push("busy_ns");
        }
        if trace.memory.is_some() {
            keys.extend([
                "alloc_bytes",
                "self_alloc_bytes",
                "allocs",
                "freed_bytes",
                "peak_bytes",
            ]);
        }
        keys
    }

    /// The rows the table shows (sorted and limited as printed) as fields, times in ns.
    fn records(&self, trace: &Trace, summary: Option<&Summary>) -> Vec<Vec<(&'static str, Val)>> {
        let keys = self.record_keys(trace);
        let thread = |key: Option<ThreadKey>| match key {
            Some(_) => Val::Str(self.thread_name(trace, key)),
            None => Val::Null,
        };
        let opt = |s: Option<String>| s.map_or(Val::Null, Val::Str);
        let records: Vec<Vec<Val>> = if self.tree {
            let tree = self.call_tree(trace);
            tree.walk()
                .take(self.limit.unwrap_or(usize::MAX))
                .map(|(node, depth)| {
                    vec![
                        thread(node.thread),
                        Val::Int(depth as u64),
                        Val::Str(node.name.to_owned()),
                        Val::Bool(node.poll),
                        Val::Int(node.calls),
                        Val::Int(node.total_ns),
                        Val::Int(node.self_ns),
                        Val::Float(node.total_percent),
                        Val::Float(node.self_percent),
                        Val::Int(node.open),
                    ]
                })
                .collect()
        } else {
            let report = self.report(trace, summary);
            self.selected(&report)
                .into_iter()
                .map(|row| {
                    let mut fields = vec![
                        thread(row.process_thread()),
                        Val::Str(row.name.to_owned()),
                        opt(row.caused_by.map(str::to_owned)),
                        opt(row.arg.clone()),
                        Val::Int(row.calls),
                        Val::Int(row.total_ns),
                        Val::Int(row.self_ns),
                        Val::Int(row.avg_ns()),
                        Val::Int(row.min_ns),
                        Val::Int(row.max_ns),
                        Val::Int(row.p50_ns),
                        Val::Int(row.p99_ns),
                        Val::Float(row.total_percent),
                        Val::Float(row.self_percent),
                        Val::Int(row.open_at_stop),
                    ];
                    if !trace.async_spans.is_empty() {
                        fields.push(row.busy_ns.map_or(Val::Null, Val::Int));
                    }
                    if let Some(m) = row.memory {
                        fields.extend(
                            [
                                m.alloc_bytes,
                                m.self_alloc_bytes,
                                m.allocs,
                                m.freed_bytes,
                                m.peak_bytes,
                            ]
                            .map(Val::Int),
                        );
                    }
                    fields
                })
                .collect()
        };
        records
            .into_iter()
            .map(|r| keys.iter().copied().zip(r).collect())
            .collect()
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
    /// [`Report::by_origin`]). Ignored when split by thread.
    pub fn by_origin(mut self, split: bool) -> Self {
        self.by_origin = split;
        self
    }

    /// Splits the rows of scopes that recorded argument `key` (`scope!("name", key = value)`)
    /// by its value, shown in a column headed `key` (see [`Report::by_arg`]); calls without
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
                // A flat table with no split but by thread needs only the sums; so does one
                // split by origin of captures without links (nothing to split). The call tree
                // and a table split by argument take the spans piece by piece
                // ([`Table::call_tree`], [`Table::report`]).
                if let Some(summary) = c.summary.get_or_init(|| Summary::of(&c.captures))
                    && (!(self.tree || self.split() != Split::None) || !summary.follows())
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

    /// The call tree of `trace`; of the trace without spans that [`Table::view`] gives for
    /// captures, from their spans decoded piece by piece.
    fn call_tree(&self, trace: &Trace) -> CallTree {
        if let Source::Captures(c) = &self.source
            && let Some(Some(summary)) = c.summary.get()
            && std::ptr::eq(trace, &summary.trace)
        {
            let captures: Vec<&Capture> = c.captures.iter().map(|c| &**c).collect();
            if let Some(pieces) = Pieces::of_summary(&captures, summary) {
                return CallTree::from_source(&pieces, self.by_thread);
            }
        }
        CallTree::new(trace, self.by_thread)
    }

    /// The thread's name; in a trace of several processes, after its process's label.
    fn thread_name(&self, trace: &Trace, key: Option<ThreadKey>) -> String {
        let Some((process, id)) = key else {
            return String::new();
        };
        let thread = trace
            .threads
            .iter()
            .find(|t| (t.process, t.id) == (process, id));
        let name = thread.map_or_else(String::new, |t| t.display_name());
        if trace.processes.len() > 1 {
            format!("{}/{name}", trace.process_label(process))
        } else {
            name
        }
    }

    /// The report of `trace` (from `summary` when given) the flat table shows: split by
    /// argument, from the captures' spans decoded piece by piece.
    fn report(&self, trace: &Trace, summary: Option<&Summary>) -> Report {
        match (summary, self.split()) {
            (Some(summary), Split::Arg(key)) => {
                if let Source::Captures(c) = &self.source {
                    let captures: Vec<&Capture> = c.captures.iter().map(|c| &**c).collect();
                    if let Some(pieces) = Pieces::of_summary(&captures, summary) {
                        return Report::by_arg_of(&pieces, key, summary.exact);
                    }
                }
                Report::build(trace, self.by_thread, self.split())
            }
            (Some(summary), _) => Report::from_summary(summary, self.by_thread),
            (None, split) => Report::build(trace, self.by_thread, split),
        }
    }

    /// The rows of `report` the flat table shows: sorted, and limited (per thread).
    fn selected<'r>(&self, report: &'r Report) -> Vec<&'r ScopeStats> {
        let mut rows: Vec<&ScopeStats> = report.rows().iter().collect();
        let sort = self.sort;
        rows.sort_by(|a, b| a.cmp_by(b, |row| sort.key(row)));
        let mut shown: HashMap<Option<ThreadKey>, usize> = HashMap::new();
        rows.retain(|row| {
            let n = shown.entry(row.process_thread()).or_default();
            *n += 1;
            self.limit.is_none_or(|limit| *n <= limit)
        });
        rows
    }

    /// The rows of the report of `trace` (from `summary` when given), sorted and limited.
    fn flat_rows(&self, trace: &Trace, summary: Option<&Summary>) -> Rows<'_> {
        let split = self.split();
        let report = self.report(trace, summary);
        // Async calls get the time their polls ran beside their wall time.
        let busy = report.rows().iter().any(|r| r.busy_ns.is_some());
        let mut out = Vec::new();
        let mut open = 0;
        let selected = self.selected(&report);
        let hidden = report.rows().len() - selected.len();
        for row in selected {
            open += row.open_at_stop;
            let mut cells = Vec::with_capacity(17);
            if self.by_thread {
                cells.push(self.thread_name(trace, row.process_thread()));
            }
            cells.push(name_cell(row.name, 0, false, row.open_at_stop));
            match split {
                Split::None => {}
                Split::Origin => cells.push(row.caused_by.unwrap_or("").to_owned()),
                Split::Arg(_) => cells.push(row.arg.clone().unwrap_or_default()),
            }
            cells.push(row.calls.to_string());
            cells.push(self.unit.format(row.total_ns as f64));
            cells.push(format_percent(row.total_percent));
            cells.push(self.unit.format(row.self_ns as f64));
            cells.push(format_percent(row.self_percent));
            if busy {
                match row.busy_ns {
                    Some(ns) => {
                        cells.push(self.unit.format(ns as f64));
                        cells.push(format_percent(percent_of(ns, row.total_ns)));
                    }
                    None => cells.extend([String::new(), String::new()]),
                }
            }
            for ns in [row.avg_ns(), row.min_ns, row.max_ns, row.p50_ns, row.p99_ns] {
                cells.push(self.unit.format(ns as f64));
            }
            if let Some(m) = row.memory {
                cells.push(format_bytes(m.alloc_bytes));
                cells.push(format_bytes(m.self_alloc_bytes));
                cells.push(m.allocs.to_string());
                cells.push(format_bytes(m.freed_bytes));
                cells.push(format_bytes(m.peak_bytes));
            }
            out.push(cells);
        }
        let mut headers = vec!["Name"];
        match split {
            Split::None => {}
            Split::Origin => headers.push("Caused by"),
            Split::Arg(key) => headers.push(key),
        }
        let left = headers.len();
        headers.extend(["Calls", "Total", "Total %", "Self", "Self %"]);
        if busy {
            headers.extend(["Busy", "Busy %"]);
        }
        headers.extend(["Avg", "Min", "Max", "P50", "P99"]);
        if trace.memory.is_some() {
            headers.extend(["Alloc", "Self alloc", "Allocs", "Freed", "Peak"]);
        }
        self.with_thread_column(Rows {
            headers,
            rows: out,
            left,
            open,
            scope_ns: report.scope_ns,
            hidden,
            busy,
            live: report.live_at_stop,
        })
    }

    /// The call tree's nodes, depth first, limited.
    fn tree_rows(&self, trace: &Trace) -> Rows<'_> {
        let tree = self.call_tree(trace);
        let mut out = Vec::new();
        let mut open = 0;
        let shown = tree.nodes.len().min(self.limit.unwrap_or(usize::MAX));
        for (node, depth) in tree.walk().take(shown) {
            open += node.open;
            let mut cells = Vec::with_capacity(6);
            if self.by_thread {
                cells.push(if depth == 0 {
                    self.thread_name(trace, node.thread)
                } else {
                    String::new()
                });
            }
            cells.push(name_cell(node.name, depth, node.poll, node.open));
            cells.push(node.calls.to_string());
            cells.push(self.unit.format(node.total_ns as f64));
            cells.push(format_percent(node.total_percent));
            cells.push(self.unit.format(node.self_ns as f64));
            cells.push(format_percent(node.self_percent));
            out.push(cells);
        }
        self.with_thread_column(Rows {
            headers: vec!["Call tree", "Calls", "Total", "Total %", "Self", "Self %"],
            rows: out,
            left: 1,
            open,
            scope_ns: tree.scope_ns,
            hidden: tree.nodes.len() - shown,
            busy: false,
            live: LiveAtStop::of(trace),
        })
    }

    /// `rows` with the "Thread" header in front when split by thread (the cells are there).
    fn with_thread_column<'a>(&self, mut rows: Rows<'a>) -> Rows<'a> {
        if self.by_thread {
            rows.headers.insert(0, "Thread");
            rows.left += 1;
        }
        rows
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (trace, summary) = self.view();
        let rows = self.rows(trace, summary);
        grid(f, &rows.headers, &rows.rows, rows.left)?;
        self.footer(f, trace, summary, &rows)
    }
}

/// The lines the table of `trace` writes under its rows (the footer of
/// [`Table::new`]`(trace)`: wall time, threads, scopes, dropped events, salvage, compensation,
/// clock, memory, open calls, live at stop, counters and values), for reports that show it
/// elsewhere (the HTML report's Session view). `report` is `Report::new(trace)`.
pub(crate) fn footer_text(trace: &Trace, report: &Report) -> String {
    let table = Table::new(Arc::new(Trace::empty()));
    let rows = Rows {
        headers: Vec::new(),
        rows: Vec::new(),
        left: 0,
        open: report.rows().iter().map(|r| r.open_at_stop).sum(),
        live: report.live_at_stop.clone(),
        scope_ns: report.scope_ns,
        hidden: 0,
        busy: false,
    };
    let mut out = String::new();
    // Writing to a `String` cannot fail.
    let _ = table.footer(&mut out, trace, None, &rows);
    out
}

impl Table {
    /// The lines under the summary line that say what the percentages are shares of and how
    /// many rows the limit hid (each only when it has something to say).
    fn notes(&self, rows: &Rows<'_>) -> Vec<String> {
        let mut notes = Vec::new();
        if !rows.rows.is_empty() {
            let mut note = format!(
                "Total % and Self %: of {} in scopes, all threads (every row's Self added up",
                format_ns(rows.scope_ns)
            );
            note.push_str(if rows.busy {
                "; async calls count their Busy time); Busy %: of the row's Total"
            } else {
                ")"
            });
            notes.push(note);
        }
        if rows.hidden > 0 {
            let what = if self.tree { "node" } else { "row" };
            let per = if self.by_thread && !self.tree {
                " per thread"
            } else {
                ""
            };
            notes.push(format!(
                "{} {what}{} hidden by the limit of {}{per}",
                rows.hidden,
                plural(rows.hidden as u64),
                self.limit.unwrap_or(0),
            ));
        }
        notes
    }

    /// What the text table writes under its rows: the summary line, what the percentages are
    /// of, the rows the limit hid, salvage, errors, compensation, clock, memory, open calls,
    /// live at stop, counters and values.
    fn footer(
        &self,
        f: &mut dyn fmt::Write,
        trace: &Trace,
        summary: Option<&Summary>,
        rows: &Rows<'_>,
    ) -> fmt::Result {
        let (open, live) = (rows.open, &rows.live);
        // Scopes are calls of plain scopes; an async call counts once, its poll slices apart.
        let (scopes, polls) = match summary {
            Some(summary) => (summary.spans(), 0),
            None => {
                let spans = trace.threads.iter().flat_map(|t| &t.spans);
                let polls = spans.filter(|s| s.kind != SpanKind::Scope).count();
                let all: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
                (all - polls, polls)
            }
        };
        // A session of a build without `enabled`: with no collector's events, its counts are
        // zeros that mean nothing.
        let compiled_out_empty = self.compiled_out && trace.thread_count() == 0;
        if compiled_out_empty {
            writeln!(f, "{COMPILED_OUT}")?;
        } else {
            write!(f, "{} wall, ", format_ns(trace.covered_ns()))?;
            if trace.covered_ns() != trace.wall_ns() {
                write!(
                    f,
                    "the flight recorder's window of a {} session, ",
                    format_ns(trace.wall_ns())
                )?;
            }
            let processes = trace.processes.len();
            if processes > 1 {
                write!(f, "{processes} processes, ")?;
            }
            let threads = trace.thread_count();
            write!(
                f,
                "{} thread{}, {} scope{}, ",
                threads,
                plural(threads as u64),
                scopes,
                plural(scopes as u64),
            )?;
            let calls = trace.async_spans.len();
            if calls > 0 || polls > 0 {
                write!(
                    f,
                    "{calls} async call{} ({polls} poll{}), ",
                    plural(calls as u64),
                    plural(polls as u64)
                )?;
            }
            write!(
                f,
                "{} dropped event{}",
                trace.dropped_events,
                plural(trace.dropped_events),
            )?;
            if trace.overwritten_events > 0 {
                let n = trace.overwritten_events;
                write!(f, ", {n} overwritten event{} (flight recorder)", plural(n))?;
            }
            let panics = self.observer_panics;
            if panics > 0 {
                write!(f, ", {panics} observer panic{}", plural(panics))?;
            }
            writeln!(f)?;
        }
        for note in self.notes(rows) {
            writeln!(f, "{note}")?;
        }
        if self.compiled_out && !compiled_out_empty {
            writeln!(f, "{COMPILED_OUT_COLLECTORS}")?;
        }
        if summary.is_some_and(|s| !s.exact) {
            writeln!(
                f,
                "Quantiles: p50 and p99 from log-linear histograms, within {RELATIVE_ERROR} of the \
                 exact values, as the captures may hold more than {} scopes (calls, total, self, \
                 min and max are exact)",
                exact_budget()
            )?;
        }
        let salvage = &trace.salvage;
        if salvage.is_salvaged() {
            let (n, bytes, cut) = (salvage.sessions, salvage.lost_bytes, salvage.open_scopes);
            write!(
                f,
                "Salvaged: {n} session{} cut short (no footer): {bytes} byte{} lost at the cut, \
                 {cut} scope{} cut open (*)",
                plural(n),
                plural(bytes),
                plural(cut)
            )?;
            let without = salvage.threads_without_records;
            if without > 0 {
                write!(
                    f,
                    ", {without} declared thread{} with no record left",
                    plural(without)
                )?;
            }
            writeln!(f)?;
        }
        for error in &self.errors {
            writeln!(f, "Error: {error}")?;
        }
        if let Some(failure) = &self.stream_failure {
            writeln!(f, "Stream failed: {failure}")?;
        }
        match trace.compensation {
            Some(Compensation::Off) => {
                writeln!(f, "Overhead compensation: off (times include the probes)")?;
            }
            Some(applied) => writeln!(f, "Overhead compensation: {applied} subtracted")?,
            None => {}
        }
        // (Without `enabled` the clock is the OS's, and read for no event.)
        if let Some(source @ (ClockSource::Monotonic | ClockSource::CpuUnverified)) =
            trace.clock_source.filter(|_| !self.compiled_out)
        {
            writeln!(f, "Clock: {source}")?;
        }
        match trace.memory.as_ref().map(|m| m.mode) {
            Some(MemoryMode::Counts) => writeln!(
                f,
                "Memory: counted per scope (no timeline: nothing matched across threads, \
                 no live-at-stop list)"
            )?,
            Some(MemoryMode::Timeline) => writeln!(
                f,
                "Memory: timeline (every allocation and free with its time and address)"
            )?,
            Some(MemoryMode::Off) | None => {}
        }
        if open > 0 {
            let salvaged = if trace.salvage.is_salvaged() {
                " (cut open by a salvage: at their thread's last salvaged record)"
            } else {
                ""
            };
            writeln!(
                f,
                "* {open} call{} still open at stop, closed at the stop time{salvaged}",
                plural(open)
            )?;
        }
        // Of a flight recorder: calls begun before its window count from its start.
        let scopes_cut = match summary {
            Some(summary) => summary.cut_at_start(),
            None => (trace.threads.iter().flat_map(|t| &t.spans))
                .filter(|s| s.cut_at_start && s.kind == SpanKind::Scope)
                .count(),
        };
        let cut = trace.async_spans.iter().filter(|c| c.cut_at_start).count() + scopes_cut;
        if cut > 0 {
            writeln!(
                f,
                "{cut} call{} begun before the flight recorder's window, counted from its start",
                plural(cut as u64)
            )?;
        }
        if !live.is_empty() {
            writeln!(f, "Live at stop (allocated in the window, not freed):")?;
            let names: Vec<_> = live
                .iter()
                .map(|l| shorten(l.scope.unwrap_or("(no scope)"), MAX_CELL_CHARS))
                .collect();
            let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
            for (group, name) in live.iter().zip(names) {
                let pad = " ".repeat(width - name.chars().count());
                writeln!(
                    f,
                    "  {name}{pad}  {:>10} in {} allocation{}",
                    format_bytes(group.bytes),
                    group.allocs,
                    plural(group.allocs)
                )?;
            }
        }
        self.sections(trace, f)
    }
}

impl Table {
    /// The "Counters" and "Values" sections, after the scopes (each only when the trace has
    /// some), sorted by the table's column where they have it (samples for Calls, mean for
    /// Avg, min, max, p50, p99), else by name, and limited like the scope rows.
    fn sections(&self, trace: &Trace, f: &mut dyn fmt::Write) -> fmt::Result {
        let label = |name: &str, process: u32| {
            if trace.processes.len() > 1 {
                format!("{}/{name}", trace.process_label(process))
            } else {
                name.to_owned()
            }
        };
        let limit = self.limit.unwrap_or(usize::MAX);
        let mut counters = CounterStats::of(trace);
        let key = |c: &CounterStats| -> Option<f64> {
            Some(match self.sort {
                SortBy::Calls => c.samples as f64,
                SortBy::Avg => c.mean,
                SortBy::Min => c.min.as_f64(),
                SortBy::Max => c.max.as_f64(),
                _ => return None,
            })
        };
        // Stable: equal keys keep the order by name.
        counters.sort_by(|a, b| match (key(a), key(b)) {
            (Some(a), Some(b)) => b.total_cmp(&a),
            _ => Ordering::Equal,
        });
        if !counters.is_empty() {
            let rows = counters
                .iter()
                .take(limit)
                .map(|c| {
                    vec![
                        label(c.name, c.process),
                        c.samples.to_string(),
                        format_number(c.first),
                        format_number(c.last),
                        format_number(c.min),
                        format_number(c.max),
                        format_float(c.mean),
                    ]
                })
                .collect::<Vec<_>>();
            writeln!(f, "\nCounters")?;
            grid(
                f,
                &["Name", "Samples", "First", "Last", "Min", "Max", "Mean"],
                &rows,
                1,
            )?;
        }
        let mut values = ValueStats::of(trace);
        let key = |v: &ValueStats| -> Option<f64> {
            Some(match self.sort {
                SortBy::Calls => v.count as f64,
                SortBy::Avg => v.mean,
                SortBy::Min => v.min,
                SortBy::Max => v.max,
                SortBy::P50 => v.p50,
                SortBy::P99 => v.p99,
                _ => return None,
            })
        };
        values.sort_by(|a, b| match (key(a), key(b)) {
            (Some(a), Some(b)) => b.total_cmp(&a),
            _ => Ordering::Equal,
        });
        if !values.is_empty() {
            let rows = values
                .iter()
                .take(limit)
                .map(|v| {
                    let mut row = vec![label(v.name, v.process), v.count.to_string()];
                    row.extend([v.min, v.max, v.mean, v.p50, v.p99].map(format_float));
                    row
                })
                .collect::<Vec<_>>();
            writeln!(f, "\nValues")?;
            grid(
                f,
                &["Name", "Count", "Min", "Max", "Mean", "P50", "P99"],
                &rows,
                1,
            )?;
        }
        Ok(())
    }
}

/// The most characters a cell of a text table or tree shows. A longer cell (a 100 KB scope
/// name, a call tree thousands of levels deep) keeps its first and last characters around an
/// ellipsis, so that marks at its end (`*`, `(poll)`) stay visible; exports keep every name
/// whole.
pub const MAX_CELL_CHARS: usize = 80;

/// `cell` as a text table shows it: its control characters escaped, whole when it then has at
/// most `max` characters, else its first and last characters around `…`, `max` characters in
/// all.
pub(crate) fn shorten(cell: &str, max: usize) -> std::borrow::Cow<'_, str> {
    // Control characters (a newline, a carriage return, an escape sequence) would break the
    // grid or drive the terminal: they show escaped (`\n`, `\u{1b}`).
    if cell.chars().any(char::is_control) {
        let escaped: String = cell
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        return std::borrow::Cow::Owned(shorten(&escaped, max).into_owned());
    }
    let count = cell.chars().count();
    if count <= max {
        return std::borrow::Cow::Borrowed(cell);
    }
    let keep = max.saturating_sub(1);
    let tail = keep / 2;
    let head = keep - tail;
    let mut out: String = cell.chars().take(head).collect();
    out.push('…');
    out.extend(cell.chars().skip(count - tail));
    std::borrow::Cow::Owned(out)
}

/// Writes `rows` under `headers` and a rule of `-` as wide as the columns: the first `left`
/// columns aligned left, the others right, two spaces apart, no space at the end of a line.
/// Cells longer than [`MAX_CELL_CHARS`] are [shortened](shorten). Padding is written out, not
/// passed to `format!` as a width, so no width can make it fail.
fn grid(
    f: &mut dyn fmt::Write,
    headers: &[&str],
    rows: &[Vec<String>],
    left: usize,
) -> fmt::Result {
    let headers: Vec<String> = headers.iter().map(|&h| h.to_owned()).collect();
    let widths = widths(std::iter::once(&headers).chain(rows));
    line(f, &headers, &widths, left)?;
    let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    f.write_str(&"-".repeat(total))?;
    f.write_char('\n')?;
    for row in rows {
        line(f, row, &widths, left)?;
    }
    Ok(())
}

/// `rows` under `headers` as [`grid`] writes them, for the command line's tables (`diff`).
#[doc(hidden)]
pub fn grid_text(headers: &[&str], rows: &[Vec<String>], left: usize) -> String {
    let mut out = String::new();
    // Writing to a `String` cannot fail.
    let _ = grid(&mut out, headers, rows, left);
    out
}

/// The width of each column: its longest cell, shortened.
fn widths<'a>(rows: impl Iterator<Item = &'a Vec<String>>) -> Vec<usize> {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        if widths.len() < row.len() {
            widths.resize(row.len(), 0);
        }
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(shorten(cell, MAX_CELL_CHARS).chars().count());
        }
    }
    widths
}

/// One line of a grid.
fn line(f: &mut dyn fmt::Write, cells: &[String], widths: &[usize], left: usize) -> fmt::Result {
    let mut text = String::new();
    for (i, (cell, &width)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            text.push_str("  ");
        }
        let cell = shorten(cell, MAX_CELL_CHARS);
        let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
        if i < left {
            text.push_str(&cell);
            text.push_str(&pad);
        } else {
            text.push_str(&pad);
            text.push_str(&cell);
        }
    }
    f.write_str(text.trim_end())?;
    f.write_char('\n')
}

/// An integer as it is; a float as [`format_float`] writes it.
pub(crate) fn format_number(n: Number) -> String {
    match n {
        Number::Int(v) => v.to_string(),
        Number::Float(v) => format_float(v),
    }
}

/// A float with at most 3 decimals, trailing zeros cut (`2.5`, `3`, `0.333`).
pub(crate) fn format_float(v: f64) -> String {
    let text = format!("{v:.3}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// A name cell: indented by `depth` levels, `(poll)` after the polls of an async call, and a
/// `*` when calls were still open at stop.
fn name_cell(name: &str, depth: usize, poll: bool, open: u64) -> String {
    let indent = "  ".repeat(depth);
    let poll = if poll { " (poll)" } else { "" };
    let open = if open > 0 { " *" } else { "" };
    format!("{indent}{name}{poll}{open}")
}

/// A percentage with one decimal.
fn format_percent(percent: f64) -> String {
    format!("{percent:.1}")
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Formats a duration with a unit that keeps 3 to 4 significant digits.
#[doc(hidden)] // the command line's; not public API
pub fn format_ns(ns: u64) -> String {
    crate::record::clock::format_ns(ns)
}

/// Formats a byte count: exact below 1 KiB, else with a binary unit and 3 to 4 digits.
pub(crate) fn format_bytes(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match bytes {
        0..KIB => format!("{bytes} B"),
        KIB..MIB => format!("{:.2} KiB", bytes as f64 / KIB as f64),
        MIB..GIB => format!("{:.2} MiB", bytes as f64 / MIB as f64),
        _ => format!("{:.2} GiB", bytes as f64 / GIB as f64),
    }
}

/// A field of a row of [`Table::to_json`] and [`Table::to_csv`].
enum Val {
    Null,
    Bool(bool),
    Int(u64),
    Float(f64),
    Num(Number),
    Str(String),
}

impl Val {
    fn json(&self) -> String {
        match self {
            Self::Null => "null".to_owned(),
            Self::Bool(b) => b.to_string(),
            Self::Int(n) => n.to_string(),
            Self::Float(x) | Self::Num(Number::Float(x)) if !x.is_finite() => "null".to_owned(),
            Self::Float(x) | Self::Num(Number::Float(x)) => format!("{x:?}"),
            Self::Num(Number::Int(n)) => n.to_string(),
            Self::Str(s) => json_string(s),
        }
    }

    fn csv(&self) -> String {
        match self {
            Self::Null => String::new(),
            Self::Str(s) => s.clone(),
            other => other.json(),
        }
    }
}

/// The form a report is written in: `tickscope table`, `diff` and `info --format`, and
/// [`Table::render`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned columns, as [`Table`]'s `Display` writes them.
    #[default]
    Text,
    /// A GitHub-flavoured Markdown table, the footer as lines after it: ready to paste into a
    /// pull-request comment.
    Markdown,
    /// JSON of the versioned schema in `docs/REPORT-SCHEMA.md` (a `"schema"` number per
    /// `"kind"`: 2 for a table); times in ns.
    Json,
    /// CSV (RFC 4180): a header row, then a row per line, times as plain numbers in ns.
    Csv,
}

impl Format {
    /// Every format, in the order of `--format`'s help.
    pub const ALL: [Self; 4] = [Self::Text, Self::Markdown, Self::Json, Self::Csv];

    /// The format's name: `text`, `markdown`, `json`, `csv`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Markdown => "markdown",
            Self::Json => "json",
            Self::Csv => "csv",
        }
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("`{s}` is not a format: text, markdown, json or csv"))
    }
}

/// The unit of the durations of text and Markdown tables. JSON and CSV are always in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Unit {
    /// Chosen per value: 3 to 4 significant digits ([`format_ns`]).
    #[default]
    Auto,
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl Unit {
    /// Every unit, in the order of `--unit`'s help.
    pub const ALL: [Self; 5] = [Self::Auto, Self::Ns, Self::Us, Self::Ms, Self::S];

    /// The unit's name: `auto`, `ns`, `us`, `ms`, `s`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ns => "ns",
            Self::Us => "us",
            Self::Ms => "ms",
            Self::S => "s",
        }
    }

    /// `ns` written in this unit: `1500 ns`, `1.500 µs`, `0.002 ms`; with [`Unit::Auto`] as
    /// [`format_ns`] writes it (fractions of a ns rounded).
    pub fn format(self, ns: f64) -> String {
        let sign = if ns < 0.0 { "-" } else { "" };
        let abs = ns.abs();
        match self {
            Self::Auto => format!("{sign}{}", format_ns(abs.round() as u64)),
            Self::Ns => format!("{sign}{abs:.0} ns"),
            Self::Us => format!("{sign}{:.3} µs", abs / 1e3),
            Self::Ms => format!("{sign}{:.3} ms", abs / 1e6),
            Self::S => format!("{sign}{:.6} s", abs / 1e9),
        }
    }
}

impl FromStr for Unit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|u| u.name() == s)
            .ok_or_else(|| format!("`{s}` is not a unit: auto, ns, us, ms or s"))
    }
}

/// `rows` under `headers` as a GitHub-flavoured Markdown table: the first `left` columns
/// aligned left, the others right; cells shortened as in the text table ([`MAX_CELL_CHARS`],
/// control characters escaped), `|` and `\` escaped.
#[doc(hidden)] // the command line's; not public API
pub fn markdown_grid(headers: &[&str], rows: &[Vec<String>], left: usize) -> String {
    // Shortened and with control characters escaped, as in the text table.
    let cell = |c: &str| {
        shorten(c, MAX_CELL_CHARS)
            .replace('\\', "\\\\")
            .replace('|', "\\|")
    };
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = String>| {
        out.push('|');
        for c in cells {
            out.push(' ');
            out.push_str(&c);
            out.push_str(" |");
        }
        out.push('\n');
    };
    line(&mut out, &mut headers.iter().map(|h| cell(h)));
    line(
        &mut out,
        &mut (0..headers.len()).map(|i| if i < left { ":--" } else { "--:" }.to_owned()),
    );
    for row in rows {
        line(&mut out, &mut row.iter().map(|c| cell(c)));
    }
    out
}

/// One CSV record (RFC 4180): fields with a comma, a quote or a line break quoted, quotes
/// doubled; ended by `\n`.
#[doc(hidden)] // the command line's; not public API
pub fn csv_record<S: AsRef<str>>(fields: &[S]) -> String {
    let mut out = String::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let field = field.as_ref();
        if field.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(field);
        }
    }
    out.push('\n');
    out
}

/// `s` as a JSON string, quotes included.
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::{MAX_CELL_CHARS, format_bytes, format_ns, grid_text, shorten};

    #[test]
    fn long_cells_keep_both_ends() {
        assert_eq!(shorten("abcdef", 6), "abcdef");
        assert_eq!(shorten("abcdefg", 6), "abc…fg");
        assert_eq!(shorten("🦀🦀🦀🦀🦀🦀🦀 *", 5), "🦀🦀… *");
        assert_eq!(shorten("abc", 1), "…");
        assert_eq!(shorten("abc", 0), "…");
        assert_eq!(shorten("a\nb\r\u{1b}[31m", 80), "a\\nb\\r\\u{1b}[31m");
        assert_eq!(shorten("a\nbcdef", 5), "a\\…ef");
        let long = "x".repeat(200_000) + " *";
        let cell = shorten(&long, MAX_CELL_CHARS);
        assert_eq!(cell.chars().count(), MAX_CELL_CHARS);
        assert!(cell.ends_with("xx *"));
        // A grid of such cells: every line as wide as the rule, nothing past it.
        let rows = vec![
            vec![long.clone(), "1".to_owned()],
            vec!["a".to_owned(), "22".to_owned()],
        ];
        let text = grid_text(&["Name", "N"], &rows, 1);
        let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert_eq!(widths, [84, 84, 84, 84]);
        assert!(text.ends_with(&format!("\na{}22\n", " ".repeat(81))));
    }

    #[test]
    fn byte_units() {
        assert_eq!(format_bytes(1000), "1000 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(3 << 20), "3.00 MiB");
        assert_eq!(format_bytes(5 << 30), "5.00 GiB");
    }

    #[test]
    fn units() {
        assert_eq!(format_ns(999), "999 ns");
        assert_eq!(format_ns(1_500), "1.50 µs");
        assert_eq!(format_ns(2_345_678), "2.35 ms");
        assert_eq!(format_ns(3_000_000_000), "3.000 s");
    }

    /// The clock's source goes through a capture file as it was, and the table names a
    /// doubtful one.
    #[test]
    fn the_clock_source_is_kept_and_a_doubtful_one_is_named() {
        use std::sync::Arc;

        use crate::capture::Capture;
        use crate::record::callsite::Callsite;
        use crate::record::clock::ClockSource;
        use crate::record::event::RawEvent;

        static STEP: Callsite = Callsite::new("step", "table.rs", 1, "tests");
        let records = vec![
            RawEvent::begin(STEP.id(), 10),
            RawEvent::end(RawEvent::end_key(STEP.id(), 10), 20),
        ];
        let through_a_file = |capture: &Capture| {
            let mut bytes = Vec::new();
            capture.write_to(&mut bytes).unwrap();
            Capture::from_bytes(&bytes).unwrap().remove(0)
        };
        for source in [
            ClockSource::Cpu,
            ClockSource::CpuUnverified,
            ClockSource::Monotonic,
        ] {
            let mut capture = Capture::from_records(vec![(1, records.clone())], 0, 100);
            capture.clock.ns_per_tick = Some(1.0);
            capture.clock.source = Some(source);
            let back = through_a_file(&capture);
            assert_eq!(back.clock.source, Some(source));
            let trace = back.decode();
            assert_eq!(trace.clock_source, Some(source));
            let table = super::Table::new(Arc::new(trace)).to_string();
            let named = table.contains(&format!("\nClock: {source}\n"));
            assert_eq!(named, source != ClockSource::Cpu, "{table}");
        }
        // Ticks that are nanoseconds (a mock clock) read as the mock's.
        let mut capture = Capture::from_records(vec![(1, records)], 0, 100);
        capture.clock.ns_per_tick = None;
        assert_eq!(
            through_a_file(&capture).clock.source,
            Some(ClockSource::Mock)
        );
    }

    /// Hand-made `tracing` records in every order (payloads missing, closes of ids never entered,
    /// exits of enters never seen, equal ticks, ids used again): decoding never panics, each
    /// async call's polls are the spans that name it, and the table summed from the records is
    /// the one of the decoded trace.
    #[test]
    fn tracing_records_in_any_order_decode_without_panic() {
        static CALL: crate::record::callsite::Callsite =
            crate::record::callsite::Callsite::new("call", file!(), line!(), module_path!());
        use crate::capture::Capture;
        use crate::record::event::RawEvent;
        use crate::trace::SpanKind;
        let call = CALL.id();
        let mut next = crate::record::test_random(0x2545_F491_4F6C_DD1D);
        for round in 0..3000 {
            let mut threads = Vec::new();
            for thread in 0..1 + next(3) {
                let mut records = Vec::new();
                let mut tick = 1;
                let mut entered: Vec<u64> = Vec::new();
                for _ in 0..next(24) {
                    tick += next(3);
                    let span = 1 + next(3);
                    match next(9) {
                        0 | 1 => {
                            records.extend(RawEvent::span_enter(call, tick, span));
                            entered.push(tick);
                        }
                        2 => {
                            // An enter without its payload.
                            records.push(RawEvent::span_enter(call, tick, span)[0]);
                            entered.push(tick);
                        }
                        3 | 4 => {
                            let at = next(entered.len() as u64 + 1) as usize;
                            let start = entered.get(at).copied().unwrap_or(tick);
                            if at < entered.len() {
                                entered.remove(at);
                            }
                            records.push(RawEvent::end(RawEvent::end_key(call, start), tick));
                        }
                        5 => records.extend(RawEvent::span_close(0, tick, span, next(2) == 0)),
                        6 => records.push(RawEvent::span_close(call, tick, span, true)[0]),
                        7 => records.push(RawEvent::payload(next(2) as u32, span)),
                        _ => {
                            records.push(RawEvent::begin(call, tick));
                            records.push(RawEvent::end(RawEvent::end_key(call, tick), tick + 1));
                        }
                    }
                }
                threads.push((7 + thread, records));
            }
            let capture = Capture::from_records(threads, 0, 200);
            let trace = capture.decode();
            for (r, call) in trace.async_spans.iter().enumerate() {
                let polls = trace
                    .threads
                    .iter()
                    .flat_map(|t| &t.spans)
                    .filter(|s| {
                        s.kind
                            == SpanKind::Poll {
                                async_span: Some(r as u32),
                            }
                    })
                    .count();
                assert_eq!(polls as u32, call.polls, "round {round}");
                assert!(call.start_ns <= call.end_ns, "round {round}");
            }
            let table = super::Table::new(std::sync::Arc::new(trace)).to_string();
            let summed = super::Table::from_captures(vec![capture]).to_string();
            assert_eq!(summed, table, "round {round}");
        }
    }
}
