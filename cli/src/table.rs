//! `tickscope table`: the table [`Profiler::table`](tickscope::Profiler::table) prints, for a
//! capture file.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use tickscope::table::{Format, SortBy, Table, Unit};

use crate::{Context, Failure, input, text};

/// Print the table of calls and times per scope name.
///
/// The table `Profiler::table()` prints: per name, calls, total, total %, self, self %, avg,
/// min, max, p50 and p99 (and memory columns when the session tracked memory). Total % and
/// Self % are shares of the time in scopes summed over threads (every row's self time added
/// up), named in the footer: Self % adds up to 100 over the rows. --limit says below the
/// table how many rows it hid (in JSON, `hidden_rows`).
///
/// Every session of every file counts, as one trace: a name's row sums its calls in every
/// process, and --by-thread names each thread's process when there are several. --session
/// picks one session.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The capture files.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The column to sort by (names ascending, everything else descending).
    #[arg(long, value_name = "KEY", value_parser = SortParser, default_value_t = SortBy::Total)]
    sort: SortBy,
    /// At most this many rows (per thread with --by-thread; nodes with --tree).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// One row per (thread, name).
    #[arg(long)]
    by_thread: bool,
    /// Splits scopes that followed from a link by the scope that caused them.
    #[arg(long)]
    by_origin: bool,
    /// Splits scopes that recorded argument KEY by its value.
    #[arg(long, value_name = "KEY")]
    by_arg: Option<String>,
    /// The call tree instead of the flat table.
    #[arg(long)]
    tree: bool,
    /// Only this session (1 is the first), counting the sessions of the files in order;
    /// by default every session.
    #[arg(long, value_name = "N")]
    session: Option<usize>,
    /// The output: aligned text, a Markdown table, JSON (docs/REPORT-SCHEMA.md) or CSV
    /// (times in ns).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = crate::diff::format)]
    format: Format,
    /// The unit of text and Markdown times (JSON and CSV are in ns).
    #[arg(long, value_name = "UNIT", default_value = "auto", value_parser = crate::diff::unit)]
    unit: Unit,
}

/// Parses `--sort` with [`SortBy`]'s own `FromStr` (its error lists the valid keys), and
/// lists the keys in `--help` from [`SortBy::ALL`].
#[derive(Clone, Copy, Debug)]
struct SortParser;

impl TypedValueParser for SortParser {
    type Value = SortBy;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<SortBy, clap::Error> {
        let key = value.to_string_lossy();
        key.parse::<SortBy>().map_err(|e| {
            let arg = arg.map_or_else(|| "--sort".to_owned(), ToString::to_string);
            clap::Error::raw(
                ErrorKind::InvalidValue,
                format!("invalid value for '{arg}': {e}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(SortBy::ALL.into_iter().map(|column| {
            PossibleValue::new(column.key_name()).help(column.description())
        })))
    }
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let progress = input::Progress::new(cx, args.files.iter().map(|f| input::size(f)).sum());
    let captures = input::captures(cx, &args.files, args.session, &progress)?;
    // The call tree and a table split by argument read the records twice (threads summed,
    // then taken piece by piece).
    let twice = args.tree || args.by_arg.is_some();
    input::decoding_twice(&progress, &args.files, &captures, twice);
    // Decoded (or, for a flat table, summed straight from the records) when printed.
    let mut table = Table::from_captures(captures)
        .sort_by(args.sort)
        .by_thread(args.by_thread)
        .by_origin(args.by_origin)
        .tree(args.tree)
        .unit(args.unit);
    if let Some(rows) = args.limit {
        table = table.limit(rows);
    }
    if let Some(key) = args.by_arg {
        table = table.by_arg(key);
    }
    let text = table.render(args.format);
    drop(progress);
    text::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
