//! The memory live at stop: what a session's window allocated and did not free, by scope.

use std::collections::HashMap;

use crate::trace::Trace;

/// Memory live at stop: the allocations a session's window made and did not free by its stop,
/// grouped by the innermost scope open when they were made. In
/// [`Report::live_at_stop`](super::Report::live_at_stop), and below the table as "Live at
/// stop".
///
/// What is live at stop is not necessarily leaked: a cache, or a value the program frees
/// after the session, is live at stop too.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LiveAtStop {
    /// The scope's name; `None` for allocations made outside any scope.
    pub scope: Option<&'static str>,
    /// Number of allocations live at stop.
    pub allocs: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl LiveAtStop {
    /// Groups the allocations of `trace` live at stop by scope, most bytes first; empty when
    /// the session did not track memory.
    #[must_use]
    pub fn of(trace: &Trace) -> Vec<LiveAtStop> {
        let Some(memory) = &trace.memory else {
            return Vec::new();
        };
        let mut by_scope: HashMap<Option<&'static str>, (u64, u64)> = HashMap::new();
        for alloc in memory.live_at_stop() {
            let entry = by_scope.entry(alloc.scope_name()).or_default();
            entry.0 += 1;
            // Saturating: a forged capture file may hold any size.
            entry.1 = entry.1.saturating_add(alloc.size);
        }
        Self::sorted(by_scope)
    }

    /// The groups `by_scope` (scope name: allocations, bytes), most bytes first.
    pub(crate) fn sorted<S: std::hash::BuildHasher>(
        by_scope: HashMap<Option<&'static str>, (u64, u64), S>,
    ) -> Vec<LiveAtStop> {
        let mut live: Vec<LiveAtStop> = by_scope
            .into_iter()
            .map(|(scope, (allocs, bytes))| LiveAtStop {
                scope,
                allocs,
                bytes,
            })
            .collect();
        live.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.scope.cmp(&b.scope)));
        live
    }
}
