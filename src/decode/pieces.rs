//! Decoding captures thread by thread in pieces, for the exports that write spans as they come
//! (Chrome JSON and its Kineto dialect, Perfetto, OTLP/JSON) in memory bounded by the scopes open at once, not by the
//! captures' size.
//!
//! A piece is a run of a thread's spans handed over once it holds [`summary::WINDOW`] spans:
//! between top-level scopes, when nothing is open ([`Pairing::quiet`]), it is whole trees.
//! On a thread whose spans all end within their parents (the first pass says so), once it
//! holds twice that and nothing has closed them all yet, it is handed over while scopes are
//! open ([`Pairing::can_carry`]), right after a span ended: the
//! open spans, a chain from a top-level scope, then begin the next piece again, carried
//! ([`Piece::carried`]), until they end. So a thread whose one scope spans all its records
//! (a `main` or a worker loop) is still decoded a piece at a time, in memory bounded by its
//! open scopes. Spans and arguments are numbered by their position in the piece
//! ([`Piece::index`] gives the index in the thread).
//!
//! An export that needs whole trees may ask for them (`whole_trees`): there a thread whose
//! scopes never all close at once is one piece, held whole. (None does: OTLP, which maps each
//! piece as a trace, carries what its open spans decided.)
//!
//! What the exports write besides spans (the window, processes, threads, counters, instants,
//! the flows of links, by the index of their spans) comes from a first pass that sums the
//! spans instead ([`Summary`]; the flows of `tracing` spans' `follows_from`s too, by a second
//! reading of the threads); captures whose trace needs every span at once (async calls) are
//! not decoded in pieces ([`Pieces::new`] gives `None`) and are decoded whole. Nor are those
//! that tracked memory, for exports of per-span memory figures; the exports of the memory
//! timeline only take them ([`Pieces::with_memory`]), and read the timeline again as they
//! write it ([`SpanSource::each_memory_event`]), merged across threads as they are read.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io;

use crate::capture::{Capture, CaptureThread};
use crate::record::registry::Untracked;
use crate::trace::{AsyncSpan, MemoryEvent, Trace};

use super::Shared;
use super::call_merge;
use super::call_stream;
use super::links::{Keep, Links};
use super::memory::Keeps;
use super::memory::LiveAtEnd;
use super::memory_stream::{self, TimelineThread};
use super::pair::Pairing;
use super::pipeline;
use super::summary::{self, Summary};

pub(crate) use super::piece::Piece;
use super::piece::hand;
pub(crate) use super::source::{SpanEdge, SpanSource, Want};

/// Captures decoded in pieces: their trace without spans, and each thread's spans decoded
/// again, piece by piece, when asked for ([`SpanSource::each_piece`]).
pub(crate) struct Pieces<'c> {
    /// What the captures decode to, without spans or span arguments.
    trace: Cow<'c, Trace>,
    /// Each thread of `trace`: its capture, the capture's index in `captures` (the same
    /// capture may be passed twice: each time is a capture of its own), and its thread there.
    pub(super) sources: Vec<(&'c Capture, usize, &'c CaptureThread)>,
    /// Each thread's span count.
    #[cfg_attr(not(feature = "otlp"), allow(dead_code))]
    counts: Vec<usize>,
    /// Each thread's spans all end within their parents: its pieces may carry open spans.
    pub(super) carries: Vec<bool>,
    /// Each thread was read as plain scopes: so are its pieces ([`plain_pieces`](super::plain_pieces)).
    pub(super) plain: Vec<bool>,
    /// Each thread's spans open at its end (indices in the thread, in order): marked open at
    /// the stop from their begin, which a piece may hand over before they end.
    open_at_end: Vec<Vec<u32>>,
    /// The captures, in order.
    captures: Vec<&'c Capture>,
    /// Each thread's allocations and frees in a memory timeline.
    memory_events: Vec<u64>,
    /// The captures (indices) whose async calls come after the pieces
    /// ([`SpanSource::each_streamed_call`]), in order.
    pub(super) calls: Vec<usize>,
    /// Per thread, which `tracing` enters' slices are polls, when some are matched across
    /// threads.
    pub(super) enter_polls: Vec<Option<std::sync::Arc<super::summary::PollBits>>>,
    /// Per thread, the async calls begun before a flight recorder's window that it began in
    /// it (cut at the window start: they come first).
    cut_calls: Vec<u64>,
}

