//! What a thread's pairing does with the enters and closes of `tracing` spans
//! ([`Entered`]): resolved on the thread, or marked for the matching across threads.

use crate::record::hash::FxHashSet;

use crate::record::callsite::Callsite;
use crate::trace::SpanKind;

use crate::decode::async_spans::MarkKind;

use super::enters::{ENTERED_MAX, Held, MOVED_MAX};
use super::pairing::Pairing;

impl Pairing<'_> {
    /// Holds back each slice of a `tracing` enter that becomes final before the enter is
    /// resolved (see the module's docs), so that [`Pairing::drain_final`] hands over a plain
    /// scope as one and a slice that made a mark as a poll without a call.
    pub(in crate::decode) fn defer_enters(&mut self) {
        self.entered.defer = true;
    }

    /// Marks each `tracing` enter as it comes, not once resolved: the thread's marks then come
    /// in time order; an enter found plain is taken back ([`Pairing::take_retracted`]).
    pub(in crate::decode) fn eager_enters(&mut self) {
        self.entered.eager = true;
    }

    /// The slices (indices) whose enter was marked ([`Pairing::eager_enters`]) and then found
    /// plain since the last call: their marks are void.
    pub(in crate::decode) fn take_retracted(&mut self) -> std::vec::Drain<'_, u32> {
        self.entered.retracted.drain(..)
    }

    /// The slice at `index` (starting at `ns`) is an enter of `tracing` span `span`.
    pub(super) fn span_entered(
        &mut self,
        span: u64,
        index: u32,
        ns: u64,
        callsite: &'static Callsite,
    ) {
        if self.entered.enters.len() >= ENTERED_MAX {
            // Spans entered here and closed elsewhere (or not yet): the oldest half are
            // matched across threads, as are their spans' closes from now on.
            let old: Vec<_> = self.entered.enters.drain(..ENTERED_MAX / 2).collect();
            for (span, index, ns, callsite) in old {
                if !self.entered.moved_all {
                    self.entered.moved.insert(span);
                }
                self.enter_marked(span, index, ns, callsite);
            }
            if self.entered.moved.len() > MOVED_MAX {
                self.entered.moved_all = true;
                self.entered.moved = FxHashSet::default();
            }
        }
        if self.entered.eager {
            self.tracing_mark(MarkKind::Enter(index), span, ns, Some(callsite));
        }
        self.entered.enters.push((span, index, ns, callsite));
    }

    /// `tracing` span `span` closed at `ns`; `here` when the recorder saw all its enters on
    /// this thread.
    pub(super) fn span_closed(
        &mut self,
        span: u64,
        ns: u64,
        here: bool,
        callsite: Option<&'static Callsite>,
    ) {
        let mut mine = std::mem::take(&mut self.entered.enters);
        let count = mine.iter().filter(|e| e.0 == span).count();
        let moved = self.entered.moved.remove(&span) || self.entered.moved_all;
        if here && count <= 1 && !moved {
            // Entered once, here: a plain scope.
            if count == 1 {
                let at = mine.iter().rposition(|e| e.0 == span).unwrap_or(0);
                let (_, index, _, _) = mine.remove(at);
                self.enter_plain(index);
            }
        } else {
            let mut marked = Vec::new();
            mine.retain(|&enter| {
                if enter.0 != span {
                    return true;
                }
                marked.push(enter);
                false
            });
            for (span, index, ns, callsite) in marked {
                self.enter_marked(span, index, ns, callsite);
            }
            self.tracing_mark(MarkKind::Close, span, ns, callsite);
        }
        self.entered.enters = mine;
    }

    /// Hands the enters whose close did not come here to the marks matched across threads.
    pub(super) fn enters_left(&mut self) {
        for (span, index, ns, callsite) in std::mem::take(&mut self.entered.enters) {
            self.enter_marked(span, index, ns, callsite);
        }
    }

    /// The enter of the slice at `index` is matched across threads: marked (unless it was
    /// as it came), and its slice a poll until that matching says.
    fn enter_marked(&mut self, span: u64, index: u32, ns: u64, callsite: &'static Callsite) {
        if !self.entered.eager {
            self.tracing_mark(MarkKind::Enter(index), span, ns, Some(callsite));
        }
        if self.entered.defer {
            let poll = SpanKind::Poll { async_span: None };
            match self.take_held(index) {
                Some(mut held) => {
                    held.1.kind = poll;
                    self.entered.ready.push(held);
                }
                None => self.span_mut(index).kind = poll,
            }
        }
    }

    /// The enter of the slice at `index` was the only one of its span, on this thread: a
    /// plain scope.
    fn enter_plain(&mut self, index: u32) {
        if self.entered.eager {
            self.entered.retracted.push(index);
        }
        if let Some(held) = self.take_held(index) {
            self.entered.ready.push(held);
        }
    }

    /// The slice at `index`, if it is held back.
    fn take_held(&mut self, index: u32) -> Option<Held> {
        let at = self.entered.held.iter().position(|h| h.0 == index)?;
        Some(self.entered.held.swap_remove(at))
    }
}
