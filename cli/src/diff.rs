//! `tickscope diff`: what changed between two runs, per scope name, judged from the per-call
//! distributions ([`tickscope::report::compare`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;
use tickscope::report::compare::{Diff, DiffRow, Metric, Options, Side, Verdict};
use tickscope::table::{Format, Grid, Unit, csv_record, format_ns, markdown_grid};
use tickscope::trace::Trace;

use crate::{Context, Failure, input, text};

/// Compare two captures per scope name; exit 1 on a regression.
///
/// Compares them name by name, from the durations of every call (every session of
/// each, as `table` counts them): for each name the Hodges–Lehmann shift per call (the median
/// of the differences between the medians of 20 time blocks of the new run's calls and those
/// of the base run: consecutive calls share the drift of a run, so blocks, not calls, are the
/// samples), its confidence interval (rank-based, Mann–Whitney, widened by --run-noise, the
/// noise between runs that one run a side cannot show), and a verdict: regressed, improved,
/// unchanged or inconclusive. Names found in one run only are listed as added or removed.
///
/// A name regresses only when the whole interval lies past both the threshold (relative to the
/// base median) and --min-change (absolute, per call), with at least --min-calls calls in
/// each run. The confidence level is family-wise over the names judged (Bonferroni: with k
/// names, each interval is at 1 − (1 − level)/k).
///
/// Exits with 1 when a name regressed, 0 otherwise (inconclusive, added and removed names
/// never fail), 2 on an error. A comparison that cannot be trusted is an error (exit 2), not a
/// pass: an input read with warnings (a truncated or damaged capture, unless
/// --allow-salvaged), two captures without a scope name in common (not runs of one program),
/// or a name given with --require missing from either run.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The baseline capture.
    base: PathBuf,
    /// The capture to compare with it.
    new: PathBuf,
    /// Change the whole interval must pass to count: a percentage (`5%`) or a fraction
    /// (`0.05`) of the base median (of the base total with --metric total). A bare number
    /// above 1 is refused as ambiguous: write `5%` for 5 percent.
    #[arg(long, value_name = "CHANGE", default_value = "5%", value_parser = threshold)]
    threshold: f64,
    /// Absolute change per call the whole interval must pass too: `50ns`, `1us`, `0.5ms`
    /// (a bare number is ns). The default is above the per-call noise measured between two
    /// runs of one build (README: "Regression gate").
    #[arg(long, value_name = "TIME", default_value = "50ns", value_parser = duration)]
    min_change: f64,
    /// Fewer calls than this in either run: inconclusive.
    #[arg(long, value_name = "N", default_value_t = Options::MIN_CALLS)]
    min_calls: u64,
    /// The family-wise confidence level, over every name judged: `95%` or `0.95`.
    #[arg(long, value_name = "LEVEL", default_value = "95%", value_parser = confidence)]
    confidence: f64,
    /// The time compared: of each call (per-call), of each call without its children
    /// (self), or each name's total.
    #[arg(long, value_enum, default_value_t = MetricArg::PerCall)]
    metric: MetricArg,
    /// What a name's samples are: every call (`calls`), each session's median (`sessions`:
    /// the sessions or processes a capture holds are repetitions of the run), or `auto`:
    /// sessions when both captures hold at least 5, else calls.
    #[arg(long, value_enum, default_value_t = Repetitions::Auto)]
    repetitions: Repetitions,
    /// Without repetitions: the contiguous time blocks each run's calls of a name are cut
    /// into, whose medians are the samples, so that the drift of a run (frequency, caches,
    /// other processes), which consecutive calls share, is in the interval. 0 takes every
    /// call as an independent sample (right only when they are, as calls made by separate
    /// processes are).
    #[arg(long, value_name = "N", default_value_t = Options::BLOCKS)]
    blocks: usize,
    /// Without repetitions: the noise between two runs of one build that one run a side
    /// cannot show (an offset all calls of a run share: code layout, a speed held for the
    /// whole run), as the standard deviation of their relative change, `0.7%` or `0.007`,
    /// added to the interval's variance. Measure yours with A/A runs (README: "Regression
    /// gate"); 0 adds none.
    #[arg(long, value_name = "FRACTION", default_value = "0.7%", value_parser = threshold)]
    run_noise: f64,
    /// Fail (exit 2) when this name is missing from either run (may be repeated).
    #[arg(long, value_name = "NAME")]
    require: Vec<String>,
    /// At most this many rows.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// The output: aligned text, a Markdown table for a pull-request comment, JSON
    /// (docs/REPORT-SCHEMA.md) or CSV (times in ns).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = format)]
    format: Format,
    /// The unit of text and Markdown times (JSON and CSV are in ns).
    #[arg(long, value_name = "UNIT", default_value = "auto", value_parser = unit)]
    unit: Unit,
    /// Compare inputs read with warnings too (a salvaged tail, a missing footer, skipped
    /// chunks): what could be read of them, their warnings printed unless --quiet.
    #[arg(long)]
    allow_salvaged: bool,
}

