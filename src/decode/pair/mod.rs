//! Pairing one thread's records: entries with exits, payloads with the records they belong to,
//! arguments with their scope, and allocations with the scope they happened in.

use crate::record::hash::FxHashSet;

use crate::record::callsite::{self, Callsite};
use crate::record::event::{RawEvent, RawKind};
use crate::record::pages::prefer_huge_pages_for;
use crate::record::value::{ArgReader, Value};
use crate::trace::{
    Instant, InstantScope, MemoryKind, MemoryStats, Span, SpanArg, SpanKind, SpanRef,
};

use super::counters::{self, RawSample};
use super::summary::StackTree;

use super::async_spans::{Mark, MarkKind};
use super::convert::Converter;
use super::links::Links;
use super::memory::{Block, Counts, MemoryPairing, RawMemory};
use crate::record::clock::PROBE_UNIT;

/// One thread's pairing state: spans so far, the open stack, and a lead record waiting for
/// its [`Payload`](RawKind::Payload).
pub(super) struct Pairing<'a> {
    callsites: &'a [&'static Callsite],
    converter: &'a Converter,
    /// Index of the thread in the trace.
    thread: usize,
    /// tickscope's id of the thread.
    thread_id: u64,
    marks: &'a mut Vec<Mark>,
    links: &'a mut Links,
    /// The spans kept from index `base` on: all of them, unless [`Pairing::drain_final`] let
    /// go of some.
    spans: Vec<Span>,
    /// The index (in the thread) of `spans[0]`.
    base: u32,
    /// The spans before `base` that are kept, with their index, in index order: open spans
    /// and their ancestors when [`Pairing::drain_final`] ran.
    pinned: Vec<(u32, Span)>,
    /// The spans summed by stack as they become final, when asked for.
    stacks: Option<StackTree>,
    /// [`Pairing::window_full`] from this many kept spans on.
    drain_at: usize,
    open: Vec<Open>,
    pending: Option<RawEvent>,
    events: u64,
    memory: Option<MemoryPairing<'a>>,
    args: Vec<SpanArg>,
    reader: ArgReader,
    /// Counted allocations being read: the counts so far, and whether their frees came.
    counts: Option<(Counts, bool)>,
    /// Overhead compensation in ticks: a scope's own probe inside its duration, and a
    /// child's probe outside its own (in its parent's).
    probe: Probe,
    /// Counter and value samples, in recorded order.
    samples: Vec<RawSample>,
    /// Instants, in recorded order.
    instants: Vec<Instant>,
    /// What the argument records being read belong to.
    args_of: ArgsOf,
    /// `tracing` span enters of this thread whose span's close has not come yet.
    entered: Entered,
    /// Async begins, polls and ends recorded before this tick make no mark: a flight
    /// recorder's window start common to every thread (0: all of them).
    calls_from: u64,
    /// The effect's span id of a [`RawKind::SpanFollows`] whose second payload (the cause's)
    /// comes next.
    follows_effect: Option<u64>,
}

/// The enters of `tracing` spans on one thread ([`RawKind::SpanEnter`]) whose close has not
/// come yet. A close that says every enter of its span was on its own thread resolves them
/// here: one enter is a plain scope (no mark), several an async call (marks). Any other close,
/// and the enters left at the end, go to the marks matched across threads.
#[derive(Default)]
struct Entered {
    /// Per enter: the span id, the slice's index in the thread, its start and callsite.
    enters: Vec<(u64, u32, u64, &'static Callsite)>,
    /// Span ids whose enters were moved to the marks early (too many waiting).
    moved: FxHashSet<u64>,
}

/// Enters a thread keeps waiting for their close before the oldest half go to the marks:
/// few, so that each close looks through few (the spans entered and not yet closed here are
/// those nested at the moment, unless their closes come on other threads: those go to the
/// marks anyway).
const ENTERED_MAX: usize = 64;

/// What argument records belong to: the record before them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ArgsOf {
    /// The innermost open span (the one just entered).
    Span,
    /// The last instant.
    Instant,
    /// An instant whose callsite is unknown (bad input): they are skipped.
    Nothing,
}

/// What a thread gives besides its spans: counter and value samples, and instants.
pub(super) struct Extras {
    pub(super) samples: Vec<RawSample>,
    pub(super) instants: Vec<Instant>,
    /// The spans summed by stack, when asked for ([`Pairing::keep_stacks`]).
    pub(super) stacks: Option<StackTree>,
}

