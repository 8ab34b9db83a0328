//! Comparing two traces name by name with a statistical verdict: what `tickscope diff` prints
//! and what its exit code is made of.
//!
//! For each scope name found in both traces the per-call durations (or self times) of the two
//! runs are compared as distributions, not as one number each.
//!
//! - **Samples: time blocks, not calls.** Consecutive calls of one run are not independent:
//!   the CPU's frequency, the caches, the pages and the other processes of the machine change
//!   during a run, and every call made meanwhile shares the change. An interval that takes the
//!   calls as independent samples is then far too narrow: it measures how well the run's own
//!   median is known, not how much a second run of the same build would differ. So the calls
//!   of a name, in the order they started, are cut into [`Options::blocks`] (20) contiguous
//!   blocks of as equal a number of calls as can be (at most one block per call), and each
//!   block's median is one sample: the method of non-overlapping *batch means* used for the
//!   output of simulations, with medians for the robustness to preempted calls. Blocks long
//!   enough that the drift inside a run has little memory from one block to the next are
//!   nearly independent, so the spread of the block medians is the drift of the run, and the
//!   interval below holds under it. An offset that a whole run shares (the code's layout, a
//!   frequency held for the whole run) cannot be seen in one run a side: see the run noise
//!   below. `blocks = 0` takes every call as a sample (valid only when calls are
//!   independent, as calls made by separate processes are).
//! - **Effect size:** the Hodges–Lehmann shift, the median of the `m × n` differences
//!   `new_j − base_i` between a sample of the new run and a sample of the base run. It is
//!   robust to the long tail of timings, and computed exactly, without forming the pairs: the
//!   k-th smallest difference is found by a binary search on the (integer) difference with an
//!   `O(m + n)` count of the pairs below it.
//! - **Interval:** the rank-based (Mann–Whitney/Moses) confidence interval of that shift: the
//!   `C`-th smallest and `C`-th largest differences, with `C = ⌊mn/2 − z·√(mn(m+n+1)/12)⌋`
//!   (normal approximation, without the correction for ties, which only makes it wider). No
//!   resampling: the same inputs give the same interval on every machine. With 20 blocks a
//!   side an interval exists up to about 600,000 names judged.
//! - **Run noise:** two runs of one build also differ by an offset that every call of a run
//!   shares, which no statistic of one run a side can measure. [`Options::run_noise`] is its
//!   standard deviation, relative to the base (default 0.7 %, measured by A/A runs: see the
//!   README), taken as a variance component independent of the drift within runs: each half
//!   of the interval widens from `h` to `√(h² + (z·run_noise·reference)²)`, the interval of
//!   the shift when the variance of its estimate is the sum of the two. With repetitions the
//!   sessions measure that noise, and none is added.
//! - **Multiple comparisons:** the confidence level is family-wise (default 95 %) over the
//!   names judged (Bonferroni): with `k` names judged each interval is at `1 − (1 − level)/k`.
//! - **Verdict:** with the margin `max(threshold × base median, min_change)`, a name
//!   `Regressed` when the whole interval lies above `+margin`, `Improved` when it lies below
//!   `−margin`, `Unchanged` when it lies within `±margin`, and `Inconclusive` otherwise, or
//!   when either run has fewer than `min_calls` calls (those names are not judged and do not
//!   count in `k`). Names in one run only are `Added` or `Removed`, never a failure.
//!
//! **Repetitions** ([`Diff::from_repetitions`]): when each run is several sessions (a capture
//! holding several runs of the program, or of its processes), the samples of a name are its
//! per-session medians (totals with [`Metric::Total`]) rather than its blocks, so that the
//! noise between runs — which every call of one run shares — is in the interval. The same
//! shift, interval and verdict apply to those samples; `min_calls` still counts calls.
//!
//! [`Metric::Total`] compares each name's total time instead: the shift is the difference of
//! the totals, its interval `± z·√(V_b + V_n)` with `V = n²·s²/k` the batch-means variance of a
//! run's total (`n` calls in `k` blocks whose mean durations have the variance `s²`; with
//! `blocks = 0`, `n·s²` of independent calls), its margin
//! `max(threshold × base total, min_change × base calls)`.

#[cfg(test)]
mod async_tests;
mod diff;
mod judge;
mod samples;
mod stats;
mod stream;
#[cfg(test)]
mod tests;

/// The time of each call a [`Diff`] compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Metric {
    /// The duration of each call (children included): a workload that makes more calls is
    /// not a regression of its scopes.
    PerCall,
    /// Each name's total time: more calls read as more time.
    Total,
    /// The self time of each call: duration minus its direct children.
    #[cfg_attr(feature = "serde", serde(rename = "self"))]
    SelfTime,
}

impl Metric {
    /// The metric's name on the command line and in reports: `per-call`, `total`, `self`.
    pub fn name(self) -> &'static str {
        match self {
            Self::PerCall => "per-call",
            Self::Total => "total",
            Self::SelfTime => "self",
        }
    }
}

/// What a [`Diff`] found for one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum Verdict {
    /// Slower: the whole interval lies past the margin.
    Regressed,
    /// Faster: the whole interval lies past the margin, the other way.
    Improved,
    /// Neither proved nor ruled out: the interval crosses the margin, or too few calls.
    Inconclusive,
    /// The whole interval lies within the margin.
    Unchanged,
    /// In the new run only.
    Added,
    /// In the base run only.
    Removed,
}

impl Verdict {
    /// Every verdict, in the order of [`Ord`].
    pub const ALL: [Self; 6] = [
        Self::Regressed,
        Self::Improved,
        Self::Inconclusive,
        Self::Unchanged,
        Self::Added,
        Self::Removed,
    ];

