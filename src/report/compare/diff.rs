//! Making a [`Diff`]: every name of two runs judged, at a family-wise confidence.

use std::collections::BTreeMap;

use crate::trace::Trace;

use super::judge::judge;
use super::samples::{Calls, samples};
use super::stats::normal_quantile;
use super::{Diff, DiffRow, Metric, Options, Verdict};

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
    /// its samples: see the [module documentation](super). A name counts in a run when some
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
        let calls = |sessions: Vec<BTreeMap<&'static str, Vec<(u64, u64)>>>| {
            (sessions.into_iter())
                .map(|session| {
                    (session.into_iter())
                        .map(|(name, calls)| (name, Calls::new(calls, options.metric, 0)))
                        .collect()
                })
                .collect()
        };
        Self::from_session_calls(calls(base), calls(new), options)
    }

    /// [`Diff::from_session_samples`] of each session's calls of each name, a sample per
    /// call.
    pub(super) fn from_session_calls(
        base: Vec<BTreeMap<&'static str, Calls>>,
        new: Vec<BTreeMap<&'static str, Calls>>,
        options: &Options,
    ) -> Self {
        let repetitions = (base.len(), new.len());
        let side = |sessions: Vec<BTreeMap<&'static str, Calls>>| {
            let mut names: BTreeMap<&'static str, Calls> = BTreeMap::new();
            for session in sessions {
                for (name, session) in session {
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
    pub(super) fn judge_all(
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
