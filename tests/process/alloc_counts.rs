//! `MemoryMode::Counts`: per-scope bytes, counts and peaks without a timeline, equal to what
//! the timeline mode gives for the same program; the table says which mode it shows; captures
//! keep the mode.

use std::hint::black_box;
use std::pin::pin;
use std::task::Poll;

use tickscope::{Capture, MemoryMode, Profiler, profile, scope};

use crate::common::memory::{session, stats};
use crate::common::serial;

/// Nested scopes, a realloc, frees inside and outside scopes, and memory kept past the session.
fn workload() -> Vec<u8> {
    let _outer = scope!("outer");
    let a = black_box(Vec::<u8>::with_capacity(100));
    {
        let _inner = scope!("inner");
        let b = black_box(Vec::<u8>::with_capacity(200));
        let mut c = black_box(Vec::<u8>::with_capacity(50));
        c.reserve_exact(450);
        drop(b);
        drop(c);
    }
    let kept = black_box(Vec::<u8>::with_capacity(30));
    drop(a);
    kept
}

#[test]
fn counts_give_the_timeline_figures_without_events() {
    let _serial = serial();
    let mut figures = Vec::new();
    for mode in [MemoryMode::Counts, MemoryMode::Timeline] {
        let prof = session(mode);
        let kept = workload();
        prof.stop();
        drop(kept);
        let trace = prof.trace();
        let memory = trace.memory.as_ref().expect("memory tracked");
        assert_eq!(memory.mode, mode);
        assert_eq!(memory.events.is_empty(), mode == MemoryMode::Counts);
        assert_eq!(
            prof.report().live_at_stop.is_empty(),
            mode == MemoryMode::Counts
        );
        figures.push((stats(&prof, "outer"), stats(&prof, "inner")));
    }
    let (outer, inner) = figures[0];
    assert_eq!(figures[0], figures[1], "counts and timeline agree");
    // inner: alloc 200, alloc 50, realloc to 450 (free 50 + alloc 450), free 200, free 450;
    // at most 200 + 450 live.
    assert_eq!(
        inner,
        memory_stats! {
            allocs: 3,
            alloc_bytes: 700,
            frees: 3,
            freed_bytes: 700,
            self_allocs: 3,
            self_alloc_bytes: 700,
            self_frees: 3,
            self_freed_bytes: 700,
            peak_bytes: 650,
        }
    );
    // outer: its own 100 and 30 allocated, 100 freed; at most 100 + 650 above its entry.
    assert_eq!(
        outer,
        memory_stats! {
            allocs: 5,
            alloc_bytes: 830,
            frees: 4,
            freed_bytes: 800,
            self_allocs: 2,
            self_alloc_bytes: 130,
            self_frees: 1,
            self_freed_bytes: 100,
            peak_bytes: 750,
        }
    );
}

/// The stopping thread's counts go in before the window ends: a scope open at stop has them.
#[test]
fn a_scope_open_at_stop_has_its_counts() {
    let _serial = serial();
    let prof = session(MemoryMode::Counts);
    let g = scope!("open");
    let kept = black_box(Vec::<u8>::with_capacity(100));
    prof.stop();
    let open = stats(&prof, "open");
    assert_eq!(
        (open.allocs, open.alloc_bytes, open.peak_bytes),
        (1, 100, 100)
    );
    drop((g, kept));
}

/// A thread's counts go in at its next record: what it allocates between two scopes is its
/// parent's, whatever the allocation pattern.
#[test]
fn counts_between_scopes_belong_to_the_parent() {
    let _serial = serial();
    let prof = session(MemoryMode::Counts);
    {
        let _outer = scope!("outer");
        for i in 0..100usize {
            let v = black_box(Vec::<u8>::with_capacity(10 + i));
            {
                let _inner = scope!("inner");
                drop(black_box(Vec::<u8>::with_capacity(1)));
            }
            drop(v);
        }
    }
    prof.stop();
    let (outer, inner) = (stats(&prof, "outer"), stats(&prof, "inner"));
    assert_eq!(
        (inner.allocs, inner.alloc_bytes, inner.frees),
        (100, 100, 100)
    );
    // 10 + 11 + … + 109 = 5 950 bytes of its own.
    assert_eq!((outer.self_allocs, outer.self_alloc_bytes), (100, 5_950));
    assert_eq!((outer.allocs, outer.alloc_bytes), (200, 6_050));
    assert_eq!(
        outer.peak_bytes, 110,
        "the last block (109) and one inner byte"
    );
}

