//! The report's "Counters" and "Values" sections: figures per counter and per value
//! distribution.

use std::cmp::Ordering;

use crate::trace::{Number, Trace};

/// Figures of one counter (`counter!`) over the window: its values after each sample.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CounterStats {
    /// The counter's name.
    pub name: &'static str,
    /// Its process: an index in [`Trace::processes`].
    pub process: u32,
    /// Number of samples (sets and adds).
    pub samples: u64,
    /// The value after the first sample.
    pub first: Number,
    /// The value after the last sample: the counter's value at the end of the window.
    pub last: Number,
    /// The smallest value it took.
    pub min: Number,
    /// The largest value it took.
    pub max: Number,
    /// The mean of its values after each sample (not weighted by time).
    pub mean: f64,
}

/// Figures of one value distribution (`value!`) over the window.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ValueStats {
    /// The distribution's name.
    pub name: &'static str,
    /// Its process: an index in [`Trace::processes`].
    pub process: u32,
    /// Number of samples.
    pub count: u64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// The mean of the samples.
    pub mean: f64,
    /// The median (nearest rank).
    pub p50: f64,
    /// The 99th percentile (nearest rank).
    pub p99: f64,
}

fn cmp(a: &Number, b: &Number) -> Ordering {
    match (a, b) {
        (Number::Int(a), Number::Int(b)) => a.cmp(b),
        _ => a.as_f64().total_cmp(&b.as_f64()),
    }
}

/// The mean of `values` (integers summed exactly first).
fn mean(values: impl Iterator<Item = Number>) -> f64 {
    let (mut ints, mut floats, mut n) = (0i128, 0f64, 0u64);
    for v in values {
        match v {
            Number::Int(v) => ints += i128::from(v),
            Number::Float(v) => floats += v,
        }
        n += 1;
    }
    if n == 0 {
        0.0
    } else {
        (ints as f64 + floats) / n as f64
    }
}

impl CounterStats {
    /// One row per counter track of `trace` (per process and name), in the trace's order.
    pub fn of(trace: &Trace) -> Vec<Self> {
        trace
            .counters
            .iter()
            .filter_map(|track| {
                let first = track.samples.first()?.value;
                let last = track.last()?.value;
                let min = track.values().min_by(cmp)?;
                let max = track.values().max_by(cmp)?;
                Some(Self {
                    name: track.name,
                    process: track.process,
                    samples: track.samples.len() as u64,
                    first,
                    last,
                    min,
                    max,
                    mean: mean(track.values()),
                })
            })
            .collect()
    }
}

impl ValueStats {
    /// One row per value series of `trace` (per process and name), in the trace's order.
    pub fn of(trace: &Trace) -> Vec<Self> {
        trace
            .values
            .iter()
            .filter(|series| !series.samples.is_empty())
            .map(|series| {
                let mut sorted: Vec<f64> =
                    series.samples.iter().map(|s| s.value.as_f64()).collect();
                sorted.sort_by(f64::total_cmp);
                let rank = |pct: usize| {
                    let rank = (sorted.len() * pct).div_ceil(100).max(1);
                    sorted[rank - 1]
                };
                Self {
                    name: series.name,
                    process: series.process,
                    count: sorted.len() as u64,
                    min: sorted[0],
                    max: sorted[sorted.len() - 1],
                    mean: mean(series.samples.iter().map(|s| s.value)),
                    p50: rank(50),
                    p99: rank(99),
                }
            })
            .collect()
    }
}
