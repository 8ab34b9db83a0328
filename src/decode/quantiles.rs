//! The durations of a table row's calls, for its p50 and p99: every duration while a table's
//! scopes fit [`EXACT_BUDGET`], else a log-linear histogram of bounded relative error, so that
//! a table of any capture takes memory bounded by its rows, not its calls.
//!
//! The histogram ([`Histogram`]) counts values below 256 exactly, one bucket per value; above,
//! each power of two `[2^e, 2^(e+1))` is cut into 256 buckets of equal width `2^(e-8)`. A
//! quantile is the middle of the bucket that holds its rank (nearest rank, as for exact
//! durations), clamped to the row's min and max: it is within `2^(e-9) / 2^e` = 1/512
//! (0.2 %) of the exact value. Count, total, min and max stay exact.

/// Scopes a table keeps every duration of: 8 Mi (64 MiB of durations). A table whose
/// captures may hold more (counted from their records, two per scope) takes its quantiles
/// from histograms ([`Histogram`]).
pub(crate) const EXACT_BUDGET: u64 = 8 << 20;

/// [`EXACT_BUDGET`], unless a test set another ([`set_exact_budget`]).
static BUDGET: AtomicU64 = AtomicU64::new(EXACT_BUDGET);

/// The scopes a table keeps every duration of: [`EXACT_BUDGET`], or what a test set.
pub(crate) fn exact_budget() -> u64 {
    BUDGET.load(Ordering::Relaxed)
}

/// Sets [`exact_budget`] to `scopes`, for the tests of both kinds of quantiles on small
/// captures (`tickscope::__private::set_exact_quantile_budget`).
pub(crate) fn set_exact_budget(scopes: u64) {
    BUDGET.store(scopes, Ordering::Relaxed);
}

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of a value kept below its leading one: 256 buckets per power of two.
const SUB_BITS: u32 = 8;
const SUB: u64 = 1 << SUB_BITS;

/// The relative error bound of a quantile read from a [`Histogram`], as the table's footer
/// states it.
pub(crate) const RELATIVE_ERROR: &str = "0.2 %";

/// The bucket of `value`.
fn bucket(value: u64) -> usize {
    if value < SUB {
        return value as usize;
    }
    let top = 63 - value.leading_zeros();
    let shift = top - SUB_BITS;
    let mantissa = value >> shift;
    ((u64::from(shift) + 1) * SUB + (mantissa - SUB)) as usize
}

/// The smallest and largest value of bucket `index`.
fn bounds(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < SUB {
        return (index, index);
    }
    let shift = index / SUB - 1;
    let low = (SUB + index % SUB) << shift;
    (low, low + ((1u64 << shift) - 1))
}

/// Counts of durations by log-linear bucket, with their exact count, sum, min and max.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Histogram {
    /// Count per bucket, up to the highest bucket used.
    counts: Vec<u64>,
    count: u64,
    total: u64,
    min: u64,
    max: u64,
}

impl Histogram {
    /// Counts `value`.
    pub(crate) fn add(&mut self, value: u64) {
        let at = bucket(value);
        if at >= self.counts.len() {
            self.counts.resize(at + 1, 0);
        }
        self.counts[at] += 1;
        self.min = if self.count == 0 {
            value
        } else {
            self.min.min(value)
        };
        self.max = self.max.max(value);
        self.count += 1;
        self.total = self.total.saturating_add(value);
    }

    /// Adds the counts of `other`.
    pub(crate) fn merge(&mut self, other: &Self) {
        if other.count == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.min = if self.count == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.total = self.total.saturating_add(other.total);
    }

    /// Values counted.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Their sum, saturating.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The smallest (`u64::MAX` when empty, as the exact rows fold it).
    pub(crate) fn min(&self) -> u64 {
        if self.count == 0 { u64::MAX } else { self.min }
    }

