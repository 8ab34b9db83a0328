//! The collected trace: every scope of a session window, paired, nested and in nanoseconds.

use rustc_hash::FxHashMap;

use crate::record::args::ArgType;
use crate::record::callsite::{self, Callsite};
use crate::record::clock::Converter;
use crate::record::event::{RawEvent, RawKind};

/// One scope, closed, with Unix-epoch nanosecond times.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Where the scope was opened; [`Span::name`] is its name.
    pub callsite: &'static Callsite,
    /// Entry time, ns since the Unix epoch.
    pub start_ns: u64,
    /// Exit time, ns since the Unix epoch (the session's end when `open_at_stop`).
    pub end_ns: u64,
    /// Number of enclosing scopes on the same thread.
    pub depth: u32,
    /// Index of the enclosing scope in the same thread's span list.
    pub parent: Option<u32>,
    /// Total duration of the direct children on the same thread.
    pub children_ns: u64,
    /// The scope was still open when the session stopped and was closed at the stop time.
    pub open_at_stop: bool,
    /// A scope, or one poll of an async call.
    pub kind: SpanKind,
}

/// What a [`Span`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A scope: `scope!`, or a call of a sync `#[profile]` function.
    Scope,
    /// One poll of a `#[profile] async fn` call on this thread.
    Poll {
        /// Index of the call in [`Trace::async_spans`]; `None` when the call began outside the
        /// window or on a thread the session did not record.
        task: Option<u32>,
    },
}

/// One call of a `#[profile] async fn`: from its first poll to its completion (or its drop),
/// whichever threads polled it.
#[derive(Debug, Clone, PartialEq)]
pub struct AsyncSpan {
    /// The function's callsite.
    pub callsite: &'static Callsite,
    /// First poll, ns since the Unix epoch.
    pub start_ns: u64,
    /// Completion or drop, ns since the Unix epoch (the session's end when `open_at_stop`).
    pub end_ns: u64,
    /// The thread of the first poll.
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

    /// Wall time from entry to exit.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// Duration minus the duration of the direct children.
    pub fn self_ns(&self) -> u64 {
        self.duration_ns().saturating_sub(self.children_ns)
    }
}

/// One thread's scopes, in order of entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadTrace {
    /// tickscope's id for the thread: unique in the process, never reused.
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
pub struct SpanArg {
    /// Index of the span in its thread's spans.
    pub span: u32,
    /// The argument's name.
    pub key: &'static str,
    /// Its value.
    pub value: Value,
}

/// The value of a scope argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A signed integer.
    I64(i64),
    /// An unsigned integer.
    U64(u64),
    /// A float.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// A string, or a value formatted with `%` (Display) or `?` (Debug); cut with `…` when it
    /// did not fit the scope's records.
    Str(Box<str>),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::I64(v) => v.fmt(f),
            Self::U64(v) => v.fmt(f),
            Self::F64(v) => v.fmt(f),
            Self::Bool(v) => v.fmt(f),
            Self::Str(v) => v.fmt(f),
        }
    }
}

/// What a scope (one span, or a report row summing its calls) allocated and freed on its own
/// thread, recorded by [`TrackingAlloc`](crate::TrackingAlloc).
///
/// The plain fields include child scopes; the `self_` ones count what happened while the scope
/// itself was the innermost open scope. Recursive scopes count every level in the totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStats {
    /// Allocations, child scopes included.
    pub allocs: u64,
    /// Bytes allocated, child scopes included.
    pub alloc_bytes: u64,
    /// Frees, child scopes included (of any memory, also memory allocated elsewhere).
    pub frees: u64,
    /// Bytes freed, child scopes included.
    pub freed_bytes: u64,
    /// Allocations while the scope was the innermost one.
    pub self_allocs: u64,
    /// Bytes allocated while the scope was the innermost one.
    pub self_alloc_bytes: u64,
    /// Frees while the scope was the innermost one.
    pub self_frees: u64,
    /// Bytes freed while the scope was the innermost one.
    pub self_freed_bytes: u64,
    /// The most that bytes allocated minus bytes freed on the scope's thread rose above its
    /// value at entry while the scope was open (the largest over calls, in a report row).
    pub peak_bytes: u64,
}

