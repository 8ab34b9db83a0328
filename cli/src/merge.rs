//! `tickscope merge`: several capture files into one, each read whole (and so validated)
//! before anything is written.

use std::path::PathBuf;
use std::process::ExitCode;

use tickscope::Capture;

use crate::{Context, Failure, input, text};

/// Concatenate capture files into one, checking every input first.
///
/// Every session of every input, in order, into one file that
/// `tickscope info` and `Capture::read_all` read back session by session; each keeps its
/// process, its time and, for a session taken by an attach (`tickscope record`), its origin
/// (the flight recorder's window or the live window, and the attach's time). Every input is read
/// and checked first; if one fails, nothing is written. An input read with warnings (a
/// salvaged tail, a missing footer, skipped chunks) is refused unless --allow-salvaged, so
/// that the merged file never passes damaged input off as whole. The output is gzipped when
/// its name ends in `.gz`; a regular file appears only when complete (written beside it, then
/// renamed into place), a symbolic link is written through, a device is written directly.
/// Then merge says what it wrote (path, sessions, size) on stderr, unless --quiet.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The capture files, in the order their sessions are written.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The merged capture file.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Merge inputs read with warnings too (their warnings are printed unless --quiet); the
    /// merged file then holds what could be salvaged of them, and reads back without warnings.
    #[arg(long)]
    allow_salvaged: bool,
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let bytes = args.files.iter().map(|f| input::size(f)).sum();
    let progress = input::Progress::new(cx, bytes);
    let mut captures: Vec<Capture> = Vec::new();
    for file in &args.files {
        let sessions = input::whole(cx, file, &progress, args.allow_salvaged, "merge")?;
        captures.extend(sessions);
    }
    let out = &args.output;
    progress.step(format!("writing {}", out.display()));
    let all: Vec<&Capture> = captures.iter().collect();
    tickscope::Capture::write_all(out, &all).map_err(|e| Failure::about(out, e))?;
    drop(progress);
    if !cx.quiet {
        let n = all.len();
        let gz = crate::convert::is_gz(out);
        let what = format!(
            "capture file, {n} session{}{}",
            if n == 1 { "" } else { "s" },
            if gz { ", gzipped" } else { "" }
        );
        text::wrote(out, &what);
    }
    Ok(ExitCode::SUCCESS)
}
