//! The `tracing` spans that a `follows_from` names, found when the threads' spans are summed
//! rather than kept ([`Summary`](super::summary::Summary)): the first reading keeps the
//! `follows_from`s (time, the effect's and the cause's span ids: three words each); a second
//! reading of the threads keeps the enters and closes of the span ids they name only, and the
//! end and callsite of each span entered under one of them (the callsite names a flow's
//! origin in a table split by origin), which [`Links::matched`] resolves them with
//! as it resolves them from the spans of a whole trace.

use std::sync::Arc;

use crate::capture::CaptureThread;
use crate::record::hash::{FxHashMap, FxHashSet};
use crate::record::registry::Untracked;
use crate::trace::SpanRef;

use super::links::{Ends, Links};
use super::pair::Pairing;
use super::summary::WINDOW;
use super::thread::Shared;

/// Where one thread entered and closed the `tracing` spans that `follows_from`s name.
#[derive(Default)]
pub(super) struct Uses {
    /// (span id, start, the slice), in recorded order.
    pub(super) enters: Vec<(u64, u64, SpanRef)>,
    /// (span id, time), in recorded order.
    pub(super) closes: Vec<(u64, u64)>,
    /// The end of each slice of `enters` and its callsite.
    pub(super) ends: Ends,
}

/// The span ids that the `follows_from`s of `links` name, effects and causes.
pub(super) fn named<'l>(links: impl IntoIterator<Item = &'l Links>) -> FxHashSet<u64> {
    links
        .into_iter()
        .flat_map(|l| &l.tracing_follows)
        .flat_map(|&(_, effect, cause)| [effect, cause])
        .collect()
}

impl Shared<'_> {
    /// Reads `thread` (at `index` in the trace) again, pairing its records as
    /// [`Shared::thread`] does while summing them (a window of spans at a time), and keeps
    /// the enters and closes of the `tracing` span ids in `named`, with the end and callsite
    /// of each slice entered: memory bounded by the spans open at once and the uses of those
    /// ids.
    pub(super) fn tracing_uses_of(
        &self,
        index: usize,
        thread: &CaptureThread,
        named: &Arc<FxHashSet<u64>>,
    ) -> Uses {
        let _untracked = Untracked::enter();
        let mut marks = Vec::new();
        let mut links = Links {
            tracing_uses: true,
            tracing_named: Some(named.clone()),
            ..Links::default()
        };
        let mut ends = FxHashMap::default();
        {
            let mut pairing = Pairing::new(
                self.callsites,
                (&self.converter, self.probe),
                (index, thread.id),
                &mut marks,
                &mut links,
                None,
                WINDOW,
            );
            self.start(&mut pairing, thread);
            pairing.drain_every(WINDOW);
            // The slices entered under a named id whose end has not been seen yet.
            let mut wanted: FxHashSet<u32> = FxHashSet::default();
            let mut seen = 0;
            let mut drain = |pairing: &mut Pairing<'_>| {
                let enters = pairing.tracing_enters();
                wanted.extend(enters[seen..].iter().map(|&(_, _, at)| at.span));
                seen = enters.len();
                pairing.drain_final(|at, span, _| {
                    if wanted.remove(&at) {
                        ends.insert((index as u32, at), (span.end_ns, span.callsite));
                    }
                });
            };
            self.for_each_run(thread, |records| {
                for &record in records {
                    pairing.push(record);
                    if pairing.window_full() {
                        drain(&mut pairing);
                    }
                }
            });
            pairing.close_rest(self.end_of(thread));
            drain(&mut pairing);
        }
        Uses {
            enters: links.tracing_enters,
            closes: links.tracing_closes,
            ends,
        }
    }
}
