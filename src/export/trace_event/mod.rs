//! The Trace Event JSON writer shared by the [Chrome](super::chrome) and
//! [Kineto](super::kineto) dialects. A [`Dialect`] says what sets one apart (header, time base,
//! categories, extra events); [`write()`] streams everything else: process and thread metadata,
//! one track per [lane](super::lanes) of each thread, one slice per span, flow arrows for
//! links, and the `otherData` trailer.
//!
//! Events are formatted by hand into a buffer flushed in 64 KiB blocks, so memory use does not
//! depend on the trace size, except for a few words per span of one thread at a time where the
//! dialect moves times ([`Dialect::times`]) or the thread's scopes were dropped out of order.
//!
//! A trace of several processes ([`Trace::from_captures`]) is written process by process under
//! one `pid` each ([`pids`]), with its own `process_name`, its threads (a thread is known by
//! its process and id: two processes may both have thread 1), flows, async calls and memory
//! counter; every time counts from the one origin, so the processes line up.

use crate::record::hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;
use std::io::{self, Write};

use super::json;
use super::lanes::{Edge, Lanes};
use crate::decode::pieces::{Piece, SpanSource};
use crate::record::callsite::Callsite;
use crate::trace::{
    AsyncSpan, Compensation, InstantScope, MemoryKind, MemoryTrace, Number, Process, Span, SpanArg,
    SpanKind, SpanRef, Trace,
};

/// Appends a counter value: an integer as it is, a finite float in Rust's shortest
/// round-trip form, a non-finite one (which JSON cannot hold) as `null`.
fn push_number(buf: &mut Vec<u8>, n: Number) {
    match n {
        Number::Int(v) => {
            let _ = write!(buf, "{v}");
        }
        Number::Float(v) if v.is_finite() => {
            let _ = write!(buf, "{v}");
        }
        Number::Float(_) => buf.extend_from_slice(b"null"),
    }
}

/// Bytes buffered before they are written out.
const BLOCK: usize = 64 * 1024;

/// The start and end (ns from `origin`) of each span of one piece of a thread, in the order of
/// its spans, as a dialect writes them: `times(spans, lanes, origin, last)`, where `last` is
/// what the thread's earlier pieces left (empty before the first); `None` where they are the
/// recorded ones.
pub(crate) type Times = fn(&[Span], &Lanes, u64, &mut LaneEdges) -> Option<Vec<(u64, u64)>>;

/// Per lane of a thread, the last edge a dialect placed and its time: what a dialect that
/// moves times carries from one piece of the thread to the next. Between pieces every edge
/// placed is an end.
pub(crate) type LaneEdges = Vec<Option<(Edge, u64)>>;

/// What sets one dialect of the Trace Event format apart.
pub(crate) struct Dialect {
    /// The document up to and including the `[` that opens `traceEvents`, and a line break.
    pub(crate) header: Vec<u8>,
    /// Where `ts` counts from, in Unix-epoch nanoseconds (0: absolute times).
    pub(crate) origin: u64,
    /// Writes scopes as `B`/`E` pairs instead of `X` events, so that nesting survives times
    /// that viewers round.
    pub(crate) begin_end: bool,
    /// The category of a scope's slice.
    pub(crate) scope_category: &'static str,
    /// The category of an async call's poll slice.
    pub(crate) poll_category: &'static str,
    /// Puts Kineto's ids (`External id`, `Ev Idx`, `Record function id`) in the args of each
    /// `X` event.
    pub(crate) op_ids: bool,
    /// The category and name of flow events.
    pub(crate) flow: &'static str,
    /// Moves span times. `None`: every time as recorded.
    pub(crate) times: Option<Times>,
    /// Span times are whole microseconds; flow starts then go to their nearest one
    /// ([`nearest_micros`]).
    pub(crate) whole_micros: bool,
    /// Writes each async call as a `b`/`e` pair.
    pub(crate) async_spans: bool,
    /// Writes the `memory` counter when the trace tracked memory.
    pub(crate) memory: bool,
    /// With `memory`, writes each allocation and free as an instant too.
    pub(crate) allocation_instants: bool,
    /// Writes the counters (`C` events, one track per counter and process) and the instants
    /// (`i` events with their `s` scope).
    pub(crate) counters: bool,
}

