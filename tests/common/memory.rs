//! Helpers shared by the memory-tracking tests (the binaries that hold them install
//! `TrackingAlloc` as their global allocator).
#![allow(dead_code)]

use tickscope::trace::MemoryStats;
use tickscope::{MemoryMode, Profiler};

/// A session of the current thread that tracks memory in `mode`.
pub fn session(mode: impl Into<MemoryMode>) -> Profiler {
    Profiler::builder()
        .current_thread()
        .track_memory(mode)
        .start()
}

/// The memory figures of the row `name` in `prof`'s report.
pub fn stats(prof: &Profiler, name: &str) -> MemoryStats {
    let report = prof.report();
    let row = report.get(name).unwrap_or_else(|| panic!("no row {name}"));
    row.memory.expect("memory tracked")
}
