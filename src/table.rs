//! The text table of [`Profiler::table`](crate::Profiler::table): flat, per thread, or as a
//! call tree.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::report::{LiveAtStop, Report, ScopeStats};
use crate::trace::{SpanKind, Trace};

/// Column to sort a [`Table`] by. Names sort ascending, everything else descending.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Scope name.
    Name,
    /// Number of calls.
    Calls,
    /// Total time (the default).
    #[default]
    Total,
    /// Self time.
    SelfTime,
    /// Mean duration.
    Avg,
    /// Shortest call.
    Min,
    /// Longest call.
    Max,
    /// Median duration.
    P50,
    /// 99th-percentile duration.
    P99,
    /// Bytes allocated, child scopes included (0 without memory tracking).
    Alloc,
    /// Bytes allocated by the scope itself.
    SelfAlloc,
    /// Peak live bytes of a call.
    Peak,
}

impl SortBy {
    fn key(self, row: &ScopeStats) -> u64 {
        match self {
            Self::Name => 0,
            Self::Calls => row.calls,
            Self::Total => row.total_ns,
            Self::SelfTime => row.self_ns,
            Self::Avg => row.avg_ns(),
            Self::Min => row.min_ns,
            Self::Max => row.max_ns,
            Self::P50 => row.p50_ns,
            Self::P99 => row.p99_ns,
            Self::Alloc => row.memory.map_or(0, |m| m.alloc_bytes),
            Self::SelfAlloc => row.memory.map_or(0, |m| m.self_alloc_bytes),
            Self::Peak => row.memory.map_or(0, |m| m.peak_bytes),
        }
    }
}

/// A printable table of a session's scopes; build it with [`Profiler::table`](crate::Profiler::table)
/// and adjust it with the builder methods, then print it with `{}`.
///
/// Columns: name, calls, total, self, avg, min, max, p50, p99 and total as a percentage of the
/// session's wall time. A `*` after a name marks scopes still open at stop. When the session
/// tracked memory, five more: bytes allocated (child scopes included), bytes allocated by the
/// scope itself, allocation count, bytes freed and the largest call's peak; and below the
/// table, the memory still live at stop by allocating scope.
///
/// The footer gives the wall time, threads, scopes and dropped events, and for a table made
/// by [`Profiler::table`](crate::Profiler::table), the observer callbacks that panicked in the
/// window ([`Report::observer_panics`]) if there were any.
#[must_use]
#[derive(Clone, Debug)]
pub struct Table {
    trace: Arc<Trace>,
    sort: SortBy,
    limit: Option<usize>,
    by_thread: bool,
    by_origin: bool,
    tree: bool,
    /// Shown in the footer when not 0.
    observer_panics: u64,
}

impl Table {
    /// A table of `trace`, sorted by total time.
    pub fn new(trace: Arc<Trace>) -> Self {
        Self {
            trace,
            sort: SortBy::Total,
            limit: None,
            by_thread: false,
            by_origin: false,
            tree: false,
            observer_panics: 0,
        }
    }

    /// Counts `panics` observer callback panics in the footer (when not 0).
    pub(crate) fn with_observer_panics(mut self, panics: u64) -> Self {
        self.observer_panics = panics;
        self
    }

    /// Sorts rows by `column`.
    pub fn sort_by(mut self, column: SortBy) -> Self {
        self.sort = column;
        self
    }

    /// Shows at most `rows` rows (per thread when split by thread).
    pub fn limit(mut self, rows: usize) -> Self {
        self.limit = Some(rows);
        self
    }

    /// One row per (thread, name) instead of one per name.
    pub fn by_thread(mut self, split: bool) -> Self {
        self.by_thread = split;
        self
    }

    /// Splits the rows of scopes that followed from a [`Link`](crate::Link) by the scope the
    /// link was captured in, shown in a "Caused by" column (see
    /// [`Report::by_origin`]). Ignored when split by thread.
    pub fn by_origin(mut self, split: bool) -> Self {
        self.by_origin = split;
        self
    }

    /// Shows the call tree: each distinct call path once, indented under its caller, with its
    /// calls, total and self time. Children sort by total time. The polls of an async call
    /// appear where they ran, marked `(poll)`, and count polls rather than calls.
    pub fn tree(mut self, tree: bool) -> Self {
        self.tree = tree;
        self
    }

    fn thread_name(&self, id: Option<u64>) -> String {
        let thread = id.and_then(|id| self.trace.threads.iter().find(|t| t.id == id));
        thread.map_or_else(String::new, |t| t.display_name())
    }

