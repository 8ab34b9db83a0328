//! Writers for collected traces, one module per format, each behind one trait: a [`Format`]
//! writes a [`Trace`] to any `io::Write`, and [`write_file`] (or
//! [`Profiler::write`](crate::Profiler::write)) puts it in a file.
//!
//! | format | module | its [`Format`] |
//! | --- | --- | --- |
//! | Chrome Trace Event JSON (for ui.perfetto.dev) | [`chrome`] | [`chrome::Options`] |
//! | its Kineto (PyTorch profiler) dialect, for HTA | [`kineto`] | [`kineto::Options`] |
//! | folded stacks (flamegraph.pl, inferno) | [`folded`] | [`folded::Options`] |
//! | SVG flame graph (cargo feature `flamegraph`) | `flamegraph` | `flamegraph::Options` |
//! | pprof profile (`go tool pprof`, Pyroscope, speedscope) | [`pprof`] | [`pprof::Options`] |
//! | OpenTelemetry traces, `.otlp.json` or pushed over OTLP/HTTP (cargo feature `otlp`) | `otlp` | none: `otlp::Otlp` |
//! | native Perfetto trace (`.pftrace`, exact ns) | [`perfetto`] | [`perfetto::Options`] |
//! | single-file HTML report that opens offline (`.html`) | [`html`] | [`html::Options`] |
//!
//! ```no_run
//! use tickscope::export::{self, chrome, folded, kineto};
//!
//! let prof = tickscope::Profiler::start();
//! // ... the code to profile ...
//! prof.stop();
//! prof.write_chrome_trace("trace.json.gz")?; // the same as prof.write(path, &chrome::Options::new())
//! prof.write("rank0.json", &kineto::Options::new(0, 1))?;
//! export::write_file(&prof.trace(), "stacks.folded", &folded::Options { by_thread: true })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Files
//!
//! [`write_file`] gzips the output when the path ends in `.gz` (`trace.json.gz` opens in
//! ui.perfetto.dev as it is), and puts it in place as follows:
//!
//! - **Regular files** (and paths that do not exist yet) are written atomically: the output
//!   goes to a fresh temporary file beside the target (`.<name>.tmp<pid>.<n>`, unique per call
//!   and created exclusively, so concurrent writers of one path, in this process or another,
//!   never share one), is flushed and synced, then renamed over the target. Readers see the
//!   old file or the whole new one, never a truncated or mixed one; when several writers race,
//!   the last rename wins. An existing target's permission bits are carried over.
//! - **Symbolic links** are followed to their final target, which is then written as above:
//!   the temporary file goes beside the resolved target and the rename replaces the target,
//!   so the link stays a link. A dangling link's target is created through the link.
//! - **Anything else that exists** (character devices such as `/dev/null` or `/dev/full`,
//!   FIFOs, sockets) is opened and written directly, with no temporary file and no rename,
//!   and its write errors are returned (writing to `/dev/full` fails with "no space left").
//!   A directory is refused.
//!
//! Whatever fails (creating, writing, flushing, syncing or renaming), the error is an
//! [`io::Error`] that names the path and the step that failed, and no temporary file
//! survives it.

#[cfg(test)]
pub(crate) mod async_pieces_tests;
pub mod chrome;
#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod folded;
#[cfg(test)]
mod forged_tracing;
#[cfg(test)]
mod hostile_async_tests;
#[cfg(test)]
mod hostile_reports_tests;
#[cfg(test)]
mod hostile_tracing_tests;
pub mod html;
mod json;
pub mod kineto;
mod lanes;
#[cfg(feature = "otlp")]
pub mod otlp;
pub(crate) mod parts;
pub mod perfetto;
pub mod pprof;
mod proto;
mod trace_event;

use std::io;
use std::path::Path;

use crate::capture::Capture;
use crate::capture::output::atomic_write;
use crate::trace::Trace;

/// A file format for traces: the one way every exporter is called, so that a new format needs
/// no new method anywhere else.
///
/// The options of each format implement it ([`chrome::Options`], [`kineto::Options`],
/// [`folded::Options`], and with the `flamegraph` cargo feature `flamegraph::Options`); hand
/// one to [`write_file`] or [`Profiler::write`](crate::Profiler::write). A format of your own
/// only needs [`Format::write`]:
///
/// ```
/// use std::io;
/// use tickscope::export::Format;
/// use tickscope::trace::Trace;
///
/// /// One line per thread: its name and how many scopes it recorded.
/// struct ScopeCounts;
///
/// impl Format for ScopeCounts {
///     fn write(&self, trace: &Trace, out: &mut dyn io::Write) -> io::Result<()> {
///         for thread in &trace.threads {
///             writeln!(out, "{} {}", thread.display_name(), thread.spans.len())?;
///         }
///         Ok(())
///     }
/// }
///
/// let prof = tickscope::Profiler::builder().current_thread().start();
/// prof.stop();
/// let mut out = Vec::new();
/// ScopeCounts.write(&prof.trace(), &mut out)?;
/// # Ok::<(), io::Error>(())
/// ```
pub trait Format {
    /// Streams `trace` in this format into `out`, returning the first write error. `out` is
    /// not flushed: [`write_file`] buffers and flushes it.
    fn write(&self, trace: &Trace, out: &mut dyn io::Write) -> io::Result<()>;

