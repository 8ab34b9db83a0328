//! `tickscope diff`: what changed between two runs, per scope name, after measureme's
//! `summarize diff`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;
use tickscope::report::{Report, ScopeStats};
use tickscope::table::format_ns;
use tickscope::trace::Trace;

use crate::{Context, Failure, input, text};

/// Compares two captures scope by scope (every session of each, as `table` counts them): the
/// change in calls, total, self, p50 and p99 time, largest change first (of total time, or of
/// self time with --metric self). Scopes found in one run only are shown as added or removed.
///
/// Exits with 1 when a scope's total time (or self time, with --metric self) grew by more than
/// the threshold, 0 otherwise, 2 on an error. Scopes present in one run only never fail the
/// comparison: their time shows in their callers'. A comparison that cannot be trusted is an
/// error (exit 2), not a pass: an input read with warnings (a truncated or damaged capture,
/// unless --allow-salvaged), or two captures without a scope name in common (not runs of one
/// program).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The baseline capture.
    base: PathBuf,
    /// The capture to compare with it.
    new: PathBuf,
    /// Growth past which a scope counts as regressed: a percentage (`5%`) or a fraction
    /// (`0.05`). A bare number above 1 is refused as ambiguous: write `5%` for 5 percent.
    #[arg(long, value_name = "CHANGE", default_value = "5%", value_parser = threshold)]
    threshold: f64,
    /// The time that decides a regression.
    #[arg(long, value_enum, default_value_t = Metric::Total)]
    metric: Metric,
    /// At most this many rows.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Compare inputs read with warnings too (a salvaged tail, a missing footer, skipped
    /// chunks): what could be read of them, their warnings printed unless --quiet.
    #[arg(long)]
    allow_salvaged: bool,
}

/// The time compared with the threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Metric {
    /// Total time: duration of the calls, children included.
    Total,
    /// Self time: duration minus direct children.
    #[value(name = "self")]
    SelfTime,
}

impl Metric {
    fn of(self, row: &ScopeStats) -> u64 {
        match self {
            Self::Total => row.total_ns,
            Self::SelfTime => row.self_ns,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Total => "total",
            Self::SelfTime => "self",
        }
    }
}

/// Parses `5%` (a percentage) or `0.05` (a fraction) into a fraction. A bare number above 1
/// is refused: `5` could mean 5% as well as 500%.
fn threshold(s: &str) -> Result<f64, String> {
    let (number, percent) = match s.trim().strip_suffix('%') {
        Some(number) => (number.trim(), true),
        None => (s.trim(), false),
    };
    match number.parse::<f64>() {
        Ok(x) if percent && x.is_finite() && x >= 0.0 => Ok(x / 100.0),
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        Ok(x) if !percent && x.is_finite() && x > 1.0 => Err(format!(
            "`{s}` is ambiguous: write `{number}%` for {number} percent, or a fraction \
             (`{}` is {number}%)",
            x / 100.0
        )),
        _ => Err(format!(
            "`{s}` is not a threshold: give a percentage (5%) or a fraction (0.05), not negative"
        )),
    }
}