/// Streams `trace` as Trace Event JSON in `dialect` into `out`.
pub(crate) fn write(trace: &Trace, out: &mut dyn Write, dialect: &Dialect) -> io::Result<()> {
    write_from(trace, out, dialect)
}

/// Streams the trace of `source` as Trace Event JSON in `dialect` into `out`, each thread's
/// spans piece by piece as `source` gives them ([`SpanSource::each_piece`]): the events of
/// a trace decoded whole, in the same order; of captures decoded in pieces, the same events
/// with a thread's extra tracks named before the first piece that uses them.
pub(crate) fn write_from(
    source: &dyn SpanSource,
    out: &mut dyn Write,
    dialect: &Dialect,
) -> io::Result<()> {
    let trace = source.trace();
    let mut w = Writer {
        out,
        buf: Vec::with_capacity(BLOCK + 512),
        names: FxHashMap::default(),
        pids: pids(&trace.processes),
        named: FxHashSet::default(),
        prefixes: std::iter::repeat_with(Prefix::default)
            .take(PREFIXES)
            .collect(),
        dialect,
        events: 0,
        link_args: link_args(trace),
    };
    w.header(trace)?;
    // Tracks for the lanes of overlapping scopes are numbered after the largest thread id.
    let mut tracks = Tracks {
        next_tid: trace
            .threads
            .iter()
            .map(|t| t.id)
            .max()
            .unwrap_or(0)
            .saturating_add(1),
        sort_index: 0,
    };
    // Where the slices that took part in a link went: track and times as written.
    let mut flow_slices: FxHashMap<SpanRef, Slice> = FxHashMap::default();
    for index in 0..trace.threads.len() {
        w.thread(source, index, &mut tracks, &mut flow_slices)?;
    }
    w.flows(trace, &flow_slices)?;
    if dialect.async_spans {
        for (id, call) in trace.async_spans.iter().enumerate() {
            w.async_span(id, call)?;
        }
    }
    if let Some(memory) = trace.memory.as_ref().filter(|_| dialect.memory) {
        w.memory(trace, memory, dialect.allocation_instants)?;
    }
    if dialect.counters {
        w.counters(trace)?;
        w.instants(trace)?;
    }
    w.finish(trace)
}

/// Numbering of the tracks written so far.
struct Tracks {
    /// The `tid` of the next extra track (a lane past a thread's own).
    next_tid: u64,
    /// The `thread_sort_index` of the next track.
    sort_index: usize,
}

/// The tracks of the thread being written: one per lane of overlapping scopes so far.
struct ThreadLanes {
    /// The thread's display name, which its extra tracks' names start with.
    name: String,
    pid: u32,
    /// The `tid` of each lane's track: the thread's own, then the extra ones.
    tids: Vec<u64>,
    /// `,"pid":..,"tid":..,"ts":` of each lane's track.
    heads: Vec<String>,
    /// What [`Dialect::times`] carries from one piece of the thread to the next.
    last: LaneEdges,
}

impl ThreadLanes {
    /// The start of the events on track `tid` of this thread's process.
    fn head(&self, tid: u64) -> String {
        format!(",\"pid\":{},\"tid\":{tid},\"ts\":", self.pid)
    }
}

/// Where a slice that took part in a link was written.
#[derive(Clone, Copy)]
struct Slice {
    pid: u32,
    tid: u64,
    /// Start and end as written, in ns from the origin.
    start: u64,
    end: u64,
}

/// The `pid` each process of `processes` is written with: its process id, unless an earlier
/// process has that id (processes of two hosts, or two programs that had one id at different
/// times), then a number past every process id of the trace, so that no two processes share
/// one.
pub(crate) fn pids(processes: &[Process]) -> Vec<u32> {
    let mut used: FxHashSet<u32> = FxHashSet::default();
    let mut next = processes.iter().map(|p| p.id).max().unwrap_or(0);
    processes
        .iter()
        .map(|p| {
            if used.insert(p.id) {
                return p.id;
            }
            loop {
                next = next.wrapping_add(1);
                if used.insert(next) {
                    return next;
                }
            }
        })
        .collect()
}

