//! The report's [`Options`].

use std::sync::Arc;

#[cfg(doc)]
use crate::export::Format;
use crate::report::compare;
#[cfg(doc)]
use crate::report::compare::Diff;
use crate::trace::Trace;

/// Options of the HTML report: the [`Format`] to hand to
/// [`Profiler::write`](crate::Profiler::write) or
/// [`write_file`](crate::export::write_file), and the argument of [`write()`](super::write).
#[must_use]
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The page's title; "tickscope report" when empty.
    pub title: String,
    /// A baseline run: the report then has a diff view comparing the trace with it.
    pub baseline: Option<Arc<Trace>>,
    /// How the diff view judges each name ([`Diff::new`]); the defaults of `tickscope diff`.
    pub diff: compare::Options,
}

impl Options {
    /// The defaults: no title of its own, no baseline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the page's title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// Compares the trace with `baseline` in a diff view.
    pub fn baseline(mut self, baseline: Arc<Trace>) -> Self {
        self.baseline = Some(baseline);
        self
    }

    /// How the diff view judges each name.
    pub fn diff_options(mut self, options: compare::Options) -> Self {
        self.diff = options;
        self
    }
}
