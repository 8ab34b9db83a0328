//! `tickscope merge`: several capture files into one, each read whole (and so validated)
//! before anything is written.

use std::fs::{self, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tickscope::Capture;

use crate::{Context, Failure, input};

/// Concatenates capture files: every session of every input, in order, into one file that
/// `tickscope info` and `Capture::read_all` read back session by session. Every input is read
/// and checked first; if one fails, nothing is written. The output appears only when
/// complete (written beside it, then renamed into place).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The capture files, in the order their sessions are written.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The merged capture file.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
}

pub(crate) fn run(cx: &Context, args: Args) -> Result<ExitCode, Failure> {
    let bytes = args.files.iter().map(|f| input::size(f)).sum();
    let progress = input::Progress::new(cx, bytes);
    let mut captures: Vec<Capture> = Vec::new();
    for file in &args.files {
        captures.extend(input::all(cx, file, &progress)?);
    }
    let out = &args.output;
    progress.step(format!("writing {}", out.display()));
    write_atomically(out, |w| {
        for capture in &captures {
            capture.write_to(w)?;
        }
        Ok(())
    })
    .map_err(|e| Failure::about(out, e))?;
    Ok(ExitCode::SUCCESS)
}

/// Removes the temporary file unless it was renamed into place.
struct Temp(Option<PathBuf>);

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Writes `path` through `write`: into a fresh temporary file beside it, flushed and synced,
/// then renamed over it, so that readers see the old file or the whole new one. Errors name
/// the path and the step that failed; no temporary file survives them.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let fail = |what: &str, e: io::Error| {
        io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
    };
    let Some(name) = path.file_name() else {
        let e = io::Error::new(io::ErrorKind::InvalidInput, "the path names no file");
        return Err(fail("write", e));
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let pid = std::process::id();
    let mut created = None;
    for n in 0..1000 {
        let tmp = dir.join(format!(".{}.tmp{pid}.{n}", name.to_string_lossy()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => {
                created = Some((file, Temp(Some(tmp))));
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(fail("create a temporary file for", e)),
        }
    }
    let Some((file, mut temp)) = created else {
        let e = io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name");
        return Err(fail("create a temporary file for", e));
    };
    if let Ok(meta) = fs::metadata(path) {
        // Keep an existing file's permission bits; the temporary file's own are fine too.
        let _ = file.set_permissions(meta.permissions());
    }
    let mut out = BufWriter::with_capacity(1 << 16, file);
    write(&mut out).map_err(|e| fail("write", e))?;
    let file = out
        .into_inner()
        .map_err(|e| fail("write", e.into_error()))?;
    file.sync_all().map_err(|e| fail("sync", e))?;
    drop(file);
    let tmp = temp.0.take().expect("set when created");
    if let Err(e) = fs::rename(&tmp, path) {
        temp.0 = Some(tmp);
        return Err(fail("rename the merged file into", e));
    }
    Ok(())
}
