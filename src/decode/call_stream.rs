//! Async calls summed as the threads are read again, without keeping their spans: the calls
//! of a `#[profile] async fn` (async begins, polls and ends, matched by span id across
//! threads) made by a merge of every thread's marks in the order the decoded trace matches
//! them, each thread read a chunk at a time. What [`match_async`](super::async_spans) gives a
//! table (each call's callsite, thread, wall, busy and self time, polls, and whether it was
//! open at the stop), in memory bounded by the threads (a pairing window each) and the calls
//! open at once.
//!
//! `tracing` spans' enters and closes are matched in the same merge: the threads are read
//! with each enter marked as it comes ([`Pairing::eager_enters`](super::pair::Pairing::eager_enters)), and an enter that its
//! thread finds plain (the span closed there, entered once) is taken back; the enters of one
//! span id up to its close are a call when there are several, else a plain scope, which goes
//! to its thread's sums (the first pass held such slices back until their thread resolved
//! them, and counted those it could not as polls). What it holds more: the `tracing` spans
//! alive at once.
//!
//! Only marks that this merge orders as the decoded trace sorts them are summed this way
//! ([`MarksSeen::streamable`](super::async_spans::MarksSeen)): begins, polls and ends, each
//! thread's in time order, none adopting a first slice (checked again as they come, with
//! the enters and closes: `None` when they are out of order). Of a flight recorder's window,
//! the calls cut at its start come first, ranked apart ([`each_call_in_order`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;

use crate::capture::CaptureThread;
use crate::decode::quantiles::Durations;
use crate::record::hash::FxHashMap;
use crate::trace::{AsyncSpan, MemoryStats, Span, SpanKind};

use super::async_spans::{Mark, MarkKind};
use super::call_match::{Call, Matcher, PollDone, Polls, ScopeOf, poll_done};
use super::call_order::InOrder;
use super::call_planning::Planning;
use super::links::{Keep, Links};
use super::memory::{Keeps, RawMemory};
use super::pair::Pairing;
use super::poll_label::{CallLabel, PollLabel, PollLabels};
use super::summary;
use super::summary::{CallSums, PollBits, StackTree, ThreadSums};
use super::thread::Shared;

/// The calls of some threads summed ([`sum_calls`]).
pub(super) struct Calls {
    /// Per thread (by its index among the threads read), the calls begun there, by callsite
    /// in order of the first call.
    pub(super) by_thread: Vec<Vec<CallSums>>,
    /// The calls still open at the stop, and the `tracing` enters among the first pass's
    /// polls that are plain scopes open at the stop.
    pub(super) open: u64,
    /// Per thread, which `tracing` enters' slices are polls.
    pub(super) enter_polls: Vec<PollBits>,
    /// Per thread, its spans summed by stack (each async call counted once), when asked.
    pub(super) stacks: Vec<Option<StackTree>>,
}

/// Sums the async calls of `threads` (the capture's threads with records, in the trace's
/// order), each thread's remaining scopes closing at `ends` (by index), keeping every
/// duration when `exact`; the `tracing` enters that the first pass counted as polls
/// ([`ThreadSums::add`]) and that are plain scopes go to `scopes` (by thread). `None` when
/// the marks do not come in the order they are matched in (a forged file).
pub(super) fn sum_calls(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    ends: &[u64],
    (exact, stacks): (bool, bool),
    scopes: &mut [&mut ThreadSums],
) -> Option<Calls> {
    let mut sums: Vec<Sums> = threads.iter().map(|_| Sums::new(exact)).collect();
    let mut open_scopes = 0;
    let matched = each_call(
        shared,
        threads,
        ends,
        stacks,
        &mut |call| {
            if call.is_call() {
                sums[call.thread].add(call);
            }
        },
        &mut |thread, callsite, figures, memory| {
            open_scopes += u64::from(figures.2);
            if let Some(sums) = scopes.get_mut(thread) {
                sums.poll_was_scope(callsite, figures, memory);
            }
        },
    )?;
    Some(Calls {
        by_thread: sums.into_iter().map(|s| s.sites).collect(),
        open: matched.open + open_scopes,
        enter_polls: matched.kinds,
        stacks: matched.stacks,
    })
}

