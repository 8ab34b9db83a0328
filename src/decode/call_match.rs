//! The matching of async marks in order ([`Matcher`]), for
//! [`call_stream`](super::call_stream): each mark applied as the decoded trace's
//! `match_async` would, each call settled once it ended and its polls are final, each
//! `tracing` span entered once handed over as a plain scope.

use crate::record::callsite::Callsite;
use crate::record::hash::{FxHashMap, FxHashSet};
use crate::trace::{MemoryStats, Span};

use super::async_spans::{Mark, MarkKind};
use super::call_planning::{Planned, Planning};
use super::poll_label::{CallLabel, PollLabel};
use super::summary::PollBits;

/// What is done with a `tracing` enter that is a plain scope: its thread (index), callsite,
/// figures (duration, self time, open at the stop) and memory figures.
pub(super) type ScopeOf<'f> =
    dyn FnMut(usize, &'static Callsite, (u64, u64, bool), &MemoryStats) + 'f;

/// One thread's poll slices (by index) between their mark and their figures.
#[derive(Default)]
pub(super) struct Polls {
    /// The slices of the polls (and `tracing` enters) whose marks wait to be matched.
    pub(super) queued: FxHashSet<u32>,
    /// Polls final before their mark was matched.
    pub(super) finished: FxHashMap<u32, PollDone>,
    /// Polls matched (with their call's slot, if any) whose slice is not final yet.
    pub(super) pending: FxHashMap<u32, Option<usize>>,
}

/// A call being matched (see [`AsyncSpan`](crate::trace::AsyncSpan)).
pub(super) struct Call {
    pub(super) callsite: &'static Callsite,
    /// Its index among the calls, in the order they began; of a call cut at a flight
    /// recorder's window start, its index among those cut, in the order of their first mark
    /// (they come first in the decoded trace, before every call begun in the window).
    pub(super) rank: u64,
    pub(super) start_ns: u64,
    /// The thread that began it (index), and the one that began or last polled it.
    pub(super) thread: usize,
    pub(super) last: usize,
    /// The thread that ended it (index), if one did.
    pub(super) end_thread: Option<usize>,
    pub(super) polls: u32,
    pub(super) busy_ns: u64,
    pub(super) self_ns: u64,
    /// The latest end of its polls.
    pub(super) polled_until: u64,
    /// Its polls matched whose slice is not final yet.
    pending: u32,
    /// Its end, once known.
    pub(super) end_ns: Option<u64>,
    pub(super) open_at_stop: bool,
    /// Of a `tracing` span's enters: its span id, and where its first enter is (thread,
    /// slice index).
    tracing: Option<(u64, (usize, u32))>,
    /// Of a `tracing` span's enters: the figures of its last enter final so far (of a span
    /// entered once, its only one).
    solo: Option<PollDone>,
    /// Not closed in a session salvaged without its footer: a call even when entered once.
    pub(super) in_flight: bool,
    /// Begun before a flight recorder's window: it starts there.
    pub(super) cut_at_start: bool,
    /// A `tracing` span's enter found plain on its thread after it was matched: no call.
    retracted: bool,
    /// Its polls' memory figures, summed (of a session that tracked memory).
    pub(super) memory: MemoryStats,
    /// Of its polls so far, the one first in thread order, then index ((thread, index), and
    /// its node of the thread's stacks): where it counts as a call.
    counted: Option<((usize, u32), u32)>,
    /// The label of its latest poll that has one, when polls are labelled
    /// ([`PollLabels`](super::call_labels::PollLabels)).
    label: Option<PollLabel>,
    /// What the plan of the calls found at its first poll, when one is made.
    pub(super) planned: Option<Planned>,
}

impl Call {
    /// True unless it is a `tracing` span entered once (closed, or in a session that
    /// stopped), a plain scope, or one taken back ([`Matcher::retract`]).
    pub(super) fn is_call(&self) -> bool {
        !self.retracted && (self.tracing.is_none() || self.polls > 1 || self.in_flight)
    }

    /// Its rank among the calls of the decoded trace, holes included, where `cut` calls were
    /// cut at a flight recorder's window start (they come first).
    pub(super) fn trace_rank(&self, cut: u64) -> u64 {
        match self.cut_at_start {
            true => self.rank,
            false => cut + self.rank,
        }
    }

    /// Its wall time: from its start to its end (0 before it is known).
    pub(super) fn wall_ns(&self) -> u64 {
        self.end_ns.map_or(0, |end| end - self.start_ns)
    }

    /// The label of its latest poll (by start, then thread and slice index) that has one.
    pub(super) fn label(&self) -> Option<&CallLabel> {
        self.label.as_ref().map(|l| &l.label)
    }
}

/// Matches marks in order (as `match_async` does) and sums each call once it ended and its
/// polls are final.
pub(super) struct Matcher<'f> {
    pub(super) calls: Vec<Option<Call>>,
    /// Slots of `calls` free again.
    pub(super) free: Vec<usize>,
    /// The call open for each async span id.
    pub(super) open: FxHashMap<u64, usize>,
    /// The enters so far of each `tracing` span id not closed yet (a call or a scope once
    /// known), by span id.
    pub(super) lives: FxHashMap<u64, usize>,
    /// The same, by their first enter (thread, slice index): an enter found plain on its
    /// thread after it was matched is taken back ([`Matcher::retract`]).
    pub(super) first_enters: FxHashMap<(usize, u32), usize>,
    /// The rank of the next call begun.
    pub(super) next_rank: u64,
    /// The rank of the next call cut at a flight recorder's window start, among those cut
    /// (which come first in the decoded trace: [`Call::rank`]).
    pub(super) next_cut: u64,
    /// A flight recorder's window start (ns), before which no mark was made: a poll or an
    /// end of a call not begun in the window begins it there, cut
    /// ([`AsyncSpan::cut_at_start`](crate::trace::AsyncSpan::cut_at_start)), as `match_async`
    /// makes it.
    pub(super) cut_ns: Option<u64>,
    /// Some mark came out of order, or an enter found plain on its thread had company: the
    /// sums are not the decoded trace's.
    pub(super) diverged: bool,
    /// Per thread, the `tracing` enters matched so far that are polls (those of a span
    /// entered once are taken back when it settles as a scope).
    pub(super) kinds: Vec<PollBits>,
    /// Per thread, of its stacks (when summed), the calls to take off each node: polls of a
    /// call counted at another of its polls.
    pub(super) uncounted: Vec<FxHashMap<u32, u64>>,
    /// What is done with each call once settled.
    pub(super) settled: &'f mut dyn FnMut(&Call),
    /// What is done with each `tracing` enter that is a plain scope.
    pub(super) scope: &'f mut ScopeOf<'f>,
    /// Where each call stands in the tree of spans is planned, when asked.
    pub(super) plan: Option<&'f mut Planning>,
}

