//! Async calls summed as the threads are read again, without keeping their spans: the calls
//! of a `#[profile] async fn` (async begins, polls and ends, matched by span id across
//! threads) made by a merge of every thread's marks in the order the decoded trace matches
//! them, each thread read a chunk at a time. What [`match_async`](super::async_spans) gives a
//! table (each call's callsite, thread, wall, busy and self time, polls, and whether it was
//! open at the stop), in memory bounded by the threads (a pairing window each) and the calls
//! open at once.
//!
//! Only marks that this merge orders as the decoded trace sorts them are summed this way
//! ([`MarksSeen::streamable`](super::async_spans::MarksSeen)): begins, polls and ends, each thread's in time order, none
//! adopting a first slice. `tracing` spans entered several times (whose enters and closes
//! decide across threads whether a span is a call), and a flight recorder's window (whose
//! calls cut at its start come first), are decoded whole.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;

use crate::capture::CaptureThread;
use crate::decode::quantiles::Durations;
use crate::record::callsite::Callsite;
use crate::record::hash::{FxHashMap, FxHashSet};
use crate::trace::{AsyncSpan, Span, SpanKind};

use super::async_spans::{Mark, MarkKind};
use super::call_order::InOrder;
use super::links::{Keep, Links};
use super::pair::Pairing;
use super::summary;
use super::summary::CallSums;
use super::thread::Shared;

/// The calls of some threads summed ([`sum_calls`]).
pub(super) struct Calls {
    /// Per thread (by its index among the threads read), the calls begun there, by callsite
    /// in order of the first call.
    pub(super) by_thread: Vec<Vec<CallSums>>,
    /// The calls still open at the stop.
    pub(super) open: u64,
}

/// Sums the async calls of `threads` (the capture's threads with records, in the trace's
/// order), each thread's remaining scopes closing at `ends` (by index), keeping every
/// duration when `exact`.
pub(super) fn sum_calls(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    ends: &[u64],
    exact: bool,
) -> Calls {
    let mut sums: Vec<Sums> = threads.iter().map(|_| Sums::new(exact)).collect();
    let open = each_call(shared, threads, ends, &mut |call| {
        sums[call.thread].add(call)
    });
    Calls {
        by_thread: sums.into_iter().map(|s| s.sites).collect(),
        open,
    }
}

/// Hands each async call of `threads` (the capture's threads with records, in the trace's
/// order, of process `process` in the trace) to `f` in the order they began, as
/// `Trace::async_spans` holds them, each thread's remaining scopes closing at `ends` (by
/// index); stops at the first error of `f`.
pub(super) fn each_call_in_order(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    ends: &[u64],
    process: u32,
    f: &mut dyn FnMut(&AsyncSpan) -> io::Result<()>,
) -> io::Result<()> {
    let mut order = InOrder::new(f);
    each_call(shared, threads, ends, &mut |call| {
        let span = AsyncSpan {
            callsite: call.callsite,
            start_ns: call.start_ns,
            end_ns: call.start_ns + call.wall_ns(),
            process,
            thread: threads[call.thread].id,
            end_thread: call.end_thread.map(|t| threads[t].id),
            polls: call.polls,
            busy_ns: call.busy_ns,
            self_ns: call.self_ns,
            open_at_stop: call.open_at_stop,
            cut_at_start: false,
        };
        order.give(call.rank, span);
    });
    order.finish()
}