/// Hands each async call of `threads` (the capture's threads with records, in the trace's
/// order, of process `process` in the trace) to `f` in the order they began, as
/// `Trace::async_spans` holds them, each thread's remaining scopes closing at `ends` (by
/// index); stops at the first error of `f`. Of a flight recorder's window, `cut` is the
/// number of its calls cut at the window start ([`CallSums::cut`], summed): they come
/// first, in the order of their first mark.
pub(super) fn each_call_in_order(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    ends: &[u64],
    (process, cut): (u32, u64),
    f: &mut dyn FnMut(&AsyncSpan) -> io::Result<()>,
) -> io::Result<()> {
    let mut hand = |call: &AsyncSpan, _| f(call);
    let mut order = InOrder::new(&mut hand);
    let done = each_call(
        shared,
        threads,
        ends,
        false,
        &mut |call| {
            // The calls cut at the window start first, then those begun in it.
            let rank = call.trace_rank(cut);
            if !call.is_call() {
                // A `tracing` span found a plain scope: its rank is a hole.
                order.skip(rank);
                return;
            }
            order.give(rank, async_span(call, threads, process), [0; 3]);
        },
        &mut |_, _, _, _| {},
    );
    if done.is_none() {
        // (The summing pass read them in order: `Summary::tracing_unresolved`.)
        return Err(io::Error::other("async marks out of order"));
    }
    order.finish()
}

/// `call`, settled, as the decoded trace holds it: of process `process`, begun on one of
/// `threads`.
pub(super) fn async_span(call: &Call, threads: &[&CaptureThread], process: u32) -> AsyncSpan {
    AsyncSpan {
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
        cut_at_start: call.cut_at_start,
    }
}

/// Hands each async call of `threads` (the capture's threads with records, in the trace's
/// order) to `settled` once it ended and its polls are final (the calls still open at the
/// end last), each thread's remaining scopes closing at `ends` (by index). Returns how many
/// were open at the stop. Each call begun by an async begin has its rank: its index among
/// the calls of the decoded trace (`Trace::async_spans` of this capture alone) when the
/// capture holds no `tracing` enter, less the number of calls cut at a flight recorder's
/// window start, which come first (each ranked among those: [`Call::rank`]).
///
/// A `tracing` span's enters up to its close are a call when there are several (or, in a
/// session salvaged without its footer, when it did not close), as `match_async` makes them;
/// one enter is a plain scope: its thread (index), callsite and figures (duration, self
/// time, open at the stop) go to `scope`. Also returns, per thread, which enters' slices
/// are polls. `None` when the marks do not come in the order they are matched in (a forged
/// file).
pub(super) fn each_call(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    ends: &[u64],
    stacks: bool,
    settled: &mut dyn FnMut(&Call),
    scope: &mut ScopeOf<'_>,
) -> Option<Matched> {
    each_call_labelled(
        shared,
        threads,
        ends,
        (stacks, None),
        &PollLabels::None,
        settled,
        scope,
    )
}

