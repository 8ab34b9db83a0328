//! Allocation tracking through `TrackingAlloc`: exact bytes per scope, nesting, frees on other
//! threads, realloc, the memory live at stop, and sessions that do not track memory.

use std::hint::black_box;
use std::pin::pin;
use std::task::Poll;

use tickscope::trace::MemoryKind;
use tickscope::{Profiler, profile, scope};

use crate::common::memory::stats;

fn memory_session() -> Profiler {
    Profiler::builder()
        .current_thread()
        .track_memory(true)
        .start()
}

#[test]
fn vec_with_capacity_is_counted_in_its_scope() {
    let prof = memory_session();
    let kept = {
        let _g = scope!("fill");
        black_box(Vec::<u8>::with_capacity(1000))
    };
    drop(kept);
    prof.stop();
    let fill = stats(&prof, "fill");
    assert_eq!((fill.allocs, fill.alloc_bytes), (1, 1000));
    assert_eq!((fill.self_allocs, fill.self_alloc_bytes), (1, 1000));
    assert_eq!((fill.frees, fill.freed_bytes), (0, 0));
    assert_eq!(fill.peak_bytes, 1000);
    // The free happened outside any scope, and matched the allocation.
    let trace = prof.trace();
    let memory = trace.memory.as_ref().unwrap();
    let events: Vec<_> = memory
        .events
        .iter()
        .filter(|e| e.size == 1000)
        .map(|e| (e.kind, e.scope_name(), e.matched.is_some()))
        .collect();
    assert_eq!(
        events,
        [
            (MemoryKind::Alloc, Some("fill"), true),
            (MemoryKind::Free, None, true)
        ]
    );
    assert!(prof.report().live_at_stop.is_empty());
}

#[test]
fn nested_scopes_split_self_and_total() {
    let prof = memory_session();
    {
        let _outer = scope!("outer");
        let a = black_box(Vec::<u8>::with_capacity(100));
        {
            let _inner = scope!("inner");
            let b = black_box(Vec::<u8>::with_capacity(200));
            let c = black_box(Vec::<u8>::with_capacity(50));
            drop(b);
            drop(c);
        }
        drop(a);
    }
    prof.stop();
    let outer = stats(&prof, "outer");
    let inner = stats(&prof, "inner");
    assert_eq!(
        inner,
        memory_stats! {
            allocs: 2,
            alloc_bytes: 250,
            frees: 2,
            freed_bytes: 250,
            self_allocs: 2,
            self_alloc_bytes: 250,
            self_frees: 2,
            self_freed_bytes: 250,
            peak_bytes: 250,
        }
    );
    assert_eq!(
        outer,
        memory_stats! {
            allocs: 3,
            alloc_bytes: 350,
            frees: 3,
            freed_bytes: 350,
            self_allocs: 1,
            self_alloc_bytes: 100,
            self_frees: 1,
            self_freed_bytes: 100,
            peak_bytes: 350,
        }
    );
}

#[test]
fn calls_are_summed_and_peak_is_the_largest_call() {
    let prof = memory_session();
    for size in [10usize, 30, 20] {
        let _g = scope!("call");
        drop(black_box(Vec::<u8>::with_capacity(size)));
    }
    prof.stop();
    let report = prof.report();
    let row = report.get("call").unwrap();
    assert_eq!(row.calls, 3);
    let m = row.memory.unwrap();
    assert_eq!(
        (m.allocs, m.alloc_bytes, m.frees, m.freed_bytes),
        (3, 60, 3, 60)
    );
    assert_eq!(m.peak_bytes, 30);
}

#[test]
fn a_free_on_another_thread_is_matched() {
    let prof = memory_session();
    let data = {
        let _g = scope!("produce");
        black_box(vec![7u8; 4096])
    };
    let consumer = {
        let prof = prof.clone();
        std::thread::spawn(move || {
            prof.join_current_thread();
            let _g = scope!("consume");
            drop(data);
        })
    };
    consumer.join().unwrap();
    prof.stop();
    let produce = stats(&prof, "produce");
    assert_eq!(
        (produce.allocs, produce.alloc_bytes, produce.frees),
        (1, 4096, 0)
    );
    let consume = stats(&prof, "consume");
    assert_eq!(
        (consume.allocs, consume.frees, consume.freed_bytes),
        (0, 1, 4096)
    );

    let trace = prof.trace();
    let memory = trace.memory.as_ref().unwrap();
    let alloc = memory
        .events
        .iter()
        .position(|e| e.kind == MemoryKind::Alloc && e.size == 4096)
        .unwrap();
    let free = memory.events[alloc].matched.expect("matched") as usize;
    let (a, f) = (&memory.events[alloc], &memory.events[free]);
    assert_eq!(f.kind, MemoryKind::Free);
    assert_eq!(f.matched, Some(alloc as u32));
    assert_eq!(
        (a.scope_name(), f.scope_name()),
        (Some("produce"), Some("consume"))
    );
    assert_ne!(a.thread, f.thread);
    assert_eq!(a.address, f.address);
    // Live bytes go up by 4096 at the allocation and back down at the free.
    let live = memory.live_bytes();
    assert_eq!(live[free] + 4096, live[free - 1]);
    assert!(
        prof.report()
            .live_at_stop
            .iter()
            .all(|l| l.scope != Some("produce"))
    );
}

