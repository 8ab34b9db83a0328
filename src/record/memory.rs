//! [`MemoryMode`]: what a session records of allocations.

use crate::record::event::RawKind;

/// What a session records of the allocations of the threads it records
/// ([`ProfilerBuilder::track_memory`](crate::ProfilerBuilder::track_memory)).
///
/// ```
/// use tickscope::MemoryMode;
///
/// assert_eq!(MemoryMode::from(true), MemoryMode::Timeline);
/// assert_eq!(MemoryMode::from(false), MemoryMode::Off);
/// assert!(MemoryMode::Counts.is_on() && !MemoryMode::Off.is_on());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum MemoryMode {
    /// Allocations are not recorded (the default).
    #[default]
    Off,
    /// Bytes and counts per scope (allocated, freed, self and total) and each scope's peak,
    /// without a time, an address or a record per allocation: a few thread-local adds each,
    /// put into the thread's buffer as three 16-byte records at its next record (a scope's
    /// entry or exit), where they belong to the innermost scope open while they happened. No
    /// memory timeline ([`MemoryTrace::events`](crate::trace::MemoryTrace::events) stays
    /// empty), so frees are not matched to allocations and nothing is live at stop.
    ///
    /// Counts of a thread go in at its next record, and those of the thread that stops the
    /// session (or takes a snapshot) when it does: a scope of another thread still open at
    /// stop misses what that thread allocated since its last record.
    Counts,
    /// Every allocation and free with its time, size and address (two 16-byte records and a
    /// clock read each): the per-scope figures of [`Counts`](MemoryMode::Counts), plus the
    /// memory timeline, frees matched to allocations across threads, and the memory live at
    /// stop.
    Timeline,
}

impl MemoryMode {
    /// True unless [`Off`](MemoryMode::Off).
    pub const fn is_on(self) -> bool {
        !matches!(self, Self::Off)
    }
}

/// `true` is [`MemoryMode::Timeline`] (what `track_memory(true)` always meant), `false`
/// [`MemoryMode::Off`].
impl From<bool> for MemoryMode {
    fn from(on: bool) -> Self {
        if on { Self::Timeline } else { Self::Off }
    }
}

impl MemoryMode {
    /// What a record of `kind` (its raw discriminant, as in captures) says the session
    /// recorded of allocations: [`Off`](Self::Off) for a record that is no allocation or free.
    pub(crate) const fn of_kind(kind: u32) -> Self {
        const ALLOC: u32 = RawKind::Alloc as u32;
        const FREE: u32 = RawKind::Free as u32;
        const ALLOC_COUNT: u32 = RawKind::AllocCount as u32;
        const FREE_COUNT: u32 = RawKind::FreeCount as u32;
        match kind {
            ALLOC | FREE => Self::Timeline,
            ALLOC_COUNT | FREE_COUNT => Self::Counts,
            _ => Self::Off,
        }
    }
}