/// [`each_call`], each poll slice labelled as `labels` says, and each call with the label of
/// its latest poll that has one ([`Call::label`]); with `plan`, each call's place in the tree
/// of spans planned ([`call_plan`](super::call_plan)).
pub(super) fn each_call_labelled<'f>(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    ends: &[u64],
    (stacks, plan): (bool, Option<&'f mut Planning>),
    labels: &PollLabels<'_>,
    settled: &mut dyn FnMut(&Call),
    scope: &mut ScopeOf<'_>,
) -> Option<Matched> {
    let mut stores: Vec<(Vec<Mark>, Links, Vec<RawMemory>)> = threads
        .iter()
        .map(|_| (Vec::new(), Links::keeping(Keep::Nothing), Vec::new()))
        .collect();
    let mut feeds: Vec<Feed<'_, '_>> = (threads.iter().enumerate())
        .zip(&mut stores)
        .map(|((index, &thread), (marks, links, memory))| {
            let mut pairing = Pairing::new(
                shared.callsites,
                (&shared.converter, shared.probe),
                (index, thread.id),
                marks,
                links,
                shared.memory.then_some(memory),
                0,
            );
            // Each poll's memory figures, summed into its call's.
            pairing.memory_keeps(Keeps::Figures);
            pairing.drain_every(summary::WINDOW);
            // Enters marked as they come, in time order with the thread's other marks.
            pairing.defer_enters();
            pairing.eager_enters();
            // Before the scopes cut at a flight recorder's start are opened, as the first
            // pass sums them.
            if stacks {
                pairing.keep_stacks();
                pairing.stacks_mut().map(StackTree::note_polls);
            }
            if let Some(bits) = plan.as_ref().and_then(|p| p.bits.get(index)) {
                pairing.chains(bits.clone());
            }
            shared.start(&mut pairing, thread);
            Feed {
                shared,
                index,
                thread,
                end_ns: ends[index],
                pairing,
                chunk: 0,
                keep: false,
                done: false,
                queue: VecDeque::new(),
                pushed: 0,
                last_ns: 0,
                polls: Polls::default(),
                labels,
                noted: FxHashMap::default(),
            }
        })
        .collect();
    let mut matcher = Matcher {
        calls: Vec::new(),
        free: Vec::new(),
        open: FxHashMap::default(),
        lives: FxHashMap::default(),
        first_enters: FxHashMap::default(),
        next_rank: 0,
        next_cut: 0,
        cut_ns: (shared.capture.cut_start).map(|tick| shared.converter.to_unix_ns(tick)),
        diverged: false,
        kinds: vec![PollBits::default(); threads.len()],
        uncounted: vec![FxHashMap::default(); threads.len()],
        settled,
        scope,
        plan,
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
        matcher.apply(&mark, &mut feed.polls);
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
    unclosed.sort_unstable_by_key(|&slot| {
        (matcher.calls[slot].as_ref()).map(|c| (c.cut_at_start, c.rank))
    });
    // The `tracing` spans not closed: calls when entered several times or in flight.
    let mut lives: Vec<usize> = std::mem::take(&mut matcher.lives).into_values().collect();
    lives.sort_unstable_by_key(|&slot| matcher.calls[slot].as_ref().map(|c| c.start_ns));
    unclosed.extend(lives);
    for slot in unclosed {
        let Some(call) = matcher.calls[slot].as_mut() else {
            continue;
        };
        call.in_flight = shared.salvaged;
        let mut end_ns = ends.get(call.last).copied().unwrap_or(call.start_ns);
        // Of a session salvaged without its footer, never past the earliest of the threads'
        // last records, unless a poll ran later (see `match_async`).
        if shared.salvaged {
            end_ns = end_ns.min(call.polled_until.max(earliest));
        }
        call.end_ns = Some(end_ns.max(call.start_ns));
        call.open_at_stop = true;
        open += u64::from(call.is_call());
        matcher.settle(slot);
    }
    if matcher.diverged {
        return None;
    }
    // Each thread's stacks, each call counted once.
    let stacks = (feeds.iter_mut().zip(&matcher.uncounted))
        .map(|(feed, uncounted)| {
            let mut tree = feed.pairing.stacks_mut().map(std::mem::take)?;
            for (&node, &calls) in uncounted {
                tree.uncount(node, calls);
            }
            Some(tree)
        })
        .collect();
    Some(Matched {
        open,
        kinds: matcher.kinds,
        stacks,
    })
}

/// What [`each_call`] found besides the calls.
pub(super) struct Matched {
    /// The calls open at the stop.
    pub(super) open: u64,
    /// Per thread, which `tracing` enters' slices are polls.
    pub(super) kinds: Vec<PollBits>,
    /// Per thread, its spans summed by stack (each async call counted once), when asked.
    pub(super) stacks: Vec<Option<StackTree>>,
}

/// The order the decoded trace matches marks in: time, kind (begins, then polls by the
/// index of their slice, then ends), thread, then the order the thread made them.
type Key = (u64, u8, u32, usize, u64);

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
                cut: 0,
                memory: MemoryStats::default(),
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
        site.cut += u64::from(call.cut_at_start);
        site.memory.add(&call.memory);
    }
}

