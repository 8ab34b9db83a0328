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

use std::collections::BTreeMap;

use crate::trace::{SpanKind, Trace};

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

impl Diff {
    /// Compares `new` with `base`: every scope and `#[profile] async fn` call of each trace
    /// (all its threads, processes and sessions), name by name.
    #[must_use]
    pub fn new(base: &Trace, new: &Trace, options: &Options) -> Self {
        let mut diff = Self::from_samples(samples(base), samples(new), options);
        diff.base_wall_ns = base.wall_ns();
        diff.new_wall_ns = new.wall_ns();
        diff
    }

    /// Compares per-call samples: for each name, `(duration, self time)` in ns of each call of
    /// the base and of the new run, in the order the calls started (the time blocks of
    /// [`Options::blocks`] are runs of consecutive calls in that order). The wall times are
    /// left 0.
    #[must_use]
    pub fn from_samples(
        base: BTreeMap<&'static str, Vec<(u64, u64)>>,
        new: BTreeMap<&'static str, Vec<(u64, u64)>>,
        options: &Options,
    ) -> Self {
        let calls = |side: BTreeMap<&'static str, Vec<(u64, u64)>>| {
            side.into_iter()
                .map(|(name, calls)| (name, Calls::new(calls, options.metric, options.blocks)))
                .collect()
        };
        Self::judge_all(calls(base), calls(new), options, false)
    }

    /// Compares two runs of several sessions each (`base` and `new` hold a trace per session),
    /// with each name's per-session medians (per-session totals with [`Metric::Total`]) as
    /// its samples: see the [module documentation](self). A name counts in a run when some
    /// session has it; its calls are summed over the sessions.
    #[must_use]
    pub fn from_repetitions(base: &[Trace], new: &[Trace], options: &Options) -> Self {
        let sessions = |traces: &[Trace]| traces.iter().map(samples).collect();
        let mut diff = Self::from_session_samples(sessions(base), sessions(new), options);
        let wall = |traces: &[Trace]| traces.iter().map(Trace::wall_ns).sum();
        diff.base_wall_ns = wall(base);
        diff.new_wall_ns = wall(new);
        diff
    }

    /// [`Diff::from_repetitions`] of per-call samples (as [`Diff::from_samples`] takes them),
    /// a map per session. The wall times are left 0.
    #[must_use]
    pub fn from_session_samples(
        base: Vec<BTreeMap<&'static str, Vec<(u64, u64)>>>,
        new: Vec<BTreeMap<&'static str, Vec<(u64, u64)>>>,
        options: &Options,
    ) -> Self {
        let repetitions = (base.len(), new.len());
        let side = |sessions: Vec<BTreeMap<&'static str, Vec<(u64, u64)>>>| {
            let mut names: BTreeMap<&'static str, Calls> = BTreeMap::new();
            for session in sessions {
                for (name, calls) in session {
                    let session = Calls::new(calls, options.metric, 0);
                    let value = match options.metric {
                        Metric::Total => session.total_ns,
                        Metric::PerCall | Metric::SelfTime => session.median_ns,
                    };
                    let entry = names.entry(name).or_insert_with(|| Calls {
                        values: Vec::new(),
                        median_ns: 0,
                        total_ns: 0,
                        total_var: 0.0,
                        calls: 0,
                    });
                    entry.values.push(value);
                    entry.total_ns = entry.total_ns.saturating_add(session.total_ns);
                    entry.calls += session.calls;
                }
            }
            for calls in names.values_mut() {
                calls.values.sort_unstable();
                calls.median_ns = calls.values[(calls.values.len() - 1) / 2];
            }
            names
        };
        let mut diff = Self::judge_all(side(base), side(new), options, true);
        diff.repetitions = Some(repetitions);
        diff
    }

    /// The diff of the samples of each name in `base` and `new`: calls, or per-session
    /// figures when `repeated`.
    fn judge_all(
        base: BTreeMap<&'static str, Calls>,
        new: BTreeMap<&'static str, Calls>,
        options: &Options,
        repeated: bool,
    ) -> Self {
        let mut names: BTreeMap<&'static str, (Option<Calls>, Option<Calls>)> = BTreeMap::new();
        for (name, calls) in base {
            names.entry(name).or_default().0 = Some(calls);
        }
        for (name, calls) in new {
            names.entry(name).or_default().1 = Some(calls);
        }
        let enough = |c: &Calls| c.calls >= options.min_calls.max(1);
        let judged = names
            .values()
            .filter(|(b, n)| b.as_ref().is_some_and(enough) && n.as_ref().is_some_and(enough))
            .count();
        let alpha = (1.0 - options.confidence).clamp(0.0, 1.0) / judged.max(1) as f64;
        let z = normal_quantile(1.0 - alpha / 2.0);
        let mut rows: Vec<DiffRow> = names
            .into_iter()
            .map(|(name, (b, n))| {
                judge(name, b.as_ref(), n.as_ref(), options, z, repeated, &enough)
            })
            .collect();
        let key = |row: &DiffRow| {
            let change = row
                .change_ns
                .and_then(|c| row.relative(c))
                .map_or(0.0, f64::abs);
            (row.verdict, std::cmp::Reverse(OrdF64(change)))
        };
        rows.sort_by(|a, b| key(a).cmp(&key(b)).then(a.name.cmp(b.name)));
        Self {
            options: *options,
            judged,
            row_confidence: 1.0 - alpha,
            repetitions: None,
            base_wall_ns: 0,
            new_wall_ns: 0,
            rows,
        }
    }

    /// How many rows have `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == verdict).count()
    }

    /// The row of `name`.
    pub fn row(&self, name: &str) -> Option<&DiffRow> {
        self.rows.iter().find(|r| r.name == name)
    }
}

