//! Reports split by argument value or by origin from spans taken piece by piece
//! ([`SpanSource::each_piece`]): what [`Report::by_arg`] and [`Report::by_origin`] give for
//! the trace, in memory bounded by its rows (and, with exact durations, by the durations the
//! [exact budget](crate::decode::quantiles::exact_budget) allows; by origin, by the trace's
//! flows too, a few words each) rather than by its spans. Of captures whose async calls are
//! summed ([`Summary::streamed_calls`]), the calls are matched again as the threads are read,
//! each labelled by its polls ([`call_labels`](crate::decode::call_labels)).

use crate::capture::Capture;
use crate::decode::call_labels::{self, CallLabel, PollLabels};
use crate::decode::pieces::{Piece, Pieces, SpanSource, Want};
use crate::decode::quantiles::Histogram;
use crate::decode::summary::Summary;
use crate::record::hash::FxHashMap;
use crate::trace::{MemoryStats, SpanKind};

use super::build::Groups;
use super::{Label, Report, Split};

impl Report {
    /// [`Report::by_arg`] of the trace of `source` (which holds no async call), its spans
    /// taken piece by piece: every duration kept when `exact`, else histograms (the rows' p50
    /// and p99 then within [`RELATIVE_ERROR`](crate::decode::quantiles::RELATIVE_ERROR)).
    pub(crate) fn by_arg_of(source: &dyn SpanSource, key: &str, exact: bool) -> Self {
        Self::split_of(source, exact, &mut |_, piece, i| arg_of(key, piece, i))
    }

    /// [`Report::by_origin`] of the trace of `source`, whose summary is `summary` (the same
    /// captures' [`Summary::of`]): each scope that followed from a link or from a `tracing`
    /// span (`follows_from`) is labelled with the name of its origin's callsite, which
    /// the summary keeps with each flow; durations as [`Report::by_arg_of`] keeps them.
    pub(crate) fn by_origin_of(source: &dyn SpanSource, summary: &Summary) -> Self {
        let origins = origins(summary);
        Self::split_of(source, summary.exact, &mut |thread, piece, i| {
            origin_of(&origins, thread, piece, i)
        })
    }

    /// [`Report::by_arg_of`] (`split` by argument) or [`Report::by_origin_of`] of captures
    /// whose summary `summary` summed their async calls ([`Summary::streamed_calls`]): the
    /// scopes from their pieces, each call matched again as the threads are read and split by
    /// the label of its latest poll that has one, as [`Report::by_arg`] and
    /// [`Report::by_origin`] split the decoded trace's. `None` when the pieces or the calls
    /// cannot be read so (`tracing` enters whose kinds the summary left unresolved, marks out
    /// of order): the decoded trace is then what to split.
    pub(crate) fn split_with_calls_of(
        captures: &[&Capture],
        summary: &Summary,
        split: Split<'_>,
    ) -> Option<Self> {
        let pieces = Pieces::of_summary_with_polls(captures, summary)?;
        let exact = summary.exact;
        let origins = match split {
            Split::Origin => origins(summary),
            _ => Vec::new(),
        };
        let (labels, (mut groups, mut histograms)) = match split {
            Split::None => return None,
            Split::Arg(key) => (
                PollLabels::Arg(key),
                Self::split_groups(&pieces, exact, &mut |_, piece, i| arg_of(key, piece, i)),
            ),
            Split::Origin => (
                PollLabels::Origin(&origins),
                Self::split_groups(&pieces, exact, &mut |thread, piece, i| {
                    origin_of(&origins, thread, piece, i)
                }),
            ),
        };
        let threads = &summary.trace.threads;
        call_labels::each_labelled_call(captures, summary, &labels, &mut |call| {
            let Some(thread) = threads.get(call.thread) else {
                return;
            };
            let label = call.label.map(|label| match label {
                CallLabel::Arg(value) => Label::Arg(value.clone()),
                CallLabel::Origin(name) => Label::Origin(name),
            });
            let group = groups.group((thread.process, thread.id), call.callsite, label);
            let figures = (call.wall_ns, call.self_ns, call.open_at_stop);
            add(
                &mut groups,
                &mut histograms,
                exact,
                group,
                figures,
                call.memory,
            );
            groups.add_busy(group, call.busy_ns, call.wall_ns);
        })?;
        Some(Self::split_finish(
            pieces.trace(),
            groups,
            histograms,
            exact,
        ))
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
        let (groups, histograms) = Self::split_groups(source, exact, label);
        Self::split_finish(source.trace(), groups, histograms, exact)
    }

