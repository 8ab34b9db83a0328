//! `tickscope`: the command line of the tickscope profiler, for capture files written by
//! [`Profiler::write_capture`](tickscope::Profiler::write_capture).
//!
//! ```text
//! tickscope table run.tsc --sort self --limit 20     the table Profiler::table() prints
//! tickscope convert run.tsc -o run.json.gz           Chrome/Kineto JSON, folded stacks, SVG
//! tickscope convert a.tsc b.tsc -o both.json         several processes on one timeline
//! tickscope info run.tsc                             what the file holds
//! tickscope merge a.tsc b.tsc -o both.tsc            validated concatenation
//! tickscope diff base.tsc new.tsc --format markdown  per-call verdicts; exit 1 on a regression
//! tickscope push a.tsc b.tsc --endpoint URL          OTLP traces to a Collector, Jaeger, Tempo
//! tickscope ps                                       programs that can be attached to
//! tickscope record --pid N --duration 10s -o r.tsc   a capture of a running program
//! tickscope top --pid N                              a live table of a running program
//! ```
//!
//! Exit codes: 0 on success, 1 when `diff` finds a regression, 2 on a usage or input error
//! (one line on stderr, naming the file). Warnings met while reading a file go to stderr as
//! `warning: FILE: …` unless `--quiet`.

mod attach;
mod convert;
mod diff;
mod info;
mod input;
mod merge;
mod push;
mod table;
mod text;
mod top;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Reads tickscope capture files: tables, conversions, merges and diffs.
#[derive(Debug, Parser)]
#[command(name = "tickscope", version, about, long_about = None)]
struct Cli {
    /// No progress bar and no warnings on stderr (errors are still printed).
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
/// or path) that is quoted, ends the message or is followed by `:` (`cannot read a.tsc: …`),
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
    let cli = Cli::parse();
    let cx = Context { quiet: cli.quiet };
    let result = match cli.command {
        Command::Table(args) => table::run(&cx, args),
        Command::Convert(args) => convert::run(&cx, args),
        Command::Info(args) => info::run(&cx, args),
        Command::Merge(args) => merge::run(&cx, args),
        Command::Diff(args) => diff::run(&cx, args),
        Command::Push(args) => push::run(&cx, args),
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
        assert!(mentions("`a.tsc` at byte 3: bad", "a.tsc"));
        assert!(mentions("a.tsc", "a.tsc"));
        assert!(!mentions("at byte 0: bad magic", "a"));
        assert!(!mentions("cannot read data/a.tsc.bak", "a.tsc"));
        assert!(!mentions("at byte 0: the input is empty", "input"));
        assert!(mentions("cannot read input: not found", "input"));
        let failure = Failure::about(Path::new("a"), "at byte 0: bad magic");
        assert_eq!(failure.0, "a: at byte 0: bad magic");
        let failure = Failure::about(Path::new("a"), "a: at byte 0: bad magic");
        assert_eq!(failure.0, "a: at byte 0: bad magic");
    }
}