/// A thread read again a chunk at a time for its marks and its polls' times.
struct Feed<'s, 'c> {
    shared: &'s Shared<'c>,
    /// Its index among the threads read.
    index: usize,
    thread: &'s CaptureThread,
    /// Where what is still open on the thread closes.
    end_ns: u64,
    pairing: Pairing<'s>,
    /// The next chunk to read.
    chunk: usize,
    /// Whether the last record read counted ([`Shared::for_each_run_of`]).
    keep: bool,
    /// Every record read and every span final.
    done: bool,
    /// Its marks not yet matched, in the order they are matched, each with the order the
    /// thread made it in.
    queue: VecDeque<(Mark, u64)>,
    /// Marks made so far.
    pushed: u64,
    /// The time of the last mark made.
    last_ns: u64,
    /// Its poll slices waiting for their mark or their figures.
    polls: Polls,
    /// How its poll slices are labelled.
    labels: &'s PollLabels<'s>,
    /// By argument: the first value of the key of each slice (by index) not final yet.
    noted: FxHashMap<u32, Box<str>>,
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
                .for_each_run_of(self.thread, self.chunk, &mut self.keep, |records| {
                    records.iter().for_each(|&record| pairing.push(record));
                });
            self.chunk += 1;
        } else {
            pairing.close_rest(self.end_ns);
            self.done = true;
        }
        for mark in pairing.marks_mut().drain(..) {
            // Made in time order, or this merge is not the decoded trace's order.
            matcher.diverged |= mark.ns < self.last_ns;
            self.last_ns = mark.ns;
            if let MarkKind::Poll(index) | MarkKind::Enter(index) = mark.what {
                self.polls.queued.insert(index);
            }
            // In the order of (time, kind), as made among equals (a thread's marks come in
            // time order: `MarksSeen::streamable`).
            let key = |m: &Mark| (m.ns, kind_key(m));
            let at =
                (self.queue.iter().rposition(|(m, _)| key(m) <= key(&mark))).map_or(0, |p| p + 1);
            self.queue.insert(at, (mark, self.pushed));
            self.pushed += 1;
        }
        // Enters found plain since: not marks after all (matched already: taken back).
        let retracted: Vec<u32> = pairing.take_retracted().collect();
        for index in retracted {
            let enter = MarkKind::Enter(index);
            match self.queue.iter().rposition(|(m, _)| m.what == enter) {
                Some(at) => {
                    self.queue.remove(at);
                    self.polls.queued.remove(&index);
                }
                None => matcher.retract(self.index, index, &mut self.polls),
            }
        }
        let pairing = &mut self.pairing;
        pairing.forget_extras();
        if self.done || pairing.window_full() {
            // The arguments so far are let go: each slice's label is noted first.
            if let PollLabels::Arg(key) = self.labels {
                for arg in pairing.span_args().iter().filter(|a| a.key == *key) {
                    (self.noted.entry(arg.span)).or_insert_with(|| arg.value.to_string().into());
                }
            }
            let (labels, noted, thread) = (self.labels, &mut self.noted, self.index);
            let mut finals: Vec<(u32, PollDone)> = Vec::new();
            pairing.drain_final(|index, span: &Span, memory| {
                let label = match labels {
                    PollLabels::None => None,
                    PollLabels::Arg(_) => noted.remove(&index).map(CallLabel::Arg),
                    PollLabels::Origin(origins) => (origins.get(thread))
                        .and_then(|o| o.get(&index))
                        .map(|&name| CallLabel::Origin(name)),
                };
                if matches!(span.kind, SpanKind::Poll { .. }) {
                    let mut poll = poll_done(span, memory, (thread, index), None);
                    poll.label = label.map(|label| PollLabel {
                        at: (span.start_ns, thread, index),
                        label,
                    });
                    finals.push((index, poll));
                }
            });
            // Their nodes, when the thread's spans are summed by stack.
            if let Some(stacks) = pairing.stacks_mut() {
                let nodes: FxHashMap<u32, u32> = stacks.take_poll_nodes().into_iter().collect();
                for (index, poll) in &mut finals {
                    poll.node = nodes.get(index).copied();
                }
            }
            for (index, poll) in finals {
                if let Some(plan) = matcher.plan.as_mut() {
                    plan.slice_final(self.index, index, poll.end_ns);
                }
                match self.polls.pending.remove(&index) {
                    Some(Some(slot)) => matcher.pending_done(slot, poll),
                    Some(None) => {}
                    None if self.polls.queued.contains(&index) => {
                        self.polls.finished.insert(index, poll);
                    }
                    // A poll slice that made no mark (no span id, or before the window).
                    None => {}
                }
            }
        }
    }
}
