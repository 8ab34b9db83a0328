//! The report of captures written from their sums and pieces, in memory bounded by the
//! scopes open at once and by [`scope_budget`], not by the captures' size: the rows, the
//! footer and the counters come from the first pass ([`Summary`]), the call tree, the blob
//! and the rows' histograms from each thread's spans read again piece by piece.
//!
//! Past [`scope_budget`] scopes, the blob holds a level of detail: every scope that lasted at
//! least a threshold, the least that keeps at most the budget (read from the first pass's
//! durations), and the scopes around them (their parents, so that what is shown nests as
//! in the trace). The page says so; the table, the call tree, the flame graph and the rows'
//! histograms (written in the JSON block then) count every scope.
//!
//! Of captures with `#[profile] async fn` calls, the polls are spans of the pieces, and the
//! calls (the JSON block's `async` columns) come after them, matched as the threads are read
//! again ([`calls`]): past a budget of their own, the longest.

use std::cell::Cell;
use std::io;

use crate::capture::Capture;
use crate::decode::pieces::{Pieces, SpanSource, Want};
use crate::decode::quantiles::{Durations, Histogram};
use crate::decode::summary::Summary;
use crate::record::hash::FxHashMap;
use crate::report::Report;
use crate::trace::{SpanKind, Trace};

use super::calls;
use super::encode::{compress, rel, sep, varint, zigzag};
use super::hist::RowBins;
use super::json::{Baseline, MemoryPoints, Parts, compose, rows_json};
use super::names::Names;
use super::options::Options;
use super::tree::TreeCols;

/// Scopes the report's blob holds at most (4 Mi): about 4 to 24 MiB of varints while it is
/// written, 4 to 8 MB in the page, and a page that opens in about a second (docs/REPORT.md).
/// A capture of more scopes shows those that lasted longest on its timeline.
pub(crate) const SCOPE_BUDGET: u64 = 4 << 20;