/// Hands each async call of `threads` (the capture's threads with records, in the trace's
/// order) to `settled` once it ended and its polls are final (the calls still open at the
/// end last), each thread's remaining scopes closing at `ends` (by index). Returns how many
/// were open at the stop. Each call has its rank: its index among the calls of the decoded
/// trace (`Trace::async_spans` of this capture alone).
pub(super) fn each_call(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    ends: &[u64],
    settled: &mut dyn FnMut(&Call),
) -> u64 {
    let mut stores: Vec<(Vec<Mark>, Links)> = threads
        .iter()
        .map(|_| (Vec::new(), Links::keeping(Keep::Nothing)))
        .collect();
    let mut feeds: Vec<Feed<'_, '_>> = (threads.iter().enumerate())
        .zip(&mut stores)
        .map(|((index, &thread), (marks, links))| {
            let mut pairing = Pairing::new(
                shared.callsites,
                (&shared.converter, shared.probe),
                (index, thread.id),
                marks,
                links,
                None,
                0,
            );
            pairing.drain_every(summary::WINDOW);
            shared.start(&mut pairing, thread);
            Feed {
                shared,
                thread,
                end_ns: ends[index],
                pairing,
                chunk: 0,
                keep: false,
                done: false,
                queue: VecDeque::new(),
                pushed: 0,
                queued_polls: FxHashSet::default(),
                finished_polls: FxHashMap::default(),
                pending: FxHashMap::default(),
            }
        })
        .collect();
    let mut matcher = Matcher {
        calls: Vec::new(),
        free: Vec::new(),
        open: FxHashMap::default(),
        next_rank: 0,
        settled,
    };
    let mut heads: BinaryHeap<Reverse<(Key, usize)>> = BinaryHeap::new();
    for (at, feed) in feeds.iter_mut().enumerate() {
        if let Some(key) = feed.next_key(at, &mut matcher) {
            heads.push(Reverse((key, at)));
        }
    }
    while let Some(Reverse((_, at))) = heads.pop() {
        let feed = &mut feeds[at];
        let Some((mark, _)) = feed.queue.pop_front() else {
            continue;
        };
        matcher.apply(&mark, feed);
        if let Some(key) = feed.next_key(at, &mut matcher) {
            heads.push(Reverse((key, at)));
        }
    }
    // Every thread is read and its spans final: what is still open closes where its last
    // thread (the one that began or last polled it) closes what is open, in the order the
    // calls began.
    let mut open = 0;
    let earliest = ends.iter().copied().min().unwrap_or(0);
    let mut unclosed: Vec<usize> = std::mem::take(&mut matcher.open).into_values().collect();
    unclosed.sort_unstable_by_key(|&slot| matcher.calls[slot].as_ref().map(|c| c.rank));
    for slot in unclosed {
        let Some(call) = matcher.calls[slot].as_mut() else {
            continue;
        };
        let mut end_ns = ends.get(call.last).copied().unwrap_or(call.start_ns);
        // Of a session salvaged without its footer, never past the earliest of the threads'
        // last records, unless a poll ran later (see `match_async`).
        if shared.salvaged {
            end_ns = end_ns.min(call.polled_until.max(earliest));
        }
        call.end_ns = Some(end_ns.max(call.start_ns));
        call.open_at_stop = true;
        open += 1;
        matcher.settle(slot);
    }
    open
}

/// The order the decoded trace matches marks in: time, kind (begins, then polls by the
/// index of their slice, then ends), thread, then the order the thread made them.
type Key = (u64, u8, u32, usize, u64);

/// A call being matched (see [`AsyncSpan`](crate::trace::AsyncSpan)).
pub(super) struct Call {
    pub(super) callsite: &'static Callsite,
    /// Its index among the calls, in the order they began.
    pub(super) rank: u64,
    pub(super) start_ns: u64,
    /// The thread that began it (index), and the one that began or last polled it.
    pub(super) thread: usize,
    last: usize,
    /// The thread that ended it (index), if one did.
    pub(super) end_thread: Option<usize>,
    pub(super) polls: u32,
    pub(super) busy_ns: u64,
    pub(super) self_ns: u64,
    /// The latest end of its polls.
    polled_until: u64,
    /// Its polls matched whose slice is not final yet.
    pending: u32,
    /// Its end, once known.
    pub(super) end_ns: Option<u64>,
    pub(super) open_at_stop: bool,
}

impl Call {
    /// Its wall time: from its start to its end (0 before it is known).
    pub(super) fn wall_ns(&self) -> u64 {
        self.end_ns.map_or(0, |end| end - self.start_ns)
    }
}

/// The sums of one thread's calls.
struct Sums {
    exact: bool,
    sites: Vec<CallSums>,
    index: FxHashMap<usize, usize>,
}

impl Sums {
    fn new(exact: bool) -> Self {
        Self {
            exact,
            sites: Vec::new(),
            index: FxHashMap::default(),
        }
    }

    fn add(&mut self, call: &Call) {
        let address = std::ptr::from_ref(call.callsite) as usize;
        let (sites, exact) = (&mut self.sites, self.exact);
        let at = *self.index.entry(address).or_insert_with(|| {
            sites.push(CallSums {
                callsite: call.callsite,
                durations: Durations::new(exact),
                wall_ns: 0,
                busy_ns: 0,
                self_ns: 0,
                count: 0,
                open: 0,
            });
            sites.len() - 1
        });
        let site = &mut self.sites[at];
        let wall = call.wall_ns();
        site.durations.push(wall);
        site.wall_ns = site.wall_ns.saturating_add(wall);
        site.busy_ns = site.busy_ns.saturating_add(call.busy_ns);
        site.self_ns = site.self_ns.saturating_add(call.self_ns);
        site.count += 1;
        site.open += u64::from(call.open_at_stop);
    }
}

