//! Reading capture files: errors that name the file, warnings on stderr, and progress for
//! large inputs: a bar of the bytes read while a file is read (in pieces, so the bar moves),
//! then the step in progress with a count: a bar of the records decoded out of the captures'
//! records (counted by the library as it decodes, read every 100 ms) and the bytes written
//! so far.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tickscope::Capture;

use crate::{Context, Failure};

/// Inputs from this size on get a progress display (when stderr is a terminal).
const LARGE_INPUT: u64 = 16 << 20;

/// Progress on stderr, shown only for large inputs on a terminal and without `--quiet`
/// ([`shown`]); otherwise it draws nothing. While a file is read it is a bar of the bytes
/// read out of the file's size; for the steps after, a spinner naming the step with its count
/// ([`counted`]: the records decoded, the bytes written) and the time spent.
pub(crate) struct Progress(Option<ProgressBar>, Ticker);

/// The thread that moves a bar of decoded records while the library decodes, until the next
/// step.
#[derive(Default)]
struct Ticker(Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>);

impl Ticker {
    /// Starts moving `bar` to the records decoded since now, up to `total`.
    fn start(&self, bar: &ProgressBar, total: u64) {
        self.stop();
        let (stop, bar) = (Arc::new(AtomicBool::new(false)), bar.clone());
        let base = tickscope::__private::decoded_records();
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let done = tickscope::__private::decoded_records().saturating_sub(base);
                bar.set_position(done.min(total));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((stop, thread));
    }

    /// Stops the thread, if one runs, and waits for it.
    fn stop(&self) {
        let running = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((stop, thread)) = running {
            stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

/// True when work on `bytes` bytes of input shows progress: without `--quiet`, on a terminal,
/// from [`LARGE_INPUT`] bytes on.
pub(crate) fn shown(quiet: bool, bytes: u64, terminal: bool) -> bool {
    !quiet && terminal && bytes >= LARGE_INPUT
}

/// `n` with its thousands grouped: `12,345,678`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// What a step says of its count: `decoding 12,345,678 / 86,500,000 records` with a total,
/// `writing run.json: 1,048,576 bytes` without.
pub(crate) fn counted(step: &str, done: u64, total: Option<u64>, unit: &str) -> String {
    match total {
        Some(total) => format!("{step} {} / {} {unit}", grouped(done), grouped(total)),
        None => format!("{step} {} {unit}", grouped(done)),
    }
}

impl Progress {
    /// Progress for work on `bytes` bytes of input.
    pub(crate) fn new(cx: &Context, bytes: u64) -> Self {
        if !shown(cx.quiet, bytes, std::io::stderr().is_terminal()) {
            return Self(None, Ticker::default());
        }
        let bar = ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(100));
        let progress = Self(Some(bar), Ticker::default());
        progress.spinner();
        progress
    }

    /// Shows `step` as what is being done now, with a spinner.
    pub(crate) fn step(&self, step: impl Into<String>) {
        if let Some(bar) = &self.0 {
            self.spinner();
            bar.set_message(step.into());
        }
    }

    fn spinner(&self) {
        self.1.stop();
        if let (Some(bar), Ok(style)) = (
            &self.0,
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})"),
        ) {
            bar.set_style(style);
        }
    }