/// The probe overhead decoding subtracts, in 1/[`PROBE_UNIT`] tick (zeros: nothing is
/// subtracted).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Probe {
    /// A scope's own probe between its two ticks.
    pub(super) inner: u64,
    /// A child's probe outside its two ticks, in its parent's time.
    pub(super) outer: u64,
}

/// An open span while pairing: its index, the key its end carries
/// ([`RawEvent::end_key`]), and the probe ticks inside it so far (its own inner part, plus
/// each closed child's probe and what was subtracted from the child).
#[derive(Clone, Copy)]
struct Open {
    index: u32,
    key: u32,
    probe: u64,
}

/// True for the kinds whose record is followed by a [`Payload`](RawKind::Payload).
fn takes_payload(kind: RawKind) -> bool {
    match kind {
        RawKind::AsyncBegin
        | RawKind::AsyncEnd
        | RawKind::PollBegin
        | RawKind::Alloc
        | RawKind::Free
        | RawKind::BeginFollows
        | RawKind::SpanEnter
        | RawKind::SpanClose
        | RawKind::SpanFollows
        | RawKind::CounterSet
        | RawKind::CounterAdd
        | RawKind::Value => true,
        RawKind::Begin
        | RawKind::Instant
        | RawKind::InstantProcess
        | RawKind::End
        | RawKind::Payload
        | RawKind::Link
        | RawKind::ArgI64
        | RawKind::ArgU64
        | RawKind::ArgF64
        | RawKind::ArgBool
        | RawKind::ArgStr
        | RawKind::Bytes
        | RawKind::AllocCount
        | RawKind::FreeCount => false,
    }
}

impl<'a> Pairing<'a> {
    /// Pairing for the thread at `index` in the trace with id `thread_id`, its ticks converted
    /// by `converter` and `probe` subtracted from its spans; `records_hint` bounds its records.
    pub(super) fn new(
        callsites: &'a [&'static Callsite],
        (converter, probe): (&'a Converter, Probe),
        (thread, thread_id): (usize, u64),
        marks: &'a mut Vec<Mark>,
        links: &'a mut Links,
        memory: Option<&'a mut Vec<RawMemory>>,
        records_hint: usize,
    ) -> Self {
        // Spans of a large thread fill fresh memory: fewer, larger pages fault in faster.
        let spans = Vec::with_capacity(records_hint / 2);
        prefer_huge_pages_for(&spans);
        Self {
            callsites,
            converter,
            thread,
            thread_id,
            marks,
            links,
            spans,
            base: 0,
            pinned: Vec::new(),
            stacks: None,
            drain_at: usize::MAX,
            open: Vec::new(),
            pending: None,
            events: 0,
            memory: memory.map(MemoryPairing::new),
            args: Vec::new(),
            reader: ArgReader::default(),
            counts: None,
            probe,
            samples: Vec::new(),
            instants: Vec::new(),
            args_of: ArgsOf::Span,
            entered: Entered::default(),
            calls_from: 0,
            follows_effect: None,
        }
    }

    /// Builds async calls only from the records from `tick` on (see
    /// [`Trace::cut_start_ns`](crate::trace::Trace::cut_start_ns)): the poll slices before
    /// stay spans of the thread, without a call.
    pub(super) fn calls_from(&mut self, tick: u64) {
        self.calls_from = tick;
    }

    /// A mark of `tracing` span `span` at `ns`: an enter of the slice at `index`, or a close.
    fn tracing_mark(
        &mut self,
        what: MarkKind,
        span: u64,
        ns: u64,
        callsite: Option<&'static Callsite>,
    ) {
        self.marks.push(Mark {
            ns,
            what,
            callsite,
            span,
            thread: self.thread,
            adopts: 0,
        });
    }

    /// The slice at `index` (starting at `ns`) is an enter of `tracing` span `span`.
    fn span_entered(&mut self, span: u64, index: u32, ns: u64, callsite: &'static Callsite) {
        if self.entered.enters.len() >= ENTERED_MAX {
            // Spans entered here and closed elsewhere (or not yet): the oldest half are
            // matched across threads, as are their spans' closes from now on.
            let old: Vec<_> = self.entered.enters.drain(..ENTERED_MAX / 2).collect();
            for (span, index, ns, callsite) in old {
                self.entered.moved.insert(span);
                self.tracing_mark(MarkKind::Enter(index), span, ns, Some(callsite));
            }
        }
        self.entered.enters.push((span, index, ns, callsite));
    }

