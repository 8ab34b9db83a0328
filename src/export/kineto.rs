//! The PyTorch profiler's (Kineto's) dialect of the [Chrome](super::chrome) Trace Event
//! format, for HolisticTraceAnalysis and the PyTorch TensorBoard plugin.
//!
//! Scopes are `"cat":"cpu_op"` complete events with the ids PyTorch puts in `args`
//! (`External id`, `Ev Idx`, `Record function id`); the document has `schemaVersion`,
//! `distributedInfo` with a rank, and Kineto's absolute time base: `ts` counts from
//! `baseTimeNanoseconds`, the session start in Unix-epoch nanoseconds, so traces of several
//! ranks line up. Times are whole microseconds, chosen so that HolisticTraceAnalysis's
//! rounding and the PyTorch TensorBoard plugin's operator tree both keep every scope under its
//! parent; scopes shorter than a microsecond last 0 or 1 µs there, and where many of them run
//! back to back the times run late (see [Kineto times](self#kineto-times)). Scopes dropped out of order go to extra
//! tracks as in the Chrome format. Links are flow arrows of category `fwdbwd`. Async calls
//! appear only as their poll slices (the format has no async spans), and memory is left out.
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
//! So the Kineto dialect writes whole microseconds, as Kineto did before it moved to
//! nanoseconds (pytorch/pytorch#122425, which HTA's rounding cites), with three decimals all
//! the same so that HTA keeps them as doubles as it does Kineto's (it downcasts integer
//! columns to the smallest integer type), and HTA's rounding leaves them as they are. Each
//! track's begins and ends, in order, go to their nearest microsecond, raised where needed so
//! that they never go back (children stay inside their parents, siblings in order), and
//! raised one more microsecond where a reader would misplace an op:
//!
//! - an op with children ends at least a microsecond after its last child begins;
//! - an op that lasts a microsecond or more does not begin on the microsecond of a
//!   zero-length sibling before it;
//! - a zero-length op does not lie on a microsecond where one op that lasts closes and
//!   another opens.
//!
//! The TensorBoard plugin then holds every op under its own parent (also after its merging),
//! and HTA's call graph holds every op once, by name as in the report, with the parent of
//! every op that lasts a microsecond or more; zero-length ops it nests into the op that closes
//! on their microsecond, or into one another.
//!
//! The cost in precision: no time is more than 0.5 µs early, and each is late by at most one
//! microsecond per begin or end of its track since the track was last on time; it catches up
//! as soon as the track idles or runs a scope longer than the delay. The rules cannot do with
//! less: in whole microseconds that both readers nest, an op with children lasts at least a
//! microsecond, two such siblings do not overlap, so a scope calling `n` such scopes in turn
//! lasts at least `n` µs, however fast they ran. Where scopes run at microseconds apart, as
//! PyTorch's operators do, nothing moves; where dozens run per microsecond they spread out:
//! the 1684 recursive `fib` scopes of the `chrome_trace` example, which run in about 22 µs
//! (release build), last about 610 µs in the Kineto dialect, their jobs as long (HTA and the
//! plugin would need at least 377 µs for `fib(14)` alone). A scope shorter than a microsecond
//! lasts 0 or 1 µs. The [Chrome](super::chrome) format keeps every nanosecond (edges of one
//! track that share one go 1 ns apart): open that one for the times of such scopes, and in
//! speedscope, which reads an end before a begin of the same instant and so cannot nest
//! zero-length ops (1481 of its stack repairs on the `chrome_trace` example's Kineto trace).

use std::io::{self, Write};

use super::Format;
use super::lanes::{Edge, Lanes};
use super::trace_event::{self, Dialect, nearest_micros};
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
            times: Some(microsecond_grid),
            whole_micros: true,
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
}

/// Streams `trace` in the Kineto dialect into `out`. Memory use does not depend on the trace
/// size, except for a few words per span of one thread at a time.
pub fn write(trace: &Trace, out: &mut impl Write, options: &Options) -> io::Result<()> {
    options.write(trace, out)
}

