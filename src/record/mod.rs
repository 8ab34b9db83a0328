//! Recording: the hot path and everything it needs.
//!
//! `scope!` guards, callsites, argument records, links, async calls, the tracking allocator,
//! observers, per-thread state, chunked buffers, the chunk pool, and the registry of threads
//! and sessions. Nothing here imports from the stages after it (capture, decode, trace,
//! report, export): recording only stamps raw records into per-thread chunks.

pub mod buffer;
pub mod chunk;
pub mod event;
pub(crate) mod hash;
pub(crate) mod sync;

/// The crate's tests' pseudo-random numbers (xorshift from `seed`): each call gives the next
/// number below `n`, or all 64 bits for `n` 0.
#[cfg(test)]
pub(crate) fn test_random(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed | 1;
    move |n| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if n == 0 { state } else { state % n }
    }
}

not_under_loom! {
    pub(crate) mod alloc;
    pub(crate) mod args;
    pub(crate) mod callsite;
    pub(crate) mod counter;
    pub mod clock;
    pub(crate) mod flight;
    pub(crate) mod follows;
    pub(crate) mod link;
    pub(crate) mod memory;
    pub(crate) mod observe;
    pub(crate) mod pages;
    pub(crate) mod pool;
    pub(crate) mod registry;
    pub(crate) mod scope;
    pub(crate) mod task;
    pub(crate) mod thread;
    pub(crate) mod untracked;
    pub(crate) mod value;
}
