//! Slices of a thread's spans: begun and ended, as whole traces or piece by piece, with
//! their links and callsite names.

use std::io::{self, Write};

use crate::record::hash::FxHashMap;

use super::fields::{
    EVENT_CATEGORY_IIDS, EVENT_FLOW_IDS, EVENT_TERMINATING_FLOW_IDS, EVENT_TYPE,
    INTERNED_CATEGORIES, TYPE_SLICE_BEGIN,
};
use super::model::SliceLinks;
use super::sequence::{Sequence, known};
use super::writer::Writer;
use crate::decode::pieces::{Piece, SpanEdge, SpanSource, Want};
use crate::export::lanes::Lanes;
use crate::export::parts;
use crate::export::proto::{bytes_field, fixed64_field, int_field};
use crate::record::callsite::Callsite;
use crate::trace::{Span, SpanArg, SpanKind, SpanRef, Value};

#[cfg(test)]
thread_local! {
    /// The tests' setting: threads are written from their pieces even where they have edges.
    pub(super) static NO_EDGES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Threads written from their edges.
    pub(super) static EDGE_THREADS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether threads with edges ([`SpanSource::each_edge`]) are written from them: always, but
/// in the tests that write them from their pieces too.
fn edges_on() -> bool {
    #[cfg(test)]
    return !NO_EDGES.get();
    #[cfg(not(test))]
    true
}

/// A thread's spans to write: its slices on its own sequence, and those of its lanes of
/// overlapping scopes on extra tracks.
pub(super) struct Thread<'t> {
    pub(super) source: &'t dyn SpanSource,
    pub(super) index: usize,
    /// Its track, and the id of its own sequence.
    pub(super) first: (u64, u32),
    /// Links by slice.
    pub(super) links: &'t FxHashMap<SpanRef, SliceLinks>,
    /// Whether some links are on this thread.
    pub(super) has_links: bool,
}

impl Thread<'_> {
    /// Writes the thread's slices into `out`, with an encoder of its own whose interned names
    /// start from none, so that its bytes are the same whichever threads were written before
    /// it, and by whom; `(delta, shortcuts)` as [`Writer::delta`] and [`Writer::shortcuts`].
    /// Numbers the extra tracks and sequences it needs from `ids` (the next sequence id and
    /// the next track uuid) and returns where the numbers are then; without `ids` (written
    /// apart), fails on a thread that needs one.
    pub(super) fn write<O: Write + ?Sized>(
        &self,
        out: &mut O,
        (delta, shortcuts): (bool, bool),
        ids: Option<(u32, u64)>,
    ) -> io::Result<(u32, u64)> {
        let mut w = Writer::new(out, delta);
        w.shortcuts = shortcuts;
        match ids {
            Some((sequence, uuid)) => (w.next_sequence, w.next_uuid) = (sequence, uuid),
            None => w.numbering = false,
        }
        w.thread_spans(self)?;
        let ids = (w.next_sequence, w.next_uuid);
        w.finish()?;
        Ok(ids)
    }
}