impl Matcher<'_> {
    pub(super) fn apply(&mut self, mark: &Mark, polls: &mut Polls) {
        if mark.what == MarkKind::Close {
            // (Of any callsite: a close may name none.)
            if let Some(slot) = self.lives.remove(&mark.span)
                && let Some(call) = self.calls[slot].as_mut()
            {
                call.end_ns = Some(mark.ns.max(call.start_ns));
                call.end_thread = Some(mark.thread);
                self.settle(slot);
            }
            return;
        }
        let Some(callsite) = mark.callsite else {
            return;
        };
        if let MarkKind::Enter(index) = mark.what {
            let slot = match self.lives.get(&mark.span) {
                Some(&slot) => slot,
                None => {
                    // Ranked among the calls begun: a hole if it turns out a scope.
                    let mut call = Call::begun(callsite, self.next_rank, mark);
                    self.next_rank += 1;
                    call.tracing = Some((mark.span, (mark.thread, index)));
                    let slot = self.store(call);
                    self.lives.insert(mark.span, slot);
                    self.first_enters.insert((mark.thread, index), slot);
                    slot
                }
            };
            if let Some(kinds) = self.kinds.get_mut(mark.thread) {
                kinds.set(index, true);
            }
            self.polled(Some(slot), mark, index, polls);
            return;
        }
        let mut current = (self.open.get(&mark.span).copied()).filter(|&slot| {
            self.calls[slot]
                .as_ref()
                .is_some_and(|c| same(c.callsite, callsite))
        });
        if let (Some(cut_ns), None, MarkKind::Poll(_) | MarkKind::End) =
            (self.cut_ns, current, mark.what)
        {
            // Begun before the window: from its start.
            let mut call = Call::begun(callsite, self.next_cut, mark);
            self.next_cut += 1;
            (call.start_ns, call.cut_at_start) = (cut_ns, true);
            let slot = self.store(call);
            self.replace_open(mark.span, slot);
            current = Some(slot);
        }
        match (mark.what, current) {
            (MarkKind::Begin, _) => {
                let slot = self.store(Call::begun(callsite, self.next_rank, mark));
                self.next_rank += 1;
                self.replace_open(mark.span, slot);
            }
            (MarkKind::Poll(index), matched) => self.polled(matched, mark, index, polls),
            (MarkKind::End, Some(slot)) => {
                self.open.remove(&mark.span);
                if let Some(call) = self.calls[slot].as_mut() {
                    call.end_ns = Some(mark.ns.max(call.start_ns));
                    call.end_thread = Some(mark.thread);
                }
                self.settle(slot);
            }
            // An end of a call begun outside the window.
            (MarkKind::End | MarkKind::Enter(_) | MarkKind::Close, _) => {}
        }
    }

    /// The call at `slot` is the one open for span id `span`. One of the same id still open
    /// is no longer matched: it keeps the end it was begun with (its start), as the decoded
    /// trace's does.
    fn replace_open(&mut self, span: u64, slot: usize) {
        if let Some(old) = self.open.insert(span, slot)
            && let Some(call) = self.calls[old].as_mut()
        {
            call.end_ns = Some(call.start_ns);
            self.settle(old);
        }
    }

    /// Puts `call` in a free slot.
    fn store(&mut self, call: Call) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.calls[slot] = Some(call);
                slot
            }
            None => {
                self.calls.push(Some(call));
                self.calls.len() - 1
            }
        }
    }

    /// The slice at `index` of `mark`'s thread (whose `polls` these are) is a poll of the
    /// call at `matched` (none: of no call): its figures go to it now if final, else once
    /// they are.
    fn polled(&mut self, matched: Option<usize>, mark: &Mark, index: u32, polls: &mut Polls) {
        if let Some(slot) = matched
            && let Some(call) = self.calls[slot].as_mut()
        {
            call.last = mark.thread;
            call.polls += 1;
            if let Some(plan) = self.plan.as_mut() {
                let rank = call.trace_rank(plan.cut);
                plan.polled(&mut call.planned, (rank, call.start_ns), mark, index);
            }
        }
        if let (None, Some(plan)) = (matched, self.plan.as_mut()) {
            plan.unmatched(mark, index);
        }
        polls.queued.remove(&index);
        match polls.finished.remove(&index) {
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
                polls.pending.insert(index, matched);
            }
        }
    }

    /// The enter of the slice at `index` of thread `thread` (whose `polls` these are),
    /// matched, was found plain on its thread: the `tracing` span it began is no more (as if
    /// never marked).
    pub(super) fn retract(&mut self, thread: usize, index: u32, polls: &mut Polls) {
        let slot = self.first_enters.remove(&(thread, index));
        let call = slot.and_then(|slot| Some((slot, self.calls[slot].as_ref()?)));
        let Some((slot, call)) = call.filter(|(_, c)| c.polls == 1 && c.end_ns.is_none()) else {
            // Entered elsewhere too, or closed: the recorder's word on it was wrong.
            self.diverged = true;
            return;
        };
        if let Some((span, _)) = call.tracing
            && self.lives.get(&span) == Some(&slot)
        {
            self.lives.remove(&span);
        }
        // Its rank is a hole.
        if let Some(call) = self.calls[slot].as_mut() {
            call.retracted = true;
            (self.settled)(call);
        }
        polls.pending.remove(&index);
        if let Some(kinds) = self.kinds.get_mut(thread) {
            kinds.set(index, false);
        }
        self.calls[slot] = None;
        self.free.push(slot);
    }

    /// A poll of the call at `slot` is final.
    fn poll_done(&mut self, slot: usize, mut poll: PollDone) {
        let Some(call) = self.calls[slot].as_mut() else {
            return;
        };
        // As the decoded trace's report takes it: the latest poll's label wins.
        if let Some(label) = poll.label.take()
            && call.label.as_ref().is_none_or(|l| label.at >= l.at)
        {
            call.label = Some(label);
        }
        // Saturating: forged ticks (a capture file) may overlap anyhow.
        call.busy_ns = call.busy_ns.saturating_add(poll.duration_ns);
        call.self_ns = call.self_ns.saturating_add(poll.self_ns);
        call.polled_until = call.polled_until.max(poll.end_ns);
        call.memory.add(&poll.memory);
        // A call counts once in the stacks, at its poll first in thread order, then index.
        if let Some(node) = poll.node {
            let uncount = match call.counted {
                None => None,
                Some((at, counted)) if poll.at < at => Some((at.0, counted)),
                Some(_) => Some((poll.at.0, node)),
            };
            if call.counted.is_none_or(|(at, _)| poll.at < at) {
                call.counted = Some((poll.at, node));
            }
            if let Some((thread, node)) = uncount
                && let Some(uncounted) = self.uncounted.get_mut(thread)
            {
                *uncounted.entry(node).or_default() += 1;
            }
        }
        call.solo = Some(poll);
        self.settle(slot);
    }

    /// A poll of the call at `slot` that was pending is final.
    pub(super) fn pending_done(&mut self, slot: usize, poll: PollDone) {
        if let Some(call) = self.calls[slot].as_mut() {
            call.pending -= 1;
        }
        self.poll_done(slot, poll);
    }

    /// Sums the call at `slot` when it ended and its polls are final (or, a `tracing` span
    /// entered once, its slice as a scope), and frees its slot.
    pub(super) fn settle(&mut self, slot: usize) {
        let Some(call) = self.calls[slot].as_ref() else {
            return;
        };
        if call.end_ns.is_none() || call.pending > 0 {
            return;
        }
        if let Some((_, first)) = call.tracing {
            self.first_enters.remove(&first);
        }
        // Every settled call, also a `tracing` span found a scope (a rank, no call).
        (self.settled)(call);
        match (call.is_call(), call.tracing, &call.solo) {
            (true, _, _) => {}
            (false, Some((_, (thread, index))), Some(poll)) => {
                let figures = (poll.duration_ns, poll.self_ns, poll.open_at_stop);
                (self.scope)(thread, call.callsite, figures, &poll.memory);
                if let Some(kinds) = self.kinds.get_mut(thread) {
                    kinds.set(index, false);
                }
            }
            (false, _, _) => {}
        }
        self.calls[slot] = None;
        self.free.push(slot);
    }
}

