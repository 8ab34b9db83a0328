//! What the text table writes: its grid, then the footer and the counter and value sections.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::decode::quantiles::{RELATIVE_ERROR, exact_budget};
use crate::decode::summary::Summary;
use crate::record::clock::ClockSource;
use crate::record::memory::MemoryMode;
use crate::report::{CounterStats, Report, ValueStats};
use crate::trace::{Compensation, SpanKind, Trace};

use super::format::{format_bytes, format_float, format_ns, format_number, plural};
use super::grid::{Align, Grid};
use super::sort::SortBy;
use super::{COMPILED_OUT, COMPILED_OUT_COLLECTORS, Rows, Table};

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (trace, summary) = self.view();
        let rows = self.rows(trace, summary);
        Grid::new(rows.left).write(f, &rows.headers, &rows.rows)?;
        self.footer(f, trace, summary, &rows)
    }
}

/// The lines the table of `trace` writes under its rows (the footer of
/// [`Table::new`]`(trace)`: wall time, threads, scopes, dropped events, salvage, compensation,
/// clock, memory, open calls, live at stop, counters and values), for reports that show it
/// elsewhere (the HTML report's Session view). `report` is `Report::new(trace)`; of a trace
/// without spans made from `summary` (its [`Summary::trace`]), `Report::from_summary`.
pub(crate) fn footer_text(trace: &Trace, summary: Option<&Summary>, report: &Report) -> String {
    let table = Table::new(Arc::new(Trace::empty()));
    let rows = Rows {
        headers: Vec::new(),
        rows: Vec::new(),
        left: 0,
        open: report.rows().iter().map(|r| r.open_at_stop).sum(),
        live: report.live_at_stop.clone(),
        scope_ns: report.scope_ns,
        hidden: 0,
        busy: false,
    };
    let mut out = String::new();
    // Writing to a `String` cannot fail.
    let _ = table.footer(&mut out, trace, summary, &rows);
    out
}

impl Table {
    /// The lines under the summary line that say what the percentages are shares of and how
    /// many rows the limit hid (each only when it has something to say).
    pub(super) fn notes(&self, rows: &Rows<'_>) -> Vec<String> {
        let mut notes = Vec::new();
        if !rows.rows.is_empty() {
            let mut note = format!(
                "Total % and Self %: of {} in scopes, all threads (every row's Self added up",
                format_ns(rows.scope_ns)
            );
            note.push_str(if rows.busy {
                "; async calls count their Busy time); Busy %: of the row's Total"
            } else {
                ")"
            });
            notes.push(note);
        }
        if rows.hidden > 0 {
            let what = if self.tree { "node" } else { "row" };
            let per = if self.by_thread && !self.tree {
                " per thread"
            } else {
                ""
            };
            notes.push(format!(
                "{} {what}{} hidden by the limit of {}{per}",
                rows.hidden,
                plural(rows.hidden as u64),
                self.limit.unwrap_or(0),
            ));
        }
        notes
    }