    /// Shows a bar for reading `path`, of `size` bytes.
    fn reading(&self, path: &Path, size: u64) {
        self.1.stop();
        if let Some(bar) = &self.0 {
            bar.set_message(format!("reading {}", path.display()));
            bar.set_length(size);
            bar.set_position(0);
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} ({elapsed})",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
        }
    }

    /// `read` bytes of the file are read.
    fn read(&self, read: u64) {
        if let Some(bar) = &self.0 {
            bar.set_position(read);
        }
    }

    /// Shows a bar of the `total` records of a decoding, named `step`, that moves as the
    /// library decodes them.
    fn decoding(&self, step: &str, total: u64) {
        if let Some(bar) = &self.0 {
            // Length and position before the style, so that no frame shows the new style
            // with the old step's figures.
            bar.set_length(total);
            bar.set_position(0);
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} [{bar:30}] {human_pos}/{human_len} records ({elapsed})",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(step.to_owned());
            self.1.start(bar, total);
        }
    }

    /// Names the step of the bar shown `message`, leaving its figures as they are (a push
    /// says what it has sent over the bar of the records it decodes).
    #[cfg(feature = "otlp")]
    pub(crate) fn message(&self, message: String) {
        if let Some(bar) = &self.0 {
            bar.set_message(message);
        }
    }

    /// Shows `step` with a count of `n` `unit` (a spinner: the total is not known).
    pub(crate) fn count(&self, step: &str, n: u64, unit: &str) {
        if let Some(bar) = &self.0 {
            self.spinner();
            bar.set_message(counted(step, n, None, unit));
        }
    }

    /// `out` counting what is written through it on this display: `writing PATH: N bytes`.
    pub(crate) fn writer<'w>(&'w self, path: &Path, out: &'w mut dyn Write) -> Counting<'w> {
        let step = format!("writing {}:", path.display());
        self.count(&step, 0, "bytes");
        Counting {
            out,
            progress: self,
            step,
            written: 0,
            shown: 0,
        }
    }

    /// Runs `f` with the progress display cleared from the terminal, redrawing it afterwards,
    /// so that what `f` prints on stderr is not mixed with it.
    pub(crate) fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }
}

