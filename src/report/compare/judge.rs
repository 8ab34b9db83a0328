//! The verdict on one name: its shift, interval and margin.

use super::samples::Calls;
use super::stats::hodges_lehmann;
use super::{DiffRow, Metric, Options, Verdict};

/// The row of `name`, with intervals at the normal quantile `z`.
pub(super) fn judge(
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
