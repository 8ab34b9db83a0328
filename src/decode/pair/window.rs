//! The window of spans kept: handed over as nothing can change them any more, kept whole,
//! or let go when quiet.

use crate::record::hash::FxHashSet;

use crate::trace::{Span, SpanArg};

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

    /// True when the spans kept have reached the size [`Pairing::drain_every`] set.
    #[inline]
    pub(in crate::decode) fn window_full(&self) -> bool {
        // Best between top-level scopes, when every span is final; but not much later.
        self.spans.len() >= self.drain_at
            && (self.open.is_empty() || self.spans.len() >= 2 * self.drain_at)
    }

    /// The spans kept: in the window and set aside.
    #[cfg(test)]
    pub(in crate::decode) fn kept(&self) -> usize {
        self.spans.len() + self.pinned.len()
    }

    /// Hands every span that nothing can change any more to `f`, and lets go of it.
    ///
    /// A span changes after it closed only as an ancestor of a span that closes later (its
    /// children's time), and the spans that close later are the open ones and those opened
    /// under them: the open spans and their ancestors are kept (aside, in `pinned`, in index
    /// order), every other span is final.
    pub(in crate::decode) fn drain_final(&mut self, mut f: impl FnMut(&Span)) {
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
    pub(in crate::decode) fn kept_spans(&self) -> usize {
        self.spans.len()
    }

    /// The index in the thread of the first span kept.
    pub(in crate::decode) fn base(&self) -> u32 {
        self.base
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

    /// When [`Pairing::quiet`]: hands the spans kept and their arguments to `f` with the index
    /// of the first in the thread, and lets go of them, and of the instants and counter
    /// samples so far (whoever takes spans in pieces has those from a first pass). (Not with
    /// [`Pairing::keep_stacks`], which counts spans as [`Pairing::drain_final`] drains them.)
    pub(in crate::decode) fn drain_quiet<R>(
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
}
