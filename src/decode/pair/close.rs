//! Closing scopes: a span made of an entry and its exit, what it adopts, and the end of a
//! thread's records.

use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::trace::{Instant, InstantScope, MemoryStats, Span, SpanArg, SpanKind, SpanRef};

use super::pairing::{ArgsOf, Extras, Open, Pairing};
use crate::decode::async_spans::{Mark, MarkKind};
use crate::decode::memory::MemoryPairing;
use crate::record::clock::PROBE_UNIT;

impl<'a> Pairing<'a> {
    #[inline(always)]
    fn close(&mut self, closed: Open, end: u64, open_at_stop: bool) {
        let index = closed.index;
        let probe_ns = self.converter.ticks_to_ns(closed.probe);
        let span = self.span_mut(index);
        span.end_ns = end.max(span.start_ns);
        span.open_at_stop = open_at_stop;
        let ends_early = span.end_ns < closed.child_end;
        // Overhead compensation: the probe time inside the span, never more than the time
        // its children leave (so its self time stays at or above zero, and its duration is
        // its self time plus its children's durations).
        let room = (span.end_ns - span.start_ns).saturating_sub(span.children_ns);
        span.overhead_ns = (probe_ns.saturating_add(PROBE_UNIT / 2) / PROBE_UNIT).min(room);
        let overhead = span.overhead_ns;
        let (parent, start, end) = (span.parent, span.start_ns, span.end_ns);
        self.tangled |= ends_early;
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
            // The open spans are in index order (pushed as they begin): a search, not a scan,
            // as a walk past many closed ancestors (guards dropped outermost first) looks up
            // each of them.
            let open = match self.open.last() {
                // The usual case: the parent, on top.
                Some(top) if top.index == at => Some(self.open.len() - 1),
                _ => self.open.binary_search_by_key(&at, |o| o.index).ok(),
            };
            // The usual case, the parent still open: the whole span is inside it, and the
            // parent's duration leaves out this span's probe and what this span left out.
            let direct = open.is_some() && ancestor == parent;
            if let (Some(at), true) = (open, direct) {
                let parent = &mut self.open[at];
                parent.probe = parent
                    .probe
                    .saturating_add(self.probe.outer)
                    .saturating_add(closed.probe);
                parent.child_end = parent.child_end.max(end);
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

    pub(super) fn apply(&mut self, event: RawEvent, span_id: Option<u32>, adopts: u64) {
        if event.kind == RawKind::Link {
            let key = (self.thread_id, event.id);
            if !self.links.keeps(&key) {
                return;
            }
            let top = self.open.last().map(|o| o.index);
            let span = top.map(|index| SpanRef {
                thread: self.thread as u32,
                span: index,
            });
            let site = top.map(|index| self.span_mut(index).callsite);
            let ns = self.converter.to_unix_ns(event.tick);
            self.links.origins.insert(key, (span, ns, site));
            return;
        }
        if event.kind == RawKind::End {
            self.end(event);
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
        let marks_made = matches!((what, span_id), (Some(_), Some(_)));
        if let (Some(what), Some(span)) = (what, span_id) {
            let chain = self.chain(false);
            self.marks.push(Mark {
                // A begin that adopts a first slice takes its place in time, before any poll
                // another thread recorded while this begin was being recorded.
                ns: if adopts != 0 { adopts } else { ns },
                what,
                callsite: Some(callsite),
                span: u64::from(span),
                thread: self.thread,
                adopts,
                chain,
            });
        }
        if matches!(event.kind, RawKind::Begin | RawKind::PollBegin) {
            self.begin(event, callsite, ns);
            // A poll that made a mark may be of a call ([`Pairing::chain`]).
            if marks_made && let Some(open) = self.open.last_mut() {
                open.poll = event.kind == RawKind::PollBegin;
            }
        }
    }

    /// An [`End`](RawKind::End) record: closes the newest open span with the end's key (the
    /// top one unless guards were dropped out of order). An end whose entry was outside the
    /// window closes nothing.
    #[inline(always)]
    pub(super) fn end(&mut self, event: RawEvent) {
        let key = event.id;
        if let Some(position) = self.open.iter().rposition(|o| o.key == key) {
            // The top one but for guards dropped out of order: a pop, not a shift.
            let closed = if position + 1 == self.open.len() {
                self.open.pop()
            } else {
                self.tangled = true;
                Some(self.open.remove(position))
            };
            let ns = self.converter.to_unix_ns(event.tick);
            if let Some(closed) = closed {
                self.close(closed, ns, false);
            }
        }
    }

    /// A [`Begin`](RawKind::Begin) record: the scope opens (unless its callsite is unknown).
    #[inline(always)]
    pub(super) fn begin_scope(&mut self, event: RawEvent) {
        if let Some(callsite) = self.callsite(event.id) {
            let ns = self.converter.to_unix_ns(event.tick);
            self.begin(event, callsite, ns);
        }
    }

    /// A [`Begin`](RawKind::Begin) or [`PollBegin`](RawKind::PollBegin) record of `callsite`
    /// at `ns`: the span opens.
    #[inline(always)]
    fn begin(&mut self, event: RawEvent, callsite: &'static Callsite, ns: u64) {
        let index = self.next_index();
        let (parent, depth) =
            (self.open.last()).map_or((None, 0), |o| (Some(o.index), o.depth + 1));
        if let Some(stacks) = &mut self.stacks {
            stacks.open(index, parent, callsite);
        }
        let kind = if event.kind == RawKind::Begin {
            SpanKind::Scope
        } else {
            SpanKind::Poll { async_span: None }
        };
        let open_at_stop = self.ends_open.binary_search(&index).is_ok();
        (self.spans).push(begun(callsite, ns, (parent, depth), open_at_stop, kind));
        if let Some(memory) = &mut self.memory {
            memory.open();
        }
        self.open.push(Open {
            index,
            poll: false,
            key: RawEvent::end_key(event.id, event.tick),
            probe: self.probe.inner,
            child_end: 0,
            depth,
        });
    }

    /// Ends the thread's records: applies a record still waiting for its payload and the
    /// arguments being read, hands the `tracing` enters whose close did not come here to the
    /// marks, and closes what is still open at `end_ns`, marked open at the stop: returns
    /// their indices in the thread, outermost first. (Done again by [`Pairing::finish`],
    /// where it then does nothing.)
    pub(in crate::decode) fn close_rest(&mut self, end_ns: u64) -> Vec<u32> {
        if let Some(lead) = self.pending.take() {
            self.lead(lead, None);
        }
        // Enters whose close did not come here: matched across threads.
        self.enters_left();
        self.apply_counts();
        self.end_args();
        let indices = self.open.iter().map(|o| o.index).collect();
        while let Some(open) = self.open.pop() {
            self.close(open, end_ns, true);
        }
        indices
    }

    /// Closes what is still open at `end_ns` and returns the number of records taken, the
    /// spans (those kept: all of them unless drained), their memory figures, their arguments, and the samples and instants.
    pub(in crate::decode) fn finish(
        mut self,
        end_ns: u64,
    ) -> (u64, Vec<Span>, Vec<MemoryStats>, Vec<SpanArg>, Extras) {
        self.close_rest(end_ns);
        // The figures of the spans kept: those set aside, then the newer ones (as below).
        let memory = self.memory.map(MemoryPairing::finish).unwrap_or_default();
        if let Some(stacks) = &mut self.stacks {
            // What is left is final now.
            let kept = (self.pinned.iter().map(|(index, span)| (*index, span)))
                .chain((self.base..).zip(&self.spans));
            for (i, (index, span)) in kept.enumerate() {
                stacks.close(index, span, memory.get(i));
            }
        }
        let spans = if self.pinned.is_empty() {
            self.spans
        } else {
            let mut spans: Vec<Span> = self.pinned.into_iter().map(|(_, span)| span).collect();
            spans.append(&mut self.spans);
            spans
        };
        // In span order (an argument recorded later for an outer span comes after its
        // children's), keeping each span's in recorded order: [`ThreadTrace::args_of`](crate::trace::ThreadTrace::args_of)
        // searches them.
        if !self.args.is_sorted_by_key(|a| a.span) {
            self.args.sort_by_key(|a| a.span);
        }
        let extras = Extras {
            samples: self.samples,
            instants: self.instants,
            stacks: self.stacks,
        };
        (self.events, spans, memory, self.args, extras)
    }
}

/// A span of `callsite` begun at `start_ns` under `parent` at `depth` (as
/// [`Pairing`]'s `begin` and [`plain_pieces`](crate::decode::plain_pieces) open one):
/// its end, children's time and overhead come as it and its children close.
#[inline(always)]
pub(in crate::decode) fn begun(
    callsite: &'static Callsite,
    start_ns: u64,
    (parent, depth): (Option<u32>, u32),
    open_at_stop: bool,
    kind: SpanKind,
) -> Span {
    Span {
        callsite,
        start_ns,
        end_ns: 0,
        depth,
        parent,
        children_ns: 0,
        overhead_ns: 0,
        open_at_stop,
        cut_at_start: false,
        kind,
    }
}