#[test]
fn the_table_names_the_mode() {
    let _serial = serial();
    let prof = session(MemoryMode::Counts);
    {
        let _g = scope!("fill");
        drop(black_box(Vec::<u8>::with_capacity(64)));
    }
    prof.stop();
    let table = prof.table().to_string();
    assert!(table.contains("Self alloc"), "{table}");
    assert!(table.contains("\nMemory: counted per scope"), "{table}");
    assert!(!table.contains("Live at stop"), "{table}");

    let prof = session(true);
    drop(black_box(Vec::<u8>::with_capacity(64)));
    prof.stop();
    assert!(prof.table().to_string().contains("\nMemory: timeline"));

    let prof = session(MemoryMode::Off);
    prof.stop();
    assert!(!prof.table().to_string().contains("Memory:"));
}

#[test]
fn a_counting_session_beside_a_timeline_session_keeps_its_view() {
    let _serial = serial();
    let timeline = session(MemoryMode::Timeline);
    let counts = session(MemoryMode::Counts);
    {
        let _g = scope!("both");
        drop(black_box(Vec::<u8>::with_capacity(128)));
    }
    counts.stop();
    timeline.stop();
    for (prof, events) in [(&counts, 0), (&timeline, 2)] {
        let both = stats(prof, "both");
        assert_eq!((both.allocs, both.alloc_bytes, both.frees), (1, 128, 1));
        let trace = prof.trace();
        let memory = trace.memory.as_ref().unwrap();
        let sized = memory.events.iter().filter(|e| e.size == 128).count();
        assert_eq!(sized, events);
    }
}

#[test]
fn captures_keep_the_mode_and_the_figures() {
    let _serial = serial();
    let prof = session(MemoryMode::Counts);
    let kept = workload();
    prof.stop();
    drop(kept);
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    let read = Capture::from_bytes(&bytes).unwrap().remove(0);
    assert_eq!(read.memory_mode(), MemoryMode::Counts);
    let trace = read.decode();
    assert_eq!(
        trace.memory.as_ref().map(|m| m.mode),
        Some(MemoryMode::Counts)
    );
    let report = tickscope::report::Report::new(&trace);
    for name in ["outer", "inner"] {
        assert_eq!(report.get(name).unwrap().memory, Some(stats(&prof, name)));
    }
}

#[profile]
async fn buffered() -> usize {
    let first = black_box(Vec::<u8>::with_capacity(40));
    crate::common::YieldOnce::default().await;
    let second = black_box(Vec::<u8>::with_capacity(60));
    first.capacity() + second.capacity()
}

#[test]
fn an_async_call_counts_what_its_polls_allocated() {
    let _serial = serial();
    let prof = session(MemoryMode::Counts);
    {
        let mut fut = pin!(buffered());
        assert!(crate::common::poll_once(fut.as_mut()).is_pending());
        assert_eq!(crate::common::poll_once(fut.as_mut()), Poll::Ready(100));
    }
    prof.stop();
    let call = stats(&prof, "buffered");
    assert_eq!((call.allocs, call.alloc_bytes), (2, 100));
    assert_eq!((call.frees, call.freed_bytes), (2, 100));
}

/// Threads allocate and free in scopes at once: every thread's counts are exact.
#[test]
fn threads_count_their_own_exactly() {
    let _serial = serial();
    let prof = Profiler::builder().track_memory(MemoryMode::Counts).start();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                for i in 0..500u64 {
                    let _g = scope!("work");
                    drop(black_box(Vec::<u8>::with_capacity(
                        (8 + t * 8 + i % 3) as usize,
                    )));
                }
            });
        }
    });
    prof.stop();
    let work = stats(&prof, "work");
    // Per thread: 500 blocks of 8 + 8t + (i mod 3) bytes; i mod 3 sums to 499 over 0..500.
    let bytes: u64 = (0..2).map(|t| 500 * (8 + t * 8) + 499).sum();
    assert_eq!((work.allocs, work.alloc_bytes), (1000, bytes));
    assert_eq!((work.frees, work.freed_bytes), (1000, bytes));
    assert_eq!(prof.report().get("work").unwrap().calls, 1000);
}
