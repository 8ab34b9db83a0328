//! The rows a table shows: the flat table's, split or not, and the call tree's.

use std::collections::HashMap;

use crate::capture::Capture;
use crate::decode::pieces::Pieces;
use crate::decode::summary::Summary;
use crate::report::{LiveAtStop, Report, ScopeStats, Split, ThreadKey, percent_of};
use crate::trace::Trace;

use super::format::{format_bytes, format_percent, name_cell};
use super::{Rows, Source, Table};

impl Table {
    /// The rows to print: the call tree's or the flat table's.
    pub(super) fn rows(&self, trace: &Trace, summary: Option<&Summary>) -> Rows<'_> {
        if self.tree {
            self.tree_rows(trace, summary)
        } else {
            self.flat_rows(trace, summary)
        }
    }

    /// The thread's name; in a trace of several processes, after its process's label.
    pub(super) fn thread_name(&self, trace: &Trace, key: Option<ThreadKey>) -> String {
        let Some((process, id)) = key else {
            return String::new();
        };
        let thread = trace
            .threads
            .iter()
            .find(|t| (t.process, t.id) == (process, id));
        let name = thread.map_or_else(String::new, |t| t.display_name());
        if trace.processes.len() > 1 {
            format!("{}/{name}", trace.process_label(process))
        } else {
            name
        }
    }

    /// The report of `trace` (from `summary` when given) the flat table shows: split by
    /// argument or by origin (of captures with links: without, there is nothing to split),
    /// from the captures' spans decoded piece by piece.
    pub(super) fn report(&self, trace: &Trace, summary: Option<&Summary>) -> Report {
        let split = self.split();
        match (summary, split) {
            (Some(summary), Split::Arg(_)) | (Some(summary), Split::Origin)
                if split != Split::Origin || summary.follows() =>
            {
                if let Source::Captures(c) = &self.source {
                    let captures: Vec<&Capture> = c.captures.iter().map(|c| &**c).collect();
                    if summary.streamed_calls {
                        // The calls matched again, each labelled by its polls; where that
                        // cannot be (not expected), the decoded trace's.
                        let mut report = Report::split_with_calls_of(&captures, summary, split)
                            .unwrap_or_else(|| {
                                let trace = c
                                    .trace
                                    .get_or_init(|| Trace::from_captures(captures.iter().copied()));
                                Report::build(trace, false, split)
                            });
                        report.live_at_stop = live_at_stop(trace, Some(summary));
                        return report;
                    }
                    if let Some(pieces) = Pieces::of_summary(&captures, summary) {
                        let mut report = match split {
                            Split::Arg(key) => Report::by_arg_of(&pieces, key, summary.exact),
                            _ => Report::by_origin_of(&pieces, summary),
                        };
                        report.live_at_stop = live_at_stop(trace, Some(summary));
                        return report;
                    }
                }
                // Not expected: the summary is of the captures, and has no `tracing` span
                // following from one entered elsewhere ([`Table::view`]).
                debug_assert!(false, "the pieces of a table's summary");
                Report::build(trace, self.by_thread, split)
            }
            (Some(summary), _) => Report::from_summary(summary, self.by_thread),
            (None, split) => Report::build(trace, self.by_thread, split),
        }
    }

    /// The rows of `report` the flat table shows: sorted, and limited (per thread).
    pub(super) fn selected<'r>(&self, report: &'r Report) -> Vec<&'r ScopeStats> {
        let mut rows: Vec<&ScopeStats> = report.rows().iter().collect();
        let sort = self.sort;
        rows.sort_by(|a, b| a.cmp_by(b, |row| sort.key(row)));
        let mut shown: HashMap<Option<ThreadKey>, usize> = HashMap::new();
        rows.retain(|row| {
            let n = shown.entry(row.process_thread()).or_default();
            *n += 1;
            self.limit.is_none_or(|limit| *n <= limit)
        });
        rows
    }

    /// The rows of the report of `trace` (from `summary` when given), sorted and limited.
    fn flat_rows(&self, trace: &Trace, summary: Option<&Summary>) -> Rows<'_> {
        let split = self.split();
        let report = self.report(trace, summary);
        // Async calls get the time their polls ran beside their wall time.
        let busy = report.rows().iter().any(|r| r.busy_ns.is_some());
        let mut out = Vec::new();
        let mut open = 0;
        let selected = self.selected(&report);
        let hidden = report.rows().len() - selected.len();
        for row in selected {
            open += row.open_at_stop;
            let mut cells = Vec::with_capacity(17);
            if self.by_thread {
                cells.push(self.thread_name(trace, row.process_thread()));
            }
            cells.push(name_cell(row.name, 0, false, row.open_at_stop));
            match split {
                Split::None => {}
                Split::Origin => cells.push(row.caused_by.unwrap_or("").to_owned()),
                Split::Arg(_) => cells.push(row.arg.clone().unwrap_or_default()),
            }
            cells.push(row.calls.to_string());
            cells.push(self.unit.format(row.total_ns as f64));
            cells.push(format_percent(row.total_percent));
            cells.push(self.unit.format(row.self_ns as f64));
            cells.push(format_percent(row.self_percent));
            if busy {
                match row.busy_ns {
                    Some(ns) => {
                        cells.push(self.unit.format(ns as f64));
                        cells.push(format_percent(percent_of(ns, row.total_ns)));
                    }
                    None => cells.extend([String::new(), String::new()]),
                }
            }
            for ns in [row.avg_ns(), row.min_ns, row.max_ns, row.p50_ns, row.p99_ns] {
                cells.push(self.unit.format(ns as f64));
            }
            if let Some(m) = row.memory {
                cells.push(format_bytes(m.alloc_bytes));
                cells.push(format_bytes(m.self_alloc_bytes));
                cells.push(m.allocs.to_string());
                cells.push(format_bytes(m.freed_bytes));
                cells.push(format_bytes(m.peak_bytes));
            }
            out.push(cells);
        }
        let mut headers = vec!["Name"];
        match split {
            Split::None => {}
            Split::Origin => headers.push("Caused by"),
            Split::Arg(key) => headers.push(key),
        }
        let left = headers.len();
        headers.extend(["Calls", "Total", "Total %", "Self", "Self %"]);
        if busy {
            headers.extend(["Busy", "Busy %"]);
        }
        headers.extend(["Avg", "Min", "Max", "P50", "P99"]);
        if trace.memory.is_some() {
            headers.extend(["Alloc", "Self alloc", "Allocs", "Freed", "Peak"]);
        }
        self.with_thread_column(Rows {
            headers,
            rows: out,
            left,
            open,
            scope_ns: report.scope_ns,
            hidden,
            busy,
            live: report.live_at_stop,
        })
    }

    /// The call tree's nodes, depth first, limited.
    fn tree_rows(&self, trace: &Trace, summary: Option<&Summary>) -> Rows<'_> {
        let tree = self.call_tree(trace);
        let mut out = Vec::new();
        let mut open = 0;
        let shown = tree.nodes.len().min(self.limit.unwrap_or(usize::MAX));
        for (node, depth) in tree.walk().take(shown) {
            open += node.open;
            let mut cells = Vec::with_capacity(6);
            if self.by_thread {
                cells.push(if depth == 0 {
                    self.thread_name(trace, node.thread)
                } else {
                    String::new()
                });
            }
            cells.push(name_cell(node.name, depth, node.poll, node.open));
            cells.push(node.calls.to_string());
            cells.push(self.unit.format(node.total_ns as f64));
            cells.push(format_percent(node.total_percent));
            cells.push(self.unit.format(node.self_ns as f64));
            cells.push(format_percent(node.self_percent));
            out.push(cells);
        }
        self.with_thread_column(Rows {
            headers: vec!["Call tree", "Calls", "Total", "Total %", "Self", "Self %"],
            rows: out,
            left: 1,
            open,
            scope_ns: tree.scope_ns,
            hidden: tree.nodes.len() - shown,
            busy: false,
            live: live_at_stop(trace, summary),
        })
    }

    /// `rows` with the "Thread" header in front when split by thread (the cells are there).
    fn with_thread_column<'a>(&self, mut rows: Rows<'a>) -> Rows<'a> {
        if self.by_thread {
            rows.headers.insert(0, "Thread");
            rows.left += 1;
        }
        rows
    }
}

/// The memory live at stop of `trace`; of the trace of `summary` (which holds no memory
/// events), the summary's.
fn live_at_stop(trace: &Trace, summary: Option<&Summary>) -> Vec<LiveAtStop> {
    match summary {
        Some(summary) if trace.memory.is_some() => {
            LiveAtStop::sorted(summary.live_at_end.0.clone())
        }
        _ => LiveAtStop::of(trace),
    }
}
