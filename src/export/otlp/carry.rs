//! What a piece of a thread with open spans carries into the next when mapped to OTLP
//! ([`Otlp::with_carried`](super::Otlp)), and the order spans are sent in: each after the
//! spans inside it.

use crate::trace::Span;

/// The state of a node open at the end of the last piece of its thread, carried into the
/// next piece (where it is one of the first nodes, in the same order): what its walk decided.
#[derive(Clone, Copy, Debug)]
pub(super) struct Carry {
    /// The carried node it is sent as (its position among the carried), `NONE` when sampled
    /// out.
    pub(super) rep: u32,
    /// The low half of its `trace_id` ([`Node::trace`](super::map::Node)).
    pub(super) trace: u64,
    pub(super) depth: u32,
    pub(super) folded_count: u64,
    pub(super) folded_ns: u64,
}

/// What a piece of a thread with open spans ([`Piece`](crate::decode::pieces::Piece)) is
/// mapped with: its first nodes' state from the last piece, its open nodes, and where each of
/// its nodes stands in the whole trace.
#[derive(Debug, Default)]
pub(super) struct Carried {
    /// The state of the first `seeds.len()` nodes (carried spans): not walked again.
    pub(super) seeds: Vec<Carry>,
    /// The nodes still open at the end of the piece (sorted): not sent, their folded time
    /// not counted yet.
    pub(super) open: Vec<u32>,
    /// The index in the whole trace of each node (empty: [`Start::node`](super::map::Start::node) plus its index).
    pub(super) global: Vec<u32>,
    /// Spans of the whole trace outside the piece that are the parents of some of its nodes
    /// (an async call, of its polls; the span around a call's first poll, of the call):
    /// nodes after the piece's own, never sent.
    pub(super) elsewhere: Vec<Elsewhere>,
    /// The nodes whose parent is elsewhere, and which (its index in `elsewhere`).
    pub(super) parents: Vec<(u32, u32)>,
}

/// A span of the whole trace outside the piece mapped ([`Carried::elsewhere`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Elsewhere {
    /// Its index in the whole trace.
    pub(super) global: u64,
    /// The low half of its `trace_id`.
    pub(super) trace: u64,
}

/// The indices of `spans` (in the order they began, parents first) in the order they end:
/// each after the spans inside it, a span's parent being the span it began in. (A forged
/// parent that does not come before ends the spans open then.)
pub(super) fn end_order(spans: &[Span]) -> Vec<u32> {
    let mut order = Vec::with_capacity(spans.len());
    let mut open: Vec<u32> = Vec::new();
    for (s, span) in (0u32..).zip(spans) {
        let parent = span.parent.filter(|&p| p < s);
        while let Some(&top) = open.last() {
            if Some(top) == parent {
                break;
            }
            order.push(top);
            open.pop();
        }
        open.push(s);
    }
    order.extend(open.into_iter().rev());
    order
}