thread_local! {
    /// [`SCOPE_BUDGET`] on this thread, unless a test set another ([`set_scope_budget`]).
    static BUDGET: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The scopes the report's blob holds at most: [`SCOPE_BUDGET`], or what a test set on this
/// thread.
pub(crate) fn scope_budget() -> u64 {
    BUDGET.with(Cell::get).unwrap_or(SCOPE_BUDGET)
}

/// Sets [`scope_budget`] on the calling thread (`tickscope::__private::set_html_scope_budget`;
/// `None`: [`SCOPE_BUDGET`] again), for tests of the level of detail on small captures that
/// run beside others.
pub(crate) fn set_scope_budget(scopes: Option<u64>) {
    BUDGET.with(|b| b.set(scopes));
}

/// The level of detail of a report of `summary` (read in `pieces`): the least duration
/// shown, when the trace holds more than [`scope_budget`] scopes. The polls of async calls,
/// which the sums do not time, are timed by reading the threads again.
fn threshold(summary: &Summary, pieces: &Pieces<'_>) -> Option<u64> {
    let budget = scope_budget();
    if summary.spans() as u64 <= budget {
        return None;
    }
    let mut all = Histogram::default();
    for site in summary.threads.iter().flat_map(|t| &t.sites) {
        match &site.durations {
            Durations::Exact(values) => values.iter().for_each(|&d| all.add(d)),
            Durations::Histogram(h) => all.merge(h),
        }
    }
    if summary.polls() > 0 {
        for t in 0..summary.threads.len() {
            let each = pieces.each_piece(t, Want::ALL, &mut |piece| {
                for (i, span) in piece.spans.iter().enumerate() {
                    // Each span once, in the piece where it ends.
                    if span.kind != SpanKind::Scope && !piece.is_open(i as u32) {
                        all.add(span.duration_ns());
                    }
                }
                Ok(())
            });
            debug_assert!(each.is_ok());
        }
    }
    Some(all.least_keeping(budget).0)
}

/// The report of what `captures` decode to, written from their sums and pieces, with the
/// diff view of `base`; `None` when it cannot be (async calls that cannot be matched as the
/// threads are read again, or a baseline trace in the options, which the diff needs the
/// whole trace for: the caller decodes the trace whole).
pub(super) fn data_of(
    captures: &[&Capture],
    base: Option<&dyn Baseline>,
    options: &Options,
    title: &str,
    names: &mut Names,
) -> Option<(String, Vec<u8>)> {
    if options.baseline.is_some() {
        return None;
    }
    let summary = Summary::of(captures)?;
    // The polls of `#[profile] async fn` calls are spans of the pieces, their calls read
    // again after them.
    let pieces = match summary.streamed_calls {
        true => Pieces::of_summary_with_calls(captures, &summary)?,
        false => Pieces::of_summary(captures, &summary)?,
    };
    let trace = &summary.trace;
    // The rows number the names first, as the whole trace's report does.
    let report = Report::from_summary(&summary, false);
    let by_thread = Report::from_summary(&summary, true);
    let (mut table, mut by_thread_json) = (String::new(), String::new());
    rows_json(&mut table, trace, &report, names);
    rows_json(&mut by_thread_json, trace, &by_thread, names);
    let footer = crate::table::footer_text(trace, Some(&summary), &report);
    let least = threshold(&summary, &pieces);
    let call_budget = calls::call_budget(scope_budget());
    let calls_least = calls::threshold(&summary, call_budget);
    // Of a level of detail (of scopes or of calls), each row's histogram over every call.
    let lod = least.is_some() || calls_least.is_some();
    let bins = lod.then(|| (RowBins::new(&report), RowBins::new(&by_thread)));
    let mut walk = Walk::new(trace, least.unwrap_or(0), bins);
    for t in 0..trace.threads.len() {
        walk.thread(&pieces, t, names);
    }
    let mut memory = ",\"memory\":null".to_owned();
    let events: u64 = summary.threads.iter().map(|t| t.memory_events).sum();
    if trace.memory.is_some() && events > 0 {
        let mut points = MemoryPoints::new(events as usize);
        pieces
            .each_memory_event(None, &mut |event, live| {
                points.push(trace, event.ns, live);
                Ok(())
            })
            .ok()?;
        memory = points.json();
    }
    let Walk {
        tree,
        shown,
        flow_ends,
        mut bins,
        ..
    } = walk;
    let calls = match summary.streamed_calls {
        true => Some(calls::streamed(
            &pieces,
            trace,
            calls_least,
            &mut bins,
            names,
        )?),
        false => None,
    };
    let mut flows = String::new();
    let mut k = 0;
    for flow in &trace.flows {
        let Some(origin) = flow.origin else { continue };
        let (from, to) = (
            flow_ends.get(&(origin.thread, origin.span)),
            flow_ends.get(&(flow.follower.thread, flow.follower.span)),
        );
        // Of a level of detail, only the flows between scopes shown.
        if let (Some(Some(from)), Some(Some(to))) = (from, to) {
            sep(&mut flows, k);
            k += 1;
            flows.push_str(&format!(
                "{},{from},{},{to}",
                origin.thread, flow.follower.thread
            ));
        }
    }
    let mut extra = String::new();
    if let Some((by_name, by_thread)) = bins {
        let shown: u64 = shown.iter().map(|&n| u64::from(n)).sum();
        extra.push_str(&format!(
            ",\"lod\":{{\"shown\":{shown},\"scopes\":{},\"min_ns\":{},\"budget\":{}",
            summary.spans(),
            least.unwrap_or(0),
            scope_budget()
        ));
        if let (Some(least), Some((part, shown))) = (calls_least, &calls) {
            extra.push_str(&format!(
                ",\"calls_shown\":{shown},\"calls\":{},\"calls_min_ns\":{least},\"calls_budget\":{}",
                part.count, call_budget
            ));
        }
        extra.push('}');
        extra.push_str(",\"hist\":{\"table\":");
        by_name.json(&mut extra);
        extra.push_str(",\"by_thread\":");
        by_thread.json(&mut extra);
        extra.push('}');
    }
    let mut tree_json = String::new();
    tree.json(&mut tree_json);
    let parts = Parts {
        spans: summary.threads.iter().map(|t| t.spans).collect(),
        shown: lod.then(|| shown.clone()),
        table,
        by_thread: by_thread_json,
        tree: tree_json,
        footer,
        flows,
        memory,
        extra,
        blob: walk.blob.finish(),
        calls: calls.map(|(part, _)| part),
    };
    Some(compose(
        trace,
        parts,
        base,
        options,
        title,
        names,
        &mut |_| (Vec::new(), false, 0),
    ))
}

/// Where a span of the piece being walked stands.
#[derive(Clone, Copy)]
struct State {
    /// Its index in the blob's spans of its thread, once written there.
    shown: Option<u32>,
    /// Its start, from the trace's.
    start: i64,
    /// The end of its last child written in the blob.
    last_child_end: Option<i64>,
    /// The hole its duration fills in the blob's duration column, written while it was open.
    hole: Option<usize>,
    /// Its node in the call tree.
    node: u32,
}

/// The blob's four varint columns; the durations of spans written while open go in holes.
#[derive(Default)]
struct Blob {
    cols: [Vec<u8>; 4],
    /// (byte offset in the duration column, duration), in order of offset.
    holes: Vec<(usize, u64)>,
}

impl Blob {
    /// The columns with the holes filled, compressed (as `spans_blob` gives them).
    fn finish(self) -> (Vec<u8>, bool, usize) {
        let [c0, c1, c2, c3] = self.cols;
        let mut durations = Vec::with_capacity(c3.len() + 4 * self.holes.len());
        let mut at = 0;
        for &(offset, value) in &self.holes {
            durations.extend_from_slice(&c3[at..offset]);
            varint(&mut durations, value);
            at = offset;
        }
        durations.extend_from_slice(&c3[at..]);
        drop(c3);
        let cols = [c0, c1, c2, durations];
        let mut raw = Vec::with_capacity(cols.iter().map(Vec::len).sum::<usize>() + 32);
        for col in &cols {
            varint(&mut raw, col.len() as u64);
        }
        for col in cols {
            raw.extend_from_slice(&col);
        }
        compress(raw)
    }
}

/// A walk of every thread's spans, piece by piece: the call tree, the blob (the spans that
/// last at least `least` ns, and their parents) and the rows' histograms.
struct Walk<'t> {
    trace: &'t Trace,
    least: u64,
    tree: TreeCols,
    blob: Blob,
    /// Each thread's spans in the blob.
    shown: Vec<u32>,
    /// The index in the blob of each flow's ends (by thread and index in the thread): `None`
    /// until shown.
    flow_ends: FxHashMap<(u32, u32), Option<u32>>,
    /// The histograms of the rows by name and by thread, of a level of detail.
    bins: Option<(RowBins, RowBins)>,
}