/// `ns` on the whole microsecond nearest to it, counting from `origin`.
pub(crate) fn nearest_micros(ns: u64, origin: u64) -> u64 {
    ns.saturating_sub(origin).saturating_add(500) / 1000
}

/// Slots of [`Writer::prefixes`].
const PREFIXES: usize = 64;

/// The start of a span's event, `,\n{"ph":"<ph>","cat":"<cat>","name":<name>,"pid":..,"tid":..,"ts":`,
/// and what it is made of: phase, callsite (by address), poll or scope, and lane.
#[derive(Default)]
struct Prefix {
    key: Option<(u8, usize, bool, u32)>,
    bytes: Vec<u8>,
}

struct Writer<'a> {
    out: &'a mut dyn Write,
    /// Events are formatted here by hand (no `fmt` machinery) and flushed in 64 KiB blocks.
    buf: Vec<u8>,
    /// Each name escaped once per trace.
    names: FxHashMap<*const Callsite, Vec<u8>>,
    /// The `pid` of each process ([`pids`]).
    pids: Vec<u32>,
    /// The threads (process and id) whose metadata is written: a thread that two sessions of
    /// one process recorded is one track.
    named: FxHashSet<(u32, u64)>,
    /// The starts of recent span events of the current thread (see [`Prefix`]), at slots
    /// given by what they are made of: most events copy theirs in one piece.
    prefixes: Vec<Prefix>,
    dialect: &'a Dialect,
    /// Complete events written, for Kineto's ids.
    events: u64,
    /// Args of the slices that took part in a link, rendered.
    link_args: FxHashMap<SpanRef, Vec<u8>>,
}

/// The callsite's name as a JSON string.
fn escape(callsite: &Callsite) -> Vec<u8> {
    let mut name = Vec::new();
    json::push_str(&mut name, callsite.name());
    name
}

/// PyTorch's link args per slice: `"Sequence number":S` on an origin, plus
/// `"Fwd thread id":T` on a follower (whose own args win when a slice is both); none (but an
/// entry) for the slices of a link without sequence number.
fn link_args(trace: &Trace) -> FxHashMap<SpanRef, Vec<u8>> {
    let mut args: FxHashMap<SpanRef, Vec<u8>> = FxHashMap::default();
    for link in &trace.flows {
        if link.seq == 0 {
            // A `tracing` span's `follows_from` has no PyTorch link args, but its slices take
            // part in a flow.
            for at in link.origin.into_iter().chain([link.follower]) {
                args.entry(at).or_default();
            }
            continue;
        }
        let mut follower = b"\"Sequence number\":".to_vec();
        json::push_u64(&mut follower, u64::from(link.seq));
        if let Some(origin) = link.origin {
            args.entry(origin).or_insert_with(|| follower.clone());
        }
        follower.extend_from_slice(b",\"Fwd thread id\":");
        json::push_u64(&mut follower, link.origin_thread);
        args.insert(link.follower, follower);
    }
    args
}