    /// What the text table writes under its rows: the summary line, what the percentages are
    /// of, the rows the limit hid, salvage, errors, compensation, clock, memory, open calls,
    /// live at stop, counters and values.
    pub(super) fn footer(
        &self,
        f: &mut dyn fmt::Write,
        trace: &Trace,
        summary: Option<&Summary>,
        rows: &Rows<'_>,
    ) -> fmt::Result {
        let (open, live) = (rows.open, &rows.live);
        // Scopes are calls of plain scopes; an async call counts once, its poll slices apart.
        let (scopes, polls) = match summary {
            Some(summary) => (summary.spans() - summary.polls(), summary.polls()),
            None => {
                let spans = trace.threads.iter().flat_map(|t| &t.spans);
                let polls = spans.filter(|s| s.kind != SpanKind::Scope).count();
                let all: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
                (all - polls, polls)
            }
        };
        // A session of a build without `enabled`: with no collector's events, its counts are
        // zeros that mean nothing.
        let compiled_out_empty = self.compiled_out && trace.thread_count() == 0;
        if compiled_out_empty {
            writeln!(f, "{COMPILED_OUT}")?;
        } else {
            write!(f, "{} wall, ", format_ns(trace.covered_ns()))?;
            if trace.covered_ns() != trace.wall_ns() {
                write!(
                    f,
                    "the flight recorder's window of a {} session, ",
                    format_ns(trace.wall_ns())
                )?;
            }
            let processes = trace.processes.len();
            if processes > 1 {
                write!(f, "{processes} processes, ")?;
            }
            let threads = trace.thread_count();
            write!(
                f,
                "{} thread{}, {} scope{}, ",
                threads,
                plural(threads as u64),
                scopes,
                plural(scopes as u64),
            )?;
            let calls = summary.map_or(trace.async_spans.len() as u64, Summary::calls);
            if calls > 0 || polls > 0 {
                write!(
                    f,
                    "{calls} async call{} ({polls} poll{}), ",
                    plural(calls),
                    plural(polls as u64)
                )?;
            }
            write!(
                f,
                "{} dropped event{}",
                trace.dropped_events,
                plural(trace.dropped_events),
            )?;
            if trace.overwritten_events > 0 {
                let n = trace.overwritten_events;
                write!(f, ", {n} overwritten event{} (flight recorder)", plural(n))?;
            }
            let panics = self.observer_panics;
            if panics > 0 {
                write!(f, ", {panics} observer panic{}", plural(panics))?;
            }
            writeln!(f)?;
        }
        for note in self.notes(rows) {
            writeln!(f, "{note}")?;
        }
        if self.compiled_out && !compiled_out_empty {
            writeln!(f, "{COMPILED_OUT_COLLECTORS}")?;
        }
        if summary.is_some_and(|s| !s.exact) {
            writeln!(
                f,
                "Quantiles: p50 and p99 from log-linear histograms, within {RELATIVE_ERROR} of the \
                 exact values, as the captures may hold more than {} scopes (calls, total, self, \
                 min and max are exact)",
                exact_budget()
            )?;
        }
        let salvage = &trace.salvage;
        if salvage.is_salvaged() {
            let (n, bytes, cut) = (salvage.sessions, salvage.lost_bytes, salvage.open_scopes);
            write!(
                f,
                "Salvaged: {n} session{} cut short (no footer): {bytes} byte{} lost at the cut, \
                 {cut} scope{} cut open (*)",
                plural(n),
                plural(bytes),
                plural(cut)
            )?;
            let without = salvage.threads_without_records;
            if without > 0 {
                write!(
                    f,
                    ", {without} declared thread{} with no record left",
                    plural(without)
                )?;
            }
            writeln!(f)?;
        }
        for error in &self.errors {
            writeln!(f, "Error: {error}")?;
        }
        if let Some(failure) = &self.stream_failure {
            writeln!(f, "Stream failed: {failure}")?;
        }
        match trace.compensation {
            Some(Compensation::Off) => {
                writeln!(f, "Overhead compensation: off (times include the probes)")?;
            }
            Some(applied) => writeln!(f, "Overhead compensation: {applied} subtracted")?,
            None => {}
        }
        // (Without `enabled` the clock is the OS's, and read for no event.)
        if let Some(source @ (ClockSource::Monotonic | ClockSource::CpuUnverified)) =
            trace.clock_source.filter(|_| !self.compiled_out)
        {
            writeln!(f, "Clock: {source}")?;
        }
        match trace.memory.as_ref().map(|m| m.mode) {
            Some(MemoryMode::Counts) => writeln!(
                f,
                "Memory: counted per scope (no timeline: nothing matched across threads, \
                 no live-at-stop list)"
            )?,
            Some(MemoryMode::Timeline) => writeln!(
                f,
                "Memory: timeline (every allocation and free with its time and address)"
            )?,
            Some(MemoryMode::Off) | None => {}
        }
        if open > 0 {
            let salvaged = if trace.salvage.is_salvaged() {
                " (cut open by a salvage: at their thread's last salvaged record)"
            } else {
                ""
            };
            writeln!(
                f,
                "* {open} call{} still open at stop, closed at the stop time{salvaged}",
                plural(open)
            )?;
        }
        // Of a flight recorder: calls begun before its window count from its start.
        let scopes_cut = match summary {
            Some(summary) => summary.cut_at_start(),
            None => (trace.threads.iter().flat_map(|t| &t.spans))
                .filter(|s| s.cut_at_start && s.kind == SpanKind::Scope)
                .count(),
        };
        let cut = trace.async_spans.iter().filter(|c| c.cut_at_start).count() + scopes_cut;
        if cut > 0 {
            writeln!(
                f,
                "{cut} call{} begun before the flight recorder's window, counted from its start",
                plural(cut as u64)
            )?;
        }
        if !live.is_empty() {
            writeln!(f, "Live at stop (allocated in the window, not freed):")?;
            let rows: Vec<Vec<String>> = live
                .iter()
                .map(|group| {
                    vec![
                        group.scope.unwrap_or("(no scope)").to_owned(),
                        format_bytes(group.bytes),
                        format!("in {} allocation{}", group.allocs, plural(group.allocs)),
                    ]
                })
                .collect();
            // The bytes at least 10 wide, one space from the count after them.
            Grid::new(1)
                .indent("  ")
                .min_width(1, 10)
                .align(2, Align::Left)
                .gap(2, " ")
                .write(f, &[], &rows)?;
        }
        self.sections(trace, f)
    }
}