    /// Streams what `captures` decode to ([`Trace::from_captures`]) in this format into
    /// `out` without decoding them whole, when the format can: `None` when it cannot (the
    /// default), and the caller decodes the trace and calls [`Format::write`]. Folded stacks,
    /// flame graphs and pprof profiles, which sum spans by stack, do it for captures that did not track
    /// memory and hold no async call, in memory bounded by the distinct stacks and the
    /// scopes open at once ([`write_file_from_captures`]; `tickscope convert`). Chrome JSON
    /// and Perfetto traces do it for captures that did not track memory and hold no async
    /// call: a first pass sums the threads (their counters, instants and flows are kept),
    /// then each thread is decoded again and written a few thousand spans at a time, whole
    /// top-level scopes (a thread whose outermost scope spans all its records is held
    /// whole). Their events are the whole trace's, in the same order but for a thread's extra
    /// tracks (scopes dropped out of order): named before the first scope that needs them,
    /// and in Perfetto their packets interleaved with the thread's otherwise. The HTML report
    /// does it too, with the whole trace's bytes up to 4 Mi scopes and a level of detail past
    /// them ([`html`]).
    fn write_captures(
        &self,
        captures: &[&Capture],
        out: &mut dyn io::Write,
    ) -> Option<io::Result<()>> {
        let _ = (captures, out);
        None
    }
}

/// Writes the trace `captures` decode to in `format` to the file at `path`, as
/// [`write_file`] does with `Trace::from_captures(captures)`, and with the same bytes; but
/// without decoding the trace whole when the format can write the captures as they are
/// decoded ([`Format::write_captures`]: folded stacks, pprof profiles, Chrome JSON (Kineto's
/// dialect too), Perfetto traces and the HTML report), so that the memory taken does not grow with the
/// captures' size. What `tickscope convert` does. (Written so, a thread's extra tracks for
/// scopes dropped out of order may be named later in a Chrome or Kineto file, and their
/// Perfetto packets interleaved otherwise: the same events.)
///
/// ```
/// use tickscope::export::{folded, write_file, write_file_from_captures};
///
/// let prof = tickscope::Profiler::builder().current_thread().start();
/// for _ in 0..3 {
///     let _outer = tickscope::scope!("outer");
///     let _inner = tickscope::scope!("inner");
/// }
/// prof.stop();
/// let dir = std::env::temp_dir();
/// let (a, b) = (dir.join("doc-from-captures.folded"), dir.join("doc-from-trace.folded"));
/// write_file_from_captures(&[&*prof.capture()], &a, &folded::Options::new())?;
/// write_file(&prof.trace(), &b, &folded::Options::new())?;
/// assert_eq!(std::fs::read(&a)?, std::fs::read(&b)?);
/// # std::fs::remove_file(&a)?;
/// # std::fs::remove_file(&b)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_file_from_captures(
    captures: &[&Capture],
    path: impl AsRef<Path>,
    format: &(impl Format + ?Sized),
) -> io::Result<()> {
    atomic_write(path.as_ref(), |out| {
        match format.write_captures(captures, &mut *out) {
            Some(result) => result,
            None => format.write(&Trace::from_captures(captures.iter().copied()), out),
        }
    })
}

/// Writes `trace` to the file at `path` in `format`, gzipped when the path ends in `.gz`.
/// A regular file appears only when complete, through a temporary file renamed into place;
/// see [Files](self#files) for symbolic links, devices and errors.
pub fn write_file(
    trace: &Trace,
    path: impl AsRef<Path>,
    format: &(impl Format + ?Sized),
) -> io::Result<()> {
    atomic_write(path.as_ref(), |out| format.write(trace, out))
}

/// Writes `captures` to the file at `path` as one capture file: [`Capture::write_all`],
/// where capture files are written.
#[deprecated(note = "capture files are written by `Capture::write_all`")]
pub fn write_captures(path: impl AsRef<Path>, captures: &[&Capture]) -> io::Result<()> {
    Capture::write_all(path, captures)
}