/// Start and end of each span of one thread on whole microseconds from `origin` (returned as
/// nanoseconds from `origin` on that grid), for the Kineto dialect; see the
/// [module docs](self#kineto-times).
///
/// Each lane's begins and ends, in order, go to their nearest microsecond, raised where needed
/// so that they never go back (children stay inside their parents, siblings in order) and so
/// that both readers rebuild every op's parent:
///
/// - an op with children ends at least a microsecond after its last child begins, so that
///   every child begins before its parent ends (the TensorBoard plugin nests an op only in one
///   that ends after it begins);
/// - an op that lasts a microsecond or more does not begin on the microsecond of a
///   zero-length sibling before it (the plugin orders equal starts longest first, which would
///   put it around that sibling);
/// - a zero-length op does not lie on a microsecond on which one op that lasts closes and
///   another opens (HolisticTraceAnalysis orders zero-length ops after those that open and
///   before those that close, which has no solution then).
///
/// Each rule raises one edge by one microsecond at most, so every time is at most 0.5 µs
/// early, and late by at most one microsecond per op of its lane begun since the lane was last
/// on time.
fn microsecond_grid(spans: &[Span], lanes: &Lanes, origin: u64) -> Option<Vec<(u64, u64)>> {
    let mut sequences: Vec<Vec<Edge>> = vec![Vec::new(); lanes.count() as usize];
    lanes.walk(spans, |edge| {
        let (Edge::Begin(i) | Edge::End(i)) = edge;
        sequences[lanes.lane(i) as usize].push(edge);
    });
    let mut out = vec![(0, 0); spans.len()];
    let mut stack = Vec::new();
    for sequence in &sequences {
        place(spans, sequence, origin, &mut stack, &mut out);
    }
    for time in &mut out {
        *time = (time.0.saturating_mul(1000), time.1.saturating_mul(1000));
    }
    Some(out)
}

/// An op of [`place`]'s lane that has begun and not ended, with children.
struct Open {
    /// Its microsecond.
    begin: u64,
    /// The microsecond of its last child's begin so far.
    last_child: u64,
}