/// What happened to one scope name between the runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Regressed,
    Improved,
    Added,
    Removed,
    Same,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Self::Regressed => "regressed",
            Self::Improved => "improved",
            Self::Added => "added",
            Self::Removed => "removed",
            Self::Same => "",
        }
    }
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let progress = input::Progress::new(cx, input::size(&args.base) + input::size(&args.new));
    let mut traces = Vec::with_capacity(2);
    for path in [&args.base, &args.new] {
        let captures = input::whole(cx, path, &progress, args.allow_salvaged, "compare")?;
        progress.step(input::decoding(std::slice::from_ref(path)));
        traces.push(Trace::from_captures(&captures));
    }
    drop(progress);
    let (base, new) = (Report::new(&traces[0]), Report::new(&traces[1]));
    let mut names: BTreeMap<&str, (Option<&ScopeStats>, Option<&ScopeStats>)> = BTreeMap::new();
    for row in base.rows() {
        names.entry(row.name).or_default().0 = Some(row);
    }
    for row in new.rows() {
        names.entry(row.name).or_default().1 = Some(row);
    }
    if !names.values().any(|(b, n)| b.is_some() && n.is_some()) {
        return Err(Failure(format!(
            "{} and {} have no scope name in common ({} and {} names): nothing to compare; \
             are they runs of the same program?",
            args.base.display(),
            args.new.display(),
            base.rows().len(),
            new.rows().len(),
        )));
    }
    let limit = 1.0 + args.threshold;
    let status = |b: Option<&ScopeStats>, n: Option<&ScopeStats>| match (b, n) {
        (None, _) => Status::Added,
        (_, None) => Status::Removed,
        (Some(b), Some(n)) => {
            let (b, n) = (args.metric.of(b) as f64, args.metric.of(n) as f64);
            if n > b * limit {
                Status::Regressed
            } else if n * limit < b {
                Status::Improved
            } else {
                Status::Same
            }
        }
    };
    let mut changes: Vec<_> = names
        .into_iter()
        .map(|(name, (b, n))| {
            let time = |r: Option<&ScopeStats>| r.map_or(0, |r| args.metric.of(r));
            let impact = time(b).abs_diff(time(n));
            (impact, name, b, n, status(b, n))
        })
        .collect();
    changes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let mut count = BTreeMap::new();
    for change in &changes {
        *count.entry(change.4).or_insert(0) += 1;
    }
    let rows: Vec<Vec<String>> = changes
        .iter()
        .take(args.limit.unwrap_or(usize::MAX))
        .map(|&(_, name, b, n, status)| row(name, b, n, status))
        .collect();
    let mut out = text::columns(
        &[
            "Name",
            "Status",
            "Calls",
            "Δ Calls",
            "Total",
            "Δ Total",
            "Total Δ%",
            "Self",
            "Δ Self",
            "Self Δ%",
            "Δ P50",
            "Δ P99",
        ],
        &rows,
        2,
    );
    let n = |s| count.get(&s).copied().unwrap_or(0);
    out.push_str(&format!(
        "wall {} -> {} ({}); {} regressed, {} improved, {} added, {} removed \
         (threshold: {} time {:+.1}%)\n",
        format_ns(base.wall_ns),
        format_ns(new.wall_ns),
        text::percent_change(base.wall_ns, new.wall_ns),
        n(Status::Regressed),
        n(Status::Improved),
        n(Status::Added),
        n(Status::Removed),
        args.metric.name(),
        args.threshold * 100.0,
    ));
    text::print(&out)?;
    Ok(if n(Status::Regressed) > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The cells of one name: the new run's values (the base's for a removed scope) and the
/// changes from base to new.
fn row(name: &str, b: Option<&ScopeStats>, n: Option<&ScopeStats>, status: Status) -> Vec<String> {
    let get = |r: Option<&ScopeStats>, f: fn(&ScopeStats) -> u64| r.map_or(0, f);
    let shown = n.or(b);
    let time = |f: fn(&ScopeStats) -> u64| shown.map_or_else(String::new, |r| format_ns(f(r)));
    let delta = |f: fn(&ScopeStats) -> u64| text::signed_ns(get(b, f), get(n, f));
    let percent = |f: fn(&ScopeStats) -> u64| text::percent_change(get(b, f), get(n, f));
    let calls: fn(&ScopeStats) -> u64 = |r| r.calls;
    let total: fn(&ScopeStats) -> u64 = |r| r.total_ns;
    let self_ns: fn(&ScopeStats) -> u64 = |r| r.self_ns;
    let p50: fn(&ScopeStats) -> u64 = |r| r.p50_ns;
    let p99: fn(&ScopeStats) -> u64 = |r| r.p99_ns;
    vec![
        name.to_owned(),
        status.label().to_owned(),
        shown.map_or(0, calls).to_string(),
        text::signed_count(get(b, calls), get(n, calls)),
        time(total),
        delta(total),
        percent(total),
        time(self_ns),
        delta(self_ns),
        percent(self_ns),
        delta(p50),
        delta(p99),
    ]
}

#[cfg(test)]
mod tests {
    use super::threshold;

    #[test]
    fn thresholds() {
        assert_eq!(threshold("5%"), Ok(0.05));
        assert_eq!(threshold("0.05"), Ok(0.05));
        assert_eq!(threshold(" 12.5 % "), Ok(0.125));
        assert_eq!(threshold("0"), Ok(0.0));
        assert_eq!(threshold("1"), Ok(1.0));
        assert_eq!(threshold("500%"), Ok(5.0));
        assert_eq!(
            threshold("5"),
            Err("`5` is ambiguous: write `5%` for 5 percent, or a fraction (`0.05` is 5%)".into())
        );
        assert!(threshold("1.5").is_err());
        assert!(threshold("-5%").is_err());
        assert!(threshold("five").is_err());
        assert!(threshold("inf").is_err());
    }
}
