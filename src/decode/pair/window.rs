//! The window of spans kept: handed over as nothing can change them any more, kept whole,
//! or let go when quiet.

use crate::record::hash::FxHashSet;

use crate::decode::pieces::Piece;
use crate::trace::{MemoryStats, Span, SpanArg};

use crate::decode::summary::StackTree;

use super::pairing::Pairing;

impl<'a> Pairing<'a> {
    /// Keeps about `spans` spans at most ([`Pairing::window_full`] says when to call
    /// [`Pairing::drain_final`]) instead of every span of the thread.
    pub(in crate::decode) fn drain_every(&mut self, spans: usize) {
        self.drain_at = spans;
    }

    /// Sums the spans by stack as they become final ([`StackTree`], handed over in
    /// [`Extras::stacks`]).
    pub(in crate::decode) fn keep_stacks(&mut self) {
        self.stacks = Some(StackTree::default());
    }

    /// The spans summed by stack so far, when kept ([`Pairing::keep_stacks`]).
    pub(in crate::decode) fn stacks_mut(&mut self) -> Option<&mut StackTree> {
        self.stacks.as_mut()
    }

    /// True when the spans kept have reached the size [`Pairing::drain_every`] set.
    #[inline]
    pub(in crate::decode) fn window_full(&self) -> bool {
        // Best between top-level scopes, when every span is final; but not much later.
        self.spans.len() >= self.drain_at
            && (self.open.is_empty() || self.spans.len() >= 2 * self.drain_at)
    }

    /// The arguments of spans recorded since the last drain ([`Pairing::drain_final`] lets
    /// go of them), in the order they were recorded.
    pub(in crate::decode) fn span_args(&self) -> &[SpanArg] {
        &self.args
    }

    /// The spans open.
    #[inline]
    pub(in crate::decode) fn open_count(&self) -> usize {
        self.open.len()
    }

    /// True when the spans kept are to be handed over as a piece ([`Pairing::drain_piece`]):
    /// past [`WINDOW`](crate::decode::summary::WINDOW) spans, between top-level scopes (whole
    /// trees: spans in the order of the whole thread); else, when `carry`, past twice the
    /// window, with the open spans carried (each piece copies them: with very many open,
    /// pieces grow with them, so that the copies stay a fraction of the work).
    #[inline]
    pub(in crate::decode) fn piece_due(&self, carry: bool) -> bool {
        piece_due(self.kept_spans(), self.open_count(), self.quiet(), || {
            carry && self.can_carry()
        })
    }

    /// The spans kept: in the window and set aside.
    #[cfg(test)]
    pub(in crate::decode) fn kept(&self) -> usize {
        self.spans.len() + self.pinned.len()
    }

    /// Hands every span that nothing can change any more to `f` with its index in the
    /// thread, and lets go of it, and of every argument so far (what sums spans does not read
    /// them).
    ///
    /// A span changes after it closed only as an ancestor of a span that closes later (its
    /// children's time), and the spans that close later are the open ones and those opened
    /// under them: the open spans and their ancestors are kept (aside, in `pinned`, in index
    /// order), every other span is final.
    pub(in crate::decode) fn drain_final(
        &mut self,
        mut f: impl FnMut(u32, &Span, Option<&MemoryStats>),
    ) {
        let next = self.next_index();
        self.args.clear();
        self.drain_ready(&mut f);
        // The open spans and their ancestors stay (none between top-level scopes).
        let keep = self.open_and_ancestors();
        let (entered, stacks) = (&mut self.entered, &mut self.stacks);
        // Each final span: held back while it is a `tracing` enter not resolved yet
        // ([`Pairing::defer_enters`]), else summed by stack and handed over.
        let mut give = |index: u32, span: &Span, memory: Option<&MemoryStats>| {
            if entered.waits(index) {
                entered.hold(index, span, memory);
                return;
            }
            if let Some(stacks) = stacks.as_mut() {
                stacks.close(index, span, memory);
            }
            f(index, span, memory);
        };
        if self.open.is_empty() && self.pinned.is_empty() {
            // The usual case: between top-level scopes, every span is final.
            let memory = self.memory.as_mut().map(|m| m.drain(&[], next));
            let memory = memory.as_deref().unwrap_or_default();
            for (i, (index, span)) in (self.base..).zip(&self.spans).enumerate() {
                give(index, span, memory.get(i));
            }
            self.spans.clear();
            self.base = next;
            return;
        }
        // The memory figures of the spans let go, in the order they are handed over.
        let memory = self.memory.as_mut().map(|m| m.drain(&keep, next));
        let mut memory = memory.iter().flatten();
        let mut kept = keep.iter().peekable();
        self.pinned.retain(|(index, span)| {
            let pinned = kept.next_if(|&&k| k == *index).is_some();
            if !pinned {
                give(*index, span, memory.next());
            }
            pinned
        });
        for (index, span) in (self.base..).zip(&self.spans) {
            if kept.next_if(|&&k| k == index).is_some() {
                self.pinned.push((index, span.clone()));
            } else {
                give(index, span, memory.next());
            }
        }
        self.spans.clear();
        self.base = next;
        // Each drain costs about the spans kept plus the window: with many kept (scopes nested
        // very deep), the window grows with them, so that draining stays linear.
        self.drain_at = self.drain_at.max(self.pinned.len());
    }

