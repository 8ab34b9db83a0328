//! Async spans: begins, polls and ends seen on any thread, matched by span id.

use crate::record::hash::FxHashMap;

use crate::record::callsite::Callsite;
use crate::trace::{AsyncSpan, Span, SpanKind, ThreadTrace};

/// An async record seen while pairing one thread, matched across threads afterwards.
pub(super) struct Mark {
    pub(super) ns: u64,
    pub(super) what: MarkKind,
    /// The callsite (`None` for a `tracing` span's close that names none).
    pub(super) callsite: Option<&'static Callsite>,
    /// The async span id, or for [`MarkKind::Enter`] and [`MarkKind::Close`] the `tracing`
    /// span id (another namespace).
    pub(super) span: u64,
    /// Index of the thread in the trace.
    pub(super) thread: usize,
    /// For a begin: 0, or the start (ns) of the plain scope of the same callsite, on any
    /// thread, that is the call's first slice: the call then starts there. The `tracing`
    /// bridge records a span's first enter as a plain scope and, only when the span is entered
    /// again, begins an async call that names that first enter's tick, adopting it as its
    /// first poll.
    pub(super) adopts: u64,
    /// Of a poll or an enter, where its slice stands on its thread when asked for
    /// ([`Pairing::chains`](super::pair::Pairing::chains)).
    pub(super) chain: Chain,
}

/// Where a poll's or an enter's slice stands among the spans open on its thread as it
/// begins (indices in the thread, [`Chain::NONE`] for none): its parent, the nearest
/// enclosing slice that is a poll or an enter of a call, and the outermost open span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Chain {
    pub(super) parent: u32,
    pub(super) up: u32,
    pub(super) root: u32,
    /// The spans open are no chain from a top-level span, each the parent of the next (a
    /// scope closed while one it encloses was open): none of the above holds.
    pub(super) broken: bool,
}

