//! One thread's pairing state ([`Pairing`]) and what it is made of: open scopes, entered
//! `tracing` spans, arguments waiting for their scope.

use crate::record::callsite::{self, Callsite};
use crate::record::event::{RawEvent, RawKind};
use crate::record::pages::prefer_huge_pages_for;
use crate::record::value::ArgReader;
use crate::trace::{Instant, Span, SpanArg};

use crate::decode::counters::RawSample;
use crate::decode::summary::{PollBits, StackTree};

use crate::decode::async_spans::{Chain, Mark, MarkKind};
use crate::decode::convert::Converter;
use crate::decode::links::Links;
use crate::decode::memory::{Counts, Keeps, MemoryPairing, RawMemory};

use super::enters::Entered;

/// One thread's pairing state: spans so far, the open stack, and a lead record waiting for
/// its [`Payload`](RawKind::Payload).
pub(in crate::decode) struct Pairing<'a> {
    pub(super) callsites: &'a [&'static Callsite],
    pub(super) converter: &'a Converter,
    /// Index of the thread in the trace.
    pub(super) thread: usize,
    /// tickscope's id of the thread.
    pub(super) thread_id: u64,
    pub(super) marks: &'a mut Vec<Mark>,
    pub(super) links: &'a mut Links,
    /// The spans kept from index `base` on: all of them, unless [`Pairing::drain_final`] let
    /// go of some.
    pub(super) spans: Vec<Span>,
    /// The index (in the thread) of `spans[0]`.
    pub(super) base: u32,
    /// The spans before `base` that are kept, with their index, in index order: open spans
    /// and their ancestors when [`Pairing::drain_final`] ran.
    pub(super) pinned: Vec<(u32, Span)>,
    /// The spans summed by stack as they become final, when asked for.
    pub(super) stacks: Option<StackTree>,
    /// [`Pairing::window_full`] from this many kept spans on.
    pub(super) drain_at: usize,
    pub(super) open: Vec<Open>,
    pub(super) pending: Option<RawEvent>,
    pub(super) events: u64,
    pub(super) memory: Option<MemoryPairing<'a>>,
    pub(super) args: Vec<SpanArg>,
    pub(super) reader: ArgReader,
    /// Counted allocations being read: the counts so far, and whether their frees came.
    pub(super) counts: Option<(Counts, bool)>,
    /// Overhead compensation in ticks: a scope's own probe inside its duration, and a
    /// child's probe outside its own (in its parent's).
    pub(super) probe: Probe,
    /// Counter and value samples, in recorded order.
    pub(super) samples: Vec<RawSample>,
    /// Instants, in recorded order.
    pub(super) instants: Vec<Instant>,
    /// What the argument records being read belong to.
    pub(super) args_of: ArgsOf,
    /// `tracing` span enters of this thread whose span's close has not come yet.
    pub(super) entered: Entered,
    /// Async begins, polls and ends recorded before this tick make no mark: a flight
    /// recorder's window start common to every thread (0: all of them).
    pub(super) calls_from: u64,
    /// The effect's span id of a [`RawKind::SpanFollows`] whose second payload (the cause's)
    /// comes next.
    pub(super) follows_effect: Option<u64>,
    /// Some span did not end within its parent: a scope was closed while one it encloses was
    /// still open (guards dropped out of order), or ended before a child's end (forged
    /// ticks). Until then the open spans are always a chain from a top-level span, each the
    /// parent of the next. Also set when a scope got an argument after a scope began inside
    /// it: its begin may have been handed over in a piece already.
    pub(super) tangled: bool,
    /// The spans (indices in the thread) that a first pass found still open at the end of the
    /// thread, in order: marked [`open_at_stop`](Span::open_at_stop) from their begin, so that
    /// a piece that hands a begin over says so ([`Pairing::ends_open`]).
    pub(super) ends_open: Vec<u32>,
    /// Which `tracing` enters' slices are polls, as a first reading matched them
    /// ([`Pairing::enter_polls`]).
    pub(super) enter_polls: Option<std::sync::Arc<PollBits>>,
    /// Each poll's and enter's mark says where its slice stands ([`Pairing::chains`]):
    /// which `tracing` enters' slices are polls.
    pub(super) chains: Option<std::sync::Arc<PollBits>>,
}

/// What argument records belong to: the record before them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ArgsOf {
    /// The innermost open span (the one just entered).
    Span,
    /// The last instant.
    Instant,
    /// An instant whose callsite is unknown (bad input): they are skipped.
    Nothing,
}

/// What a thread gives besides its spans: counter and value samples, and instants.
pub(in crate::decode) struct Extras {
    pub(in crate::decode) samples: Vec<RawSample>,
    pub(in crate::decode) instants: Vec<Instant>,
    /// The spans summed by stack, when asked for ([`Pairing::keep_stacks`]).
    pub(in crate::decode) stacks: Option<StackTree>,
}

/// The probe overhead decoding subtracts, in 1/[`PROBE_UNIT`] tick (zeros: nothing is
/// subtracted).
#[derive(Clone, Copy, Debug, Default)]
pub(in crate::decode) struct Probe {
    /// A scope's own probe between its two ticks.
    pub(in crate::decode) inner: u64,
    /// A child's probe outside its two ticks, in its parent's time.
    pub(in crate::decode) outer: u64,
}

