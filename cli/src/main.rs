//! `tickscope`: the command line of the tickscope profiler, for capture files written by
//! [`Profiler::write_capture`](tickscope::Profiler::write_capture).
//!
//! ```text
//! tickscope table run.tscope --sort self --limit 20        the table Profiler::table() prints
//! tickscope convert run.tscope -o run.json.gz              Chrome/Kineto JSON, folded stacks, SVG
//! tickscope convert a.tscope b.tscope -o both.json         several processes on one timeline
//! tickscope info run.tscope                                what the file holds
//! tickscope merge a.tscope b.tscope -o both.tscope         validated concatenation
//! tickscope diff base.tscope new.tscope --format markdown  per-call verdicts; exit 1 on a regression
//! tickscope push a.tscope b.tscope --endpoint URL          OTLP traces to a Collector, Jaeger, Tempo
//! tickscope report new.tscope --baseline base.tscope -o r.html  one HTML file that opens offline
//! tickscope ps                                           programs that can be attached to
//! tickscope record --pid N --duration 10s -o r.tscope     a capture of a running program
//! tickscope top --pid N                                  a live table of a running program
//! ```
//!
//! Exit codes: 0 on success, 1 when `diff` finds a regression, 2 on a usage or input error
//! (one line on stderr, naming the file). Warnings met while reading a file go to stderr as
//! `warning: FILE: …` unless `--quiet`.

mod attach;
mod convert;
mod diff;
mod help;
mod info;
mod input;
mod merge;
mod push;
mod report;
mod table;
mod text;
mod top;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Tables, traces, merges and diffs of tickscope capture files.
#[derive(Debug, Parser)]
#[command(
    name = "tickscope",
    version,
    long_about = None,
    after_help = "A command's details: tickscope help COMMAND (or COMMAND --help)."
)]
struct Cli {
    /// Print only errors: no progress, warnings or summaries on stderr.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Table(table::Args),
    Convert(convert::Args),
    Info(info::Args),
    Merge(merge::Args),
    Diff(diff::Args),
    Push(push::Args),
    Report(report::Args),
    Ps(attach::PsArgs),
    Record(attach::RecordArgs),
    Top(top::Args),
}

/// Why a command failed: one line for stderr, which names the file concerned. Exit code 2.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

impl Failure {
    /// `message` about `file`, naming the file in front unless the message already does.
    pub(crate) fn about(file: &std::path::Path, message: impl std::fmt::Display) -> Self {
        let message = message.to_string();
        let name = file.display().to_string();
        if mentions(&message, &name) {
            Self(message)
        } else {
            Self(format!("{name}: {message}"))
        }
    }
}

/// True when `message` names the file `name`: as a word of its own (not inside another word
/// or path) that is quoted, ends the message or is followed by `:` (`cannot read a.tscope: …`),
/// so that a file named like a word of the message (`input`) is still named.
fn mentions(message: &str, name: &str) -> bool {
    let before = |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || "'\"`([{<".contains(c));
    let after = |c: Option<char>| c.is_none_or(|c| "'\"`)]}>:".contains(c));
    !name.is_empty()
        && message.match_indices(name).any(|(at, _)| {
            before(message[..at].chars().next_back())
                && after(message[at + name.len()..].chars().next())
        })
}

/// What every command gets besides its own arguments.
pub(crate) struct Context {
    pub(crate) quiet: bool,
}

fn main() -> ExitCode {
    let matches = help::wrapped(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let cx = Context { quiet: cli.quiet };
    let result = match cli.command {
        Command::Table(args) => table::run(&cx, args),
        Command::Convert(args) => convert::run(&cx, args),
        Command::Info(args) => info::run(&cx, args),
        Command::Merge(args) => merge::run(&cx, args),
        Command::Diff(args) => diff::run(&cx, args),
        Command::Push(args) => push::run(&cx, args),
        Command::Report(args) => report::run(&cx, args),
        Command::Ps(args) => attach::ps(&cx, args),
        Command::Record(args) => attach::record(&cx, args),
        Command::Top(args) => top::run(&cx, args),
    };
    match result {
        Ok(code) => code,
        Err(Failure(message)) => {
            // Nothing more can be done when stderr itself fails.
            let _ = writeln!(std::io::stderr(), "error: {message}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Failure, mentions};
    use std::path::Path;

    #[test]
    fn names_the_file_once() {
        assert!(mentions("cannot write out.json: denied", "out.json"));
        assert!(mentions("`a.tscope` at byte 3: bad", "a.tscope"));
        assert!(mentions("a.tscope", "a.tscope"));
        assert!(!mentions("at byte 0: bad magic", "a"));
        assert!(!mentions("cannot read data/a.tscope.bak", "a.tscope"));
        assert!(!mentions("at byte 0: the input is empty", "input"));
        assert!(mentions("cannot read input: not found", "input"));
        let failure = Failure::about(Path::new("a"), "at byte 0: bad magic");
        assert_eq!(failure.0, "a: at byte 0: bad magic");
        let failure = Failure::about(Path::new("a"), "a: at byte 0: bad magic");
        assert_eq!(failure.0, "a: at byte 0: bad magic");
    }
}