impl Chain {
    pub(super) const NONE: u32 = u32::MAX;
    /// Not asked for (or nothing open).
    pub(super) const UNKNOWN: Self = Self {
        parent: Self::NONE,
        up: Self::NONE,
        root: Self::NONE,
        broken: false,
    };
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum MarkKind {
    Begin,
    /// A poll slice: its index in the thread's spans.
    Poll(u32),
    End,
    /// A `tracing` span's enter: the index of its slice in the thread's spans.
    Enter(u32),
    /// A `tracing` span's close.
    Close,
}

/// What a thread's async marks were like, seen as they were made and let go.
#[derive(Clone, Copy, Debug)]
pub(super) struct MarksSeen {
    /// Some mark was made.
    pub(super) any: bool,
    /// Some mark is a `tracing` span's enter or close: whether such a span is an async call
    /// is known only from its enters on every thread, which a table's summing matches as the
    /// threads are read again with their enters marked as they come
    /// ([`Pairing::eager_enters`](super::pair::Pairing::eager_enters)).
    pub(super) tracing: bool,
    /// Every mark but `tracing` enters and closes is a begin, poll or end of a known callsite
    /// that adopts nothing, and each came at or after the one before in time: the merge of [`sum_calls`](super::call_stream) gives them in
    /// the decoded trace's order.
    pub(super) streamable: bool,
    /// The time of the last mark.
    last_ns: u64,
}

impl Default for MarksSeen {
    fn default() -> Self {
        Self {
            any: false,
            tracing: false,
            streamable: true,
            last_ns: 0,
        }
    }
}

impl MarksSeen {
    /// Notes the marks in `marks` (made after those noted before) and lets go of them.
    pub(super) fn note(&mut self, marks: &mut Vec<Mark>) {
        for mark in marks.drain(..) {
            self.any = true;
            if matches!(mark.what, MarkKind::Enter(_) | MarkKind::Close) {
                // Made as the enter resolves, after later marks: the second reading checks
                // their order.
                self.tracing = true;
                continue;
            }
            self.streamable &= matches!(
                mark.what,
                MarkKind::Begin | MarkKind::Poll(_) | MarkKind::End
            ) && mark.adopts == 0
                && mark.callsite.is_some()
                && mark.ns >= self.last_ns;
            self.last_ns = mark.ns;
        }
    }
}

/// Matches async begins, polls and ends of all threads by span id, in time order.
///
/// A call still open at the end closes where its last thread (the one that began or last
/// polled it) closes what is open: `ends`, by thread index (the window's end; in a session
/// salvaged without its footer, the thread's last record). When `salvaged`, a `tracing` span
/// entered once that did not close is an open async call, not a plain scope: its close was
/// lost with the rest of the file, and it was in flight.
///
/// With `cut_ns` (a flight recorder's window start common to every thread, before which no
/// mark was made), a call whose first mark is a poll or an end began before it: it starts
/// there, flagged `cut_at_start`. Otherwise such marks are of calls that began outside the
/// window, and are left out.
pub(super) fn match_async(
    mut marks: Vec<Mark>,
    threads: &mut [ThreadTrace],
    ends: &[u64],
    salvaged: bool,
    cut_ns: Option<u64>,
) -> Vec<AsyncSpan> {
    // At equal times: begins, then polls, then ends, then enters and closes (the variants'
    // order).
    marks.sort_by_key(|m| (m.ns, m.what));
    let mut lives = Lifetimes::of(&marks, salvaged);
    let mut records: Vec<AsyncSpan> = Vec::new();
    // The calls cut at the window's start come first: they start before every other.
    let mut cut = match cut_ns {
        Some(ns) => cut_calls(&marks, ns, threads, &mut records),
        None => FxHashMap::default(),
    };
    // The index of the thread that began or last polled each call.
    let mut last: Vec<usize> = vec![0; records.len()];
    for (&at, &r) in &cut {
        last[r] = marks[at].thread;
    }
    let mut open: FxHashMap<u64, usize> = FxHashMap::default();
    for (at, mark) in marks.into_iter().enumerate() {
        if let Some(r) = cut.remove(&at) {
            open.insert(mark.span, r);
        }
        let Some(callsite) = mark.callsite else {
            lives.close(at, &mark, &mut records, threads);
            continue;
        };
        if matches!(mark.what, MarkKind::Enter(_) | MarkKind::Close) {
            lives.apply(at, &mark, callsite, &mut records, threads);
            last.resize(records.len(), mark.thread);
            if let (MarkKind::Enter(_), Some(r)) = (mark.what, lives.call_of(at)) {
                last[r] = mark.thread;
            }
            continue;
        }
        let current = open
            .get(&mark.span)
            .copied()
            .filter(|&r| std::ptr::eq(records[r].callsite, callsite));
        match (mark.what, current) {
            (MarkKind::Begin, _) => {
                let r = records.len();
                open.insert(mark.span, r);
                records.push(AsyncSpan::begun(callsite, mark.ns, threads[mark.thread].id));
                last.push(mark.thread);
                if mark.adopts != 0 {
                    adopt(&mut records[r], r, &mark, threads);
                }
            }
            (MarkKind::Poll(index), Some(r)) => {
                let span = &mut threads[mark.thread].spans[index as usize];
                poll_of(&mut records[r], r, span);
                last[r] = mark.thread;
            }
            (MarkKind::End, Some(r)) => {
                open.remove(&mark.span);
                let record = &mut records[r];
                record.end_ns = mark.ns.max(record.start_ns);
                record.end_thread = Some(threads[mark.thread].id);
            }
            // A poll or end of a call that began outside the window.
            (_, None) | (MarkKind::Enter(_) | MarkKind::Close, _) => {}
        }
    }
    let unclosed: Vec<usize> = open.into_values().chain(lives.unclosed()).collect();
    // In a session salvaged without its footer the threads' records stop at different times,
    // and a call's end, lost, may have been on any thread: on one whose records stop before
    // it. The end is then known to be no earlier than its last poll's end and than the
    // earliest of the threads' last records, and that is where it is closed: never later
    // than it ran (the last polling thread's last record could be far past its real end).
    let polled_until = if salvaged && !unclosed.is_empty() {
        let mut until = vec![0u64; records.len()];
        for span in threads.iter().flat_map(|t| &t.spans) {
            if let SpanKind::Poll {
                async_span: Some(r),
            } = span.kind
                && let Some(until) = until.get_mut(r as usize)
            {
                *until = (*until).max(span.end_ns);
            }
        }
        until
    } else {
        Vec::new()
    };
    let earliest = ends.iter().copied().min().unwrap_or(0);
    for r in unclosed {
        let record = &mut records[r];
        let latest = || ends.iter().copied().max().unwrap_or(0);
        let mut end_ns = last
            .get(r)
            .and_then(|&t| ends.get(t))
            .copied()
            .unwrap_or_else(latest);
        if let Some(&polled) = polled_until.get(r) {
            end_ns = end_ns.min(polled.max(earliest));
        }
        record.end_ns = end_ns.max(record.start_ns);
        record.open_at_stop = true;
    }
    records
}

/// The calls among `marks` (in time order) whose first mark is a poll or an end: begun
/// before the window start `cut_ns`, each added to `records` as starting there, cut; returns
/// the index of each one's first mark with its index in `records`.
fn cut_calls(
    marks: &[Mark],
    cut_ns: u64,
    threads: &[ThreadTrace],
    records: &mut Vec<AsyncSpan>,
) -> FxHashMap<usize, usize> {
    let mut cut = FxHashMap::default();
    // The calls known at each mark, by span id, with their callsite.
    let mut known: FxHashMap<u64, &'static Callsite> = FxHashMap::default();
    for (at, mark) in marks.iter().enumerate() {
        let Some(callsite) = mark.callsite else {
            continue;
        };
        let same = |c: &&'static Callsite| std::ptr::eq(*c, callsite);
        match mark.what {
            MarkKind::Begin => {
                known.insert(mark.span, callsite);
            }
            MarkKind::Poll(_) | MarkKind::End => {
                if !known.get(&mark.span).is_some_and(same) {
                    let mut call = AsyncSpan::begun(callsite, cut_ns, threads[mark.thread].id);
                    call.cut_at_start = true;
                    cut.insert(at, records.len());
                    records.push(call);
                    known.insert(mark.span, callsite);
                }
                if mark.what == MarkKind::End {
                    known.remove(&mark.span);
                }
            }
            MarkKind::Enter(_) | MarkKind::Close => {}
        }
    }
    cut
}

/// The lifetimes of `tracing` spans: the enters of one span id up to its close (ids are
/// reused once a span closes). A lifetime of one enter is a plain scope; one of several is an
/// async call, from its first enter to its close, whose slices are its polls.
struct Lifetimes {
    /// The lifetime of each mark, by its index in time order (`usize::MAX`: none).
    of: Vec<usize>,
    /// Per lifetime: how many enters it has, its async call once begun, and whether it closed.
    lives: Vec<(u32, Option<usize>, bool)>,
    /// Per lifetime: it is an async call even when entered once (a session salvaged without
    /// its footer, and no close of it recorded).
    in_flight: Vec<bool>,
}

impl Lifetimes {
    /// The lifetimes of the `tracing` marks among `marks` (in time order); when `salvaged`,
    /// those that did not close are in flight.
    fn of(marks: &[Mark], salvaged: bool) -> Self {
        let mut of = vec![usize::MAX; marks.len()];
        let mut lives: Vec<(u32, Option<usize>, bool)> = Vec::new();
        let mut current: FxHashMap<u64, usize> = FxHashMap::default();
        for (at, mark) in marks.iter().enumerate() {
            match mark.what {
                MarkKind::Enter(_) => {
                    let life = *current.entry(mark.span).or_insert_with(|| {
                        lives.push((0, None, false));
                        lives.len() - 1
                    });
                    lives[life].0 += 1;
                    of[at] = life;
                }
                MarkKind::Close => {
                    if let Some(life) = current.remove(&mark.span) {
                        of[at] = life;
                    }
                }
                _ => {}
            }
        }
        let mut in_flight = vec![false; lives.len()];
        if salvaged {
            for life in current.into_values() {
                in_flight[life] = true;
            }
        }
        Self {
            of,
            lives,
            in_flight,
        }
    }

