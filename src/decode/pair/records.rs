//! Records taken one by one: leads and their payloads, arguments, counts and memory events.

use crate::record::callsite::{self, Callsite};
use crate::record::event::{RawEvent, RawKind};
use crate::record::value::{ArgReader, Value};
use crate::trace::{Instant, MemoryKind, SpanArg, SpanRef};

use crate::decode::counters::{self, RawSample};

use super::pairing::{ArgsOf, Pairing, takes_payload};
use crate::decode::memory::{Block, Counts};

impl<'a> Pairing<'a> {
    /// Takes the thread's next record.
    ///
    /// Inlined into the record loop, with the entry and exit paths below it (`end`,
    /// `begin_scope`, `begin`, `close`): a call per record was 11 % of the instructions of
    /// `tickscope table` on a 10 M-record capture (callgrind, 4.76 G against 4.22 G).
    #[inline(always)]
    pub(in crate::decode) fn push(&mut self, event: RawEvent) {
        // Most records: an entry or an exit, with nothing pending before it (what
        // [`Pairing::push_any`] does with them then).
        if matches!(event.kind, RawKind::Begin | RawKind::End)
            && self.pending.is_none()
            && self.counts.is_none()
            && !self.reader.is_reading()
        {
            self.events += 1;
            self.args_of = ArgsOf::Span;
            match event.kind {
                RawKind::End => self.end(event),
                _ => self.begin_scope(event),
            }
            return;
        }
        self.push_any(event);
    }

    /// [`Pairing::push`] of any record.
    fn push_any(&mut self, event: RawEvent) {
        self.events += 1;
        if let Some(lead) = self.pending.take() {
            if event.kind == RawKind::Payload {
                self.lead(lead, Some(event));
                return;
            }
            // Only bad input separates a lead record from its payload (they are published
            // together): the lead counts without it.
            self.lead(lead, None);
        }
        if self.counted(&event) {
            // Counted memory belongs where it stands: it neither ends arguments nor closes
            // anything.
            return;
        }
        if ArgReader::reads(event.kind) {
            self.arg(&event);
            return;
        }
        if self.reader.is_reading() {
            self.end_args();
        }
        self.args_of = ArgsOf::Span;
        if takes_payload(event.kind) {
            self.pending = Some(event);
        } else if event.kind != RawKind::Payload {
            // (A payload whose lead record was outside the window is skipped.)
            self.apply(event, None, 0);
        }
    }

    /// Opens the scope whose entry `entry` a flight recorder overwrote (before any record of
    /// the thread), marked [`cut_at_start`](Span::cut_at_start).
    pub(in crate::decode) fn open_cut(&mut self, entry: RawEvent) {
        self.events += 1;
        let at = self.spans.len();
        self.apply(entry, None, 0);
        if let Some(span) = self.spans.get_mut(at) {
            span.cut_at_start = true;
        }
    }

    /// An argument record of the innermost open span (the one just entered).
    fn arg(&mut self, record: &RawEvent) {
        if self.args_of != ArgsOf::Span {
            let (callsites, instants) = (self.callsites, &mut self.instants);
            let to = self.args_of;
            self.reader.read(record, |key, value| {
                push_instant_arg(instants, callsites, to, key, value);
            });
            return;
        }
        let span = self.innermost_for_args();
        let (callsites, args) = (self.callsites, &mut self.args);
        self.reader.read(record, |key, value| {
            push_arg(args, callsites, span, key, value);
        });
    }

    /// The innermost open span, which arguments go to; an argument for it after a span began
    /// inside it marks the thread [`tangled`](Pairing::tangled) (a piece may have handed its
    /// begin over already).
    fn innermost_for_args(&mut self) -> Option<u32> {
        let span = self.open.last().map(|o| o.index);
        if span.is_some_and(|s| s.saturating_add(1) != self.next_index()) {
            self.tangled = true;
        }
        span
    }

    /// The arguments end: a string cut short counts as far as it came.
    pub(super) fn end_args(&mut self) {
        if self.args_of != ArgsOf::Span {
            let (callsites, instants) = (self.callsites, &mut self.instants);
            let to = self.args_of;
            self.reader.finish(|key, value| {
                push_instant_arg(instants, callsites, to, key, value);
            });
            return;
        }
        if !self.reader.is_reading() {
            return;
        }
        let span = self.innermost_for_args();
        let (callsites, args) = (self.callsites, &mut self.args);
        self.reader.finish(|key, value| {
            push_arg(args, callsites, span, key, value);
        });
    }

