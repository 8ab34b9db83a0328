//! Allocations the profiler makes for itself, kept out of what it records.

use std::cell::Cell;

/// While alive, allocations of this thread are not recorded. The profiler holds one wherever
/// it takes a lock that recording an allocation may need (so that an allocation there cannot
/// deadlock or recurse) and while it post-processes (so that its own work is not reported).
#[must_use]
pub(crate) struct Untracked(());

impl Untracked {
    pub(crate) fn enter() -> Self {
        let _ = UNTRACKED.try_with(|n| n.set(n.get() + 1));
        Self(())
    }

    /// True while this thread holds an [`Untracked`] (or is tearing down).
    #[inline(always)]
    pub(crate) fn active() -> bool {
        UNTRACKED.try_with(|n| n.get() != 0).unwrap_or(true)
    }
}

impl Drop for Untracked {
    fn drop(&mut self) {
        let _ = UNTRACKED.try_with(|n| n.set(n.get() - 1));
    }
}

thread_local! {
    /// Nesting depth of this thread's [`Untracked`] guards; allocations are recorded only at 0.
    static UNTRACKED: Cell<u32> = const { Cell::new(0) };
}