impl Call {
    /// A call of `callsite` with rank `rank`, begun by `mark`, with no poll yet.
    fn begun(callsite: &'static Callsite, rank: u64, mark: &Mark) -> Self {
        Self {
            callsite,
            rank,
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
            tracing: None,
            solo: None,
            in_flight: false,
            cut_at_start: false,
            retracted: false,
            memory: MemoryStats::default(),
            counted: None,
            label: None,
            planned: None,
        }
    }
}

pub(super) fn same(a: &'static Callsite, b: &'static Callsite) -> bool {
    std::ptr::eq(a, b)
}

/// What a call takes of a poll slice once it is final.
pub(super) struct PollDone {
    duration_ns: u64,
    self_ns: u64,
    pub(super) end_ns: u64,
    /// (What a `tracing` enter found a plain scope keeps.)
    open_at_stop: bool,
    /// Its memory figures (of a session that tracked memory).
    memory: MemoryStats,
    /// Its thread and index there.
    at: (usize, u32),
    /// Its node of its thread's stacks, when they are summed.
    pub(super) node: Option<u32>,
    /// Its label, when polls are labelled.
    pub(super) label: Option<PollLabel>,
}

/// What a poll takes of its final slice.
pub(super) fn poll_done(
    span: &Span,
    memory: Option<&MemoryStats>,
    at: (usize, u32),
    node: Option<u32>,
) -> PollDone {
    PollDone {
        at,
        node,
        label: None,
        memory: memory.copied().unwrap_or_default(),
        duration_ns: span.duration_ns(),
        self_ns: span.self_ns(),
        end_ns: span.end_ns,
        open_at_stop: span.open_at_stop,
    }
}
