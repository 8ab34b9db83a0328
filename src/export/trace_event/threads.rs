//! Threads: their metadata, their slices piece by piece (lanes of overlapping scopes,
//! complete events or begin and end), arguments and flows.

use crate::record::hash::FxHashMap;
use std::io::{self, Write};

use super::dialect::Placed;
use super::writer::{PREFIXES, Prefix, Slice, ThreadLanes, Tracks, Writer, nearest_micros};

/// Slots of [`Writer::prefixes`] a key tries after its own before it takes one.
const PROBES: usize = 4;
use crate::decode::pieces::{Piece, SpanSource, Want};
use crate::export::json;
use crate::export::lanes::Lanes;
use crate::trace::{Span, SpanArg, SpanKind, SpanRef, Trace};

impl Writer<'_> {
    /// The `thread_name` and `thread_sort_index` metadata of thread `index`'s track, unless
    /// an earlier thread of its process and id wrote them.
    pub(super) fn thread_metadata_once(
        &mut self,
        trace: &Trace,
        index: usize,
        tracks: &mut Tracks,
    ) -> io::Result<()> {
        let thread = &trace.threads[index];
        if self.named.insert((thread.process, thread.id)) {
            let pid = self.pid(thread.process);
            self.thread_metadata(pid, thread.id, &thread.display_name(), tracks.sort_index)?;
            tracks.sort_index += 1;
        }
        Ok(())
    }

    /// The slices of thread `index`, noting in `flow_slices` where the slices that took part
    /// in a link went; its extra tracks (lanes of overlapping scopes) numbered from `tracks`,
    /// or an error where they are not given (a thread written apart, before its turn).
    pub(super) fn spans(
        &mut self,
        source: &dyn SpanSource,
        index: usize,
        mut tracks: Option<&mut Tracks>,
        flow_slices: &mut FxHashMap<SpanRef, Slice>,
    ) -> io::Result<()> {
        let trace = source.trace();
        let thread = &trace.threads[index];
        let mut lanes = ThreadLanes {
            name: thread.display_name(),
            pid: self.pid(thread.process),
            tids: vec![thread.id],
            heads: Vec::new(),
            placed: Placed::default(),
            ops_before: self.events,
        };
        lanes.heads.push(lanes.head(thread.id));
        // The prefixes of this thread's events name its own tracks.
        for prefix in &mut self.prefixes {
            prefix.key = None;
        }
        source.each_piece(index, Want::TIMES, &mut |piece| {
            self.piece(
                piece,
                index,
                (&mut lanes, tracks.as_deref_mut()),
                flow_slices,
            )
        })
    }

    /// The slices of one piece of thread `index`, after the tracks its lanes need beyond
    /// those `lanes` has.
    fn piece(
        &mut self,
        piece: Piece<'_>,
        index: usize,
        (thread, mut tracks): (&mut ThreadLanes, Option<&mut Tracks>),
        flow_slices: &mut FxHashMap<SpanRef, Slice>,
    ) -> io::Result<()> {
        let spans = piece.spans;
        let lanes = Lanes::assign(spans);
        for lane in thread.tids.len() as u32..lanes.count() {
            let Some(tracks) = tracks.as_deref_mut() else {
                return Err(io::Error::other(
                    "a thread's extra track is numbered in its turn",
                ));
            };
            let tid = tracks.next_tid;
            tracks.next_tid = tracks.next_tid.saturating_add(1);
            let lane_name = format!("{} (overlapping scopes {lane})", thread.name);
            self.thread_metadata(thread.pid, tid, &lane_name, tracks.sort_index)?;
            tracks.sort_index += 1;
            thread.tids.push(tid);
            let head = thread.head(tid);
            thread.heads.push(head);
        }
        let (pid, tids, heads) = (thread.pid, &thread.tids, &thread.heads);
        let at = |span: u32| SpanRef {
            thread: index as u32,
            span: piece.index(span),
        };
        let moved = self
            .dialect
            .times
            .and_then(|times| times(&piece, &lanes, self.dialect.origin, &mut thread.placed));
        let origin = self.dialect.origin;
        let times = |i: u32| match &moved {
            Some(moved) => moved[i as usize],
            None => {
                let span = &spans[i as usize];
                (
                    span.start_ns.saturating_sub(origin),
                    span.end_ns.saturating_sub(origin),
                )
            }
        };
        if !self.link_args.is_empty() {
            for i in 0..spans.len() as u32 {
                if !piece.is_open(i) && self.link_args.contains_key(&at(i)) {
                    let (start, end) = times(i);
                    let tid = tids[lanes.lane(i) as usize];
                    flow_slices.insert(
                        at(i),
                        Slice {
                            pid,
                            tid,
                            start,
                            end,
                        },
                    );
                }
            }
        }
        if self.dialect.begin_end {
            // Absolute times: viewers read `ts` as a double, which resolves only 0.25 µs at
            // today's epoch, so nesting inferred from `ts` and `dur` would break (a child
            // seeming to outlast its parent is dropped). `B`/`E` pairs, in order, state it,
            // each lane's on its own track.
            return lanes.try_walk_piece(&piece, |i, begin| {
                let span = &spans[i as usize];
                let lane = lanes.lane(i);
                let head = &heads[lane as usize];
                if begin {
                    self.edge(
                        span,
                        (lane, head),
                        span.start_ns,
                        Some((at(i), piece.args_of(i))),
                    );
                } else {
                    self.edge(span, (lane, head), span.end_ns, None);
                }
                self.spill()
            });
        }
        // Each span as it ends: an open one in the piece where it ends, carried there (so
        // after the spans begun inside it before then, unlike a whole thread's order).
        for i in (0..spans.len() as u32).filter(|&i| !piece.is_open(i)) {
            let span = &spans[i as usize];
            let (start, end) = times(i);
            let lane = lanes.lane(i);
            let head = &heads[lane as usize];
            // Kineto's event numbers follow the spans' order in the thread, whichever piece
            // writes them.
            let op = thread.ops_before + u64::from(piece.index(i)) + 1;
            self.complete(
                span,
                (lane, head),
                (start, end, op),
                at(i),
                piece.args_of(i),
            );
            self.spill()?;
        }
        Ok(())
    }

    fn thread_metadata(&mut self, pid: u32, tid: u64, name: &str, index: usize) -> io::Result<()> {
        write!(
            self.buf,
            ",\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":"
        )?;
        json::push_str(&mut self.buf, name);
        write!(
            self.buf,
            "}}}},\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{index}}}}}"
        )
    }

    /// `,\n{"ph":"<ph>","cat":"<cat>","name":<name>` for `span`, then `head`
    /// (`,"pid":..,"tid":..,"ts":` of its track, `lane`), from the cache when it holds them.
    fn prefix(&mut self, ph: u8, span: &Span, (lane, head): (u32, &str)) {
        let address = std::ptr::from_ref(span.callsite) as usize;
        let poll = matches!(span.kind, SpanKind::Poll { .. });
        let key = (ph, address, poll, lane);
        let mixed = (address as u64 ^ u64::from(ph) << 56 ^ u64::from(poll) << 55)
            .wrapping_add(u64::from(lane).wrapping_mul(0x9E37_79B9))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // Open addressing: a key taken by another goes to the next slot free (a few tries),
        // so that two hot keys whose addresses hash alike do not evict each other by turns.
        let mut slot = (mixed >> 58) as usize % PREFIXES;
        for _ in 0..PROBES {
            match self.prefixes[slot].key {
                Some(taken) if taken != key => slot = (slot + 1) % PREFIXES,
                _ => break,
            }
        }
        if self.prefixes[slot].key != Some(key) {
            let mut bytes = std::mem::take(&mut self.prefixes[slot].bytes);
            bytes.clear();
            bytes.extend_from_slice(b",\n{\"ph\":\"");
            bytes.push(ph);
            bytes.extend_from_slice(b"\",\"cat\":\"");
            let cat = if poll {
                self.dialect.poll_category
            } else {
                self.dialect.scope_category
            };
            bytes.extend_from_slice(cat.as_bytes());
            bytes.extend_from_slice(b"\",\"name\":");
            bytes.extend_from_slice(self.escaped_name(span.callsite));
            bytes.extend_from_slice(head.as_bytes());
            self.prefixes[slot] = Prefix {
                key: Some(key),
                bytes,
            };
        }
        self.buf.extend_from_slice(&self.prefixes[slot].bytes);
    }

    /// A `B` event of the span at `begin`, or an `E` event, of `span` at `ns`, on the track
    /// of `lane` whose `head` is `,"pid":..,"tid":..,"ts":`.
    fn edge(
        &mut self,
        span: &Span,
        lane: (u32, &str),
        ns: u64,
        begin: Option<(SpanRef, &[SpanArg])>,
    ) {
        self.prefix(if begin.is_some() { b'B' } else { b'E' }, span, lane);
        self.ts(ns);
        if let Some((at, args)) = begin {
            self.args(at, args, (span.open_at_stop, span.cut_at_start), None);
        }
        self.buf.push(b'}');
    }

    /// One `X` event from `start` to `end` (ns from the origin) for the span at `at`, on the
    /// track of `lane` whose `head` is `,"pid":..,"tid":..,"ts":`; with Kineto's ids, it is
    /// event number `op` (from 1).
    fn complete(
        &mut self,
        span: &Span,
        lane: (u32, &str),
        (start, end, op): (u64, u64, u64),
        at: SpanRef,
        args: &[SpanArg],
    ) {
        self.prefix(b'X', span, lane);
        json::push_micros(&mut self.buf, start);
        self.buf.extend_from_slice(b",\"dur\":");
        json::push_micros(&mut self.buf, end.saturating_sub(start));
        let op_id = self.dialect.op_ids.then(|| {
            self.events = self.events.max(op);
            (op, span.callsite.id())
        });
        self.args(at, args, (span.open_at_stop, span.cut_at_start), op_id);
        self.buf.push(b'}');
    }

    /// `,"args":{..}` with Kineto's ids (`op_id`: event number and callsite), the link args of
    /// the slice at `at`, the scope's own `args`, `open_at_stop` and `cut_at_start`; nothing
    /// when there are none.
    fn args(
        &mut self,
        at: SpanRef,
        args: &[SpanArg],
        (open_at_stop, cut_at_start): (bool, bool),
        op_id: Option<(u64, u32)>,
    ) {
        let link = if self.link_args.is_empty() {
            None
        } else {
            self.link_args.get(&at).filter(|link| !link.is_empty())
        };
        if link.is_none() && args.is_empty() && !open_at_stop && !cut_at_start && op_id.is_none() {
            return;
        }
        self.buf.extend_from_slice(b",\"args\":{");
        let mut first = true;
        let mut sep = |buf: &mut Vec<u8>| {
            if !std::mem::take(&mut first) {
                buf.push(b',');
            }
        };
        if let Some((event, callsite)) = op_id {
            sep(&mut self.buf);
            self.buf.extend_from_slice(b"\"External id\":");
            json::push_u64(&mut self.buf, event);
            self.buf.extend_from_slice(b",\"Ev Idx\":");
            json::push_u64(&mut self.buf, event - 1);
            self.buf.extend_from_slice(b",\"Record function id\":");
            json::push_u64(&mut self.buf, u64::from(callsite));
        }
        if let Some(link) = link {
            sep(&mut self.buf);
            self.buf.extend_from_slice(link);
        }
        for arg in args {
            sep(&mut self.buf);
            json::push_str(&mut self.buf, arg.key);
            self.buf.push(b':');
            json::push_value(&mut self.buf, &arg.value);
        }
        if open_at_stop {
            sep(&mut self.buf);
            self.buf.extend_from_slice(b"\"open_at_stop\":true");
        }
        if cut_at_start {
            sep(&mut self.buf);
            self.buf.extend_from_slice(b"\"cut_at_start\":true");
        }
        self.buf.push(b'}');
    }

    /// A flow arrow per link whose capture is in the trace: `s` at the capture time on the
    /// originating slice, `f` (binding to the enclosing slice) at the follower's start, each
    /// on the track (`tid`) its slice was written on, at the times it was written with.
    pub(super) fn flows(
        &mut self,
        trace: &Trace,
        slices: &FxHashMap<SpanRef, Slice>,
    ) -> io::Result<()> {
        let flow = self.dialect.flow;
        let origin = self.dialect.origin;
        for (id, link) in trace.flows.iter().enumerate() {
            let (Some(from_span), Some(origin_ns)) = (link.origin, link.origin_ns) else {
                continue;
            };
            let (Some(from), Some(to)) = (slices.get(&from_span), slices.get(&link.follower))
            else {
                continue;
            };
            let at = if self.dialect.whole_micros {
                // Saturating: rounding a time in the last microsecond of the range up.
                nearest_micros(origin_ns, origin).saturating_mul(1000)
            } else {
                origin_ns.saturating_sub(origin)
            };
            let ends = [
                (
                    "s",
                    from,
                    at.clamp(from.start, from.end.max(from.start)),
                    "",
                ),
                ("f", to, to.start, ",\"bp\":\"e\""),
            ];
            for (ph, Slice { pid, tid, .. }, time, bp) in ends {
                write!(
                    self.buf,
                    ",\n{{\"ph\":\"{ph}\"{bp},\"cat\":\"{flow}\",\"name\":\"{flow}\",\"id\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":",
                    id + 1,
                )?;
                json::push_micros(&mut self.buf, time);
                self.buf.push(b'}');
            }
            self.spill()?;
        }
        Ok(())
    }
}
