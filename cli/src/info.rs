//! `tickscope info`: what a capture file holds, session by session.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use tickscope::attach::Origin;
use tickscope::table::{Format, Grid, csv_record, markdown_grid};

use crate::attach::utc;
use crate::{Context, Failure, input, text};

/// The fields of a session, by key: (key, heading, value as text, value as JSON).
type Fields = Vec<(&'static str, &'static str, String, serde_json::Value)>;

/// Describe each session of a capture file.
///
/// For every session: format version, producer, process id, name and
/// host, threads, chunks, records, dropped and overwritten events, whether memory was tracked,
/// the time span and the time the data covers (a flight recorder's retained window), where a
/// session taken by an attach comes from (the flight recorder's window before the attach, or
/// what was recorded while attached) and when the attach was, and the warnings met while
/// reading it (listed here rather than on stderr).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The capture file.
    file: PathBuf,
    /// The output: aligned text, a Markdown table (a row per session), JSON
    /// (docs/REPORT-SCHEMA.md) or CSV (a row per session, the time span in ns).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = crate::diff::format)]
    format: Format,
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let path = &args.file;
    let progress = input::Progress::new(cx, input::size(path));
    // Warnings are listed below rather than on stderr. The records are not read: the counts
    // come from the chunks' lengths, the times from the footers.
    let captures = input::index(path, &progress)?;
    let mut sessions: Vec<(Fields, Vec<String>)> = Vec::new();
    for capture in &captures {
        let warnings: Vec<String> = capture.warnings().iter().map(ToString::to_string).collect();
        let fields: Fields = vec![
            (
                "format_version",
                "format version",
                capture.format_version().to_string(),
                capture.format_version().into(),
            ),
            (
                "producer",
                "producer",
                capture.producer().to_owned(),
                capture.producer().into(),
            ),
            (
                "process_id",
                "process id",
                capture.process_id().to_string(),
                capture.process_id().into(),
            ),
            (
                "process_name",
                "process name",
                known(capture.process_name()),
                capture.process_name().into(),
            ),
            (
                "host_name",
                "host name",
                known(capture.host_name()),
                capture.host_name().into(),
            ),
            (
                "threads",
                "threads",
                capture.thread_count().to_string(),
                capture.thread_count().into(),
            ),
            (
                "chunks",
                "chunks",
                capture.chunk_count().to_string(),
                capture.chunk_count().into(),
            ),
            (
                "records",
                "records",
                capture.record_count().to_string(),
                capture.record_count().into(),
            ),
            (
                "dropped_events",
                "dropped events",
                capture.dropped_events().to_string(),
                capture.dropped_events().into(),
            ),
            (
                "overwritten_events",
                "overwritten events",
                capture.overwritten_events().to_string(),
                capture.overwritten_events().into(),
            ),
            (
                "memory_tracked",
                "memory tracked",
                if capture.tracks_memory() { "yes" } else { "no" }.to_owned(),
                capture.tracks_memory().into(),
            ),
            (
                "time_span_ns",
                "time span",
                text::seconds(capture.wall_ns()),
                capture.wall_ns().into(),
            ),
            // Of a flight recorder that overwrote events: its retained window, from the start
            // common to every thread's records; the time span otherwise.
            (
                "covered_ns",
                "time covered",
                text::seconds(capture.covered_ns()),
                capture.covered_ns().into(),
            ),
            (
                "warnings",
                "warnings",
                warnings.len().to_string(),
                warnings.len().into(),
            ),
            // Of a session taken by an attach: the flight recorder's window or what was
            // recorded while attached, and when the attach was (null otherwise; the text
            // leaves them out). Last, so that CSV columns stay where they were.
            (
                "origin",
                "origin",
                capture
                    .origin()
                    .map_or("-".to_owned(), |(origin, _)| origin.describe().to_owned()),
                capture
                    .origin()
                    .map(|(origin, _)| origin_name(origin))
                    .into(),
            ),
            (
                "attach_unix_ns",
                "attached at",
                capture
                    .origin()
                    .map_or("-".to_owned(), |(_, at)| format!("{} UTC", utc(at))),
                capture.origin().map(|(_, at)| at).into(),
            ),
        ];
        sessions.push((fields, warnings));
    }
    let out = match args.format {
        Format::Text => plain(path, &sessions),
        Format::Markdown => {
            let mut headers = vec!["session"];
            headers.extend(sessions.first().map_or(Vec::new(), |(f, _)| {
                f.iter().map(|(_, heading, _, _)| *heading).collect()
            }));
            let rows: Vec<Vec<String>> = sessions
                .iter()
                .enumerate()
                .map(|(i, (fields, _))| {
                    std::iter::once((i + 1).to_string())
                        .chain(fields.iter().map(|(_, _, text, _)| text.clone()))
                        .collect()
                })
                .collect();
            let mut out = format!(
                "**{}**: {} session{}\n\n",
                path.display(),
                sessions.len(),
                plural(sessions.len())
            );
            out.push_str(&markdown_grid(&headers, &rows, 1));
            for (i, (_, warnings)) in sessions.iter().enumerate() {
                for warning in warnings {
                    let _ = writeln!(out, "\n- session {}: {warning}", i + 1);
                }
            }
            out
        }
        Format::Json => {
            let sessions: Vec<serde_json::Value> = sessions
                .iter()
                .map(|(fields, warnings)| {
                    let mut object: serde_json::Map<String, serde_json::Value> = fields
                        .iter()
                        .map(|(key, _, _, value)| ((*key).to_owned(), value.clone()))
                        .collect();
                    object.insert("warning_messages".into(), warnings.clone().into());
                    object.into()
                })
                .collect();
            let value = serde_json::json!({
                "schema": 1,
                "kind": "info",
                "file": path.display().to_string(),
                "sessions": sessions,
            });
            let mut out = serde_json::to_string_pretty(&value)
                .map_err(|e| Failure(format!("cannot write the JSON: {e}")))?;
            out.push('\n');
            out
        }
        Format::Csv => {
            let mut keys = vec!["session"];
            keys.extend(sessions.first().map_or(Vec::new(), |(f, _)| {
                f.iter().map(|(key, _, _, _)| *key).collect()
            }));
            let mut out = csv_record(&keys);
            for (i, (fields, _)) in sessions.iter().enumerate() {
                let cells: Vec<String> = std::iter::once((i + 1).to_string())
                    .chain(fields.iter().map(|(_, _, _, value)| match value {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Null => String::new(),
                        other => other.to_string(),
                    }))
                    .collect();
                out.push_str(&csv_record(&cells));
            }
            out
        }
    };
    drop(progress);
    text::print(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The text `tickscope info` prints: a block per session, its warnings under it.
fn plain(path: &std::path::Path, sessions: &[(Fields, Vec<String>)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} session{}",
        path.display(),
        sessions.len(),
        plural(sessions.len())
    );
    for (i, (fields, warnings)) in sessions.iter().enumerate() {
        let _ = writeln!(out, "session {}", i + 1);
        // The keys as wide as the longest, even when that field is left out.
        let width = fields.iter().map(|(_, k, _, _)| k.chars().count()).max();
        let grid = Grid::new(2).indent("  ").whole_cells();
        // A field that does not apply (null: the origin of a session not taken by an
        // attach) is left out.
        let rows: Vec<Vec<String>> = (fields.iter())
            .filter(|(_, _, _, json)| !json.is_null())
            .map(|(_, key, value, _)| vec![(*key).to_owned(), value.clone()])
            .collect();
        out.push_str(&grid.min_width(0, width.unwrap_or(0)).text(&[], &rows));
        for warning in warnings {
            let _ = writeln!(out, "    {warning}");
        }
    }
    out
}

/// How the JSON and CSV name an origin.
fn origin_name(origin: Origin) -> &'static str {
    match origin {
        Origin::Flight => "flight",
        Origin::Live => "live",
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `name`, or `(unknown)` when empty.
fn known(name: &str) -> String {
    if name.is_empty() {
        "(unknown)".to_owned()
    } else {
        name.to_owned()
    }
}
