//! The model: every span of a session window, paired, nested and in nanoseconds.
//!
//! A [`Trace`] is what decoding a [`Capture`](crate::capture::Capture) gives
//! ([`Trace::from_capture`]), or decoding several, of one process or many, into one
//! ([`Trace::from_captures`]); reports, the table and every export read it. This module holds
//! data types only.

mod counters;
mod memory;

use crate::record::callsite::Callsite;
use crate::record::clock::ClockSource;
pub use crate::record::value::Value;
pub use counters::{
    CounterOp, CounterSample, CounterTrack, Instant, InstantScope, Number, ValueSample, ValueSeries,
};
pub use memory::{MemoryEvent, MemoryKind, MemoryStats, MemoryTrace};

/// One scope, closed, with Unix-epoch nanosecond times.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Span {
    /// Where the scope was opened; [`Span::name`] is its name.
    pub callsite: &'static Callsite,
    /// Entry time, ns since the Unix epoch.
    pub start_ns: u64,
    /// Exit time, ns since the Unix epoch (the session's end when `open_at_stop`; in a
    /// session salvaged from a file cut short, its thread's last salvaged record:
    /// [`Trace::salvage`]).
    pub end_ns: u64,
    /// Number of enclosing scopes on the same thread.
    pub depth: u32,
    /// Index of the enclosing scope in the same thread's span list.
    pub parent: Option<u32>,
    /// Total duration of the direct children on the same thread (their
    /// [`duration_ns`](Span::duration_ns), overhead compensation applied).
    pub children_ns: u64,
    /// The profiler's own probe time inside this span, which [`Span::duration_ns`] leaves out
    /// (0 without overhead compensation): the part of its own probe between its two ticks,
    /// and for each direct child the child's probe and what was left out of the child. At
    /// most the time not covered by children ([`Trace::compensation`];
    /// [`ProfilerBuilder::compensate_overhead`](crate::ProfilerBuilder::compensate_overhead)).
    pub overhead_ns: u64,
    /// The scope was still open when the session stopped and was closed at the stop time.
    pub open_at_stop: bool,
    /// The scope was entered before the window a flight recorder retains
    /// ([`ProfilerBuilder::flight_recorder`](crate::ProfilerBuilder::flight_recorder)): its entry was
    /// overwritten, but kept aside, so it has its name and entry time; the scopes it held
    /// before the window are gone with the overwritten events.
    pub cut_at_start: bool,
    /// A scope, or one poll of an async call.
    pub kind: SpanKind,
}

/// What a [`Span`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpanKind {
    /// A scope: `scope!`, or a call of a sync `#[profile]` function.
    Scope,
    /// One poll of a `#[profile] async fn` call on this thread.
    Poll {
        /// Index of the call in [`Trace::async_spans`]; `None` when the call began outside the
        /// window or on a thread the session did not record.
        async_span: Option<u32>,
    },
}

/// One call of a `#[profile] async fn`: from its first poll to its completion (or its drop),
/// whichever threads polled it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AsyncSpan {
    /// The function's callsite.
    pub callsite: &'static Callsite,
    /// First poll, ns since the Unix epoch.
    pub start_ns: u64,
    /// Completion or drop, ns since the Unix epoch (the session's end when `open_at_stop`; in
    /// a session salvaged from a file cut short, the last salvaged record of the thread that
    /// polled it last: [`Trace::salvage`]).
    pub end_ns: u64,
    /// The process it ran in: its index in [`Trace::processes`].
    pub process: u32,
    /// The thread of the first poll (a thread id of that process).
    pub thread: u64,
    /// The thread where the call completed or was dropped; `None` when `open_at_stop`.
    pub end_thread: Option<u64>,
    /// Polls recorded in the window.
    pub polls: u32,
    /// Time spent inside its polls.
    pub busy_ns: u64,
    /// Time spent inside its polls minus the scopes those polls opened.
    pub self_ns: u64,
    /// The call had not ended when the session stopped; it is closed at the stop time.
    pub open_at_stop: bool,
    /// The call began before the window a flight recorder retains for every thread
    /// ([`Trace::cut_start_ns`]): it starts there, and counts only its polls from there on.
    pub cut_at_start: bool,
}

impl AsyncSpan {
    /// The function's name.
    pub fn name(&self) -> &'static str {
        self.callsite.name()
    }

    /// Wall time from first poll to end.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

