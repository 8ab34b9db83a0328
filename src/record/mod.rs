//! Recording: the hot path and everything it needs.
//!
//! `scope!` guards, callsites, argument records, links, async calls, the tracking allocator,
//! observers, per-thread state, chunked buffers, the chunk pool, and the registry of threads
//! and sessions. Nothing here imports from the stages after it (capture, decode, trace,
//! report, export): recording only stamps raw records into per-thread chunks.

pub mod buffer;
pub mod chunk;
pub mod dry;
pub mod event;
#[cfg(not(loom))]
pub(crate) mod hash;
pub(crate) mod sync;
pub mod word;

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

#[cfg(not(loom))]
pub(crate) mod alloc;
#[cfg(not(loom))]
pub(crate) mod args;
#[cfg(not(loom))]
pub(crate) mod async_span;
#[cfg(not(loom))]
pub(crate) mod callsite;
#[cfg(not(loom))]
pub mod clock;
#[cfg(not(loom))]
pub(crate) mod counter;
#[cfg(not(loom))]
pub(crate) mod flight;
#[cfg(not(loom))]
pub(crate) mod follows;
#[cfg(not(loom))]
pub(crate) mod link;
#[cfg(not(loom))]
pub(crate) mod memory;
#[cfg(not(loom))]
pub(crate) mod observe;
#[cfg(not(loom))]
pub(crate) mod pages;
#[cfg(not(loom))]
pub(crate) mod pool;
#[cfg(not(loom))]
pub(crate) mod registry;
#[cfg(not(loom))]
pub(crate) mod scope;
#[cfg(not(loom))]
pub(crate) mod thread;
#[cfg(not(loom))]
pub(crate) mod untracked;
#[cfg(not(loom))]
pub(crate) mod value;
