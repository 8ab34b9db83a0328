//! `tickscope table`: the table [`Profiler::table`](tickscope::Profiler::table) prints, for a
//! capture file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::ValueEnum;
use tickscope::table::{SortBy, Table};

use crate::{Context, Failure, input, text};

/// Prints the per-name table of a capture: calls, total, self, avg, min, max, p50, p99, % of
/// the session (and memory columns when the session tracked memory), exactly as
/// `Profiler::table()` prints it.
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
    #[arg(long, value_enum, default_value_t = Sort::Total)]
    sort: Sort,
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
}

/// The columns of `tickscope::table::SortBy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Sort {
    /// Scope name.
    Name,
    /// Number of calls.
    Calls,
    /// Total time.
    Total,
    /// Self time.
    #[value(name = "self")]
    SelfTime,
    /// Mean duration.
    Avg,
    /// Shortest call.
    Min,
    /// Longest call.
    Max,
    /// Median duration.
    P50,
    /// 99th-percentile duration.
    P99,
    /// Bytes allocated, child scopes included.
    Alloc,
    /// Bytes allocated by the scope itself.
    SelfAlloc,
    /// Peak live bytes of a call.
    Peak,
}

impl From<Sort> for SortBy {
    fn from(sort: Sort) -> Self {
        match sort {
            Sort::Name => Self::Name,
            Sort::Calls => Self::Calls,
            Sort::Total => Self::Total,
            Sort::SelfTime => Self::SelfTime,
            Sort::Avg => Self::Avg,
            Sort::Min => Self::Min,
            Sort::Max => Self::Max,
            Sort::P50 => Self::P50,
            Sort::P99 => Self::P99,
            Sort::Alloc => Self::Alloc,
            Sort::SelfAlloc => Self::SelfAlloc,
            Sort::Peak => Self::Peak,
        }
    }
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let trace = input::trace(cx, &args.files, args.session)?;
    let mut table = Table::new(Arc::new(trace))
        .sort_by(args.sort.into())
        .by_thread(args.by_thread)
        .by_origin(args.by_origin)
        .tree(args.tree);
    if let Some(rows) = args.limit {
        table = table.limit(rows);
    }
    if let Some(key) = args.by_arg {
        table = table.by_arg(key);
    }
    text::print(&table.to_string())?;
    Ok(ExitCode::SUCCESS)
}
