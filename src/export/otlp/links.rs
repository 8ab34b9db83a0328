//! Span links: the ids of the span a link points to (its origin's kept node), and the links
//! of a trace written piece by piece ([`PieceLinks`]).
//!
//! Piece by piece, a link's origin is often in another piece than its follower, on another
//! thread or in an earlier piece of the same one. What a piece's walk decided of each origin
//! (the kept node it is sent as, or sampled out) is kept, a [`Target`] per origin: a thread's
//! origins are decided while it is written, before any later piece of it follows them; the
//! origins on a thread written after a thread that follows them are decided first, by a walk
//! of the threads up to it that sends nothing ([`PieceLinks::ahead`]). A follower's link goes
//! on the node it is sent as, which may be a scope still open at the end of its piece: the
//! link is then carried to the piece where that scope ends.

use std::ops::Range;

use crate::decode::pieces::Piece;
use crate::trace::{Flow, Trace};

use super::map::{Event, NONE, Otlp, Target};
use super::options::Stats;

/// A [`Target`] that stands for an origin sampled out (or on no span).
const SAMPLED_OUT: Target = Target {
    span: u64::MAX,
    trace: u64::MAX,
};

impl Otlp<'_> {
    /// How many spans were sent, folded and sampled out.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The `span_id` of node `i`: unique in the trace, never zero.
    pub(super) fn span_id_bytes(&self, i: u32) -> [u8; 8] {
        self.span_id_of(self.global(i))
    }

    /// The `trace_id` of node `i`.
    pub(super) fn trace_id_bytes(&self, i: u32) -> [u8; 16] {
        self.trace_id_of(self.target(i).trace)
    }

    /// The `span_id` of the node at `global` in the whole trace.
    fn span_id_of(&self, global: u64) -> [u8; 8] {
        ((self.seed << 32) | (global + 1)).to_be_bytes()
    }

    /// The `trace_id` whose low half is `low`.
    fn trace_id_of(&self, low: u64) -> [u8; 16] {
        ((u128::from(self.seed) << 64) | u128::from(low)).to_be_bytes()
    }

    /// The low half of the `trace_id` of root node `i`.
    pub(super) fn trace_low(&self, i: u32) -> u64 {
        self.trace_low_of(i, self.nodes[i as usize].process)
    }

    /// The low half of the `trace_id` of a root node `i` of process `process`.
    pub(super) fn trace_low_of(&self, i: u32, process: u32) -> u64 {
        match self.options.trace_per_process {
            true => (1 << 63) | u64::from(process),
            false => self.global(i) + 1,
        }
    }

    /// Node `i` as the target of a link: where it stands in the whole trace, and its trace.
    pub(super) fn target(&self, i: u32) -> Target {
        let node = &self.nodes[i as usize];
        Target {
            span: self.global(i),
            trace: node.trace,
        }
    }

    /// The `trace_id` and `span_id` of the span link `f` (a flow of `flows`) points to: the
    /// kept node its origin is sent as, if it was recorded and not sampled out.
    pub(super) fn link_ids(&self, f: u32) -> Option<([u8; 16], [u8; 8])> {
        let target = match &self.targets {
            Some(targets) => {
                let at = targets.binary_search_by_key(&f, |&(g, _)| g).ok()?;
                targets[at].1?
            }
            None => {
                let origin = self.flows.get(f as usize)?.origin?;
                let node = self.node_of(origin.thread, origin.span)?;
                match self.nodes[node as usize].rep {
                    NONE => return None,
                    rep => self.target(rep),
                }
            }
        };
        Some((self.trace_id_of(target.trace), self.span_id_of(target.span)))
    }

    /// The node of span `span` of thread `thread`, if both exist.
    pub(super) fn node_of(&self, thread: u32, span: u32) -> Option<u32> {
        let base = *self.thread_base.get(thread as usize)?;
        let len = self.trace.threads[thread as usize].spans.len() as u32;
        (span < len).then_some(base + span)
    }

    /// The events of kept node `i`, in time order.
    pub(super) fn events_of(&self, i: u32) -> &[Event] {
        let from = self.events.partition_point(|e| e.node < i);
        let to = from + self.events[from..].partition_point(|e| e.node == i);
        &self.events[from..to]
    }
}

/// The links of a trace written piece by piece: its flows by the thread and span index of
/// their followers and of their origins, and the [`Target`] of each origin once decided. A
/// few words per flow.
pub(super) struct PieceLinks {
    /// Per thread: (span index, flow) of each follower there, sorted.
    followers: Vec<Vec<(u32, u32)>>,
    /// Per thread: the span index of each origin there (sorted, distinct) and its target
    /// ([`SAMPLED_OUT`] until decided, and when sampled out).
    origins: Vec<Vec<(u32, Target)>>,
    /// How many threads, in the order they are written, hold origins that a thread written
    /// before follows: the walk that decides them ([`PieceLinks::ahead`]) goes that far.
    ahead: usize,
}

