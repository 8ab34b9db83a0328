//! Lanes: the tracks one thread's spans need so that every slice nests properly on its track.
//!
//! A scope whose guard outlives its parent's (the guards were dropped out of order: open `a`,
//! open `b`, drop `a`, drop `b`) keeps its own end, so its slice overlaps its parent's end and
//! cannot nest on the thread's track: viewers drop such a complete event (Perfetto counts it
//! as `slice_drop_overlapping_complete_event`) or, as `B`/`E` pairs, close the wrong slice.
//! Such spans, and only spans that cannot nest where they are, go to extra lanes of the same
//! thread.
//!
//! Each span, in entry order, goes to the lowest lane where it nests properly inside the
//! lane's open stack, or where that stack is empty once the spans that ended before it
//! started are popped. Lane 0 is the thread's own track; a thread whose spans all end within
//! their parents (every thread whose guards were dropped in order) has lane 0 only, and then
//! a span's enclosing span on its lane is its [`parent`](Span::parent).
//!
//! A span that starts exactly where the top of a lane's stack ends nests in it only when it
//! lasts no time and that span is its parent: spans that merely touch are siblings.

use crate::decode::pieces::Piece;
use crate::trace::Span;

/// The lane of each span of one thread and the span it nests in there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lanes {
    /// Lane of each span (same indices as the spans); empty when there is only lane 0.
    lane: Vec<u32>,
    /// The span each span nests in on its lane; empty when there is only lane 0 (then it is
    /// the span's parent).
    parent: Vec<Option<u32>>,
    /// Lanes in use (at least 1).
    count: u32,
}

/// A span's entry or exit on its lane, as [`Lanes::walk`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edge {
    /// The span at this index begins.
    Begin(u32),
    /// The span at this index ends.
    End(u32),
}

impl Lanes {
    /// Assigns the spans of one thread (in entry order, as in
    /// [`ThreadTrace::spans`](crate::trace::ThreadTrace::spans)) to lanes. Allocates only
    /// when some span outlives its parent.
    pub(crate) fn assign(spans: &[Span]) -> Self {
        let nested = spans.iter().all(|span| {
            span.parent.is_none_or(|p| {
                spans
                    .get(p as usize)
                    .is_some_and(|p| span.end_ns <= p.end_ns)
            })
        });
        if nested {
            return Self {
                lane: Vec::new(),
                parent: Vec::new(),
                count: 1,
            };
        }
        let mut stacks: Vec<Vec<u32>> = vec![Vec::new()];
        let mut lane = Vec::with_capacity(spans.len());
        let mut parent = Vec::with_capacity(spans.len());
        for (index, span) in spans.iter().enumerate() {
            let index = index as u32;
            let mut placed = None;
            for (k, stack) in stacks.iter_mut().enumerate() {
                while let Some(&top) = stack.last() {
                    if !ended_before(&spans[top as usize], top, span) {
                        break;
                    }
                    stack.pop();
                }
                let top = stack.last().copied();
                if top.is_none_or(|top| span.end_ns <= spans[top as usize].end_ns) {
                    stack.push(index);
                    placed = Some((k as u32, top));
                    break;
                }
            }
            let (k, top) = placed.unwrap_or_else(|| {
                stacks.push(vec![index]);
                (stacks.len() as u32 - 1, None)
            });
            lane.push(k);
            parent.push(top);
        }
        Self {
            lane,
            parent,
            count: stacks.len() as u32,
        }
    }

    /// The number of lanes (lane 0 is the thread's own).
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// The lane of span `index`.
    pub(crate) fn lane(&self, index: u32) -> u32 {
        self.lane.get(index as usize).copied().unwrap_or(0)
    }

    /// The span that span `index` nests in on its lane.
    pub(crate) fn parent(&self, spans: &[Span], index: u32) -> Option<u32> {
        if self.parent.is_empty() {
            spans[index as usize].parent
        } else {
            self.parent[index as usize]
        }
    }

