//! A piece: a run of one thread's spans handed over by [`Pieces`](super::pieces::Pieces).

use std::io;

use crate::trace::{MemoryStats, Span, SpanArg};

/// A run of one thread's spans with their arguments: the spans carried from the last piece
/// (still open when it was handed over: their begins were in it), then the spans begun since,
/// in the order they began. Indices (`Span::parent`, `SpanArg::span`) are positions in the
/// piece. Spans still open at its end ([`Piece::open`], their `end_ns` is `u64::MAX`) come
/// again, carried, in the next piece; every other span ends in this one. Without carried or
/// open spans, a piece is whole trees.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece<'a> {
    /// The index in the thread of the first span after the carried ones.
    pub(crate) base: u32,
    pub(crate) spans: &'a [Span],
    /// The memory figures of `spans` (same indices; those of a span still open are its
    /// figures so far), or none when memory was not tracked.
    pub(crate) memory: &'a [MemoryStats],
    /// The arguments of `spans`, in span order.
    pub(crate) args: &'a [SpanArg],
    /// The index in the thread of each carried span (the first `carried.len()` of `spans`).
    pub(crate) carried: &'a [u32],
    /// The spans still open (positions in the piece, in order): a chain from a top-level
    /// span, each the parent of the next.
    pub(crate) open: &'a [u32],
}

impl<'a> Piece<'a> {
    /// A whole thread's `spans` as one piece, without arguments.
    #[cfg(test)]
    pub(crate) fn whole(spans: &'a [Span]) -> Self {
        Self {
            base: 0,
            spans,
            memory: &[],
            args: &[],
            carried: &[],
            open: &[],
        }
    }

    /// The arguments of the span at `span` in the piece.
    pub(crate) fn args_of(&self, span: u32) -> &[SpanArg] {
        let start = self.args.partition_point(|a| a.span < span);
        let end = start + self.args[start..].partition_point(|a| a.span == span);
        &self.args[start..end]
    }

    /// The index in the thread of the span at `span` in the piece.
    pub(crate) fn index(&self, span: u32) -> u32 {
        match self.carried.get(span as usize) {
            Some(&index) => index,
            None => self.base + (span - self.carried.len() as u32),
        }
    }

    /// True when the span at `span` was carried from the last piece (its begin was there).
    pub(crate) fn is_carried(&self, span: u32) -> bool {
        (span as usize) < self.carried.len()
    }

    /// True when the span at `span` is still open: it ends in a later piece.
    pub(crate) fn is_open(&self, span: u32) -> bool {
        self.open.binary_search(&span).is_ok()
    }

    /// True when the piece holds the begin (`begin`) or the end of the span at `span`: not
    /// the begin of a carried span, nor the end of an open one. Piece after piece, the edges
    /// a piece holds, in the order a walk of its spans gives them, are a walk of the whole
    /// thread.
    pub(crate) fn has_edge(&self, span: u32, begin: bool) -> bool {
        if begin {
            !self.is_carried(span)
        } else {
            !self.is_open(span)
        }
    }
}

/// Hands `piece` to `f` unless it holds no span.
pub(super) fn hand(
    piece: Piece<'_>,
    f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
) -> io::Result<()> {
    if piece.spans.is_empty() {
        return Ok(());
    }
    f(piece)
}

/// The item at `index` in a thread of what a pairing keeps per span until a piece is handed
/// over: `items` from index `base` on, and before it the `pinned` ones (carried from the last
/// piece, with their index, in order). Only kept spans are asked for.
#[inline(always)]
pub(super) fn kept_at<'k, T>(
    items: &'k mut [T],
    pinned: &'k mut [(u32, T)],
    base: u32,
    index: u32,
) -> &'k mut T {
    match index.checked_sub(base) {
        Some(at) => &mut items[at as usize],
        None => {
            let at = pinned.partition_point(|(i, _)| *i < index);
            &mut pinned[at].1
        }
    }
}
