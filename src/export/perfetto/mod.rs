//! Native Perfetto traces (`.pftrace`): the `Trace` protobuf of Perfetto's
//! `protos/perfetto/trace/`, for ui.perfetto.dev and the trace processor, with exact
//! nanosecond times.
//!
//! What is written:
//!
//! - A process track per process (`ProcessDescriptor`: its `pid` as the Chrome export writes
//!   it, and its name) and a thread track per thread (`ThreadDescriptor`: tickscope's thread id
//!   and the thread's name).
//! - Each scope is a `TrackEvent` slice: a `TYPE_SLICE_BEGIN` and a `TYPE_SLICE_END` packet on
//!   its thread's track. Polls of async calls have the category `poll`. Scopes whose guards were
//!   dropped out of order (a child that outlived its parent) go to extra tracks of their thread
//!   (`<thread> (overlapping scopes N)`), as in the Chrome export, so every slice nests.
//! - Scope arguments are debug annotations (int, uint, double, bool, string), and so are the
//!   marks of the Chrome export: `open_at_stop` (true) on a scope still open when the session
//!   stopped (closed at the stop time), `cut_at_start` (true) on one entered before a flight
//!   recorder's window.
//! - A link gets a flow: `flow_ids` on the slice that was open where the link was captured,
//!   `terminating_flow_ids` on the slice that followed from it (links whose origin is outside
//!   the window get none); and, as in the Chrome export, PyTorch's link arguments as
//!   annotations before the scope's own: `Sequence number` on both slices and `Fwd thread id`
//!   (the capturing thread's id) on the follower.
//! - Each `#[profile] async fn` call is a slice (category `async`, with `polls`, `busy_ns` and
//!   `self_ns` annotations, and the marks `open_at_stop` and `cut_at_start` when set) on a
//!   track of its process named after the function; calls of one function that do not overlap
//!   share a track.
//! - With memory tracking, a `memory` counter track per process (bytes) of its live bytes.
//!
//! Every track's events form their own packet sequence (`trusted_packet_sequence_id`), which
//! starts with a packet that sets `SEQ_INCREMENTAL_STATE_CLEARED`, the sequence's
//! `TracePacketDefaults` (its track and an incremental clock) and a `ClockSnapshot` tying that
//! clock to `BOOTTIME` at the sequence's first time. Every later packet sets
//! `SEQ_NEEDS_INCREMENTAL_STATE` and holds the time since the previous packet of its sequence,
//! in nanoseconds. Event names, categories and annotation names are interned
//! (`InternedData`) in the first packet of each sequence that uses them. So the trace
//! processor's `ts` is the Unix-epoch nanosecond of each event, exactly (no rounding through
//! doubles, unlike JSON). A plain nested scope takes about 26 bytes (`benches/export.rs`).
//!
//! The encoder is our own (`src/export/proto.rs`, shared with [pprof](super::pprof)), of the
//! fields listed here only. Plain slice begins and ends (no arguments, links, category or
//! marks), nearly every packet of a typical trace, are written in one piece each: the time
//! delta, the name's iid and a tail of bytes fixed per sequence. prost encodes the same
//! packets about 7 times slower (`benches/export.rs`, `perfetto_prost_to_sink`): it builds a
//! message value per packet and sizes each nested message before writing it.
//!
//! ```
//! use tickscope::export::perfetto;
//!
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! {
//!     let _outer = tickscope::scope!("outer");
//!     let _inner = tickscope::scope!("inner", n = 3);
//! }
//! prof.stop();
//! let mut trace = Vec::new();
//! perfetto::write(&prof.trace(), &mut trace)?;
//! assert!(!trace.is_empty());
//! // prof.write_perfetto("trace.pftrace")? writes it to a file (gzipped for `.pftrace.gz`).
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::{self, Write};

use crate::record::hash::FxHashMap;

use super::Format;
use super::lanes::Lanes;
use super::proto::{bytes_field, fixed64_field, int_field, varint_field};
use super::trace_event::pids;
use crate::decode::pieces::{Piece, Pieces, SpanSource};
use crate::record::callsite::Callsite;
use crate::trace::{
    AsyncSpan, InstantScope, Number, Span, SpanArg, SpanKind, SpanRef, Trace, Value,
};

/// Options of native Perfetto traces: the [`Format`] to hand to
/// [`Profiler::write`](crate::Profiler::write) or [`write_file`](super::write_file) (use a
/// `.pftrace` or `.pftrace.gz` path).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Each packet holds the time since the previous one of its sequence, on an incremental
    /// clock, and its track is the sequence's default (the default: about 26 bytes per plain
    /// scope). `false`: every track event holds its absolute time and its `track_uuid` (about
    /// 46 bytes per scope), for consumers that do not apply `TracePacketDefaults` and
    /// incremental clocks (the trace processor applies both).
    pub delta_times: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { delta_times: true }
    }
}