    /// Applies a record that takes a payload, with its payload if it came.
    pub(super) fn lead(&mut self, lead: RawEvent, payload: Option<RawEvent>) {
        if let Some(op) = counters::sample_kind(lead.kind) {
            // A sample without its payload (bad input only) has no number: it is skipped.
            let number = payload.as_ref().and_then(counters::number);
            if let (Some(number), Some(callsite)) = (number, self.callsite(lead.id)) {
                self.samples.push(RawSample {
                    ns: self.converter.to_unix_ns(lead.tick),
                    name: callsite.name(),
                    thread: self.thread_id,
                    op,
                    number,
                });
            }
            return;
        }
        match lead.kind {
            RawKind::Alloc | RawKind::Free => {
                if let Some(block) = payload {
                    let size = u64::from(lead.id) | u64::from(block.id) << 32;
                    self.memory_event(lead, size, block.tick);
                }
            }
            RawKind::BeginFollows => {
                let span = self.next_index();
                self.apply(RawEvent::begin(lead.id, lead.tick), None, 0);
                let kept = self.links.keeps_followers();
                if let (Some(link), true, true) = (payload, self.next_index() > span, kept) {
                    let at = SpanRef {
                        thread: self.thread as u32,
                        span,
                    };
                    self.links.followers.push((at, link.tick, link.id));
                }
            }
            RawKind::SpanEnter => {
                let index = self.next_index();
                self.apply(RawEvent::begin(lead.id, lead.tick), None, 0);
                if let (Some(id), true) = (payload, self.next_index() > index) {
                    let poll = self.enter_polls.as_ref().is_some_and(|p| p.get(index));
                    let span = self.span_mut(index);
                    if poll {
                        span.kind = crate::trace::SpanKind::Poll { async_span: None };
                    }
                    let (ns, callsite) = (span.start_ns, span.callsite);
                    self.span_entered(id.tick, index, ns, callsite);
                    if self.links.keeps_uses_of(id.tick) {
                        let at = SpanRef {
                            thread: self.thread as u32,
                            span: index,
                        };
                        self.links.tracing_enters.push((id.tick, ns, at));
                    }
                }
            }
            RawKind::SpanClose => {
                if let Some(id) = payload {
                    let ns = self.converter.to_unix_ns(lead.tick);
                    let here = id.id == RawEvent::SPAN_CLOSED_HERE;
                    self.span_closed(id.tick, ns, here, self.callsite(lead.id));
                    if self.links.keeps_uses_of(id.tick) {
                        self.links.tracing_closes.push((id.tick, ns));
                    }
                }
            }
            RawKind::SpanFollows => match (payload, self.follows_effect.take()) {
                // The effect's payload: the cause's comes next.
                (Some(effect), None) => {
                    self.follows_effect = Some(effect.tick);
                    self.pending = Some(lead);
                }
                (Some(cause), Some(effect)) => {
                    let ns = self.converter.to_unix_ns(lead.tick);
                    self.links.tracing_follows.push((ns, effect, cause.tick));
                }
                // Cut short (bad input): there is nothing to link.
                (None, _) => {}
            },
            // An async begin's payload may hold, in its 64 bits, the tick of the plain scope
            // of the same callsite that is the call's first slice (see `Mark::adopts`).
            _ => {
                let adopts = payload
                    .filter(|p| lead.kind == RawKind::AsyncBegin && p.tick != 0)
                    .map_or(0, |p| self.converter.to_unix_ns(p.tick));
                self.apply(lead, payload.map(|p| p.id), adopts)
            }
        }
    }

    /// Takes the records of counted allocations ([`MemoryMode::Counts`]: an
    /// [`AllocCount`](RawKind::AllocCount), a [`FreeCount`](RawKind::FreeCount) and its
    /// payload); false for any other record. Counts cut short (bad input) count as far as they
    /// came, their rise taken as all the bytes allocated.
    fn counted(&mut self, record: &RawEvent) -> bool {
        match record.kind {
            RawKind::AllocCount => {
                self.apply_counts();
                self.counts = Some((
                    Counts {
                        allocs: u64::from(record.id),
                        alloc_bytes: record.tick,
                        rise: record.tick,
                        ..Counts::default()
                    },
                    false,
                ));
            }
            RawKind::FreeCount => {
                let (counts, frees) = self.counts.get_or_insert_default();
                if *frees {
                    // A second FreeCount: the first had no payload.
                    self.apply_counts();
                    return self.counted(record);
                }
                counts.frees = u64::from(record.id);
                counts.freed_bytes = record.tick;
                *frees = true;
            }
            RawKind::Payload if self.counts.is_some_and(|(_, frees)| frees) => {
                if let Some((counts, _)) = &mut self.counts {
                    counts.rise = record.tick;
                }
                self.apply_counts();
            }
            _ => {
                self.apply_counts();
                return false;
            }
        }
        true
    }

    /// Applies the counts taken so far, if any, to the innermost open span.
    #[inline]
    pub(super) fn apply_counts(&mut self) {
        // Checked first: taking moves the whole counts out, on every record.
        if self.counts.is_none() {
            return;
        }
        let Some((counts, _)) = self.counts.take() else {
            return;
        };
        let innermost = self.open.last().map(|o| o.index);
        if let Some(memory) = &mut self.memory {
            memory.counted(counts, innermost);
        }
    }

    fn memory_event(&mut self, lead: RawEvent, size: u64, address: u64) {
        if self.memory.is_none() {
            return;
        }
        let innermost = self.open.last().map(|o| o.index);
        let innermost = innermost.map(|index| (index, self.span_mut(index).callsite));
        let Some(memory) = &mut self.memory else {
            return;
        };
        let block = Block {
            tick: lead.tick,
            ns: self.converter.to_unix_ns(lead.tick),
            thread: self.thread_id,
            kind: if lead.kind == RawKind::Alloc {
                MemoryKind::Alloc
            } else {
                MemoryKind::Free
            },
            size,
            address,
        };
        memory.block(block, innermost);
    }
}

/// Adds the argument `key = value` to `span` (the innermost open span when it was recorded),
/// when there is one and the key is known.
fn push_arg(
    args: &mut Vec<SpanArg>,
    callsites: &[&'static Callsite],
    span: Option<u32>,
    key: u32,
    value: Value,
) {
    if let (Some(span), Some(key)) = (span, callsite::lookup(callsites, key)) {
        args.push(SpanArg {
            span,
            key: key.name(),
            value,
        });
    }
}

/// Adds the argument `key = value` to the last instant, when the arguments are an instant's
/// (`to`) and the key is known.
fn push_instant_arg(
    instants: &mut [Instant],
    callsites: &[&'static Callsite],
    to: ArgsOf,
    key: u32,
    value: Value,
) {
    if let (ArgsOf::Instant, Some(instant), Some(key)) =
        (to, instants.last_mut(), callsite::lookup(callsites, key))
    {
        instant.args.push((key.name(), value));
    }
}