/// A writer that counts the bytes written through it on a [`Progress`], redrawn every MiB.
pub(crate) struct Counting<'w> {
    out: &'w mut dyn Write,
    progress: &'w Progress,
    step: String,
    written: u64,
    shown: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.written += n as u64;
        if self.written - self.shown >= 1 << 20 {
            self.shown = self.written;
            self.progress.count(&self.step, self.written, "bytes");
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.1.stop();
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

/// The size of the file at `path`, 0 when it cannot be read (reading it will say why).
pub(crate) fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Prints the warnings met while reading `path` on stderr, unless `--quiet`, with the
/// progress display out of the way.
pub(crate) fn warn(cx: &Context, path: &Path, capture: &Capture, progress: &Progress) {
    if cx.quiet || capture.warnings().is_empty() {
        return;
    }
    progress.suspend(|| {
        let mut stderr = std::io::stderr().lock();
        for warning in capture.warnings() {
            let _ = writeln!(stderr, "warning: {}: {warning}", path.display());
        }
    });
}

/// Every session of the file at `path`, its warnings left to the caller: read chunk by
/// chunk ([`Capture::read_all_with_progress`]: the records stay in the file, read again when
/// decoded), with `progress` showing how far it got.
pub(crate) fn all_unchecked(path: &Path, progress: &Progress) -> Result<Vec<Capture>, Failure> {
    progress.reading(path, size(path));
    Capture::read_all_with_progress(path, &|read| progress.read(read))
        .map_err(|e| Failure::about(path, e))
}

/// Every session of the file at `path` without their records ([`Capture::read_index`]:
/// headers, tables and footers), its warnings left to the caller.
pub(crate) fn index(path: &Path, progress: &Progress) -> Result<Vec<Capture>, Failure> {
    progress.step(format!("reading {}", path.display()));
    Capture::read_index(path).map_err(|e| Failure::about(path, e))
}

/// Every session of the file at `path`, refused when one was read with warnings (a salvaged
/// tail, a missing footer, skipped chunks) unless `allow_salvaged`, in which case the warnings
/// are printed. `what` says what the command refuses to do with damaged input ("merge",
/// "compare").
pub(crate) fn whole(
    cx: &Context,
    path: &Path,
    progress: &Progress,
    allow_salvaged: bool,
    what: &str,
) -> Result<Vec<Capture>, Failure> {
    if allow_salvaged {
        return all(cx, path, progress);
    }
    let sessions = all_unchecked(path, progress)?;
    match sessions.iter().flat_map(|c| c.warnings()).next() {
        Some(warning) => Err(Failure::about(
            path,
            format!(
                "read with warnings, refusing to {what} it as if whole (--allow-salvaged \
                 {what}s it anyway): {warning}"
            ),
        )),
        None => Ok(sessions),
    }
}

/// Every session of the file at `path`, its warnings printed.
pub(crate) fn all(cx: &Context, path: &Path, progress: &Progress) -> Result<Vec<Capture>, Failure> {
    let captures = all_unchecked(path, progress)?;
    for capture in &captures {
        warn(cx, path, capture, progress);
    }
    Ok(captures)
}

/// Shows on `progress` that the `captures` of the files at `paths` are being decoded: a bar
/// of their records, `decoding run.tscope [=====>    ] 43,250,000/86,500,000 records`, that
/// moves as the library decodes them.
pub(crate) fn decoding(progress: &Progress, paths: &[PathBuf], captures: &[Capture]) {
    decoding_twice(progress, paths, captures, false);
}

/// [`decoding`], of a command that reads the records twice when `twice` (a first pass that
/// sums the threads, then each thread again piece by piece): the bar counts both passes.
pub(crate) fn decoding_twice(
    progress: &Progress,
    paths: &[PathBuf],
    captures: &[Capture],
    twice: bool,
) {
    decoding_passes(progress, paths, captures, if twice { 2 } else { 1 });
}

/// [`decoding_twice`], of a command that reads the records `passes` times (half of them
/// first passes that sum the threads, whose records the bar counts only of sessions that
/// did not track memory).
pub(crate) fn decoding_passes(
    progress: &Progress,
    paths: &[PathBuf],
    captures: &[Capture],
    passes: u64,
) {
    let step = match paths {
        [path] => format!("decoding {}", path.display()),
        _ => format!("decoding {} files", paths.len()),
    };
    let records: u64 = captures.iter().map(Capture::record_count).sum();
    let passes = if captures.iter().any(Capture::tracks_memory) {
        passes.div_ceil(2)
    } else {
        passes
    };
    progress.decoding(&step, records.saturating_mul(passes));
}

/// The captures of the files at `paths`: every session of every file, or only session
/// `session` (1-based, counted across the files in order, as `tickscope merge` would write
/// them) when asked. Warnings are printed.
pub(crate) fn captures(
    cx: &Context,
    paths: &[PathBuf],
    session: Option<usize>,
    progress: &Progress,
) -> Result<Vec<Capture>, Failure> {
    let mut captures = Vec::new();
    for path in paths {
        captures.extend(all(cx, path, progress)?);
    }
    if let Some(n) = session {
        let count = captures.len();
        if n == 0 || n > count {
            let sessions = if count == 1 { "session" } else { "sessions" };
            let message = format!("no session {n}: ");
            return Err(match paths {
                [path] => Failure::about(path, format!("{message}the file has {count} {sessions}")),
                _ => Failure(format!("{message}the files hold {count} {sessions}")),
            });
        }
        captures = vec![captures.swap_remove(n - 1)];
    }
    Ok(captures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_numbers() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(86_500_000), "86,500,000");
        assert_eq!(
            counted("decoding", 12_345_678, Some(86_500_000), "records"),
            "decoding 12,345,678 / 86,500,000 records"
        );
        assert_eq!(
            counted("writing run.json:", 1_048_576, None, "bytes"),
            "writing run.json: 1,048,576 bytes"
        );
    }

    #[test]
    fn only_large_inputs_on_a_terminal_show_progress() {
        assert!(shown(false, LARGE_INPUT, true));
        assert!(!shown(false, LARGE_INPUT - 1, true));
        assert!(!shown(false, u64::MAX, false), "stderr is not a terminal");
        assert!(!shown(true, u64::MAX, true), "--quiet");
    }
}
