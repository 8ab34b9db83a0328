//! The PyTorch profiler's (Kineto's) dialect of the [Chrome](super::chrome) Trace Event
//! format, for HolisticTraceAnalysis and the PyTorch TensorBoard plugin.
//!
//! Scopes are `"cat":"cpu_op"` complete events with the ids PyTorch puts in `args`
//! (`External id`, `Ev Idx`, `Record function id`); the document has `schemaVersion`,
//! `distributedInfo` with a rank, and Kineto's absolute time base: `ts` counts from
//! `baseTimeNanoseconds`, the session start in Unix-epoch nanoseconds, so traces of several
//! ranks line up. Times keep their nanoseconds where HolisticTraceAnalysis's rounding and the
//! PyTorch TensorBoard plugin's operator tree both keep every scope under its parent; scopes
//! that lie inside one microsecond last no time on a whole one, and where many of them run
//! back to back the times run late (see [Kineto times](self#kineto-times)). Scopes dropped
//! out of order go to extra tracks as in the Chrome format. Links are flow arrows of category
//! `fwdbwd`. Async calls appear only as their poll slices (the format has no async spans), and
//! memory is left out.
//!
//! ```no_run
//! let prof = tickscope::Profiler::start();
//! prof.stop();
//! prof.write("rank0.json", &tickscope::export::kineto::Options::new(0, 1))?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Kineto times
//!
//! Two readers rebuild each track's call stack from the times alone, with rules that leave
//! little room inside one microsecond:
//!
//! - HolisticTraceAnalysis (HTA, 0.5.0) reads `ts` and `dur` as doubles and, when they are
//!   not whole microseconds (Kineto's nanosecond-precision traces), rounds each start up and
//!   each end down (`round_down_time_stamps`), so a scope that lies within one microsecond
//!   gets a duration of −1 and building its call graph fails (`ValueError: Unexpected case`).
//!   It honours neither `displayTimeUnit` nor any nanosecond field. Its call stack sorts the
//!   ends of one microsecond by kind and length: an op that closes there before one that
//!   opens, zero-length ops after those that open and before those that close (where all
//!   three meet the order has no solution and its sort check fails), zero-length ops among
//!   themselves as if each held the next.
//! - The PyTorch TensorBoard plugin (torch-tb-profiler 0.4.3) takes the times as written,
//!   sorts the ops of a track by start, longer first, else in file order, and nests an op in
//!   the innermost one on its stack only if that one ends after the op begins (a zero-length
//!   op holds nothing, and a child that begins as its parent ends goes to the grandparent).
//!   It then merges an op into its parent where it is the only child of the same name, so a
//!   recursive scope that it misplaces also disappears.
//!
//! So the Kineto dialect writes nanoseconds (three decimals of `ts` and `dur`) as Kineto does,
//! such that HTA's rounding leaves every op at least a whole microsecond of its own and both
//! readers build the stacks of the report. Each track's begins and ends keep their times, in
//! order, except that
//!
//! - each comes at least a nanosecond after the one before (no two edges of a track meet, but
//!   zero-length siblings on one microsecond);
//! - an end lies on a whole microsecond only where its begin does (both readers add `dur` to
//!   `ts` in doubles, which may land just below the whole microsecond meant);
//! - a scope without children that contains no whole microsecond lasts no time, on the whole
//!   microsecond nearest its middle, or the first one after the edge before it (HTA would
//!   read it as lasting −1 µs). A scope with children contains theirs.
//!
//! Then HTA rounds every op to at least zero length, no microsecond has one of its ops close
//! and another open (so its sort has a solution), and its call graph holds
//! every op once, by name as in the report, with the parent of every op that lasts a
//! microsecond or more after its rounding; zero-length ones it nests into the op that closes
//! on their microsecond, or into one another. The TensorBoard plugin holds every op under its
//! own parent, also after its merging.
//!
//! The cost in precision: a scope that contains a whole microsecond, and everything of a track
//! that does not follow such short scopes closely, keeps its nanoseconds; a zero-length op is
//! at most 0.5 µs early; each time is late by at most a microsecond per begin or end of its
//! track since the track was last on time, and catches up as soon as the track idles or runs
//! a scope longer than the delay. It cannot do with less: every op must contain a whole
//! microsecond for HTA, and two ops that follow one another cannot share one for the plugin
//! (but zero-length ones; ops that meet exactly on it would need `ts + dur` exact in doubles),
//! so a scope that calls `n` scopes with children in turn lasts at least `n` µs however fast
//! they ran. Where scopes run microseconds apart, as PyTorch's operators do, nothing moves;
//! where dozens run per microsecond they spread out: the 1684 recursive `fib` scopes of the
//! `chrome_trace` example run in about 22 µs (release build) and last 377 µs in the Kineto
//! dialect, within a microsecond of the least both readers allow (`fib(n)` contains the
//! `n`-th Fibonacci number of whole microseconds, 377 for `fib(14)`). The [Chrome](super::chrome) format keeps every
//! nanosecond as recorded: open that one for the times of such scopes, and in speedscope,
//! which reads an end before a begin of the same instant and so cannot nest zero-length ops
//! (963 of its stack repairs on the `chrome_trace` example's Kineto trace).

