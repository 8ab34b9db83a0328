//! Helpers shared by the memory-tracking tests (the binaries that hold them install
//! `TrackingAlloc` as their global allocator).
#![allow(dead_code)]

/// A [`MemoryStats`] with these figures and 0 for the others (the struct is
/// `#[non_exhaustive]`: built from its default, field by field).
#[allow(unused_macros)] // not every test that includes this file builds figures
macro_rules! memory_stats {
    ($($field:ident: $value:expr),* $(,)?) => {{
        let mut stats = tickscope::trace::MemoryStats::default();
        $(stats.$field = $value;)*
        stats
    }};
}

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
