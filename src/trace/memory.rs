//! What a trace holds of memory: per-scope figures ([`MemoryStats`]) and every allocation
//! and free ([`MemoryTrace`]).

use crate::record::callsite::Callsite;
use crate::record::memory::MemoryMode;

#[cfg(doc)]
use super::{ThreadTrace, Trace};

/// What a scope (one span, or a report row summing its calls) allocated and freed on its own
/// thread, recorded by [`TrackingAlloc`](crate::TrackingAlloc).
///
/// The plain fields include child scopes; the `self_` ones count what happened while the scope
/// itself was the innermost open scope. Recursive scopes count every level in the totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MemoryStats {
    /// Allocations, child scopes included.
    pub allocs: u64,
    /// Bytes allocated, child scopes included.
    pub alloc_bytes: u64,
    /// Frees, child scopes included (of any memory, also memory allocated elsewhere).
    pub frees: u64,
    /// Bytes freed, child scopes included.
    pub freed_bytes: u64,
    /// Allocations while the scope was the innermost one.
    pub self_allocs: u64,
    /// Bytes allocated while the scope was the innermost one.
    pub self_alloc_bytes: u64,
    /// Frees while the scope was the innermost one.
    pub self_frees: u64,
    /// Bytes freed while the scope was the innermost one.
    pub self_freed_bytes: u64,
    /// The most that bytes allocated minus bytes freed on the scope's thread rose above its
    /// value at entry while the scope was open (the largest over calls, in a report row).
    pub peak_bytes: u64,
}

impl MemoryStats {
    /// Adds another call's (or span's) figures: sums, and the larger peak.
    pub fn add(&mut self, other: &Self) {
        self.add_totals(other.totals());
        let [allocs, alloc_bytes, frees, freed_bytes] = other.own();
        self.self_allocs = self.self_allocs.saturating_add(allocs);
        self.self_alloc_bytes = self.self_alloc_bytes.saturating_add(alloc_bytes);
        self.self_frees = self.self_frees.saturating_add(frees);
        self.self_freed_bytes = self.self_freed_bytes.saturating_add(freed_bytes);
        self.peak_bytes = self.peak_bytes.max(other.peak_bytes);
    }

    /// Allocations, bytes allocated, frees, bytes freed: child scopes included.
    pub(crate) fn totals(&self) -> [u64; 4] {
        [self.allocs, self.alloc_bytes, self.frees, self.freed_bytes]
    }

    /// The same four, the scope's own.
    pub(crate) fn own(&self) -> [u64; 4] {
        [
            self.self_allocs,
            self.self_alloc_bytes,
            self.self_frees,
            self.self_freed_bytes,
        ]
    }

    pub(crate) fn add_totals(&mut self, [allocs, alloc_bytes, frees, freed_bytes]: [u64; 4]) {
        // Saturating: a forged capture file may hold any size.
        self.allocs = self.allocs.saturating_add(allocs);
        self.alloc_bytes = self.alloc_bytes.saturating_add(alloc_bytes);
        self.frees = self.frees.saturating_add(frees);
        self.freed_bytes = self.freed_bytes.saturating_add(freed_bytes);
    }
}

/// An allocation or a free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Memory was allocated (or a `realloc` returned it).
    Alloc,
    /// Memory was freed (or a `realloc` moved or resized it).
    Free,
}

/// One allocation or free of a session that tracked memory.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MemoryEvent {
    /// When, ns since the Unix epoch.
    pub ns: u64,
    /// The process it happened in: its index in [`Trace::processes`].
    pub process: u32,
    /// The thread it happened on (a thread id of that process).
    pub thread: u64,
    /// The innermost open scope at the time: its index in the thread's spans, and its callsite.
    pub span: Option<(u32, &'static Callsite)>,
    /// Allocation or free.
    pub kind: MemoryKind,
    /// Size in bytes, as the allocator was told.
    pub size: u64,
    /// Address of the block.
    pub address: u64,
    /// For an allocation, the index (in [`MemoryTrace::events`]) of the free that released it,
    /// on whichever thread; `None` while it was still live at the end of the window. For a
    /// free, the index of the allocation it released; `None` when that allocation happened
    /// before the window or on a thread the session did not record.
    pub matched: Option<u32>,
}

impl MemoryEvent {
    /// The innermost open scope's name, if any.
    pub fn scope_name(&self) -> Option<&'static str> {
        self.span.map(|(_, callsite)| callsite.name())
    }
}

/// Every allocation and free of the window, all threads (of every process), in time order.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct MemoryTrace {
    /// Allocations and frees in time order (frees are stamped before the memory goes back to
    /// the allocator, allocations after they return, so reuse of an address orders right).
    /// Empty when memory was only counted ([`MemoryMode::Counts`]).
    pub events: Vec<MemoryEvent>,
    /// What the session recorded: [`MemoryMode::Timeline`] (every event above) or
    /// [`MemoryMode::Counts`] (per-scope figures in [`ThreadTrace::memory`] only). In a trace
    /// of several processes, the most any of them recorded.
    pub mode: MemoryMode,
}

impl MemoryTrace {
    /// Process-wide live bytes after each event (same indices as `events`): bytes allocated
    /// in the window and not yet freed, wherever they are freed, by the event's process (in a
    /// trace of several processes, each counts its own).
    pub fn live_bytes(&self) -> Vec<u64> {
        // Per process: a trace of one process has one counter.
        let mut live: Vec<u64> = Vec::new();
        self.events
            .iter()
            .map(|e| {
                let p = e.process as usize;
                if p >= live.len() {
                    live.resize(p + 1, 0);
                }
                let live = &mut live[p];
                match (e.kind, e.matched) {
                    (MemoryKind::Alloc, _) => *live = live.saturating_add(e.size),
                    (MemoryKind::Free, Some(alloc)) => {
                        *live = live.saturating_sub(self.events[alloc as usize].size);
                    }
                    (MemoryKind::Free, None) => {}
                }
                *live
            })
            .collect()
    }

    /// Allocations of the window still live at its end.
    pub fn live_at_stop(&self) -> impl Iterator<Item = &MemoryEvent> {
        self.events
            .iter()
            .filter(|e| e.kind == MemoryKind::Alloc && e.matched.is_none())
    }
}
