//! Kineto's times: nesting in both readers, piece by piece as whole.

use super::*;
use crate::export::lanes::tests::cut_nested;
use crate::export::trace_event::Times;
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
        let whole = kineto_times(
            &Piece::whole(&spans),
            &Lanes::assign(&spans),
            7,
            &mut Placed::default(),
        )
        .unwrap();
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
        let (mut last, mut pieces) = (Placed::default(), Vec::new());
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
            pieces.extend(kineto_times(&Piece::whole(&piece), &lanes, 7, &mut last).unwrap());
            on_points += usize::from(matches!(last.last[0], Some((Edge::Begin(_), _))));
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

/// A thread of nested scopes placed piece by piece, cut while scopes are open (the open
/// ones carried into the next piece, as decoding hands them), gets the times it gets
/// whole, in both dialects that move times: each span's, from the piece where it ends.
#[test]
fn times_of_pieces_carrying_open_scopes_are_the_whole_threads() {
    let (mut cuts, mut carried) = (0, 0);
    let dialects: [(&str, Times); 2] = [
        ("kineto", kineto_times),
        ("chrome", crate::export::chrome::tests::distinct_edges_of),
    ];
    for seed in 1..120u64 {
        let spans = random_spans(seed.wrapping_mul(0x2545_f491_4f6c_dd1d), 400, false);
        let step = 2 + seed as usize % 9;
        let pieces = cut_nested(&spans, |k| k % step == 0);
        cuts += pieces.len() - 1;
        carried += pieces.iter().map(|p| p.carried.len()).sum::<usize>();
        for (name, times) in dialects {
            let lanes = Lanes::assign(&spans);
            let whole = times(&Piece::whole(&spans), &lanes, 7, &mut Placed::default())
                .unwrap_or_else(|| recorded(&spans, 7));
            let mut got = vec![None; spans.len()];
            let mut placed = Placed::default();
            for owned in &pieces {
                let piece = owned.piece();
                let lanes = Lanes::assign(piece.spans);
                assert_eq!(lanes.count(), 1);
                let at = times(&piece, &lanes, 7, &mut placed)
                    .unwrap_or_else(|| recorded(piece.spans, 7));
                for i in 0..piece.spans.len() as u32 {
                    if !piece.is_open(i) {
                        let index = piece.index(i) as usize;
                        assert!(got[index].is_none(), "{name}, seed {seed}: {index} twice");
                        got[index] = Some(at[i as usize]);
                    }
                }
            }
            let got: Vec<(u64, u64)> = got.into_iter().map(Option::unwrap).collect();
            assert_eq!(got, whole, "{name}, seed {seed}");
        }
    }
    assert!(cuts > 5_000, "{cuts} cuts");
    assert!(carried > 5_000, "{carried} spans carried");
}

/// The recorded times of `spans`, from `origin`.
fn recorded(spans: &[Span], origin: u64) -> Vec<(u64, u64)> {
    (spans.iter())
        .map(|s| {
            (
                s.start_ns.saturating_sub(origin),
                s.end_ns.saturating_sub(origin),
            )
        })
        .collect()
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
        let times = kineto_times(&Piece::whole(&spans), &lanes, 0, &mut Placed::default()).unwrap();
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
                for (times, strict) in [(&ns as &dyn Fn(u32) -> (i64, i64), true), (&hta, false)] {
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