    /// The rows of [`Report::split_of`] before they are finished, with their histograms (by
    /// row) when not `exact`.
    fn split_groups(
        source: &dyn SpanSource,
        exact: bool,
        label: &mut dyn FnMut(u32, &Piece<'_>, u32) -> Option<Label>,
    ) -> (Groups, Vec<Histogram>) {
        let trace = source.trace();
        let none = MemoryStats::default();
        let mut groups = Groups::new(false, trace.memory.is_some());
        let mut histograms: Vec<Histogram> = Vec::new();
        for (at, thread) in trace.threads.iter().enumerate() {
            let thread_key = (thread.process, thread.id);
            let each = source.each_piece(at, Want::ALL, &mut |piece| {
                for (i, span) in (0..).zip(piece.spans) {
                    // An open span is counted in the piece where it ends; a poll with its
                    // call.
                    if span.kind != SpanKind::Scope || piece.is_open(i) {
                        continue;
                    }
                    let group = match label(at as u32, &piece, i) {
                        None => groups.unlabelled(thread_key, span.callsite),
                        label => groups.group(thread_key, span.callsite, label),
                    };
                    let memory = piece.memory.get(i as usize).unwrap_or(&none);
                    let figures = (span.duration_ns(), span.self_ns(), span.open_at_stop);
                    add(&mut groups, &mut histograms, exact, group, figures, memory);
                }
                Ok(())
            });
            // Adding a piece never fails, so neither does taking them.
            debug_assert!(each.is_ok());
        }
        (groups, histograms)
    }

    /// The report of rows `groups` of `trace`, with their `histograms` unless `exact`.
    fn split_finish(
        trace: &crate::trace::Trace,
        groups: Groups,
        mut histograms: Vec<Histogram>,
        exact: bool,
    ) -> Self {
        let tracked = trace.memory.is_some();
        if exact {
            return Self::finish(trace, groups, tracked);
        }
        histograms.resize(groups.groups.len(), Histogram::default());
        let mut report = Self::finish_with(trace, groups, tracked, Some(histograms), Vec::new());
        report.approximate_quantiles = true;
        report
    }
}

/// Adds a call's `figures` (duration, self time, open at the stop) and `memory` to row
/// `group`: its duration to the row's list when `exact`, else as
/// [`Groups::add_sparse`] does (a row of many calls in its histogram).
fn add(
    groups: &mut Groups,
    histograms: &mut Vec<Histogram>,
    exact: bool,
    group: usize,
    figures: (u64, u64, bool),
    memory: &MemoryStats,
) {
    if exact {
        let (duration, self_ns, open) = figures;
        groups.add(group, duration, self_ns, open, memory);
    } else {
        groups.add_sparse(histograms, group, figures, memory);
    }
}

/// The label of the span at `i` of `piece` by argument `key`: the value of its first
/// argument `key`, formatted.
fn arg_of(key: &str, piece: &Piece<'_>, i: u32) -> Option<Label> {
    (piece.args_of(i).iter())
        .find(|a| a.key == key)
        .map(|a| Label::Arg(a.value.to_string().into()))
}

/// The names of the origins of the flows of `summary`'s trace, by follower: by thread, then
/// span index. As the whole trace's report labels them: the last flow of a follower wins.
fn origins(summary: &Summary) -> Vec<FxHashMap<u32, &'static str>> {
    let mut origins: Vec<FxHashMap<u32, &'static str>> =
        vec![FxHashMap::default(); summary.trace.threads.len()];
    for (flow, site) in summary.trace.flows.iter().zip(&summary.origin_sites) {
        let (Some(site), Some(map)) = (site, origins.get_mut(flow.follower.thread as usize)) else {
            continue;
        };
        map.insert(flow.follower.span, site.name());
    }
    origins
}

/// The label by origin of the span at `i` of `piece` of thread `thread` (`origins`).
fn origin_of(
    origins: &[FxHashMap<u32, &'static str>],
    thread: u32,
    piece: &Piece<'_>,
    i: u32,
) -> Option<Label> {
    // Most threads follow no link: no lookup.
    let map = origins.get(thread as usize).filter(|m| !m.is_empty())?;
    map.get(&piece.index(i)).map(|&name| Label::Origin(name))
}
