//! The report's diff view against a baseline of captures (`tickscope report --baseline`): the
//! baseline's rows from their sums, its call tree from their pieces, and the verdicts of the
//! [`Diff`] made of both runs' captures read again in start order
//! ([`Diff::of_capture_refs`]), in memory bounded by the scopes open at once; with the report
//! itself written from the captures' sums and pieces, the page that a baseline decoded whole
//! ([`Options::baseline`]) gives, byte for byte, while each run's scopes fit the table's
//! exact budget.

use std::borrow::Cow;
use std::io;
use std::sync::Arc;

use crate::capture::Capture;
use crate::decode::pieces::{Pieces, SpanSource, Want};
use crate::decode::summary::Summary;
use crate::export::Format;
use crate::report::Report;
use crate::report::compare::{self, Diff};
use crate::trace::{SpanKind, Trace};

use super::json::{Baseline, rows_json};
use super::names::Names;
use super::options::Options;
use super::tree::TreeCols;

/// A baseline of captures: its rows from their sums, its call tree from their pieces, and the
/// diff made of the captures (with the report's options, which [`Baseline::diff`] is then
/// given again).
struct OfCaptures<'a> {
    summary: &'a Summary,
    pieces: &'a Pieces<'a>,
    diff: Diff,
}

impl Baseline for OfCaptures<'_> {
    fn trace(&self) -> &Trace {
        &self.summary.trace
    }

    fn rows(&self, j: &mut String, names: &mut Names) {
        let report = Report::from_summary(self.summary, false);
        rows_json(j, &self.summary.trace, &report, names);
    }

    fn tree(&self, j: &mut String, names: &mut Names) {
        tree_of_pieces(self.pieces, self.summary.trace.threads.len(), names).json(j);
    }

    fn diff(&self, _: &Trace, _: &compare::Options) -> Cow<'_, Diff> {
        Cow::Borrowed(&self.diff)
    }
}

/// The call tree of `threads` threads' spans read piece by piece, as `json::tree_json` merges
/// those of a whole trace: the same nodes, numbered in the same order.
fn tree_of_pieces(pieces: &Pieces<'_>, threads: usize, names: &mut Names) -> TreeCols {
    let mut tree = TreeCols::default();
    let mut carried: Vec<u32> = Vec::new();
    let mut nodes: Vec<u32> = Vec::new();
    for t in 0..threads {
        carried.clear();
        let each = pieces.each_piece(t, Want::ALL, &mut |piece| {
            // The carried spans come first, their nodes made in the piece they began in.
            nodes.clear();
            nodes.append(&mut carried);
            for (i, span) in piece.spans.iter().enumerate().skip(nodes.len()) {
                let parent = (span.parent.map(|p| p as usize))
                    .filter(|&p| p < i)
                    .map_or(-1, |p| i64::from(nodes[p]));
                let id = names.of(span.callsite);
                nodes.push(tree.node(parent, t as u32, id, span.kind != SpanKind::Scope));
            }
            for (i, span) in piece.spans.iter().enumerate() {
                // Counted in the piece where it ends.
                if !piece.is_open(i as u32) {
                    tree.add(nodes[i], span);
                }
            }
            carried.extend(piece.open.iter().map(|&o| nodes[o as usize]));
            Ok(())
        });
        // Walking a piece never fails, so neither does taking them.
        debug_assert!(each.is_ok());
    }
    tree
}

/// The report of captures with a diff view against the trace that `base` captures decode
/// to, as a [`Format`]: written from the sums and pieces of both (the JSON block of the
/// captures as without a baseline, the baseline's rows and tree, the diff of the captures;
/// of async calls, the baseline's tree from its polls as spans), else, when either run
/// cannot be read so (async calls that cannot be matched as the threads are read again, a
/// name of both scopes and async calls), from both traces decoded whole,
/// as [`Options::baseline`] writes it. The options' own baseline is not used.
pub(crate) struct WithBaseline<'a> {
    pub(crate) options: &'a Options,
    pub(crate) base: &'a [&'a Capture],
}

impl WithBaseline<'_> {
    /// The options without a baseline of their own.
    fn options(&self) -> Options {
        Options {
            baseline: None,
            ..self.options.clone()
        }
    }
}

impl Format for WithBaseline<'_> {
    fn write(&self, trace: &Trace, out: &mut dyn io::Write) -> io::Result<()> {
        let base = Trace::from_captures(self.base.iter().copied());
        let options = self.options().baseline(Arc::new(base));
        super::page::write(trace, &mut &mut *out, &options)
    }

    fn write_captures(
        &self,
        captures: &[&Capture],
        out: &mut dyn io::Write,
    ) -> Option<io::Result<()>> {
        let options = self.options();
        // The baseline's sums and the diff first: a run that cannot be read in pieces is
        // found before the report's own pieces are walked.
        let summary = Summary::of(self.base)?;
        // Of async calls, the call tree takes their polls as spans of their threads.
        let pieces = match summary.streamed_calls {
            true => Pieces::of_summary_with_polls(self.base, &summary)?,
            false => Pieces::of_summary(self.base, &summary)?,
        };
        let diff = Diff::of_capture_refs(self.base, captures, &options.diff)?;
        let base = OfCaptures {
            summary: &summary,
            pieces: &pieces,
            diff,
        };
        let title = super::page::title(&options);
        let mut names = Names::default();
        let (meta, blob) =
            super::stream::data_of(captures, Some(&base), &options, title, &mut names)?;
        Some(super::page::page(out, title, &meta, &blob))
    }
}
