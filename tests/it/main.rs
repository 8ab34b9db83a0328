//! Integration tests on the real clock that may run beside each other: every session here
//! records its own threads (`current_thread`, `Threads::Joined`) and nothing reads what the
//! whole process shares, so the harness runs them in parallel and none takes
//! `common::serial()`. (What needs the process to itself is in `tests/process`, what needs
//! the mock clock in `tests/mock`.)
//!
//! One binary, one global allocator: `TrackingAlloc` (the memory tests) over the counting
//! allocator of `capture_file` (what reading and decoding allocate, per thread).

#[path = "../common/mod.rs"]
#[macro_use]
mod common;

#[cfg(feature = "enabled")]
#[global_allocator]
static ALLOC: tickscope::TrackingAlloc<capture_file::Counting> =
    tickscope::TrackingAlloc::new(capture_file::Counting);
#[cfg(not(feature = "enabled"))]
#[global_allocator]
static ALLOC: tickscope::TrackingAlloc = tickscope::TrackingAlloc::new(std::alloc::System);

// Sessions and what they record.
mod args;
mod links;
mod observe;
mod profile;
mod sessions;

// Memory tracking.
mod alloc;
mod alloc_counts_states;

// Capture files, exports written to files, the summary table.
mod capture_file;
mod files;
mod gzip_and_kineto;
mod origins;
mod packed;
mod table_summary;

// Plug-ins and C code.
#[cfg(feature = "native")]
mod native;
mod plugin_examples;
mod plugins;

// The `tracing` bridge.
#[cfg(feature = "tracing")]
mod tracing_bridge;

// The pipeline's ranks in `src/`.
mod layers;
