//! `MemoryMode::Counts` through every change of a thread's counting state: the allocator's
//! fast path compares one thread-local word with the memory generation, so a session starting
//! or stopping while the thread counts, the profiler's own allocations inside a counting
//! session, a thread that registers during one, and two sessions at once must each switch it
//! on and off at the right allocation. Figures are exact and compared with the timeline mode
//! where both apply.

use std::hint::black_box;

use tickscope::{MemoryMode, Profiler, scope};

use crate::common::memory::{session, stats};

/// `(allocs, alloc_bytes, frees, freed_bytes)` of a scope, children included.
fn totals(prof: &Profiler, name: &str) -> (u64, u64, u64, u64) {
    let s = stats(prof, name);
    (s.allocs, s.alloc_bytes, s.frees, s.freed_bytes)
}

/// Allocates and frees `bytes` once inside a scope named `name`.
fn churn(name: &'static str, bytes: usize) {
    let _g = scope!(name = name);
    drop(black_box(Vec::<u8>::with_capacity(bytes)));
}

/// A second counting session starts and stops while the thread counts for the first: each
/// sees exactly what ran in its window, and the thread keeps counting for the first after the
/// second stops.
#[test]
fn a_session_starting_and_stopping_while_the_thread_counts() {
    let first = session(MemoryMode::Counts);
    churn("before", 100);
    let second = session(MemoryMode::Counts);
    churn("during", 200);
    second.stop();
    churn("after", 300);
    first.stop();
    for (name, bytes) in [("before", 100), ("during", 200), ("after", 300)] {
        assert_eq!(totals(&first, name), (1, bytes, 1, bytes), "{name}");
    }
    assert_eq!(totals(&second, "during"), (1, 200, 1, 200));
    assert!(second.report().get("before").is_none());
    assert!(second.report().get("after").is_none());

    // Stopped: nothing is counted, and a later session counts only its own.
    drop(black_box(Vec::<u8>::with_capacity(400)));
    let third = session(MemoryMode::Counts);
    churn("third", 500);
    third.stop();
    assert_eq!(totals(&third, "third"), (1, 500, 1, 500));
}

/// A timeline session starting while the thread counts switches it to the timeline (every
/// allocation an event) and its end back to counting, without losing one allocation.
#[test]
fn a_timeline_session_in_the_middle_of_counting() {
    let counts = session(MemoryMode::Counts);
    churn("counted", 64);
    let timeline = session(MemoryMode::Timeline);
    churn("both", 128);
    timeline.stop();
    churn("counted_again", 256);
    counts.stop();
    assert_eq!(totals(&counts, "counted"), (1, 64, 1, 64));
    assert_eq!(totals(&counts, "both"), (1, 128, 1, 128));
    assert_eq!(totals(&counts, "counted_again"), (1, 256, 1, 256));
    assert_eq!(totals(&timeline, "both"), (1, 128, 1, 128));
    let trace = timeline.trace();
    let memory = trace.memory.as_ref().expect("memory tracked");
    let sizes: Vec<u64> = memory.events.iter().map(|e| e.size).collect();
    assert_eq!(sizes, [128, 128], "one allocation and its free");
    assert!(counts.trace().memory.as_ref().unwrap().events.is_empty());
}

/// The profiler's own allocations (a snapshot decodes and builds a trace while the scope is
/// open) are not counted, and the thread counts again right after them.
#[test]
fn the_profilers_own_allocations_inside_counting_are_left_out() {
    let prof = session(MemoryMode::Counts);
    let snapshot;
    {
        let _g = scope!("around_snapshot");
        let a = black_box(Vec::<u8>::with_capacity(100));
        snapshot = prof.trace();
        let b = black_box(Vec::<u8>::with_capacity(50));
        drop((a, b));
    }
    prof.stop();
    assert_eq!(totals(&prof, "around_snapshot"), (2, 150, 2, 150));
    assert_eq!(stats(&prof, "around_snapshot").peak_bytes, 150);
    drop(snapshot);
}

/// The same program in both modes gives the same figures with the profiler's own work in the
/// middle of it.
#[test]
fn counts_and_timeline_agree_around_the_profilers_own_work() {
    let mut figures = Vec::new();
    for mode in [MemoryMode::Counts, MemoryMode::Timeline] {
        let prof = session(mode);
        let kept = {
            let _outer = scope!("outer");
            let mut v = black_box(Vec::<u8>::with_capacity(10));
            let snapshot = prof.trace();
            v.reserve_exact(90);
            let w = black_box(Vec::<u8>::with_capacity(7));
            drop(v);
            (w, snapshot)
        };
        prof.stop();
        // (The snapshot differs between the modes: it is freed outside the session.)
        drop(kept);
        figures.push(stats(&prof, "outer"));
    }
    assert_eq!(figures[0], figures[1]);
}

/// A thread that was never registered registers inside a counting session: its allocations
/// before it joins are not counted, those after it are, exactly.
#[test]
fn a_thread_that_was_never_registered() {
    let prof = session(MemoryMode::Counts);
    std::thread::scope(|s| {
        s.spawn(|| {
            churn("not_joined", 1_000);
            prof.join_current_thread();
            churn("joined", 2_000);
            {
                let _g = scope!("grows");
                let mut v: Vec<u8> = Vec::with_capacity(8);
                for _ in 0..3 {
                    v.reserve_exact(v.capacity() * 2);
                }
                drop(black_box(v));
            }
        })
        .join()
        .expect("the thread ran");
    });
    prof.stop();
    assert!(prof.report().get("not_joined").is_none());
    assert_eq!(totals(&prof, "joined"), (1, 2_000, 1, 2_000));
    // 8, then reallocs to 16, 32 and 64 (a free and an allocation each), then the free of 64.
    assert_eq!(totals(&prof, "grows"), (4, 120, 4, 120));
    // A realloc counts the free of the old block first: at most 64 bytes live.
    assert_eq!(stats(&prof, "grows").peak_bytes, 64);
}

/// Two counting sessions of the same thread, one's window inside the other's: each counts
/// what ran in its own window.
#[test]
fn two_counting_sessions_nested() {
    let outer = session(MemoryMode::Counts);
    churn("outer_only", 10);
    let inner = session(MemoryMode::Counts);
    {
        let _b = scope!("both");
        churn("both_child", 20);
        drop(black_box(Vec::<u8>::with_capacity(40)));
    }
    inner.stop();
    churn("outer_again", 30);
    outer.stop();
    for prof in [&outer, &inner] {
        assert_eq!(totals(prof, "both"), (2, 60, 2, 60));
        assert_eq!(totals(prof, "both_child"), (1, 20, 1, 20));
        let both = stats(prof, "both");
        assert_eq!((both.self_allocs, both.self_alloc_bytes), (1, 40));
    }
    assert_eq!(totals(&outer, "outer_only"), (1, 10, 1, 10));
    assert_eq!(totals(&outer, "outer_again"), (1, 30, 1, 30));
    assert!(inner.report().get("outer_only").is_none());
    assert!(inner.report().get("outer_again").is_none());
}