/// The time compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum MetricArg {
    /// The duration of each call, children included.
    PerCall,
    /// Each name's total time: more calls read as more time.
    Total,
    /// The self time of each call: duration minus direct children.
    #[value(name = "self")]
    SelfTime,
}

/// What a name's samples are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Repetitions {
    /// Sessions when both captures hold 5 or more, else calls.
    Auto,
    /// Every call of every session, pooled.
    Calls,
    /// Each session's median (total with --metric total).
    Sessions,
}

/// Sessions each capture needs for `--repetitions auto` to compare per-session medians: with
/// 5 a side a 95 % interval exists for up to 3 names judged, with 7 for up to 10 or so.
const AUTO_SESSIONS: usize = 5;

impl From<MetricArg> for Metric {
    fn from(metric: MetricArg) -> Self {
        match metric {
            MetricArg::PerCall => Self::PerCall,
            MetricArg::Total => Self::Total,
            MetricArg::SelfTime => Self::SelfTime,
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
        // `0.7%` is the float nearest 0.007, as `0.007` is (0.7 / 100 is not).
        Ok(x) if percent && x.is_finite() && x >= 0.0 => {
            Ok(format!("{number}e-2").parse().unwrap_or(x / 100.0))
        }
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

/// Parses a confidence level: `95%` or `0.95`, strictly between 0 and 1.
fn confidence(s: &str) -> Result<f64, String> {
    match threshold(s) {
        Ok(x) if x > 0.0 && x < 1.0 => Ok(x),
        _ => Err(format!(
            "`{s}` is not a confidence level: give a percentage (95%) or a fraction (0.95), \
             above 0 and below 100%"
        )),
    }
}

/// Parses a duration into ns: `50ns`, `1.5us`, `1.5µs`, `2ms`, `0.1s`, or a bare number of ns.
fn duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ]
    .into_iter()
    .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n.trim(), scale)))
    .unwrap_or((t, 1.0));
    match number.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x * scale),
        _ => Err(format!(
            "`{s}` is not a duration: give a number with ns, us, ms or s (50ns, 1.5us)"
        )),
    }
}

/// Parses `--format`.
pub(crate) fn format(s: &str) -> Result<Format, String> {
    s.parse()
}