impl<'a, W: Write + ?Sized> Writer<'a, W> {
    /// The slices of every thread of `source`, in order, large threads written apart
    /// ([`parts`]) on machines with the cores: thread `index` on the track and sequence
    /// `firsts[index]`, with `links` by slice, `has_links[index]` when some are on it.
    pub(super) fn threads(
        &mut self,
        source: &dyn SpanSource,
        firsts: &[(u64, u32)],
        links: &FxHashMap<SpanRef, SliceLinks>,
        has_links: &[bool],
    ) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        let weights: Vec<usize> = (0..firsts.len())
            .map(|index| source.apart_weight(index))
            .collect();
        let how = (self.delta, self.shortcuts);
        let thread = |index: usize| Thread {
            source,
            index,
            first: firsts[index],
            links,
            has_links: has_links[index],
        };
        parts::threads(
            &weights,
            &|index, part| thread(index).write(part, how, None).map(drop),
            &mut |index, part| match part {
                Some((part, ())) => part.copy_to(self.out),
                None => {
                    let ids = (self.next_sequence, self.next_uuid);
                    (self.next_sequence, self.next_uuid) =
                        thread(index).write(self.out, how, Some(ids))?;
                    Ok(())
                }
            },
        )
    }

    /// The slices of `thread` on its track (and extra tracks for the lanes of overlapping
    /// scopes), one sequence per track.
    fn thread_spans(&mut self, thread: &Thread<'_>) -> io::Result<()> {
        let Thread {
            source,
            index,
            first: (track, first),
            links,
            has_links,
        } = *thread;
        let name = source.trace().threads[index].display_name();
        let mut sequences = vec![Sequence::new(first, track)];
        if self.delta && self.shortcuts && !has_links && edges_on() {
            // A thread of plain scopes that all nest: their begins and ends as they are read,
            // without spans (the bytes the pieces' walk below writes for them).
            let seq = &mut sequences[0];
            let mut edges =
                |edges: &[SpanEdge]| (edges.iter()).try_for_each(|&edge| self.edge(seq, edge));
            if let Some(done) = source.each_edge(index, &mut edges) {
                #[cfg(test)]
                EDGE_THREADS.set(EDGE_THREADS.get() + 1);
                return done;
            }
        }
        source.each_piece(index, Want::TIMES, &mut |piece| {
            let lanes = Lanes::assign(piece.spans);
            for lane in sequences.len() as u32..lanes.count() {
                if !self.numbering {
                    return Err(io::Error::other(
                        "a thread's extra track is numbered in its turn",
                    ));
                }
                let name = format!("{name} (overlapping scopes {lane})");
                let lane_track = self.named_track(track, &name, None)?;
                sequences.push(self.sequence(lane_track));
            }
            self.piece_spans(piece, &lanes, &mut sequences, (index, links, has_links))
        })
    }

    /// A begin or end of a scope of a thread whose scopes all nest, on its sequence `seq`: as
    /// [`Writer::piece_spans`] writes a span's edges on such a thread.
    #[inline(always)]
    fn edge(&mut self, seq: &mut Sequence, edge: SpanEdge) -> io::Result<()> {
        match edge {
            SpanEdge::Begin {
                callsite,
                start_ns,
                open_at_stop,
            } => {
                let span = Span {
                    callsite,
                    start_ns,
                    end_ns: start_ns,
                    depth: 0,
                    parent: None,
                    children_ns: 0,
                    overhead_ns: 0,
                    open_at_stop,
                    cut_at_start: false,
                    kind: SpanKind::Scope,
                };
                match self.short_begin(seq, &span) {
                    Some(done) => done,
                    None => self.begin_span(seq, &span, &[], None),
                }
            }
            SpanEdge::End { end_ns } => self.end_span(seq, end_ns, true),
        }
    }

    /// The slices of one piece of thread `index`, on the sequences of its lanes.
    fn piece_spans(
        &mut self,
        piece: Piece<'_>,
        lanes: &Lanes,
        sequences: &mut [Sequence],
        (index, links, has_links): (usize, &FxHashMap<SpanRef, SliceLinks>, bool),
    ) -> io::Result<()> {
        let spans = piece.spans;
        let shortcuts = self.delta && self.shortcuts;
        if shortcuts && lanes.count() == 1 && piece.args.is_empty() && !has_links {
            // The common thread: one track, no arguments, no links.
            let seq = &mut sequences[0];
            return lanes.try_walk_piece(&piece, |i, begin| {
                let span = &spans[i as usize];
                if begin {
                    match self.short_begin(seq, span) {
                        Some(done) => done,
                        None => self.begin_span(seq, span, &[], None),
                    }
                } else {
                    self.end_span(seq, span.end_ns, shortcuts)
                }
            });
        }
        let args = piece.args;
        let mut next_arg = 0;
        lanes.try_walk_piece(&piece, |i, begin| {
            let span = &spans[i as usize];
            let seq = &mut sequences[lanes.lane(i) as usize];
            if !begin {
                return self.end_span(seq, span.end_ns, shortcuts);
            }
            let start = next_arg + args[next_arg..].partition_point(|a| a.span < i);
            let end = start + args[start..].partition_point(|a| a.span == i);
            next_arg = end;
            let links = if has_links {
                links.get(&SpanRef {
                    thread: index as u32,
                    span: piece.index(i),
                })
            } else {
                None
            };
            if shortcuts
                && start == end
                && links.is_none()
                && let Some(done) = self.short_begin(seq, span)
            {
                return done;
            }
            self.begin_span(seq, span, &args[start..end], links)
        })
    }

    /// The begin of `span`, a scope without arguments or links, in the short form when its
    /// name is interned on `seq` and it is not earlier than the sequence's last packet (and
    /// the scope neither open at the stop nor cut at the start): `None` (nothing written)
    /// otherwise.
    #[inline(always)]
    fn short_begin(&mut self, seq: &mut Sequence, span: &Span) -> Option<io::Result<()>> {
        if span.kind != SpanKind::Scope || span.open_at_stop || span.cut_at_start {
            return None;
        }
        let iid = self.callsite_iid(span.callsite);
        let last = seq.last_ns?;
        if span.start_ns < last || seq.names.get(iid as usize) != Some(&true) {
            return None;
        }
        Some(self.short_packet(seq, span.start_ns - last, span.start_ns, Some(iid)))
    }

    /// A slice end at `ns`: in the short form when `short` and it is not earlier than the
    /// last packet of `seq`.
    #[inline(always)]
    fn end_span(&mut self, seq: &mut Sequence, ns: u64, short: bool) -> io::Result<()> {
        match seq.last_ns {
            Some(last) if short && ns >= last => self.short_packet(seq, ns - last, ns, None),
            _ => self.end(seq, ns),
        }
    }

    /// The begin of `span` with what its `links` put on it, its `args` and its marks
    /// (`open_at_stop`, `cut_at_start`), as annotations in the Chrome export's order.
    fn begin_span(
        &mut self,
        seq: &mut Sequence,
        span: &Span,
        args: &[SpanArg],
        links: Option<&SliceLinks>,
    ) -> io::Result<()> {
        let category = match span.kind {
            SpanKind::Poll { .. } => Some("poll"),
            SpanKind::Scope => None,
        };
        let (flows, link_args) = links.map_or((&[][..], None), |l| (l.flows.as_slice(), l.args));
        self.begin_callsite(seq, span.start_ns, span.callsite, category, |w, seq| {
            if let Some((number, forward_thread)) = link_args {
                w.annotation(seq, "Sequence number", &Value::U64(u64::from(number)));
                if let Some(thread) = forward_thread {
                    w.annotation(seq, "Fwd thread id", &Value::U64(thread));
                }
            }
            for arg in args {
                w.annotation(seq, arg.key, &arg.value);
            }
            if span.open_at_stop {
                w.annotation(seq, "open_at_stop", &Value::Bool(true));
            }
            if span.cut_at_start {
                w.annotation(seq, "cut_at_start", &Value::Bool(true));
            }
            for &(id, terminating) in flows {
                let field = if terminating {
                    EVENT_TERMINATING_FLOW_IDS
                } else {
                    EVENT_FLOW_IDS
                };
                fixed64_field(&mut w.event, field, id);
            }
        })
    }

    /// A slice begin named after `callsite`, with `category`, then what `more` adds to the
    /// event (annotations, flows).
    pub(super) fn begin_callsite(
        &mut self,
        seq: &mut Sequence,
        ns: u64,
        callsite: &'static Callsite,
        category: Option<&str>,
        more: impl FnOnce(&mut Self, &mut Sequence),
    ) -> io::Result<()> {
        self.event.clear();
        self.interned.clear();
        self.event
            .extend_from_slice(&[(EVENT_TYPE << 3) as u8, TYPE_SLICE_BEGIN as u8]);
        let iid = self.callsite_iid(callsite);
        self.name_iid(seq, iid);
        if let Some(category) = category {
            let cid = self.categories.id(category);
            if !known(&mut seq.categories, cid) {
                self.scratch.clear();
                int_field(&mut self.scratch, 1, cid);
                bytes_field(&mut self.scratch, 2, category.as_bytes());
                bytes_field(&mut self.interned, INTERNED_CATEGORIES, &self.scratch);
            }
            int_field(&mut self.event, EVENT_CATEGORY_IIDS, cid);
        }
        more(self, seq);
        self.track_event(seq, ns)
    }
}