impl MemoryStats {
    /// Adds another call's (or span's) figures: sums, and the larger peak.
    pub fn add(&mut self, other: &Self) {
        self.add_totals(other.totals());
        let [allocs, alloc_bytes, frees, freed_bytes] = other.own();
        self.self_allocs += allocs;
        self.self_alloc_bytes += alloc_bytes;
        self.self_frees += frees;
        self.self_freed_bytes += freed_bytes;
        self.peak_bytes = self.peak_bytes.max(other.peak_bytes);
    }

    /// Allocations, bytes allocated, frees, bytes freed: child scopes included.
    fn totals(&self) -> [u64; 4] {
        [self.allocs, self.alloc_bytes, self.frees, self.freed_bytes]
    }

    /// The same four, the scope's own.
    fn own(&self) -> [u64; 4] {
        [
            self.self_allocs,
            self.self_alloc_bytes,
            self.self_frees,
            self.self_freed_bytes,
        ]
    }

    fn add_totals(&mut self, [allocs, alloc_bytes, frees, freed_bytes]: [u64; 4]) {
        self.allocs += allocs;
        self.alloc_bytes += alloc_bytes;
        self.frees += frees;
        self.freed_bytes += freed_bytes;
    }
}

/// An allocation or a free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Memory was allocated (or a `realloc` returned it).
    Alloc,
    /// Memory was freed (or a `realloc` moved or resized it).
    Free,
}

/// One allocation or free of a session that tracked memory.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEvent {
    /// When, ns since the Unix epoch.
    pub ns: u64,
    /// The thread it happened on.
    pub thread: u64,
    /// The innermost open scope at the time: its index in the thread's spans, and its callsite.
    pub span: Option<(u32, &'static Callsite)>,
    /// Allocation or free.
    pub kind: MemoryKind,
    /// Size in bytes, as the allocator was told.
    pub size: u64,
    /// Address of the block.
    pub address: u64,
    /// For an allocation, the index (in [`MemoryTrace::events`]) of the free that released it,
    /// on whichever thread; `None` while it was still live at the end of the window. For a
    /// free, the index of the allocation it released; `None` when that allocation happened
    /// before the window or on a thread the session did not record.
    pub matched: Option<u32>,
}

impl MemoryEvent {
    /// The innermost open scope's name, if any.
    pub fn scope_name(&self) -> Option<&'static str> {
        self.span.map(|(_, callsite)| callsite.name())
    }
}

/// Every allocation and free of the window, all threads, in time order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryTrace {
    /// Allocations and frees in time order (frees are stamped before the memory goes back to
    /// the allocator, allocations after they return, so reuse of an address orders right).
    pub events: Vec<MemoryEvent>,
}

impl MemoryTrace {
    /// Process-wide live bytes after each event (same indices as `events`): bytes allocated
    /// in the window and not yet freed, wherever they are freed.
    pub fn live_bytes(&self) -> Vec<u64> {
        let mut live = 0u64;
        self.events
            .iter()
            .map(|e| {
                match (e.kind, e.matched) {
                    (MemoryKind::Alloc, _) => live += e.size,
                    (MemoryKind::Free, Some(alloc)) => {
                        live = live.saturating_sub(self.events[alloc as usize].size);
                    }
                    (MemoryKind::Free, None) => {}
                }
                live
            })
            .collect()
    }

    /// Allocations of the window still live at its end.
    pub fn live_at_stop(&self) -> impl Iterator<Item = &MemoryEvent> {
        self.events
            .iter()
            .filter(|e| e.kind == MemoryKind::Alloc && e.matched.is_none())
    }
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
/// matched to where the link was captured by (sequence number, thread id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// The link's sequence number on its thread.
    pub seq: u32,
    /// tickscope's id of the thread that captured the link (PyTorch's forward thread id).
    pub origin_thread: u64,
    /// The innermost scope open where the link was captured; `None` when the capture was not
    /// in the window (before it, or on a thread the session did not record) or in no scope.
    pub origin: Option<SpanRef>,
    /// When the link was captured, if that was in the window.
    pub origin_ns: Option<u64>,
    /// The scope that followed from it.
    pub follower: SpanRef,
}

/// Raw events of one thread, as collected, for [`Trace::from_raw`].
#[derive(Debug, Clone, Default)]
pub struct RawThread {
    /// The thread's id.
    pub id: u64,
    /// The thread's name.
    pub name: Option<String>,
    /// Its events, in the order they were recorded.
    pub events: Vec<RawEvent>,
}