    /// Reports every span's [`Edge::Begin`] in entry order and its [`Edge::End`] once the
    /// spans after it on its lane no longer nest in it (the rest at the end). The edges of one
    /// lane form properly nested pairs in time order, so they can be written as `B`/`E` events
    /// or begin/end track events of that lane as they come.
    pub(crate) fn walk(&self, spans: &[Span], mut edge: impl FnMut(Edge)) {
        if self.lane.is_empty() {
            // Lane 0 only, where each span nests in its parent: one stack, no lookups.
            let mut stack: Vec<u32> = Vec::new();
            for (index, span) in (0..).zip(spans) {
                while let Some(&top) = stack.last() {
                    if Some(top) == span.parent {
                        break;
                    }
                    stack.pop();
                    edge(Edge::End(top));
                }
                stack.push(index);
                edge(Edge::Begin(index));
            }
            while let Some(top) = stack.pop() {
                edge(Edge::End(top));
            }
            return;
        }
        let mut stacks: Vec<Vec<u32>> = vec![Vec::new(); self.count as usize];
        for index in 0..spans.len() as u32 {
            let parent = self.parent(spans, index);
            let stack = &mut stacks[self.lane(index) as usize];
            while let Some(&top) = stack.last() {
                if Some(top) == parent {
                    break;
                }
                stack.pop();
                edge(Edge::End(top));
            }
            stack.push(index);
            edge(Edge::Begin(index));
        }
        for stack in &mut stacks {
            while let Some(top) = stack.pop() {
                edge(Edge::End(top));
            }
        }
    }

    /// [`try_walk`](Self::try_walk) over the edges `piece` holds ([`Piece::has_edge`]), these
    /// lanes being the piece's spans'.
    pub(crate) fn try_walk_piece<E>(
        &self,
        piece: &Piece<'_>,
        mut edge: impl FnMut(u32, bool) -> Result<(), E>,
    ) -> Result<(), E> {
        if piece.carried.is_empty() && piece.open.is_empty() {
            return self.try_walk(piece.spans, edge);
        }
        self.try_walk(piece.spans, |i, begin| {
            if piece.has_edge(i, begin) {
                edge(i, begin)
            } else {
                Ok(())
            }
        })
    }

    /// [`walk`](Self::walk) for writers: `edge` gets each edge's span index and whether it
    /// begins the span; the first error ends the walk's calls and is returned.
    pub(crate) fn try_walk<E>(
        &self,
        spans: &[Span],
        mut edge: impl FnMut(u32, bool) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut result = Ok(());
        self.walk(spans, |e| {
            if result.is_ok() {
                result = match e {
                    Edge::Begin(i) => edge(i, true),
                    Edge::End(i) => edge(i, false),
                };
            }
        });
        result
    }
}

