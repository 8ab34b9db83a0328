//! A table as text, Markdown, CSV or JSON ([`Table::render`]).

use crate::decode::summary::Summary;
use crate::report::{CounterStats, ThreadKey, ValueStats};
use crate::trace::{Number, Trace};

use super::format::Format;
use super::grid::{csv_record, json_string, markdown_grid};
use super::{TABLE_SCHEMA, Table};

impl Table {
    /// The table in `format`: [`Format::Text`] is its `Display`; [`Format::Markdown`] a
    /// GitHub-flavoured table with the footer after it; [`Format::Json`] the schema of
    /// `docs/REPORT-SCHEMA.md` (`"kind": "table"`, rows with times in ns, the counters,
    /// values and footer lines); [`Format::Csv`] a header row and a row per table row, times
    /// in ns (the counters and values sections are in the JSON only).
    ///
    /// ```
    /// use tickscope::{Profiler, scope, table::Format};
    ///
    /// let prof = Profiler::builder().current_thread().start();
    /// drop(scope!("step"));
    /// prof.stop();
    /// let csv = prof.table().render(Format::Csv);
    /// assert!(csv.starts_with("thread,name,caused_by,arg,calls,total_ns,"));
    /// assert_eq!(csv.lines().count(), 2);
    /// ```
    #[must_use]
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Text => self.to_string(),
            Format::Markdown => self.to_markdown(),
            Format::Json => self.to_json(),
            Format::Csv => self.to_csv(),
        }
    }

    /// [`Table::render`] in [`Format::Markdown`].
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let (trace, summary) = self.view();
        let rows = self.rows(trace, summary);
        let mut out = markdown_grid(&rows.headers, &rows.rows, rows.left);
        let mut footer = String::new();
        // Writing to a `String` cannot fail.
        let _ = self.footer(&mut footer, trace, summary, &rows);
        // The summary line and the notes on the percentages and the limit are paragraphs;
        // the lines after them (aligned sections among them) keep their layout in a code
        // block.
        let lead = 1 + self.notes(&rows).len();
        let lines: Vec<&str> = footer.lines().collect();
        let (lead, rest) = lines.split_at(lead.min(lines.len()));
        for line in lead {
            out.push('\n');
            out.push_str(line);
            out.push('\n');
        }
        if !rest.is_empty() {
            out.push_str("\n```text\n");
            for line in rest {
                out.push_str(line);
                out.push('\n');
            }
            out.push_str("```\n");
        }
        out
    }

    /// [`Table::render`] in [`Format::Csv`].
    #[must_use]
    pub fn to_csv(&self) -> String {
        let (trace, summary) = self.view();
        let records = self.records(trace, summary);
        let mut out = csv_record(&self.record_keys(trace, summary));
        for record in records {
            let cells: Vec<String> = record.iter().map(|(_, v)| v.csv()).collect();
            out.push_str(&csv_record(&cells));
        }
        out
    }

    /// [`Table::render`] in [`Format::Json`].
    #[must_use]
    pub fn to_json(&self) -> String {
        let (trace, summary) = self.view();
        let rows = self.records(trace, summary);
        let scopes: usize = summary.map_or_else(
            || trace.threads.iter().map(|t| t.spans.len()).sum(),
            Summary::spans,
        );
        let shown = self.rows(trace, summary);
        let mut footer = String::new();
        let _ = self.footer(&mut footer, trace, summary, &shown);
        let object = |fields: &[(&str, Val)]| {
            let inner: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}: {}", json_string(k), v.json()))
                .collect();
            format!("{{{}}}", inner.join(", "))
        };
        let list = |items: Vec<String>, indent: &str| {
            if items.is_empty() {
                "[]".to_owned()
            } else {
                format!(
                    "[\n{indent}  {}\n{indent}]",
                    items.join(&format!(",\n{indent}  "))
                )
            }
        };
        let rows: Vec<String> = rows.iter().map(|r| object(r)).collect();
        let label = |name: &str, process: u32| {
            if trace.processes.len() > 1 {
                format!("{}/{name}", trace.process_label(process))
            } else {
                name.to_owned()
            }
        };
        let counters: Vec<String> = CounterStats::of(trace)
            .iter()
            .map(|c| {
                object(&[
                    ("name", Val::Str(label(c.name, c.process))),
                    ("samples", Val::Int(c.samples)),
                    ("first", Val::Num(c.first)),
                    ("last", Val::Num(c.last)),
                    ("min", Val::Num(c.min)),
                    ("max", Val::Num(c.max)),
                    ("mean", Val::Float(c.mean)),
                ])
            })
            .collect();
        let values: Vec<String> = ValueStats::of(trace)
            .iter()
            .map(|v| {
                object(&[
                    ("name", Val::Str(label(v.name, v.process))),
                    ("count", Val::Int(v.count)),
                    ("min", Val::Float(v.min)),
                    ("max", Val::Float(v.max)),
                    ("mean", Val::Float(v.mean)),
                    ("p50", Val::Float(v.p50)),
                    ("p99", Val::Float(v.p99)),
                ])
            })
            .collect();
        let footer: Vec<String> = footer.lines().map(json_string).collect();
        format!(
            "{{\n  \"schema\": {TABLE_SCHEMA},\n  \"kind\": \"table\",\n  \"tree\": {},\n  \
             \"wall_ns\": {},\n  \"scope_ns\": {},\n  \
             \"processes\": {},\n  \"threads\": {},\n  \"scopes\": {},\n  \
             \"dropped_events\": {},\n  \"overwritten_events\": {},\n  \"hidden_rows\": {},\n  \
             \"rows\": {},\n  \"counters\": {},\n  \"values\": {},\n  \"footer\": {}\n}}\n",
            self.tree,
            trace.wall_ns(),
            shown.scope_ns,
            trace.processes.len(),
            trace.thread_count(),
            scopes,
            trace.dropped_events,
            trace.overwritten_events,
            shown.hidden,
            list(rows, "  "),
            list(counters, "  "),
            list(values, "  "),
            list(footer, "  "),
        )
    }

    /// The keys of [`Table::records`], the CSV header.
    fn record_keys(&self, trace: &Trace, summary: Option<&Summary>) -> Vec<&'static str> {
        if self.tree {
            return vec![
                "thread",
                "depth",
                "name",
                "poll",
                "calls",
                "total_ns",
                "self_ns",
                "total_percent",
                "self_percent",
                "open_at_stop",
            ];
        }
        let mut keys = vec![
            "thread",
            "name",
            "caused_by",
            "arg",
            "calls",
            "total_ns",
            "self_ns",
            "avg_ns",
            "min_ns",
            "max_ns",
            "p50_ns",
            "p99_ns",
            "total_percent",
            "self_percent",
            "open_at_stop",
        ];
        if has_calls(trace, summary) {
            keys.push("busy_ns");
        }
        if trace.memory.is_some() {
            keys.extend([
                "alloc_bytes",
                "self_alloc_bytes",
                "allocs",
                "freed_bytes",
                "peak_bytes",
            ]);
        }
        keys
    }

    /// The rows the table shows (sorted and limited as printed) as fields, times in ns.
    fn records(&self, trace: &Trace, summary: Option<&Summary>) -> Vec<Vec<(&'static str, Val)>> {
        let keys = self.record_keys(trace, summary);
        let thread = |key: Option<ThreadKey>| match key {
            Some(_) => Val::Str(self.thread_name(trace, key)),
            None => Val::Null,
        };
        let opt = |s: Option<String>| s.map_or(Val::Null, Val::Str);
        let records: Vec<Vec<Val>> = if self.tree {
            let tree = self.call_tree(trace);
            tree.walk()
                .take(self.limit.unwrap_or(usize::MAX))
                .map(|(node, depth)| {
                    vec![
                        thread(node.thread),
                        Val::Int(depth as u64),
                        Val::Str(node.name.to_owned()),
                        Val::Bool(node.poll),
                        Val::Int(node.calls),
                        Val::Int(node.total_ns),
                        Val::Int(node.self_ns),
                        Val::Float(node.total_percent),
                        Val::Float(node.self_percent),
                        Val::Int(node.open),
                    ]
                })
                .collect()
        } else {
            let report = self.report(trace, summary);
            self.selected(&report)
                .into_iter()
                .map(|row| {
                    let mut fields = vec![
                        thread(row.process_thread()),
                        Val::Str(row.name.to_owned()),
                        opt(row.caused_by.map(str::to_owned)),
                        opt(row.arg.clone()),
                        Val::Int(row.calls),
                        Val::Int(row.total_ns),
                        Val::Int(row.self_ns),
                        Val::Int(row.avg_ns()),
                        Val::Int(row.min_ns),
                        Val::Int(row.max_ns),
                        Val::Int(row.p50_ns),
                        Val::Int(row.p99_ns),
                        Val::Float(row.total_percent),
                        Val::Float(row.self_percent),
                        Val::Int(row.open_at_stop),
                    ];
                    if has_calls(trace, summary) {
                        fields.push(row.busy_ns.map_or(Val::Null, Val::Int));
                    }
                    if let Some(m) = row.memory {
                        fields.extend(
                            [
                                m.alloc_bytes,
                                m.self_alloc_bytes,
                                m.allocs,
                                m.freed_bytes,
                                m.peak_bytes,
                            ]
                            .map(Val::Int),
                        );
                    }
                    fields
                })
                .collect()
        };
        records
            .into_iter()
            .map(|r| keys.iter().copied().zip(r).collect())
            .collect()
    }
}

/// A field of a row of [`Table::to_json`] and [`Table::to_csv`].
enum Val {
    Null,
    Bool(bool),
    Int(u64),
    Float(f64),
    Num(Number),
    Str(String),
}

impl Val {
    fn json(&self) -> String {
        match self {
            Self::Null => "null".to_owned(),
            Self::Bool(b) => b.to_string(),
            Self::Int(n) => n.to_string(),
            Self::Float(x) | Self::Num(Number::Float(x)) if !x.is_finite() => "null".to_owned(),
            Self::Float(x) | Self::Num(Number::Float(x)) => format!("{x:?}"),
            Self::Num(Number::Int(n)) => n.to_string(),
            Self::Str(s) => json_string(s),
        }
    }

    fn csv(&self) -> String {
        match self {
            Self::Null => String::new(),
            Self::Str(s) => s.clone(),
            other => other.json(),
        }
    }
}

/// True when the trace the table shows (summed in `summary`, when given) has async calls.
fn has_calls(trace: &Trace, summary: Option<&Summary>) -> bool {
    summary.map_or(!trace.async_spans.is_empty(), |s| s.calls() > 0)
}