/// Everything a session recorded in one window.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Window start, ns since the Unix epoch.
    pub start_ns: u64,
    /// Window end, ns since the Unix epoch.
    pub end_ns: u64,
    /// Threads with at least one event in the window.
    pub threads: Vec<ThreadTrace>,
    /// Calls of `#[profile] async fn`s, in order of their first poll.
    pub async_spans: Vec<AsyncSpan>,
    /// Events that could not be recorded (threads tearing down) during the window. Always
    /// reported; 0 in a healthy run.
    pub dropped_events: u64,
    /// Raw events post-processed into this trace.
    pub event_count: u64,
    /// Allocations and frees, when the session tracked memory
    /// ([`Config::track_memory`](crate::Config::track_memory)).
    pub memory: Option<MemoryTrace>,
    /// Scopes that followed from a [`Link`](crate::Link), in the order of their threads and
    /// entry.
    pub links: Vec<Flow>,
    /// The converter that turned ticks into nanoseconds.
    pub converter: Converter,
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
            event_count: 0,
            memory: None,
            links: Vec::new(),
            converter: Converter::IDENTITY,
        }
    }

    /// Pairs raw begin/end events into nested spans and converts ticks to nanoseconds.
    ///
    /// Events are taken in order per thread. An end closes the open scope it was recorded for
    /// (same callsite and begin tag), whatever order scopes were left in; an end with no open
    /// begin (its scope began before the window) is ignored; scopes still open at `end_tick`
    /// are closed there and flagged `open_at_stop`. A scope that outlives its parent keeps its
    /// own end, and its parent's `children_ns` counts only the part inside the parent. Async calls are matched across threads by span id: a poll
    /// belongs to the latest call with its id that began before it. Allocations and frees, if
    /// there are any, fill [`Trace::memory`] and [`ThreadTrace::memory`]. Callsite ids must
    /// come from this process.
    pub fn from_raw(
        threads: Vec<RawThread>,
        converter: Converter,
        start_tick: u64,
        end_tick: u64,
        dropped_events: u64,
    ) -> Self {
        let memory = threads
            .iter()
            .flat_map(|t| &t.events)
            .any(|e| matches!(e.kind, RawKind::Alloc | RawKind::Free));
        let mut builder = Builder::new(converter, end_tick, memory);
        for raw in threads {
            builder.thread(raw.id, raw.name, true, raw.events.len(), |pairing| {
                raw.events.iter().for_each(|&e| pairing.push(e));
            });
        }
        builder.finish(start_tick, dropped_events)
    }

    /// Length of the window.
    pub fn wall_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
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

/// An async event seen while pairing one thread, matched across threads afterwards.
struct Mark {
    ns: u64,
    what: MarkKind,
    callsite: &'static Callsite,
    span: u32,
    /// Index of the thread in the trace.
    thread: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum MarkKind {
    Begin,
    /// A poll slice: its index in the thread's spans.
    Poll(u32),
    End,
}

/// Builds a [`Trace`] thread by thread, pairing events as they are fed, so that collection
/// reads each thread's buffer once and copies nothing.
pub(crate) struct Builder {
    callsites: Vec<&'static Callsite>,
    converter: Converter,
    end_ns: u64,
    end_tick: u64,
    event_count: u64,
    marks: Vec<Mark>,
    /// `Some` when memory is tracked: every allocation and free, thread by thread.
    memory: Option<Vec<RawMemory>>,
    links: Links,
    threads: Vec<ThreadTrace>,
}

/// Links seen while pairing, matched once every thread is in.
#[derive(Default)]
struct Links {
    /// Captures: (thread id, sequence number) -> (innermost open span, time).
    origins: FxHashMap<(u64, u32), (Option<SpanRef>, u64)>,
    /// Scopes that follow from a link: (the scope, link thread id, sequence number).
    followers: Vec<(SpanRef, u64, u32)>,
}

/// An allocation or free as paired, before the threads are merged.
struct RawMemory {
    tick: u64,
    event: MemoryEvent,
}

impl Builder {
    /// A builder for events up to `end_tick`; `memory` keeps allocations and frees (they are
    /// skipped otherwise).
    pub(crate) fn new(converter: Converter, end_tick: u64, memory: bool) -> Self {
        Self {
            callsites: callsite::table(),
            converter,
            end_ns: converter.to_unix_ns(end_tick),
            end_tick,
            event_count: 0,
            marks: Vec::new(),
            memory: memory.then(Vec::new),
            links: Links::default(),
            threads: Vec::new(),
        }
    }

