//! Async calls labelled by their polls, as the threads are read again: what a report split by
//! argument or by origin takes of the calls of captures whose calls are summed
//! ([`Summary::streamed_calls`]), in memory bounded as [`call_stream`](super::call_stream)
//! bounds it, and by the labels of the poll slices not final yet and of the calls not settled.
//!
//! As the decoded trace's report labels a call: by the label of its latest poll (by start,
//! then thread and slice index) that has one; a poll slice's label is the value of the first
//! argument with the key among its arguments (a `tracing` span's fields are arguments of each
//! enter), or the name of the origin of the last flow that it follows.

use crate::capture::{Capture, CaptureThread};
use crate::record::callsite::Callsite;
use crate::record::registry::Untracked;
use crate::trace::MemoryStats;

use super::call_stream;
use super::summary::Summary;
use super::thread::Shared;

pub(crate) use super::poll_label::{CallLabel, PollLabels};

/// An async call as a split report sums it.
pub(crate) struct LabelledCall<'a> {
    /// The thread that began it (index in the summary's trace).
    pub(crate) thread: usize,
    pub(crate) callsite: &'static Callsite,
    /// Its wall time, and its polls' durations and self times, summed.
    pub(crate) wall_ns: u64,
    pub(crate) busy_ns: u64,
    pub(crate) self_ns: u64,
    pub(crate) open_at_stop: bool,
    /// Its polls' memory figures, summed.
    pub(crate) memory: &'a MemoryStats,
    /// The label of its latest poll that has one.
    pub(crate) label: Option<&'a CallLabel>,
}

/// Hands each async call of `captures`, whose summary is `summary` (their
/// [`Summary::of`]), to `f`, labelled as `labels` says (by origin, by thread index of the
/// summary's trace), in no particular order. `None` when the calls cannot be matched as the
/// summary matched them (marks out of order: not expected of captures the summary summed),
/// or when `summary` is not of `captures`.
pub(crate) fn each_labelled_call(
    captures: &[&Capture],
    summary: &Summary,
    labels: &PollLabels<'_>,
    f: &mut dyn FnMut(&LabelledCall<'_>),
) -> Option<()> {
    // Decoding allocates; that is the profiler's work, not the program's.
    let _untracked = Untracked::enter();
    let mut offset = 0;
    for (at, &capture) in captures.iter().enumerate() {
        // As the summary read the capture (`decode_with`).
        let shared = Shared::new(capture, capture.memory.is_on(), false);
        let threads: Vec<&CaptureThread> = (capture.threads.iter())
            .filter(|t| shared.has_records(t))
            .collect();
        let first = offset;
        offset += threads.len();
        let summed = summary.trace.threads.get(first..offset)?;
        if !(summed.iter().zip(&threads)).all(|(s, t)| s.id == t.id) {
            return None;
        }
        if !summary.call_captures.contains(&at) {
            continue;
        }
        let ends: Vec<u64> = threads.iter().map(|t| shared.end_of(t)).collect();
        let labels = match labels {
            PollLabels::None => PollLabels::None,
            PollLabels::Arg(key) => PollLabels::Arg(key),
            PollLabels::Origin(origins) => PollLabels::Origin(origins.get(first..offset)?),
        };
        call_stream::each_call_labelled(
            &shared,
            &threads,
            &ends,
            (false, None),
            &labels,
            &mut |call| {
                if call.is_call() {
                    f(&LabelledCall {
                        thread: first + call.thread,
                        callsite: call.callsite,
                        wall_ns: call.wall_ns(),
                        busy_ns: call.busy_ns,
                        self_ns: call.self_ns,
                        open_at_stop: call.open_at_stop,
                        memory: &call.memory,
                        label: call.label(),
                    });
                }
            },
            &mut |_, _, _, _| {},
        )?;
    }
    (offset == summary.trace.threads.len()).then_some(())
}