use std::io::{self, Write};

use super::Format;
use super::lanes::{Edge, Lanes};
use super::trace_event::{self, Dialect, Placed, nearest_micros};
use crate::decode::pieces::Piece;
use crate::trace::{Span, Trace};

/// Options of the Kineto dialect: the [`Format`] to hand to
/// [`Profiler::write`](crate::Profiler::write) or [`write_file`](super::write_file), and the
/// argument of [`write()`].
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// This process's rank in a distributed job (0 for a single process).
    pub rank: u32,
    /// The number of ranks.
    pub world_size: u32,
}

impl Options {
    /// Rank `rank` of `world_size`.
    pub fn new(rank: u32, world_size: u32) -> Self {
        Self { rank, world_size }
    }

    /// What sets this dialect apart from the Chrome format.
    fn dialect(&self, trace: &Trace) -> Dialect {
        let Self { rank, world_size } = *self;
        let origin = trace.start_ns;
        // Spaced as Kineto writes it: HolisticTraceAnalysis finds the rank with the regex
        // `"rank":\s+(\d+)`.
        let header = format!(
            "{{\"schemaVersion\":1,\"deviceProperties\":[],\"distributedInfo\": {{\"backend\": \"none\", \"rank\": {rank}, \"world_size\": {world_size}}},\"baseTimeNanoseconds\":{origin},\"displayTimeUnit\":\"ms\",\"traceName\":\"tickscope\",\"traceEvents\":[\n"
        );
        Dialect {
            header: header.into_bytes(),
            origin,
            begin_end: false,
            scope_category: "cpu_op",
            poll_category: "cpu_op",
            op_ids: true,
            flow: "fwdbwd",
            times: Some(kineto_times),
            whole_micros: false,
            async_spans: false,
            memory: false,
            allocation_instants: false,
            counters: false,
        }
    }
}

/// A single process: rank 0 of 1.
impl Default for Options {
    fn default() -> Self {
        Self::new(0, 1)
    }
}

impl Format for Options {
    fn write(&self, trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
        trace_event::write(trace, out, &self.dialect(trace))
    }

    fn write_captures(
        &self,
        captures: &[&crate::Capture],
        out: &mut dyn Write,
    ) -> Option<io::Result<()>> {
        trace_event::write_captures(captures, out, |trace| self.dialect(trace))
    }
}

/// Streams `trace` in the Kineto dialect into `out`. Memory use does not depend on the trace
/// size, except for a few words per span of one thread at a time.
pub fn write(trace: &Trace, out: &mut impl Write, options: &Options) -> io::Result<()> {
    options.write(trace, out)
}

/// Start and end of each span of one thread in nanoseconds from `origin`, for the Kineto
/// dialect; see the [module docs](self#kineto-times).
///
/// Each lane's begins and ends keep their times, in order, but that each comes at least a
/// nanosecond after the one before, and an end lies on a whole microsecond only where its
/// begin does. HolisticTraceAnalysis rounds starts up and ends down, and reads an op that
/// contains no whole microsecond as lasting −1 µs: a leaf that would contain none lasts no
/// time instead, on the whole microsecond nearest its middle, or the first one after the edge
/// placed last (zero-length siblings may share one). An op with children contains its
/// children's whole microseconds.
///
/// `piece` may be one piece of a thread: `placed` carries each lane's last edge over to the
/// next piece, and where the ops still open were placed to begin, so that a thread placed
/// piece by piece gets the times it gets whole. There an [`Edge::End`] is an ordinary end, and
/// an [`Edge::Begin`] marks the end of an op placed to last no time, on whose microsecond the
/// next such op may go.
fn kineto_times(
    piece: &Piece<'_>,
    lanes: &Lanes,
    origin: u64,
    placed: &mut Placed,
) -> Option<Vec<(u64, u64)>> {
    let spans = piece.spans;
    let mut sequences: Vec<Vec<Edge>> = vec![Vec::new(); lanes.count() as usize];
    lanes.walk(spans, |edge| {
        let (Edge::Begin(i) | Edge::End(i)) = edge;
        if piece.has_edge(i, matches!(edge, Edge::Begin(_))) {
            sequences[lanes.lane(i) as usize].push(edge);
        }
    });
    if placed.last.len() < sequences.len() {
        placed.last.resize(sequences.len(), None);
    }
    let mut out = vec![(0, 0); spans.len()];
    // The carried spans are on lane 0, begun where an earlier piece placed them.
    let carried = piece.carried.len();
    let mut open: Vec<u64> = placed.open.iter().copied().take(carried).collect();
    for (lane, (sequence, last)) in sequences.iter().zip(placed.last.iter_mut()).enumerate() {
        if lane > 0 {
            open.clear();
        }
        place(spans, sequence, origin, &mut out, (last, &mut open));
        if lane == 0 {
            // Lane 0's ops begun and not ended: the open spans.
            placed.open = std::mem::take(&mut open);
        }
    }
    Some(out)
}

