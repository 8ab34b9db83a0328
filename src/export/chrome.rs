//! Chrome Trace Event JSON, for ui.perfetto.dev and chrome://tracing.
//!
//! Each scope is one complete event (`"ph":"X"`; a poll of an async call has `"cat":"poll"`);
//! threads get `thread_name` and `thread_sort_index` metadata, the process a `process_name`.
//! Each `#[profile] async fn` call is a nestable async span (`"ph":"b"` / `"e"`, category
//! `async`, one id per call) from its first poll to its end, which viewers show on an async
//! track of its own.
//!
//! A scope that followed from a [`Link`](crate::Link) gets a flow arrow (`"ph":"s"` at the
//! capture, inside the originating slice; `"ph":"f"` with `"bp":"e"` at the follower's start,
//! inside it), and both slices carry PyTorch's args: `Sequence number`, and on the follower
//! `Fwd thread id`, the thread that captured the link. Each flow event is written on the
//! track of its slice. ui.perfetto.dev binds every arrow (all 48 of `examples/links.rs`). The
//! legacy chrome://tracing viewer (catapult) nests slices and binds flow events at 1 µs
//! precision, so a flow event in a scope shorter than a microsecond that sits next to another
//! one binds to no slice there and its arrow is not drawn (7 of those 48 arrows are drawn);
//! open traces with short linked scopes in ui.perfetto.dev.
//!
//! When the session tracked memory, a process-wide counter (`"ph":"C"`, name `memory`, series
//! `live_bytes`) follows the bytes allocated in the window and not yet freed, and with
//! [`Options::allocation_instants`] each allocation and free is also an instant (`"ph":"i"`,
//! category `memory`) on its thread with its size, address and scope in `args`. The Kineto
//! flavour leaves memory out.
//!
//! Timestamps are microseconds with three decimals (nanosecond precision; the Kineto dialect
//! writes whole microseconds, see below). By default they count from the session start, whose
//! Unix time is in `otherData.start_unix_ns`: viewers read `ts` as a double, and small values
//! keep every nanosecond. [`TimeOrigin::UnixEpoch`] writes absolute times instead, to merge
//! traces of several processes; a double then resolves only about 0.25 µs at today's epoch,
//! so viewers round sub-µs detail, and scopes are written as `B`/`E` pairs so that nesting
//! survives the rounding.
//!
//! # Scopes dropped out of order
//!
//! A scope whose guard outlives its parent's (open `a`, open `b`, drop `a`, drop `b`) keeps
//! its own duration, as in the report, so its slice reaches past its parent's end and cannot
//! nest on its thread's track: Perfetto drops such a complete event
//! (`slice_drop_overlapping_complete_event`) and `B`/`E` pairs would close the wrong slice.
//! Such scopes, and only scopes that cannot nest where they are, go to extra tracks of their
//! thread: each scope, in entry order, takes the lowest track where it nests inside the
//! slices still open there, or where those have all ended (track 0 is the thread's own).
//! Track `k > 0` is written as a thread of its own, named `"<thread name> (overlapping
//! scopes k)"` and sorted right after its thread; its `tid` is numbered after the largest
//! thread id in the trace, in order of threads and tracks, so it never clashes with a real
//! thread (tickscope's thread ids are small counters). A thread whose guards were all dropped
//! in order has its own track only. The Kineto dialect uses the same tracks, so
//! HolisticTraceAnalysis builds one call stack per track.
//!
//! # Kineto times
//!
//! HolisticTraceAnalysis (HTA, 0.5.0) reads `ts` and `dur` as doubles and, when they are not
//! whole microseconds (Kineto's nanosecond-precision traces), rounds each start up and each
//! end down (`round_down_time_stamps`), so a scope that lies within one microsecond gets a
//! duration of −1 and building its call graph fails (`ValueError: Unexpected case`). It
//! honours neither `displayTimeUnit` nor any nanosecond field, and rebuilds each track's call
//! stack from those rounded times alone. So the Kineto dialect writes whole microseconds, as
//! Kineto did before it moved to nanoseconds (pytorch/pytorch#122425, which HTA's rounding
//! cites), with three decimals all the same so that HTA keeps them as doubles as it does
//! Kineto's (it downcasts integer columns to the smallest integer type), and HTA's rounding
//! leaves them as they are:
//!
//! - Each start and end goes to its nearest microsecond, in order along its track, so
//!   children stay inside their parents, siblings in order, and no duration is negative.
//! - HTA orders the ends that fall on one microsecond by kind and length: a scope that closes
//!   there before one that opens, a zero-length one after those that open and before those
//!   that close. When one microsecond holds all three, that order has no solution and HTA's
//!   call stack pops the wrong scopes (or its sort check fails). Then zero-length scopes at
//!   the very start or end of that microsecond go to the one before or after (if no scope
//!   closes and another opens there); otherwise the scopes that open there, with what lies
//!   inside them on that microsecond, start one microsecond later.
//!
//! HTA then rebuilds the parent of every op that lasts a microsecond or more, and its call
//! graph holds every scope once, by name as in the report. Zero-length ops it nests into the
//! op that opens or closes on their microsecond, or into one another.
//!
//! The cost in precision: each time lies within 0.5 µs of the truth, or 1.5 µs where it moved,
//! and nothing drifts. A scope shorter than a microsecond lasts 0 or 1 µs (1 when it spans the
//! middle of a microsecond, so lengths stay right on average), and the scopes that open on a
//! crowded microsecond lose one, which adds up where many tiny scopes run back to back: the
//! 1684 recursive `fib` scopes of the `chrome_trace` example, dozens per microsecond, add up
//! to 7% (debug build, about 150 ns each) to 35% (release build, about 20 ns each) less in
//! the Kineto dialect than they last. Any scope keeps its length to within 1 µs, 2 µs where
//! it moved. The plain Chrome dialect keeps every nanosecond.