    /// Adds one thread whose events `fill` pushes in recorded order; `events_hint` is an
    /// upper bound on their number, used to size the span list. A thread given no events is
    /// left out unless `keep_empty`.
    pub(crate) fn thread(
        &mut self,
        id: u64,
        name: Option<String>,
        keep_empty: bool,
        events_hint: usize,
        fill: impl FnOnce(&mut Pairing<'_>),
    ) {
        let mut pairing = Pairing {
            callsites: &self.callsites,
            converter: &self.converter,
            thread: self.threads.len(),
            thread_id: id,
            marks: &mut self.marks,
            links: &mut self.links,
            spans: Vec::with_capacity(events_hint / 2),
            open: Vec::new(),
            pending: None,
            events: 0,
            args: Vec::new(),
            string: None,
            memory: self.memory.as_mut().map(|events| MemoryPairing {
                events,
                spans: Vec::new(),
                net: 0,
            }),
        };
        fill(&mut pairing);
        let events = pairing.events;
        let (spans, memory, args) = pairing.finish(self.end_ns);
        self.event_count += events;
        if events > 0 || keep_empty {
            self.threads.push(ThreadTrace {
                id,
                name,
                spans,
                memory,
                args,
            });
        }
    }

    pub(crate) fn finish(mut self, start_tick: u64, dropped_events: u64) -> Trace {
        let async_spans = match_async(self.marks, &mut self.threads, self.end_ns);
        Trace {
            start_ns: self.converter.to_unix_ns(start_tick),
            end_ns: self.end_ns,
            threads: self.threads,
            async_spans,
            dropped_events,
            event_count: self.event_count,
            memory: self.memory.map(match_memory),
            links: self.links.matched(),
            converter: self.converter,
        }
    }

    /// The tick the trace ends at.
    pub(crate) fn end_tick(&self) -> u64 {
        self.end_tick
    }
}

/// One thread's pairing state: spans so far, the open stack, and a lead event waiting for
/// the event that carries its payload ([`RawKind::Data`] or [`RawKind::Wide`]).
pub(crate) struct Pairing<'a> {
    callsites: &'a [&'static Callsite],
    converter: &'a Converter,
    thread: usize,
    thread_id: u64,
    marks: &'a mut Vec<Mark>,
    links: &'a mut Links,
    spans: Vec<Span>,
    open: Vec<Open>,
    pending: Option<RawEvent>,
    events: u64,
    memory: Option<MemoryPairing<'a>>,
    args: Vec<SpanArg>,
    /// A string argument being read: span, key, length, bytes so far.
    string: Option<(u32, &'static str, usize, Vec<u8>)>,
}

/// An open span while pairing: its index, and the key its end carries
/// ([`RawEvent::end_key`]).
#[derive(Clone, Copy)]
struct Open {
    index: u32,
    key: u32,
}

/// A thread's allocation bookkeeping while pairing.
struct MemoryPairing<'a> {
    events: &'a mut Vec<RawMemory>,
    /// Per span (same indices): statistics, the thread's net bytes at entry and the highest
    /// net bytes seen while it was open.
    spans: Vec<(MemoryStats, i64, i64)>,
    /// Bytes allocated minus bytes freed on this thread so far.
    net: i64,
}

/// The kind of the event that carries the payload of an event of `kind`, if it has one.
fn payload_kind(kind: RawKind) -> Option<RawKind> {
    match kind {
        RawKind::AsyncBegin | RawKind::AsyncEnd | RawKind::PollBegin => Some(RawKind::Data),
        RawKind::Alloc | RawKind::Free | RawKind::BeginFollows => Some(RawKind::Wide),
        RawKind::Begin
        | RawKind::End
        | RawKind::Data
        | RawKind::Wide
        | RawKind::Link
        | RawKind::ArgI64
        | RawKind::ArgU64
        | RawKind::ArgF64
        | RawKind::ArgBool
        | RawKind::ArgStr
        | RawKind::Bytes => None,
    }
}

