//! SVG flame graphs drawn by [inferno](https://docs.rs/inferno) from the folded stacks of
//! [`super::folded`]: box widths are self time plus children, in nanoseconds.
//! Needs the `flamegraph` cargo feature.

use std::io::{self, Write};

use super::folded;
use crate::trace::Trace;

/// Draws `trace` as an SVG flame graph titled `title` into `out`.
///
/// A trace with no scopes gives an SVG that says so ("No stack counts found"), like
/// inferno's own tool.
pub fn write(
    trace: &Trace,
    out: &mut impl Write,
    title: &str,
    options: folded::Options,
) -> io::Result<()> {
    let lines: Vec<String> = folded::stacks(trace, options)
        .into_iter()
        .filter(|(_, self_ns)| *self_ns > 0)
        .map(|(stack, self_ns)| format!("{stack} {self_ns}"))
        .collect();
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_owned();
    opts.count_name = "ns".to_owned();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
}
