//! Integration tests on the mock clock (`tickscope::clock::use_mock_clock`), whose ticks are
//! nanoseconds, for exact times. The mock is process-wide and cannot be undone, so these tests
//! share one binary; they take `common::serial()` whenever they record, so they run one at a
//! time (the mock's value and the sessions of all threads are shared).
//!
//! The global allocator is `TrackingAlloc`, for the exports of memory events.

#[path = "../common/mod.rs"]
#[macro_use]
mod common;

#[global_allocator]
static ALLOC: tickscope::TrackingAlloc = tickscope::TrackingAlloc::new(std::alloc::System);

// Exact times: pairing of scopes, self and total times, counters, async calls, schedules.
mod counters;
mod exact_times;
mod pairing;
mod profile_async;
mod schedule;

// What a user reads: the table and insta snapshots.
mod snapshots;
mod table;

// Exports.
mod carry_hostile;
mod export;
mod html;
mod html_baseline;
mod html_pieces;
mod memory_hostile;
mod memory_pieces;
#[cfg(feature = "otlp")]
mod otlp;
#[cfg(feature = "otlp")]
mod otlp_carry;
mod perfetto;
mod pieces;
mod pieces_links;
mod pprof;

// Collectors beside a session.
mod collectors;

// The flight recorder.
mod flight;