/// An open span while pairing: its index, the key its end carries
/// ([`RawEvent::end_key`]), and the probe ticks inside it so far (its own inner part, plus
/// each closed child's probe and what was subtracted from the child).
#[derive(Clone, Copy)]
pub(super) struct Open {
    pub(super) index: u32,
    /// A poll slice ([`PollBegin`](RawKind::PollBegin)).
    pub(super) poll: bool,
    pub(super) key: u32,
    pub(super) probe: u64,
    /// The latest end of its children closed so far (ns).
    pub(super) child_end: u64,
    /// Its [`depth`](Span::depth) (a child's is one more).
    pub(super) depth: u32,
}

/// True for the kinds whose record is followed by a [`Payload`](RawKind::Payload).
pub(super) fn takes_payload(kind: RawKind) -> bool {
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
    pub(in crate::decode) fn new(
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
            tangled: false,
            ends_open: Vec::new(),
            enter_polls: None,
            chains: None,
        }
    }

    /// Each poll's and enter's mark says where its slice stands among the spans open
    /// ([`Mark::chain`]), the `tracing` enters' slices being polls as `polls` says.
    pub(in crate::decode) fn chains(&mut self, polls: std::sync::Arc<PollBits>) {
        self.chains = Some(polls);
    }

    /// Where a slice beginning now stands ([`Pairing::chains`]); `opened` when it is open
    /// already (the top of the open spans).
    pub(super) fn chain(&self, opened: bool) -> Chain {
        let Some(polls) = &self.chains else {
            return Chain::UNKNOWN;
        };
        let open = match opened {
            true => &self.open[..self.open.len().saturating_sub(1)],
            false => &self.open[..],
        };
        let up = (open.iter().rev())
            .find(|o| o.poll || polls.get(o.index))
            .map_or(Chain::NONE, |o| o.index);
        let chained = open
            .first()
            .is_none_or(|o| self.parent_of(o.index).is_none())
            && (open.windows(2)).all(|w| self.parent_of(w[1].index) == Some(w[0].index));
        Chain {
            parent: open.last().map_or(Chain::NONE, |o| o.index),
            up,
            root: open.first().map_or(Chain::NONE, |o| o.index),
            broken: !chained,
        }
    }

    /// Makes each `tracing` enter's slice a poll (of no call) when `polls` says so, as it
    /// is opened: the kinds that matching the marks across threads gave them.
    pub(in crate::decode) fn enter_polls(&mut self, polls: std::sync::Arc<PollBits>) {
        self.enter_polls = Some(polls);
    }

    /// Marks the spans at `indices` (in the thread, in order: those a first pass found open
    /// at the end) open at the stop from their begin.
    pub(in crate::decode) fn ends_open(&mut self, indices: Vec<u32>) {
        self.ends_open = indices;
    }

    /// Keeps of allocations and frees only what `keeps` says (with memory tracked).
    pub(in crate::decode) fn memory_keeps(&mut self, keeps: Keeps) {
        if let Some(memory) = &mut self.memory {
            memory.only(keeps);
        }
    }

    /// Moves the allocations and frees kept so far to the end of `to`, and lets go of the
    /// counter samples, instants and async marks (a timeline read as it is written needs
    /// none of them).
    pub(in crate::decode) fn take_memory(
        &mut self,
        to: &mut std::collections::VecDeque<RawMemory>,
    ) {
        if let Some(memory) = &mut self.memory {
            memory.take_events(to);
        }
        self.forget_extras();
        self.marks.clear();
    }

    /// Lets go of the counter samples and instants so far (a reading that needs neither).
    pub(in crate::decode) fn forget_extras(&mut self) {
        self.samples.clear();
        self.instants.clear();
    }

    /// The async marks made so far, in the order they were made: to be taken as they come
    /// (a reading that does not keep them all).
    pub(in crate::decode) fn marks_mut(&mut self) -> &mut Vec<Mark> {
        self.marks
    }

    /// Allocations and frees seen so far, and whether they came in time order
    /// ([`MemoryPairing::seen`]); `(0, true)` without memory tracked.
    pub(in crate::decode) fn memory_seen(&self) -> (u64, bool) {
        self.memory.as_ref().map_or((0, true), MemoryPairing::seen)
    }

    /// Builds async calls only from the records from `tick` on (see
    /// [`Trace::cut_start_ns`](crate::trace::Trace::cut_start_ns)): the poll slices before
    /// stay spans of the thread, without a call.
    pub(in crate::decode) fn calls_from(&mut self, tick: u64) {
        self.calls_from = tick;
    }

    /// A mark of `tracing` span `span` at `ns`: an enter of the slice at `index`, or a close.
    pub(super) fn tracing_mark(
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
            chain: match what {
                MarkKind::Enter(_) => self.chain(true),
                _ => Chain::UNKNOWN,
            },
        });
    }

    pub(super) fn callsite(&self, id: u32) -> Option<&'static Callsite> {
        callsite::lookup(self.callsites, id)
    }

    /// The index (in the thread) the next span gets.
    pub(super) fn next_index(&self) -> u32 {
        self.base + self.spans.len() as u32
    }

    /// The kept span at `index` (in the thread). Spans are let go only once nothing can
    /// change them ([`Pairing::drain_final`]), and only those are asked for: the open ones
    /// and their ancestors.
    pub(super) fn span_mut(&mut self, index: u32) -> &mut Span {
        crate::decode::piece::kept_at(&mut self.spans, &mut self.pinned, self.base, index)
    }

    /// The parent of the kept span at `index`.
    pub(super) fn parent_of(&self, index: u32) -> Option<u32> {
        match index.checked_sub(self.base) {
            Some(at) => self.spans[at as usize].parent,
            None => {
                let at = self.pinned.partition_point(|(i, _)| *i < index);
                self.pinned[at].1.parent
            }
        }
    }
}
