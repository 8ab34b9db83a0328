//! The collected trace: every scope of a session window, paired, nested and in nanoseconds.

use crate::hash::FxHashMap;

use crate::callsite::{self, Callsite};
use crate::clock::Converter;
use crate::event::{RawEvent, RawKind};

/// One scope, closed, with Unix-epoch nanosecond times.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// Where the scope was opened; [`SpanRecord::name`] is its name.
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

/// What a [`SpanRecord`] stands for.
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
pub struct AsyncSpanRecord {
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

impl AsyncSpanRecord {
    /// The function's name.
    pub fn name(&self) -> &'static str {
        self.callsite.name()
    }

    /// Wall time from first poll to end.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

impl SpanRecord {
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
pub struct ThreadRecord {
    /// tickscope's id for the thread: unique in the process, never reused.
    pub id: u64,
    /// The thread's name, if it had one.
    pub name: Option<String>,
    /// Scopes in order of entry; `parent` indices point into this list.
    pub spans: Vec<SpanRecord>,
}

impl ThreadRecord {
    /// The thread's name, or `thread-<id>`.
    pub fn display_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("thread-{}", self.id))
    }
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
    pub threads: Vec<ThreadRecord>,
    /// Calls of `#[profile] async fn`s, in order of their first poll.
    pub async_spans: Vec<AsyncSpanRecord>,
    /// Events that could not be recorded (threads tearing down) during the window. Always
    /// reported; 0 in a healthy run.
    pub dropped_events: u64,
    /// Raw events post-processed into this trace.
    pub event_count: u64,
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
            converter: Converter::IDENTITY,
        }
    }

    /// Pairs raw begin/end events into nested spans and converts ticks to nanoseconds.
    ///
    /// Events are taken in order per thread. An end closes the innermost open scope of the same
    /// callsite (out-of-order drops close the right one); an end with no open begin (its scope
    /// began before the window) is ignored; scopes still open at `end_tick` are closed there and
    /// flagged `open_at_stop`. Async calls are matched across threads by span id: a poll
    /// belongs to the latest call with its id that began before it. Callsite ids must come
    /// from this process.
    pub fn from_raw(
        threads: Vec<RawThread>,
        converter: Converter,
        start_tick: u64,
        end_tick: u64,
        dropped_events: u64,
    ) -> Self {
        let mut builder = Builder::new(converter, end_tick);
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

    /// All spans of all threads.
    pub fn spans(&self) -> impl Iterator<Item = (&ThreadRecord, &SpanRecord)> {
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
    threads: Vec<ThreadRecord>,
}

impl Builder {
    pub(crate) fn new(converter: Converter, end_tick: u64) -> Self {
        Self {
            callsites: callsite::table(),
            converter,
            end_ns: converter.to_unix_ns(end_tick),
            end_tick,
            event_count: 0,
            marks: Vec::new(),
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
            marks: &mut self.marks,
            spans: Vec::with_capacity(events_hint / 2),
            open: Vec::new(),
            pending: None,
            events: 0,
        };
        fill(&mut pairing);
        let events = pairing.events;
        let spans = pairing.finish(self.end_ns);
        self.event_count += events;
        if events > 0 || keep_empty {
            self.threads.push(ThreadRecord { id, name, spans });
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
            converter: self.converter,
        }
    }

    /// The tick the trace ends at.
    pub(crate) fn end_tick(&self) -> u64 {
        self.end_tick
    }
}

/// One thread's pairing state: spans so far, the open stack, and an async event waiting for
/// the [`RawKind::Data`] event that carries its span id.
pub(crate) struct Pairing<'a> {
    callsites: &'a [&'static Callsite],
    converter: &'a Converter,
    thread: usize,
    marks: &'a mut Vec<Mark>,
    spans: Vec<SpanRecord>,
    open: Vec<u32>,
    pending: Option<RawEvent>,
    events: u64,
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
            if event.kind == RawKind::Data {
                self.apply(lead, Some(event.id));
                return;
            }
            // The span id is missing when a snapshot was taken between the two pushes.
            self.apply(lead, None);
        }
        match event.kind {
            RawKind::AsyncBegin | RawKind::AsyncEnd | RawKind::PollBegin => {
                self.pending = Some(event);
            }
            // A payload whose lead event was outside the window.
            RawKind::Data => {}
            RawKind::Begin | RawKind::End => self.apply(event, None),
        }
    }

    fn close(&mut self, index: u32, end: u64, open_at_stop: bool) {
        let span = &mut self.spans[index as usize];
        span.end_ns = end.max(span.start_ns);
        span.open_at_stop = open_at_stop;
        let (parent, duration) = (span.parent, span.duration_ns());
        if let Some(parent) = parent {
            self.spans[parent as usize].children_ns += duration;
        }
    }

    fn apply(&mut self, event: RawEvent, span_id: Option<u32>) {
        let Some(callsite) = self.callsite(event.id) else {
            return;
        };
        let ns = self.converter.to_unix_ns(event.tick);
        let what = match event.kind {
            RawKind::AsyncBegin => Some(MarkKind::Begin),
            RawKind::PollBegin => Some(MarkKind::Poll(self.spans.len() as u32)),
            RawKind::AsyncEnd => Some(MarkKind::End),
            RawKind::Begin | RawKind::End | RawKind::Data => None,
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
                self.spans.push(SpanRecord {
                    callsite,
                    start_ns: ns,
                    end_ns: 0,
                    depth: self.open.len() as u32,
                    parent: self.open.last().copied(),
                    children_ns: 0,
                    open_at_stop: false,
                    kind: if event.kind == RawKind::Begin {
                        SpanKind::Scope
                    } else {
                        SpanKind::Poll { task: None }
                    },
                });
                self.open.push(index);
            }
            RawKind::End => {
                let spans = &self.spans;
                let found = self
                    .open
                    .iter()
                    .rposition(|&i| std::ptr::eq(spans[i as usize].callsite, callsite));
                if let Some(position) = found {
                    let index = self.open.remove(position);
                    self.close(index, ns, false);
                }
            }
            RawKind::AsyncBegin | RawKind::AsyncEnd | RawKind::Data => {}
        }
    }

    /// Closes what is still open at `end_ns` and returns the spans.
    fn finish(mut self, end_ns: u64) -> Vec<SpanRecord> {
        if let Some(lead) = self.pending.take() {
            self.apply(lead, None);
        }
        while let Some(index) = self.open.pop() {
            self.close(index, end_ns, true);
        }
        self.spans
    }
}

