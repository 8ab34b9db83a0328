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
use super::trace_event::{self, Dialect, LaneEdges, nearest_micros};
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
/// `spans` may be one piece of a thread (whole trees): `last` carries each lane's last edge
/// over to the next piece, so that a thread placed piece by piece gets the times it gets
/// whole. There an [`Edge::End`] is an ordinary end, and an [`Edge::Begin`] marks the end
/// of an op placed to last no time, on whose microsecond the next such op may go.
fn kineto_times(
    spans: &[Span],
    lanes: &Lanes,
    origin: u64,
    last: &mut LaneEdges,
) -> Option<Vec<(u64, u64)>> {
    let mut sequences: Vec<Vec<Edge>> = vec![Vec::new(); lanes.count() as usize];
    lanes.walk(spans, |edge| {
        let (Edge::Begin(i) | Edge::End(i)) = edge;
        sequences[lanes.lane(i) as usize].push(edge);
    });
    if last.len() < sequences.len() {
        last.resize(sequences.len(), None);
    }
    let mut out = vec![(0, 0); spans.len()];
    for (sequence, last) in sequences.iter().zip(last.iter_mut()) {
        place(spans, sequence, origin, &mut out, last);
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
/// edge placed before them, `before` (set to the last one placed); see [`kineto_times`].
fn place(
    spans: &[Span],
    sequence: &[Edge],
    origin: u64,
    out: &mut [(u64, u64)],
    before: &mut Option<(Edge, u64)>,
) {
    // The edge placed last, and whether it was the end of an op that lasts no time.
    let (mut last, mut point) = match *before {
        None => (None, false),
        Some((edge, ns)) => (Some(ns), matches!(edge, Edge::Begin(_))),
    };
    // The begin of each op with children that has begun and not ended.
    let mut open: Vec<u64> = Vec::new();
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
    // Pieces are whole trees: what is carried over is an end.
    *before = last.map(|ns| (if point { Edge::Begin(0) } else { Edge::End(0) }, ns));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::callsite::Callsite;
    use crate::trace::SpanKind;

    static S: Callsite = Callsite::new("s", file!(), line!(), module_path!());

    /// A random thread: scopes opened and closed every 0 to ~3 µs, mostly much sooner; with
    /// `any_order`, a close may end any open scope rather than the innermost.
    fn random_spans(seed: u64, steps: usize, any_order: bool) -> Vec<Span> {
        let mut next = crate::record::test_random(seed);
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
                    overhead_ns: 0,
                    open_at_stop: false,
                    cut_at_start: false,
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

    /// An op's begin (`-1`) or end (`1`) as HolisticTraceAnalysis sorts them: index (file
    /// order), duration, kind and time (`hta/common/trace_call_stack.py`).
    type HtaEdge = (u32, i64, i64, i64);

    /// HTA's `_less_than` (with `_cmp_events_with_zero_duration`), ported as it is.
    fn hta_less(x: HtaEdge, y: HtaEdge) -> bool {
        let ((xi, xd, xk, xt), (yi, yd, yk, yt)) = (x, y);
        let (open, close) = (-1, 1);
        if xt != yt {
            return xt < yt;
        }
        if xi == yi {
            return xk == open;
        }
        if xd == 0 || yd == 0 {
            return match (xd, yd) {
                (0, d) if d > 0 => yk == close,
                (d, 0) if d > 0 => xk == open,
                (0, 0) if xk == open && yk == open => xi < yi,
                (0, 0) if xk == close && yk == close => xi > yi,
                (0, 0) => xk == open,
                _ => panic!("HTA: unexpected case {x:?} {y:?}"),
            };
        }
        match (xk == open, yk == open) {
            (false, true) => true,
            (true, false) => false,
            (true, true) if xd != yd => xd > yd,
            (false, false) if xd != yd => xd < yd,
            (true, _) => xi < yi,
            (false, _) => xi > yi,
        }
    }

    /// The parent HolisticTraceAnalysis gives each op of one track, `(index, start, end)` in
    /// whole microseconds: its edges sorted with [`hta_less`], which must order every two
    /// edges of one microsecond one way (else HTA's sort check fails or its stacks go wrong),
    /// then one stack.
    fn hta_parents(ops: &[(u32, i64, i64)]) -> Vec<(u32, Option<u32>)> {
        let mut edges: Vec<HtaEdge> = ops
            .iter()
            .flat_map(|&(i, s, e)| [(i, e - s, -1, s), (i, e - s, 1, e)])
            .collect();
        edges.sort_by(|&x, &y| {
            if x == y {
                std::cmp::Ordering::Equal
            } else if hta_less(x, y) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        });
        for (a, x) in edges.iter().enumerate() {
            for y in edges[a + 1..].iter().take_while(|y| y.3 == x.3) {
                assert!(
                    hta_less(*x, *y) && !hta_less(*y, *x),
                    "HTA cannot order {x:?} and {y:?}"
                );
            }
        }
        let (mut stack, mut parents) = (Vec::new(), Vec::new());
        for (i, _, kind, _) in edges {
            if kind == -1 {
                parents.push((i, stack.last().copied()));
                stack.push(i);
            } else {
                stack.pop();
            }
        }
        parents
    }

    /// The parent the PyTorch TensorBoard plugin (torch-tb-profiler 0.4.3,
    /// `OpTreeBuilder._build_tree_internal`) gives each op of one track, `(index, start,
    /// end)` in file order: sorted by start, longer first, else in file order; each nests in
    /// the innermost op on the stack that ends after it begins, when it ends no later (else
    /// the plugin rejects it: a panic here).
    fn torch_tb_parents(ops: &[(u32, i64, i64)]) -> Vec<(u32, Option<u32>)> {
        let mut sorted = ops.to_vec();
        sorted.sort_by_key(|&(_, s, e)| (s, std::cmp::Reverse(e)));
        let (mut stack, mut parents): (Vec<(u32, i64)>, _) = (Vec::new(), Vec::new());
        for (i, s, e) in sorted {
            while stack.last().is_some_and(|&(_, end)| s >= end) {
                stack.pop();
            }
            if let Some(&(p, end)) = stack.last() {
                assert!(e <= end, "torch-tb rejects {i} [{s}, {e}] in {p}");
            }
            parents.push((i, stack.last().map(|&(p, _)| p)));
            stack.push((i, e));
        }
        parents
    }

    /// A thread placed piece by piece (whole trees, split where nothing is open), carrying
    /// each lane's last edge from one piece to the next, gets the times it gets whole: also
    /// where a piece ends on an op that lasts no time, and with extra lanes.
    #[test]
    fn kineto_times_of_pieces_are_the_whole_threads() {
        let (mut split, mut on_points, mut lanes_seen) = (0, 0, 0);
        for seed in 1..100u64 {
            // Every third thread has scopes dropped out of order (extra lanes).
            let spans = random_spans(seed * 0x51_7cc1_b727, 400, seed % 3 == 0);
            let whole = kineto_times(&spans, &Lanes::assign(&spans), 7, &mut Vec::new()).unwrap();
            // Where nothing is open: a top-level span that begins after every span before it
            // ended.
            let mut cuts = vec![0];
            let mut end = 0;
            for (i, span) in spans.iter().enumerate() {
                if i > 0 && span.parent.is_none() && span.start_ns >= end && i % 3 == 0 {
                    cuts.push(i);
                }
                end = end.max(span.end_ns);
            }
            cuts.push(spans.len());
            split += cuts.len() - 2;
            let (mut last, mut pieces) = (Vec::new(), Vec::new());
            for w in cuts.windows(2) {
                let base = w[0] as u32;
                let piece: Vec<Span> = spans[w[0]..w[1]]
                    .iter()
                    .map(|s| Span {
                        parent: s.parent.map(|p| p - base),
                        ..s.clone()
                    })
                    .collect();
                let lanes = Lanes::assign(&piece);
                pieces.extend(kineto_times(&piece, &lanes, 7, &mut last).unwrap());
                on_points += usize::from(matches!(last[0], Some((Edge::Begin(_), _))));
                lanes_seen = lanes_seen.max(lanes.count());
            }
            assert_eq!(pieces, whole, "seed {seed}");
        }
        assert!(split > 500, "{split} splits");
        assert!(
            on_points > 10,
            "{on_points} pieces end on an op that lasts no time"
        );
    }

    /// Both readers of the Kineto dialect rebuild each lane's call stacks: the TensorBoard
    /// plugin, from the times as written, gives every op its parent; HolisticTraceAnalysis,
    /// after its rounding (start up, end down to whole microseconds), reads no op as lasting
    /// less than nothing, can order every microsecond and gives every op that lasts a
    /// microsecond or more its parent. Both as written and after HTA's rounding, every child
    /// lies inside its parent and siblings do not overlap; as written, each child begins before
    /// its parent ends. No time is early (a
    /// zero-length op's by at most 0.5 µs from its middle), and none late by more than a
    /// microsecond per edge of its lane since the lane was last on time.
    #[test]
    fn kineto_times_nest_in_both_readers() {
        let (mut points, mut moved) = (0, 0);
        for seed in 1..200u64 {
            let spans = random_spans(seed * 0x9e37_79b9, 400, seed % 3 == 0);
            let lanes = Lanes::assign(&spans);
            let times = kineto_times(&spans, &lanes, 0, &mut Vec::new()).unwrap();
            let ns = |i: u32| {
                let (s, e) = times[i as usize];
                assert!(s <= e, "seed {seed}: {i}");
                // A zero-length op lies on a whole microsecond, an end only where its begin does.
                assert!(
                    s % 1000 == 0 || (s != e && e % 1000 != 0),
                    "seed {seed}: {i} at {s}..{e}"
                );
                (s as i64, e as i64)
            };
            // HTA's rounding.
            let hta = |i: u32| {
                let (s, e) = ns(i);
                let (s, e) = ((s + 999).div_euclid(1000), e.div_euclid(1000));
                assert!(s <= e, "seed {seed}: {i} lasts less than nothing in HTA");
                (s, e)
            };
            let mut sequences = vec![Vec::new(); lanes.count() as usize];
            lanes.walk(&spans, |edge| {
                let (Edge::Begin(i) | Edge::End(i)) = edge;
                sequences[lanes.lane(i) as usize].push(edge);
            });
            for (lane, sequence) in sequences.iter().enumerate() {
                // Early and late.
                let mut since_on_time = 0;
                for (k, &edge) in sequence.iter().enumerate() {
                    let (Edge::Begin(i) | Edge::End(i)) = edge;
                    let span = &spans[i as usize];
                    let (s, e) = ns(i);
                    let (got, truth) = match edge {
                        _ if s == e => (s, (span.start_ns + span.end_ns) as i64 / 2),
                        Edge::Begin(_) => (s, span.start_ns as i64),
                        Edge::End(_) => (e, span.end_ns as i64),
                    };
                    let late = got - truth;
                    since_on_time = if late <= 1 { 0 } else { since_on_time + 1 };
                    let most = 500 + 1000 * since_on_time;
                    assert!(
                        (-500..=most).contains(&late) && (s == e || late >= 0),
                        "seed {seed}: edge {k} of lane {lane} ({i}) is {late} ns late"
                    );
                    moved += usize::from(late > 1);
                    points += usize::from(s == e && matches!(edge, Edge::Begin(_)));
                }
                let mut ops: Vec<u32> = sequence
                    .iter()
                    .filter_map(|&e| match e {
                        Edge::Begin(i) => Some(i),
                        Edge::End(_) => None,
                    })
                    .collect();
                ops.sort_unstable();
                // Inside the parent (begun before it ends, as written), after the previous
                // sibling: as written and after HTA's rounding.
                let mut previous: Vec<Option<u32>> = vec![None; spans.len() + 1];
                for &i in &ops {
                    let parent = lanes.parent(&spans, i);
                    for (times, strict) in
                        [(&ns as &dyn Fn(u32) -> (i64, i64), true), (&hta, false)]
                    {
                        let (s, e) = times(i);
                        if let Some(p) = parent {
                            let (ps, pe) = times(p);
                            assert!(ps <= s && e <= pe, "seed {seed}: {i} in {p}");
                            assert!(!strict || s < pe, "seed {seed}: {i} begins as {p} ends");
                        }
                        let slot = parent.map_or(spans.len(), |p| p as usize);
                        if let Some(before) = previous[slot] {
                            assert!(times(before).1 <= s, "seed {seed}: {i} overlaps {before}");
                        }
                    }
                    previous[parent.map_or(spans.len(), |p| p as usize)] = Some(i);
                }
                let want = |i: u32| lanes.parent(&spans, i);
                let written: Vec<(u32, i64, i64)> =
                    ops.iter().map(|&i| (i, ns(i).0, ns(i).1)).collect();
                for (i, parent) in torch_tb_parents(&written) {
                    assert_eq!(parent, want(i), "seed {seed}, lane {lane}: torch-tb, {i}");
                }
                let rounded: Vec<(u32, i64, i64)> =
                    ops.iter().map(|&i| (i, hta(i).0, hta(i).1)).collect();
                for (i, parent) in hta_parents(&rounded) {
                    let (s, e) = hta(i);
                    if e > s {
                        assert_eq!(parent, want(i), "seed {seed}, lane {lane}: HTA, {i}");
                    }
                }
            }
        }
        // The random threads are crowded: some ops last no time, and some times move.
        assert!(points > 0 && moved > 0, "{points} {moved}");
    }
}