    /// Headers, rows, calls open at stop, and the leak view.
    fn flat_rows(&self) -> (Vec<&'static str>, Vec<Vec<String>>, u64, Vec<LiveAtStop>) {
        let by_origin = self.by_origin && !self.by_thread;
        let report = if self.by_thread {
            Report::by_thread(&self.trace)
        } else if by_origin {
            Report::by_origin(&self.trace)
        } else {
            Report::new(&self.trace)
        };
        let mut rows: Vec<&ScopeStats> = report.rows().iter().collect();
        let sort = self.sort;
        rows.sort_by(|a, b| {
            let by_key = match sort {
                SortBy::Name => a.name.cmp(b.name),
                _ => sort.key(b).cmp(&sort.key(a)).then(a.name.cmp(b.name)),
            };
            a.thread
                .cmp(&b.thread)
                .then(by_key)
                .then(a.caused_by.cmp(&b.caused_by))
        });
        let mut shown: HashMap<Option<u64>, usize> = HashMap::new();
        let mut out = Vec::new();
        let mut open = 0;
        for row in rows {
            let n = shown.entry(row.thread).or_default();
            if self.limit.is_some_and(|limit| *n >= limit) {
                continue;
            }
            *n += 1;
            open += row.open_at_stop;
            let mut cells = Vec::with_capacity(11);
            if self.by_thread {
                cells.push(self.thread_name(row.thread));
            }
            let marker = if row.open_at_stop > 0 { " *" } else { "" };
            cells.push(format!("{}{marker}", row.name));
            if by_origin {
                cells.push(row.caused_by.unwrap_or("").to_owned());
            }
            cells.push(row.calls.to_string());
            for ns in [
                row.total_ns,
                row.self_ns,
                row.avg_ns(),
                row.min_ns,
                row.max_ns,
                row.p50_ns,
                row.p99_ns,
            ] {
                cells.push(format_ns(ns));
            }
            cells.push(format!("{:.1}", row.percent));
            if let Some(m) = row.memory {
                cells.push(format_bytes(m.alloc_bytes));
                cells.push(format_bytes(m.self_alloc_bytes));
                cells.push(m.allocs.to_string());
                cells.push(format_bytes(m.freed_bytes));
                cells.push(format_bytes(m.peak_bytes));
            }
            out.push(cells);
        }
        let mut headers = vec![
            "Name", "Calls", "Total", "Self", "Avg", "Min", "Max", "P50", "P99", "%",
        ];
        if self.trace.memory.is_some() {
            headers.extend(["Alloc", "Self alloc", "Allocs", "Freed", "Peak"]);
        }
        if by_origin {
            headers.insert(1, "Caused by");
        }
        if self.by_thread {
            headers.insert(0, "Thread");
        }
        (headers, out, open, report.live_at_stop)
    }

    fn tree_rows(&self) -> (Vec<&'static str>, Vec<Vec<String>>, u64, Vec<LiveAtStop>) {
        let tree = CallTree::build(&self.trace, self.by_thread);
        let wall = self.trace.wall_ns();
        let mut out = Vec::new();
        let mut open = 0;
        let mut stack: Vec<(usize, usize)> = tree.roots.iter().rev().map(|&r| (r, 0)).collect();
        while let Some((index, depth)) = stack.pop() {
            if self.limit.is_some_and(|limit| out.len() >= limit) {
                break;
            }
            let node = &tree.nodes[index];
            open += node.open;
            let marker = if node.open > 0 { " *" } else { "" };
            let mut cells = Vec::with_capacity(6);
            if self.by_thread {
                cells.push(if depth == 0 {
                    self.thread_name(node.thread)
                } else {
                    String::new()
                });
            }
            let poll = if node.poll { " (poll)" } else { "" };
            cells.push(format!("{}{}{poll}{marker}", "  ".repeat(depth), node.name));
            cells.push(node.calls.to_string());
            cells.push(format_ns(node.total_ns));
            cells.push(format_ns(node.total_ns.saturating_sub(node.children_ns)));
            let pct = if wall == 0 {
                0.0
            } else {
                node.total_ns as f64 * 100.0 / wall as f64
            };
            cells.push(format!("{pct:.1}"));
            out.push(cells);
            stack.extend(node.children.iter().rev().map(|&c| (c, depth + 1)));
        }
        let mut headers = vec!["Call tree", "Calls", "Total", "Self", "%"];
        if self.by_thread {
            headers.insert(0, "Thread");
        }
        (headers, out, open, LiveAtStop::of(&self.trace))
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (headers, rows, open, leaks) = if self.tree {
            self.tree_rows()
        } else {
            self.flat_rows()
        };
        let name_columns = if self.by_thread || (self.by_origin && !self.tree) {
            2
        } else {
            1
        };
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[&str]| -> fmt::Result {
            for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
                let sep = if i == 0 { "" } else { "  " };
                if i < name_columns {
                    write!(f, "{sep}{cell:<width$}")?;
                } else {
                    write!(f, "{sep}{cell:>width$}")?;
                }
            }
            writeln!(f)
        };
        line(f, &headers)?;
        let total_width = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
        writeln!(f, "{}", "-".repeat(total_width))?;
        for row in &rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            line(f, &cells)?;
        }
        let trace = &self.trace;
        let scopes: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
        write!(
            f,
            "{} wall, {} thread{}, {} scope{}, {} dropped event{}",
            format_ns(trace.wall_ns()),
            trace.threads.len(),
            plural(trace.threads.len() as u64),
            scopes,
            plural(scopes as u64),
            trace.dropped_events,
            plural(trace.dropped_events),
        )?;
        let panics = self.observer_panics;
        if panics > 0 {
            write!(f, ", {panics} observer panic{}", plural(panics))?;
        }
        writeln!(f)?;
        if open > 0 {
            writeln!(
                f,
                "* {open} call{} still open at stop, closed at the stop time",
                plural(open)
            )?;
        }
        if !leaks.is_empty() {
            writeln!(f, "Live at stop (allocated in the window, not freed):")?;
            let names: Vec<&str> = leaks
                .iter()
                .map(|l| l.scope.unwrap_or("(no scope)"))
                .collect();
            let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
            for (leak, name) in leaks.iter().zip(names) {
                writeln!(
                    f,
                    "  {name:<width$}  {:>10} in {} allocation{}",
                    format_bytes(leak.bytes),
                    leak.allocs,
                    plural(leak.allocs)
                )?;
            }
        }
        Ok(())
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Formats a duration with a unit that keeps 3 to 4 significant digits.
pub fn format_ns(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.2} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// Formats a byte count: exact below 1 KiB, else with a binary unit and 3 to 4 digits.
pub fn format_bytes(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match bytes {
        0..KIB => format!("{bytes} B"),
        KIB..MIB => format!("{:.2} KiB", bytes as f64 / KIB as f64),
        MIB..GIB => format!("{:.2} MiB", bytes as f64 / MIB as f64),
        _ => format!("{:.2} GiB", bytes as f64 / GIB as f64),
    }
}