/// A total order of finite floats (NaN last), for sorting.
#[derive(Clone, Copy, PartialEq)]
struct OrdF64(f64);

impl Eq for OrdF64 {}

impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// `(duration, self time)` of every call in `trace`, by name, in the order the calls started
/// (of two that started together, the one of the lower thread first): scopes (not the polls of
/// async calls) and async calls.
fn samples(trace: &Trace) -> BTreeMap<&'static str, Vec<(u64, u64)>> {
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
struct Calls {
    /// The samples, ascending: the medians of the time blocks of the compared time per call
    /// (the calls themselves without blocks; with repetitions, the per-session medians or
    /// totals).
    values: Vec<u64>,
    /// The median per call (with repetitions: of the per-session values).
    median_ns: u64,
    total_ns: u64,
    /// The estimated variance of `total_ns` from the spread of the blocks' mean durations
    /// (batch means), for [`Metric::Total`] without repetitions.
    total_var: f64,
    calls: u64,
}

impl Calls {
    /// The calls (in the order they started) cut into `blocks` time blocks (0: a sample per
    /// call).
    fn new(calls: Vec<(u64, u64)>, metric: Metric, blocks: usize) -> Self {
        let n = calls.len();
        let total_ns = calls.iter().fold(0u64, |s, &(d, _)| s.saturating_add(d));
        let mut compared: Vec<u64> = calls
            .iter()
            .map(|&(duration, self_ns)| match metric {
                Metric::SelfTime => self_ns,
                Metric::PerCall | Metric::Total => duration,
            })
            .collect();
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
        values.sort_unstable();
        compared.sort_unstable();
        // The total of n calls in k blocks of mean variance s²: n² · s² / k.
        let total_var = if k > 1 {
            let mean = means.iter().sum::<f64>() / k as f64;
            let s2 = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
            (n as f64).powi(2) * s2 / k as f64
        } else {
            0.0
        };
        Self {
            values,
            median_ns: if n == 0 { 0 } else { compared[(n - 1) / 2] },
            total_ns,
            total_var,
            calls: n as u64,
        }
    }

    fn side(&self) -> Side {
        Side {
            calls: self.calls,
            total_ns: self.total_ns,
            median_ns: self.median_ns,
            samples: self.values.len(),
        }
    }
}

