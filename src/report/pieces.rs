//! Reports split by argument value from spans taken piece by piece
//! ([`SpanSource::each_piece`]): what [`Report::by_arg`] gives for the trace, in memory
//! bounded by its rows (and, with exact durations, by the durations the
//! [exact budget](crate::decode::quantiles::exact_budget) allows) rather than by its spans.

use crate::decode::pieces::SpanSource;
use crate::decode::quantiles::Histogram;
use crate::trace::{MemoryStats, SpanKind};

use super::build::Groups;
use super::{Label, Report};

impl Report {
    /// [`Report::by_arg`] of the trace of `source` (which holds no async call), its spans
    /// taken piece by piece: every duration kept when `exact`, else histograms (the rows' p50
    /// and p99 then within [`RELATIVE_ERROR`](crate::decode::quantiles::RELATIVE_ERROR)).
    pub(crate) fn by_arg_of(source: &dyn SpanSource, key: &str, exact: bool) -> Self {
        let trace = source.trace();
        let tracked = trace.memory.is_some();
        let none = MemoryStats::default();
        let mut groups = Groups::new(false, tracked);
        let mut histograms: Vec<Histogram> = Vec::new();
        for (at, thread) in trace.threads.iter().enumerate() {
            let thread_key = (thread.process, thread.id);
            let each = source.each_piece(at, false, &mut |piece| {
                for (i, span) in (0..).zip(piece.spans) {
                    // An open span is counted in the piece where it ends.
                    if span.kind != SpanKind::Scope || piece.is_open(i) {
                        continue;
                    }
                    let label = piece
                        .args_of(i)
                        .iter()
                        .find(|a| a.key == key)
                        .map(|a| Label::Arg(a.value.to_string().into()));
                    let group = match label {
                        None => groups.unlabelled(thread_key, span.callsite),
                        label => groups.group(thread_key, span.callsite, label),
                    };
                    let memory = piece.memory.get(i as usize).unwrap_or(&none);
                    if exact {
                        groups.add(
                            group,
                            span.duration_ns(),
                            span.self_ns(),
                            span.open_at_stop,
                            memory,
                        );
                        continue;
                    }
                    if group >= histograms.len() {
                        histograms.resize(group + 1, Histogram::default());
                    }
                    histograms[group].add(span.duration_ns());
                    let acc = &mut groups.groups[group].1;
                    acc.self_ns = acc.self_ns.saturating_add(span.self_ns());
                    acc.open += u64::from(span.open_at_stop);
                    acc.memory.add(memory);
                }
                Ok(())
            });
            // Adding a piece never fails, so neither does taking them.
            debug_assert!(each.is_ok());
        }
        if exact {
            return Self::finish(trace, groups, tracked);
        }
        histograms.resize(groups.groups.len(), Histogram::default());
        let mut report = Self::finish_with(trace, groups, tracked, Some(histograms));
        report.approximate_quantiles = true;
        report
    }
}