struct Node {
    name: &'static str,
    thread: Option<u64>,
    calls: u64,
    total_ns: u64,
    children_ns: u64,
    open: u64,
    children: Vec<usize>,
    /// Polls of an async call rather than calls.
    poll: bool,
}

/// Spans merged by call path.
struct CallTree {
    nodes: Vec<Node>,
    roots: Vec<usize>,
}

impl CallTree {
    fn build(trace: &Trace, split_threads: bool) -> Self {
        let mut tree = Self {
            nodes: Vec::new(),
            roots: Vec::new(),
        };
        // (parent node, thread, name, is a poll) -> node
        type Key = (Option<usize>, Option<u64>, &'static str, bool);
        let mut index: HashMap<Key, usize> = HashMap::new();
        for thread in &trace.threads {
            let thread_key = split_threads.then_some(thread.id);
            let mut node_of_span: Vec<usize> = Vec::with_capacity(thread.spans.len());
            for span in &thread.spans {
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
                        children_ns: 0,
                        open: 0,
                        children: Vec::new(),
                    });
                    let new = tree.nodes.len() - 1;
                    match parent {
                        Some(p) => tree.nodes[p].children.push(new),
                        None => tree.roots.push(new),
                    }
                    new
                });
                let n = &mut tree.nodes[node];
                n.calls += 1;
                n.total_ns += span.duration_ns();
                n.children_ns += span.children_ns;
                n.open += u64::from(span.open_at_stop);
                node_of_span.push(node);
            }
        }
        let nodes = &tree.nodes;
        let by_total = |a: &usize, b: &usize| {
            let (a, b) = (&nodes[*a], &nodes[*b]);
            a.thread
                .cmp(&b.thread)
                .then(b.total_ns.cmp(&a.total_ns))
                .then(a.name.cmp(b.name))
        };
        let mut order: Vec<Vec<usize>> = nodes.iter().map(|n| n.children.clone()).collect();
        for children in &mut order {
            children.sort_by(by_total);
        }
        tree.roots.sort_by(by_total);
        for (node, children) in tree.nodes.iter_mut().zip(order) {
            node.children = children;
        }
        tree
    }
}

#[cfg(test)]
mod tests {
    use super::{format_bytes, format_ns};

    #[test]
    fn byte_units() {
        assert_eq!(format_bytes(1000), "1000 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(3 << 20), "3.00 MiB");
        assert_eq!(format_bytes(5 << 30), "5.00 GiB");
    }

    #[test]
    fn units() {
        assert_eq!(format_ns(999), "999 ns");
        assert_eq!(format_ns(1_500), "1.50 µs");
        assert_eq!(format_ns(2_345_678), "2.35 ms");
        assert_eq!(format_ns(3_000_000_000), "3.000 s");
    }
}