/// The row of `name`, with intervals at the normal quantile `z`.
fn judge(
    name: &'static str,
    base: Option<&Calls>,
    new: Option<&Calls>,
    options: &Options,
    z: f64,
    repeated: bool,
    enough: &dyn Fn(&Calls) -> bool,
) -> DiffRow {
    let mut row = DiffRow {
        name,
        verdict: Verdict::Inconclusive,
        base: base.map(Calls::side),
        new: new.map(Calls::side),
        change_ns: None,
        interval_ns: None,
        margin_ns: None,
        reference_ns: base.map(|b| match options.metric {
            Metric::Total if !repeated => b.total_ns,
            _ => b.median_ns,
        }),
    };
    let (b, n) = match (base, new) {
        (None, _) => {
            row.verdict = Verdict::Added;
            return row;
        }
        (_, None) => {
            row.verdict = Verdict::Removed;
            return row;
        }
        (Some(b), Some(n)) => (b, n),
    };
    // A name given with no calls (possible through `from_samples`): nothing to compare.
    if b.values.is_empty() || n.values.is_empty() {
        return row;
    }
    let (estimate, interval, margin) = match options.metric {
        // Per-session totals are samples like per-call times.
        Metric::Total if repeated => {
            let (estimate, interval) = hodges_lehmann(&b.values, &n.values, z);
            let per_session = b.calls as f64 / b.values.len() as f64;
            let margin = (options.threshold * row.reference_ns.unwrap_or(0) as f64)
                .max(options.min_change_ns * per_session);
            (estimate, interval, margin)
        }
        Metric::Total => {
            let estimate = n.total_ns as f64 - b.total_ns as f64;
            let half = z * (b.total_var + n.total_var).sqrt();
            let margin =
                (options.threshold * b.total_ns as f64).max(options.min_change_ns * b.calls as f64);
            (estimate, Some((estimate - half, estimate + half)), margin)
        }
        Metric::PerCall | Metric::SelfTime => {
            let (estimate, interval) = hodges_lehmann(&b.values, &n.values, z);
            let margin = (options.threshold * row.reference_ns.unwrap_or(0) as f64)
                .max(options.min_change_ns);
            (estimate, interval, margin)
        }
    };
    row.change_ns = Some(estimate);
    if !(enough(b) && enough(n)) {
        return row;
    }
    // The between-run noise, a variance added to the estimate's: each half of the interval
    // widened to √(half² + (z·noise·reference)²).
    let interval = match interval {
        Some((low, high)) if !repeated && options.run_noise > 0.0 => {
            let floor = z * options.run_noise * row.reference_ns.unwrap_or(0) as f64;
            let widen = |half: f64| half.hypot(floor);
            Some((
                estimate - widen(estimate - low),
                estimate + widen(high - estimate),
            ))
        }
        other => other,
    };
    row.margin_ns = Some(margin);
    row.interval_ns = interval;
    row.verdict = match interval {
        Some((low, _)) if low > margin => Verdict::Regressed,
        Some((_, high)) if high < -margin => Verdict::Improved,
        Some((low, high)) if low >= -margin && high <= margin => Verdict::Unchanged,
        _ => Verdict::Inconclusive,
    };
    row
}

/// The Hodges–Lehmann shift of `y` from `x` (both sorted ascending, not empty) and its
/// rank-based interval at the normal quantile `z` (`None` when the samples are too small for
/// that level).
pub(crate) fn hodges_lehmann(x: &[u64], y: &[u64], z: f64) -> (f64, Option<(f64, f64)>) {
    let (m, n) = (x.len() as u128, y.len() as u128);
    let pairs = m * n;
    let estimate = if pairs % 2 == 1 {
        kth_difference(x, y, pairs.div_ceil(2)) as f64
    } else {
        let low = kth_difference(x, y, pairs / 2);
        let high = kth_difference(x, y, pairs / 2 + 1);
        (low + high) as f64 / 2.0
    };
    let (mf, nf) = (m as f64, n as f64);
    let c = (mf * nf / 2.0 - z * (mf * nf * (mf + nf + 1.0) / 12.0).sqrt()).floor();
    let interval = (c >= 1.0).then(|| {
        let c = c as u128;
        (
            kth_difference(x, y, c) as f64,
            kth_difference(x, y, pairs - c + 1) as f64,
        )
    });
    (estimate, interval)
}

