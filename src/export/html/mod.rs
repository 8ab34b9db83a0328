//! A single-file HTML report that opens offline: summary table, call tree, flame graph,
//! timeline, memory and session views, and with a baseline a diff view, all drawn by plain
//! JavaScript embedded in the file (no request of any kind when it opens: the page's content
//! security policy forbids them).
//!
//! ```no_run
//! use tickscope::export::html;
//!
//! let prof = tickscope::Profiler::start();
//! // ... the code to profile ...
//! prof.stop();
//! prof.write("run.html", &html::Options::new().title("nightly run"))?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # What the file holds
//!
//! - a JSON block (`<script type="application/json" id="ts-meta">`): the names, threads,
//!   processes, the table's rows (by name and by thread, as [`Report`] computes them), the
//!   merged call tree, the table's footer, counters, instants, async calls, flows, a
//!   downsampled memory timeline and, with a baseline, the baseline's rows and tree and the
//!   [`Diff`] verdicts. `<`, `>`, `&`, U+2028 and U+2029 are written as `\u` escapes, so no
//!   name can close the block;
//! - a base64 block (`id="ts-blob"`): every scope of every thread (of a report written from
//!   captures of more than 4 Mi scopes, a level of detail: see below), as four columns of
//!   LEB128 varints (name index; distance back to the parent, 0 for none; start minus the end
//!   of the previous sibling, or the parent's start for a first child, zigzag-coded; duration
//!   in ns, overhead compensation applied as in the table), gzipped when tickscope is built with its `gzip` feature (the browser inflates it
//!   with `DecompressionStream`). The layout and its size per scope are in docs/REPORT.md.

//!
//! # Written from captures
//!
//! [`Format::write_captures`] (what `tickscope convert -o x.html`, `tickscope report` and
//! [`Profiler::write`](crate::Profiler::write) of a streaming session use) writes the report
//! without decoding the trace whole, in memory bounded by the scopes open at once: the JSON
//! block from a first pass that sums each thread, the call tree and the blob from each
//! thread's spans read again piece by piece; the page is the whole trace's, byte for byte, up
//! to 4 Mi scopes. Past that, the blob holds a level of detail (every scope that
//! lasted at least the least duration that keeps at most 4 Mi of them, with their parents),
//! which the page states; the JSON block then holds each row's histogram over every call, so
//! that the table, call tree, flame graph and histograms still count every scope. The calls
//! of `#[profile] async fn`s (and of `tracing` spans entered several times) are matched as
//! the threads are read again (past 1 Mi of them, the page's async lanes show the longest);
//! captures whose async calls cannot be matched so
//! (a flight recorder's window, memory tracked), and a report with an [`Options::baseline`]
//! (whose diff needs the whole trace), are decoded whole; `tickscope report --baseline`
//! writes the diff view from the baseline's captures too, their sums and pieces, and the
//! diff of both runs' captures. Of several sessions with calls, the calls of each are merged
//! in order of their start, as the decoded trace merges them.

#[cfg(doc)]
use crate::report::{Diff, Report};

#[cfg(test)]
mod async_tests;
mod base;
mod calls;
mod encode;
mod hist;
mod json;
mod names;
mod options;
mod page;
mod stream;
mod tree;

pub(crate) use base::WithBaseline;
pub use options::Options;
pub use page::write;
pub(crate) use stream::set_scope_budget;

use std::io::{self, Write};

use crate::capture::Capture;
use crate::export::Format;
use crate::trace::Trace;

impl Format for Options {
    fn write(&self, trace: &Trace, mut out: &mut dyn Write) -> io::Result<()> {
        page::write(trace, &mut out, self)
    }

    /// The report of what `captures` decode to without decoding them whole, unless they hold
    /// async calls that cannot be matched as they are read again, or a baseline is set: the JSON block from the first pass's sums, the blob
    /// from the spans read again piece by piece (past 4 Mi scopes, those that lasted longest:
    /// the page says which).
    fn write_captures(&self, captures: &[&Capture], out: &mut dyn Write) -> Option<io::Result<()>> {
        stream::write_captures(captures, out, self)
    }
}
