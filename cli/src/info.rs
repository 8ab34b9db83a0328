//! `tickscope info`: what a capture file holds, session by session.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::{Context, Failure, input, text};

/// Describes every session of a capture file: format version, producer, process id, name and
/// host, threads, chunks, records, dropped and overwritten events, whether memory was tracked,
/// the time span (and a flight recorder's retained window, when it overwrote events), and the
/// warnings met while reading it (listed here rather than on stderr).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The capture file.
    file: PathBuf,
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let path = &args.file;
    let progress = input::Progress::new(cx, input::size(path));
    // Warnings are listed below rather than on stderr.
    let captures = input::all_unchecked(path, &progress)?;
    let mut out = String::new();
    let plural = if captures.len() == 1 { "" } else { "s" };
    let _ = writeln!(
        out,
        "{}: {} session{plural}",
        path.display(),
        captures.len()
    );
    for (i, capture) in captures.iter().enumerate() {
        progress.step(format!("decoding session {} of {}", i + 1, path.display()));
        let trace = capture.decode();
        let warnings = capture.warnings();
        let fields = [
            ("format version", capture.format_version().to_string()),
            ("producer", capture.producer().to_owned()),
            ("process id", capture.process_id().to_string()),
            ("process name", known(capture.process_name())),
            ("host name", known(capture.host_name())),
            ("threads", capture.thread_count().to_string()),
            ("chunks", capture.chunk_count().to_string()),
            ("records", capture.record_count().to_string()),
            ("dropped events", capture.dropped_events().to_string()),
            (
                "overwritten events",
                capture.overwritten_events().to_string(),
            ),
            (
                "memory tracked",
                if capture.tracks_memory() { "yes" } else { "no" }.to_owned(),
            ),
            ("time span", text::seconds(trace.wall_ns())),
            // A flight recorder's retained window, when it overwrote the start of the session.
            ("retained window", text::seconds(trace.covered_ns())),
            ("warnings", warnings.len().to_string()),
        ];
        let _ = writeln!(out, "session {}", i + 1);
        let cut = trace.covered_ns() != trace.wall_ns();
        let fields = fields
            .into_iter()
            .filter(|&(key, _)| cut || key != "retained window");
        let fields: Vec<_> = fields.collect();
        let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (key, value) in fields {
            let _ = writeln!(out, "  {key:<width$}  {value}");
        }
        for warning in warnings {
            let _ = writeln!(out, "    {warning}");
        }
    }
    drop(progress);
    text::print(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// `name`, or `(unknown)` when empty.
fn known(name: &str) -> String {
    if name.is_empty() {
        "(unknown)".to_owned()
    } else {
        name.to_owned()
    }
}