/// Whether `top` (at index `top_index`) ended before `span` began, so `span` cannot nest in
/// it: it ended earlier, or exactly then unless `span` lasts no time and is its child.
fn ended_before(top: &Span, top_index: u32, span: &Span) -> bool {
    top.end_ns < span.start_ns
        || (top.end_ns == span.start_ns
            && !(span.end_ns == span.start_ns && span.parent == Some(top_index)))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::record::callsite::Callsite;
    use crate::trace::SpanKind;

    static S: Callsite = Callsite::new("s", file!(), line!(), module_path!());

    /// Spans from `(start, end, parent)`, depths from the parents (the export tests' too).
    pub(in crate::export) fn spans(list: &[(u64, u64, Option<u32>)]) -> Vec<Span> {
        let mut out: Vec<Span> = Vec::new();
        for &(start_ns, end_ns, parent) in list {
            let depth = parent.map_or(0, |p| out[p as usize].depth + 1);
            out.push(Span {
                callsite: &S,
                start_ns,
                end_ns,
                depth,
                parent,
                children_ns: 0,
                overhead_ns: 0,
                open_at_stop: false,
                cut_at_start: false,
                kind: SpanKind::Scope,
            });
        }
        out
    }

    /// A piece of a thread, owning what [`Piece`] borrows.
    pub(in crate::export) struct OwnedPiece {
        pub(in crate::export) base: u32,
        pub(in crate::export) spans: Vec<Span>,
        pub(in crate::export) carried: Vec<u32>,
        pub(in crate::export) open: Vec<u32>,
    }

    impl OwnedPiece {
        pub(in crate::export) fn piece(&self) -> Piece<'_> {
            Piece {
                base: self.base,
                spans: &self.spans,
                memory: &[],
                args: &[],
                carried: &self.carried,
                open: &self.open,
            }
        }
    }

    /// The pieces decoding hands the nested `spans` of one thread in (lane 0 only), cut
    /// where `cut` says yes, after the ends of the walk ([`Lanes::walk`]) it is asked about
    /// (the walk's number of the edge), as [`Pieces`](crate::decode::pieces::Pieces) cuts
    /// them: the spans open at a cut are carried into the next piece.
    pub(in crate::export) fn cut_nested(
        spans: &[Span],
        mut cut: impl FnMut(usize) -> bool,
    ) -> Vec<OwnedPiece> {
        let lanes = Lanes::assign(spans);
        assert_eq!(lanes.count(), 1, "nested spans");
        let mut edges = Vec::new();
        lanes.walk(spans, |e| edges.push(e));
        let (mut out, mut stack, mut carried) = (Vec::new(), Vec::new(), Vec::<u32>::new());
        let (mut base, mut next) = (0u32, 0u32);
        let hand = |carried: &[u32], open: &[u32], base: u32, next: u32| {
            let local = |g: u32| match carried.iter().position(|&c| c == g) {
                Some(at) => at as u32,
                None => carried.len() as u32 + (g - base),
            };
            let mut piece: Vec<Span> = carried
                .iter()
                .map(|&g| spans[g as usize].clone())
                .chain(spans[base as usize..next as usize].iter().cloned())
                .collect();
            for span in &mut piece {
                span.parent = span.parent.map(local);
            }
            let open: Vec<u32> = open.iter().map(|&g| local(g)).collect();
            for &at in &open {
                piece[at as usize].end_ns = u64::MAX;
            }
            OwnedPiece {
                base,
                spans: piece,
                carried: carried.to_vec(),
                open,
            }
        };
        for (k, edge) in edges.iter().enumerate() {
            match *edge {
                Edge::Begin(i) => {
                    stack.push(i);
                    next = i + 1;
                }
                Edge::End(_) => {
                    stack.pop();
                    if k + 1 < edges.len() && cut(k) {
                        out.push(hand(&carried, &stack, base, next));
                        carried = stack.clone();
                        base = next;
                    }
                }
            }
        }
        out.push(hand(&carried, &[], base, next));
        out
    }

    fn lanes_of(lanes: &Lanes, n: usize) -> Vec<u32> {
        (0..n as u32).map(|i| lanes.lane(i)).collect()
    }

    fn edges(lanes: &Lanes, spans: &[Span]) -> Vec<Edge> {
        let mut out = Vec::new();
        lanes.walk(spans, |e| out.push(e));
        out
    }

    /// Every lane's edges nest, in time order, and each span begins and ends once.
    fn check_walk(lanes: &Lanes, spans: &[Span]) {
        let mut stacks: Vec<Vec<u32>> = vec![Vec::new(); lanes.count() as usize];
        let mut last = vec![0u64; lanes.count() as usize];
        let mut ended = vec![false; spans.len()];
        for edge in edges(lanes, spans) {
            let (index, begin) = match edge {
                Edge::Begin(i) => (i, true),
                Edge::End(i) => (i, false),
            };
            let span = &spans[index as usize];
            let lane = lanes.lane(index) as usize;
            let ns = if begin { span.start_ns } else { span.end_ns };
            assert!(
                ns >= last[lane],
                "lane {lane} goes back in time at {edge:?}"
            );
            last[lane] = ns;
            if begin {
                if let Some(&top) = stacks[lane].last() {
                    assert!(
                        span.end_ns <= spans[top as usize].end_ns,
                        "{index} in {top}"
                    );
                }
                assert_eq!(stacks[lane].last().copied(), lanes.parent(spans, index));
                stacks[lane].push(index);
            } else {
                assert_eq!(stacks[lane].pop(), Some(index));
                ended[index as usize] = true;
            }
        }
        assert!(ended.iter().all(|&e| e));
        assert!(stacks.iter().all(Vec::is_empty));
    }

    #[test]
    fn nested_spans_stay_on_lane_zero_without_allocating() {
        // a { b { c } d } e, with a zero-length child at its parent's end.
        let s = spans(&[
            (0, 100, None),
            (10, 50, Some(0)),
            (20, 30, Some(1)),
            (50, 100, Some(0)),
            (100, 100, Some(3)),
            (100, 120, None),
        ]);
        let lanes = Lanes::assign(&s);
        assert_eq!(lanes.count(), 1);
        assert!(lanes.lane.is_empty() && lanes.parent.is_empty());
        assert_eq!(lanes_of(&lanes, s.len()), [0; 6]);
        check_walk(&lanes, &s);
        use Edge::{Begin, End};
        assert_eq!(
            edges(&lanes, &s),
            [
                Begin(0),
                Begin(1),
                Begin(2),
                End(2),
                End(1),
                Begin(3),
                Begin(4),
                End(4),
                End(3),
                End(0),
                Begin(5),
                End(5)
            ]
        );
    }

    #[test]
    fn a_span_outliving_its_parent_gets_a_lane_of_its_own() {
        // open a, open b, drop a, drop b; then c after both.
        let s = spans(&[(0, 10, None), (5, 40, Some(0)), (50, 60, None)]);
        let lanes = Lanes::assign(&s);
        assert_eq!(lanes.count(), 2);
        assert_eq!(lanes_of(&lanes, 3), [0, 1, 0]);
        assert_eq!(lanes.parent(&s, 1), None);
        check_walk(&lanes, &s);
    }

    #[test]
    fn deeper_out_of_order_drops() {
        // a { b { c, d } }, dropped a, c, b, d; then e inside b after a ended, and f, a child
        // of d that starts after b ended.
        let s = spans(&[
            (0, 30, None),     // a
            (10, 70, Some(0)), // b: outlives a
            (20, 40, Some(1)), // c: outlives a, within b
            (25, 90, Some(2)), // d: outlives c and b
            (45, 50, Some(3)), // e: inside d
            (75, 80, Some(3)), // f: inside d
        ]);
        let lanes = Lanes::assign(&s);
        assert_eq!(lanes_of(&lanes, s.len()), [0, 1, 1, 2, 0, 0]);
        assert_eq!(lanes.count(), 3);
        assert_eq!(lanes.parent(&s, 2), Some(1));
        check_walk(&lanes, &s);
    }

    #[test]
    fn first_in_first_out_drops_need_one_lane_each() {
        // Guards a0..a4 opened in order and dropped in the same order.
        let s: Vec<_> = spans(&[
            (0, 50, None),
            (10, 60, Some(0)),
            (20, 70, Some(1)),
            (30, 80, Some(2)),
            (40, 90, Some(3)),
        ]);
        let lanes = Lanes::assign(&s);
        assert_eq!(lanes_of(&lanes, s.len()), [0, 1, 2, 3, 4]);
        check_walk(&lanes, &s);
    }

    #[test]
    fn touching_spans_are_siblings_and_zero_length_children_stay_inside() {
        let s = spans(&[
            (0, 10, None),     // a
            (5, 20, Some(0)),  // b outlives a: lane 1
            (10, 10, Some(0)), // zero-length child of a at its end: stays in a
            (10, 15, Some(1)), // child of b starting where a ends: lane 0, after a
            (20, 20, None),    // touches b's end and is no child of it
        ]);
        let lanes = Lanes::assign(&s);
        assert_eq!(lanes_of(&lanes, s.len()), [0, 1, 0, 0, 0]);
        assert_eq!(lanes.parent(&s, 2), Some(0));
        assert_eq!(lanes.parent(&s, 3), None);
        check_walk(&lanes, &s);
    }

    #[test]
    fn the_one_lane_walk_is_the_general_walk() {
        // A tree of 200 spans, each the first child of the one before or a sibling of an
        // ancestor, with zero-length and touching spans.
        let mut list: Vec<(u64, u64, Option<u32>)> = Vec::new();
        let mut open: Vec<u32> = Vec::new();
        let mut ends: Vec<u64> = Vec::new();
        let mut ns = 0;
        for i in 0..200u32 {
            for _ in 0..(i * 7 % 4).min(open.len() as u32) {
                let top = open.pop().unwrap();
                ns += u64::from(i % 3);
                ends[top as usize] = ns;
            }
            list.push((ns, 0, open.last().copied()));
            ends.push(0);
            open.push(i);
            ns += u64::from(i % 2);
        }
        while let Some(top) = open.pop() {
            ns += 1;
            ends[top as usize] = ns;
        }
        for (span, end) in list.iter_mut().zip(&ends) {
            span.1 = *end;
        }
        let s = spans(&list);
        let one = Lanes::assign(&s);
        assert!(one.lane.is_empty(), "all nested");
        let general = Lanes {
            lane: vec![0; s.len()],
            parent: s.iter().map(|span| span.parent).collect(),
            count: 1,
        };
        let edges_one = edges(&one, &s);
        assert_eq!(edges_one.len(), 400);
        assert_eq!(edges_one, edges(&general, &s));
        check_walk(&one, &s);
    }
}
