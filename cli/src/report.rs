//! `tickscope report`: the single-file HTML report of captures
//! ([`tickscope::export::html`]), with a diff view against a baseline when asked.

use std::path::PathBuf;
use std::process::ExitCode;

use tickscope::Capture;
use tickscope::export::{html, write_file_from_captures};
use tickscope::report::compare;

use crate::{Context, Failure, input};

/// Write one HTML report that opens offline: tables, flame graph, timeline
///
/// The file makes no request of any kind when it opens. It has the summary table,
/// call tree, flame graph, timeline, memory and session views of the captures; with
/// --baseline, a diff view too: per-name change of calls, total, avg, p50 and p99, the verdict
/// of `tickscope diff` (its default thresholds), and a differential flame graph.
///
/// Every session of every file goes into the one report, as `convert` merges them: captures
/// of several processes show side by side on the timeline. The report is written from the
/// captures' sums and their spans read again piece by piece, in memory bounded by the scopes
/// open at once (with --baseline, the baseline's too, and the diff as `tickscope diff` reads
/// it); past 4 Mi scopes its timeline shows those that lasted longest (the page says which),
/// while its tables, call tree and flame graph count every scope. The output appears only
/// when complete (gzipped when its name ends in `.gz`).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The capture files.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// A baseline capture (every session of it): adds a diff view comparing the files with it.
    #[arg(long, value_name = "BASE")]
    baseline: Option<PathBuf>,
    /// The page's title; by default the input files' names.
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// Only this session (1 is the first), counting the sessions of the files in order;
    /// by default every session.
    #[arg(long, value_name = "N")]
    session: Option<usize>,
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let out = &args.output;
    let title = args.title.clone().unwrap_or_else(|| {
        let files: Vec<String> = args
            .files
            .iter()
            .map(|f| {
                f.file_name().map_or_else(
                    || f.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                )
            })
            .collect();
        format!("tickscope report: {}", files.join(", "))
    });
    let options = html::Options::new()
        .title(title)
        .diff_options(compare::Options::default());
    // Summed, then each thread read again piece by piece (as `convert -o x.html`); with a
    // baseline, its sums and pieces too, and the diff of both runs read again in start order
    // (as `tickscope diff`), async calls matched as the threads are read again. Decoded whole
    // when that cannot be (as `tickscope diff` decodes a run whole).
    let mut paths = args.files.clone();
    paths.extend(args.baseline.iter().cloned());
    let progress = input::Progress::new(cx, paths.iter().map(|f| input::size(f)).sum());
    let mut all = input::captures(cx, &args.files, args.session, &progress)?;
    let split = all.len();
    if let Some(base) = &args.baseline {
        all.extend(input::captures(
            cx,
            std::slice::from_ref(base),
            None,
            &progress,
        )?);
    }
    // With a baseline, each run is read four times: its sums and pieces for the report,
    // then for the diff.
    let passes = if args.baseline.is_some() { 4 } else { 2 };
    input::decoding_passes(&progress, &paths, &all, passes);
    let all: Vec<&Capture> = all.iter().collect();
    let (captures, base) = all.split_at(split);
    let written = match &args.baseline {
        Some(_) => {
            let format = tickscope::__private::html_with_baseline(&options, base);
            write_file_from_captures(captures, out, &format)
        }
        None => write_file_from_captures(captures, out, &options),
    };
    written.map_err(|e| Failure::about(out, e))?;
    Ok(ExitCode::SUCCESS)
}