impl Pairing<'_> {
    fn callsite(&self, id: u32) -> Option<&'static Callsite> {
        (id as usize)
            .checked_sub(1)
            .and_then(|i| self.callsites.get(i))
            .copied()
    }

    /// Takes the thread's next event.
    #[inline]
    pub(crate) fn push(&mut self, event: RawEvent) {
        self.events += 1;
        if let Some(lead) = self.pending.take() {
            if payload_kind(lead.kind) == Some(event.kind) {
                self.lead(lead, Some(event));
                return;
            }
            // An async span id is missing when a snapshot was taken between the two pushes.
            self.lead(lead, None);
        }
        if self.string.is_some() && event.kind != RawKind::Bytes {
            self.end_string();
        }
        match (payload_kind(event.kind), event.kind) {
            (Some(_), _) => self.pending = Some(event),
            // A payload whose lead event was outside the window.
            (None, RawKind::Data | RawKind::Wide) => {}
            (None, RawKind::Bytes) => self.bytes(&event),
            (None, kind) if kind.carries_data() => self.arg(event),
            (None, _) => self.apply(event, None),
        }
    }

    /// An argument of the innermost open span (the one just entered).
    fn arg(&mut self, event: RawEvent) {
        let (Some(&Open { index: span, .. }), Some(key)) =
            (self.open.last(), self.callsite(event.id))
        else {
            return;
        };
        let key = key.name();
        let Some(ty) = ArgType::of(&event) else {
            return;
        };
        let Some(value) = ty.scalar(event.tick) else {
            let len = event.tick as usize;
            // The length comes from the record: bound what a corrupt one can reserve.
            let reserve = len.min(crate::record::args::MAX_STR);
            self.string = Some((span, key, len, Vec::with_capacity(reserve)));
            if len == 0 {
                self.end_string();
            }
            return;
        };
        self.args.push(SpanArg { span, key, value });
    }

    /// A piece of the string argument being read.
    fn bytes(&mut self, event: &RawEvent) {
        if let Some((_, _, len, bytes)) = &mut self.string {
            crate::record::args::push_bytes(bytes, event, *len);
            if bytes.len() == *len {
                self.end_string();
            }
        }
    }

    fn end_string(&mut self) {
        if let Some((span, key, _, bytes)) = self.string.take() {
            let value = Value::Str(String::from_utf8_lossy(&bytes).into());
            self.args.push(SpanArg { span, key, value });
        }
    }

    /// Applies an event that carries a payload, with its payload event if it came.
    fn lead(&mut self, lead: RawEvent, payload: Option<RawEvent>) {
        match lead.kind {
            RawKind::Alloc | RawKind::Free => {
                // The two records are published together, so only bad input loses a block.
                if let Some(block) = payload {
                    let size = u64::from(lead.id) | u64::from(block.id) << 32;
                    self.memory_event(lead, size, block.tick);
                }
            }
            RawKind::BeginFollows => {
                let span = self.spans.len() as u32;
                self.apply(RawEvent::begin(lead.id, lead.tick), None);
                if let (Some(wide), true) = (payload, self.spans.len() as u32 > span) {
                    let at = SpanRef {
                        thread: self.thread as u32,
                        span,
                    };
                    self.links.followers.push((at, wide.tick, wide.id));
                }
            }
            _ => self.apply(lead, payload.map(|p| p.id)),
        }
    }

    fn memory_event(&mut self, lead: RawEvent, size: u64, address: u64) {
        let Some(memory) = &mut self.memory else {
            return;
        };
        let alloc = lead.kind == RawKind::Alloc;
        let innermost = self.open.last().map(|o| o.index);
        let delta = i64::try_from(size).unwrap_or(i64::MAX);
        memory.net = if alloc {
            memory.net.saturating_add(delta)
        } else {
            memory.net.saturating_sub(delta)
        };
        if let Some(index) = innermost {
            let (stats, _, peak) = &mut memory.spans[index as usize];
            if alloc {
                stats.self_allocs += 1;
                stats.self_alloc_bytes += size;
                *peak = (*peak).max(memory.net);
            } else {
                stats.self_frees += 1;
                stats.self_freed_bytes += size;
            }
        }
        memory.events.push(RawMemory {
            tick: lead.tick,
            event: MemoryEvent {
                ns: self.converter.to_unix_ns(lead.tick),
                thread: self.thread_id,
                span: innermost.map(|i| (i, self.spans[i as usize].callsite)),
                kind: if alloc {
                    MemoryKind::Alloc
                } else {
                    MemoryKind::Free
                },
                size,
                address,
                matched: None,
            },
        });
    }

    fn close(&mut self, index: u32, end: u64, open_at_stop: bool) {
        let span = &mut self.spans[index as usize];
        span.end_ns = end.max(span.start_ns);
        span.open_at_stop = open_at_stop;
        let (parent, start, end) = (span.parent, span.start_ns, span.end_ns);
        // The time this span ran counts as child time of the ancestors it ran inside: all of
        // it for its parent when that is still open (the usual case); when its guard outlived
        // the parent's (dropped out of order), the parent holds the part before its own end
        // and the next ancestors the rest, so the self times on a thread never add up to more
        // than the time that passed.
        let mut covered = start;
        let mut ancestor = parent;
        while let Some(at) = ancestor {
            if covered >= end {
                break;
            }
            let open = self.open.iter().rev().any(|o| o.index == at);
            let span = &mut self.spans[at as usize];
            let until = if open { end } else { end.min(span.end_ns) };
            if until > covered {
                span.children_ns += until - covered;
                covered = until;
            }
            if open {
                break;
            }
            ancestor = span.parent;
        }
        if let Some(memory) = &mut self.memory {
            // Totals so far hold the children's totals: add the span's own figures.
            let (stats, base, peak) = &mut memory.spans[index as usize];
            let own = stats.own();
            stats.add_totals(own);
            stats.peak_bytes = u64::try_from(*peak - *base).unwrap_or(0);
            let (child, child_peak) = (stats.totals(), *peak);
            if let Some(parent) = parent {
                let (stats, _, peak) = &mut memory.spans[parent as usize];
                stats.add_totals(child);
                *peak = (*peak).max(child_peak);
            }
        }
    }

    fn apply(&mut self, event: RawEvent, span_id: Option<u32>) {
        if event.kind == RawKind::Link {
            let span = self.open.last().map(|o| SpanRef {
                thread: self.thread as u32,
                span: o.index,
            });
            let ns = self.converter.to_unix_ns(event.tick);
            self.links
                .origins
                .insert((self.thread_id, event.id), (span, ns));
            return;
        }
        if event.kind == RawKind::End {
            // The newest open span with the end's key: the top one unless guards were dropped
            // out of order. An end whose entry was outside the window closes nothing.
            let key = event.id;
            if let Some(position) = self.open.iter().rposition(|o| o.key == key) {
                let index = self.open.remove(position).index;
                let ns = self.converter.to_unix_ns(event.tick);
                self.close(index, ns, false);
            }
            return;
        }
        let Some(callsite) = self.callsite(event.id) else {
            return;
        };
        let ns = self.converter.to_unix_ns(event.tick);
        let what = match event.kind {
            RawKind::AsyncBegin => Some(MarkKind::Begin),
            RawKind::PollBegin => Some(MarkKind::Poll(self.spans.len() as u32)),
            RawKind::AsyncEnd => Some(MarkKind::End),
            _ => None,
        };
        if let (Some(what), Some(span)) = (what, span_id.filter(|&s| s != 0)) {
            self.marks.push(Mark {
                ns,
                what,
                callsite,
                span,
                thread: self.thread,
            });
        }
        match event.kind {
            RawKind::Begin | RawKind::PollBegin => {
                let index = self.spans.len() as u32;
                self.spans.push(Span {
                    callsite,
                    start_ns: ns,
                    end_ns: 0,
                    depth: self
                        .open
                        .last()
                        .map_or(0, |o| self.spans[o.index as usize].depth + 1),
                    parent: self.open.last().map(|o| o.index),
                    children_ns: 0,
                    open_at_stop: false,
                    kind: if event.kind == RawKind::Begin {
                        SpanKind::Scope
                    } else {
                        SpanKind::Poll { task: None }
                    },
                });
                if let Some(memory) = &mut self.memory {
                    memory
                        .spans
                        .push((MemoryStats::default(), memory.net, memory.net));
                }
                self.open.push(Open {
                    index,
                    key: RawEvent::end_key(event.id, event.tick),
                });
            }
            _ => {}
        }
    }

    /// Closes what is still open at `end_ns` and returns the spans, their memory figures and
    /// their arguments.
    fn finish(mut self, end_ns: u64) -> (Vec<Span>, Vec<MemoryStats>, Vec<SpanArg>) {
        if let Some(lead) = self.pending.take() {
            self.lead(lead, None);
        }
        self.end_string();
        while let Some(open) = self.open.pop() {
            self.close(open.index, end_ns, true);
        }
        let memory = self
            .memory
            .map(|m| m.spans.into_iter().map(|(stats, ..)| stats).collect())
            .unwrap_or_default();
        (self.spans, memory, self.args)
    }
}

