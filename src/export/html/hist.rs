//! The histograms of the call durations of the table's rows, for a report whose blob holds a
//! level of detail: counted over every scope as its spans are walked, in the bins the page
//! draws (those it would make of the durations themselves).

use std::collections::HashMap;

use crate::record::callsite::Callsite;
use crate::record::hash::FxHashMap;
use crate::report::{Report, ScopeStats, ThreadKey};

use super::encode::sep;

/// Bins of a row's histogram, as the page draws them (report.js, `histogram`).
pub(super) const BINS: usize = 40;

/// How a row's durations fall in bins: from its min to its max, logarithmic when the max is
/// more than 50 times the min (both above 0), else linear.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Binning {
    log: bool,
    lo: f64,
    width: f64,
}

impl Binning {
    /// The bins of durations from `min` to `max`.
    pub(super) fn new(min: u64, max: u64) -> Self {
        let (min, max) = (min as f64, max as f64);
        let log = max > 0.0 && min > 0.0 && max / min > 50.0;
        let (lo, hi) = if log {
            (min.ln(), max.ln())
        } else {
            (min, max)
        };
        let width = (hi - lo) / BINS as f64;
        let width = if width == 0.0 || width.is_nan() {
            1.0
        } else {
            width
        };
        Self { log, lo, width }
    }

    /// The bin of `ns`.
    pub(super) fn bin(&self, ns: u64) -> usize {
        let x = ns as f64;
        let x = if self.log { x.ln() } else { x };
        let at = ((x - self.lo) / self.width).floor();
        if at.is_nan() || at < 0.0 {
            0
        } else {
            (at as usize).min(BINS - 1)
        }
    }
}

/// The histograms of a report's rows, in the order of its rows.
pub(super) struct RowBins {
    binnings: Vec<Binning>,
    counts: Vec<[u64; BINS]>,
    /// The row of each (thread, name): the thread only when the report is split by thread.
    rows: HashMap<(Option<ThreadKey>, &'static str), usize>,
    /// The row of each (thread, callsite address), as found.
    cache: FxHashMap<(Option<ThreadKey>, usize), usize>,
}

impl RowBins {
    /// No duration counted yet in the rows of `report`.
    pub(super) fn new(report: &Report) -> Self {
        let rows = report.rows();
        Self {
            binnings: (rows.iter())
                .map(|r| Binning::new(r.min_ns, r.max_ns))
                .collect(),
            counts: vec![[0; BINS]; rows.len()],
            rows: (rows.iter().enumerate())
                .map(|(i, r): (usize, &ScopeStats)| ((r.process_thread(), r.name), i))
                .collect(),
            cache: FxHashMap::default(),
        }
    }

    /// Counts a call of `callsite` on thread `thread` (`None` in a report by name) that took
    /// `ns`.
    pub(super) fn add(&mut self, thread: Option<ThreadKey>, callsite: &'static Callsite, ns: u64) {
        let address = std::ptr::from_ref(callsite) as usize;
        let row = match self.cache.get(&(thread, address)) {
            Some(&row) => row,
            None => {
                let Some(&row) = self.rows.get(&(thread, callsite.name())) else {
                    return;
                };
                self.cache.insert((thread, address), row);
                row
            }
        };
        let bin = self.binnings[row].bin(ns);
        self.counts[row][bin] += 1;
    }

    /// The counts, a list of [`BINS`] per row.
    pub(super) fn json(&self, j: &mut String) {
        j.push('[');
        for (i, counts) in self.counts.iter().enumerate() {
            sep(j, i);
            j.push('[');
            for (k, n) in counts.iter().enumerate() {
                sep(j, k);
                j.push_str(&n.to_string());
            }
            j.push(']');
        }
        j.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::{BINS, Binning};

    #[test]
    fn bins_span_the_rows_range() {
        let linear = Binning::new(100, 500);
        assert_eq!(linear.bin(100), 0);
        assert_eq!(linear.bin(109), 0);
        assert_eq!(linear.bin(110), 1);
        assert_eq!(linear.bin(500), BINS - 1);
        let log = Binning::new(10, 10_000);
        assert_eq!(log.bin(10), 0);
        assert_eq!(log.bin(10_000), BINS - 1);
        // 10^(1 + 3 * 20 / 40) = 10^2.5 = 316.2: the middle.
        assert_eq!(log.bin(316), 19);
        assert_eq!(log.bin(317), 20);
        let one = Binning::new(7, 7);
        assert_eq!((one.bin(7), one.bin(0)), (0, 0));
    }
}
