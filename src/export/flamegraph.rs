//! SVG flame graphs drawn by [inferno](https://docs.rs/inferno) from the folded stacks of
//! [`super::folded`]: box widths are self time plus children, in nanoseconds.
//! Needs the `flamegraph` cargo feature.

use std::io::{self, Write};

use super::{Format, folded};
use crate::trace::Trace;

/// Options of flame graphs: the [`Format`] to hand to
/// [`Profiler::write`](crate::Profiler::write) or [`write_file`](super::write_file), and the
/// argument of [`write()`].
///
/// ```no_run
/// use tickscope::export::flamegraph::Options;
///
/// let prof = tickscope::Profiler::start();
/// prof.stop();
/// prof.write("flame.svg", &Options::new().title("startup").by_thread(true))?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The title above the graph; "tickscope" by default.
    pub title: String,
    /// The stacks drawn: all threads merged (the default), or one tower per thread.
    pub stacks: folded::Options,
}

impl Options {
    /// The defaults: titled "tickscope", all threads merged.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the title above the graph.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// Starts every stack with the thread's name, giving one tower per thread.
    pub fn by_thread(mut self, on: bool) -> Self {
        self.stacks.by_thread = on;
        self
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            title: "tickscope".to_owned(),
            stacks: folded::Options::default(),
        }
    }
}

impl Format for Options {
    fn write(&self, trace: &Trace, mut out: &mut dyn Write) -> io::Result<()> {
        write(trace, &mut out, self)
    }

    fn write_captures(
        &self,
        captures: &[&crate::capture::Capture],
        mut out: &mut dyn Write,
    ) -> Option<io::Result<()>> {
        let stacks = folded::summed_stacks_of(captures, self.stacks)?;
        Some(draw(stacks, &mut out, self))
    }
}

/// Draws `trace` as an SVG flame graph into `out`.
///
/// A trace with no scopes gives an SVG that says so ("No stack counts found"), like
/// inferno's own tool.
pub fn write(trace: &Trace, out: &mut impl Write, options: &Options) -> io::Result<()> {
    draw(folded::stacks(trace, options.stacks), out, options)
}

/// Draws the folded `stacks` (with their self times) as an SVG flame graph into `out`.
fn draw(
    stacks: std::collections::BTreeMap<String, u64>,
    out: &mut impl Write,
    options: &Options,
) -> io::Result<()> {
    let lines: Vec<String> = stacks
        .into_iter()
        .filter(|(_, self_ns)| *self_ns > 0)
        .map(|(stack, self_ns)| format!("{stack} {self_ns}"))
        .collect();
    let mut opts = inferno::flamegraph::Options::default();
    opts.title.clone_from(&options.title);
    opts.count_name = "ns".to_owned();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
}