impl Links {
    fn matched(self) -> Vec<Flow> {
        let Links { origins, followers } = self;
        followers
            .into_iter()
            .map(|(follower, origin_thread, seq)| {
                let found = origins.get(&(origin_thread, seq));
                Flow {
                    seq,
                    origin_thread,
                    origin: found.and_then(|&(span, _)| span),
                    origin_ns: found.map(|&(_, ns)| ns),
                    follower,
                }
            })
            .collect()
    }
}

/// Puts the allocations and frees of all threads in time order and matches each free to the
/// allocation it released, by address. Ties keep thread order, and within a thread the
/// recorded order.
fn match_memory(mut raw: Vec<RawMemory>) -> MemoryTrace {
    raw.sort_by_key(|m| m.tick);
    let mut events: Vec<MemoryEvent> = raw.into_iter().map(|m| m.event).collect();
    let mut live: FxHashMap<u64, u32> = FxHashMap::default();
    for i in 0..events.len() {
        let (kind, address) = (events[i].kind, events[i].address);
        let index = i as u32;
        match kind {
            // A still-live allocation at the same address lost its free (a thread the session
            // does not record): it stays unmatched.
            MemoryKind::Alloc => {
                live.insert(address, index);
            }
            MemoryKind::Free => {
                if let Some(alloc) = live.remove(&address) {
                    events[alloc as usize].matched = Some(index);
                    events[i].matched = Some(alloc);
                }
            }
        }
    }
    MemoryTrace { events }
}

