//! A thread of plain scopes handed over in pieces on a short path: what
//! [`Pieces`](super::pieces::Pieces) hands over through the general pairing, for a thread
//! whose first reading took the short path of [`plain`](super::plain) (entries and exits
//! only, each exit closing the innermost scope open, or none: [`ThreadSums::plain`]).
//!
//! The pieces are those of the general path, to the byte: the same spans (times, depths,
//! parents, children's time, probe overhead, marks), cut at the same records, with the same
//! spans carried and open. What it leaves out is what such a thread never needs: a vector of
//! its records (a kept chunk's records are made as they are taken), payloads, arguments,
//! memory, async marks, links, and the search of the open scopes an exit may close.
//! The tests of `decode::plain_tests` check it: every thread they generate, read as pieces
//! both ways, gives the same pieces.
//!
//! [`ThreadSums::plain`]: super::summary::ThreadSums::plain

use std::io;

use crate::capture::CaptureThread;
use crate::capture::compress::Step;
use crate::record::callsite;
use crate::record::clock::PROBE_UNIT;
use crate::record::registry::Untracked;
use crate::trace::{Span, SpanKind};

use super::pair::{Kept, begun, piece_due};
use super::piece::Piece;
use super::source::SpanEdge;
use super::thread::{Shared, Steps};

/// An open scope: its index in the thread, the key its exit carries, its depth, and the probe
/// time its children left so far.
struct Open {
    index: u32,
    key: u32,
    depth: u32,
    /// The probe ticks inside it so far, in 1/[`PROBE_UNIT`] tick.
    probe: u64,
}

/// A thread's pairing of plain scopes, handed over in pieces.
struct Plain<'s, 'c> {
    shared: &'s Shared<'c>,
    /// The spans begun since the last piece, the first at index `base`.
    spans: Vec<Span>,
    base: u32,
    /// The spans carried from the last piece (open at its end), with their index.
    pinned: Vec<(u32, Span)>,
    open: Vec<Open>,
    /// Pieces may carry open spans (else they are whole trees). Only for a thread whose first
    /// reading found no scope that ends before a child (the same records, the same times):
    /// none does here either, so the general pairing's test of it is left out.
    carry: bool,
    /// The spans open at the thread's end: marked open at the stop from their begin.
    ends_open: &'s [u32],
    /// The spans' children's time and probe overhead are wanted (else left at 0).
    figures: bool,
}

/// A [`Plain`] taking records, handing its pieces to `f`.
struct Pieces<'p, 's, 'c, 'f> {
    plain: &'p mut Plain<'s, 'c>,
    f: &'f mut dyn FnMut(Piece<'_>) -> io::Result<()>,
}

impl Steps for Pieces<'_, '_, '_, '_> {
    type Error = io::Error;

    fn other() -> io::Error {
        not_plain()
    }

    #[inline(always)]
    fn step(&mut self, step: Step) -> io::Result<()> {
        self.plain.step(step, self.f)
    }
}

/// How [`each_piece`] reads a thread.
pub(super) struct Reading<'a> {
    /// Pieces may carry open spans (else they are whole trees).
    pub(super) carry: bool,
    /// The spans' figures are wanted ([`Want::figures`](super::source::Want::figures)).
    pub(super) figures: bool,
    /// The spans open at the thread's end (indices, in order).
    pub(super) ends_open: &'a [u32],
}

/// An exit that closes a scope other than the innermost one: the first reading found none.
fn not_plain() -> io::Error {
    io::Error::other("a thread read as plain scopes closes a scope that is not the innermost")
}

impl Plain<'_, '_> {
    #[inline(always)]
    fn next_index(&self) -> u32 {
        self.base + self.spans.len() as u32
    }

    #[inline(always)]
    fn span_mut(&mut self, index: u32) -> &mut Span {
        super::piece::kept_at(&mut self.spans, &mut self.pinned, self.base, index)
    }

    /// Opens a scope of callsite `id` at `tick`, whose exit carries `key`.
    #[inline(always)]
    fn begin(&mut self, id: u32, tick: u64, key: u32) {
        let Some(callsite) = callsite::lookup(self.shared.callsites, id) else {
            // An unknown callsite opens nothing (and its exit closes nothing).
            return;
        };
        let index = self.next_index();
        let (parent, depth) =
            (self.open.last()).map_or((None, 0), |o| (Some(o.index), o.depth + 1));
        let start_ns = self.shared.converter.to_unix_ns(tick);
        let open_at_stop = self.ends_open.binary_search(&index).is_ok();
        (self.spans).push(begun(
            callsite,
            start_ns,
            (parent, depth),
            open_at_stop,
            SpanKind::Scope,
        ));
        self.open.push(Open {
            index,
            key,
            depth,
            probe: self.shared.probe.inner,
        });
    }