use rustc_hash::FxHashMap;
use std::io::{self, Write};

use super::json_str;
use super::lanes::{Edge, Lanes};
use crate::record::callsite::Callsite;
use crate::trace::{
    AsyncSpan, MemoryKind, MemoryTrace, Span, SpanArg, SpanKind, SpanRef, Trace, Value,
};

const BLOCK: usize = 64 * 1024;

/// Where `ts` counts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeOrigin {
    /// The session start (its Unix time is in `otherData.start_unix_ns`): nanosecond
    /// precision in every viewer.
    #[default]
    SessionStart,
    /// The Unix epoch: traces of several processes line up, but viewers that read `ts` as a
    /// double round it to about 0.25 µs, so scopes shorter than that show as zero-length.
    /// Scopes are written as `B`/`E` pairs, whose order states the nesting that rounded
    /// times no longer can.
    UnixEpoch,
}

/// Which dialect of the format to write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flavor {
    /// Chrome trace events as ui.perfetto.dev and chrome://tracing read them.
    #[default]
    Chrome,
    /// What the PyTorch profiler (Kineto) writes, for HolisticTraceAnalysis and the PyTorch
    /// TensorBoard plugin: `"cat":"cpu_op"` complete events with the ids PyTorch puts in
    /// `args` (`External id`, `Ev Idx`, `Record function id`), `schemaVersion`,
    /// `distributedInfo` with a rank, and Kineto's absolute time base: `ts` counts from
    /// `baseTimeNanoseconds`, the session start in Unix-epoch nanoseconds, so traces of
    /// several ranks line up. Times are whole microseconds, each within 0.5 µs of the truth
    /// (1.5 µs where HTA needs a scope moved), chosen so that HolisticTraceAnalysis's rounding
    /// keeps every scope in its parent and its call stacks right; scopes shorter than a
    /// microsecond mostly last 0 µs there (see [Kineto times](self#kineto-times)). Scopes
    /// dropped out of order go to extra tracks as in the Chrome flavour. Async calls appear
    /// only as their poll slices: the format has no async spans.
    Kineto {
        /// This process's rank in a distributed job (0 for a single process).
        rank: u32,
        /// The number of ranks.
        world_size: u32,
    },
}

/// Options for [`write_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Where timestamps count from; [`Flavor::Kineto`] ignores it and always writes Kineto's
    /// `baseTimeNanoseconds` plus relative `ts`.
    pub time_origin: TimeOrigin,
    /// Plain Chrome JSON or the Kineto dialect.
    pub flavor: Flavor,
    /// Writes each allocation and free as an instant on its thread (the `memory` counter is
    /// written whenever the trace has memory data).
    pub allocation_instants: bool,
}

impl Options {
    /// The defaults: Chrome flavour, times from the session start.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets where timestamps count from.
    pub fn time_origin(mut self, origin: TimeOrigin) -> Self {
        self.time_origin = origin;
        self
    }

    /// Writes each allocation and free as an instant event too.
    pub fn allocation_instants(mut self, on: bool) -> Self {
        self.allocation_instants = on;
        self
    }

    /// Writes the Kineto dialect as rank `rank` of `world_size`.
    pub fn kineto(mut self, rank: u32, world_size: u32) -> Self {
        self.flavor = Flavor::Kineto { rank, world_size };
        self
    }
}