#[test]
fn realloc_growth_is_counted_as_the_allocator_saw_it() {
    let prof = memory_session();
    {
        let _g = scope!("grow");
        let mut v: Vec<u8> = Vec::with_capacity(16);
        v.reserve_exact(1000);
        assert_eq!(v.capacity(), 1000);
        drop(black_box(v));
    }
    prof.stop();
    let grow = stats(&prof, "grow");
    // alloc 16; realloc = free 16 + alloc 1000; free 1000.
    assert_eq!((grow.allocs, grow.alloc_bytes), (2, 1016));
    assert_eq!((grow.frees, grow.freed_bytes), (2, 1016));
    assert_eq!(grow.peak_bytes, 1000);
}

/// A realloc that fails leaves the old block allocated: nothing was freed or allocated, so no
/// count may change (issue 13, defect 8).
#[test]
fn a_failed_realloc_changes_no_count() {
    let prof = memory_session();
    let kept = {
        let _g = scope!("try_grow");
        let mut v: Vec<u8> = Vec::with_capacity(16);
        // 4 EiB: past any address space, so the allocator's realloc returns null.
        assert!(v.try_reserve(1 << 62).is_err());
        assert_eq!(v.capacity(), 16);
        black_box(v)
    };
    prof.stop();
    let grow = stats(&prof, "try_grow");
    assert_eq!(
        grow,
        memory_stats! {
            allocs: 1,
            alloc_bytes: 16,
            frees: 0,
            freed_bytes: 0,
            self_allocs: 1,
            self_alloc_bytes: 16,
            self_frees: 0,
            self_freed_bytes: 0,
            peak_bytes: 16,
        }
    );
    let trace = prof.trace();
    let memory = trace.memory.as_ref().unwrap();
    let events: Vec<_> = memory
        .events
        .iter()
        .filter(|e| e.scope_name() == Some("try_grow"))
        .map(|e| (e.kind, e.size, e.matched.is_some()))
        .collect();
    assert_eq!(events, [(MemoryKind::Alloc, 16, false)]);
    assert_eq!(memory.live_bytes().last(), Some(&16));
    let live: Vec<_> = prof
        .report()
        .live_at_stop
        .iter()
        .map(|l| (l.scope, l.allocs, l.bytes))
        .collect();
    assert_eq!(live, [(Some("try_grow"), 1, 16)]);
    drop(kept);
}

#[test]
fn memory_still_live_at_stop_is_listed_by_scope() {
    let prof = memory_session();
    let kept = {
        let _g = scope!("cache");
        black_box((Vec::<u8>::with_capacity(300), Vec::<u8>::with_capacity(200)))
    };
    let loose = black_box(Vec::<u64>::with_capacity(8));
    prof.stop();
    let report = prof.report();
    let live: Vec<_> = report
        .live_at_stop
        .iter()
        .map(|l| (l.scope, l.allocs, l.bytes))
        .collect();
    assert_eq!(live, [(Some("cache"), 2, 500), (None, 1, 64)]);
    let table = prof.table().to_string();
    assert!(
        table.contains("Live at stop (allocated in the window, not freed):\n  cache"),
        "{table}"
    );
    assert!(table.contains("Self alloc"), "{table}");
    drop((kept, loose));
}

#[test]
fn sessions_without_memory_tracking_see_no_allocations() {
    let prof = Profiler::builder().current_thread().start();
    {
        let _g = scope!("plain");
        drop(black_box(Vec::<u8>::with_capacity(64)));
    }
    prof.stop();
    assert!(prof.trace().memory.is_none());
    assert_eq!(prof.report().get("plain").unwrap().memory, None);
    assert!(!prof.table().to_string().contains("Alloc"));
}