    /// An exit with the key `key` at `tick`.
    #[inline(always)]
    fn end(&mut self, key: u32, tick: u64) -> io::Result<()> {
        match self.open.last() {
            Some(top) if top.key == key => {}
            _ if self.open.iter().any(|o| o.key == key) => return Err(not_plain()),
            // Its entry was outside the window (or of an unknown callsite).
            _ => return Ok(()),
        }
        let ns = self.shared.converter.to_unix_ns(tick);
        if let Some(closed) = self.open.pop() {
            self.close(closed, ns, false);
        }
        Ok(())
    }

    /// Closes `closed`, the innermost scope, at `end`: as `Pairing::close` does when its
    /// parent, if any, is the scope open under it.
    #[inline(always)]
    fn close(&mut self, closed: Open, end: u64, open_at_stop: bool) {
        if !self.figures {
            let span = self.span_mut(closed.index);
            span.end_ns = end.max(span.start_ns);
            span.open_at_stop = open_at_stop;
            return;
        }
        let probe_ns = self.shared.converter.ticks_to_ns(closed.probe);
        let span = self.span_mut(closed.index);
        span.end_ns = end.max(span.start_ns);
        span.open_at_stop = open_at_stop;
        let room = (span.end_ns - span.start_ns).saturating_sub(span.children_ns);
        span.overhead_ns = (probe_ns.saturating_add(PROBE_UNIT / 2) / PROBE_UNIT).min(room);
        let (overhead, parent, start, end) =
            (span.overhead_ns, span.parent, span.start_ns, span.end_ns);
        let Some(parent) = parent.filter(|_| start < end) else {
            return;
        };
        let outer = self.shared.probe.outer;
        if let Some(top) = self.open.last_mut() {
            // Exits close the innermost scope only: the parent is the scope open under it.
            debug_assert_eq!(top.index, parent);
            top.probe = top.probe.saturating_add(outer).saturating_add(closed.probe);
        }
        let parent = self.span_mut(parent);
        parent.children_ns =
            (parent.children_ns).saturating_add((end - start).saturating_sub(overhead));
    }

    /// Takes a record of plain columns
    /// ([`Cursor::walk`](crate::capture::compress::Cursor::walk)), handing a piece to `f` when
    /// one is due.
    #[inline(always)]
    fn step(
        &mut self,
        step: Step,
        f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        match step {
            Step::Begin { id, tick, key } => self.begin(id, tick, key),
            Step::End { key, tick } => self.end(key, tick)?,
        }
        if self.piece_due() {
            return self.drain_piece(|piece| super::piece::hand(piece, f));
        }
        Ok(())
    }

    /// `Pairing::piece_due`: with nothing but entries and exits, every span so far is final
    /// when none is open or carried, and the spans can be carried once the newest has ended.
    #[inline(always)]
    fn piece_due(&self) -> bool {
        let quiet = self.open.is_empty() && self.pinned.is_empty();
        piece_due(self.spans.len(), self.open.len(), quiet, || {
            self.carry
                && (self.open.last())
                    .is_none_or(|top| top.index.saturating_add(1) != self.next_index())
        })
    }

