//! Decoding captures thread by thread in pieces, for the exports that write spans as they come
//! (Chrome JSON and its Kineto dialect, Perfetto, OTLP/JSON) in memory bounded by the scopes open at once, not by the
//! captures' size.
//!
//! A piece is a run of a thread's spans that are whole trees: it is handed over between
//! top-level scopes, when nothing is open ([`Pairing::quiet`]), once it holds
//! [`summary::WINDOW`] spans. Its spans and arguments are numbered from the piece's first
//! span ([`Piece::base`] is that span's index in the thread), so an export writes a piece as
//! it writes a whole thread. A thread whose scopes never all close at once (one scope open
//! from its first record to its last) is one piece, held whole.
//!
//! What the exports write besides spans (the window, processes, threads, counters, instants)
//! comes from a first pass that sums the spans instead ([`Summary`]); captures whose trace
//! needs every span at once (async calls, links, tracked memory) are not decoded in pieces
//! ([`Pieces::new`] gives `None`) and are decoded whole.

use std::borrow::Cow;
use std::io;

use crate::capture::{Capture, CaptureThread};
use crate::record::registry::Untracked;
use crate::trace::{Span, SpanArg, Trace};

use super::Shared;
use super::links::Links;
use super::pair::Pairing;
use super::summary::{self, Summary};

/// A run of one thread's spans, whole trees, with their arguments; indices (`Span::parent`,
/// `SpanArg::span`) count from the piece's first span.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece<'a> {
    /// The index of the first span in its thread.
    pub(crate) base: u32,
    pub(crate) spans: &'a [Span],
    /// The arguments of `spans`, in span order.
    pub(crate) args: &'a [SpanArg],
}

impl Piece<'_> {
    /// The arguments of the span at `span` in the piece.
    pub(crate) fn args_of(&self, span: u32) -> &[SpanArg] {
        let start = self.args.partition_point(|a| a.span < span);
        let end = start + self.args[start..].partition_point(|a| a.span == span);
        &self.args[start..end]
    }
}

/// Where an export gets a trace and each thread's spans: a decoded [`Trace`] (each thread one
/// piece) or [`Pieces`] (spans decoded as they are written).
pub(crate) trait SpanSource {
    /// The trace; with [`Pieces`], its threads hold no spans.
    fn trace(&self) -> &Trace;

    /// The number of spans of thread `thread` of [`SpanSource::trace`] (the OTLP export's
    /// node numbers).
    #[cfg_attr(not(feature = "otlp"), allow(dead_code))]
    fn span_count(&self, thread: usize) -> usize;

    /// Hands each piece of thread `thread`'s spans to `f`, in order, and stops at the first
    /// error `f` returns.
    fn each_piece(
        &self,
        thread: usize,
        f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
    ) -> io::Result<()>;
}

impl SpanSource for Trace {
    fn trace(&self) -> &Trace {
        self
    }

    fn span_count(&self, thread: usize) -> usize {
        self.threads.get(thread).map_or(0, |t| t.spans.len())
    }

    fn each_piece(
        &self,
        thread: usize,
        f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(thread) = self.threads.get(thread) else {
            return Ok(());
        };
        f(Piece {
            base: 0,
            spans: &thread.spans,
            args: &thread.args,
        })
    }
}

/// Captures decoded in pieces: their trace without spans, and each thread's spans decoded
/// again, piece by piece, when asked for ([`SpanSource::each_piece`]).
pub(crate) struct Pieces<'c> {
    /// What the captures decode to, without spans, span arguments or links.
    trace: Cow<'c, Trace>,
    /// Each thread of `trace`: its capture and its thread there.
    sources: Vec<(&'c Capture, &'c CaptureThread)>,
    /// Each thread's span count.
    #[cfg_attr(not(feature = "otlp"), allow(dead_code))]
    counts: Vec<usize>,
}