/// The first nanosecond at or after `ns` and after `last` (the edge placed last).
fn after(ns: u64, last: Option<u64>) -> u64 {
    last.map_or(ns, |last| ns.max(last.saturating_add(1)))
}

/// The end of an op that begins at `begin`: the first nanosecond at or after `ns` and after
/// `last`, and not on a whole microsecond unless `begin` is (readers add `dur` to `ts` in
/// doubles, which can land an end meant for a whole microsecond just below it).
fn end_after(ns: u64, last: Option<u64>, begin: u64) -> u64 {
    let end = after(ns, last);
    if end.is_multiple_of(1000) && !begin.is_multiple_of(1000) {
        end.saturating_add(1)
    } else {
        end
    }
}

/// Places the spans of one lane, whose edges `sequence` lists in order, after the lane's
/// edge placed before them, `before` (set to the last one placed), inside the ops begun
/// before them and not ended, whose places `open` holds, outermost first (set to those left
/// open); see [`kineto_times`].
fn place(
    spans: &[Span],
    sequence: &[Edge],
    origin: u64,
    out: &mut [(u64, u64)],
    (before, open): (&mut Option<(Edge, u64)>, &mut Vec<u64>),
) {
    // The edge placed last, and whether it was the end of an op that lasts no time.
    let (mut last, mut point) = match *before {
        None => (None, false),
        Some((edge, ns)) => (Some(ns), matches!(edge, Edge::Begin(_))),
    };
    // `open`: the begin of each op with children that has begun and not ended.
    let mut k = 0;
    while k < sequence.len() {
        match sequence[k] {
            Edge::Begin(i) if sequence.get(k + 1) == Some(&Edge::End(i)) => {
                // A leaf: both edges at once.
                let span = &spans[i as usize];
                let (start, end) = (
                    span.start_ns.saturating_sub(origin),
                    span.end_ns.saturating_sub(origin),
                );
                let begin = after(start, last);
                let end_at = end_after(end, Some(begin), begin);
                if begin.is_multiple_of(1000) || end_at / 1000 > begin / 1000 {
                    out[i as usize] = (begin, end_at);
                    (last, point) = (Some(end_at), false);
                } else {
                    let middle = start / 2 + end / 2 + (start % 2 + end % 2) / 2;
                    let first = match last {
                        None => 0,
                        Some(last) if point => last,
                        Some(last) => (last / 1000).saturating_add(1).saturating_mul(1000),
                    };
                    let at = nearest_micros(middle, 0).saturating_mul(1000).max(first);
                    out[i as usize] = (at, at);
                    (last, point) = (Some(at), true);
                }
                k += 2;
            }
            Edge::Begin(i) => {
                let begin = after(spans[i as usize].start_ns.saturating_sub(origin), last);
                open.push(begin);
                (last, point) = (Some(begin), false);
                k += 1;
            }
            Edge::End(i) => {
                // Lanes nest, so this is the top's end.
                let begin = open.pop().unwrap_or(0);
                let end = end_after(spans[i as usize].end_ns.saturating_sub(origin), last, begin);
                out[i as usize] = (begin, end);
                (last, point) = (Some(end), false);
                k += 1;
            }
        }
    }
    // A piece ends right after an end: what is carried over is one.
    *before = last.map(|ns| (if point { Edge::Begin(0) } else { Edge::End(0) }, ns));
}

#[cfg(test)]
mod tests;