/// The `k`-th smallest (1 is the smallest) of the differences `y[j] − x[i]`, both sorted
/// ascending: a binary search on the difference, counting the pairs at or below it in
/// `O(len x + len y)`.
pub(crate) fn kth_difference(x: &[u64], y: &[u64], k: u128) -> i128 {
    let (first, last) = (x[0] as i128, x[x.len() - 1] as i128);
    let (mut lo, mut hi) = (y[0] as i128 - last, y[y.len() - 1] as i128 - first);
    // The smallest d with at least k differences <= d.
    while lo < hi {
        let mid = lo + (hi - lo).div_euclid(2);
        if pairs_at_most(x, y, mid) >= k {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// How many differences `y[j] − x[i]` are at most `d`.
fn pairs_at_most(x: &[u64], y: &[u64], d: i128) -> u128 {
    // y[j] − x[i] <= d  ⇔  x[i] >= y[j] − d; the first such i only moves right as j grows.
    let mut i = 0;
    let mut count = 0u128;
    for &yj in y {
        let bound = yj as i128 - d;
        while i < x.len() && (x[i] as i128) < bound {
            i += 1;
        }
        count += (x.len() - i) as u128;
    }
    count
}

/// The quantile of the standard normal distribution at `p` (0 < p < 1), by Acklam's rational
/// approximation (relative error below 1.2e-9).
pub(crate) fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` calls of `ns` each, plus the deterministic jitter `(i * 7919) % spread`.
    fn calls(n: u64, ns: u64, spread: u64) -> Vec<(u64, u64)> {
        (0..n)
            .map(|i| {
                let d = ns + (i * 7919) % spread.max(1);
                (d, d)
            })
            .collect()
    }

    fn diff(
        base: &[(&'static str, Vec<(u64, u64)>)],
        new: &[(&'static str, Vec<(u64, u64)>)],
        options: &Options,
    ) -> Diff {
        Diff::from_samples(
            base.iter().cloned().collect(),
            new.iter().cloned().collect(),
            options,
        )
    }

    #[test]
    fn normal_quantiles() {
        assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-8);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.005) + 2.575_829_304).abs() < 1e-8);
        assert!((normal_quantile(0.999_5) - 3.290_526_731).abs() < 1e-7);
    }

    #[test]
    fn kth_differences_match_brute_force() {
        let x = [1, 4, 4, 9, 20];
        let y = [2, 3, 3, 10];
        let mut all: Vec<i128> = x
            .iter()
            .flat_map(|&a| y.iter().map(move |&b| b as i128 - a as i128))
            .collect();
        all.sort_unstable();
        for k in 1..=all.len() {
            assert_eq!(kth_difference(&x, &y, k as u128), all[k - 1], "k = {k}");
        }
    }

    #[test]
    fn hodges_lehmann_of_a_pure_shift_is_the_shift() {
        let x: Vec<u64> = (0..101).map(|i| 1_000 + i * 10).collect();
        let y: Vec<u64> = x.iter().map(|v| v + 37).collect();
        let (estimate, interval) = hodges_lehmann(&x, &y, 1.96);
        assert_eq!(estimate, 37.0);
        let (low, high) = interval.unwrap();
        assert!(low < 37.0 && high > 37.0, "{low} {high}");
        // Too few calls for a 95 % interval: 2 and 2 (C = ⌊2 − 1.96·1.29⌋ < 1).
        assert_eq!(hodges_lehmann(&[1, 2], &[3, 4], 1.96).1, None);
    }

    #[test]
    fn hodges_lehmann_interval_small_samples_exact() {
        // m = n = 10: C = ⌊50 − 1.96·√(100·21/12)⌋ = ⌊50 − 25.93⌋ = 24: the 24th and 77th of
        // the 100 differences. y − x = (j − i)·10 + 5 for i, j in 0..10.
        let x: Vec<u64> = (0..10).map(|i| 100 + i * 10).collect();
        let y: Vec<u64> = (0..10).map(|i| 105 + i * 10).collect();
        let (estimate, interval) = hodges_lehmann(&x, &y, 1.96);
        assert_eq!(estimate, 5.0);
        // Differences −85 (1), −75 (2), −65 (3), −55 (4), −45 (5), −35 (6), −25 (7), ...
        // cumulative 1, 3, 6, 10, 15, 21, 28: the 24th is −25; symmetric: the 77th is +35.
        assert_eq!(interval, Some((-25.0, 35.0)));
    }

    #[test]
    fn verdicts_on_known_distributions() {
        let options = Options::default();
        let base = [
            ("same", calls(10_000, 2_000, 200)),
            ("slower", calls(10_000, 2_000, 200)),
            ("faster", calls(10_000, 50_000, 2_000)),
            ("tiny", calls(10_000, 200, 20)),
            ("few", calls(10, 2_000, 200)),
            ("gone", calls(100, 1_000, 10)),
            ("noisy", calls(40, 2_000, 1_000)),
        ];
        let new = [
            // 1 % slower: inside the margin.
            ("same", calls(10_000, 2_020, 200)),
            // 10 % slower: past 5 % and past 50 ns.
            ("slower", calls(10_000, 2_200, 200)),
            // 10 % faster.
            ("faster", calls(10_000, 45_000, 2_000)),
            // +20 % but 40 ns per call: under --min-change.
            ("tiny", calls(10_000, 240, 20)),
            // +50 % on 10 calls: fewer than min_calls.
            ("few", calls(10, 3_000, 200)),
            ("new", calls(100, 1_000, 10)),
            // +6 % on 40 calls spread over 1 µs: the interval crosses the margin.
            ("noisy", calls(40, 2_120, 1_000)),
        ];
        let d = diff(&base, &new, &options);
        let verdict = |name| d.row(name).unwrap().verdict;
        assert_eq!(verdict("same"), Verdict::Unchanged);
        assert_eq!(verdict("slower"), Verdict::Regressed);
        assert_eq!(verdict("faster"), Verdict::Improved);
        assert_eq!(verdict("tiny"), Verdict::Unchanged);
        assert_eq!(verdict("few"), Verdict::Inconclusive);
        assert_eq!(verdict("noisy"), Verdict::Inconclusive);
        assert_eq!(verdict("gone"), Verdict::Removed);
        assert_eq!(verdict("new"), Verdict::Added);
        // same, slower, faster, tiny, noisy; not few (10 calls), gone, new.
        assert_eq!(d.judged, 5);
        assert!((d.row_confidence - (1.0 - 0.05 / 5.0)).abs() < 1e-12);
        assert_eq!(d.row("slower").unwrap().change_ns, Some(200.0));
        assert_eq!(d.row("few").unwrap().change_ns, Some(1_000.0));
        assert_eq!(d.row("few").unwrap().interval_ns, None);
        let names: Vec<_> = d.rows.iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            [
                "slower", "faster", "few", "noisy", "tiny", "same", "new", "gone"
            ]
        );
        assert_eq!(d.count(Verdict::Regressed), 1);
        // Without the minimum change, the +40 ns of "tiny" (20 %) regresses.
        let strict = Options {
            min_change_ns: 0.0,
            ..options
        };
        let d = diff(&base, &new, &strict);
        assert_eq!(d.row("tiny").unwrap().verdict, Verdict::Regressed);
    }

    #[test]
    fn a_two_percent_change_is_never_a_regression_at_five() {
        for n in [100, 1_000, 100_000] {
            let d = diff(
                &[("f", calls(n, 50_000, 500))],
                &[("f", calls(n, 51_000, 500))],
                &Options::default(),
            );
            let verdict = d.row("f").unwrap().verdict;
            assert_ne!(verdict, Verdict::Regressed, "{n} calls");
        }
    }

    #[test]
    fn per_call_ignores_more_calls_total_does_not() {
        let base = [("step", calls(1_000, 2_000, 100))];
        let new = [("step", calls(2_000, 2_000, 100))];
        let d = diff(&base, &new, &Options::default());
        assert_eq!(d.row("step").unwrap().verdict, Verdict::Unchanged);
        let total = Options {
            metric: Metric::Total,
            ..Options::default()
        };
        let d = diff(&base, &new, &total);
        assert_eq!(d.row("step").unwrap().verdict, Verdict::Regressed);
    }

    #[test]
    fn self_time_compares_self_times() {
        // Durations the same, self times 30 % longer (a child got faster).
        let base: Vec<(u64, u64)> = (0..500).map(|i| (3_000 + i % 50, 1_000 + i % 50)).collect();
        let new: Vec<(u64, u64)> = (0..500).map(|i| (3_000 + i % 50, 1_300 + i % 50)).collect();
        let b = [("parent", base)];
        let n = [("parent", new)];
        let d = diff(&b, &n, &Options::default());
        assert_eq!(d.row("parent").unwrap().verdict, Verdict::Unchanged);
        let self_time = Options {
            metric: Metric::SelfTime,
            ..Options::default()
        };
        let d = diff(&b, &n, &self_time);
        assert_eq!(d.row("parent").unwrap().verdict, Verdict::Regressed);
        assert_eq!(d.row("parent").unwrap().change_ns, Some(300.0));
    }

    /// `blocks` blocks of `per_block` calls each, every call of block `j` lasting
    /// `ns + step·j`: a run whose machine slows down step by step (block medians known exactly).
    fn ramp(blocks: u64, per_block: u64, ns: u64, step: u64) -> Vec<(u64, u64)> {
        (0..blocks * per_block)
            .map(|i| {
                let d = ns + step * (i / per_block);
                (d, d)
            })
            .collect()
    }

    #[test]
    fn more_names_widen_each_interval() {
        // 20 blocks a side, block medians 2,000 + 20·j (base) and 2,200 + 20·j (new): the
        // differences are 200 + 20·k, k = j' − j, 20 − |k| times each. Base median 2,180 (block
        // 9): margin 109 ns.
        let base = ramp(20, 10, 2_000, 20);
        let new = ramp(20, 10, 2_200, 20);
        // One name, 95 %: C = ⌊200 − 1.96·√(400·41/12)⌋ = 127, the 127th difference is at
        // k = −4 (1 + 2 + … + 15 = 120 < 127 ≤ 136): 120 .. 280, past the margin.
        let one = diff(&[("f", base.clone())], &[("f", new.clone())], &quiet());
        let row = one.row("f").unwrap();
        assert_eq!(row.verdict, Verdict::Regressed, "{one:?}");
        assert_eq!(row.interval_ns, Some((120.0, 280.0)));
        assert_eq!(row.margin_ns, Some(109.0));
        assert_eq!(row.change_ns, Some(200.0));
        let others: Vec<&'static str> = (1..100)
            .map(|i| &*Box::leak(format!("other{i}").into_boxed_str()))
            .collect();
        let mut b = vec![("f", base)];
        let mut n = vec![("f", new)];
        for name in &others {
            b.push((name, ramp(20, 10, 2_000, 20)));
            n.push((name, ramp(20, 10, 2_000, 20)));
        }
        // 100 names, each at 99.95 %: z = 3.481, C = ⌊200 − 128.68⌋ = 71, at k = −8
        // (66 < 71 ≤ 78): 40 .. 360, across the margin.
        let many = diff(&b, &n, &quiet());
        assert_eq!(many.judged, 100);
        let row = many.row("f").unwrap();
        assert_eq!(row.verdict, Verdict::Inconclusive, "{row:?}");
        assert_eq!(row.interval_ns, Some((40.0, 360.0)));
    }

    /// The default options without run noise: intervals of the samples alone.
    fn quiet() -> Options {
        Options {
            run_noise: 0.0,
            ..Options::default()
        }
    }

    #[test]
    fn run_noise_widens_the_interval() {
        // 10,000 calls a side, every block alike (jitter 0..20 ns, block medians 2,009 and
        // 2,039): +30 ns (1.5 %) with an interval of 30 .. 30 from the blocks. At --threshold
        // 1 % and no minimum change (margin 20.09 ns) that regresses without run noise.
        let base = [("f", calls(10_000, 2_000, 20))];
        let new = [("f", calls(10_000, 2_030, 20))];
        let strict = Options {
            threshold: 0.01,
            min_change_ns: 0.0,
            ..quiet()
        };
        let d = diff(&base, &new, &strict);
        let row = d.row("f").unwrap();
        assert_eq!(
            (row.verdict, row.interval_ns, row.reference_ns),
            (Verdict::Regressed, Some((30.0, 30.0)), Some(2_009))
        );
        // With the default 0.7 % of noise between runs, each half widens to
        // √(0² + (1.96·0.007·2,009)²) = 27.56 ns: 2.44 .. 57.56 crosses the margin.
        let d = diff(
            &base,
            &new,
            &Options {
                run_noise: Options::RUN_NOISE,
                ..strict
            },
        );
        let row = d.row("f").unwrap();
        assert_eq!(row.verdict, Verdict::Inconclusive);
        let (low, high) = row.interval_ns.unwrap();
        let floor = normal_quantile(0.975) * 0.007 * 2_009.0;
        assert!((floor - 27.563).abs() < 1e-3, "{floor}");
        assert!((low - (30.0 - floor)).abs() < 1e-9 && (high - (30.0 + floor)).abs() < 1e-9);
        // Repetitions measure the noise between runs: none is added. Six sessions a side of
        // the same calls: the session medians 2,009 and 2,039 give 30 .. 30, regressed.
        let sessions = |calls: &[(&'static str, Vec<(u64, u64)>)]| -> Vec<BTreeMap<_, _>> {
            (0..6).map(|_| calls.iter().cloned().collect()).collect()
        };
        let d = Diff::from_session_samples(
            sessions(&base),
            sessions(&new),
            &Options {
                run_noise: Options::RUN_NOISE,
                ..strict
            },
        );
        let row = d.row("f").unwrap();
        assert_eq!(
            (row.verdict, row.interval_ns),
            (Verdict::Regressed, Some((30.0, 30.0)))
        );
    }

    #[test]
    fn calls_are_cut_into_time_blocks() {
        // 10 calls in 4 blocks: [1, 2], [3, 4, 5], [6, 7], [8, 9, 10] (calls j·10/4 ..
        // (j+1)·10/4), lower medians 1, 4, 6, 9; means 1.5, 4, 6.5, 9 (variance 31.25/3), so
        // the total's variance is 10²·(31.25/3)/4.
        let calls: Vec<(u64, u64)> = (1..=10).map(|v| (v, v)).collect();
        let c = Calls::new(calls.clone(), Metric::PerCall, 4);
        assert_eq!(c.values, [1, 4, 6, 9]);
        assert_eq!((c.median_ns, c.total_ns, c.calls), (5, 55, 10));
        assert!((c.total_var - 100.0 * 31.25 / 3.0 / 4.0).abs() < 1e-9);
        // The blocks follow the order of the calls, not their sizes.
        let reversed: Vec<(u64, u64)> = calls.iter().rev().copied().collect();
        assert_eq!(
            Calls::new(reversed, Metric::PerCall, 4).values,
            [2, 4, 7, 9]
        );
        // At most one block per call; 0 blocks: every call a sample, the total's variance
        // that of 10 independent calls (10 · 55/6).
        for blocks in [0, 10, 20] {
            let c = Calls::new(calls.clone(), Metric::PerCall, blocks);
            assert_eq!(c.values, (1..=10).collect::<Vec<u64>>(), "{blocks}");
            assert!((c.total_var - 10.0 * 55.0 / 6.0).abs() < 1e-9, "{blocks}");
        }
        // Self times are cut the same way.
        let with_self: Vec<(u64, u64)> = (1..=10).map(|v| (100 + v, v)).collect();
        assert_eq!(
            Calls::new(with_self, Metric::SelfTime, 4).values,
            [1, 4, 6, 9]
        );
    }

    #[test]
    fn a_drifting_run_is_not_a_regression() {
        // A/A on a machine that slows down through each run (a frequency or a neighbour that
        // changes): 10,000 calls in 20 stretches of 500, the k-th at 2,000 + 30·k ns. The base
        // run goes through stretches 0..20, the new run (the same build) through 5..25,
        // in the other order: +150 ns (6.6 %) between the runs, with 570 ns of drift within
        // each.
        let base = ramp(20, 500, 2_000, 30);
        let mut new = ramp(20, 500, 2_150, 30);
        new.reverse();
        // Taking the calls as independent samples: the 10⁸ differences 150 + 30·k, k = j' − j,
        // (20 − |k|)·500² times each; C = 5·10⁷ − 1.96·√(10⁸·20,001/12) = 49,199,814 falls at
        // k = 0 (190 < 196.8 ≤ 210 in units of 500²): 150 .. 150, past the margin (5 % of the
        // base median 2,270 = 113.5 ns): regressed, with certainty it does not have.
        let calls = Options {
            blocks: 0,
            ..quiet()
        };
        let d = diff(&[("f", base.clone())], &[("f", new.clone())], &calls);
        let row = d.row("f").unwrap();
        assert_eq!(row.verdict, Verdict::Regressed);
        assert_eq!(row.interval_ns, Some((150.0, 150.0)));
        assert_eq!(row.margin_ns, Some(113.5));
        // 20 blocks a side (the default): the block medians carry the drift; C = 127 at
        // k = −4: 30 .. 270, across the margin: inconclusive, exit 0.
        let d = diff(&[("f", base)], &[("f", new)], &quiet());
        let row = d.row("f").unwrap();
        assert_eq!(row.verdict, Verdict::Inconclusive);
        assert_eq!(row.interval_ns, Some((30.0, 270.0)));
        assert_eq!(row.change_ns, Some(150.0));
        assert_eq!(row.base.unwrap().samples, 20);
        assert_eq!(d.count(Verdict::Regressed), 0);
    }

    #[test]
    fn a_shift_over_a_steady_run_is_found() {
        // Without run noise first (exact intervals), then with the default.
        // Calls with a jitter that does not drift (every block alike): +100 ns on `medium`,
        // +2,500 ns on `large`, +40 ns on `two`, over base medians of 2,099 and 51,013 ns (the
        // jitter included): 4.8 %, 4.9 % and 1.9 %. At --threshold 2 % the first two regress
        // (medium's interval is 100 .. 100, large's 2,483 .. 2,517, past 50 and 1,020 ns) and
        // `two` stays within --min-change (50 ns); at the default 5 % (margins 105 and
        // 2,551 ns) all are unchanged.
        let options = quiet();
        let at_2 = Options {
            threshold: 0.02,
            ..options
        };
        let base = [
            ("medium", calls(10_000, 2_000, 200)),
            ("large", calls(1_000, 50_000, 2_000)),
            ("two", calls(10_000, 2_000, 200)),
            ("same", calls(10_000, 2_000, 200)),
        ];
        let new = [
            ("medium", calls(10_000, 2_100, 200)),
            ("large", calls(1_000, 52_500, 2_000)),
            ("two", calls(10_000, 2_040, 200)),
            ("same", calls(10_000, 2_000, 200)),
        ];
        let verdicts = |d: &Diff| -> Vec<(&str, Verdict)> {
            let mut v: Vec<_> = d.rows.iter().map(|r| (r.name, r.verdict)).collect();
            v.sort();
            v
        };
        let d = diff(&base, &new, &at_2);
        assert_eq!(d.row("medium").unwrap().interval_ns, Some((100.0, 100.0)));
        assert_eq!(
            d.row("large").unwrap().interval_ns,
            Some((2_483.0, 2_517.0))
        );
        assert_eq!(
            verdicts(&d),
            [
                ("large", Verdict::Regressed),
                ("medium", Verdict::Regressed),
                ("same", Verdict::Unchanged),
                ("two", Verdict::Unchanged),
            ]
        );
        assert_eq!(
            verdicts(&diff(&base, &new, &options)),
            [
                ("large", Verdict::Unchanged),
                ("medium", Verdict::Unchanged),
                ("same", Verdict::Unchanged),
                ("two", Verdict::Unchanged),
            ]
        );
        // With the default run noise (0.7 %; 4 names, z = 2.498): medium's interval widens by
        // 2.498·0.007·2,099 = 36.7 ns to 63.3 .. 136.7, large's to about 1,608 .. 3,392 ns:
        // still past the margins at 2 %, no longer within them at 5 % (inconclusive); `two`
        // (3.3 .. 76.7) crosses the 50 ns margin at 2 % (inconclusive) and lies within it at
        // 5 %; `same` (−36.7 .. 36.7) is unchanged.
        let noisy = Options::default();
        assert_eq!(
            verdicts(&diff(
                &base,
                &new,
                &Options {
                    threshold: 0.02,
                    ..noisy
                }
            )),
            [
                ("large", Verdict::Regressed),
                ("medium", Verdict::Regressed),
                ("same", Verdict::Unchanged),
                ("two", Verdict::Inconclusive),
            ]
        );
        let d = diff(&base, &new, &noisy);
        let (low, high) = d.row("medium").unwrap().interval_ns.unwrap();
        assert!(
            (low - 63.3).abs() < 0.1 && (high - 136.7).abs() < 0.1,
            "{low} {high}"
        );
        assert_eq!(
            verdicts(&d),
            [
                ("large", Verdict::Inconclusive),
                ("medium", Verdict::Inconclusive),
                ("same", Verdict::Unchanged),
                ("two", Verdict::Unchanged),
            ]
        );
    }

    #[test]
    fn repetitions_judge_the_per_session_medians() {
        // Six sessions a side; within each session the calls agree (spread 10 ns), but the
        // sessions differ by up to 100 ns: an offset the calls of one session share.
        let sessions = |offsets: [u64; 6], extra: u64| -> Vec<BTreeMap<_, _>> {
            offsets
                .iter()
                .map(|&o| {
                    [("step", calls(500, 2_000 + o + extra, 10))]
                        .into_iter()
                        .collect()
                })
                .collect()
        };
        let base = sessions([0, 20, 40, 60, 80, 100], 0);
        // The same session offsets in another order.
        let same = sessions([100, 0, 80, 20, 60, 40], 0);
        let d = Diff::from_session_samples(base.clone(), same, &Options::default());
        let row = d.row("step").unwrap();
        assert_eq!(d.repetitions, Some((6, 6)));
        assert_eq!(row.verdict, Verdict::Unchanged);
        assert_eq!(row.base.unwrap().calls, 3_000);
        assert_eq!(row.change_ns, Some(0.0));
        // Medians 2,004 + offset: C = ⌊18 − 1.96·√(36·13/12)⌋ = ⌊5.76⌋ = 5: the 5th smallest
        // and 5th largest of the 36 differences of offsets (multiples of 20 from −100: one of
        // −100, two of −80, three of −60), within the margin (5 % of 2,044 ns).
        assert_eq!(row.interval_ns, Some((-60.0, 60.0)));
        assert_eq!(row.reference_ns, Some(2_044));
        // Every session 400 ns (20 %) slower: regressed, on 6 samples a side.
        let slower = sessions([0, 20, 40, 60, 80, 100], 400);
        let d = Diff::from_session_samples(base.clone(), slower, &Options::default());
        assert_eq!(d.row("step").unwrap().verdict, Verdict::Regressed);
        assert_eq!(d.row("step").unwrap().change_ns, Some(400.0));
        // Two sessions a side are too few for a 95 % interval: inconclusive.
        let d = Diff::from_session_samples(
            base[..2].to_vec(),
            sessions([0, 20, 40, 60, 80, 100], 400)[..2].to_vec(),
            &Options::default(),
        );
        assert_eq!(d.row("step").unwrap().verdict, Verdict::Inconclusive);
        assert_eq!(d.row("step").unwrap().interval_ns, None);
    }
}