impl PieceLinks {
    /// The links of `trace`, whose threads are written in `order`.
    pub(super) fn new(trace: &Trace, order: &[usize]) -> Self {
        let threads = trace.threads.len();
        let mut position = vec![0; threads];
        for (at, &thread) in order.iter().enumerate() {
            position[thread] = at;
        }
        // Each list allocated to its size: a few words a flow, no more.
        let (mut follows, mut begins) = (vec![0; threads], vec![0; threads]);
        for flow in &trace.flows {
            if let Some(n) = follows.get_mut(flow.follower.thread as usize) {
                *n += 1;
            }
            if let Some(n) = flow.origin.and_then(|o| begins.get_mut(o.thread as usize)) {
                *n += 1;
            }
        }
        let mut followers: Vec<Vec<(u32, u32)>> =
            follows.into_iter().map(Vec::with_capacity).collect();
        let mut origins: Vec<Vec<(u32, Target)>> =
            begins.into_iter().map(Vec::with_capacity).collect();
        let mut ahead = 0;
        for (f, flow) in (0u32..).zip(&trace.flows) {
            let follower = flow.follower.thread as usize;
            if let Some(list) = followers.get_mut(follower) {
                list.push((flow.follower.span, f));
            }
            let Some(origin) = flow.origin else { continue };
            let Some(list) = origins.get_mut(origin.thread as usize) else {
                continue;
            };
            list.push((origin.span, SAMPLED_OUT));
            let at = position[origin.thread as usize];
            if follower < threads && at > position[follower] {
                ahead = ahead.max(at + 1);
            }
        }
        for list in &mut followers {
            list.sort_unstable();
        }
        for list in &mut origins {
            list.sort_unstable_by_key(|&(span, _)| span);
            list.dedup_by_key(|&mut (span, _)| span);
        }
        Self {
            followers,
            origins,
            ahead,
        }
    }

    /// How many threads, in the order they are written, to walk before writing, to decide
    /// the origins of links that a thread written earlier follows.
    pub(super) fn ahead(&self) -> usize {
        self.ahead
    }

    /// The origins of thread `thread` that begin in `piece` (mapped as `otlp`): decided.
    pub(super) fn record(&mut self, otlp: &Otlp<'_>, thread: usize, piece: Piece<'_>) {
        let Some(list) = self.origins.get_mut(thread) else {
            return;
        };
        let begun = begun(piece, list, |&(s, _)| s);
        for (span, target) in &mut list[begun] {
            *target = match node(otlp, piece, *span) {
                Some(node) if otlp.nodes[node as usize].rep != NONE => {
                    otlp.target(otlp.nodes[node as usize].rep)
                }
                _ => SAMPLED_OUT,
            };
        }
    }

    /// Gives `otlp`, `piece` of thread `thread` mapped, the links of its kept nodes that end
    /// in it: those of the followers that begin in it, and those carried (`pending`: the
    /// position among the piece's carried spans of the node sent, and the flow) from the
    /// last piece; and leaves in `pending` the links of its nodes still open. Counts the links
    /// to an origin sent in `otlp`'s stats, as the whole trace counts them.
    pub(super) fn link(
        &self,
        flows: &[Flow],
        otlp: &mut Otlp<'_>,
        thread: usize,
        piece: Piece<'_>,
        pending: &mut Vec<(u32, u32)>,
    ) {
        let mut links = Vec::new();
        let mut carried = Vec::new();
        let mut place = |rep: u32, f: u32, otlp: &Otlp<'_>| match otlp.is_open(rep) {
            // Open: the next piece carries it at its position among the open spans.
            true => carried.extend(piece.open.binary_search(&rep).ok().map(|p| (p as u32, f))),
            false => links.push((rep, f)),
        };
        for (rep, f) in pending.drain(..) {
            place(rep, f, otlp);
        }
        if let Some(list) = self.followers.get(thread) {
            for &(span, f) in &list[begun(piece, list, |&(s, _)| s)] {
                let Some(node) = node(otlp, piece, span) else {
                    continue;
                };
                let rep = otlp.nodes[node as usize].rep;
                if rep == NONE {
                    continue;
                }
                if self.target_of(flows, f).is_some() {
                    otlp.stats.links += 1;
                }
                place(rep, f, otlp);
            }
        }
        links.sort_unstable();
        let mut targets: Vec<(u32, Option<Target>)> = (links.iter())
            .map(|&(_, f)| (f, self.target_of(flows, f)))
            .collect();
        targets.sort_unstable_by_key(|&(f, _)| f);
        targets.dedup_by_key(|&mut (f, _)| f);
        otlp.links = links;
        otlp.targets = Some(targets);
        *pending = carried;
    }

    /// The target of the origin of flow `f`, if it has one and it is sent.
    fn target_of(&self, flows: &[Flow], f: u32) -> Option<Target> {
        let origin = flows.get(f as usize)?.origin?;
        let list = self.origins.get(origin.thread as usize)?;
        let at = list.binary_search_by_key(&origin.span, |&(s, _)| s).ok()?;
        Some(list[at].1).filter(|&t| t != SAMPLED_OUT)
    }
}

/// The entries of `list` (sorted by span index, which `span` gives) whose span begins in
/// `piece` (not carried into it).
fn begun<T>(piece: Piece<'_>, list: &[T], span: impl Fn(&T) -> u32) -> Range<usize> {
    let new = (piece.spans.len() - piece.carried.len()) as u32;
    let from = list.partition_point(|e| span(e) < piece.base);
    let to = list.partition_point(|e| span(e) < piece.base.saturating_add(new));
    from..to
}

/// The node of `otlp` (a piece mapped alone) of the span at `span` in its thread, which
/// begins in `piece`.
fn node(otlp: &Otlp<'_>, piece: Piece<'_>, span: u32) -> Option<u32> {
    let at = piece.carried.len() as u32 + span.checked_sub(piece.base)?;
    otlp.node_of(0, at)
}
