//! The samples compared: each name's calls in a trace, cut into time blocks.

use std::collections::BTreeMap;

use crate::trace::{SpanKind, Trace};

use super::{Metric, Side};

/// `(duration, self time)` of every call in `trace`, by name, in the order the calls started
/// (of two that started together, the one of the lower thread first): scopes (not the polls of
/// async calls) and async calls.
pub(super) fn samples(trace: &Trace) -> BTreeMap<&'static str, Vec<(u64, u64)>> {
    let mut timed: BTreeMap<&'static str, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for thread in &trace.threads {
        for span in &thread.spans {
            if span.kind == SpanKind::Scope {
                timed.entry(span.name()).or_default().push((
                    span.start_ns,
                    span.duration_ns(),
                    span.self_ns(),
                ));
            }
        }
    }
    for call in &trace.async_spans {
        timed.entry(call.name()).or_default().push((
            call.start_ns,
            call.duration_ns(),
            call.self_ns,
        ));
    }
    timed
        .into_iter()
        .map(|(name, mut calls)| {
            // Stable: calls of one start keep the order of their threads.
            calls.sort_by_key(|&(start, _, _)| start);
            let calls = calls.into_iter().map(|(_, d, s)| (d, s)).collect();
            (name, calls)
        })
        .collect()
}

/// One run's calls of a name: the compared samples, sorted, and the figures of its [`Side`].
pub(super) struct Calls {
    /// The samples, ascending: the medians of the time blocks of the compared time per call
    /// (the calls themselves without blocks; with repetitions, the per-session medians or
    /// totals).
    pub(super) values: Vec<u64>,
    /// The median per call (with repetitions: of the per-session values).
    pub(super) median_ns: u64,
    pub(super) total_ns: u64,
    /// The estimated variance of `total_ns` from the spread of the blocks' mean durations
    /// (batch means), for [`Metric::Total`] without repetitions.
    pub(super) total_var: f64,
    pub(super) calls: u64,
}

impl Calls {
    /// The calls (in the order they started) cut into `blocks` time blocks (0: a sample per
    /// call).
    pub(super) fn new(calls: Vec<(u64, u64)>, metric: Metric, blocks: usize) -> Self {
        let total_ns = calls.iter().fold(0u64, |s, &(d, _)| s.saturating_add(d));
        let compared: Vec<u64> = calls
            .iter()
            .map(|&(duration, self_ns)| match metric {
                Metric::SelfTime => self_ns,
                Metric::PerCall | Metric::Total => duration,
            })
            .collect();
        Self::of_compared(compared, total_ns, blocks)
    }

    /// [`Calls::new`] of the compared time of each call (in the order they started) and the
    /// sum of their durations.
    pub(super) fn of_compared(mut compared: Vec<u64>, total_ns: u64, blocks: usize) -> Self {
        let n = compared.len();
        let k = if blocks == 0 { n } else { blocks.min(n) };
        // Block j holds the calls [j·n/k, (j+1)·n/k): sizes differ by one at most.
        let bounds = |j: usize| (j * n / k, (j + 1) * n / k);
        let mut means = Vec::with_capacity(k);
        let mut values = Vec::with_capacity(k);
        for j in 0..k {
            let (start, end) = bounds(j);
            let block = &mut compared[start..end];
            let sum: f64 = block.iter().map(|&v| v as f64).sum();
            means.push(sum / block.len() as f64);
            let mid = (block.len() - 1) / 2;
            values.push(*block.select_nth_unstable(mid).1);
        }
        compared.sort_unstable();
        let median_ns = if n == 0 { 0 } else { compared[(n - 1) / 2] };
        Self::of_blocks(values, &means, median_ns, total_ns, n as u64)
    }

    /// The calls of a name from the median and the mean of each of its time blocks (in
    /// order), its median, total and count.
    pub(super) fn of_blocks(
        mut values: Vec<u64>,
        means: &[f64],
        median_ns: u64,
        total_ns: u64,
        calls: u64,
    ) -> Self {
        values.sort_unstable();
        let k = means.len();
        // The total of n calls in k blocks of mean variance s²: n² · s² / k.
        let total_var = if k > 1 {
            let mean = means.iter().sum::<f64>() / k as f64;
            let s2 = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
            (calls as f64).powi(2) * s2 / k as f64
        } else {
            0.0
        };
        Self {
            values,
            median_ns,
            total_ns,
            total_var,
            calls,
        }
    }

    pub(super) fn side(&self) -> Side {
        Side {
            calls: self.calls,
            total_ns: self.total_ns,
            median_ns: self.median_ns,
            samples: self.values.len(),
        }
    }
}
