//! The collected trace: every scope of a session window, paired, nested and in nanoseconds.

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
    /// flagged `open_at_stop`. Callsite ids must come from this process.
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
        let threads = threads
            .into_iter()
            .map(|raw| {
                event_count += raw.events.len() as u64;
                ThreadRecord {
                    id: raw.id,
                    name: raw.name,
                    spans: pair(&raw.events, &callsites, &converter, end_ns),
                }
            })
            .collect();
        Self {
            start_ns: converter.to_unix_ns(start_tick),
            end_ns,
            threads,
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

fn pair(
    events: &[RawEvent],
    callsites: &[&'static Callsite],
    converter: &Converter,
    end_ns: u64,
) -> Vec<SpanRecord> {
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
    for event in events {
        let Some(&callsite) = (event.id as usize)
            .checked_sub(1)
            .and_then(|i| callsites.get(i))
        else {
            continue;
        };
        match event.kind {
            RawKind::Begin => {
                let index = spans.len() as u32;
                spans.push(SpanRecord {
                    callsite,
                    start_ns: converter.to_unix_ns(event.tick),
                    end_ns: 0,
                    depth: open.len() as u32,
                    parent: open.last().copied(),
                    children_ns: 0,
                    open_at_stop: false,
                });
                open.push(index);
            }
            RawKind::End => {
                let found = open
                    .iter()
                    .rposition(|&i| std::ptr::eq(spans[i as usize].callsite, callsite));
                if let Some(position) = found {
                    let index = open.remove(position);
                    close(&mut spans, index, converter.to_unix_ns(event.tick), false);
                }
            }
        }
    }
    while let Some(index) = open.pop() {
        close(&mut spans, index, end_ns, true);
    }
    spans
}
