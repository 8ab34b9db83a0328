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
//! - a base64 block (`id="ts-blob"`): every scope of every thread, as four columns of
//!   LEB128 varints (name index; distance back to the parent, 0 for none; start minus the end
//!   of the previous sibling, or the parent's start for a first child, zigzag-coded; duration
//!   in ns, overhead compensation applied as in the table), gzipped when tickscope is built with its `gzip` feature (the browser inflates it
//!   with `DecompressionStream`). The layout and its size per scope are in docs/REPORT.md.

#[cfg(doc)]
use crate::report::{Diff, Report};

mod encode;
mod json;
mod names;
mod options;
mod page;

pub use options::Options;
pub use page::write;