/// Matches async begins, polls and ends of all threads by span id, in time order.
fn match_async(
    mut marks: Vec<Mark>,
    threads: &mut [ThreadRecord],
    end_ns: u64,
) -> Vec<AsyncSpanRecord> {
    // At equal times: begins, then polls, then ends (the variants' order).
    marks.sort_by_key(|m| (m.ns, m.what));
    let mut records: Vec<AsyncSpanRecord> = Vec::new();
    let mut open: FxHashMap<u32, usize> = FxHashMap::default();
    for mark in marks {
        let current = open
            .get(&mark.span)
            .copied()
            .filter(|&r| std::ptr::eq(records[r].callsite, mark.callsite));
        match (mark.what, current) {
            (MarkKind::Begin, _) => {
                open.insert(mark.span, records.len());
                records.push(AsyncSpanRecord {
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
        RawEvent { tick, id, kind }
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
                RawEvent::end(step, 15),
                RawEvent::end(call, 20),
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
                RawEvent::end(step, 4),
                RawEvent::end(call, 6),
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
    fn empty_threads_are_kept_by_from_raw() {
        let trace = build(Vec::new(), 10);
        assert_eq!(trace.threads.len(), 1);
        assert!(trace.threads[0].spans.is_empty());
        assert_eq!(trace.event_count, 0);
    }
}