impl Span {
    /// The scope's name.
    pub fn name(&self) -> &'static str {
        self.callsite.name()
    }

    /// Wall time from entry to exit, minus the profiler's own probe time in it
    /// ([`Span::overhead_ns`]).
    pub fn duration_ns(&self) -> u64 {
        (self.end_ns - self.start_ns).saturating_sub(self.overhead_ns)
    }

    /// Duration minus the duration of the direct children.
    pub fn self_ns(&self) -> u64 {
        self.duration_ns().saturating_sub(self.children_ns)
    }
}

/// One thread's scopes, in order of entry.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ThreadTrace {
    /// The process the thread belongs to: its index in [`Trace::processes`] (0 in a trace of
    /// one process).
    pub process: u32,
    /// tickscope's id for the thread: unique in its process, never reused. Threads of two
    /// processes may share an id; a thread is known by its process and id.
    pub id: u64,
    /// The thread's name, if it had one.
    pub name: Option<String>,
    /// Scopes in order of entry; `parent` indices point into this list.
    pub spans: Vec<Span>,
    /// Allocation statistics of each span (same indices as `spans`) when the session tracked
    /// memory; empty otherwise.
    pub memory: Vec<MemoryStats>,
    /// Arguments of the spans that have any (`scope!("name", key = value)`), in span order.
    pub args: Vec<SpanArg>,
}

/// One argument of a scope.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SpanArg {
    /// Index of the span in its thread's spans.
    pub span: u32,
    /// The argument's name.
    pub key: &'static str,
    /// Its value.
    pub value: Value,
}

impl ThreadTrace {
    /// The arguments of span `span`.
    pub fn args_of(&self, span: u32) -> &[SpanArg] {
        let start = self.args.partition_point(|a| a.span < span);
        let end = start + self.args[start..].partition_point(|a| a.span == span);
        &self.args[start..end]
    }

    /// The thread's name, or `thread-<id>`.
    pub fn display_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("thread-{}", self.id))
    }
}

/// A span of a [`Trace`]: the index of its thread in [`Trace::threads`] and its index in that
/// thread's spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanRef {
    /// Index in [`Trace::threads`].
    pub thread: u32,
    /// Index in the thread's [`ThreadTrace::spans`].
    pub span: u32,
}

/// A scope that followed from a [`Link`](crate::Link) (`scope!("name", follows = link)`),
/// matched to where the link was captured by (sequence number, thread id), in the follower's
/// process (links do not cross processes).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Flow {
    /// The link's sequence number on its thread; 0 for a `tracing` span that followed from
    /// one not entered on the calling thread (the bridge links the two spans by id).
    pub seq: u32,
    /// tickscope's id of the thread that captured the link (PyTorch's forward thread id), in
    /// the follower's process.
    pub origin_thread: u64,
    /// The innermost scope open where the link was captured; `None` when the capture was not
    /// in the window (before it, or on a thread the session did not record) or in no scope.
    pub origin: Option<SpanRef>,
    /// When the link was captured, if that was in the window.
    pub origin_ns: Option<u64>,
    /// The scope that followed from it.
    pub follower: SpanRef,
}

/// A process a trace was recorded in.
///
/// A process is known by its id, executable name and host name: sessions that agree on all
/// three are one process of a trace decoded from several captures
/// ([`Trace::from_captures`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Process {
    /// Its process id.
    pub id: u32,
    /// The file name of its executable (empty when unknown).
    pub name: String,
    /// The name of the machine it ran on (empty when unknown).
    pub host: String,
}

