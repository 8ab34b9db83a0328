//! What a thread counts of its allocations between two records ([`MemoryMode::Counts`]).

use std::cell::Cell;

use crate::record::event::RawEvent;
#[cfg(doc)]
use crate::record::memory::MemoryMode;

/// The allocations and frees a thread counted ([`MemoryMode::Counts`]) since its last record:
/// a few adds per allocation, no tick and no record. The first one parks the writer
/// ([`Writer::park`](crate::record::buffer::Writer::park)), so that the thread's next record,
/// whatever it is (a scope's entry or exit, above all), takes the slow path, which puts the
/// counts in first ([`flush_counted`](super::flush_counted)): they land before it, in the innermost scope open
/// while they happened. The scopes' fast path pays nothing for it.
pub(super) struct Counted {
    allocs: Cell<u64>,
    alloc_bytes: Cell<u64>,
    frees: Cell<u64>,
    freed_bytes: Cell<u64>,
    /// The most that `alloc_bytes - freed_bytes` (the bytes allocated net) rose to, never below
    /// 0.
    rise: Cell<u64>,
    /// Something is counted (and the writer parked).
    pub(super) any: Cell<bool>,
}

impl Counted {
    pub(super) const fn new() -> Self {
        Self {
            allocs: Cell::new(0),
            alloc_bytes: Cell::new(0),
            frees: Cell::new(0),
            freed_bytes: Cell::new(0),
            rise: Cell::new(0),
            any: Cell::new(false),
        }
    }

    /// Counts an allocation (or a free) of `size` bytes; the caller sets `any`. Plain adds:
    /// 2⁶⁴ bytes or allocations between two records of a thread are out of reach (an
    /// allocation size is below 2⁶³), so the net bytes are `alloc_bytes - freed_bytes`.
    #[inline(always)]
    pub(super) fn add(&self, alloc: bool, size: u64) {
        if alloc {
            self.allocs.set(self.allocs.get().wrapping_add(1));
            let bytes = self.alloc_bytes.get().wrapping_add(size);
            self.alloc_bytes.set(bytes);
            let net = bytes.wrapping_sub(self.freed_bytes.get()) as i64;
            if net > self.rise.get() as i64 {
                self.rise.set(net as u64);
            }
        } else {
            self.frees.set(self.frees.get().wrapping_add(1));
            self.freed_bytes
                .set(self.freed_bytes.get().wrapping_add(size));
        }
    }

    /// The three records of what was counted, and a fresh start; `None` when nothing was.
    pub(super) fn take(&self) -> Option<[RawEvent; 3]> {
        if !self.any.replace(false) {
            return None;
        }
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Some(RawEvent::memory_counts(
            (count(self.allocs.replace(0)), self.alloc_bytes.replace(0)),
            (count(self.frees.replace(0)), self.freed_bytes.replace(0)),
            self.rise.replace(0),
        ))
    }
}