impl Writer<'_> {
    /// The `pid` of process `process` (an index in [`Trace::processes`]).
    fn pid(&self, process: u32) -> u32 {
        let pid = self.pids.get(process as usize).or(self.pids.first());
        pid.copied().unwrap_or(0)
    }

    /// The dialect's header and the `process_name` metadata of each process: its executable's
    /// name (`tickscope` when unknown), after its host's name and a `/` when the processes ran
    /// on more than one host, and followed by ` (pid N)` when it is written with another
    /// `pid` than its own.
    fn header(&mut self, trace: &Trace) -> io::Result<()> {
        self.buf.extend_from_slice(&self.dialect.header);
        let hosts_differ = trace.hosts_differ();
        for (index, process) in (0..).zip(&trace.processes) {
            let mut name = match process.name.as_str() {
                "" => "tickscope".to_owned(),
                name => name.to_owned(),
            };
            if hosts_differ && !process.host.is_empty() {
                name = format!("{}/{name}", process.host);
            }
            let pid = self.pid(index);
            if pid != process.id {
                name = format!("{name} (pid {})", process.id);
            }
            if index > 0 {
                self.buf.extend_from_slice(b",\n");
            }
            write!(self.buf, "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"ts\":")?;
            self.ts(trace.start_ns);
            self.buf
                .extend_from_slice(b",\"name\":\"process_name\",\"args\":{\"name\":");
            json::push_str(&mut self.buf, &name);
            self.buf.extend_from_slice(b"}}");
        }
        Ok(())
    }

    /// The tracks and slices of thread `index`, noting in `flow_slices` where the slices that
    /// took part in a link went.
    fn thread(
        &mut self,
        source: &dyn SpanSource,
        index: usize,
        tracks: &mut Tracks,
        flow_slices: &mut FxHashMap<SpanRef, Slice>,
    ) -> io::Result<()> {
        let trace = source.trace();
        let thread = &trace.threads[index];
        let mut lanes = ThreadLanes {
            name: thread.display_name(),
            pid: self.pid(thread.process),
            tids: vec![thread.id],
            heads: Vec::new(),
            last: Vec::new(),
        };
        lanes.heads.push(lanes.head(thread.id));
        if self.named.insert((thread.process, thread.id)) {
            self.thread_metadata(lanes.pid, thread.id, &lanes.name, tracks.sort_index)?;
            tracks.sort_index += 1;
        }
        // The prefixes of this thread's events name its own tracks.
        for prefix in &mut self.prefixes {
            prefix.key = None;
        }
        source.each_piece(index, &mut |piece| {
            self.piece(piece, index, (&mut lanes, tracks), flow_slices)
        })
    }

    /// The slices of one piece of thread `index`, after the tracks its lanes need beyond
    /// those `lanes` has.
    fn piece(
        &mut self,
        piece: Piece<'_>,
        index: usize,
        (thread, tracks): (&mut ThreadLanes, &mut Tracks),
        flow_slices: &mut FxHashMap<SpanRef, Slice>,
    ) -> io::Result<()> {
        let spans = piece.spans;
        let lanes = Lanes::assign(spans);
        for lane in thread.tids.len() as u32..lanes.count() {
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
            span: piece.base + span,
        };
        let moved = self
            .dialect
            .times
            .and_then(|times| times(spans, &lanes, self.dialect.origin, &mut thread.last));
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
                if self.link_args.contains_key(&at(i)) {
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
            return lanes.try_walk(spans, |i, begin| {
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
        for i in 0..spans.len() as u32 {
            let span = &spans[i as usize];
            let (start, end) = times(i);
            let lane = lanes.lane(i);
            let head = &heads[lane as usize];
            self.complete(span, (lane, head), start, end, at(i), piece.args_of(i));
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

    /// Appends `ns` as a timestamp relative to the origin.
    fn ts(&mut self, ns: u64) {
        json::push_micros(&mut self.buf, ns.saturating_sub(self.dialect.origin));
    }

    /// Appends the callsite's name as a JSON string, escaped once per trace.
    fn name(&mut self, callsite: &'static Callsite) {
        let name = self
            .names
            .entry(callsite as *const Callsite)
            .or_insert_with(|| escape(callsite));
        self.buf.extend_from_slice(name);
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
        let slot = (mixed >> 58) as usize % PREFIXES;
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

    /// The callsite's name as a JSON string, escaped once per trace.
    fn escaped_name(&mut self, callsite: &'static Callsite) -> &[u8] {
        self.names
            .entry(callsite as *const Callsite)
            .or_insert_with(|| escape(callsite))
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

    /// One `X` event from `start` to `end` (ns from the origin) for the span at `at`, on the track of `lane` whose `head` is `,"pid":..,"tid":..,"ts":`.
    fn complete(
        &mut self,
        span: &Span,
        lane: (u32, &str),
        start: u64,
        end: u64,
        at: SpanRef,
        args: &[SpanArg],
    ) {
        self.prefix(b'X', span, lane);
        json::push_micros(&mut self.buf, start);
        self.buf.extend_from_slice(b",\"dur\":");
        json::push_micros(&mut self.buf, end.saturating_sub(start));
        let op_id = self.dialect.op_ids.then(|| {
            self.events += 1;
            (self.events, span.callsite.id())
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
    fn flows(&mut self, trace: &Trace, slices: &FxHashMap<SpanRef, Slice>) -> io::Result<()> {
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

    /// The `b` and `e` events of one async call, id `id`, on the thread of its first poll.
    fn async_span(&mut self, id: usize, call: &AsyncSpan) -> io::Result<()> {
        for begin in [true, false] {
            let ph: &[u8] = if begin { b"b" } else { b"e" };
            self.buf.extend_from_slice(b",\n{\"ph\":\"");
            self.buf.extend_from_slice(ph);
            self.buf
                .extend_from_slice(b"\",\"cat\":\"async\",\"name\":");
            self.name(call.callsite);
            write!(
                self.buf,
                ",\"id\":\"0x{:x}\",\"pid\":{},\"tid\":{},\"ts\":",
                id + 1,
                self.pid(call.process),
                call.thread
            )?;
            self.ts(if begin { call.start_ns } else { call.end_ns });
            if begin {
                write!(
                    self.buf,
                    ",\"args\":{{\"polls\":{},\"busy_ns\":{},\"self_ns\":{}",
                    call.polls, call.busy_ns, call.self_ns
                )?;
                if let Some(end_thread) = call.end_thread {
                    write!(self.buf, ",\"end_thread\":{end_thread}")?;
                }
                if call.open_at_stop {
                    self.buf.extend_from_slice(b",\"open_at_stop\":true");
                }
                if call.cut_at_start {
                    self.buf.extend_from_slice(b",\"cut_at_start\":true");
                }
                self.buf.push(b'}');
            }
            self.buf.push(b'}');
        }
        self.spill()
    }

    /// The `memory` counter (`live_bytes`) of each process from the trace's start on, and with
    /// `instants` one instant per event. A process gets a counter when it has events (the
    /// process of a trace of one always does).
    fn memory(&mut self, trace: &Trace, memory: &MemoryTrace, instants: bool) -> io::Result<()> {
        let live = memory.live_bytes();
        let counter = |w: &mut Self, pid: u32, ns: u64, bytes: u64| {
            write!(
                w.buf,
                ",\n{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":{pid},\"tid\":0,\"ts\":"
            )?;
            w.ts(ns);
            w.buf.extend_from_slice(b",\"args\":{\"live_bytes\":");
            json::push_u64(&mut w.buf, bytes);
            w.buf.extend_from_slice(b"}}");
            w.spill()
        };
        // One sample per process and timestamp: the value after its last event there.
        let mut sample = vec![false; memory.events.len()];
        let mut next: FxHashMap<u32, u64> = FxHashMap::default();
        for (i, event) in memory.events.iter().enumerate().rev() {
            sample[i] = next.insert(event.process, event.ns) != Some(event.ns);
        }
        let mut counted: BTreeSet<u32> = memory.events.iter().map(|e| e.process).collect();
        if trace.processes.len() == 1 {
            counted.insert(0);
        }
        for process in counted {
            counter(self, self.pid(process), trace.start_ns, 0)?;
        }
        for (i, (event, &bytes)) in memory.events.iter().zip(&live).enumerate() {
            let pid = self.pid(event.process);
            if sample[i] {
                counter(self, pid, event.ns, bytes)?;
            }
            if instants {
                let name = match event.kind {
                    MemoryKind::Alloc => "alloc",
                    MemoryKind::Free => "free",
                };
                write!(
                    self.buf,
                    ",\n{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"memory\",\"name\":\"{name}\",\"pid\":{pid},\"tid\":{},\"ts\":",
                    event.thread
                )?;
                self.ts(event.ns);
                write!(
                    self.buf,
                    ",\"args\":{{\"size\":{},\"address\":\"0x{:x}\",\"live_bytes\":{bytes}",
                    event.size, event.address
                )?;
                if let Some((_, callsite)) = event.span {
                    self.buf.extend_from_slice(b",\"scope\":");
                    self.name(callsite);
                }
                self.buf.extend_from_slice(b"}}");
                self.spill()?;
            }
        }
        Ok(())
    }

    /// One `C` event per counter sample, named after the counter, with its value after the
    /// sample in `args.value`, under its process's `pid` (one track per counter and process).
    /// Samples of one timestamp are all written; viewers keep the last, which is the value
    /// after them.
    fn counters(&mut self, trace: &Trace) -> io::Result<()> {
        for track in &trace.counters {
            let pid = self.pid(track.process);
            let mut name = Vec::new();
            json::push_str(&mut name, track.name);
            for sample in &track.samples {
                write!(self.buf, ",\n{{\"ph\":\"C\",\"name\":")?;
                self.buf.extend_from_slice(&name);
                write!(self.buf, ",\"pid\":{pid},\"tid\":0,\"ts\":")?;
                self.ts(sample.ns);
                self.buf.extend_from_slice(b",\"args\":{\"value\":");
                push_number(&mut self.buf, sample.value);
                self.buf.extend_from_slice(b"}}");
                self.spill()?;
            }
        }
        Ok(())
    }

    /// One `i` event per instant: `"s":"t"` on its thread's track, `"s":"p"` process-wide,
    /// with its arguments.
    fn instants(&mut self, trace: &Trace) -> io::Result<()> {
        for instant in &trace.instants {
            let pid = self.pid(instant.process);
            let scope = match instant.scope {
                InstantScope::Thread => 't',
                InstantScope::Process => 'p',
            };
            write!(
                self.buf,
                ",\n{{\"ph\":\"i\",\"s\":\"{scope}\",\"cat\":\"instant\",\"name\":"
            )?;
            self.name(instant.callsite);
            write!(
                self.buf,
                ",\"pid\":{pid},\"tid\":{},\"ts\":",
                instant.thread
            )?;
            self.ts(instant.ns);
            // Where it was recorded (a `tracing` event's source file, an `instant!`'s), after
            // its own arguments.
            let (file, line) = (instant.callsite.file(), instant.callsite.line());
            let source = !file.is_empty() && !file.starts_with('<');
            if !instant.args.is_empty() || source {
                self.buf.extend_from_slice(b",\"args\":{");
                for (i, (key, value)) in instant.args.iter().enumerate() {
                    if i > 0 {
                        self.buf.push(b',');
                    }
                    json::push_str(&mut self.buf, key);
                    self.buf.push(b':');
                    json::push_value(&mut self.buf, value);
                }
                if source {
                    if !instant.args.is_empty() {
                        self.buf.push(b',');
                    }
                    self.buf.extend_from_slice(b"\"file\":");
                    json::push_str(&mut self.buf, file);
                    write!(self.buf, ",\"line\":{line}")?;
                }
                self.buf.push(b'}');
            }
            self.buf.push(b'}');
            self.spill()?;
        }
        Ok(())
    }

    /// Writes the buffer out once it holds a block.
    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= BLOCK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// The rest of the buffer, the end of `traceEvents` and `otherData`.
    fn finish(self, trace: &Trace) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        write!(
            self.out,
            "\n],\"otherData\":{{\"producer\":\"tickscope {}\",\"start_unix_ns\":{},\"end_unix_ns\":{},\"dropped_events\":{},\"time_origin_unix_ns\":{}",
            env!("CARGO_PKG_VERSION"),
            trace.start_ns,
            trace.end_ns,
            trace.dropped_events,
            self.dialect.origin,
        )?;
        // A flight recorder's window: the events recycled before it.
        if trace.overwritten_events > 0 {
            write!(
                self.out,
                ",\"overwritten_events\":{}",
                trace.overwritten_events
            )?;
        }
        // The probe cost subtracted from durations in the table (the slices keep their
        // recorded times, but for the 1 ns that separates edges that shared a nanosecond on
        // one track); absent when the trace says nothing about it (a mock clock).
        match trace.compensation {
            Some(Compensation::Off) => write!(self.out, ",\"overhead_compensation\":\"off\"")?,
            Some(Compensation::Applied { inner_ns, outer_ns }) => write!(
                self.out,
                ",\"overhead_compensation\":\"applied\",\"probe_inner_ns\":{inner_ns:.3},\"probe_outer_ns\":{outer_ns:.3}"
            )?,
            None => {}
        }
        self.out.write_all(b"}}\n")
    }
}