impl<'t> Walk<'t> {
    fn new(trace: &'t Trace, least: u64, bins: Option<(RowBins, RowBins)>) -> Self {
        let mut flow_ends = FxHashMap::default();
        for flow in &trace.flows {
            if let Some(origin) = flow.origin {
                flow_ends.insert((origin.thread, origin.span), None);
                flow_ends.insert((flow.follower.thread, flow.follower.span), None);
            }
        }
        Self {
            trace,
            least,
            tree: TreeCols::default(),
            blob: Blob::default(),
            shown: vec![0; trace.threads.len()],
            flow_ends,
            bins,
        }
    }

    /// Walks thread `t`'s spans.
    fn thread(&mut self, pieces: &Pieces<'_>, t: usize, names: &mut Names) {
        let trace = self.trace;
        let thread = &trace.threads[t];
        let key = (thread.process, thread.id);
        let mut carried: Vec<State> = Vec::new();
        let mut states: Vec<State> = Vec::new();
        let mut keep: Vec<bool> = Vec::new();
        let mut root_end = 0i64;
        let each = pieces.each_piece(t, Want::ALL, &mut |piece| {
            let spans = piece.spans;
            states.clear();
            states.append(&mut carried);
            for (i, span) in spans.iter().enumerate().skip(states.len()) {
                let parent = (span.parent.map(|p| p as usize))
                    .filter(|&p| p < i)
                    .map_or(-1, |p| i64::from(states[p].node));
                let id = names.of(span.callsite);
                let node = (self.tree).node(parent, t as u32, id, span.kind != SpanKind::Scope);
                states.push(State {
                    shown: None,
                    start: rel(trace, span.start_ns),
                    last_child_end: None,
                    hole: None,
                    node,
                });
            }
            // Shown: what lasted at least `least` (known once ended), what was shown
            // already, and the parents of what is shown.
            keep.clear();
            keep.resize(spans.len(), false);
            for i in (0..spans.len()).rev() {
                let span = &spans[i];
                let open = piece.is_open(i as u32);
                let k = keep[i]
                    || states[i].shown.is_some()
                    || (!open && span.duration_ns() >= self.least);
                keep[i] = k;
                if k && let Some(p) = span.parent.map(|p| p as usize).filter(|&p| p < i) {
                    keep[p] = true;
                }
            }
            for (i, span) in spans.iter().enumerate() {
                let open = piece.is_open(i as u32);
                let parent = span.parent.map(|p| p as usize).filter(|&p| p < i);
                let duration = span.duration_ns().min(i64::MAX as u64);
                if keep[i] && states[i].shown.is_none() {
                    let index = self.shown[t];
                    self.shown[t] += 1;
                    states[i].shown = Some(index);
                    let reference = match parent {
                        Some(p) => states[p].last_child_end.unwrap_or(states[p].start),
                        None => root_end,
                    };
                    let cols = &mut self.blob.cols;
                    varint(&mut cols[0], u64::from(names.of(span.callsite)));
                    let distance = parent
                        .and_then(|p| states[p].shown)
                        .map_or(0, |p| u64::from(index - p));
                    varint(&mut cols[1], distance);
                    varint(
                        &mut cols[2],
                        zigzag(states[i].start.wrapping_sub(reference)),
                    );
                    if open {
                        states[i].hole = Some(self.blob.holes.len());
                        self.blob.holes.push((cols[3].len(), 0));
                    } else {
                        varint(&mut cols[3], duration);
                    }
                    if let Some(end) = self.flow_ends.get_mut(&(t as u32, piece.index(i as u32))) {
                        *end = Some(index);
                    }
                    if !open {
                        let end = states[i].start.saturating_add(duration as i64);
                        match parent {
                            Some(p) => states[p].last_child_end = Some(end),
                            None => root_end = end,
                        }
                    }
                }
                if open {
                    continue;
                }
                // Ended in this piece: counted once.
                self.tree.add(states[i].node, span);
                if let Some(hole) = states[i].hole.take() {
                    self.blob.holes[hole].1 = duration;
                    let end = states[i].start.saturating_add(duration as i64);
                    match parent {
                        Some(p) => states[p].last_child_end = Some(end),
                        None => root_end = end,
                    }
                }
                if span.kind == SpanKind::Scope
                    && let Some((by_name, by_thread)) = &mut self.bins
                {
                    by_name.add(None, span.callsite, span.duration_ns());
                    by_thread.add(Some(key), span.callsite, span.duration_ns());
                }
            }
            carried.extend(piece.open.iter().map(|&o| states[o as usize]));
            Ok(())
        });
        // Walking a piece never fails, so neither does taking them.
        debug_assert!(each.is_ok());
    }
}

/// Writes the report of what `captures` decode to, from their sums and pieces: `None` when
/// it cannot be ([`data_of`]).
pub(super) fn write_captures(
    captures: &[&Capture],
    out: &mut dyn io::Write,
    options: &Options,
) -> Option<io::Result<()>> {
    let title = super::page::title(options);
    let mut names = Names::default();
    let (meta, blob) = data_of(captures, None, options, title, &mut names)?;
    Some(super::page::page(out, title, &meta, &blob))
}
