//! Where an export gets a trace and each thread's spans ([`SpanSource`]): a decoded
//! [`Trace`], or [`Pieces`](super::pieces::Pieces) decoded as they are written.

use std::collections::BTreeSet;
use std::io;

use crate::record::callsite::Callsite;
use crate::trace::{AsyncSpan, MemoryEvent, Trace};

use super::piece::Piece;

/// What an export takes of each piece ([`SpanSource::each_piece`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Want {
    /// Only pieces without carried or open spans (whole trees).
    pub(crate) whole_trees: bool,
    /// The spans' figures: [`Span::children_ns`](crate::trace::Span::children_ns) and
    /// [`Span::overhead_ns`](crate::trace::Span::overhead_ns) (and so their durations and
    /// self times). Without, they may be 0: for the exports that write only when spans
    /// begin and end (Chrome JSON, Perfetto), whose pieces of plain scopes then leave them
    /// out.
    pub(crate) figures: bool,
}

impl Want {
    /// Every span with its figures, in pieces that may carry open spans.
    pub(crate) const ALL: Self = Self {
        whole_trees: false,
        figures: true,
    };
    /// [`Want::ALL`] without the figures.
    pub(crate) const TIMES: Self = Self {
        whole_trees: false,
        figures: false,
    };
}

/// A begin or an end of a span of a thread whose spans all nest, in the order of a walk of
/// its spans ([`SpanSource::each_edge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpanEdge {
    /// A scope begins: its callsite, its start, and whether it is still open at the stop.
    Begin {
        callsite: &'static Callsite,
        start_ns: u64,
        open_at_stop: bool,
    },
    /// The innermost scope open ends.
    End { end_ns: u64 },
}

/// Where an export gets a trace and each thread's spans: a decoded [`Trace`] (each thread one
/// piece) or [`Pieces`](super::pieces::Pieces) (spans decoded as they are written). Shared by
/// the threads that write a trace's threads apart ([`SpanSource::apart_weight`]).
pub(crate) trait SpanSource: Sync {
    /// The trace; with [`Pieces`](super::pieces::Pieces), its threads hold no spans.
    fn trace(&self) -> &Trace;

    /// The number of spans of thread `thread` of [`SpanSource::trace`] (the OTLP export's
    /// node numbers).
    #[cfg_attr(not(feature = "otlp"), allow(dead_code))]
    fn span_count(&self, thread: usize) -> usize;

    /// How much work reading thread `thread`'s pieces again takes (records, or spans of a
    /// decoded trace), for the exports that write large threads apart, on other cores, while
    /// earlier threads are written; 0 for a thread better written in its turn (its scopes do
    /// not all nest, so its extra tracks are numbered then).
    fn apart_weight(&self, thread: usize) -> usize {
        self.span_count(thread)
    }

    /// Hands each piece of thread `thread`'s spans to `f`, in order, and stops at the first
    /// error `f` returns; pieces and spans as `want` says.
    fn each_piece(
        &self,
        thread: usize,
        want: Want,
        f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
    ) -> io::Result<()>;

    /// For a thread of scopes that all nest, without arguments, memory figures or anything
    /// but scopes: hands each begin and end of its spans to `f`, in the order in which a
    /// walk of its pieces' spans on one lane ([`Lanes::walk`](crate::export::lanes::Lanes))
    /// gives them, in batches, without making the spans; stops at the first error `f`
    /// returns. `None` (nothing handed over) for any other thread: its pieces are what to
    /// read.
    fn each_edge(
        &self,
        _thread: usize,
        _f: &mut dyn FnMut(&[SpanEdge]) -> io::Result<()>,
    ) -> Option<io::Result<()>> {
        None
    }

    /// Hands each allocation and free of the trace's memory timeline to `f`, in the order of
    /// [`MemoryTrace::events`](crate::trace::MemoryTrace::events), with the live bytes of its
    /// process after it ([`MemoryTrace::live_bytes`](crate::trace::MemoryTrace::live_bytes));
    /// only those of process `process` when given. Stops at the first error `f` returns.
    fn each_memory_event(
        &self,
        process: Option<u32>,
        f: &mut dyn FnMut(&MemoryEvent, u64) -> io::Result<()>,
    ) -> io::Result<()>;

    /// The processes (indices in the trace's processes) with an allocation or free in its
    /// memory timeline.
    fn memory_processes(&self) -> BTreeSet<u32>;

    /// Hands each async call that [`SpanSource::trace`] does not hold (its `async_spans` are
    /// empty: pieces of captures whose calls are matched as the threads are read again) to
    /// `f` with its index, in the order `async_spans` would hold them; stops at the first
    /// error of `f`. Nothing for a trace, whose calls are its own.
    fn each_streamed_call(
        &self,
        f: &mut dyn FnMut(usize, &AsyncSpan) -> io::Result<()>,
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
        _want: Want,
        f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(thread) = self.threads.get(thread) else {
            return Ok(());
        };
        f(Piece {
            base: 0,
            spans: &thread.spans,
            memory: &thread.memory,
            args: &thread.args,
            carried: &[],
            open: &[],
        })
    }

    fn each_memory_event(
        &self,
        process: Option<u32>,
        f: &mut dyn FnMut(&MemoryEvent, u64) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(memory) = &self.memory else {
            return Ok(());
        };
        let live = memory.live_bytes();
        for (event, &bytes) in memory.events.iter().zip(&live) {
            if process.is_none_or(|p| p == event.process) {
                f(event, bytes)?;
            }
        }
        Ok(())
    }

    fn memory_processes(&self) -> BTreeSet<u32> {
        self.memory
            .iter()
            .flat_map(|m| &m.events)
            .map(|e| e.process)
            .collect()
    }

    fn each_streamed_call(
        &self,
        _: &mut dyn FnMut(usize, &AsyncSpan) -> io::Result<()>,
    ) -> io::Result<()> {
        Ok(())
    }
}
