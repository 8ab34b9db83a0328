//! Allocations the profiler makes for itself, kept out of what it records; and the word that
//! arms the allocator's counting fast path, which must be off while they are made.

use std::cell::Cell;

/// While alive, allocations of this thread are not recorded. The profiler holds one wherever
/// it takes a lock that recording an allocation may need (so that an allocation there cannot
/// deadlock or recurse) and while it post-processes (so that its own work is not reported).
///
/// Entering one disarms the thread's counting fast path ([`armed`] reads 0) and leaving the
/// outermost arms it again, so that the allocator's counting path needs no check of its own
/// for it.
#[must_use]
pub(crate) struct Untracked(());

impl Untracked {
    pub(crate) fn enter() -> Self {
        let _ = STATE.try_with(|state| {
            state.depth.set(state.depth.get() + 1);
            state.armed.set(0);
        });
        Self(())
    }

    /// True while this thread holds an [`Untracked`] (or is tearing down).
    #[inline(always)]
    pub(crate) fn active() -> bool {
        STATE
            .try_with(|state| state.depth.get() != 0)
            .unwrap_or(true)
    }
}

impl Drop for Untracked {
    fn drop(&mut self) {
        let _ = STATE.try_with(|state| {
            let depth = state.depth.get() - 1;
            state.depth.set(depth);
            if depth == 0 {
                state.armed.set(state.counting_at.get());
            }
        });
    }
}

/// Sets the memory generation for which this thread counts its allocations
/// ([`MemoryMode::Counts`](crate::MemoryMode::Counts)), 0 for none: [`armed`] returns it while
/// the thread holds no [`Untracked`].
pub(crate) fn set_counting(generation: u64) {
    let _ = STATE.try_with(|state| {
        state.counting_at.set(generation);
        let outside = state.depth.get() == 0;
        state.armed.set(if outside { generation } else { 0 });
    });
}

/// The counting fast path's one check: the memory generation for which this thread counts its
/// allocations while it holds no [`Untracked`], 0 otherwise. The allocator compares it with
/// the current memory generation, so a session that starts or stops disarms it without
/// touching this thread. One thread-pointer-relative load.
#[inline(always)]
pub(crate) fn armed() -> u64 {
    STATE.try_with(|state| state.armed.get()).unwrap_or(0)
}

/// This thread's [`Untracked`] depth and counting state. `const`-initialised and without
/// `Drop`: reaching it is a plain thread-pointer-relative access, never refused.
struct State {
    /// Nesting depth of this thread's [`Untracked`] guards; allocations are recorded only at 0.
    depth: Cell<u32>,
    /// See [`set_counting`].
    counting_at: Cell<u64>,
    /// `counting_at` while `depth` is 0, else 0 (see [`armed`]).
    armed: Cell<u64>,
}

thread_local! {
    static STATE: State = const {
        State {
            depth: Cell::new(0),
            counting_at: Cell::new(0),
            armed: Cell::new(0),
        }
    };
}