    /// `tracing` span `span` closed at `ns`; `here` when the recorder saw all its enters on
    /// this thread.
    fn span_closed(&mut self, span: u64, ns: u64, here: bool, callsite: Option<&'static Callsite>) {
        let mut mine = std::mem::take(&mut self.entered.enters);
        let count = mine.iter().filter(|e| e.0 == span).count();
        let moved = self.entered.moved.remove(&span);
        if here && count <= 1 && !moved {
            // Entered once, here: a plain scope.
            if count == 1 {
                let at = mine.iter().rposition(|e| e.0 == span).unwrap_or(0);
                mine.remove(at);
            }
        } else {
            mine.retain(|&(s, index, start, site)| {
                if s != span {
                    return true;
                }
                self.tracing_mark(MarkKind::Enter(index), s, start, Some(site));
                false
            });
            self.tracing_mark(MarkKind::Close, span, ns, callsite);
        }
        self.entered.enters = mine;
    }

    fn callsite(&self, id: u32) -> Option<&'static Callsite> {
        callsite::lookup(self.callsites, id)
    }

    /// The index (in the thread) the next span gets.
    fn next_index(&self) -> u32 {
        self.base + self.spans.len() as u32
    }

    /// The kept span at `index` (in the thread). Spans are let go only once nothing can
    /// change them ([`Pairing::drain_final`]), and only those are asked for: the open ones
    /// and their ancestors.
    fn span_mut(&mut self, index: u32) -> &mut Span {
        match index.checked_sub(self.base) {
            Some(at) => &mut self.spans[at as usize],
            None => {
                let at = self.pinned.partition_point(|(i, _)| *i < index);
                &mut self.pinned[at].1
            }
        }
    }

    /// The parent of the kept span at `index`.
    fn parent_of(&self, index: u32) -> Option<u32> {
        match index.checked_sub(self.base) {
            Some(at) => self.spans[at as usize].parent,
            None => {
                let at = self.pinned.partition_point(|(i, _)| *i < index);
                self.pinned[at].1.parent
            }
        }
    }

    /// Keeps about `spans` spans at most ([`Pairing::window_full`] says when to call
    /// [`Pairing::drain_final`]) instead of every span of the thread.
    pub(super) fn drain_every(&mut self, spans: usize) {
        self.drain_at = spans;
    }

    /// Sums the spans by stack as they become final ([`StackTree`], handed over in
    /// [`Extras::stacks`]).
    pub(super) fn keep_stacks(&mut self) {
        self.stacks = Some(StackTree::default());
    }

    /// True when the spans kept have reached the size [`Pairing::drain_every`] set.
    #[inline]
    pub(super) fn window_full(&self) -> bool {
        // Best between top-level scopes, when every span is final; but not much later.
        self.spans.len() >= self.drain_at
            && (self.open.is_empty() || self.spans.len() >= 2 * self.drain_at)
    }

    /// The spans kept: in the window and set aside.
    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.spans.len() + self.pinned.len()
    }

    /// Hands every span that nothing can change any more to `f`, and lets go of it.
    ///
    /// A span changes after it closed only as an ancestor of a span that closes later (its
    /// children's time), and the spans that close later are the open ones and those opened
    /// under them: the open spans and their ancestors are kept (aside, in `pinned`, in index
    /// order), every other span is final.
    pub(super) fn drain_final(&mut self, mut f: impl FnMut(&Span)) {
        let next = self.next_index();
        if self.open.is_empty() && self.pinned.is_empty() {
            // The usual case: between top-level scopes, every span is final.
            if let Some(stacks) = &mut self.stacks {
                for (index, span) in (self.base..).zip(&self.spans) {
                    stacks.close(index, span);
                }
            }
            self.spans.iter().for_each(&mut f);
            self.spans.clear();
            self.base = next;
            return;
        }
        let mut seen = FxHashSet::default();
        for open in &self.open {
            let mut at = Some(open.index);
            while let Some(index) = at {
                if !seen.insert(index) {
                    break;
                }
                at = self.parent_of(index);
            }
        }
        let mut keep: Vec<u32> = seen.into_iter().collect();
        keep.sort_unstable();
        let mut kept = keep.iter().peekable();
        let stacks = &mut self.stacks;
        self.pinned.retain(|(index, span)| {
            let pinned = kept.next_if(|&&k| k == *index).is_some();
            if !pinned {
                if let Some(stacks) = stacks.as_mut() {
                    stacks.close(*index, span);
                }
                f(span);
            }
            pinned
        });
        for (index, span) in (self.base..).zip(&self.spans) {
            if kept.next_if(|&&k| k == index).is_some() {
                self.pinned.push((index, span.clone()));
            } else {
                if let Some(stacks) = stacks.as_mut() {
                    stacks.close(index, span);
                }
                f(span);
            }
        }
        self.spans.clear();
        self.base = next;
        // Each drain costs about the spans kept plus the window: with many kept (scopes nested
        // very deep), the window grows with them, so that draining stays linear.
        self.drain_at = self.drain_at.max(self.pinned.len());
    }

    /// The spans kept since the last drain.
    #[inline]
    pub(super) fn kept_spans(&self) -> usize {
        self.spans.len()
    }

    /// The index in the thread of the first span kept.
    pub(super) fn base(&self) -> u32 {
        self.base
    }

    /// True when every span so far is final and its arguments read: none open or set aside,
    /// no record waiting for its payload, no argument being read. The spans kept are then
    /// whole trees, between top-level scopes.
    #[inline]
    pub(super) fn quiet(&self) -> bool {
        self.open.is_empty()
            && self.pinned.is_empty()
            && self.pending.is_none()
            && !self.reader.is_reading()
    }

    /// When [`Pairing::quiet`]: hands the spans kept and their arguments to `f` with the index
    /// of the first in the thread, and lets go of them, and of the instants and counter
    /// samples so far (whoever takes spans in pieces has those from a first pass). (Not with
    /// [`Pairing::keep_stacks`], which counts spans as [`Pairing::drain_final`] drains them.)
    pub(super) fn drain_quiet<R>(
        &mut self,
        f: impl FnOnce(u32, &mut Vec<Span>, &mut Vec<SpanArg>) -> R,
    ) -> R {
        debug_assert!(self.quiet() && self.stacks.is_none());
        let next = self.next_index();
        let result = f(self.base, &mut self.spans, &mut self.args);
        self.spans.clear();
        self.args.clear();
        self.instants.clear();
        self.samples.clear();
        self.base = next;
        result
    }

    /// Takes the thread's next record.
    #[inline]
    pub(super) fn push(&mut self, event: RawEvent) {
        self.events += 1;
        if let Some(lead) = self.pending.take() {
            if event.kind == RawKind::Payload {
                self.lead(lead, Some(event));
                return;
            }
            // Only bad input separates a lead record from its payload (they are published
            // together): the lead counts without it.
            self.lead(lead, None);
        }
        if self.counted(&event) {
            // Counted memory belongs where it stands: it neither ends arguments nor closes
            // anything.
            return;
        }
        if ArgReader::reads(event.kind) {
            self.arg(&event);
            return;
        }
        if self.reader.is_reading() {
            self.end_args();
        }
        self.args_of = ArgsOf::Span;
        if takes_payload(event.kind) {
            self.pending = Some(event);
        } else if event.kind != RawKind::Payload {
            // (A payload whose lead record was outside the window is skipped.)
            self.apply(event, None, 0);
        }
    }

    /// Opens the scope whose entry `entry` a flight recorder overwrote (before any record of
    /// the thread), marked [`cut_at_start`](Span::cut_at_start).
    pub(super) fn open_cut(&mut self, entry: RawEvent) {
        self.events += 1;
        let at = self.spans.len();
        self.apply(entry, None, 0);
        if let Some(span) = self.spans.get_mut(at) {
            span.cut_at_start = true;
        }
    }

    /// An argument record of the innermost open span (the one just entered).
    fn arg(&mut self, record: &RawEvent) {
        if self.args_of != ArgsOf::Span {
            let (callsites, instants) = (self.callsites, &mut self.instants);
            let to = self.args_of;
            self.reader.read(record, |key, value| {
                push_instant_arg(instants, callsites, to, key, value);
            });
            return;
        }
        let span = self.open.last().map(|o| o.index);
        let (callsites, args) = (self.callsites, &mut self.args);
        self.reader.read(record, |key, value| {
            push_arg(args, callsites, span, key, value);
        });
    }

    /// The arguments end: a string cut short counts as far as it came.
    fn end_args(&mut self) {
        if self.args_of != ArgsOf::Span {
            let (callsites, instants) = (self.callsites, &mut self.instants);
            let to = self.args_of;
            self.reader.finish(|key, value| {
                push_instant_arg(instants, callsites, to, key, value);
            });
            return;
        }
        let span = self.open.last().map(|o| o.index);
        let (callsites, args) = (self.callsites, &mut self.args);
        self.reader.finish(|key, value| {
            push_arg(args, callsites, span, key, value);
        });
    }

    /// Applies a record that takes a payload, with its payload if it came.
    fn lead(&mut self, lead: RawEvent, payload: Option<RawEvent>) {
        if let Some(op) = counters::sample_kind(lead.kind) {
            // A sample without its payload (bad input only) has no number: it is skipped.
            let number = payload.as_ref().and_then(counters::number);
            if let (Some(number), Some(callsite)) = (number, self.callsite(lead.id)) {
                self.samples.push(RawSample {
                    ns: self.converter.to_unix_ns(lead.tick),
                    name: callsite.name(),
                    thread: self.thread_id,
                    op,
                    number,
                });
            }
            return;
        }
        match lead.kind {
            RawKind::Alloc | RawKind::Free => {
                if let Some(block) = payload {
                    let size = u64::from(lead.id) | u64::from(block.id) << 32;
                    self.memory_event(lead, size, block.tick);
                }
            }
            RawKind::BeginFollows => {
                let span = self.next_index();
                self.apply(RawEvent::begin(lead.id, lead.tick), None, 0);
                if let (Some(link), true) = (payload, self.next_index() > span) {
                    let at = SpanRef {
                        thread: self.thread as u32,
                        span,
                    };
                    self.links.followers.push((at, link.tick, link.id));
                }
            }
            RawKind::SpanEnter => {
                let index = self.next_index();
                self.apply(RawEvent::begin(lead.id, lead.tick), None, 0);
                if let (Some(id), true) = (payload, self.next_index() > index) {
                    let span = self.span_mut(index);
                    let (ns, callsite) = (span.start_ns, span.callsite);
                    self.span_entered(id.tick, index, ns, callsite);
                    if self.links.tracing_uses {
                        let at = SpanRef {
                            thread: self.thread as u32,
                            span: index,
                        };
                        self.links.tracing_enters.push((id.tick, ns, at));
                    }
                }
            }
            RawKind::SpanClose => {
                if let Some(id) = payload {
                    let ns = self.converter.to_unix_ns(lead.tick);
                    let here = id.id == RawEvent::SPAN_CLOSED_HERE;
                    self.span_closed(id.tick, ns, here, self.callsite(lead.id));
                    if self.links.tracing_uses {
                        self.links.tracing_closes.push((id.tick, ns));
                    }
                }
            }
            RawKind::SpanFollows => match (payload, self.follows_effect.take()) {
                // The effect's payload: the cause's comes next.
                (Some(effect), None) => {
                    self.follows_effect = Some(effect.tick);
                    self.pending = Some(lead);
                }
                (Some(cause), Some(effect)) => {
                    let ns = self.converter.to_unix_ns(lead.tick);
                    self.links.tracing_follows.push((ns, effect, cause.tick));
                }
                // Cut short (bad input): there is nothing to link.
                (None, _) => {}
            },
            // An async begin's payload may hold, in its 64 bits, the tick of the plain scope
            // of the same callsite that is the call's first slice (see `Mark::adopts`).
            _ => {
                let adopts = payload
                    .filter(|p| lead.kind == RawKind::AsyncBegin && p.tick != 0)
                    .map_or(0, |p| self.converter.to_unix_ns(p.tick));
                self.apply(lead, payload.map(|p| p.id), adopts)
            }
        }
    }

    /// Takes the records of counted allocations ([`MemoryMode::Counts`]: an
    /// [`AllocCount`](RawKind::AllocCount), a [`FreeCount`](RawKind::FreeCount) and its
    /// payload); false for any other record. Counts cut short (bad input) count as far as they
    /// came, their rise taken as all the bytes allocated.
    fn counted(&mut self, record: &RawEvent) -> bool {
        match record.kind {
            RawKind::AllocCount => {
                self.apply_counts();
                self.counts = Some((
                    Counts {
                        allocs: u64::from(record.id),
                        alloc_bytes: record.tick,
                        rise: record.tick,
                        ..Counts::default()
                    },
                    false,
                ));
            }
            RawKind::FreeCount => {
                let (counts, frees) = self.counts.get_or_insert_default();
                if *frees {
                    // A second FreeCount: the first had no payload.
                    self.apply_counts();
                    return self.counted(record);
                }
                counts.frees = u64::from(record.id);
                counts.freed_bytes = record.tick;
                *frees = true;
            }
            RawKind::Payload if self.counts.is_some_and(|(_, frees)| frees) => {
                if let Some((counts, _)) = &mut self.counts {
                    counts.rise = record.tick;
                }
                self.apply_counts();
            }
            _ => {
                self.apply_counts();
                return false;
            }
        }
        true
    }

    /// Applies the counts taken so far, if any, to the innermost open span.
    #[inline]
    fn apply_counts(&mut self) {
        // Checked first: taking moves the whole counts out, on every record.
        if self.counts.is_none() {
            return;
        }
        let Some((counts, _)) = self.counts.take() else {
            return;
        };
        let innermost = self.open.last().map(|o| o.index);
        if let Some(memory) = &mut self.memory {
            memory.counted(counts, innermost);
        }
    }

    fn memory_event(&mut self, lead: RawEvent, size: u64, address: u64) {
        if self.memory.is_none() {
            return;
        }
        let innermost = self.open.last().map(|o| o.index);
        let innermost = innermost.map(|index| (index, self.span_mut(index).callsite));
        let Some(memory) = &mut self.memory else {
            return;
        };
        let block = Block {
            tick: lead.tick,
            ns: self.converter.to_unix_ns(lead.tick),
            thread: self.thread_id,
            kind: if lead.kind == RawKind::Alloc {
                MemoryKind::Alloc
            } else {
                MemoryKind::Free
            },
            size,
            address,
        };
        memory.block(block, innermost);
    }

    fn close(&mut self, closed: Open, end: u64, open_at_stop: bool) {
        let index = closed.index;
        let probe_ns = self.converter.ticks_to_ns(closed.probe);
        let span = self.span_mut(index);
        span.end_ns = end.max(span.start_ns);
        span.open_at_stop = open_at_stop;
        // Overhead compensation: the probe time inside the span, never more than the time
        // its children leave (so its self time stays at or above zero, and its duration is
        // its self time plus its children's durations).
        let room = (span.end_ns - span.start_ns).saturating_sub(span.children_ns);
        span.overhead_ns = (probe_ns.saturating_add(PROBE_UNIT / 2) / PROBE_UNIT).min(room);
        let overhead = span.overhead_ns;
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
            let open = self.open.iter().rposition(|o| o.index == at);
            // The usual case, the parent still open: the whole span is inside it, and the
            // parent's duration leaves out this span's probe and what this span left out.
            let direct = open.is_some() && ancestor == parent;
            if let (Some(at), true) = (open, direct) {
                let probe = &mut self.open[at].probe;
                *probe = probe
                    .saturating_add(self.probe.outer)
                    .saturating_add(closed.probe);
            }
            let span = self.span_mut(at);
            let until = if open.is_some() {
                end
            } else {
                end.min(span.end_ns)
            };
            if until > covered {
                let inside = if direct {
                    (until - covered).saturating_sub(overhead)
                } else {
                    until - covered
                };
                // Saturating: forged ticks (a capture file) may overlap anyhow.
                span.children_ns = span.children_ns.saturating_add(inside);
                covered = until;
            }
            let open = open.is_some();
            if open {
                break;
            }
            ancestor = span.parent;
        }
        if let Some(memory) = &mut self.memory {
            memory.close(index, parent);
        }
    }

    fn apply(&mut self, event: RawEvent, span_id: Option<u32>, adopts: u64) {
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
                // The top one but for guards dropped out of order: a pop, not a shift.
                let closed = if position + 1 == self.open.len() {
                    self.open.pop()
                } else {
                    Some(self.open.remove(position))
                };
                let ns = self.converter.to_unix_ns(event.tick);
                if let Some(closed) = closed {
                    self.close(closed, ns, false);
                }
            }
            return;
        }
        let instant = matches!(event.kind, RawKind::Instant | RawKind::InstantProcess);
        let Some(callsite) = self.callsite(event.id) else {
            if instant {
                self.args_of = ArgsOf::Nothing;
            }
            return;
        };
        let ns = self.converter.to_unix_ns(event.tick);
        if instant {
            self.instants.push(Instant {
                callsite,
                ns,
                process: 0,
                thread: self.thread_id,
                scope: if event.kind == RawKind::Instant {
                    InstantScope::Thread
                } else {
                    InstantScope::Process
                },
                args: Vec::new(),
            });
            self.args_of = ArgsOf::Instant;
            return;
        }
        let what = match event.kind {
            RawKind::AsyncBegin => Some(MarkKind::Begin),
            RawKind::PollBegin => Some(MarkKind::Poll(self.next_index())),
            RawKind::AsyncEnd => Some(MarkKind::End),
            _ => None,
        };
        let span_id = span_id.filter(|&s| s != 0 && event.tick >= self.calls_from);
        if let (Some(what), Some(span)) = (what, span_id) {
            self.marks.push(Mark {
                // A begin that adopts a first slice takes its place in time, before any poll
                // another thread recorded while this begin was being recorded.
                ns: if adopts != 0 { adopts } else { ns },
                what,
                callsite: Some(callsite),
                span: u64::from(span),
                thread: self.thread,
                adopts,
            });
        }
        if matches!(event.kind, RawKind::Begin | RawKind::PollBegin) {
            let index = self.next_index();
            let parent = self.open.last().map(|o| o.index);
            let depth = parent.map_or(0, |p| self.span_mut(p).depth + 1);
            if let Some(stacks) = &mut self.stacks {
                stacks.open(index, parent, callsite);
            }
            self.spans.push(Span {
                callsite,
                start_ns: ns,
                end_ns: 0,
                depth,
                parent,
                children_ns: 0,
                overhead_ns: 0,
                open_at_stop: false,
                cut_at_start: false,
                kind: if event.kind == RawKind::Begin {
                    SpanKind::Scope
                } else {
                    SpanKind::Poll { async_span: None }
                },
            });
            if let Some(memory) = &mut self.memory {
                memory.open();
            }
            self.open.push(Open {
                index,
                key: RawEvent::end_key(event.id, event.tick),
                probe: self.probe.inner,
            });
        }
    }

    /// Closes what is still open at `end_ns` and returns the number of records taken, the
    /// spans (those kept: all of them unless drained), their memory figures, their arguments, and the samples and instants.
    pub(super) fn finish(
        mut self,
        end_ns: u64,
    ) -> (u64, Vec<Span>, Vec<MemoryStats>, Vec<SpanArg>, Extras) {
        if let Some(lead) = self.pending.take() {
            self.lead(lead, None);
        }
        // Enters whose close did not come here: matched across threads.
        for (span, index, ns, callsite) in std::mem::take(&mut self.entered.enters) {
            self.tracing_mark(MarkKind::Enter(index), span, ns, Some(callsite));
        }
        self.apply_counts();
        self.end_args();
        while let Some(open) = self.open.pop() {
            self.close(open, end_ns, true);
        }
        if let Some(stacks) = &mut self.stacks {
            // What is left is final now.
            for (index, span) in &self.pinned {
                stacks.close(*index, span);
            }
            for (index, span) in (self.base..).zip(&self.spans) {
                stacks.close(index, span);
            }
        }
        let memory = self.memory.map(MemoryPairing::finish).unwrap_or_default();
        let spans = if self.pinned.is_empty() {
            self.spans
        } else {
            let mut spans: Vec<Span> = self.pinned.into_iter().map(|(_, span)| span).collect();
            spans.append(&mut self.spans);
            spans
        };
        let extras = Extras {
            samples: self.samples,
            instants: self.instants,
            stacks: self.stacks,
        };
        (self.events, spans, memory, self.args, extras)
    }
}

/// Adds the argument `key = value` to `span` (the innermost open span when it was recorded),
/// when there is one and the key is known.
fn push_arg(
    args: &mut Vec<SpanArg>,
    callsites: &[&'static Callsite],
    span: Option<u32>,
    key: u32,
    value: Value,
) {
    if let (Some(span), Some(key)) = (span, callsite::lookup(callsites, key)) {
        args.push(SpanArg {
            span,
            key: key.name(),
            value,
        });
    }
}

/// Adds the argument `key = value` to the last instant, when the arguments are an instant's
/// (`to`) and the key is known.
fn push_instant_arg(
    instants: &mut [Instant],
    callsites: &[&'static Callsite],
    to: ArgsOf,
    key: u32,
    value: Value,
) {
    if let (ArgsOf::Instant, Some(instant), Some(key)) =
        (to, instants.last_mut(), callsite::lookup(callsites, key))
    {
        instant.args.push((key.name(), value));
    }
}