    /// The open spans and their ancestors (indices, in order): the spans
    /// [`Pairing::drain_final`] keeps.
    fn open_and_ancestors(&self) -> Vec<u32> {
        if self.open.is_empty() && self.pinned.is_empty() {
            return Vec::new();
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
        keep
    }

    /// Hands the slices held back and resolved since ([`Pairing::defer_enters`]) to `f`,
    /// summed by stack first.
    pub(in crate::decode) fn drain_ready(
        &mut self,
        f: &mut impl FnMut(u32, &Span, Option<&MemoryStats>),
    ) {
        for (index, span, memory) in self.entered.ready.drain(..) {
            if let Some(stacks) = &mut self.stacks {
                stacks.close(index, &span, memory.as_ref());
            }
            f(index, &span, memory.as_ref());
        }
    }

    /// The enters of `tracing` spans kept so far (`Links::keeps_uses_of`): (span id, start,
    /// the slice).
    pub(in crate::decode) fn tracing_enters(&self) -> &[(u64, u64, crate::trace::SpanRef)] {
        &self.links.tracing_enters
    }

    /// The spans kept since the last drain.
    #[inline]
    pub(in crate::decode) fn kept_spans(&self) -> usize {
        self.spans.len()
    }

    /// True when every span so far is final and its arguments read: none open or set aside,
    /// no record waiting for its payload, no argument being read. The spans kept are then
    /// whole trees, between top-level scopes.
    #[inline]
    pub(in crate::decode) fn quiet(&self) -> bool {
        self.open.is_empty()
            && self.pinned.is_empty()
            && self.pending.is_none()
            && !self.reader.is_reading()
    }

    /// True when the spans so far can be handed over with the open ones carried into the next
    /// piece ([`Pairing::drain_piece`]): no record waits for its payload, no argument is being
    /// read, every span so far ended within its parent (so the open spans are a chain from a
    /// top-level span and the ones that close later nest in it), and the newest span has
    /// ended (so no span is cut between its begin and an end that follows at once).
    #[inline]
    pub(in crate::decode) fn can_carry(&self) -> bool {
        self.pending.is_none()
            && !self.reader.is_reading()
            && !self.tangled
            && self
                .open
                .last()
                .is_none_or(|top| top.index.saturating_add(1) != self.next_index())
    }

    /// True when a span did not end within its parent (see [`Pairing::can_carry`]).
    pub(in crate::decode) fn tangled(&self) -> bool {
        self.tangled
    }

    /// When [`Pairing::quiet`] or [`Pairing::can_carry`]: hands the spans kept since the last
    /// piece to `f` as a [`Piece`]: the open spans carried from the last piece first, with
    /// their arguments, then the newer spans; spans still open go to the next piece too. Lets
    /// go of the rest, and of the instants and counter samples so far (whoever takes spans in
    /// pieces has those from a first pass). (Not with [`Pairing::keep_stacks`], which counts
    /// spans as [`Pairing::drain_final`] drains them.)
    pub(in crate::decode) fn drain_piece<R>(&mut self, f: impl FnOnce(Piece<'_>) -> R) -> R {
        debug_assert!(self.stacks.is_none());
        debug_assert!(self.quiet() || self.can_carry());
        let next = self.next_index();
        // The memory figures of the piece's spans; the open ones' are kept for the next.
        let open_indices: Vec<u32> = self.open.iter().map(|o| o.index).collect();
        let memory = (self.memory.as_mut())
            .map(|m| m.piece(&open_indices, next))
            .unwrap_or_default();
        let kept = Kept {
            spans: &mut self.spans,
            pinned: &mut self.pinned,
            base: self.base,
        };
        let result = kept.hand_over(&open_indices, &memory, &self.args, f);
        let pinned = &self.pinned;
        self.args
            .retain(|a| pinned.binary_search_by_key(&a.span, |(i, _)| *i).is_ok());
        self.instants.clear();
        self.samples.clear();
        self.base = next;
        result
    }
}

/// [`Pairing::piece_due`] of a pairing that keeps `kept` spans since the last piece, with
/// `open` open; `quiet` when every span so far is final, `can_carry` when the spans could be
/// handed over with the open ones carried (asked only past twice the window).
#[inline(always)]
pub(in crate::decode) fn piece_due(
    kept: usize,
    open: usize,
    quiet: bool,
    can_carry: impl FnOnce() -> bool,
) -> bool {
    let window = crate::decode::summary::WINDOW;
    kept >= window && (quiet || (kept >= 2 * window.max(open) && can_carry()))
}

/// The spans a pairing keeps until they are handed over as a piece: those begun since the
/// last piece (the first at index `base` in the thread), and those carried from it (open at
/// its end), with their index.
pub(in crate::decode) struct Kept<'k> {
    pub(in crate::decode) spans: &'k mut Vec<Span>,
    pub(in crate::decode) pinned: &'k mut Vec<(u32, Span)>,
    pub(in crate::decode) base: u32,
}

impl Kept<'_> {
    /// Hands the spans kept to `f` as a [`Piece`]: the carried spans first, then the newer
    /// ones, with `memory` (their figures) and `args` (their arguments, by index in the
    /// thread); the spans at `open` (indices in the thread, in order) are still open and
    /// are carried again, with what they gathered so far. The buffer of the spans is kept,
    /// empty; the caller moves `base` on.
    pub(in crate::decode) fn hand_over<R>(
        self,
        open: &[u32],
        memory: &[MemoryStats],
        args: &[SpanArg],
        f: impl FnOnce(Piece<'_>) -> R,
    ) -> R {
        let (base, carried) = (self.base, self.pinned.len() as u32);
        let indices: Vec<u32> = self.pinned.iter().map(|(index, _)| *index).collect();
        // Thread index to index in the piece: carried spans first, then the spans from `base`.
        let local = |index: u32| match index.checked_sub(base) {
            Some(at) => carried + at,
            None => indices.partition_point(|&i| i < index) as u32,
        };
        let mut spans: Vec<Span> = Vec::with_capacity(indices.len() + self.spans.len());
        spans.extend(self.pinned.drain(..).map(|(_, span)| span));
        spans.append(self.spans);
        let open_local: Vec<u32> = open.iter().map(|&index| local(index)).collect();
        // The open spans' parents in the thread, for when they are kept.
        let parents: Vec<Option<u32>> = (open_local.iter())
            .map(|&at| spans[at as usize].parent)
            .collect();
        for span in &mut spans {
            span.parent = span.parent.map(local);
        }
        for &at in &open_local {
            spans[at as usize].end_ns = u64::MAX;
        }
        let mut args: Vec<SpanArg> = (args.iter())
            .map(|arg| SpanArg {
                span: local(arg.span),
                ..arg.clone()
            })
            .collect();
        // In span order (an argument recorded later for an outer span comes after its
        // children's), keeping each span's in recorded order.
        if !args.is_sorted_by_key(|a| a.span) {
            args.sort_by_key(|a| a.span);
        }
        let result = f(Piece {
            base,
            spans: &spans,
            memory,
            args: &args,
            carried: &indices,
            open: &open_local,
        });
        // The open spans, with what they gathered so far, are kept for the next piece.
        *self.pinned = (open.iter())
            .zip(open_local.iter().zip(parents))
            .map(|(&index, (&at, parent))| {
                let mut span = spans[at as usize].clone();
                (span.end_ns, span.parent) = (0, parent);
                (index, span)
            })
            .collect();
        // The buffer of the spans is reused.
        spans.clear();
        *self.spans = spans;
        result
    }
}
