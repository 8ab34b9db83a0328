//! Reports split by argument value or by origin from spans taken piece by piece
//! ([`SpanSource::each_piece`]): what [`Report::by_arg`] and [`Report::by_origin`] give for
//! the trace, in memory bounded by its rows (and, with exact durations, by the durations the
//! [exact budget](crate::decode::quantiles::exact_budget) allows; by origin, by the trace's
//! flows too, a few words each) rather than by its spans.

use crate::decode::pieces::{Piece, SpanSource};
use crate::decode::quantiles::Histogram;
use crate::decode::summary::Summary;
use crate::record::hash::FxHashMap;
use crate::trace::{MemoryStats, SpanKind};

use super::build::Groups;
use super::{Label, Report};

impl Report {
    /// [`Report::by_arg`] of the trace of `source` (which holds no async call), its spans
    /// taken piece by piece: every duration kept when `exact`, else histograms (the rows' p50
    /// and p99 then within [`RELATIVE_ERROR`](crate::decode::quantiles::RELATIVE_ERROR)).
    pub(crate) fn by_arg_of(source: &dyn SpanSource, key: &str, exact: bool) -> Self {
        Self::split_of(source, exact, &mut |_, piece, i| {
            (piece.args_of(i).iter())
                .find(|a| a.key == key)
                .map(|a| Label::Arg(a.value.to_string().into()))
        })
    }

    /// [`Report::by_origin`] of the trace of `source`, whose summary is `summary` (the same
    /// captures' [`Summary::of`]): each scope that followed from a link or from a `tracing`
    /// span (`follows_from`) is labelled with the name of its origin's callsite, which
    /// the summary keeps with each flow; durations as [`Report::by_arg_of`] keeps them.
    pub(crate) fn by_origin_of(source: &dyn SpanSource, summary: &Summary) -> Self {
        // By thread, then span index; as the whole trace's report labels them: the last flow
        // of a follower wins.
        let mut origins: Vec<FxHashMap<u32, &'static str>> =
            vec![FxHashMap::default(); summary.trace.threads.len()];
        for (flow, site) in summary.trace.flows.iter().zip(&summary.origin_sites) {
            let (Some(site), Some(map)) = (site, origins.get_mut(flow.follower.thread as usize))
            else {
                continue;
            };
            map.insert(flow.follower.span, site.name());
        }
        Self::split_of(source, summary.exact, &mut |thread, piece, i| {
            // Most threads follow no link: no lookup.
            let map = origins.get(thread as usize).filter(|m| !m.is_empty())?;
            map.get(&piece.index(i)).map(|&name| Label::Origin(name))
        })
    }

    /// The report of the trace of `source` (which holds no async call), its spans taken
    /// piece by piece, each scope split by the label `label` gives it (its thread's index,
    /// its piece and its position there): every duration kept when `exact`, else histograms
    /// (the rows' p50 and p99 then within
    /// [`RELATIVE_ERROR`](crate::decode::quantiles::RELATIVE_ERROR)).
    fn split_of(
        source: &dyn SpanSource,
        exact: bool,
        label: &mut dyn FnMut(u32, &Piece<'_>, u32) -> Option<Label>,
    ) -> Self {
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
                    let group = match label(at as u32, &piece, i) {
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