/// Appends `v` in decimal.
fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Appends nanoseconds as microseconds with exactly three decimals.
fn push_micros(buf: &mut Vec<u8>, ns: u64) {
    push_u64(buf, ns / 1000);
    let frac = ns % 1000;
    buf.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

/// Streams `trace` as Chrome JSON with the default [`Options`].
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    write_with(trace, out, &Options::default())
}

/// Streams `trace` as Chrome JSON into `out`. Memory use does not depend on the trace size,
/// except for a few words per span of one thread at a time in the Kineto dialect and on a
/// thread whose scopes were dropped out of order (see the [module docs](self)).
pub fn write_with(trace: &Trace, out: &mut impl Write, options: &Options) -> io::Result<()> {
    let mut w = Writer {
        out,
        buf: Vec::with_capacity(BLOCK + 512),
        names: FxHashMap::default(),
        pid: std::process::id(),
        origin: match (options.flavor, options.time_origin) {
            (Flavor::Chrome, TimeOrigin::UnixEpoch) => 0,
            (Flavor::Kineto { .. }, _) | (Flavor::Chrome, TimeOrigin::SessionStart) => {
                trace.start_ns
            }
        },
        kineto: matches!(options.flavor, Flavor::Kineto { .. }),
        begin_end: options.flavor == Flavor::Chrome && options.time_origin == TimeOrigin::UnixEpoch,
        events: 0,
        link_args: link_args(trace),
    };
    w.header(trace, options)?;
    // Tracks for the lanes of overlapping scopes are numbered after the largest thread id.
    let mut next_tid = trace
        .threads
        .iter()
        .map(|t| t.id)
        .max()
        .unwrap_or(0)
        .saturating_add(1);
    let mut sort_index = 0;
    // Where the slices that took part in a link went: track and times as written.
    let mut flow_slices: FxHashMap<SpanRef, Slice> = FxHashMap::default();
    for (index, thread) in trace.threads.iter().enumerate() {
        let spans = &thread.spans;
        let lanes = Lanes::assign(spans);
        let name = thread.display_name();
        let mut tids = vec![thread.id];
        w.thread_metadata(thread.id, &name, sort_index)?;
        sort_index += 1;
        for lane in 1..lanes.count() {
            let tid = next_tid;
            next_tid = next_tid.saturating_add(1);
            w.thread_metadata(
                tid,
                &format!("{name} (overlapping scopes {lane})"),
                sort_index,
            )?;
            sort_index += 1;
            tids.push(tid);
        }
        let heads: Vec<String> = tids
            .iter()
            .map(|tid| format!(",\"pid\":{},\"tid\":{tid},\"ts\":", w.pid))
            .collect();
        let at = |span: u32| SpanRef {
            thread: index as u32,
            span,
        };
        // Kineto: times on whole microseconds, chosen so that HolisticTraceAnalysis rebuilds
        // the call stacks (see the module docs).
        let grid = w.kineto.then(|| microsecond_grid(spans, &lanes, w.origin));
        let times = |i: u32| match &grid {
            Some(grid) => grid[i as usize],
            None => (spans[i as usize].start_ns, spans[i as usize].end_ns),
        };
        if !w.link_args.is_empty() {
            for i in 0..spans.len() as u32 {
                if w.link_args.contains_key(&at(i)) {
                    let (start_ns, end_ns) = times(i);
                    let tid = tids[lanes.lane(i) as usize];
                    flow_slices.insert(
                        at(i),
                        Slice {
                            tid,
                            start_ns,
                            end_ns,
                        },
                    );
                }
            }
        }
        if w.begin_end {
            // Absolute times: viewers read `ts` as a double, which resolves only 0.25 µs
            // at today's epoch, so nesting inferred from `ts` and `dur` would break (a child
            // seeming to outlast its parent is dropped). `B`/`E` pairs, in order, state it,
            // each lane's on its own track.
            let mut result = Ok(());
            lanes.walk(spans, |edge| {
                if result.is_err() {
                    return;
                }
                let (i, begin) = match edge {
                    Edge::Begin(i) => (i, true),
                    Edge::End(i) => (i, false),
                };
                let span = &spans[i as usize];
                let head = &heads[lanes.lane(i) as usize];
                if begin {
                    w.edge(span, head, span.start_ns, Some((at(i), thread.args_of(i))));
                } else {
                    w.edge(span, head, span.end_ns, None);
                }
                result = w.spill();
            });
            result?;
            continue;
        }
        for i in 0..spans.len() as u32 {
            let span = &spans[i as usize];
            let (start_ns, end_ns) = times(i);
            let head = &heads[lanes.lane(i) as usize];
            w.complete(span, head, start_ns, end_ns, at(i), thread.args_of(i));
            w.spill()?;
        }
    }
    w.flows(trace, &flow_slices)?;
    if !w.kineto {
        for (id, call) in trace.async_spans.iter().enumerate() {
            w.async_span(id, call)?;
        }
        if let Some(memory) = &trace.memory {
            w.memory(trace.start_ns, memory, options.allocation_instants)?;
        }
    }
    w.finish(trace)
}

