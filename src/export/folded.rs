//! Folded stacks (`outer;inner;leaf <self ns>`), the input of flamegraph.pl and inferno.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::Format;
use crate::decode::summary::Summary;
use crate::trace::Trace;

/// Options of folded stacks: the [`Format`] to hand to
/// [`Profiler::write`](crate::Profiler::write) or [`write_file`](super::write_file), and the
/// argument of [`write()`]. The default merges all threads.
#[must_use]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Starts every stack with the thread's name, giving one tower per thread; in a trace of
    /// several processes, with the process's label
    /// ([`Trace::process_label`](crate::trace::Trace::process_label)) and then the thread's
    /// name, giving one tower per process with one per thread in it.
    pub by_thread: bool,
}

impl Options {
    /// The defaults: all threads merged.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts every stack with the thread's name, giving one tower per thread.
    pub fn by_thread(mut self, on: bool) -> Self {
        self.by_thread = on;
        self
    }
}

impl Format for Options {
    fn write(&self, trace: &Trace, mut out: &mut dyn Write) -> io::Result<()> {
        write(trace, &mut out, *self)
    }

    fn write_captures(
        &self,
        captures: &[&crate::capture::Capture],
        out: &mut dyn Write,
    ) -> Option<io::Result<()>> {
        let stacks = summed_stacks_of(captures, *self)?;
        Some(
            stacks
                .iter()
                .try_for_each(|(stack, self_ns)| writeln!(out, "{stack} {self_ns}")),
        )
    }
}

/// The stacks of the trace `captures` decode to, as [`stacks`] gives them, summed as the
/// records are decoded (a poll of an async call is a frame of its thread, as in the trace);
/// `None` when they cannot be (`tracing` spans entered several times, async calls of a flight
/// recorder's window or of a session that tracked memory).
pub(crate) fn summed_stacks_of(
    captures: &[&crate::capture::Capture],
    options: Options,
) -> Option<BTreeMap<String, u64>> {
    summed_stacks(&Summary::stacks_with_polls_of(captures)?, options)
}

/// The stacks of the trace `summary` stands for, as [`stacks`] gives them, from its threads'
/// [`StackTree`](crate::decode::summary::StackTree)s; `None` when it has none.
fn summed_stacks(summary: &Summary, options: Options) -> Option<BTreeMap<String, u64>> {
    let trace = &summary.trace;
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for (thread, sums) in trace.threads.iter().zip(&summary.threads) {
        let tree = sums.stacks.as_ref()?;
        let root = root(trace, thread, options);
        let mut paths: Vec<String> = Vec::with_capacity(tree.nodes.len());
        for (&(parent, callsite), values) in tree.nodes.iter().zip(&tree.values) {
            let prefix = match parent {
                Some(parent) => Some(paths[parent as usize].as_str()),
                None => root.as_deref(),
            };
            let name = clean(callsite.name());
            let path = match prefix {
                Some(prefix) => format!("{prefix};{name}"),
                None => name,
            };
            let self_ns = stacks.entry(path.clone()).or_default();
            *self_ns = self_ns.saturating_add(values[1]);
            paths.push(path);
        }
    }
    Some(stacks)
}

/// The first frame of `thread`'s stacks with [`Options::by_thread`]: its name, after its
/// process's label in a trace of several processes.
fn root(trace: &Trace, thread: &crate::trace::ThreadTrace, options: Options) -> Option<String> {
    options.by_thread.then(|| {
        let name = clean(&thread.display_name());
        if trace.processes.len() > 1 {
            format!("{};{name}", clean(&trace.process_label(thread.process)))
        } else {
            name
        }
    })
}

/// Writes one line per distinct stack with the total self time (ns) spent in its leaf, sorted by
/// stack. `;` in names becomes `:` and line breaks become spaces, so every line stays parseable.
pub fn write(trace: &Trace, out: &mut impl Write, options: Options) -> io::Result<()> {
    for (stack, self_ns) in &stacks(trace, options) {
        writeln!(out, "{stack} {self_ns}")?;
    }
    Ok(())
}

/// Every distinct stack (`outer;inner;leaf`) with the self time of its leaf, in ns.
pub(crate) fn stacks(trace: &Trace, options: Options) -> BTreeMap<String, u64> {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for thread in &trace.threads {
        let root = root(trace, thread, options);
        let mut paths: Vec<String> = Vec::with_capacity(thread.spans.len());
        for span in &thread.spans {
            let prefix = match span.parent {
                Some(parent) => Some(paths[parent as usize].as_str()),
                None => root.as_deref(),
            };
            let name = clean(span.name());
            let path = match prefix {
                Some(prefix) => format!("{prefix};{name}"),
                None => name,
            };
            // Saturating: a forged capture file may hold any duration.
            let self_ns = stacks.entry(path.clone()).or_default();
            *self_ns = self_ns.saturating_add(span.self_ns());
            paths.push(path);
        }
    }
    stacks
}

fn clean(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_whitespace() && c != ' ' => ' ',
            c => c,
        })
        .collect()
}