/// Everything one session recorded in its window, or several sessions (of one process or
/// many) in theirs, on one time line.
///
/// Times are nanoseconds since the Unix epoch, each session's ticks converted with its own
/// clock calibration, so that sessions of several processes (or hosts) line up: a scope that
/// began at the same Unix instant in two processes has the same `start_ns`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Trace {
    /// Window start, ns since the Unix epoch (of several sessions: the earliest start).
    pub start_ns: u64,
    /// Window end, ns since the Unix epoch (of several sessions: the latest end).
    pub end_ns: u64,
    /// Threads with at least one event in the window, process by process. A thread that two
    /// sessions of one process recorded has an entry per session, with the same process and
    /// id.
    pub threads: Vec<ThreadTrace>,
    /// Calls of `#[profile] async fn`s, in order of their first poll (all processes).
    pub async_spans: Vec<AsyncSpan>,
    /// Events that could not be recorded (threads tearing down) during the window, summed
    /// over sessions. Always reported; 0 in a healthy run.
    pub dropped_events: u64,
    /// Events a flight recorder ([`ProfilerBuilder::flight_recorder`](crate::ProfilerBuilder::flight_recorder))
    /// overwrote before the window it retains, summed over sessions; 0 for other sessions.
    pub overwritten_events: u64,
    /// Where a flight recorder's window starts for every thread, once it overwrote events
    /// (`None` otherwise; of several sessions: the latest): just past the latest record
    /// overwritten, of any thread. Each thread's retained records start at its own oldest
    /// chunk, and before this some thread's records are gone: async calls are built only from
    /// the records from here on, so a call whose
    /// polls moved between threads is never left open by a part another thread lost. A call
    /// begun before it starts here, flagged [`AsyncSpan::cut_at_start`]; poll slices before
    /// it stay on their threads, as recorded, without a call. The threads' scopes are kept
    /// from each thread's own start.
    pub cut_start_ns: Option<u64>,
    /// Raw events post-processed into this trace.
    pub event_count: u64,
    /// Allocations and frees, when the session (or one of the sessions) tracked memory
    /// ([`ProfilerBuilder::track_memory`](crate::ProfilerBuilder::track_memory)).
    pub memory: Option<MemoryTrace>,
    /// Scopes that followed from a [`Link`](crate::Link), in the order of their threads and
    /// entry.
    pub flows: Vec<Flow>,
    /// The processes that recorded it, never empty: one for a trace of one capture (from the
    /// capture: a trace read from a file names the recording process, not the reader), one per
    /// distinct process for several ([`Trace::from_captures`]), in the order they first
    /// appear. [`ThreadTrace::process`] and the other `process` fields index it.
    pub processes: Vec<Process>,
    /// The profiler overhead subtracted from the spans' durations and self times
    /// ([`ProfilerBuilder::compensate_overhead`](crate::ProfilerBuilder::compensate_overhead)); `None` when
    /// nothing is known about it (the mock clock, whose times are exact; a capture file
    /// written before compensation existed; of several captures, the first that says).
    pub compensation: Option<Compensation>,
    /// Where the ticks came from ([`clock::source`](crate::clock::source)); `None` when nothing
    /// says (a capture file written before the field existed). Of several captures, the least
    /// trustworthy that says: the OS monotonic clock, then a CPU counter the OS does not
    /// vouch for.
    pub clock_source: Option<ClockSource>,
    /// Process-wide counters (`counter!`): one track per process and name, every thread's
    /// samples merged in time order, ordered by process then name.
    pub counters: Vec<CounterTrack>,
    /// Value distributions (`value!`): one series per process and name, in time order,
    /// ordered by process then name.
    pub values: Vec<ValueSeries>,
    /// Instants (`instant!`) of every thread, in time order (ties in thread order).
    pub instants: Vec<Instant>,
    /// What was lost of the sessions read from files cut short (salvaged without their
    /// footer: a program killed, a file truncated), summed over sessions; all zero when every
    /// session is whole.
    pub salvage: Salvage,
}

/// What a trace lost to sessions read from files cut short ([`Trace::salvage`]): a session
/// without its footer is salvaged up to its last whole record
/// ([`Capture::read`](crate::Capture::read)), and its scopes whose end was lost are closed at
/// their own thread's last salvaged record, flagged `open_at_stop` (`*` in the table).
///
/// Summed over the trace's sessions; all zero when every session is whole. A live snapshot of
/// a streaming session is whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Salvage {
    /// Sessions salvaged without their footer.
    pub sessions: u64,
    /// Bytes lost at the cut: of the chunk the input ends in, the bytes its header announces
    /// that are not salvaged (missing from the input, or part of a record cut in two), and a
    /// last piece too short for a chunk header. What lay past that chunk is unknown, and not
    /// counted.
    pub lost_bytes: u64,
    /// Scopes and async calls cut open: begun in the salvaged records, their end lost. Each is
    /// closed at its thread's last salvaged record and flagged
    /// [`Span::open_at_stop`] ([`AsyncSpan::open_at_stop`]); the poll slices of an async call
    /// are not counted apart from it.
    pub open_scopes: u64,
    /// Threads the sessions declare that kept no record: all their records lay past the cut.
    /// The trace's threads are those with at least one salvaged record.
    pub threads_without_records: u64,
}

impl Salvage {
    /// True when a session was salvaged without its footer.
    pub fn is_salvaged(&self) -> bool {
        self.sessions > 0
    }
}

/// The profiler overhead a trace's times were compensated for
/// ([`ProfilerBuilder::compensate_overhead`](crate::ProfilerBuilder::compensate_overhead)).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Compensation {
    /// Switched off: durations and self times are as recorded, probes included.
    Off,
    /// Subtracted ([`Span::overhead_ns`]): from each span's duration, `inner_ns` of its own
    /// probe; from each parent's, per direct child, `outer_ns` (the child's probe outside its
    /// recorded duration) on top of what was subtracted from the child. So a span's self time
    /// loses `inner_ns`, and `outer_ns` per child span.
    Applied {
        /// Nanoseconds of a scope's own probe that fall inside its recorded duration.
        inner_ns: f64,
        /// Nanoseconds of a child scope's probe that fall outside its recorded duration, in
        /// its parent's.
        outer_ns: f64,
    },
}