    /// `Pairing::drain_piece`, without arguments or memory.
    fn drain_piece<R>(&mut self, f: impl FnOnce(Piece<'_>) -> R) -> R {
        let next = self.next_index();
        let open: Vec<u32> = self.open.iter().map(|o| o.index).collect();
        let kept = Kept {
            spans: &mut self.spans,
            pinned: &mut self.pinned,
            base: self.base,
        };
        let result = kept.hand_over(&open, &[], &[], f);
        self.base = next;
        result
    }
}

/// Hands `thread`'s pieces to `f` as the general pairing of
/// [`Pieces::decode_pieces`](super::pieces::Pieces) does (read as `reading` says; without
/// the figures, the spans' `children_ns` and `overhead_ns` are 0), for a thread of plain
/// scopes without cut scopes or memory; an error for a thread that is not one.
pub(super) fn each_piece(
    shared: &Shared<'_>,
    thread: &CaptureThread,
    reading: Reading<'_>,
    f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let Reading {
        carry,
        figures,
        ends_open,
    } = reading;
    let _untracked = Untracked::enter();
    let mut plain = Plain {
        shared,
        spans: Vec::new(),
        base: 0,
        pinned: Vec::new(),
        open: Vec::new(),
        carry,
        ends_open: if carry { ends_open } else { &[] },
        figures,
    };
    let mut keep = false;
    for chunk in 0..thread.chunks.len() {
        let mut taker = Pieces {
            plain: &mut plain,
            f: &mut *f,
        };
        shared.for_each_step_of(thread, chunk, &mut keep, &mut taker)?;
    }
    // What is still open closes at the end, marked open at the stop, innermost first.
    let end_ns = shared.end_of(thread);
    while let Some(open) = plain.open.pop() {
        plain.close(open, end_ns, true);
    }
    plain.drain_piece(|piece| super::piece::hand(piece, f))
}

/// Edges handed over at once by [`each_edge`]: a batch small enough to stay in the
/// first-level cache while it is written (24 KiB).
const EDGE_BATCH: usize = 1024;

/// An open scope of [`Edges`]: the key its exit carries, and its start.
struct EdgeOpen {
    key: u32,
    start_ns: u64,
}

/// A thread's pairing of plain scopes that all nest, handed over as edges in batches.
struct Edges<'s, 'c, 'f> {
    shared: &'s Shared<'c>,
    open: Vec<EdgeOpen>,
    /// Scopes begun so far (the next one's index).
    begun: u32,
    /// The spans open at the thread's end, and the next of them to come.
    ends_open: &'s [u32],
    next_open_at_end: usize,
    batch: Vec<SpanEdge>,
    f: &'f mut dyn FnMut(&[SpanEdge]) -> io::Result<()>,
}

impl Steps for Edges<'_, '_, '_> {
    type Error = io::Error;

    fn other() -> io::Error {
        not_plain()
    }

    /// Takes a record.
    #[inline(always)]
    fn step(&mut self, step: Step) -> io::Result<()> {
        let edge = match step {
            Step::Begin { id, tick, key } => {
                let Some(callsite) = callsite::lookup(self.shared.callsites, id) else {
                    // An unknown callsite opens nothing (and its exit closes nothing).
                    return Ok(());
                };
                let open_at_stop = self.ends_open.get(self.next_open_at_end) == Some(&self.begun);
                self.next_open_at_end += usize::from(open_at_stop);
                self.begun += 1;
                let start_ns = self.shared.converter.to_unix_ns(tick);
                self.open.push(EdgeOpen { key, start_ns });
                SpanEdge::Begin {
                    callsite,
                    start_ns,
                    open_at_stop,
                }
            }
            Step::End { key, tick } => {
                match self.open.last() {
                    Some(top) if top.key == key => {}
                    _ if self.open.iter().any(|o| o.key == key) => return Err(not_plain()),
                    // Its entry was outside the window (or of an unknown callsite).
                    _ => return Ok(()),
                }
                let start_ns = self.open.pop().map_or(0, |o| o.start_ns);
                let end_ns = self.shared.converter.to_unix_ns(tick).max(start_ns);
                SpanEdge::End { end_ns }
            }
        };
        self.batch.push(edge);
        if self.batch.len() == EDGE_BATCH {
            return self.flush();
        }
        Ok(())
    }
}

impl Edges<'_, '_, '_> {
    /// Hands the batch over.
    fn flush(&mut self) -> io::Result<()> {
        let done = (self.f)(&self.batch);
        self.batch.clear();
        done
    }
}

/// [`SpanSource::each_edge`](super::source::SpanSource::each_edge) of a thread of plain
/// scopes that all nest (without cut scopes or memory; `ends_open`: the spans open at its
/// end, as indices in the thread): the begins and ends of the spans [`each_piece`] would
/// hand over, in the order a walk of them on one lane gives (each end as soon as its exit
/// is taken), in batches. An error for a thread whose exit closes a scope other than the
/// innermost.
pub(super) fn each_edge(
    shared: &Shared<'_>,
    thread: &CaptureThread,
    ends_open: &[u32],
    f: &mut dyn FnMut(&[SpanEdge]) -> io::Result<()>,
) -> io::Result<()> {
    let _untracked = Untracked::enter();
    let mut edges = Edges {
        shared,
        open: Vec::new(),
        begun: 0,
        ends_open,
        next_open_at_end: 0,
        batch: Vec::with_capacity(EDGE_BATCH),
        f,
    };
    let mut keep = false;
    for chunk in 0..thread.chunks.len() {
        shared.for_each_step_of(thread, chunk, &mut keep, &mut edges)?;
    }
    // What is still open ends at the end, innermost first.
    let end_ns = shared.end_of(thread);
    while let Some(top) = edges.open.pop() {
        let end_ns = end_ns.max(top.start_ns);
        edges.batch.push(SpanEdge::End { end_ns });
    }
    edges.flush()
}