impl Table {
    /// The "Counters" and "Values" sections, after the scopes (each only when the trace has
    /// some), sorted by the table's column where they have it (samples for Calls, mean for
    /// Avg, min, max, p50, p99), else by name, and limited like the scope rows.
    fn sections(&self, trace: &Trace, f: &mut dyn fmt::Write) -> fmt::Result {
        let label = |name: &str, process: u32| {
            if trace.processes.len() > 1 {
                format!("{}/{name}", trace.process_label(process))
            } else {
                name.to_owned()
            }
        };
        let limit = self.limit.unwrap_or(usize::MAX);
        let mut counters = CounterStats::of(trace);
        let key = |c: &CounterStats| -> Option<f64> {
            Some(match self.sort {
                SortBy::Calls => c.samples as f64,
                SortBy::Avg => c.mean,
                SortBy::Min => c.min.as_f64(),
                SortBy::Max => c.max.as_f64(),
                _ => return None,
            })
        };
        // Stable: equal keys keep the order by name.
        counters.sort_by(|a, b| match (key(a), key(b)) {
            (Some(a), Some(b)) => b.total_cmp(&a),
            _ => Ordering::Equal,
        });
        if !counters.is_empty() {
            let rows = counters
                .iter()
                .take(limit)
                .map(|c| {
                    vec![
                        label(c.name, c.process),
                        c.samples.to_string(),
                        format_number(c.first),
                        format_number(c.last),
                        format_number(c.min),
                        format_number(c.max),
                        format_float(c.mean),
                    ]
                })
                .collect::<Vec<_>>();
            writeln!(f, "\nCounters")?;
            Grid::new(1).write(
                f,
                &["Name", "Samples", "First", "Last", "Min", "Max", "Mean"],
                &rows,
            )?;
        }
        let mut values = ValueStats::of(trace);
        let key = |v: &ValueStats| -> Option<f64> {
            Some(match self.sort {
                SortBy::Calls => v.count as f64,
                SortBy::Avg => v.mean,
                SortBy::Min => v.min,
                SortBy::Max => v.max,
                SortBy::P50 => v.p50,
                SortBy::P99 => v.p99,
                _ => return None,
            })
        };
        values.sort_by(|a, b| match (key(a), key(b)) {
            (Some(a), Some(b)) => b.total_cmp(&a),
            _ => Ordering::Equal,
        });
        if !values.is_empty() {
            let rows = values
                .iter()
                .take(limit)
                .map(|v| {
                    let mut row = vec![label(v.name, v.process), v.count.to_string()];
                    row.extend([v.min, v.max, v.mean, v.p50, v.p99].map(format_float));
                    row
                })
                .collect::<Vec<_>>();
            writeln!(f, "\nValues")?;
            Grid::new(1).write(
                f,
                &["Name", "Count", "Min", "Max", "Mean", "P50", "P99"],
                &rows,
            )?;
        }
        Ok(())
    }
}