    /// The largest (0 when empty).
    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    /// The `pct`th percentile, nearest rank: the middle of the bucket holding the value of
    /// that rank, within [`Histogram::min`] and [`Histogram::max`]. 0 when empty.
    pub(crate) fn quantile(&self, pct: u64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = (self.count * pct).div_ceil(100).max(1);
        let mut seen = 0;
        for (index, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, high) = bounds(index);
                return (low + (high - low) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

impl Histogram {
    /// The least value `x` at a bucket's lower bound such that at most `most` of the values
    /// counted are `x` or more, and how many are: values of one bucket are all below or all
    /// above such a bound, so the count is exact. Past the largest value (and none kept)
    /// when its bucket alone holds more than `most`.
    pub(crate) fn least_keeping(&self, most: u64) -> (u64, u64) {
        let mut kept = 0u64;
        let mut least = (self.max.saturating_add(1), 0);
        for (index, &n) in self.counts.iter().enumerate().rev() {
            if kept + n > most {
                break;
            }
            kept += n;
            if n > 0 {
                least = (bounds(index).0, kept);
            }
        }
        least
    }
}

/// Below this many values, [`nearest_ranks`] selects among a copy of them all.
const COPIED_UPTO: usize = 4096;

/// The `pcts`th percentiles, nearest rank, of the values of every slice of `parts` together
/// (0 when there is none): each the value that `select_nth_unstable` on their concatenation
/// gives at that rank, without making it (a row's durations are its threads' lists, often
/// millions). A first reading counts the values by log-linear bucket, whose order is the
/// values' order; a second takes the values of each bucket holding one of the ranks (unless
/// it holds one value), among which it is selected.
pub(crate) fn nearest_ranks<const N: usize>(parts: &[&[u64]], pcts: [u64; N]) -> [u64; N] {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    // (1-based, as `nearest_rank` takes them.)
    let ranks = pcts.map(|pct| (len as u64 * pct).div_ceil(100).max(1));
    if len == 0 {
        return [0; N];
    }
    if len <= COPIED_UPTO {
        let mut all = parts.concat();
        return ranks.map(|rank| *all.select_nth_unstable(rank as usize - 1).1);
    }
    // (Loops over each slice: a flattening iterator makes each value a step of its own.)
    let mut counts: Vec<u64> = Vec::new();
    for part in parts {
        for &value in *part {
            let at = bucket(value);
            if at >= counts.len() {
                counts.resize(at + 1, 0);
            }
            counts[at] += 1;
        }
    }
    // Per rank, its bucket and its rank among the bucket's values.
    let found = ranks.map(|rank| {
        let mut below = 0;
        for (at, &n) in counts.iter().enumerate() {
            if below + n >= rank {
                return (at, rank - below);
            }
            below += n;
        }
        unreachable!("the counts add up to every value")
    });
    // A bucket of one value (every one below 512) is that value; the values of the others
    // are taken in one more reading, each bucket's apart.
    let mut wide: Vec<usize> = (found.iter().map(|&(at, _)| at))
        .filter(|&at| bounds(at).0 != bounds(at).1)
        .collect();
    wide.dedup();
    let mut values: Vec<Vec<u64>> = vec![Vec::new(); wide.len()];
    if !wide.is_empty() {
        for part in parts {
            for &value in *part {
                let at = bucket(value);
                if let Some(i) = wide.iter().position(|&w| w == at) {
                    values[i].push(value);
                }
            }
        }
    }
    found.map(|(at, rank)| match wide.iter().position(|&w| w == at) {
        Some(i) => *values[i].select_nth_unstable(rank as usize - 1).1,
        None => bounds(at).0,
    })
}

/// The durations of a row's calls: each one, or a histogram of them.
#[derive(Debug, Clone)]
pub(crate) enum Durations {
    Exact(Vec<u64>),
    Histogram(Histogram),
}

impl Durations {
    /// No duration yet, kept exactly when `exact`.
    pub(crate) fn new(exact: bool) -> Self {
        if exact {
            Self::Exact(Vec::new())
        } else {
            Self::Histogram(Histogram::default())
        }
    }

    /// The durations themselves, when kept each.
    #[cfg(test)]
    pub(crate) fn exact(&self) -> Option<&[u64]> {
        match self {
            Self::Exact(values) => Some(values),
            Self::Histogram(_) => None,
        }
    }

    /// Durations added.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        match self {
            Self::Exact(values) => values.len() as u64,
            Self::Histogram(histogram) => histogram.count(),
        }
    }

    /// Adds `value`.
    #[inline]
    pub(crate) fn push(&mut self, value: u64) {
        match self {
            Self::Exact(values) => values.push(value),
            Self::Histogram(histogram) => histogram.add(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{COPIED_UPTO, Histogram, bounds, bucket, nearest_ranks};

    /// The percentiles of values in several lists are those of the lists put together:
    /// small and large counts, values spread wide or piled on a few, lists empty or not.
    #[test]
    fn nearest_ranks_of_several_lists_are_those_of_one() {
        let mut next = crate::record::test_random(11);
        for round in 0..60u64 {
            let lists = 1 + next(5) as usize;
            let per = match round % 3 {
                0 => next(COPIED_UPTO as u64 / 2),
                _ => next(40_000),
            } as usize;
            let parts: Vec<Vec<u64>> = (0..lists)
                .map(|list| {
                    let len = if list == 1 {
                        0
                    } else {
                        per + next(100) as usize
                    };
                    (0..len)
                        .map(|_| match round % 4 {
                            0 => next(300),
                            1 => 1_000 + next(5),
                            2 => next(0) >> next(64),
                            _ => 120 + next(3) * 1_000_000,
                        })
                        .collect()
                })
                .collect();
            let slices: Vec<&[u64]> = parts.iter().map(Vec::as_slice).collect();
            let pcts = [50, 99, 1, 100, 90];
            let mut all = parts.concat();
            let expected = pcts.map(|pct| match all.len() {
                0 => 0,
                len => {
                    let rank = (len * pct as usize).div_ceil(100).max(1);
                    *all.select_nth_unstable(rank - 1).1
                }
            });
            assert_eq!(nearest_ranks(&slices, pcts), expected, "round {round}");
        }
        assert_eq!(nearest_ranks(&[], [50, 99]), [0, 0]);
        assert_eq!(nearest_ranks(&[&[], &[7]], [50, 99]), [7, 7]);
    }

    #[test]
    fn least_keeping_counts_whole_buckets() {
        let mut h = Histogram::default();
        for v in [3, 3, 10, 300, 300, 301, 5000] {
            h.add(v);
        }
        assert_eq!(h.least_keeping(u64::MAX), (3, 7));
        assert_eq!(h.least_keeping(5), (10, 5));
        assert_eq!(h.least_keeping(4), (300, 4));
        assert_eq!(h.least_keeping(3), (301, 2));
        // 5000 is in the bucket [4992, 5007].
        assert_eq!(h.least_keeping(1), (4992, 1));
        assert_eq!(h.least_keeping(0), (5001, 0));
    }

    #[test]
    fn buckets_tile_the_values() {
        // Every value lies in its bucket, and consecutive buckets touch.
        for value in (0..5000).chain([u64::MAX, u64::MAX - 1, 1 << 40, (1 << 40) - 1]) {
            let (low, high) = bounds(bucket(value));
            assert!(low <= value && value <= high, "{value} in {low}..={high}");
        }
        for index in 1..bucket(u64::MAX) {
            assert_eq!(bounds(index).0, bounds(index - 1).1 + 1, "bucket {index}");
        }
        assert_eq!(bounds(bucket(u64::MAX)).1, u64::MAX);
        assert_eq!(bucket(255), 255);
        assert_eq!(bounds(bucket(256)), (256, 256));
        assert_eq!(bounds(bucket(1000)), (1000, 1001));
        assert_eq!(bounds(bucket(1_000_000)), (999_424, 1_001_471));
    }

    #[test]
    fn quantiles_are_within_the_bound() {
        // Every bucket's middle is within 1/512 of any value in it.
        for value in [300, 1_000, 12_345, 999_999, 1 << 33, u64::MAX / 3] {
            let (low, high) = bounds(bucket(value));
            let middle = low + (high - low) / 2;
            let error = middle.abs_diff(value) as f64 / value as f64;
            assert!(error <= 1.0 / 512.0, "{value}: {middle}, {error}");
        }
    }

    #[test]
    fn nearest_rank_as_exact_below_256_and_bucketed_above() {
        let mut h = Histogram::default();
        for v in 1..=100 {
            h.add(v);
        }
        assert_eq!((h.quantile(50), h.quantile(99)), (50, 99));
        assert_eq!(
            (h.count(), h.total(), h.min(), h.max()),
            (100, 5050, 1, 100)
        );
        let mut big = Histogram::default();
        // 99 calls of 1000 ns and one of 1_000_000 ns: p50 is 1000's bucket (1000..=1001),
        // whose middle is 1000; p99 too; the max stays exact.
        for _ in 0..99 {
            big.add(1000);
        }
        big.add(1_000_000);
        assert_eq!(
            (big.quantile(50), big.quantile(99), big.max()),
            (1000, 1000, 1_000_000)
        );
        // Clamped to the max: the middle of 1_000_000's bucket is 1_000_447.
        assert_eq!(big.quantile(100), 1_000_000);
        let mut merged = Histogram::default();
        merged.merge(&h);
        merged.merge(&big);
        assert_eq!(
            (merged.count(), merged.min(), merged.max()),
            (200, 1, 1_000_000)
        );
        assert_eq!(merged.total(), 5050 + 99 * 1000 + 1_000_000);
        assert_eq!(merged.quantile(50), 100);
        assert_eq!(Histogram::default().quantile(50), 0);
    }
}
