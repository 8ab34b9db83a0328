//! The async calls of a report written from captures (`stream::data_of`): the calls of
//! `#[profile] async fn`s, matched as the threads are read again and handed over in the
//! order the decoded trace holds them ([`SpanSource::each_streamed_call`]), written as the
//! JSON block's `async` columns (the timeline's async lanes) as they come.
//!
//! Past [`call_budget`] calls (a quarter of the scopes the blob holds at most), the columns
//! hold those that lasted at least a threshold (the least that keeps at most the budget, read
//! from the first pass's wall times), and the page says so; the table and the rows' histograms (written in the JSON block then) count every
//! call.

use std::fmt::Write;

use crate::decode::pieces::{Pieces, SpanSource};
use crate::decode::quantiles::{Durations, Histogram};
use crate::decode::summary::Summary;
use crate::trace::Trace;

use super::encode::{rel, sep};
use super::hist::RowBins;
use super::json::CallsPart;
use super::names::Names;

/// The async calls the report's JSON block holds at most when its blob holds at most
/// `scopes` scopes: a quarter of them (of 4 Mi scopes, 1 Mi calls: about 30 MB of JSON).
pub(super) fn call_budget(scopes: u64) -> u64 {
    scopes / 4
}

/// The level of detail of the async calls of `summary`: the least wall time shown, when it
/// holds more than `budget` calls.
pub(super) fn threshold(summary: &Summary, budget: u64) -> Option<u64> {
    if summary.calls() <= budget {
        return None;
    }
    let mut all = Histogram::default();
    for site in summary.threads.iter().flat_map(|t| &t.calls) {
        match &site.durations {
            Durations::Exact(values) => values.iter().for_each(|&d| all.add(d)),
            Durations::Histogram(h) => all.merge(h),
        }
    }
    Some(all.least_keeping(budget).0)
}

/// The async calls of `pieces` (whose trace is `trace`), those that lasted at least `least`
/// when given, and how many are shown; each call counted in the rows' histograms `bins`,
/// when given. `None` when they cannot be read again.
pub(super) fn streamed(
    pieces: &Pieces<'_>,
    trace: &Trace,
    least: Option<u64>,
    bins: &mut Option<(RowBins, RowBins)>,
    names: &mut Names,
) -> Option<(CallsPart, u64)> {
    let mut cols: [String; 5] = Default::default();
    let (mut count, mut shown) = (0u64, 0usize);
    pieces
        .each_streamed_call(&mut |_, call| {
            count += 1;
            let wall = call.duration_ns();
            if let Some((by_name, by_thread)) = bins.as_mut() {
                by_name.add(None, call.callsite, wall);
                by_thread.add(Some((call.process, call.thread)), call.callsite, wall);
            }
            if least.is_some_and(|least| wall < least) {
                return Ok(());
            }
            for col in &mut cols {
                sep(col, shown);
            }
            shown += 1;
            let [name, start, end, process, polls] = &mut cols;
            let _ = write!(name, "{}", names.id(call.name()));
            let _ = write!(start, "{}", rel(trace, call.start_ns));
            let _ = write!(end, "{}", rel(trace, call.end_ns));
            let _ = write!(process, "{}", call.process);
            let _ = write!(polls, "{}", call.polls);
            Ok(())
        })
        .ok()?;
    let mut json = String::with_capacity(cols.iter().map(String::len).sum::<usize>() + 64);
    for (i, (key, col)) in ["name", "start", "end", "process", "polls"]
        .into_iter()
        .zip(cols)
        .enumerate()
    {
        sep(&mut json, i);
        let _ = write!(json, "\"{key}\":[{col}]");
    }
    Some((CallsPart { count, json }, shown as u64))
}