impl<'c> Pieces<'c> {
    /// The captures, when what they decode to can be written in pieces: `None` when they
    /// tracked memory or hold async calls or links (those cross threads, or need every
    /// span), and then [`Trace::from_captures`] is what to write. Reads every record once to
    /// sum the threads (their counts, counters and instants).
    pub(crate) fn new(captures: &[&'c Capture]) -> Option<Self> {
        let summary = Summary::of_with(captures, false, false)?;
        let counts = summary.threads.iter().map(|t| t.spans).collect();
        let follows = summary.follows();
        Self::with(captures, Cow::Owned(summary.trace), counts, follows)
    }

    /// [`Pieces::new`] with the captures' summary already made (the same captures'
    /// [`Summary::of`]).
    pub(crate) fn of_summary(captures: &[&'c Capture], summary: &'c Summary) -> Option<Self> {
        let counts = summary.threads.iter().map(|t| t.spans).collect();
        let follows = summary.follows();
        Self::with(captures, Cow::Borrowed(&summary.trace), counts, follows)
    }

    /// The pieces of `captures`, whose trace without spans is `trace`, its threads holding
    /// `counts` spans; `None` when they hold links (`follows`).
    fn with(
        captures: &[&'c Capture],
        trace: Cow<'c, Trace>,
        counts: Vec<usize>,
        follows: bool,
    ) -> Option<Self> {
        if follows {
            return None;
        }
        let mut sources = Vec::with_capacity(trace.threads.len());
        for &capture in captures {
            let shared = shared(capture);
            sources.extend(
                capture
                    .threads
                    .iter()
                    .filter(|t| shared.has_records(t))
                    .map(|t| (capture, t)),
            );
        }
        let matches = sources.len() == trace.threads.len()
            && sources
                .iter()
                .zip(&trace.threads)
                .all(|((_, source), thread)| source.id == thread.id);
        if !matches {
            // Decoding whole is always right; this is not expected.
            debug_assert!(false, "the summed threads are the captures' threads");
            return None;
        }
        Some(Self {
            counts,
            trace,
            sources,
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

    fn each_piece(
        &self,
        thread: usize,
        f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(&(capture, source)) = self.sources.get(thread) else {
            return Ok(());
        };
        let _untracked = Untracked::enter();
        let shared = shared(capture);
        let (mut marks, mut links) = (Vec::new(), Links::default());
        let mut pairing = Pairing::new(
            shared.callsites,
            (&shared.converter, shared.probe),
            (thread, source.id),
            &mut marks,
            &mut links,
            None,
            summary::WINDOW,
        );
        for cut in capture.cut_of(source.id) {
            pairing.open_cut(cut.record());
        }
        if let Some(tick) = capture.cut_start {
            pairing.calls_from(tick);
        }
        let mut result = Ok(());
        shared.for_each_record(source, |record| {
            if result.is_err() {
                return;
            }
            pairing.push(record);
            if pairing.kept_spans() >= summary::WINDOW && pairing.quiet() {
                result = pairing.drain_quiet(|base, spans, args| hand(base, spans, args, f));
            }
        });
        result?;
        // As `Shared::thread` closes what is still open.
        let end_ns = match shared.salvaged {
            true => shared.last_tick(source).map_or(shared.end_ns, |tick| {
                shared.converter.to_unix_ns(tick).min(shared.end_ns)
            }),
            false => shared.end_ns,
        };
        let base = pairing.base();
        let (_, mut spans, _, mut args, _) = pairing.finish(end_ns);
        hand(base, &mut spans, &mut args, f)
    }
}

/// Hands the spans from index `base` of their thread, and their arguments, to `f` as a piece.
fn hand(
    base: u32,
    spans: &mut [Span],
    args: &mut [SpanArg],
    f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
) -> io::Result<()> {
    if spans.is_empty() {
        return Ok(());
    }
    if base > 0 {
        // Whole trees: every parent is in the piece.
        for span in spans.iter_mut() {
            span.parent = span.parent.map(|p| p.saturating_sub(base));
        }
        for arg in args.iter_mut() {
            arg.span = arg.span.saturating_sub(base);
        }
    }
    f(Piece { base, spans, args })
}

/// What decoding any thread of `capture` reads, as [`Trace::from_capture`] sets it up.
fn shared(capture: &Capture) -> Shared<'_> {
    Shared::new(capture, false, false)
}