/// Parses `--unit`.
pub(crate) fn unit(s: &str) -> Result<Unit, String> {
    s.parse()
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let progress = input::Progress::new(cx, input::size(&args.base) + input::size(&args.new));
    // Both runs' sessions, the base's first (`split` of them).
    let mut all = Vec::new();
    let mut split = 0;
    for path in [&args.base, &args.new] {
        split = all.len();
        all.extend(input::whole(
            cx,
            path,
            &progress,
            args.allow_salvaged,
            "compare",
        )?);
    }
    let inputs = [&all[..split], &all[split..]];
    let sessions = match args.repetitions {
        Repetitions::Calls => false,
        Repetitions::Sessions => true,
        Repetitions::Auto => inputs.iter().all(|c| c.len() >= AUTO_SESSIONS),
    };
    let options = Options {
        metric: args.metric.into(),
        threshold: args.threshold,
        min_change_ns: args.min_change,
        min_calls: args.min_calls,
        confidence: args.confidence,
        blocks: args.blocks,
        run_noise: args.run_noise,
    };
    let paths = [args.base.clone(), args.new.clone()];
    // Each run's calls summed as its threads are read again, merged in start order (a first
    // pass, then a second; `#[profile] async fn` calls matched as the threads are read
    // again); decoded whole when that cannot be (calls that cannot be matched so, a name of
    // both scopes and calls, a forged file).
    input::decoding_twice(&progress, &paths, &all, true);
    let streamed = tickscope::__private::diff_of_captures(inputs[0], inputs[1], &options, sessions);
    let diff = match streamed {
        Some(diff) => diff,
        None if sessions => {
            let mut runs = Vec::with_capacity(2);
            for (path, captures) in paths.iter().zip(inputs) {
                input::decoding(&progress, std::slice::from_ref(path), captures);
                let traces: Vec<Trace> = captures
                    .iter()
                    .map(|c| Trace::from_captures(std::slice::from_ref(c)))
                    .collect();
                runs.push(traces);
            }
            progress.step("comparing");
            Diff::from_repetitions(&runs[0], &runs[1], &options)
        }
        None => {
            let mut traces = Vec::with_capacity(2);
            for (path, captures) in paths.iter().zip(inputs) {
                input::decoding(&progress, std::slice::from_ref(path), captures);
                traces.push(Trace::from_captures(captures));
            }
            progress.step("comparing");
            Diff::new(&traces[0], &traces[1], &options)
        }
    };
    drop(all);
    drop(progress);
    let names = |keep: fn(&DiffRow) -> bool| diff.rows.iter().filter(|r| keep(r)).count();
    if names(|r| r.base.is_some() && r.new.is_some()) == 0 {
        return Err(Failure(format!(
            "{} and {} have no scope name in common ({} and {} names): nothing to compare; \
             are they runs of the same program?",
            args.base.display(),
            args.new.display(),
            names(|r| r.base.is_some()),
            names(|r| r.new.is_some()),
        )));
    }
    for name in &args.require {
        let row = diff.row(name);
        let missing = match (row.and_then(|r| r.base), row.and_then(|r| r.new)) {
            (Some(_), Some(_)) => continue,
            (None, None) => format!("either {} or {}", args.base.display(), args.new.display()),
            (None, Some(_)) => args.base.display().to_string(),
            (Some(_), None) => args.new.display().to_string(),
        };
        return Err(Failure(format!(
            "--require {name}: no scope `{name}` in {missing}: cannot judge it"
        )));
    }
    let shown = &diff.rows[..diff.rows.len().min(args.limit.unwrap_or(usize::MAX))];
    let files = (args.base.as_path(), args.new.as_path());
    let out = match args.format {
        Format::Text => {
            let (headers, rows) = cells(&diff, shown, args.unit);
            let mut out = Grid::new(2).text(&headers, &rows);
            out.push_str(&footer(&diff, args.unit));
            out.push('\n');
            out
        }
        Format::Markdown => {
            let (headers, rows) = cells(&diff, shown, args.unit);
            let mut out = format!(
                "**tickscope diff** `{}` → `{}`\n\n",
                files.0.display(),
                files.1.display()
            );
            out.push_str(&markdown_grid(&headers, &rows, 2));
            out.push('\n');
            out.push_str(&footer(&diff, args.unit));
            out.push('\n');
            out
        }
        Format::Json => json(&diff, shown, files)?,
        Format::Csv => csv(shown),
    };
    text::print(&out)?;
    Ok(if diff.count(Verdict::Regressed) > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The headers and cells of the text and Markdown tables.
fn cells(diff: &Diff, rows: &[DiffRow], unit: Unit) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let metric = diff.options.metric;
    let (base, new) = match metric {
        Metric::Total => ("Base total", "New total"),
        Metric::PerCall => ("Base p50", "New p50"),
        Metric::SelfTime => ("Base self p50", "New self p50"),
    };
    let headers = vec![
        "Name", "Verdict", "Calls", "Δ Calls", base, new, "Change", "Change %", "Interval",
    ];
    let time = |ns: f64| unit.format(ns);
    let signed = |ns: f64| {
        let text = time(ns);
        if ns > 0.0 { format!("+{text}") } else { text }
    };
    let percent = |row: &DiffRow, ns: f64| {
        row.relative(ns)
            .map_or_else(|| "-".to_owned(), |r| format!("{:+.1}%", r * 100.0))
    };
    let value = |side: Option<Side>| {
        side.map_or_else(String::new, |s| match metric {
            Metric::Total => time(s.total_ns as f64),
            Metric::PerCall | Metric::SelfTime => time(s.median_ns as f64),
        })
    };
    let cells = rows
        .iter()
        .map(|row| {
            let calls = |s: Option<Side>| s.map_or(0, |s| s.calls);
            vec![
                row.name.to_owned(),
                row.verdict.name().to_owned(),
                calls(row.new.or(row.base)).to_string(),
                text::signed_count(calls(row.base), calls(row.new)),
                value(row.base),
                value(row.new),
                row.change_ns.map_or_else(String::new, signed),
                row.change_ns.map_or_else(String::new, |c| percent(row, c)),
                row.interval_ns.map_or_else(String::new, |(low, high)| {
                    format!("{} .. {}", signed(low), signed(high))
                }),
            ]
        })
        .collect();
    (headers, cells)
}

/// The line under the table: wall times, the count of each verdict, and how it judged.
fn footer(diff: &Diff, unit: Unit) -> String {
    let o = &diff.options;
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .map(|&v| format!("{} {}", diff.count(v), v.name()))
        .collect();
    let per = if o.metric == Metric::Total {
        " per base call"
    } else {
        ""
    };
    let of = if o.metric == Metric::Total {
        "totals"
    } else {
        "medians"
    };
    let samples = match diff.repetitions {
        Some((b, n)) => format!("; samples: the {of} of {b} and {n} sessions"),
        None if o.blocks > 0 => format!(
            "; samples: {} time blocks of calls, run noise {:.1}%",
            o.blocks,
            o.run_noise * 100.0
        ),
        None => format!("; samples: calls, run noise {:.1}%", o.run_noise * 100.0),
    };
    format!(
        "wall {} -> {} ({}); {} ({} time: threshold {:.1}%, min change {}{per}, min {} \
         calls{samples}; {} name{} judged, each at {:.2}% for {:.0}% over all, Bonferroni)",
        format_ns(diff.base_wall_ns),
        format_ns(diff.new_wall_ns),
        text::percent_change(diff.base_wall_ns, diff.new_wall_ns),
        counts.join(", "),
        o.metric.name(),
        o.threshold * 100.0,
        unit.format(o.min_change_ns),
        o.min_calls,
        diff.judged,
        if diff.judged == 1 { "" } else { "s" },
        diff.row_confidence * 100.0,
        o.confidence * 100.0,
    )
}

/// The diff as JSON (docs/REPORT-SCHEMA.md): the library's [`Diff`] with the schema version,
/// the kind, the files and the count of each verdict; `rows` limited to `shown`.
fn json(diff: &Diff, shown: &[DiffRow], (base, new): (&Path, &Path)) -> Result<String, Failure> {
    let encode = |e: serde_json::Error| Failure(format!("cannot write the diff as JSON: {e}"));
    let mut value = serde_json::to_value(diff).map_err(encode)?;
    let counts: serde_json::Map<String, serde_json::Value> = Verdict::ALL
        .iter()
        .map(|&v| (v.name().to_owned(), diff.count(v).into()))
        .collect();
    if let Some(object) = value.as_object_mut() {
        object.insert("rows".into(), serde_json::to_value(shown).map_err(encode)?);
        object.insert("counts".into(), counts.into());
        object.insert("base_file".into(), base.display().to_string().into());
        object.insert("new_file".into(), new.display().to_string().into());
        object.insert("kind".into(), "diff".into());
        object.insert("schema".into(), 1.into());
    }
    let mut out = serde_json::to_string_pretty(&value).map_err(encode)?;
    out.push('\n');
    Ok(out)
}

/// The diff as CSV: a header row, then a row per name, times in ns (empty when not known).
fn csv(shown: &[DiffRow]) -> String {
    let mut out = csv_record(&[
        "name",
        "verdict",
        "base_calls",
        "new_calls",
        "base_total_ns",
        "new_total_ns",
        "base_median_ns",
        "new_median_ns",
        "change_ns",
        "change",
        "low_ns",
        "high_ns",
        "margin_ns",
    ]);
    let num = |x: Option<f64>| x.map_or_else(String::new, |x| x.to_string());
    let int = |x: Option<u64>| x.map_or_else(String::new, |x| x.to_string());
    for row in shown {
        let (b, n) = (row.base, row.new);
        out.push_str(&csv_record(&[
            row.name.to_owned(),
            row.verdict.name().to_owned(),
            int(b.map(|s| s.calls)),
            int(n.map(|s| s.calls)),
            int(b.map(|s| s.total_ns)),
            int(n.map(|s| s.total_ns)),
            int(b.map(|s| s.median_ns)),
            int(n.map(|s| s.median_ns)),
            num(row.change_ns),
            num(row.change_ns.and_then(|c| row.relative(c))),
            num(row.interval_ns.map(|i| i.0)),
            num(row.interval_ns.map(|i| i.1)),
            num(row.margin_ns),
        ]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{confidence, duration, threshold};

    #[test]
    fn thresholds() {
        assert_eq!(threshold("5%"), Ok(0.05));
        assert_eq!(threshold("0.05"), Ok(0.05));
        assert_eq!(threshold(" 12.5 % "), Ok(0.125));
        // The float nearest 0.007, not 0.7 / 100 (0.007000000000000001).
        assert_eq!(threshold("0.7%"), Ok(0.007));
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

    #[test]
    fn durations_and_levels() {
        assert_eq!(duration("50ns"), Ok(50.0));
        assert_eq!(duration("50"), Ok(50.0));
        assert_eq!(duration(" 1.5us"), Ok(1_500.0));
        assert_eq!(duration("1.5 µs"), Ok(1_500.0));
        assert_eq!(duration("2ms"), Ok(2e6));
        assert_eq!(duration("0.1s"), Ok(1e8));
        assert!(duration("-1ns").is_err());
        assert!(duration("fast").is_err());
        assert_eq!(confidence("95%"), Ok(0.95));
        assert_eq!(confidence("0.99"), Ok(0.99));
        assert!(confidence("100%").is_err());
        assert!(confidence("0").is_err());
    }
}