    /// The async call of the lifetime of the mark at index `at`, if it has one.
    fn call_of(&self, at: usize) -> Option<usize> {
        self.lives.get(*self.of.get(at)?)?.1
    }

    /// Applies the enter or close at index `at` of callsite `callsite`.
    fn apply(
        &mut self,
        at: usize,
        mark: &Mark,
        callsite: &'static Callsite,
        records: &mut Vec<AsyncSpan>,
        threads: &mut [ThreadTrace],
    ) {
        let MarkKind::Enter(index) = mark.what else {
            self.close(at, mark, records, threads);
            return;
        };
        let in_flight = self.in_flight.get(self.of[at]).copied().unwrap_or(false);
        let Some(life) = self.lives.get_mut(self.of[at]) else {
            return;
        };
        if life.0 < 2 && !in_flight {
            // Entered once: a plain scope.
            return;
        }
        let r = *life.1.get_or_insert_with(|| {
            records.push(AsyncSpan::begun(callsite, mark.ns, threads[mark.thread].id));
            records.len() - 1
        });
        let span = &mut threads[mark.thread].spans[index as usize];
        poll_of(&mut records[r], r, span);
    }

    /// Applies the close at index `at`: the end of its lifetime's async call, if any.
    fn close(
        &mut self,
        at: usize,
        mark: &Mark,
        records: &mut [AsyncSpan],
        threads: &[ThreadTrace],
    ) {
        let Some(life) = self.lives.get_mut(self.of[at]) else {
            return;
        };
        life.2 = true;
        if let Some(r) = life.1 {
            let record = &mut records[r];
            record.end_ns = mark.ns.max(record.start_ns);
            record.end_thread = Some(threads[mark.thread].id);
        }
    }

