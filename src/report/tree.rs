//! The call tree: spans merged by call path, each distinct path once.

use std::collections::HashMap;

use super::{ThreadKey, percent_of, rank};
use crate::decode::pieces::{SpanSource, Want};
use crate::trace::{Span, SpanKind, Trace};

/// One call path: the spans of one name under one parent node (and, split by thread, on one
/// thread).
pub(crate) struct Node {
    pub(crate) name: &'static str,
    /// The thread (process and id), when the tree is split by thread.
    pub(crate) thread: Option<ThreadKey>,
    /// Spans merged here: calls, or polls when `poll`.
    pub(crate) calls: u64,
    pub(crate) total_ns: u64,
    /// Total minus the time of the direct children.
    pub(crate) self_ns: u64,
    /// `total_ns` as a percentage of [`CallTree::scope_ns`].
    pub(crate) total_percent: f64,
    /// `self_ns` as a percentage of [`CallTree::scope_ns`].
    pub(crate) self_percent: f64,
    /// Spans still open at stop.
    pub(crate) open: u64,
    /// Child nodes, sorted like the roots.
    pub(crate) children: Vec<usize>,
    /// Polls of an async call rather than calls.
    pub(crate) poll: bool,
}

/// Spans merged by call path. Siblings (and roots) sort by thread, then by total time, most
/// first, then by name.
pub(crate) struct CallTree {
    pub(crate) nodes: Vec<Node>,
    pub(crate) roots: Vec<usize>,
    /// The time in scopes: the self times of every node summed, the base of the nodes'
    /// percentages.
    pub(crate) scope_ns: u64,
}

impl CallTree {
    /// The call tree of `trace`, with one tree per thread when `split_threads`.
    pub(crate) fn new(trace: &Trace, split_threads: bool) -> Self {
        Self::from_source(trace, split_threads)
    }

    /// The call tree of the trace of `source`, its threads' spans taken piece by piece
    /// ([`SpanSource::each_piece`]): in memory bounded by the nodes and a piece.
    pub(crate) fn from_source(source: &dyn SpanSource, split_threads: bool) -> Self {
        let trace = source.trace();
        let mut tree = Self {
            nodes: Vec::new(),
            roots: Vec::new(),
            scope_ns: 0,
        };
        // (parent node, thread, name, is a poll) -> node
        type Key = (Option<usize>, Option<ThreadKey>, &'static str, bool);
        let mut index: HashMap<Key, usize> = HashMap::new();
        let mut children_ns: Vec<u64> = Vec::new();
        for (at, thread) in trace.threads.iter().enumerate() {
            let thread_key = split_threads.then_some((thread.process, thread.id));
            let mut node_of_span: Vec<usize> = Vec::new();
            // The nodes of the spans open at the end of the last piece: its carried spans.
            let mut carried: Vec<usize> = Vec::new();
            // A piece's spans' parents are in it (its carried spans first).
            let each = source.each_piece(at, Want::ALL, &mut |piece| {
                debug_assert_eq!(carried.len(), piece.carried.len());
                node_of_span.clear();
                node_of_span.extend_from_slice(&carried);
                let carried_spans = piece.carried.len();
                for (i, span) in (0..).zip(piece.spans).skip(carried_spans) {
                    let parent = span.parent.map(|p| node_of_span[p as usize]);
                    let poll = matches!(span.kind, SpanKind::Poll { .. });
                    let key = (parent, thread_key, span.name(), poll);
                    let node = *index.entry(key).or_insert_with(|| {
                        tree.nodes.push(Node {
                            name: span.name(),
                            poll,
                            thread: thread_key,
                            calls: 0,
                            total_ns: 0,
                            self_ns: 0,
                            total_percent: 0.0,
                            self_percent: 0.0,
                            open: 0,
                            children: Vec::new(),
                        });
                        children_ns.push(0);
                        let new = tree.nodes.len() - 1;
                        match parent {
                            Some(p) => tree.nodes[p].children.push(new),
                            None => tree.roots.push(new),
                        }
                        new
                    });
                    node_of_span.push(node);
                    // An open span is counted in the piece where it ends.
                    if !piece.is_open(i) {
                        add(&mut tree.nodes[node], &mut children_ns[node], span);
                    }
                }
                for (i, span) in (0..).zip(piece.spans).take(carried_spans) {
                    if !piece.is_open(i) {
                        let node = node_of_span[i as usize];
                        add(&mut tree.nodes[node], &mut children_ns[node], span);
                    }
                }
                carried.clear();
                carried.extend(piece.open.iter().map(|&i| node_of_span[i as usize]));
                Ok(())
            });
            // Adding a piece never fails, so neither does taking them: an error could only
            // be one the closure returned.
            debug_assert!(each.is_ok());
        }
        for (node, children_ns) in tree.nodes.iter_mut().zip(children_ns) {
            node.self_ns = node.total_ns.saturating_sub(children_ns);
            tree.scope_ns = tree.scope_ns.saturating_add(node.self_ns);
        }
        for node in &mut tree.nodes {
            node.total_percent = percent_of(node.total_ns, tree.scope_ns);
            node.self_percent = percent_of(node.self_ns, tree.scope_ns);
        }
        let ranks: Vec<_> = (tree.nodes.iter())
            .map(|n| rank(n.thread, n.total_ns, n.name))
            .collect();
        for node in &mut tree.nodes {
            node.children.sort_by_key(|&child| ranks[child]);
        }
        tree.roots.sort_by_key(|&root| ranks[root]);
        tree
    }

    /// Every node with its depth, depth first: each node before its children, siblings in
    /// order.
    pub(crate) fn walk(&self) -> impl Iterator<Item = (&Node, usize)> {
        let mut stack: Vec<(usize, usize)> = self.roots.iter().rev().map(|&r| (r, 0)).collect();
        std::iter::from_fn(move || {
            let (index, depth) = stack.pop()?;
            let node = &self.nodes[index];
            stack.extend(node.children.iter().rev().map(|&c| (c, depth + 1)));
            Some((node, depth))
        })
    }
}

/// Counts the ended `span` in `node`, whose children's time so far is `children_ns`.
fn add(node: &mut Node, children_ns: &mut u64, span: &Span) {
    node.calls += 1;
    // Saturating, as the report's sums: a forged capture file may hold any duration.
    node.total_ns = node.total_ns.saturating_add(span.duration_ns());
    node.open += u64::from(span.open_at_stop);
    *children_ns = children_ns.saturating_add(span.children_ns);
}