impl<'c> Pieces<'c> {
    /// The captures, when what they decode to can be written in pieces: `None` when they
    /// hold async calls (those cross threads, and need every span), and then
    /// [`Trace::from_captures`] is what to write. Reads every record once to sum the threads
    /// (their counts, counters, instants and links). Of sessions that tracked memory, the
    /// pieces hold each span's memory figures, and the trace's memory timeline no event (for
    /// exports that write it, [`Pieces::with_memory`]).
    #[cfg_attr(not(feature = "otlp"), allow(dead_code))]
    pub(crate) fn new(captures: &[&'c Capture]) -> Option<Self> {
        // Of a session that tracked memory, the pieces carry each span's memory figures.
        let summary = Summary::counts_of(captures)?;
        let threads = threads(&summary);
        Self::with(captures, Cow::Owned(summary.trace), threads)
    }

    /// [`Pieces::new`], also of captures that tracked memory, for exports that write the
    /// spans and the memory timeline but not the per-span memory figures: the trace's
    /// [`MemoryTrace`](crate::trace::MemoryTrace) holds no events, which
    /// [`SpanSource::each_memory_event`] reads again, merged across threads as they are read.
    ///
    /// Also of captures with `#[profile] async fn` calls (of one session or several, of a
    /// flight recorder's window, with memory tracked): their polls are spans of the pieces
    /// (with no call), and the calls come in order after them
    /// ([`SpanSource::each_streamed_call`]; of a window, those cut at its start first).
    pub(crate) fn with_memory(captures: &[&'c Capture]) -> Option<Self> {
        let summary = Summary::with_memory_timeline(captures)?;
        let threads = threads(&summary);
        let mut pieces = Self::with(captures, Cow::Owned(summary.trace), threads)?;
        pieces.calls = summary.call_captures;
        Some(pieces)
    }

    /// [`Pieces::new`] with the captures' summary already made (the same captures'
    /// [`Summary::of`]).
    /// `None` when the summary summed async calls ([`Summary::streamed_calls`]): pieces
    /// need each poll's call.
    pub(crate) fn of_summary(captures: &[&'c Capture], summary: &'c Summary) -> Option<Self> {
        if summary.streamed_calls {
            return None;
        }
        Self::of_summary_with_polls(captures, summary)
    }

    /// [`Pieces::of_summary`], also of a summary that summed async calls, for what takes a
    /// call's polls as spans of their threads, whichever call they are of (the call tree):
    /// its pieces hold the polls, with no call (a `tracing` enter's slice a poll or a scope
    /// as the matching of the summary found it). `None` of `tracing` spans whose marks were
    /// not matched ([`Summary::tracing_unresolved`]).
    pub(crate) fn of_summary_with_polls(
        captures: &[&'c Capture],
        summary: &'c Summary,
    ) -> Option<Self> {
        // Without the kinds of the `tracing` enters' slices (summed but for their calls).
        if summary.tracing_unresolved {
            return None;
        }
        Self::with(captures, Cow::Borrowed(&summary.trace), threads(summary))
    }

    /// The pieces of `captures`, whose trace without spans is `trace`, with what `threads`
    /// says of each thread.
    fn with(
        captures: &[&'c Capture],
        trace: Cow<'c, Trace>,
        Threads {
            counts,
            carries,
            plain,
            open_at_end,
            memory_events,
            enter_polls,
            cut_calls,
        }: Threads,
    ) -> Option<Self> {
        let mut sources = Vec::with_capacity(trace.threads.len());
        for (at, &capture) in captures.iter().enumerate() {
            let shared = shared(capture);
            sources.extend(
                capture
                    .threads
                    .iter()
                    .filter(|t| shared.has_records(t))
                    .map(|t| (capture, at, t)),
            );
        }
        let matches = sources.len() == trace.threads.len()
            && sources
                .iter()
                .zip(&trace.threads)
                .all(|((_, _, source), thread)| source.id == thread.id);
        if !matches {
            // Decoding whole is always right; this is not expected.
            debug_assert!(false, "the summed threads are the captures' threads");
            return None;
        }
        Some(Self {
            counts,
            carries,
            plain,
            open_at_end,
            trace,
            sources,
            captures: captures.to_vec(),
            memory_events,
            calls: Vec::new(),
            enter_polls,
            cut_calls,
        })
    }
}

impl SpanSource for Pieces<'_> {
    fn trace(&self) -> &Trace {
        &self.trace
    }

    fn span_count(&self, thread: usize) -> usize {
        self.counts.get(thread).copied().unwrap_or(0)
    }

    fn apart_weight(&self, thread: usize) -> usize {
        match (self.carries.get(thread), self.sources.get(thread)) {
            (Some(true), Some(&(_, _, source))) => source.record_bound(),
            _ => 0,
        }
    }

    fn each_edge(
        &self,
        thread: usize,
        f: &mut dyn FnMut(&[SpanEdge]) -> io::Result<()>,
    ) -> Option<io::Result<()>> {
        // Plain scopes that all nest (the first reading found none that ends before a
        // child), without memory figures.
        let &(capture, _, source) = self.sources.get(thread)?;
        let nested =
            self.plain.get(thread) == Some(&true) && self.carries.get(thread) == Some(&true);
        if !nested || capture.memory.is_on() {
            return None;
        }
        let open_at_end = self.open_at_end.get(thread).map_or(&[][..], Vec::as_slice);
        // A large thread's edges are read on another core while they are written.
        let apart = source.record_bound() >= pipeline::PIPELINE_FROM;
        let _untracked = Untracked::enter();
        let decode = |f: &mut dyn FnMut(&[SpanEdge]) -> io::Result<()>| {
            let shared = shared(capture);
            super::plain_pieces::each_edge(&shared, source, open_at_end, f)
        };
        Some(pipeline::edges(apart, decode, f))
    }

    fn each_piece(
        &self,
        thread: usize,
        want: Want,
        f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(&(_, _, source)) = self.sources.get(thread) else {
            return Ok(());
        };
        // A large thread's pieces are decoded on another core while they are written.
        let apart = source.record_bound() >= pipeline::PIPELINE_FROM;
        let _untracked = Untracked::enter();
        pipeline::pieces(apart, |f| self.decode_pieces(thread, want, f), f)
    }

    fn each_memory_event(
        &self,
        process: Option<u32>,
        f: &mut dyn FnMut(&MemoryEvent, u64) -> io::Result<()>,
    ) -> io::Result<()> {
        self.memory_events(process, f).map(drop)
    }

    fn memory_processes(&self) -> BTreeSet<u32> {
        (self.memory_events.iter().zip(&self.trace.threads))
            .filter(|&(&n, _)| n > 0)
            .map(|(_, thread)| thread.process)
            .collect()
    }

    fn each_streamed_call(
        &self,
        f: &mut dyn FnMut(usize, &AsyncSpan) -> io::Result<()>,
    ) -> io::Result<()> {
        let _untracked = Untracked::enter();
        // Each session's calls in the order they began, merged as the trace merges them.
        let streams = (self.calls.iter())
            .map(|&capture| -> call_merge::Stream<'_> {
                Box::new(move |f| self.calls_of(capture, f))
            })
            .collect();
        call_merge::each_merged(streams, f)
    }
}

impl<'c> Pieces<'c> {
    /// The async calls of capture `capture` (its index), handed to `f` in the order they
    /// began, each of its process in the trace.
    fn calls_of(
        &self,
        capture: usize,
        f: &mut dyn FnMut(&AsyncSpan) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some((shared, threads, ends, at)) = self.capture_threads(capture) else {
            return Ok(());
        };
        call_stream::each_call_in_order(&shared, &threads, &ends, at, f)
    }

    /// What capture `capture`'s calls are read from: its threads (with records), where each
    /// ends, its process in the trace and its calls cut at a window start.
    #[allow(clippy::type_complexity)]
    pub(super) fn capture_threads(
        &self,
        capture: usize,
    ) -> Option<(Shared<'c>, Vec<&'c CaptureThread>, Vec<u64>, (u32, u64))> {
        let in_capture: Vec<usize> = (0..self.sources.len())
            .filter(|&t| self.sources[t].1 == capture)
            .collect();
        let &first = in_capture.first()?;
        let shared = shared(self.sources[first].0);
        let threads: Vec<&CaptureThread> = in_capture.iter().map(|&t| self.sources[t].2).collect();
        let ends: Vec<u64> = threads.iter().map(|t| shared.end_of(t)).collect();
        let process = self.trace.threads[first].process;
        let cut = in_capture.iter().map(|&t| self.cut_calls[t]).sum();
        Some((shared, threads, ends, (process, cut)))
    }

    /// [`SpanSource::each_piece`]: thread `thread`'s pieces, decoded here, handed to `f`.
    pub(super) fn decode_pieces(
        &self,
        thread: usize,
        want: Want,
        f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(&(capture, _, source)) = self.sources.get(thread) else {
            return Ok(());
        };
        let carry = !want.whole_trees && self.carries.get(thread).copied().unwrap_or(false);
        let shared = shared(capture);
        if self.plain.get(thread) == Some(&true) && !capture.memory.is_on() {
            let open_at_end = self.open_at_end.get(thread).map_or(&[][..], Vec::as_slice);
            let plain = super::plain_pieces::Reading {
                carry,
                figures: want.figures,
                ends_open: open_at_end,
            };
            return super::plain_pieces::each_piece(&shared, source, plain, f);
        }
        // The first pass matched the links.
        let (mut marks, mut links, mut events) =
            (Vec::new(), Links::keeping(Keep::Nothing), Vec::new());
        let mut pairing = Pairing::new(
            shared.callsites,
            (&shared.converter, shared.probe),
            (thread, source.id),
            &mut marks,
            &mut links,
            capture.memory.is_on().then_some(&mut events),
            summary::WINDOW,
        );
        // The spans' memory figures ([`Piece::memory`]).
        pairing.memory_keeps(Keeps::Figures);
        if carry && let Some(open) = self.open_at_end.get(thread) {
            pairing.ends_open(open.clone());
        }
        if let Some(Some(polls)) = self.enter_polls.get(thread) {
            pairing.enter_polls(polls.clone());
        }
        shared.start(&mut pairing, source);
        let mut result = Ok(());
        shared.for_each_run(source, |records| {
            for &record in records {
                if result.is_err() {
                    return;
                }
                pairing.push(record);
                if pairing.piece_due(carry) {
                    result = pairing.drain_piece(|piece| hand(piece, f));
                    // Async calls are matched apart ([`SpanSource::each_streamed_call`]).
                    pairing.marks_mut().clear();
                }
            }
        });
        result?;
        // As `Shared::thread` closes what is still open.
        let _ = pairing.close_rest(shared.end_of(source));
        pairing.drain_piece(|piece| hand(piece, f))
    }

    /// The number of threads of the trace.
    pub(super) fn thread_count(&self) -> usize {
        self.sources.len()
    }

    /// What thread `thread` is read from, as [`SpanSource::each_piece`] reads it.
    pub(super) fn source_of(&self, thread: usize) -> Option<ThreadSource<'_>> {
        let &(capture, _, source) = self.sources.get(thread)?;
        Some(ThreadSource {
            capture,
            thread: source,
            carry: self.carries.get(thread).copied().unwrap_or(false),
            open_at_end: self.open_at_end.get(thread).map_or(&[], Vec::as_slice),
            enter_polls: self.enter_polls.get(thread).cloned().flatten(),
        })
    }

    /// [`SpanSource::each_memory_event`]; returns the allocations live at the end.
    pub(super) fn memory_events(
        &self,
        process: Option<u32>,
        f: &mut dyn FnMut(&MemoryEvent, u64) -> io::Result<()>,
    ) -> io::Result<LiveAtEnd> {
        if self.memory_events.iter().all(|&n| n == 0) {
            return Ok(LiveAtEnd::default());
        }
        let threads: Vec<TimelineThread<'_>> = (self.sources.iter().zip(&self.trace.threads))
            .map(|(&(_, capture, source), thread)| TimelineThread {
                capture,
                process: thread.process,
                source,
            })
            .collect();
        memory_stream::each_event(&self.captures, &threads, process, f)
    }
}

impl Summary {
    /// The summary of what `captures` decode to ([`Trace::from_captures`]), or `None` when
    /// the sums cannot stand for their spans: async calls that cannot be summed as the
    /// threads are read again (marks out of order: see [`call_stream`](super::call_stream)),
    /// or allocations and frees of a thread
    /// out of time order (a forged file). The async calls of `#[profile] async fn`s and of
    /// `tracing` spans entered several times are summed ([`Summary::streamed_calls`],
    /// [`ThreadSums::enter_polls`](super::summary::ThreadSums::enter_polls)).
    /// Durations are kept each while the captures' scopes fit the exact budget, else in
    /// histograms. The sums hold each row's memory figures, and of a memory timeline the
    /// allocations live at its end come from reading its allocations and frees again, merged
    /// across threads ([`Summary::live_at_end`]).
    pub(crate) fn of<C: std::borrow::Borrow<Capture>>(captures: &[C]) -> Option<Self> {
        let captures: Vec<&Capture> = captures.iter().map(C::borrow).collect();
        let scopes: u64 = captures.iter().map(|c| c.record_count() / 2).sum();
        let exact = scopes <= crate::decode::quantiles::exact_budget();
        let sum = super::summary::Sum {
            exact,
            stacks: false,
            calls: super::summary::Calls::Sum,
            sites: true,
        };
        let mut summary = Self::summed(&captures, sum)?;
        if !summary.threads.iter().all(|t| t.memory_in_order) {
            return None;
        }
        if summary.threads.iter().any(|t| t.memory_events > 0) {
            // (Only their allocations and frees are read: whatever their spans.)
            let pieces = Pieces::with(&captures, Cow::Borrowed(&summary.trace), threads(&summary))?;
            let live = pieces.memory_events(None, &mut |_, _| Ok(())).ok()?;
            drop(pieces);
            summary.live_at_end = live;
        }
        Some(summary)
    }
}

/// What a thread of [`Pieces`] is read from ([`Pieces::source_of`]).
pub(super) struct ThreadSource<'c> {
    pub(super) capture: &'c Capture,
    pub(super) thread: &'c CaptureThread,
    /// Its pieces may carry open spans.
    pub(super) carry: bool,
    /// Its spans open at its end.
    pub(super) open_at_end: &'c [u32],
    /// Which of its `tracing` enters' slices are polls, when some are matched across threads.
    pub(super) enter_polls: Option<std::sync::Arc<super::summary::PollBits>>,
}

/// What [`Pieces`] takes of each thread of a [`Summary`].
struct Threads {
    /// Span counts.
    counts: Vec<usize>,
    /// Whether the pieces may carry open spans (nothing tangled).
    carries: Vec<bool>,
    /// Whether the thread was read as plain scopes.
    plain: Vec<bool>,
    /// The spans open at the end.
    open_at_end: Vec<Vec<u32>>,
    /// Allocations and frees in a memory timeline.
    memory_events: Vec<u64>,
    /// Which `tracing` enters' slices are polls ([`ThreadSums::enter_polls`]).
    enter_polls: Vec<Option<std::sync::Arc<super::summary::PollBits>>>,
    /// The async calls cut at a flight recorder's window start ([`CallSums::cut`](super::summary::CallSums)).
    cut_calls: Vec<u64>,
}

/// Each thread's span count, whether its spans all end within their parents, and those open
/// at its end.
fn threads(summary: &Summary) -> Threads {
    Threads {
        counts: summary.threads.iter().map(|t| t.spans).collect(),
        carries: summary.threads.iter().map(|t| !t.tangled).collect(),
        plain: summary.threads.iter().map(|t| t.plain).collect(),
        open_at_end: (summary.threads.iter())
            .map(|t| t.open_at_end.clone())
            .collect(),
        memory_events: summary.threads.iter().map(|t| t.memory_events).collect(),
        enter_polls: (summary.threads.iter())
            .map(|t| t.enter_polls.clone())
            .collect(),
        cut_calls: (summary.threads.iter())
            .map(|t| t.calls.iter().map(|c| c.cut).sum())
            .collect(),
    }
}

/// What decoding any thread of `capture` reads, as [`Trace::from_capture`] sets it up.
fn shared(capture: &Capture) -> Shared<'_> {
    Shared::new(capture, false, false)
}

impl<'c> Pieces<'c> {
    /// [`Pieces::of_summary_with_polls`] of a summary that summed async calls, whose calls
    /// come after the polls ([`SpanSource::each_streamed_call`]), as the decoded trace holds
    /// them (of several sessions, merged in order of their start; of a flight recorder's
    /// window, those cut at its start first, as many as the summary counted).
    pub(crate) fn of_summary_with_calls(
        captures: &[&'c Capture],
        summary: &'c Summary,
    ) -> Option<Self> {
        if summary.calls_unordered {
            return None;
        }
        let mut pieces = Self::of_summary_with_polls(captures, summary)?;
        pieces.calls = summary.call_captures.clone();
        Some(pieces)
    }
}