/// Places the spans of one lane, whose edges `sequence` lists in order, on whole microseconds
/// (written to `out` as microseconds); see [`microsecond_grid`]. `stack` is scratch space.
fn place(
    spans: &[Span],
    sequence: &[Edge],
    origin: u64,
    stack: &mut Vec<Open>,
    out: &mut [(u64, u64)],
) {
    let nearest = |ns: u64| nearest_micros(ns, origin);
    stack.clear();
    // The last microsecond placed; that of the zero-length op the previous edge ended; that
    // on which an op that lasts last closed; that on which an op with children opened where
    // another closed.
    let (mut last, mut point, mut closed, mut handover) = (0, None, None, None);
    let mut k = 0;
    while k < sequence.len() {
        match sequence[k] {
            Edge::Begin(i) if sequence.get(k + 1) == Some(&Edge::End(i)) => {
                // A leaf: both edges at once.
                let span = &spans[i as usize];
                let end = nearest(span.end_ns);
                let mut begin = nearest(span.start_ns).max(last);
                // One that lasts, after a zero-length sibling on its microsecond; or one of
                // zero length, on a microsecond where one op closed and another opened.
                let after = if end > begin { point } else { handover };
                if after == Some(begin) {
                    begin += 1;
                }
                let end = end.max(begin);
                if let Some(parent) = stack.last_mut() {
                    parent.last_child = begin;
                }
                out[i as usize] = (begin, end);
                if end > begin {
                    (point, closed) = (None, Some(end));
                } else {
                    point = Some(end);
                }
                last = end;
                k += 2;
            }
            Edge::Begin(i) => {
                let mut begin = nearest(spans[i as usize].start_ns).max(last);
                if point == Some(begin) {
                    begin += 1;
                }
                if closed == Some(begin) {
                    handover = Some(begin);
                }
                if let Some(parent) = stack.last_mut() {
                    parent.last_child = begin;
                }
                stack.push(Open {
                    begin,
                    last_child: begin,
                });
                (point, last) = (None, begin);
                k += 1;
            }
            Edge::End(i) => {
                // Lanes nest, so this is the top's end; an empty stack cannot happen.
                let Some(open) = stack.pop() else {
                    k += 1;
                    continue;
                };
                let end = nearest(spans[i as usize].end_ns)
                    .max(last)
                    .max(open.last_child + 1);
                out[i as usize] = (open.begin, end);
                (point, closed, last) = (None, Some(end), end);
                k += 1;
            }
        }
    }
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

    /// Both readers of the Kineto dialect rebuild each lane's call stacks from the grid: the
    /// TensorBoard plugin gives every op its parent, HolisticTraceAnalysis every op that lasts
    /// a microsecond or more, and HTA can order every microsecond. In whole microseconds,
    /// every child lies inside its parent and begins before it ends, and siblings do not
    /// overlap. No time is more than 0.5 µs early, nor late by more than a microsecond per
    /// edge of its lane since the lane was last on time.
    #[test]
    fn microsecond_grid_nests_in_both_readers() {
        let mut moved = 0;
        for seed in 1..200u64 {
            let spans = random_spans(seed * 0x9e37_79b9, 400, seed % 3 == 0);
            let lanes = Lanes::assign(&spans);
            let grid = microsecond_grid(&spans, &lanes, 0).unwrap();
            let us = |i: u32| {
                let (s, e) = grid[i as usize];
                assert!(s % 1000 == 0 && e % 1000 == 0 && s <= e, "seed {seed}: {i}");
                ((s / 1000) as i64, (e / 1000) as i64)
            };
            let mut sequences = vec![Vec::new(); lanes.count() as usize];
            lanes.walk(&spans, |edge| {
                let (Edge::Begin(i) | Edge::End(i)) = edge;
                sequences[lanes.lane(i) as usize].push(edge);
            });
            for (lane, sequence) in sequences.iter().enumerate() {
                // Early and late.
                let mut since_on_time = 0;
                for &edge in sequence {
                    let (i, (got, ns)) = match edge {
                        Edge::Begin(i) => (i, (us(i).0, spans[i as usize].start_ns)),
                        Edge::End(i) => (i, (us(i).1, spans[i as usize].end_ns)),
                    };
                    let late = got - nearest_micros(ns, 0) as i64;
                    since_on_time = if late == 0 { 0 } else { since_on_time + 1 };
                    assert!(
                        (0..=since_on_time).contains(&late),
                        "seed {seed}: {i} {late} µs late"
                    );
                    moved += usize::from(late > 0);
                }
                let mut ops: Vec<(u32, i64, i64)> = sequence
                    .iter()
                    .filter_map(|&e| match e {
                        Edge::Begin(i) => Some((i, us(i).0, us(i).1)),
                        Edge::End(_) => None,
                    })
                    .collect();
                ops.sort_unstable();
                // Inside the parent, begun before it ends; after the previous sibling.
                let mut previous: Vec<Option<u32>> = vec![None; spans.len() + 1];
                for &(i, s, e) in &ops {
                    let parent = lanes.parent(&spans, i);
                    if let Some(p) = parent {
                        let (ps, pe) = us(p);
                        assert!(ps <= s && s < pe && e <= pe, "seed {seed}: {i} in {p}");
                    }
                    let slot = parent.map_or(spans.len(), |p| p as usize);
                    if let Some(before) = previous[slot].replace(i) {
                        assert!(us(before).1 <= s, "seed {seed}: {i} overlaps {before}");
                    }
                }
                let want = |i: u32| lanes.parent(&spans, i);
                for (i, parent) in torch_tb_parents(&ops) {
                    assert_eq!(parent, want(i), "seed {seed}, lane {lane}: torch-tb, {i}");
                }
                for (i, parent) in hta_parents(&ops) {
                    let (s, e) = us(i);
                    if e > s {
                        assert_eq!(parent, want(i), "seed {seed}, lane {lane}: HTA, {i}");
                    }
                }
            }
        }
        // The random threads are crowded: the rules move some times.
        assert!(moved > 0);
    }
}