    /// The verdict as a word: `regressed`, `improved`, `inconclusive`, `unchanged`, `added`,
    /// `removed`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Regressed => "regressed",
            Self::Improved => "improved",
            Self::Inconclusive => "inconclusive",
            Self::Unchanged => "unchanged",
            Self::Added => "added",
            Self::Removed => "removed",
        }
    }
}

/// How a [`Diff`] judges.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Options {
    /// The time compared.
    pub metric: Metric,
    /// Relative change (a fraction: 0.05 is 5 %) the whole interval must pass.
    pub threshold: f64,
    /// Absolute change per call, in ns, the whole interval must pass too (for
    /// [`Metric::Total`]: per base call).
    pub min_change_ns: f64,
    /// Fewer calls than this in either run: `Inconclusive`, not judged.
    pub min_calls: u64,
    /// The family-wise confidence level over the names judged (0.95).
    pub confidence: f64,
    /// Contiguous time blocks each run's calls of a name are cut into, whose medians are the
    /// samples (at most one block per call); 0: every call is a sample (see the
    /// [module documentation](self)). Not used with repetitions.
    pub blocks: usize,
    /// The between-run noise one run a side cannot show, allowed for in the interval: the
    /// standard deviation of the relative change between two runs of one build (a fraction:
    /// 0.007 is 0.7 %), as A/A runs measure it (see the [module documentation](self)). Not
    /// used with repetitions, which measure it.
    pub run_noise: f64,
}

impl Options {
    /// The default threshold: 5 %.
    pub const THRESHOLD: f64 = 0.05;
    /// The default minimum change: 50 ns per call, above the 10–20 ns two runs of one build
    /// differ by per call on a scope of a few hundred ns (see the README's measured error
    /// rates).
    pub const MIN_CHANGE_NS: f64 = 50.0;
    /// The default minimum number of calls in each run.
    pub const MIN_CALLS: u64 = 20;
    /// The default family-wise confidence level.
    pub const CONFIDENCE: f64 = 0.95;
    /// The default number of time blocks: 20, within the 10 to 30 batches the batch-means
    /// method is used with, enough for an interval with Bonferroni over many names.
    pub const BLOCKS: usize = 20;
    /// The default between-run noise: 0.7 %, the root mean square of the relative A/A change
    /// of the 2 µs and 50 µs scopes measured by `scripts/diff_error_rates.sh` on a loaded
    /// 2-core VM under load (0.46 % to 0.67 % in five runs of 30 to 50 pairs), the largest
    /// rounded up (docs/CLI.md: "Regression gate").
    pub const RUN_NOISE: f64 = 0.007;
}

impl Default for Options {
    fn default() -> Self {
        Self {
            metric: Metric::PerCall,
            threshold: Self::THRESHOLD,
            min_change_ns: Self::MIN_CHANGE_NS,
            min_calls: Self::MIN_CALLS,
            confidence: Self::CONFIDENCE,
            blocks: Self::BLOCKS,
            run_noise: Self::RUN_NOISE,
        }
    }
}

/// One run's figures of a name in a [`DiffRow`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Side {
    /// Number of calls.
    pub calls: u64,
    /// Sum of durations.
    pub total_ns: u64,
    /// Median (nearest rank, the lower of two) of the compared time per call: durations, or
    /// self times with [`Metric::SelfTime`] (with repetitions: of the per-session medians).
    pub median_ns: u64,
    /// Number of samples the interval was made of: time blocks, sessions with repetitions,
    /// or calls with [`Options::blocks`] 0.
    pub samples: usize,
}

/// What changed for one name.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DiffRow {
    /// The scope name.
    pub name: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// The base run's figures; `None` for an added name.
    pub base: Option<Side>,
    /// The new run's figures; `None` for a removed name.
    pub new: Option<Side>,
    /// The estimated change, in ns: the Hodges–Lehmann shift per call, or the change of the
    /// total with [`Metric::Total`]. `None` for an added or removed name.
    pub change_ns: Option<f64>,
    /// The confidence interval of the change, in ns (low, high); `None` when not judged (too
    /// few calls, added, removed).
    pub interval_ns: Option<(f64, f64)>,
    /// The margin the interval was compared with, in ns; `None` when not judged.
    pub margin_ns: Option<f64>,
    /// The base value the threshold and [`DiffRow::relative`] are relative to, in ns: the
    /// base median per call (of the per-session medians with repetitions), or the base total
    /// with [`Metric::Total`] without repetitions. `None` for an added name.
    pub reference_ns: Option<u64>,
}

impl DiffRow {
    /// `ns` relative to [`DiffRow::reference_ns`]: a fraction, `None` without a base or with
    /// a base of 0.
    pub fn relative(&self, ns: f64) -> Option<f64> {
        self.reference_ns.filter(|&r| r > 0).map(|r| ns / r as f64)
    }
}

/// Two runs compared name by name (see the [module documentation](self) for the statistics).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Diff {
    /// How it judged.
    pub options: Options,
    /// Names judged: in both runs with at least [`Options::min_calls`] calls in each.
    pub judged: usize,
    /// The confidence level of each name's interval: `1 − (1 − confidence) / judged`.
    pub row_confidence: f64,
    /// With [`Diff::from_repetitions`]: the sessions of the base and of the new run whose
    /// per-session medians were the samples; `None` when the samples were the calls.
    pub repetitions: Option<(usize, usize)>,
    /// Wall time of the base run (the sum of its sessions' with repetitions).
    pub base_wall_ns: u64,
    /// Wall time of the new run.
    pub new_wall_ns: u64,
    /// One row per name: by verdict (regressed first), then largest relative change, then name.
    pub rows: Vec<DiffRow>,
}