/// Where a slice that took part in a link was written.
#[derive(Clone, Copy)]
struct Slice {
    tid: u64,
    start_ns: u64,
    end_ns: u64,
}

/// `ns` on the whole microsecond nearest to it, counting from `origin`.
fn nearest_micros(ns: u64, origin: u64) -> u64 {
    ns.saturating_sub(origin).saturating_add(500) / 1000
}

/// Start and end of each span of one thread on whole microseconds from `origin` (returned as
/// nanoseconds on that grid), for the Kineto dialect; see the module docs.
///
/// Each lane's begins and ends, in order, go to their nearest microsecond, raised where needed
/// so that they never go back: children stay inside their parents and siblings in order.
/// HolisticTraceAnalysis orders the ends that fall on one microsecond by kind and length: a
/// scope that closes there before one that opens, zero-length scopes after those that open and
/// before those that close. When all three meet on one microsecond that order has no solution
/// and its call stack pops the wrong scopes, so one of them leaves it: zero-length scopes at
/// its very start go to the microsecond before, those at its very end to the one after, when no
/// scope closes and another opens there; otherwise the scopes that open there (with what lies
/// inside them on that microsecond) move to the next one, a microsecond shorter. Nothing moves
/// twice, so every time lies within 1.5 µs of the truth, and within 0.5 µs unless it moved.
fn microsecond_grid(spans: &[Span], lanes: &Lanes, origin: u64) -> Vec<(u64, u64)> {
    let mut sequences: Vec<Vec<Edge>> = vec![Vec::new(); lanes.count() as usize];
    lanes.walk(spans, |edge| {
        let (Edge::Begin(i) | Edge::End(i)) = edge;
        sequences[lanes.lane(i) as usize].push(edge);
    });
    let mut grid = Grid {
        position: vec![[0; 2]; spans.len()],
        micros: Vec::new(),
    };
    let mut out = vec![(0, 0); spans.len()];
    for sequence in &sequences {
        grid.place(spans, sequence, origin);
        for (&edge, &us) in sequence.iter().zip(&grid.micros) {
            let ns = origin.saturating_add(us.saturating_mul(1000));
            match edge {
                Edge::Begin(i) => out[i as usize].0 = ns,
                Edge::End(i) => out[i as usize].1 = ns,
            }
        }
    }
    out
}

/// The state of [`microsecond_grid`] for one lane.
struct Grid {
    /// Per span: the positions of its begin and end in its lane's sequence.
    position: Vec<[usize; 2]>,
    /// Per edge of the sequence: its microsecond (the nearest one until it is placed).
    micros: Vec<u64>,
}

/// What an edge is on the microsecond `at..end` of a sequence.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// The end of a scope that began on an earlier microsecond.
    Closing,
    /// The begin of a scope that ends on a later microsecond.
    Opening,
    /// An end of a scope that begins and ends on this microsecond.
    Zero,
}

impl Grid {
    fn place(&mut self, spans: &[Span], sequence: &[Edge], origin: u64) {
        self.micros.clear();
        let mut last = 0;
        for (k, &edge) in sequence.iter().enumerate() {
            let ns = match edge {
                Edge::Begin(i) => {
                    self.position[i as usize][0] = k;
                    spans[i as usize].start_ns
                }
                Edge::End(i) => {
                    self.position[i as usize][1] = k;
                    spans[i as usize].end_ns
                }
            };
            last = nearest_micros(ns, origin).max(last);
            self.micros.push(last);
        }
        // Microsecond by microsecond: `sequence[at..end]` falls on `t`. `previous` is the last
        // microsecond placed and whether a scope closes and another opens on it.
        let (mut at, mut floor, mut previous) = (0, 0, None::<(u64, bool)>);
        while at < sequence.len() {
            let t = self.micros[at].max(floor);
            let mut end = at;
            while end < sequence.len() && self.micros[end].max(floor) == t {
                end += 1;
            }
            let mark = |k: usize| self.mark(sequence[k], at, end);
            let closing = (at..end).any(|k| mark(k) == Mark::Closing);
            let zero = (at..end).any(|k| mark(k) == Mark::Zero);
            let opening = (at..end).find(|&k| mark(k) == Mark::Opening);
            let Some(opening) = opening.filter(|&p| closing && zero && p > at) else {
                self.micros[at..end].fill(t);
                previous = Some((t, closing && opening.is_some()));
                (floor, at) = (t, end);
                continue;
            };
            // Zero-length scopes at either end of the microsecond, and none in between.
            let head = (at..end)
                .take_while(|&k| mark(k) == Mark::Zero)
                .fold((at, 0usize), |(head, open), k| {
                    let open = match sequence[k] {
                        Edge::Begin(_) => open + 1,
                        Edge::End(_) => open - 1,
                    };
                    (if open == 0 { k + 1 } else { head }, open)
                })
                .0;
            let tail = (at..end)
                .rev()
                .take_while(|&k| mark(k) == Mark::Zero)
                .fold((end, 0usize), |(tail, open), k| {
                    let open = match sequence[k] {
                        Edge::End(_) => open + 1,
                        Edge::Begin(_) => open - 1,
                    };
                    (if open == 0 { k } else { tail }, open)
                })
                .0;
            let inside = (head..tail).any(|k| mark(k) == Mark::Zero);
            let before = head == at
                || (t > 0 && previous.is_none_or(|(p, handover)| p + 1 < t || !handover));
            let after = tail == end || !self.handover(sequence, end, t + 1);
            if !inside && before && after {
                self.micros[at..head].fill(t - 1);
                self.micros[head..tail].fill(t);
                self.micros[tail..end].fill(t + 1);
                previous = Some((t, true));
                floor = if tail < end { t + 1 } else { t };
                at = end;
            } else {
                self.micros[at..opening].fill(t);
                previous = Some((t, false));
                (floor, at) = (t + 1, opening);
            }
        }
    }

