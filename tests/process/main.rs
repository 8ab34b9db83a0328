//! Integration tests on the real clock that need the process to themselves: sessions of all
//! threads (they see every thread's scopes), the global chunk counters, resident memory. Every
//! test that records in this process takes `common::serial()`, so they run one at a time (the
//! streams' tests that only read what a child process wrote do not).
//!
//! The global allocator is `TrackingAlloc`, for the memory-counting tests.

#[path = "../common/mod.rs"]
#[macro_use]
mod common;

#[global_allocator]
static ALLOC: tickscope::TrackingAlloc = tickscope::TrackingAlloc::new(std::alloc::System);

// Memory: counts of all threads, chunks recycled, resident memory with plug-ins.
mod alloc_counts;
mod plugin_restart;
mod recycling;

// Sessions of all threads.
mod flight_async;
mod threads;

// Streaming sessions (live chunk counts, the flight recorder's scanner paused).
mod stream;

// Attaching to this process: one listening session per process.
#[cfg(unix)]
mod attach;