impl Options {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Options::delta_times`].
    pub fn delta_times(mut self, on: bool) -> Self {
        self.delta_times = on;
        self
    }
}

impl Format for Options {
    fn write(&self, trace: &Trace, mut out: &mut dyn Write) -> io::Result<()> {
        write_with(trace, &mut out, *self)
    }

    fn write_captures(
        &self,
        captures: &[&crate::Capture],
        out: &mut dyn Write,
    ) -> Option<io::Result<()>> {
        let pieces = Pieces::new(captures)?;
        Some(write_from(&pieces, out, *self))
    }
}

/// Writes `trace` as an (uncompressed) Perfetto `Trace` protobuf, with the default
/// [`Options`].
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    write_with(trace, out, Options::new())
}

/// Writes `trace` as an (uncompressed) Perfetto `Trace` protobuf, with `options`.
pub fn write_with(trace: &Trace, out: &mut impl Write, options: Options) -> io::Result<()> {
    write_from(trace, out, options)
}

/// Writes the trace of `source` as [`write_with`] does, each thread's spans piece by piece as
/// `source` gives them ([`SpanSource::each_piece`]): a thread's extra tracks (lanes of
/// overlapping scopes) are made before the first piece that uses them.
fn write_from<W: Write + ?Sized>(
    source: &dyn SpanSource,
    out: &mut W,
    options: Options,
) -> io::Result<()> {
    let mut w = Writer::new(out, options.delta_times);
    w.trace(source)?;
    w.finish()
}

/// Bytes buffered before they are written out.
const BLOCK: usize = 64 * 1024;
/// Room for a packet of [`Writer::short_packet`]: 3 bytes before the time delta (at most 10),
/// 4 of the event before its name iid (at most 1 + 10), and its sequence's [`TAIL`].
const SHORT_PACKET: usize = 3 + 10 + 4 + 11 + TAIL;
/// Room for the sequence id and flags fields closing a sequence's packets: 1 + 5 + 1 + 1 bytes.
const TAIL: usize = 8;
/// Slots of the callsite cache: `1 << CALLSITE_CACHE_BITS`.
const CALLSITE_CACHE_BITS: u32 = 8;
const CALLSITE_CACHE: usize = 1 << CALLSITE_CACHE_BITS;

// Field numbers of the messages written (Perfetto's `protos/perfetto/trace/`).
/// `Trace.packet`.
const TRACE_PACKET: u32 = 1;
/// `TracePacket` fields.
const PACKET_CLOCK_SNAPSHOT: u32 = 6;
const PACKET_TIMESTAMP: u32 = 8;
const PACKET_SEQUENCE_ID: u32 = 10;
const PACKET_TRACK_EVENT: u32 = 11;
const PACKET_INTERNED_DATA: u32 = 12;
const PACKET_SEQUENCE_FLAGS: u32 = 13;
const PACKET_TIMESTAMP_CLOCK_ID: u32 = 58;
const PACKET_DEFAULTS: u32 = 59;
const PACKET_TRACK_DESCRIPTOR: u32 = 60;
/// `TracePacket.sequence_flags` values.
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `BUILTIN_CLOCK_BOOTTIME`, the trace processor's default trace clock.
const CLOCK_BOOTTIME: u64 = 6;
/// The sequence-scoped incremental clock (ids 64 to 127 are the sequence's own).
const CLOCK_INCREMENTAL: u64 = 64;
/// `TrackEvent` fields.
const EVENT_CATEGORY_IIDS: u32 = 3;
const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
const EVENT_TYPE: u32 = 9;
const EVENT_NAME_IID: u32 = 10;
const EVENT_TRACK_UUID: u32 = 11;
const EVENT_COUNTER_VALUE: u32 = 30;
const EVENT_DOUBLE_COUNTER_VALUE: u32 = 44;
const EVENT_FLOW_IDS: u32 = 47;
const EVENT_TERMINATING_FLOW_IDS: u32 = 48;
/// `TrackEvent.type` values.
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
#[cfg_attr(not(test), allow(dead_code))] // Instants are written once `Trace` has them.
const TYPE_INSTANT: u64 = 3;
const TYPE_COUNTER: u64 = 4;
/// `InternedData` fields.
const INTERNED_CATEGORIES: u32 = 1;
const INTERNED_NAMES: u32 = 2;
const INTERNED_ANNOTATION_NAMES: u32 = 3;

/// The sequence of the track descriptors, which need no incremental state.
const DESCRIPTOR_SEQUENCE: u32 = 1;

/// A counter sample's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CounterValue {
    /// An integer (`counter_value`).
    Int(i64),
    /// A float (`double_counter_value`).
    Float(f64),
}

/// What a counter track counts (`CounterDescriptor.unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// No unit.
    Unspecified = 0,
    /// Bytes.
    Bytes = 3,
}

/// One instant event: its name, time (Unix ns) and arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Instant<'a> {
    pub(crate) name: &'a str,
    pub(crate) ns: u64,
    pub(crate) args: &'a [(&'a str, Value)],
}

/// What links put on a slice: flows (id, whether the flow ends there) and PyTorch's link
/// arguments (`Sequence number`, and `Fwd thread id` on a follower), as in the Chrome export.
#[derive(Default)]
struct SliceLinks {
    flows: Vec<(u64, bool)>,
    /// The sequence number, and the forward thread id of a follower.
    args: Option<(u32, Option<u64>)>,
}

/// One packet sequence: one track's events, timed by its incremental clock.
struct Sequence {
    id: u32,
    /// The track its events go to by default.
    track: u64,
    /// The time of its last packet; `None` before its first (the state is not set up yet).
    last_ns: Option<u64>,
    /// Which names, categories and annotation names (by iid) it has interned.
    names: Vec<bool>,
    categories: Vec<bool>,
    annotations: Vec<bool>,
    /// The end of each of its event packets: its `trusted_packet_sequence_id` and
    /// `sequence_flags` fields (`SEQ_NEEDS_INCREMENTAL_STATE`), padded with zeros.
    tail: [u8; TAIL],
    /// How many bytes of `tail` are used.
    tail_len: usize,
}

/// Strings numbered from 1 (an interning id space).
#[derive(Default)]
struct Interner {
    ids: FxHashMap<String, u64>,
    list: Vec<String>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u64 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        self.list.push(s.to_owned());
        let id = self.list.len() as u64;
        self.ids.insert(s.to_owned(), id);
        id
    }

    fn get(&self, id: u64) -> &str {
        &self.list[id as usize - 1]
    }
}

/// The encoder: output buffers, interning tables, and the numbering of tracks and sequences.
struct Writer<'a, W: Write + ?Sized> {
    out: &'a mut W,
    /// Whole packets, flushed in blocks.
    buf: Vec<u8>,
    /// The packet being written.
    packet: Vec<u8>,
    /// The `TrackEvent` being written.
    event: Vec<u8>,
    /// The `InternedData` of the packet being written.
    interned: Vec<u8>,
    /// A nested message being written.
    scratch: Vec<u8>,
    names: Interner,
    categories: Interner,
    annotations: Interner,
    /// Name iids by callsite (address).
    callsite_names: FxHashMap<*const Callsite, u64>,
    /// The last (callsite address, name iid) seen in each slot, a slot per address hash: most
    /// lookups end here, without hashing a map.
    callsite_cache: Box<[(usize, u64); CALLSITE_CACHE]>,
    /// Plain slice begins and ends are written by [`Writer::short_packet`] (`false` only in
    /// the tests that compare its bytes with the general path's).
    shortcuts: bool,
    next_sequence: u32,
    next_uuid: u64,
    /// Times as deltas on each sequence's incremental clock, tracks from its defaults.
    delta: bool,
}

impl<'a, W: Write + ?Sized> Writer<'a, W> {
    fn new(out: &'a mut W, delta: bool) -> Self {
        Self {
            out,
            buf: Vec::with_capacity(BLOCK + 1024),
            packet: Vec::new(),
            event: Vec::new(),
            interned: Vec::new(),
            scratch: Vec::new(),
            names: Interner::default(),
            categories: Interner::default(),
            annotations: Interner::default(),
            callsite_names: FxHashMap::default(),
            callsite_cache: Box::new([(0, 0); CALLSITE_CACHE]),
            shortcuts: true,
            next_sequence: DESCRIPTOR_SEQUENCE + 1,
            next_uuid: 1,
            delta,
        }
    }