    /// What `edge` is on the microsecond that holds `at..end` of its sequence.
    fn mark(&self, edge: Edge, at: usize, end: usize) -> Mark {
        match edge {
            Edge::End(i) if self.position[i as usize][0] < at => Mark::Closing,
            Edge::Begin(i) if self.position[i as usize][1] >= end => Mark::Opening,
            Edge::Begin(_) | Edge::End(_) => Mark::Zero,
        }
    }

    /// Whether, on microsecond `t`, whose edges (not placed yet) start at `from`, a scope
    /// closes and another opens.
    fn handover(&self, sequence: &[Edge], from: usize, t: u64) -> bool {
        let (mut closing, mut opening) = (false, false);
        for (k, &edge) in sequence.iter().enumerate().skip(from) {
            if self.micros[k] != t {
                break;
            }
            match edge {
                Edge::End(i) => closing |= self.position[i as usize][0] < from,
                Edge::Begin(i) => opening |= self.micros[self.position[i as usize][1]] > t,
            }
        }
        closing && opening
    }
}

struct Writer<'a, W: Write> {
    out: &'a mut W,
    /// Events are formatted here by hand (no `fmt` machinery) and flushed in 64 KiB blocks.
    buf: Vec<u8>,
    /// Each name escaped once per trace.
    names: FxHashMap<*const Callsite, Vec<u8>>,
    pid: u32,
    origin: u64,
    kineto: bool,
    /// Scopes as `B`/`E` pairs instead of `X` events.
    begin_end: bool,
    /// Complete events written, for Kineto's ids.
    events: u64,
    /// Args of the slices that took part in a link, rendered.
    link_args: FxHashMap<SpanRef, Vec<u8>>,
}

/// PyTorch's link args per slice: `"Sequence number":S` on an origin, plus
/// `"Fwd thread id":T` on a follower (whose own args win when a slice is both).
fn link_args(trace: &Trace) -> FxHashMap<SpanRef, Vec<u8>> {
    let mut args: FxHashMap<SpanRef, Vec<u8>> = FxHashMap::default();
    for link in &trace.links {
        let mut follower = b"\"Sequence number\":".to_vec();
        push_u64(&mut follower, u64::from(link.seq));
        if let Some(origin) = link.origin {
            args.entry(origin).or_insert_with(|| follower.clone());
        }
        follower.extend_from_slice(b",\"Fwd thread id\":");
        push_u64(&mut follower, link.origin_thread);
        args.insert(link.follower, follower);
    }
    args
}