impl std::fmt::Display for Compensation {
    /// `off`, or `8.4 ns per scope + 11.2 ns per child scope`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Off => f.write_str("off"),
            Self::Applied { inner_ns, outer_ns } => write!(
                f,
                "{inner_ns:.1} ns per scope + {outer_ns:.1} ns per child scope"
            ),
        }
    }
}

impl Trace {
    /// An empty trace (a session that never ran).
    pub fn empty() -> Self {
        Self {
            start_ns: 0,
            end_ns: 0,
            threads: Vec::new(),
            async_spans: Vec::new(),
            dropped_events: 0,
            overwritten_events: 0,
            cut_start_ns: None,
            event_count: 0,
            memory: None,
            flows: Vec::new(),
            processes: vec![Process {
                id: std::process::id(),
                name: String::new(),
                host: String::new(),
            }],
            compensation: None,
            clock_source: None,
            counters: Vec::new(),
            values: Vec::new(),
            instants: Vec::new(),
            salvage: Salvage::default(),
        }
    }

    /// The counter named `name` (of the first process that has one).
    pub fn counter(&self, name: &str) -> Option<&CounterTrack> {
        self.counters.iter().find(|c| c.name == name)
    }

    /// The value distribution named `name` (of the first process that has one).
    pub fn value_series(&self, name: &str) -> Option<&ValueSeries> {
        self.values.iter().find(|v| v.name == name)
    }

    /// The process that recorded the trace: the first of [`Trace::processes`], the only one
    /// in a trace of one capture.
    ///
    /// # Panics
    /// When `processes` is empty, which no decoded trace is.
    pub fn process(&self) -> &Process {
        &self.processes[0]
    }

    /// The process of `thread`, a thread of this trace.
    ///
    /// # Panics
    /// When the thread's process is not in [`Trace::processes`].
    pub fn process_of(&self, thread: &ThreadTrace) -> &Process {
        &self.processes[thread.process as usize]
    }

    /// Distinct threads: pairs of process and thread id (a thread that two sessions of one
    /// process recorded counts once).
    pub fn thread_count(&self) -> usize {
        let mut seen: Vec<(u32, u64)> = self.threads.iter().map(|t| (t.process, t.id)).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    }

    /// A name for process `process` (an index in [`Trace::processes`]) among the trace's
    /// processes: its executable's name and id (`server 4242`, or `pid 4242` without a name),
    /// after its host's name and a `/` when the trace's processes ran on more than one host
    /// (`node-a/server 4242`).
    ///
    /// # Panics
    /// When `process` is not an index of [`Trace::processes`].
    pub fn process_label(&self, process: u32) -> String {
        let p = &self.processes[process as usize];
        let name = if p.name.is_empty() {
            format!("pid {}", p.id)
        } else {
            format!("{} {}", p.name, p.id)
        };
        if self.hosts_differ() && !p.host.is_empty() {
            format!("{}/{name}", p.host)
        } else {
            name
        }
    }

    /// True when the trace's processes ran on more than one host.
    pub(crate) fn hosts_differ(&self) -> bool {
        self.processes
            .iter()
            .any(|p| p.host != self.processes[0].host)
    }

    /// Length of the window.
    pub fn wall_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Length of the part of the window the data covers: of a flight recorder that
    /// overwrote events, from the start common to every thread's retained records
    /// ([`Trace::cut_start_ns`]) to the end; else the whole window ([`Trace::wall_ns`]). The
    /// table's wall time and shares are of this.
    pub fn covered_ns(&self) -> u64 {
        let start = self
            .cut_start_ns
            .map_or(self.start_ns, |cut| cut.max(self.start_ns));
        self.end_ns.saturating_sub(start)
    }

    /// The thread and span `at` points to.
    ///
    /// # Panics
    /// When `at` does not point into this trace.
    pub fn span(&self, at: SpanRef) -> (&ThreadTrace, &Span) {
        let thread = &self.threads[at.thread as usize];
        (thread, &thread.spans[at.span as usize])
    }

    /// All spans of all threads.
    pub fn spans(&self) -> impl Iterator<Item = (&ThreadTrace, &Span)> {
        self.threads
            .iter()
            .flat_map(|t| t.spans.iter().map(move |s| (t, s)))
    }
}