    /// Everything of the trace of `source`.
    fn trace(&mut self, source: &dyn SpanSource) -> io::Result<()> {
        let trace = source.trace();
        let pids = pids(&trace.processes);
        let hosts_differ = trace.hosts_differ();
        let mut process_tracks = Vec::with_capacity(trace.processes.len());
        for (process, &pid) in trace.processes.iter().zip(&pids) {
            let mut name = match process.name.as_str() {
                "" => "tickscope".to_owned(),
                name => name.to_owned(),
            };
            if hosts_differ && !process.host.is_empty() {
                name = format!("{}/{name}", process.host);
            }
            process_tracks.push(self.process_track(pid, &name)?);
        }
        // Flow ids (from 1) by slice: on the origin's begin, or ending at the follower's; and
        // PyTorch's link arguments, as the Chrome export writes them: an origin's sequence
        // number (its first link's), a follower's sequence number and forward thread (its last
        // link's), which win when a slice is both.
        let mut links: FxHashMap<SpanRef, SliceLinks> = FxHashMap::default();
        for (id, link) in (1..).zip(&trace.flows) {
            if let Some(origin) = link.origin {
                let origin = links.entry(origin).or_default();
                origin.flows.push((id, false));
                origin.args.get_or_insert((link.seq, None));
                links
                    .entry(link.follower)
                    .or_default()
                    .flows
                    .push((id, true));
            }
            links.entry(link.follower).or_default().args =
                Some((link.seq, Some(link.origin_thread)));
        }
        let mut flow_threads = vec![false; trace.threads.len()];
        for slice in links.keys() {
            if let Some(has) = flow_threads.get_mut(slice.thread as usize) {
                *has = true;
            }
        }
        let mut thread_tracks: FxHashMap<(u32, u64), u64> = FxHashMap::default();
        for (index, thread) in trace.threads.iter().enumerate() {
            let key = (thread.process, thread.id);
            let track = match thread_tracks.get(&key) {
                Some(&track) => track,
                None => {
                    let track = self.thread_track(
                        process_tracks[thread.process as usize],
                        pids[thread.process as usize],
                        thread.id,
                        &thread.display_name(),
                    )?;
                    thread_tracks.insert(key, track);
                    track
                }
            };
            self.thread_spans(source, index, track, &links, flow_threads[index])?;
        }
        self.async_calls(&trace.async_spans, &process_tracks)?;
        if let Some(memory) = &trace.memory {
            let live = memory.live_bytes();
            for (p, &parent) in process_tracks.iter().enumerate() {
                let p = p as u32;
                let has_events = memory.events.iter().any(|e| e.process == p);
                if !has_events && trace.processes.len() > 1 {
                    continue;
                }
                // From 0 at the start, then one sample per time: the value after the last
                // event at that time.
                let mut samples: Vec<(u64, CounterValue)> =
                    vec![(trace.start_ns, CounterValue::Int(0))];
                for (event, &bytes) in memory.events.iter().zip(&live) {
                    if event.process != p {
                        continue;
                    }
                    let value = CounterValue::Int(i64::try_from(bytes).unwrap_or(i64::MAX));
                    match samples.last_mut() {
                        Some(last) if last.0 == event.ns => last.1 = value,
                        _ => samples.push((event.ns, value)),
                    }
                }
                self.counter_track(parent, "memory", Unit::Bytes, &samples)?;
            }
        }
        for counter in &trace.counters {
            let Some(&parent) = process_tracks.get(counter.process as usize) else {
                continue;
            };
            let samples: Vec<(u64, CounterValue)> = counter
                .samples
                .iter()
                .map(|sample| {
                    let value = match sample.value {
                        Number::Int(v) => CounterValue::Int(v),
                        Number::Float(v) => CounterValue::Float(v),
                    };
                    (sample.ns, value)
                })
                .collect();
            self.counter_track(parent, counter.name, Unit::Unspecified, &samples)?;
        }
        // Instants on their thread's track (one made for a thread without scopes) or their
        // process's, in time order on each.
        let mut by_track: Vec<(u64, Vec<Instant<'_>>)> = Vec::new();
        for instant in &trace.instants {
            let process = instant.process as usize;
            let track = match instant.scope {
                InstantScope::Process => match process_tracks.get(process) {
                    Some(&track) => track,
                    None => continue,
                },
                InstantScope::Thread => match thread_tracks.get(&(instant.process, instant.thread))
                {
                    Some(&track) => track,
                    None => {
                        let (Some(&parent), Some(&pid)) =
                            (process_tracks.get(process), pids.get(process))
                        else {
                            continue;
                        };
                        let track = self.thread_track(
                            parent,
                            pid,
                            instant.thread,
                            &format!("thread {}", instant.thread),
                        )?;
                        thread_tracks.insert((instant.process, instant.thread), track);
                        track
                    }
                },
            };
            let at = match by_track.iter().position(|(t, _)| *t == track) {
                Some(at) => at,
                None => {
                    by_track.push((track, Vec::new()));
                    by_track.len() - 1
                }
            };
            by_track[at].1.push(Instant {
                name: instant.name(),
                ns: instant.ns,
                args: &instant.args,
            });
        }
        for (track, instants) in &by_track {
            self.instants(*track, instants)?;
        }
        Ok(())
    }

    /// A new track uuid.
    fn uuid(&mut self) -> u64 {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        uuid
    }

    /// A new sequence whose events go to `track`.
    fn sequence(&mut self, track: u64) -> Sequence {
        let id = self.next_sequence;
        self.next_sequence = self.next_sequence.saturating_add(1);
        let mut tail = [0; TAIL];
        let mut tail_len = 0;
        put_varint(&mut tail, &mut tail_len, u64::from(PACKET_SEQUENCE_ID) << 3);
        put_varint(&mut tail, &mut tail_len, u64::from(id));
        put_varint(
            &mut tail,
            &mut tail_len,
            u64::from(PACKET_SEQUENCE_FLAGS) << 3,
        );
        put_varint(&mut tail, &mut tail_len, SEQ_NEEDS_INCREMENTAL_STATE);
        Sequence {
            id,
            track,
            last_ns: None,
            names: Vec::new(),
            categories: Vec::new(),
            annotations: Vec::new(),
            tail,
            tail_len,
        }
    }

    /// Writes a track descriptor packet whose `TrackDescriptor` fields `self.scratch` holds.
    fn descriptor(&mut self) -> io::Result<()> {
        self.packet.clear();
        bytes_field(&mut self.packet, PACKET_TRACK_DESCRIPTOR, &self.scratch);
        int_field(
            &mut self.packet,
            PACKET_SEQUENCE_ID,
            u64::from(DESCRIPTOR_SEQUENCE),
        );
        self.emit()
    }

    /// A process track: its uuid.
    fn process_track(&mut self, pid: u32, name: &str) -> io::Result<u64> {
        let uuid = self.uuid();
        let mut process = Vec::new();
        varint_field(&mut process, 1, i64::from(pid as i32) as u64);
        bytes_field(&mut process, 6, name.as_bytes());
        self.scratch.clear();
        int_field(&mut self.scratch, 1, uuid);
        bytes_field(&mut self.scratch, 3, &process);
        self.descriptor()?;
        Ok(uuid)
    }

    /// A thread track of the process whose track is `parent`: its uuid.
    fn thread_track(&mut self, parent: u64, pid: u32, tid: u64, name: &str) -> io::Result<u64> {
        let uuid = self.uuid();
        let mut thread = Vec::new();
        varint_field(&mut thread, 1, i64::from(pid as i32) as u64);
        varint_field(&mut thread, 2, tid);
        bytes_field(&mut thread, 5, name.as_bytes());
        self.scratch.clear();
        int_field(&mut self.scratch, 1, uuid);
        int_field(&mut self.scratch, 5, parent);
        bytes_field(&mut self.scratch, 4, &thread);
        self.descriptor()?;
        Ok(uuid)
    }

    /// A named track under `parent` (a process or thread track), with a counter descriptor
    /// when `counter` is given: its uuid.
    fn named_track(&mut self, parent: u64, name: &str, counter: Option<Unit>) -> io::Result<u64> {
        let uuid = self.uuid();
        self.scratch.clear();
        int_field(&mut self.scratch, 1, uuid);
        int_field(&mut self.scratch, 5, parent);
        bytes_field(&mut self.scratch, 2, name.as_bytes());
        if let Some(unit) = counter {
            let mut descriptor = Vec::new();
            int_field(&mut descriptor, 3, unit as u64);
            bytes_field(&mut self.scratch, 8, &descriptor);
        }
        self.descriptor()?;
        Ok(uuid)
    }

    /// The slices of thread `index` on its track `track` (and extra tracks for the lanes of
    /// overlapping scopes), one sequence per track; `links` by slice, `has_links` when some
    /// are on this thread.
    fn thread_spans(
        &mut self,
        source: &dyn SpanSource,
        index: usize,
        track: u64,
        links: &FxHashMap<SpanRef, SliceLinks>,
        has_links: bool,
    ) -> io::Result<()> {
        let name = source.trace().threads[index].display_name();
        let mut sequences = vec![self.sequence(track)];
        source.each_piece(index, &mut |piece| {
            let lanes = Lanes::assign(piece.spans);
            for lane in sequences.len() as u32..lanes.count() {
                let name = format!("{name} (overlapping scopes {lane})");
                let lane_track = self.named_track(track, &name, None)?;
                sequences.push(self.sequence(lane_track));
            }
            self.piece_spans(piece, &lanes, &mut sequences, (index, links, has_links))
        })
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
            return lanes.try_walk(spans, |i, begin| {
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
        lanes.try_walk(spans, |i, begin| {
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
                    span: piece.base + i,
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

    /// The async calls, on tracks of their process named after their function: a call goes
    /// to the first such track whose last call ended by its start.
    fn async_calls(&mut self, calls: &[AsyncSpan], process_tracks: &[u64]) -> io::Result<()> {
        // (process, callsite) -> tracks: (sequence, end of its last call).
        let mut tracks: FxHashMap<(u32, *const Callsite), Vec<(Sequence, u64)>> =
            FxHashMap::default();
        let mut order: Vec<&AsyncSpan> = calls.iter().collect();
        order.sort_by_key(|c| c.start_ns);
        for call in order {
            let key = (call.process, std::ptr::from_ref(call.callsite));
            let lanes = tracks.entry(key).or_default();
            let lane = match lanes.iter().position(|(_, end)| *end <= call.start_ns) {
                Some(lane) => lane,
                None => {
                    let parent = process_tracks
                        .get(call.process as usize)
                        .copied()
                        .unwrap_or(0);
                    let track = self.named_track(parent, call.name(), None)?;
                    lanes.push((self.sequence(track), 0));
                    lanes.len() - 1
                }
            };
            let (seq, end) = &mut lanes[lane];
            *end = call.end_ns;
            self.begin_callsite(
                seq,
                call.start_ns,
                call.callsite,
                Some("async"),
                |w, seq| {
                    w.annotation(seq, "polls", &Value::U64(u64::from(call.polls)));
                    w.annotation(seq, "busy_ns", &Value::U64(call.busy_ns));
                    w.annotation(seq, "self_ns", &Value::U64(call.self_ns));
                    if call.open_at_stop {
                        w.annotation(seq, "open_at_stop", &Value::Bool(true));
                    }
                    if call.cut_at_start {
                        w.annotation(seq, "cut_at_start", &Value::Bool(true));
                    }
                },
            )?;
            self.end(seq, call.end_ns)?;
        }
        Ok(())
    }

    /// A counter track named `name` under `parent` (a process or thread track) with
    /// `samples` (time in Unix ns, value), in time order: its uuid.
    pub(crate) fn counter_track(
        &mut self,
        parent: u64,
        name: &str,
        unit: Unit,
        samples: &[(u64, CounterValue)],
    ) -> io::Result<u64> {
        let track = self.named_track(parent, name, Some(unit))?;
        let mut seq = self.sequence(track);
        for &(ns, value) in samples {
            self.event.clear();
            varint_field(&mut self.event, EVENT_TYPE, TYPE_COUNTER);
            match value {
                CounterValue::Int(v) => {
                    varint_field(&mut self.event, EVENT_COUNTER_VALUE, v as u64)
                }
                CounterValue::Float(v) => {
                    fixed64_field(&mut self.event, EVENT_DOUBLE_COUNTER_VALUE, v.to_bits());
                }
            }
            self.interned.clear();
            self.track_event(&mut seq, ns)?;
        }
        Ok(track)
    }

    /// Instant events on track `track` (a thread, process or any other track), in time order.
    pub(crate) fn instants(&mut self, track: u64, instants: &[Instant<'_>]) -> io::Result<()> {
        let mut seq = self.sequence(track);
        for instant in instants {
            self.event.clear();
            self.interned.clear();
            varint_field(&mut self.event, EVENT_TYPE, TYPE_INSTANT);
            let iid = self.names.id(instant.name);
            self.name_iid(&mut seq, iid);
            for (key, value) in instant.args {
                self.annotation(&mut seq, key, value);
            }
            self.track_event(&mut seq, instant.ns)?;
        }
        Ok(())
    }

    /// Puts `name_iid` in the event, interning the name on `seq` first if needed.
    fn name_iid(&mut self, seq: &mut Sequence, iid: u64) {
        if !known(&mut seq.names, iid) {
            self.scratch.clear();
            int_field(&mut self.scratch, 1, iid);
            bytes_field(&mut self.scratch, 2, self.names.get(iid).as_bytes());
            bytes_field(&mut self.interned, INTERNED_NAMES, &self.scratch);
        }
        int_field(&mut self.event, EVENT_NAME_IID, iid);
    }

    /// A slice begin named after `callsite`, with `category`, then what `more` adds to the
    /// event (annotations, flows).
    fn begin_callsite(
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

    /// The name iid of `callsite`.
    #[inline]
    fn callsite_iid(&mut self, callsite: &'static Callsite) -> u64 {
        let address = std::ptr::from_ref(callsite) as usize;
        // Fibonacci hashing of the address onto the cache's slots.
        let slot =
            (address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CALLSITE_CACHE_BITS);
        let (cached, iid) = self.callsite_cache[slot as usize];
        if cached == address {
            return iid;
        }
        self.callsite_iid_slow(callsite, slot as usize)
    }

    /// [`callsite_iid`](Self::callsite_iid) when `slot` holds another callsite: the map,
    /// interning the name if it is new, and the slot remembers the answer.
    #[cold]
    #[inline(never)]
    fn callsite_iid_slow(&mut self, callsite: &'static Callsite, slot: usize) -> u64 {
        let iid = match self.callsite_names.get(&std::ptr::from_ref(callsite)) {
            Some(&iid) => iid,
            None => {
                let iid = self.names.id(callsite.name());
                self.callsite_names.insert(callsite, iid);
                iid
            }
        };
        self.callsite_cache[slot] = (std::ptr::from_ref(callsite) as usize, iid);
        iid
    }

    /// Appends the packet of a plain slice begin (`name`: its interned name) or end (`None`)
    /// at `ns`, `delta` after the last packet of `seq` (which has started), in one piece:
    /// the same bytes as [`begin_callsite`](Self::begin_callsite) or [`end`](Self::end)
    /// write for it, without building the event and packet apart.
    #[inline(always)]
    fn short_packet(
        &mut self,
        seq: &mut Sequence,
        delta: u64,
        ns: u64,
        name: Option<u64>,
    ) -> io::Result<()> {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; SHORT_PACKET]);
        let Some(packet) = self.buf.get_mut(start..start + SHORT_PACKET) else {
            unreachable!("{SHORT_PACKET} bytes were just appended");
        };
        packet[0] = ((TRACE_PACKET << 3) | 2) as u8;
        packet[2] = (PACKET_TIMESTAMP << 3) as u8;
        let mut at = 3;
        put_varint(packet, &mut at, delta);
        packet[at] = ((PACKET_TRACK_EVENT << 3) | 2) as u8;
        let event = at + 1;
        packet[event + 1] = (EVENT_TYPE << 3) as u8;
        at = event + 3;
        match name {
            Some(iid) => {
                packet[event + 2] = TYPE_SLICE_BEGIN as u8;
                packet[at] = (EVENT_NAME_IID << 3) as u8;
                at += 1;
                put_varint(packet, &mut at, iid);
            }
            None => packet[event + 2] = TYPE_SLICE_END as u8,
        }
        packet[event] = (at - event - 1) as u8;
        packet[at..at + TAIL].copy_from_slice(&seq.tail);
        at += seq.tail_len;
        // At most 3 + 10 + 4 + 11 + TAIL bytes: both lengths fit one byte.
        packet[1] = (at - 2) as u8;
        self.buf.truncate(start + at);
        seq.last_ns = Some(ns);
        if self.buf.len() >= BLOCK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A slice end.
    fn end(&mut self, seq: &mut Sequence, ns: u64) -> io::Result<()> {
        self.event.clear();
        self.interned.clear();
        self.event
            .extend_from_slice(&[(EVENT_TYPE << 3) as u8, TYPE_SLICE_END as u8]);
        self.track_event(seq, ns)
    }

    /// Adds a debug annotation `key` = `value` to the event, interning `key` on `seq` first
    /// if needed.
    fn annotation(&mut self, seq: &mut Sequence, key: &str, value: &Value) {
        let iid = self.annotations.id(key);
        if !known(&mut seq.annotations, iid) {
            self.scratch.clear();
            int_field(&mut self.scratch, 1, iid);
            bytes_field(&mut self.scratch, 2, key.as_bytes());
            bytes_field(&mut self.interned, INTERNED_ANNOTATION_NAMES, &self.scratch);
        }
        self.scratch.clear();
        int_field(&mut self.scratch, 1, iid);
        match value {
            Value::Bool(v) => varint_field(&mut self.scratch, 2, u64::from(*v)),
            Value::U64(v) => varint_field(&mut self.scratch, 3, *v),
            Value::I64(v) => varint_field(&mut self.scratch, 4, *v as u64),
            Value::F64(v) => fixed64_field(&mut self.scratch, 5, v.to_bits()),
            Value::Str(v) => bytes_field(&mut self.scratch, 6, v.as_bytes()),
        }
        bytes_field(&mut self.event, EVENT_DEBUG_ANNOTATIONS, &self.scratch);
    }

    /// Writes the packet of the event in `self.event` (with the interned data in
    /// `self.interned`) at `ns` on `seq`, starting the sequence first if this is its first.
    fn track_event(&mut self, seq: &mut Sequence, ns: u64) -> io::Result<()> {
        let last = match seq.last_ns {
            Some(last) => last,
            None => {
                self.start_sequence(seq, ns)?;
                ns
            }
        };
        if self.delta && ns >= last && self.interned.is_empty() && self.event.len() < 64 {
            // The common packet, built on the stack and appended in one piece: a time delta,
            // the event, the sequence and its flags.
            let mut packet = [0u8; 96];
            let mut at = 2;
            put_varint(&mut packet, &mut at, u64::from(PACKET_TIMESTAMP) << 3);
            put_varint(&mut packet, &mut at, ns - last);
            put_varint(
                &mut packet,
                &mut at,
                (u64::from(PACKET_TRACK_EVENT) << 3) | 2,
            );
            put_varint(&mut packet, &mut at, self.event.len() as u64);
            packet[at..at + self.event.len()].copy_from_slice(&self.event);
            at += self.event.len();
            put_varint(&mut packet, &mut at, u64::from(PACKET_SEQUENCE_ID) << 3);
            put_varint(&mut packet, &mut at, u64::from(seq.id));
            put_varint(&mut packet, &mut at, u64::from(PACKET_SEQUENCE_FLAGS) << 3);
            put_varint(&mut packet, &mut at, SEQ_NEEDS_INCREMENTAL_STATE);
            // At most 11 + 2 + 63 + 6 + 2 bytes after the header: the length fits one byte.
            packet[0] = ((TRACE_PACKET << 3) | 2) as u8;
            packet[1] = (at - 2) as u8;
            seq.last_ns = Some(ns);
            self.buf.extend_from_slice(&packet[..at]);
            if self.buf.len() >= BLOCK {
                self.out.write_all(&self.buf)?;
                self.buf.clear();
            }
            return Ok(());
        }
        self.packet.clear();
        if !self.delta {
            varint_field(&mut self.event, EVENT_TRACK_UUID, seq.track);
            varint_field(&mut self.packet, PACKET_TIMESTAMP, ns);
        } else if ns >= last {
            varint_field(&mut self.packet, PACKET_TIMESTAMP, ns - last);
            seq.last_ns = Some(ns);
        } else {
            // Earlier than the sequence's last packet (only a forged capture gets here): an
            // absolute time, which leaves the incremental clock where it was.
            varint_field(&mut self.packet, PACKET_TIMESTAMP, ns);
            varint_field(&mut self.packet, PACKET_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME);
        }
        bytes_field(&mut self.packet, PACKET_TRACK_EVENT, &self.event);
        if !self.interned.is_empty() {
            bytes_field(&mut self.packet, PACKET_INTERNED_DATA, &self.interned);
        }
        varint_field(&mut self.packet, PACKET_SEQUENCE_ID, u64::from(seq.id));
        varint_field(
            &mut self.packet,
            PACKET_SEQUENCE_FLAGS,
            SEQ_NEEDS_INCREMENTAL_STATE,
        );
        self.emit()
    }

    /// The first packet of `seq`: clears its incremental state, sets its defaults (its track,
    /// the incremental clock) and ties that clock to `BOOTTIME` at `ns`.
    fn start_sequence(&mut self, seq: &mut Sequence, ns: u64) -> io::Result<()> {
        let mut packet = Vec::new();
        varint_field(&mut packet, PACKET_TIMESTAMP, ns);
        varint_field(&mut packet, PACKET_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME);
        varint_field(&mut packet, PACKET_SEQUENCE_ID, u64::from(seq.id));
        varint_field(
            &mut packet,
            PACKET_SEQUENCE_FLAGS,
            SEQ_INCREMENTAL_STATE_CLEARED,
        );
        // A sequence is started once, before its first event's packet (whose names are
        // already marked interned: they go in that packet).
        seq.last_ns = Some(ns);
        if !self.delta {
            self.packet = packet;
            return self.emit();
        }
        let mut track_defaults = Vec::new();
        varint_field(&mut track_defaults, EVENT_TRACK_UUID, seq.track);
        let mut defaults = Vec::new();
        varint_field(&mut defaults, 58, CLOCK_INCREMENTAL);
        bytes_field(&mut defaults, 11, &track_defaults);
        bytes_field(&mut packet, PACKET_DEFAULTS, &defaults);
        let mut snapshot = Vec::new();
        let mut clock = Vec::new();
        varint_field(&mut clock, 1, CLOCK_BOOTTIME);
        varint_field(&mut clock, 2, ns);
        bytes_field(&mut snapshot, 1, &clock);
        clock.clear();
        varint_field(&mut clock, 1, CLOCK_INCREMENTAL);
        varint_field(&mut clock, 2, ns);
        varint_field(&mut clock, 3, 1);
        bytes_field(&mut snapshot, 1, &clock);
        bytes_field(&mut packet, PACKET_CLOCK_SNAPSHOT, &snapshot);
        self.packet = packet;
        self.emit()
    }

    /// Appends `self.packet` as a `Trace.packet` and writes out a full block.
    fn emit(&mut self) -> io::Result<()> {
        let len = self.packet.len();
        if len < 0x80 {
            self.buf
                .extend_from_slice(&[((TRACE_PACKET << 3) | 2) as u8, len as u8]);
            self.buf.extend_from_slice(&self.packet);
        } else {
            bytes_field(&mut self.buf, TRACE_PACKET, &self.packet);
        }
        if self.buf.len() >= BLOCK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes out what is buffered.
    fn finish(mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

/// Writes `value` as a varint at `packet[*at..]`, moving `at` past it.
fn put_varint(packet: &mut [u8], at: &mut usize, mut value: u64) {
    while value >= 0x80 {
        packet[*at] = (value as u8) | 0x80;
        value >>= 7;
        *at += 1;
    }
    packet[*at] = value as u8;
    *at += 1;
}

/// Whether `iid` is marked in `set`, marking it.
fn known(set: &mut Vec<bool>, iid: u64) -> bool {
    let i = iid as usize;
    if i >= set.len() {
        set.resize(i + 1, false);
    }
    std::mem::replace(&mut set[i], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protobuf message as (field, wire value) pairs: varints and fixed64s as numbers,
    /// length-delimited fields as bytes.
    #[derive(Debug, Clone, PartialEq)]
    enum Wire {
        Int(u64),
        Bytes(Vec<u8>),
    }

    fn read_varint(bytes: &[u8], at: &mut usize) -> u64 {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let b = bytes[*at];
            *at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return value;
            }
            shift += 7;
        }
    }

    fn fields(bytes: &[u8]) -> Vec<(u32, Wire)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let key = read_varint(bytes, &mut at);
            let field = (key >> 3) as u32;
            let wire = match key & 7 {
                0 => Wire::Int(read_varint(bytes, &mut at)),
                1 => {
                    let v = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
                    at += 8;
                    Wire::Int(v)
                }
                2 => {
                    let len = read_varint(bytes, &mut at) as usize;
                    at += len;
                    Wire::Bytes(bytes[at - len..at].to_vec())
                }
                other => panic!("wire type {other}"),
            };
            out.push((field, wire));
        }
        out
    }

    fn get(message: &[(u32, Wire)], field: u32) -> Option<&Wire> {
        message.iter().find(|(f, _)| *f == field).map(|(_, w)| w)
    }

    fn int(message: &[(u32, Wire)], field: u32) -> Option<u64> {
        match get(message, field)? {
            Wire::Int(v) => Some(*v),
            Wire::Bytes(_) => panic!("field {field} is bytes"),
        }
    }

    fn sub(message: &[(u32, Wire)], field: u32) -> Vec<(u32, Wire)> {
        match get(message, field) {
            Some(Wire::Bytes(b)) => fields(b),
            other => panic!("field {field}: {other:?}"),
        }
    }

    /// The packets of a trace.
    fn packets(bytes: &[u8]) -> Vec<Vec<(u32, Wire)>> {
        fields(bytes)
            .into_iter()
            .map(|(field, wire)| {
                assert_eq!(field, TRACE_PACKET);
                match wire {
                    Wire::Bytes(b) => fields(&b),
                    Wire::Int(_) => panic!("a packet is a message"),
                }
            })
            .collect()
    }

    /// A decoded message: its fields in order.
    type Fields = Vec<(u32, Wire)>;

    /// Track events of `bytes` replayed on their sequence's incremental clock:
    /// (absolute time, track, event fields).
    fn replay(bytes: &[u8]) -> Vec<(u64, u64, Fields)> {
        let mut clocks: HashMap<u64, (u64, u64)> = HashMap::new();
        let mut out = Vec::new();
        for p in packets(bytes) {
            let seq = int(&p, PACKET_SEQUENCE_ID).unwrap();
            if int(&p, PACKET_SEQUENCE_FLAGS) == Some(SEQ_INCREMENTAL_STATE_CLEARED) {
                let defaults = sub(&p, PACKET_DEFAULTS);
                let track = int(&sub(&defaults, 11), EVENT_TRACK_UUID).unwrap();
                clocks.insert(seq, (int(&p, PACKET_TIMESTAMP).unwrap(), track));
                continue;
            }
            if get(&p, PACKET_TRACK_EVENT).is_none() {
                continue;
            }
            assert_eq!(
                int(&p, PACKET_SEQUENCE_FLAGS),
                Some(SEQ_NEEDS_INCREMENTAL_STATE)
            );
            let (last, track) = clocks.get_mut(&seq).expect("sequence started");
            *last += int(&p, PACKET_TIMESTAMP).unwrap();
            out.push((*last, *track, sub(&p, PACKET_TRACK_EVENT)));
        }
        out
    }

    use std::collections::HashMap;

    #[test]
    fn counter_tracks_and_instants_from_plain_data() {
        // Unix-epoch magnitudes, odd nanoseconds: a double would round these.
        let t0 = 1_763_900_000_123_456_789u64;
        let mut bytes = Vec::new();
        let mut w = Writer::new(&mut bytes, true);
        let process = w.process_track(42, "server").unwrap();
        let thread = w.thread_track(process, 42, 7, "worker").unwrap();
        let depth = w
            .counter_track(
                process,
                "queue_depth",
                Unit::Unspecified,
                &[
                    (t0, CounterValue::Int(3)),
                    (t0 + 1, CounterValue::Int(-2)),
                    (t0 + 1000, CounterValue::Float(2.5)),
                ],
            )
            .unwrap();
        let args = [("key", Value::U64(9)), ("hit", Value::Bool(false))];
        w.instants(
            thread,
            &[
                Instant {
                    name: "cache_miss",
                    ns: t0 + 5,
                    args: &args,
                },
                Instant {
                    name: "cache_miss",
                    ns: t0 + 5,
                    args: &[],
                },
            ],
        )
        .unwrap();
        w.finish().unwrap();

        // The counter track's descriptor: a counter under the process.
        let descriptors: Vec<Vec<(u32, Wire)>> = packets(&bytes)
            .iter()
            .filter(|p| get(p, PACKET_TRACK_DESCRIPTOR).is_some())
            .map(|p| sub(p, PACKET_TRACK_DESCRIPTOR))
            .collect();
        assert_eq!(descriptors.len(), 3);
        let counter = &descriptors[2];
        assert_eq!(int(counter, 1), Some(depth));
        assert_eq!(int(counter, 5), Some(process));
        assert_eq!(get(counter, 2), Some(&Wire::Bytes(b"queue_depth".to_vec())));
        assert!(get(counter, 8).is_some());

        let events = replay(&bytes);
        assert_eq!(events.len(), 5);
        let samples: Vec<(u64, u64, Option<u64>, Option<u64>)> = events[..3]
            .iter()
            .map(|(ts, track, e)| {
                assert_eq!(int(e, EVENT_TYPE), Some(TYPE_COUNTER));
                (
                    *ts,
                    *track,
                    int(e, EVENT_COUNTER_VALUE),
                    int(e, EVENT_DOUBLE_COUNTER_VALUE),
                )
            })
            .collect();
        assert_eq!(
            samples,
            [
                (t0, depth, Some(3), None),
                (t0 + 1, depth, Some(-2i64 as u64), None),
                (t0 + 1000, depth, None, Some(2.5f64.to_bits())),
            ]
        );
        // The instants: on the thread's track, the name interned once on their sequence.
        for (ts, track, e) in &events[3..] {
            assert_eq!((*ts, *track), (t0 + 5, thread));
            assert_eq!(int(e, EVENT_TYPE), Some(TYPE_INSTANT));
            assert_eq!(int(e, EVENT_NAME_IID), Some(1));
        }
        let annotations: Vec<Vec<(u32, Wire)>> = events[3]
            .2
            .iter()
            .filter(|(f, _)| *f == EVENT_DEBUG_ANNOTATIONS)
            .map(|(_, w)| match w {
                Wire::Bytes(b) => fields(b),
                Wire::Int(_) => panic!(),
            })
            .collect();
        assert_eq!(
            annotations,
            [
                vec![(1, Wire::Int(1)), (3, Wire::Int(9))],
                vec![(1, Wire::Int(2)), (2, Wire::Int(0))],
            ]
        );
        assert!(get(&events[4].2, EVENT_DEBUG_ANNOTATIONS).is_none());
        let interned: Vec<Vec<(u32, Wire)>> = packets(&bytes)
            .iter()
            .filter(|p| get(p, PACKET_INTERNED_DATA).is_some())
            .map(|p| sub(p, PACKET_INTERNED_DATA))
            .collect();
        assert_eq!(
            interned.len(),
            1,
            "interned once, in the first instant's packet: {interned:?}"
        );
        assert_eq!(
            fields(match get(&interned[0], INTERNED_NAMES).unwrap() {
                Wire::Bytes(b) => b,
                Wire::Int(_) => panic!(),
            }),
            [(1, Wire::Int(1)), (2, Wire::Bytes(b"cache_miss".to_vec()))]
        );
    }

    #[test]
    fn an_earlier_time_is_written_absolute() {
        let mut bytes = Vec::new();
        let mut w = Writer::new(&mut bytes, true);
        let process = w.process_track(1, "p").unwrap();
        w.counter_track(
            process,
            "c",
            Unit::Bytes,
            &[(100, CounterValue::Int(1)), (50, CounterValue::Int(2))],
        )
        .unwrap();
        w.finish().unwrap();
        let last = packets(&bytes).pop().unwrap();
        assert_eq!(int(&last, PACKET_TIMESTAMP), Some(50));
        assert_eq!(int(&last, PACKET_TIMESTAMP_CLOCK_ID), Some(CLOCK_BOOTTIME));
    }

    /// The bytes of `trace` as `write_with` writes them with `delta`, and as the general
    /// path alone writes them (without [`Writer::short_packet`]).
    fn both_ways(trace: &Trace, delta: bool) -> (Vec<u8>, Vec<u8>) {
        let mut fast = Vec::new();
        write_with(trace, &mut fast, Options::new().delta_times(delta)).unwrap();
        let mut general = Vec::new();
        let mut w = Writer::new(&mut general, delta);
        w.shortcuts = false;
        w.trace(trace).unwrap();
        w.finish().unwrap();
        (fast, general)
    }

    /// A trace of every kind of span edge the writer meets: four threads of random nesting with
    /// deltas from 0 to 2^40 ns, more than 128 names (two-byte iids), names shared by two
    /// callsites, arguments of each type, polls, links, scopes outliving their parents (extra
    /// lanes), a scope starting before its parent (an absolute time), a thread with neither
    /// arguments nor flows, a counter and instants.
    fn rich_trace() -> Trace {
        use crate::trace::{CounterOp, CounterSample, CounterTrack, Flow, ThreadTrace};

        static TICK: Callsite = Callsite::new("tick", "f.rs", 1, "m");
        let mut trace = Trace::empty();
        trace.start_ns = 1_763_900_000_123_456_789;
        let samples = (0..3)
            .map(|i| CounterSample {
                ns: trace.start_ns + i * 1000,
                thread: 1,
                op: CounterOp::Set,
                amount: Number::Int(i as i64),
                value: Number::Int(i as i64),
            })
            .collect();
        trace.counters.push(CounterTrack {
            name: "depth",
            process: 0,
            samples,
        });
        for i in 0..3 {
            trace.instants.push(crate::trace::Instant {
                callsite: &TICK,
                ns: trace.start_ns + i * 1000,
                process: 0,
                thread: 1,
                scope: InstantScope::Thread,
                args: vec![("n", Value::U64(i))],
            });
        }
        // 200 names, the first 10 on two callsites each.
        let sites: Vec<&'static Callsite> = (0..210)
            .map(|n| {
                let name: &'static str = Box::leak(format!("name{}", n % 200).into_boxed_str());
                &*Box::leak(Box::new(Callsite::new(name, "f.rs", n, "m")))
            })
            .collect();
        let mut random = crate::record::test_random(0x2545_f491_4f6c_dd1d);
        for t in 0..4u32 {
            let mut spans: Vec<Span> = Vec::new();
            let mut args = Vec::new();
            let mut open: Vec<u32> = Vec::new();
            let mut ns = trace.start_ns;
            while spans.len() < 3000 || !open.is_empty() {
                ns += match random(4) {
                    0 => 0,
                    1 => random(100),
                    2 => random(100_000),
                    _ => random(1 << 40),
                };
                if spans.len() < 3000 && (open.is_empty() || random(2) == 0) {
                    let index = spans.len() as u32;
                    let kind = match random(10) {
                        0 => SpanKind::Poll { async_span: None },
                        _ => SpanKind::Scope,
                    };
                    spans.push(Span {
                        callsite: sites[random(sites.len() as u64) as usize],
                        start_ns: ns,
                        end_ns: ns,
                        depth: open.len() as u32,
                        parent: open.last().copied(),
                        children_ns: 0,
                        overhead_ns: 0,
                        open_at_stop: false,
                        cut_at_start: false,
                        kind,
                    });
                    // The last thread: no arguments (nor flows).
                    if t < 3 && random(8) == 0 {
                        let value = match random(5) {
                            0 => Value::I64(-(random(1000) as i64)),
                            1 => Value::U64(random(u64::MAX)),
                            2 => Value::F64(0.25),
                            3 => Value::Bool(random(2) == 0),
                            _ => Value::Str("text".into()),
                        };
                        args.push(SpanArg {
                            span: index,
                            key: "k",
                            value: value.clone(),
                        });
                        args.push(SpanArg {
                            span: index,
                            key: "k2",
                            value,
                        });
                    }
                    open.push(index);
                } else if let Some(top) = open.pop() {
                    spans[top as usize].end_ns = ns;
                }
            }
            if t == 1 {
                // Scopes outliving their parents: their parents end first.
                for i in (50..3000).step_by(97) {
                    if let Some(p) = spans[i].parent {
                        spans[i].end_ns = spans[p as usize].end_ns + 1 + random(1000);
                    }
                }
            }
            if t == 2 {
                // A scope that starts before the packet before it.
                let i = (1..3000).find(|&i| spans[i].parent.is_some()).unwrap();
                spans[i].start_ns -= 1000;
            }
            trace.threads.push(ThreadTrace {
                process: 0,
                id: 100 + u64::from(t),
                name: Some(format!("gen{t}")),
                spans,
                memory: Vec::new(),
                args,
            });
        }
        let first = trace.threads.len() as u32 - 4;
        for k in 0..40 {
            let thread = first + (k % 3);
            trace.flows.push(Flow {
                seq: k,
                origin_thread: 1,
                origin: (k % 5 != 0).then_some(SpanRef {
                    thread,
                    span: k * 7,
                }),
                origin_ns: None,
                follower: SpanRef {
                    thread: first + ((k + 1) % 3),
                    span: k * 11 + 1,
                },
            });
        }
        trace
    }

    #[test]
    fn short_packets_are_the_general_paths_bytes() {
        let trace = rich_trace();
        assert!(trace.counters.len() == 1 && trace.instants.len() == 3);
        assert!(Lanes::assign(&trace.threads[1].spans).count() > 1);
        let scopes: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
        for delta in [true, false] {
            let (fast, general) = both_ways(&trace, delta);
            assert_eq!(fast.len(), general.len(), "delta {delta}");
            assert!(fast == general, "delta {delta}: the bytes differ");
            // Every span's begin and end, and the sequences' first packets.
            let events = packets(&fast)
                .iter()
                .filter(|p| get(p, PACKET_TRACK_EVENT).is_some())
                .count();
            assert_eq!(events, 2 * scopes + 3 + 3, "delta {delta}");
        }
    }
}
