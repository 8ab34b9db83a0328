//! Recording: the hot path and everything it needs.
//!
//! `scope!` guards, callsites, argument records, links, async calls, the tracking allocator,
//! observers, per-thread state, chunked buffers, the chunk pool, and the registry of threads
//! and sessions. Nothing here imports from the stages after it (capture, decode, trace,
//! report, export): recording only stamps raw records into per-thread chunks.

#[cfg(not(loom))]
pub(crate) mod alloc;
#[cfg(not(loom))]
pub(crate) mod args;
pub mod buffer;
#[cfg(not(loom))]
pub(crate) mod callsite;
pub mod chunk;
#[cfg(not(loom))]
pub mod clock;
pub mod event;
#[cfg(not(loom))]
pub(crate) mod follows;
#[cfg(not(loom))]
pub(crate) mod link;
#[cfg(not(loom))]
pub(crate) mod observe;
#[cfg(not(loom))]
pub(crate) mod pool;
#[cfg(not(loom))]
pub(crate) mod registry;
#[cfg(not(loom))]
pub(crate) mod scope;
pub(crate) mod sync;
#[cfg(not(loom))]
pub(crate) mod task;
#[cfg(not(loom))]
pub(crate) mod thread;
#[cfg(not(loom))]
pub(crate) mod value;
