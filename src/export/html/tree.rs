//! The report's call tree: spans merged by path, one tree per thread, as JSON columns.

use crate::record::hash::FxHashMap;
use crate::table::json_string;
use crate::trace::Span;

use super::encode::sep;

/// The call tree merged by path, one tree per thread: columns of nodes (parent node or -1,
/// thread, name, whether the node is the polls of an async call (shown `(poll)`, as in the
/// table's tree), calls, total and self ns), parents before children, numbered in the order
/// their first span began.
#[derive(Default)]
pub(super) struct TreeCols {
    index: FxHashMap<(i64, u32, u32, bool), u32>,
    parent: Vec<i64>,
    thread: Vec<u32>,
    name: Vec<u32>,
    poll: Vec<bool>,
    calls: Vec<u64>,
    total: Vec<u64>,
    self_ns: Vec<u64>,
}

impl TreeCols {
    /// The node of a span of name `name` (its index) on thread `thread`, under node `parent`
    /// (-1 for none); a poll of an async call when `poll`.
    pub(super) fn node(&mut self, parent: i64, thread: u32, name: u32, poll: bool) -> u32 {
        let key = (parent, thread, name, poll);
        if let Some(&node) = self.index.get(&key) {
            return node;
        }
        let node = self.parent.len() as u32;
        self.parent.push(parent);
        self.thread.push(thread);
        self.name.push(name);
        self.poll.push(poll);
        self.calls.push(0);
        self.total.push(0);
        self.self_ns.push(0);
        self.index.insert(key, node);
        node
    }

    /// Counts `span` (ended) in `node`.
    pub(super) fn add(&mut self, node: u32, span: &Span) {
        let n = node as usize;
        self.calls[n] += 1;
        // Saturating: a forged capture file may hold any duration.
        self.total[n] = self.total[n].saturating_add(span.duration_ns());
        self.self_ns[n] = self.self_ns[n].saturating_add(span.self_ns());
    }

    /// The columns as a JSON object.
    pub(super) fn json(&self, j: &mut String) {
        let list = |j: &mut String, key: &str, items: &mut dyn Iterator<Item = String>| {
            j.push_str(&format!("{}:[", json_string(key)));
            for (i, item) in items.enumerate() {
                sep(j, i);
                j.push_str(&item);
            }
            j.push(']');
        };
        j.push('{');
        list(
            j,
            "parent",
            &mut self.parent.iter().map(ToString::to_string),
        );
        j.push(',');
        list(
            j,
            "thread",
            &mut self.thread.iter().map(ToString::to_string),
        );
        j.push(',');
        list(j, "name", &mut self.name.iter().map(ToString::to_string));
        j.push(',');
        list(
            j,
            "poll",
            &mut self.poll.iter().map(|&p| u8::from(p).to_string()),
        );
        j.push(',');
        list(j, "calls", &mut self.calls.iter().map(ToString::to_string));
        j.push(',');
        list(
            j,
            "total_ns",
            &mut self.total.iter().map(ToString::to_string),
        );
        j.push(',');
        list(
            j,
            "self_ns",
            &mut self.self_ns.iter().map(ToString::to_string),
        );
        j.push('}');
    }
}