/// Matches marks in order (as `match_async` does, for begins, polls and ends) and sums each
/// call once it ended and its polls are final.
struct Matcher<'f> {
    calls: Vec<Option<Call>>,
    /// Slots of `calls` free again.
    free: Vec<usize>,
    /// The call open for each span id.
    open: FxHashMap<u64, usize>,
    /// The rank of the next call begun.
    next_rank: u64,
    /// What is done with each call once settled.
    settled: &'f mut dyn FnMut(&Call),
}

impl Matcher<'_> {
    fn apply(&mut self, mark: &Mark, feed: &mut Feed<'_, '_>) {
        let Some(callsite) = mark.callsite else {
            return;
        };
        let current = (self.open.get(&mark.span).copied()).filter(|&slot| {
            self.calls[slot]
                .as_ref()
                .is_some_and(|c| same(c.callsite, callsite))
        });
        match (mark.what, current) {
            (MarkKind::Begin, _) => {
                let call = Call {
                    callsite,
                    rank: self.next_rank,
                    start_ns: mark.ns,
                    thread: mark.thread,
                    last: mark.thread,
                    end_thread: None,
                    polls: 0,
                    busy_ns: 0,
                    self_ns: 0,
                    polled_until: 0,
                    pending: 0,
                    end_ns: None,
                    open_at_stop: false,
                };
                self.next_rank += 1;
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.calls[slot] = Some(call);
                        slot
                    }
                    None => {
                        self.calls.push(Some(call));
                        self.calls.len() - 1
                    }
                };
                // A call of the same id still open is no longer matched: it keeps the end
                // it was begun with (its start), as the decoded trace's does.
                if let Some(old) = self.open.insert(mark.span, slot)
                    && let Some(call) = self.calls[old].as_mut()
                {
                    call.end_ns = Some(call.start_ns);
                    self.settle(old);
                }
            }
            (MarkKind::Poll(index), matched) => {
                if let Some(slot) = matched
                    && let Some(call) = self.calls[slot].as_mut()
                {
                    call.last = mark.thread;
                    call.polls += 1;
                }
                feed.queued_polls.remove(&index);
                match feed.finished_polls.remove(&index) {
                    Some(poll) => {
                        if let Some(slot) = matched {
                            self.poll_done(slot, poll);
                        }
                    }
                    None => {
                        if let Some(slot) = matched
                            && let Some(call) = self.calls[slot].as_mut()
                        {
                            call.pending += 1;
                        }
                        feed.pending.insert(index, matched);
                    }
                }
            }
            (MarkKind::End, Some(slot)) => {
                self.open.remove(&mark.span);
                if let Some(call) = self.calls[slot].as_mut() {
                    call.end_ns = Some(mark.ns.max(call.start_ns));
                    call.end_thread = Some(mark.thread);
                }
                self.settle(slot);
            }
            // An end of a call begun outside the window; enters and closes are not streamed.
            (MarkKind::End | MarkKind::Enter(_) | MarkKind::Close, _) => {}
        }
    }

    /// A poll of the call at `slot` is final.
    fn poll_done(&mut self, slot: usize, poll: PollDone) {
        let Some(call) = self.calls[slot].as_mut() else {
            return;
        };
        // Saturating: forged ticks (a capture file) may overlap anyhow.
        call.busy_ns = call.busy_ns.saturating_add(poll.duration_ns);
        call.self_ns = call.self_ns.saturating_add(poll.self_ns);
        call.polled_until = call.polled_until.max(poll.end_ns);
        self.settle(slot);
    }

    /// A poll of the call at `slot` that was pending is final.
    fn pending_done(&mut self, slot: usize, poll: PollDone) {
        if let Some(call) = self.calls[slot].as_mut() {
            call.pending -= 1;
        }
        self.poll_done(slot, poll);
    }

    /// Sums the call at `slot` when it ended and its polls are final, and frees its slot.
    fn settle(&mut self, slot: usize) {
        let Some(call) = self.calls[slot].as_ref() else {
            return;
        };
        if call.end_ns.is_none() || call.pending > 0 {
            return;
        }
        (self.settled)(call);
        self.calls[slot] = None;
        self.free.push(slot);
    }
}

fn same(a: &'static Callsite, b: &'static Callsite) -> bool {
    std::ptr::eq(a, b)
}