/// Matches async begins, polls and ends of all threads by span id, in time order.
fn match_async(
    mut marks: Vec<Mark>,
    threads: &mut [ThreadTrace],
    end_ns: u64,
) -> Vec<AsyncSpan> {
    // At equal times: begins, then polls, then ends (the variants' order).
    marks.sort_by_key(|m| (m.ns, m.what));
    let mut records: Vec<AsyncSpan> = Vec::new();
    let mut open: FxHashMap<u32, usize> = FxHashMap::default();
    for mark in marks {
        let current = open
            .get(&mark.span)
            .copied()
            .filter(|&r| std::ptr::eq(records[r].callsite, mark.callsite));
        match (mark.what, current) {
            (MarkKind::Begin, _) => {
                open.insert(mark.span, records.len());
                records.push(AsyncSpan {
                    callsite: mark.callsite,
                    start_ns: mark.ns,
                    end_ns: mark.ns,
                    thread: threads[mark.thread].id,
                    end_thread: None,
                    polls: 0,
                    busy_ns: 0,
                    self_ns: 0,
                    open_at_stop: false,
                });
            }
            (MarkKind::Poll(index), Some(r)) => {
                let span = &mut threads[mark.thread].spans[index as usize];
                span.kind = SpanKind::Poll {
                    task: Some(r as u32),
                };
                let record = &mut records[r];
                record.polls += 1;
                record.busy_ns += span.duration_ns();
                record.self_ns += span.self_ns();
            }
            (MarkKind::End, Some(r)) => {
                open.remove(&mark.span);
                let record = &mut records[r];
                record.end_ns = mark.ns.max(record.start_ns);
                record.end_thread = Some(threads[mark.thread].id);
            }
            // A poll or end of a call that began outside the window.
            (_, None) => {}
        }
    }
    for r in open.into_values() {
        let record = &mut records[r];
        record.end_ns = end_ns.max(record.start_ns);
        record.open_at_stop = true;
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    static CALL: Callsite = Callsite::new("call", file!(), line!(), module_path!());
    static STEP: Callsite = Callsite::new("step", file!(), line!(), module_path!());

    fn ev(kind: RawKind, id: u32, tick: u64) -> RawEvent {
        RawEvent::new(kind, id, tick)
    }

    fn build(events: Vec<RawEvent>, end_tick: u64) -> Trace {
        let raw = vec![RawThread {
            id: 7,
            name: None,
            events,
        }];
        Trace::from_raw(raw, Converter::new(0, 0, 1.0), 0, end_tick, 0)
    }

    #[test]
    fn async_call_with_payloads_pairs_across_kinds() {
        let (call, step) = (CALL.id(), STEP.id());
        let trace = build(
            vec![
                ev(RawKind::AsyncBegin, call, 10),
                RawEvent::data(5, 10),
                ev(RawKind::PollBegin, call, 10),
                RawEvent::data(5, 10),
                RawEvent::begin(step, 12),
                RawEvent::end(RawEvent::end_key(step, 12), 15),
                RawEvent::end(RawEvent::end_key(call, 10), 20),
                ev(RawKind::AsyncEnd, call, 20),
                RawEvent::data(5, 20),
            ],
            100,
        );
        assert_eq!(trace.event_count, 9);
        let spans = &trace.threads[0].spans;
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].kind, SpanKind::Poll { task: Some(0) });
        assert_eq!((spans[0].start_ns, spans[0].end_ns), (10, 20));
        assert_eq!((spans[1].depth, spans[1].parent), (1, Some(0)));
        let calls = &trace.async_spans;
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].start_ns, calls[0].end_ns), (10, 20));
        assert_eq!(
            (calls[0].polls, calls[0].busy_ns, calls[0].self_ns),
            (1, 10, 7)
        );
        assert!(!calls[0].open_at_stop);
    }

    #[test]
    fn missing_and_orphan_payloads() {
        let (call, step) = (CALL.id(), STEP.id());
        let trace = build(
            vec![
                // The payload of an event before the window.
                RawEvent::data(9, 1),
                // A poll whose span id was not pushed yet when the snapshot was taken.
                ev(RawKind::PollBegin, call, 2),
                RawEvent::begin(step, 3),
                RawEvent::end(RawEvent::end_key(step, 3), 4),
                RawEvent::end(RawEvent::end_key(call, 2), 6),
                // A lead event with its payload cut off at the very end.
                ev(RawKind::AsyncEnd, call, 8),
            ],
            50,
        );
        assert_eq!(trace.event_count, 6);
        let spans = &trace.threads[0].spans;
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].kind, SpanKind::Poll { task: None });
        assert_eq!((spans[0].start_ns, spans[0].end_ns), (2, 6));
        assert_eq!(spans[0].self_ns(), 3);
        assert!(trace.async_spans.is_empty());
    }

    #[test]
    fn frees_match_allocations_by_address_in_time_order_across_threads() {
        const X: u64 = 0x7f00_0000_1000;
        let alloc = |size, tick| RawEvent::memory(RawKind::Alloc, size, X, tick);
        let free = |size, tick| RawEvent::memory(RawKind::Free, size, X, tick);
        let step = STEP.id();
        let thread = |id, events: Vec<[RawEvent; 2]>| RawThread {
            id,
            name: None,
            events: events.concat(),
        };
        let mut a = thread(1, vec![alloc(1 << 33, 10), free(7, 40)]);
        a.events.insert(0, RawEvent::begin(step, 5));
        a.events.push(RawEvent::end(RawEvent::end_key(step, 5), 50));
        let threads = vec![
            a,
            // Frees A's block (and an older one first), then gets the same address again.
            thread(2, vec![free(3, 2), free(1 << 33, 20), alloc(7, 30)]),
        ];
        let trace = Trace::from_raw(threads, Converter::new(0, 0, 1.0), 0, 100, 0);
        let memory = trace.memory.as_ref().unwrap();
        let got: Vec<_> = memory
            .events
            .iter()
            .map(|e| (e.ns, e.thread, e.kind, e.size, e.matched))
            .collect();
        use MemoryKind::{Alloc, Free};
        assert_eq!(
            got,
            [
                (2, 2, Free, 3, None),
                (10, 1, Alloc, 1 << 33, Some(2)),
                (20, 2, Free, 1 << 33, Some(1)),
                (30, 2, Alloc, 7, Some(4)),
                (40, 1, Free, 7, Some(3)),
            ]
        );
        assert!(memory.events.iter().all(|e| e.address == X));
        assert_eq!(memory.live_bytes(), [0, 1 << 33, 0, 7, 0]);
        assert_eq!(memory.live_at_stop().count(), 0);
        let step_stats = trace.threads[0].memory[0];
        assert_eq!(
            (
                step_stats.alloc_bytes,
                step_stats.freed_bytes,
                step_stats.peak_bytes
            ),
            (1 << 33, 7, 1 << 33)
        );
    }

    #[test]
    fn empty_threads_are_kept_by_from_raw() {
        let trace = build(Vec::new(), 10);
        assert_eq!(trace.threads.len(), 1);
        assert!(trace.threads[0].spans.is_empty());
        assert_eq!(trace.event_count, 0);
    }
}