impl<W: Write> Writer<'_, W> {
    fn header(&mut self, trace: &Trace, options: &Options) -> io::Result<()> {
        if let Flavor::Kineto { rank, world_size } = options.flavor {
            // Spaced as Kineto writes it: HolisticTraceAnalysis finds the rank with the regex
            // `"rank":\s+(\d+)`.
            write!(
                self.buf,
                "{{\"schemaVersion\":1,\"deviceProperties\":[],\"distributedInfo\": {{\"backend\": \"none\", \"rank\": {rank}, \"world_size\": {world_size}}},\"baseTimeNanoseconds\":{},\"displayTimeUnit\":\"ms\",\"traceName\":\"tickscope\",\"traceEvents\":[",
                self.origin
            )?;
            self.buf.push(b'\n');
        } else {
            self.buf.extend_from_slice(b"{\"traceEvents\":[\n");
        }
        let process = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "tickscope".to_owned());
        write!(
            self.buf,
            "{{\"ph\":\"M\",\"pid\":{},\"tid\":0,\"ts\":",
            self.pid
        )?;
        self.ts(trace.start_ns);
        self.buf
            .extend_from_slice(b",\"name\":\"process_name\",\"args\":{\"name\":");
        json_str(&mut self.buf, &process)?;
        self.buf.extend_from_slice(b"}}");
        Ok(())
    }

    fn thread_metadata(&mut self, tid: u64, name: &str, index: usize) -> io::Result<()> {
        let pid = self.pid;
        write!(
            self.buf,
            ",\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":"
        )?;
        json_str(&mut self.buf, name)?;
        write!(
            self.buf,
            "}}}},\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{index}}}}}"
        )
    }

    /// Appends `ns` as a timestamp relative to the origin.
    fn ts(&mut self, ns: u64) {
        push_micros(&mut self.buf, ns.saturating_sub(self.origin));
    }

    /// Appends the callsite's name as a JSON string, escaped once per trace.
    fn name(&mut self, callsite: &'static Callsite) {
        let name = self
            .names
            .entry(callsite as *const Callsite)
            .or_insert_with(|| {
                let mut name = Vec::new();
                json_str(&mut name, callsite.name()).expect("writing to a Vec cannot fail");
                name
            });
        self.buf.extend_from_slice(name);
    }

    /// The category and name of an event for `span`, after `"ph":"<ph>"`.
    fn cat_and_name(&mut self, span: &Span) {
        let poll = matches!(span.kind, SpanKind::Poll { .. });
        let cat: &[u8] = match (self.kineto, poll) {
            (true, _) => b"\",\"cat\":\"cpu_op\",\"name\":",
            (false, false) => b"\",\"cat\":\"scope\",\"name\":",
            (false, true) => b"\",\"cat\":\"poll\",\"name\":",
        };
        self.buf.extend_from_slice(cat);
        self.name(span.callsite);
    }

    /// A `B` event of the span at `begin`, or an `E` event, of `span` at `ns`; `head` is
    /// `,"pid":..,"tid":..,"ts":`.
    fn edge(&mut self, span: &Span, head: &str, ns: u64, begin: Option<(SpanRef, &[SpanArg])>) {
        self.buf.extend_from_slice(if begin.is_some() {
            b",\n{\"ph\":\"B"
        } else {
            b",\n{\"ph\":\"E"
        });
        self.cat_and_name(span);
        self.buf.extend_from_slice(head.as_bytes());
        self.ts(ns);
        if let Some((at, args)) = begin {
            self.args(at, args, span.open_at_stop, None);
        }
        self.buf.push(b'}');
    }

    /// `,"args":{..}` with Kineto's ids (`kineto_id`), the link args of the slice at `at`, the
    /// scope's own `args`, and `open_at_stop`; nothing when there are none.
    fn args(
        &mut self,
        at: SpanRef,
        args: &[SpanArg],
        open_at_stop: bool,
        kineto_id: Option<(u64, u32)>,
    ) {
        let link = if self.link_args.is_empty() {
            None
        } else {
            self.link_args.get(&at)
        };
        if link.is_none() && args.is_empty() && !open_at_stop && kineto_id.is_none() {
            return;
        }
        self.buf.extend_from_slice(b",\"args\":{");
        let mut first = true;
        let mut sep = |buf: &mut Vec<u8>| {
            if !std::mem::take(&mut first) {
                buf.push(b',');
            }
        };
        if let Some((event, callsite)) = kineto_id {
            sep(&mut self.buf);
            self.buf.extend_from_slice(b"\"External id\":");
            push_u64(&mut self.buf, event);
            self.buf.extend_from_slice(b",\"Ev Idx\":");
            push_u64(&mut self.buf, event - 1);
            self.buf.extend_from_slice(b",\"Record function id\":");
            push_u64(&mut self.buf, u64::from(callsite));
        }
        if let Some(link) = link {
            sep(&mut self.buf);
            self.buf.extend_from_slice(link);
        }
        for arg in args {
            sep(&mut self.buf);
            json_str(&mut self.buf, arg.key).expect("writing to a Vec cannot fail");
            self.buf.push(b':');
            match &arg.value {
                Value::I64(v) => self.buf.extend_from_slice(v.to_string().as_bytes()),
                Value::U64(v) => push_u64(&mut self.buf, *v),
                Value::F64(v) if v.is_finite() => {
                    self.buf.extend_from_slice(v.to_string().as_bytes());
                }
                Value::Bool(v) => self
                    .buf
                    .extend_from_slice(if *v { b"true" } else { b"false" }),
                Value::F64(_) | Value::Str(_) => {
                    json_str(&mut self.buf, &arg.value.to_string())
                        .expect("writing to a Vec cannot fail");
                }
            }
        }
        if open_at_stop {
            sep(&mut self.buf);
            self.buf.extend_from_slice(b"\"open_at_stop\":true");
        }
        self.buf.push(b'}');
    }

    /// A flow arrow per link whose capture is in the trace: `s` at the capture time on the
    /// originating slice, `f` (binding to the enclosing slice) at the follower's start, each
    /// on the track (`tid`) its slice was written on, at the times it was written with.
    fn flows(&mut self, trace: &Trace, slices: &FxHashMap<SpanRef, Slice>) -> io::Result<()> {
        let (cat, name): (&str, &str) = if self.kineto {
            ("fwdbwd", "fwdbwd")
        } else {
            ("link", "link")
        };
        for (id, link) in trace.links.iter().enumerate() {
            let (Some(origin), Some(origin_ns)) = (link.origin, link.origin_ns) else {
                continue;
            };
            let (Some(from), Some(to)) = (slices.get(&origin), slices.get(&link.follower)) else {
                continue;
            };
            let origin_ns = if self.kineto {
                self.origin + nearest_micros(origin_ns, self.origin) * 1000
            } else {
                origin_ns
            };
            let ends = [
                (
                    "s",
                    from.tid,
                    origin_ns.clamp(from.start_ns, from.end_ns.max(from.start_ns)),
                    "",
                ),
                ("f", to.tid, to.start_ns, ",\"bp\":\"e\""),
            ];
            for (ph, tid, ns, bp) in ends {
                write!(
                    self.buf,
                    ",\n{{\"ph\":\"{ph}\"{bp},\"cat\":\"{cat}\",\"name\":\"{name}\",\"id\":{},\"pid\":{},\"tid\":{tid},\"ts\":",
                    id + 1,
                    self.pid
                )?;
                self.ts(ns);
                self.buf.push(b'}');
            }
            self.spill()?;
        }
        Ok(())
    }

    /// One `X` event from `start_ns` to `end_ns` for the span at `at`; `head` is
    /// `,"pid":..,"tid":..,"ts":`.
    fn complete(
        &mut self,
        span: &Span,
        head: &str,
        start_ns: u64,
        end_ns: u64,
        at: SpanRef,
        args: &[SpanArg],
    ) {
        let (callsite, open_at_stop) = (span.callsite, span.open_at_stop);
        self.buf.extend_from_slice(b",\n{\"ph\":\"X");
        self.cat_and_name(span);
        self.buf.extend_from_slice(head.as_bytes());
        self.ts(start_ns);
        self.buf.extend_from_slice(b",\"dur\":");
        push_micros(&mut self.buf, end_ns.saturating_sub(start_ns));
        let kineto_id = self.kineto.then(|| {
            self.events += 1;
            (self.events, callsite.id())
        });
        self.args(at, args, open_at_stop, kineto_id);
        self.buf.push(b'}');
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
                self.pid,
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
                self.buf.push(b'}');
            }
            self.buf.push(b'}');
        }
        self.spill()
    }

    /// The `memory` counter (`live_bytes`) from `start_ns` on, and with `instants` one instant per event.
    fn memory(&mut self, start_ns: u64, memory: &MemoryTrace, instants: bool) -> io::Result<()> {
        let live = memory.live_bytes();
        let pid = self.pid;
        let counter = |w: &mut Self, ns: u64, bytes: u64| {
            write!(
                w.buf,
                ",\n{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":{pid},\"tid\":0,\"ts\":"
            )?;
            w.ts(ns);
            w.buf.extend_from_slice(b",\"args\":{\"live_bytes\":");
            push_u64(&mut w.buf, bytes);
            w.buf.extend_from_slice(b"}}");
            w.spill()
        };
        counter(self, start_ns, 0)?;
        for (i, (event, &bytes)) in memory.events.iter().zip(&live).enumerate() {
            // One sample per timestamp: the value after its last event.
            if memory
                .events
                .get(i + 1)
                .is_none_or(|next| next.ns != event.ns)
            {
                counter(self, event.ns, bytes)?;
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

    /// Writes the buffer out once it holds a block.
    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= BLOCK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(self, trace: &Trace) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        write!(
            self.out,
            "\n],\"otherData\":{{\"producer\":\"tickscope {}\",\"start_unix_ns\":{},\"end_unix_ns\":{},\"dropped_events\":{},\"time_origin_unix_ns\":{}}}}}\n",
            env!("CARGO_PKG_VERSION"),
            trace.start_ns,
            trace.end_ns,
            trace.dropped_events,
            self.origin,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::callsite::Callsite;

    static S: Callsite = Callsite::new("s", file!(), line!(), module_path!());

    /// A random thread: scopes opened and closed every 0 to ~3 µs, mostly much sooner; with
    /// `any_order`, a close may end any open scope rather than the innermost.
    fn random_spans(seed: u64, steps: usize, any_order: bool) -> Vec<Span> {
        let mut x = seed | 1;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let (mut spans, mut open, mut t): (Vec<Span>, Vec<u32>, u64) = (vec![], vec![], 0);
        for _ in 0..steps {
            t += match next(10) {
                0..=2 => 0,
                3..=7 => next(300),
                _ => next(3000),
            };
            if open.is_empty() || (open.len() < 12 && next(2) == 0) {
                open.push(spans.len() as u32);
                spans.push(Span {
                    callsite: &S,
                    start_ns: t,
                    end_ns: t,
                    depth: open.len() as u32 - 1,
                    parent: open.len().checked_sub(2).map(|i| open[i]),
                    children_ns: 0,
                    open_at_stop: false,
                    kind: SpanKind::Scope,
                });
            } else {
                let k = if any_order && next(4) == 0 {
                    next(open.len() as u64) as usize
                } else {
                    open.len() - 1
                };
                spans[open.remove(k) as usize].end_ns = t;
            }
        }
        for i in open {
            spans[i as usize].end_ns = t;
        }
        spans
    }

    /// The Kineto grid keeps each lane's nesting and sibling order, keeps every time within
    /// 1.5 µs, and leaves no microsecond on which a scope closes, another opens and a third
    /// has zero length (HolisticTraceAnalysis could not order them).
    #[test]
    fn microsecond_grid_nests_and_never_stumps_hta() {
        for seed in 1..200u64 {
            let spans = random_spans(seed * 0x9e37_79b9, 400, seed % 3 == 0);
            let lanes = Lanes::assign(&spans);
            let origin = 0;
            let grid = microsecond_grid(&spans, &lanes, origin);
            let mut previous: Vec<Option<u32>> = vec![None; lanes.count() as usize];
            let mut open: Vec<Vec<u32>> = vec![Vec::new(); lanes.count() as usize];
            let mut edges = Vec::new();
            lanes.walk(&spans, |e| edges.push(e));
            for edge in edges {
                let (Edge::Begin(i) | Edge::End(i)) = edge;
                let lane = lanes.lane(i) as usize;
                let (s, e) = grid[i as usize];
                let span = &spans[i as usize];
                assert!(s % 1000 == 0 && e % 1000 == 0 && s <= e, "seed {seed}: {i}");
                assert!(
                    s.abs_diff(span.start_ns) <= 1500 && e.abs_diff(span.end_ns) <= 1500,
                    "seed {seed}: {i} {span:?} on {:?}, lane {lane}",
                    (s, e)
                );
                match edge {
                    Edge::Begin(_) => {
                        if let Some(&p) = open[lane].last() {
                            let (ps, pe) = grid[p as usize];
                            assert!(ps <= s && e <= pe, "seed {seed}: {i} leaves {p}");
                        }
                        if let Some(prev) = previous[lane]
                            .filter(|&p| lanes.parent(&spans, p) == lanes.parent(&spans, i))
                        {
                            assert!(
                                grid[prev as usize].1 <= s,
                                "seed {seed}: {i} overlaps {prev}"
                            );
                        }
                        open[lane].push(i);
                    }
                    Edge::End(_) => {
                        open[lane].pop();
                        previous[lane] = Some(i);
                    }
                }
            }
            for lane in 0..lanes.count() {
                let on = |i: &usize| lanes.lane(*i as u32) == lane;
                let ids: Vec<usize> = (0..spans.len()).filter(on).collect();
                for &i in &ids {
                    for t in [grid[i].0, grid[i].1] {
                        let closes = ids.iter().any(|&j| grid[j].1 == t && grid[j].0 < t);
                        let opens = ids.iter().any(|&j| grid[j].0 == t && grid[j].1 > t);
                        let zero = ids.iter().any(|&j| grid[j] == (t, t));
                        assert!(
                            !(closes && opens && zero),
                            "seed {seed}: {t} ns, lane {lane}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn micros_have_three_decimals() {
        for (ns, text) in [
            (0, "0.000"),
            (7, "0.007"),
            (1_250, "1.250"),
            (u64::MAX, "18446744073709551.615"),
        ] {
            let mut buf = Vec::new();
            super::push_micros(&mut buf, ns);
            assert_eq!(String::from_utf8(buf).unwrap(), text);
        }
    }
}
