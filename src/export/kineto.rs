//! The PyTorch profiler's (Kineto's) dialect of the [Chrome](super::chrome) Trace Event
//! format, for HolisticTraceAnalysis and the PyTorch TensorBoard plugin.
//!
//! Scopes are `"cat":"cpu_op"` complete events with the ids PyTorch puts in `args`
//! (`External id`, `Ev Idx`, `Record function id`); the document has `schemaVersion`,
//! `distributedInfo` with a rank, and Kineto's absolute time base: `ts` counts from
//! `baseTimeNanoseconds`, the session start in Unix-epoch nanoseconds, so traces of several
//! ranks line up. Times are whole microseconds, each within 0.5 µs of the truth (1.5 µs where
//! HTA needs a scope moved), chosen so that HolisticTraceAnalysis's rounding keeps every scope
//! in its parent and its call stacks right; scopes shorter than a microsecond mostly last
//! 0 µs there (see [Kineto times](self#kineto-times)). Scopes dropped out of order go to extra
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
//! it moved. The [Chrome](super::chrome) format keeps every nanosecond (edges of one track
//! that share one go 1 ns apart).
//!
//! Readers that take these times as written and rebuild each track's stack from them cannot
//! all see the nesting inside one microsecond: every op that HTA rounds to a zero-length op on
//! microsecond `t` must start in `(t - 1, t]` and end in `[t, t + 1)`, so on a microsecond where
//! one op closes and a later one opens, the ops between them lie on `t` itself and cannot hold
//! one another. The PyTorch TensorBoard plugin (torch-tb-profiler 0.4.3) rejects no op and
//! keeps the parent of every op that lasts a microsecond or more, but gives some zero-length
//! ops the op around their microsecond as parent, and then merges an op into its parent where
//! that leaves it a single child of its own name (40 to 60 of the 1686 ops of the
//! `chrome_trace` example). speedscope reads the ends of one instant in the order of their
//! begins and tells ops apart by their args (each has its own `External id`), so it warns on
//! most crowded microseconds. Open the Chrome format in those.

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
            times: Some(|spans, lanes, origin, _| microsecond_grid(spans, lanes, origin)),
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
/// nanoseconds from `origin` on that grid), for the Kineto dialect; see the module docs.
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
fn microsecond_grid(spans: &[Span], lanes: &Lanes, origin: u64) -> Option<Vec<(u64, u64)>> {
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
            let ns = us.saturating_mul(1000);
            match edge {
                Edge::Begin(i) => out[i as usize].0 = ns,
                Edge::End(i) => out[i as usize].1 = ns,
            }
        }
    }
    Some(out)
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

    /// The Kineto grid keeps each lane's nesting and sibling order, keeps every time within
    /// 1.5 µs, and leaves no microsecond on which a scope closes, another opens and a third
    /// has zero length (HolisticTraceAnalysis could not order them).
    #[test]
    fn microsecond_grid_nests_and_never_stumps_hta() {
        for seed in 1..200u64 {
            let spans = random_spans(seed * 0x9e37_79b9, 400, seed % 3 == 0);
            let lanes = Lanes::assign(&spans);
            let origin = 0;
            let grid = microsecond_grid(&spans, &lanes, origin).unwrap();
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
}
