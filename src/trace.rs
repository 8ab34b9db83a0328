//! The collected trace: every scope of a session window, paired, nested and in nanoseconds.

use std::collections::HashMap;

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
        let callsites = callsite::table();
        let end_ns = converter.to_unix_ns(end_tick);
        let mut event_count = 0;
        let mut marks = Vec::new();
        let mut threads: Vec<ThreadRecord> = threads
            .into_iter()
            .enumerate()
            .map(|(index, raw)| {
                event_count += raw.events.len() as u64;
                let mut pairing = Pairing {
                    callsites: &callsites,
                    converter: &converter,
                    thread: index,
                    marks: &mut marks,
                };
                ThreadRecord {
                    id: raw.id,
                    name: raw.name,
                    spans: pairing.pair(&raw.events, end_ns),
                }
            })
            .collect();
        let async_spans = match_async(marks, &mut threads, end_ns);
        Self {
            start_ns: converter.to_unix_ns(start_tick),
            end_ns,
            threads,
            async_spans,
            dropped_events,
            event_count,
            converter,
        }
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

struct Pairing<'a> {
    callsites: &'a [&'static Callsite],
    converter: &'a Converter,
    thread: usize,
    marks: &'a mut Vec<Mark>,
}

impl Pairing<'_> {
    fn callsite(&self, id: u32) -> Option<&'static Callsite> {
        (id as usize)
            .checked_sub(1)
            .and_then(|i| self.callsites.get(i))
            .copied()
    }

    fn pair(&mut self, events: &[RawEvent], end_ns: u64) -> Vec<SpanRecord> {
        let mut spans: Vec<SpanRecord> = Vec::with_capacity(events.len() / 2);
        let mut open: Vec<u32> = Vec::new();
        let close = |spans: &mut Vec<SpanRecord>, index: u32, end: u64, open_at_stop: bool| {
            let span = &mut spans[index as usize];
            span.end_ns = end.max(span.start_ns);
            span.open_at_stop = open_at_stop;
            let (parent, duration) = (span.parent, span.duration_ns());
            if let Some(parent) = parent {
                spans[parent as usize].children_ns += duration;
            }
        };
        let mut i = 0;
        while i < events.len() {
            let event = events[i];
            i += 1;
            // Async kinds are followed by their span id; it is missing when a snapshot was
            // taken between the two pushes.
            let span_id = match events.get(i) {
                Some(next) if next.kind == RawKind::Data => {
                    i += 1;
                    Some(next.id)
                }
                _ => None,
            };
            let Some(callsite) = self.callsite(event.id) else {
                continue;
            };
            let ns = self.converter.to_unix_ns(event.tick);
            let what = match event.kind {
                RawKind::AsyncBegin => Some(MarkKind::Begin),
                RawKind::PollBegin => Some(MarkKind::Poll(spans.len() as u32)),
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
                    let index = spans.len() as u32;
                    spans.push(SpanRecord {
                        callsite,
                        start_ns: ns,
                        end_ns: 0,
                        depth: open.len() as u32,
                        parent: open.last().copied(),
                        children_ns: 0,
                        open_at_stop: false,
                        kind: if event.kind == RawKind::Begin {
                            SpanKind::Scope
                        } else {
                            SpanKind::Poll { task: None }
                        },
                    });
                    open.push(index);
                }
                RawKind::End => {
                    let found = open
                        .iter()
                        .rposition(|&i| std::ptr::eq(spans[i as usize].callsite, callsite));
                    if let Some(position) = found {
                        let index = open.remove(position);
                        close(&mut spans, index, ns, false);
                    }
                }
                RawKind::AsyncBegin | RawKind::AsyncEnd | RawKind::Data => {}
            }
        }
        while let Some(index) = open.pop() {
            close(&mut spans, index, end_ns, true);
        }
        spans
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
    let mut open: HashMap<u32, usize> = HashMap::new();
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