#[test]
fn a_plain_session_beside_a_memory_session_keeps_its_view() {
    let memory = memory_session();
    let plain = Profiler::builder().current_thread().start();
    {
        let _g = scope!("both");
        drop(black_box(Vec::<u8>::with_capacity(128)));
    }
    plain.stop();
    memory.stop();
    assert!(plain.trace().memory.is_none());
    let both = stats(&memory, "both");
    assert_eq!((both.allocs, both.alloc_bytes), (1, 128));
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
    let prof = memory_session();
    {
        let mut fut = pin!(buffered());
        assert!(crate::common::poll_once(fut.as_mut()).is_pending());
        assert_eq!(crate::common::poll_once(fut.as_mut()), Poll::Ready(100));
    }
    prof.stop();
    let call = stats(&prof, "buffered");
    assert_eq!((call.allocs, call.alloc_bytes), (2, 100));
    assert_eq!((call.frees, call.freed_bytes), (2, 100));
    assert_eq!(prof.report().get("buffered").unwrap().calls, 1);
}

/// Threads allocate in scopes and hand every block to the next thread, which frees it:
/// every allocation is matched to a free on another thread, addresses are reused across
/// threads throughout, and the counts are exact.
#[test]
fn stress_cross_thread_frees_match_exactly() {
    const THREADS: usize = 4;
    const BLOCKS: usize = 5_000;
    let prof = memory_session();
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|_| std::sync::mpsc::sync_channel::<Vec<u8>>(64))
        .unzip();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
    let workers: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(i, rx)| {
            let next = senders[(i + 1) % THREADS].clone();
            let (prof, barrier) = (prof.clone(), barrier.clone());
            std::thread::spawn(move || {
                prof.join_current_thread();
                barrier.wait();
                for n in 0..BLOCKS {
                    let block = {
                        let _g = scope!("make");
                        black_box(vec![i as u8; 100 + n % 7])
                    };
                    next.send(block).unwrap();
                    let got = rx.recv().unwrap();
                    let _g = scope!("take");
                    drop(got);
                }
                drop(next);
                // Free what is still queued for this thread inside the session.
                let _g = scope!("take");
                while let Ok(got) = rx.try_recv() {
                    drop(got);
                }
            })
        })
        .collect();
    drop(senders);
    for w in workers {
        w.join().unwrap();
    }
    prof.stop();
    let make = stats(&prof, "make");
    let expected_bytes: u64 =
        (0..BLOCKS).map(|n| 100 + (n % 7) as u64).sum::<u64>() * THREADS as u64;
    assert_eq!(make.allocs, (THREADS * BLOCKS) as u64);
    assert_eq!(make.alloc_bytes, expected_bytes);
    let take = stats(&prof, "take");
    assert_eq!(take.frees, (THREADS * BLOCKS) as u64);
    assert_eq!(take.freed_bytes, expected_bytes);
    let trace = prof.trace();
    assert_eq!(trace.dropped_events, 0);
    let memory = trace.memory.as_ref().unwrap();
    let made = memory
        .events
        .iter()
        .filter(|e| e.scope_name() == Some("make"));
    for alloc in made {
        let free = &memory.events[alloc.matched.expect("every block is freed") as usize];
        assert_eq!((free.address, free.size), (alloc.address, alloc.size));
        assert_eq!(free.scope_name(), Some("take"));
        assert_ne!(free.thread, alloc.thread);
        assert!(free.ns >= alloc.ns);
    }
    assert!(
        prof.report()
            .live_at_stop
            .iter()
            .all(|l| l.scope != Some("make"))
    );
}

#[test]
fn chrome_export_has_a_live_bytes_counter_and_instants() {
    use tickscope::export::chrome::{Options, write_with};
    let prof = memory_session();
    {
        let _g = scope!("fill");
        let a = black_box(Vec::<u8>::with_capacity(1000));
        let b = black_box(Vec::<u8>::with_capacity(24));
        drop(a);
        drop(b);
    }
    prof.stop();
    let trace = prof.trace();
    let write = |instants: bool| {
        let mut out = Vec::new();
        let options = Options::new().allocation_instants(instants);
        write_with(&trace, &mut out, &options).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        doc["traceEvents"].as_array().unwrap().clone()
    };
    let events = write(true);
    let counter: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| {
            assert_eq!(e["name"], "memory");
            e["args"]["live_bytes"].as_u64().unwrap()
        })
        .collect();
    // Starts at 0; each event at a distinct tick gives one sample.
    assert_eq!(counter, [0, 1000, 1024, 24, 0]);
    let instants: Vec<(String, u64, String)> = events
        .iter()
        .filter(|e| e["ph"] == "i")
        .map(|e| {
            assert_eq!(e["cat"], "memory");
            let args = &e["args"];
            (
                e["name"].as_str().unwrap().to_owned(),
                args["size"].as_u64().unwrap(),
                args["scope"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let fill = "fill".to_owned();
    assert_eq!(
        instants,
        [
            ("alloc".to_owned(), 1000, fill.clone()),
            ("alloc".to_owned(), 24, fill.clone()),
            ("free".to_owned(), 1000, fill.clone()),
            ("free".to_owned(), 24, fill),
        ]
    );
    assert!(write(false).iter().all(|e| e["ph"] != "i"));
}