/// What a call takes of a poll slice once it is final.
#[derive(Clone, Copy)]
struct PollDone {
    duration_ns: u64,
    self_ns: u64,
    end_ns: u64,
}

/// A thread read again a chunk at a time for its marks and its polls' times.
struct Feed<'s, 'c> {
    shared: &'s Shared<'c>,
    thread: &'s CaptureThread,
    /// Where what is still open on the thread closes.
    end_ns: u64,
    pairing: Pairing<'s>,
    /// The next chunk to read.
    chunk: usize,
    /// Whether the last record read counted ([`Shared::for_each_record_of`]).
    keep: bool,
    /// Every record read and every span final.
    done: bool,
    /// Its marks not yet matched, in the order they are matched, each with the order the
    /// thread made it in.
    queue: VecDeque<(Mark, u64)>,
    /// Marks made so far.
    pushed: u64,
    /// The slices (by index) of the polls in `queue`.
    queued_polls: FxHashSet<u32>,
    /// Polls final before their mark was matched, by slice index.
    finished_polls: FxHashMap<u32, PollDone>,
    /// Polls matched (with their call's slot, if any) whose slice is not final yet.
    pending: FxHashMap<u32, Option<usize>>,
}

/// The order of `mark`'s kind among those of one time.
fn kind_key(mark: &Mark) -> (u8, u32) {
    match mark.what {
        MarkKind::Begin => (0, 0),
        MarkKind::Poll(index) => (1, index),
        MarkKind::End => (2, 0),
        MarkKind::Enter(index) => (3, index),
        MarkKind::Close => (4, 0),
    }
}

impl Feed<'_, '_> {
    /// The key of the thread's next mark (it is at `at` among the threads), reading chunks
    /// until one comes that no later mark of the thread can go before; `None` when the
    /// thread has no more. Polls that become final meanwhile go to `matcher`.
    fn next_key(&mut self, at: usize, matcher: &mut Matcher<'_>) -> Option<Key> {
        loop {
            // A later mark can go before the front only at the same time as the last one.
            let ready = match (self.queue.front(), self.queue.back()) {
                (Some((front, _)), Some((back, _))) => self.done || front.ns < back.ns,
                _ => self.done,
            };
            if ready {
                break;
            }
            self.read(matcher);
        }
        let (mark, seq) = self.queue.front()?;
        let (kind, index) = kind_key(mark);
        Some((mark.ns, kind, index, at, *seq))
    }

    /// Reads the next chunk (or, past the last, ends the thread), queues the marks it made
    /// in order, and hands the polls final since to `matcher`.
    fn read(&mut self, matcher: &mut Matcher<'_>) {
        let pairing = &mut self.pairing;
        if self.chunk < self.thread.chunks.len() {
            self.shared
                .for_each_record_of(self.thread, self.chunk, &mut self.keep, |record| {
                    pairing.push(record);
                });
            self.chunk += 1;
        } else {
            pairing.close_rest(self.end_ns);
            self.done = true;
        }
        for mark in pairing.marks_mut().drain(..) {
            if let MarkKind::Poll(index) = mark.what {
                self.queued_polls.insert(index);
            }
            // In the order of (time, kind), as made among equals (a thread's marks come in
            // time order: `MarksSeen::streamable`).
            let key = |m: &Mark| (m.ns, kind_key(m));
            let at =
                (self.queue.iter().rposition(|(m, _)| key(m) <= key(&mark))).map_or(0, |p| p + 1);
            self.queue.insert(at, (mark, self.pushed));
            self.pushed += 1;
        }
        pairing.forget_extras();
        if self.done || pairing.window_full() {
            let mut finals: Vec<(u32, PollDone)> = Vec::new();
            pairing.drain_final(|index, span: &Span, _| {
                if matches!(span.kind, SpanKind::Poll { .. }) {
                    finals.push((index, poll_done(span)));
                }
            });
            for (index, poll) in finals {
                match self.pending.remove(&index) {
                    Some(Some(slot)) => matcher.pending_done(slot, poll),
                    Some(None) => {}
                    None if self.queued_polls.contains(&index) => {
                        self.finished_polls.insert(index, poll);
                    }
                    // A poll slice that made no mark (no span id, or before the window).
                    None => {}
                }
            }
        }
    }
}

fn poll_done(span: &Span) -> PollDone {
    PollDone {
        duration_ns: span.duration_ns(),
        self_ns: span.self_ns(),
        end_ns: span.end_ns,
    }
}