    /// The async calls of lifetimes that did not close in the window.
    fn unclosed(&self) -> impl Iterator<Item = usize> + '_ {
        self.lives
            .iter()
            .filter(|life| !life.2)
            .filter_map(|life| life.1)
    }
}

impl AsyncSpan {
    /// A call of `callsite` begun at `ns` on thread `thread`, with no poll yet.
    fn begun(callsite: &'static Callsite, ns: u64, thread: u64) -> Self {
        Self {
            callsite,
            start_ns: ns,
            end_ns: ns,
            process: 0,
            thread,
            end_thread: None,
            polls: 0,
            busy_ns: 0,
            self_ns: 0,
            open_at_stop: false,
            cut_at_start: false,
        }
    }
}

/// Makes `span` a poll of the async call `record` (at index `r`).
fn poll_of(record: &mut AsyncSpan, r: usize, span: &mut Span) {
    span.kind = SpanKind::Poll {
        async_span: Some(r as u32),
    };
    record.polls += 1;
    // Saturating: forged ticks (a capture file) may overlap anyhow.
    record.busy_ns = record.busy_ns.saturating_add(span.duration_ns());
    record.self_ns = record.self_ns.saturating_add(span.self_ns());
}

/// Makes the plain scope that `begin` adopts (see [`Mark::adopts`]) the first poll of
/// `record`, which then starts there, when a thread holds one.
fn adopt(record: &mut AsyncSpan, r: usize, begin: &Mark, threads: &mut [ThreadTrace]) {
    for thread in threads.iter_mut() {
        // Spans are in order of entry, so of start time.
        let from = thread.spans.partition_point(|s| s.start_ns < begin.adopts);
        let found = thread.spans[from..]
            .iter()
            .take_while(|s| s.start_ns == begin.adopts)
            .position(|s| {
                s.kind == SpanKind::Scope
                    && begin.callsite.is_some_and(|c| std::ptr::eq(s.callsite, c))
            });
        if let Some(at) = found {
            poll_of(record, r, &mut thread.spans[from + at]);
            record.start_ns = record.start_ns.min(begin.adopts);
            record.thread = thread.id;
            return;
        }
    }
}
