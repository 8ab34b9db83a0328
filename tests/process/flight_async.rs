//! A flight recorder (`ProfilerBuilder::flight_recorder`) under a tokio runtime of two workers, on the
//! real clock: `#[profile] async fn` calls whose polls move between the workers, many more
//! than the window holds. However the threads' retained records interleave, no call that
//! finished is open at stop, none is longer than the window, and every poll slice in the
//! window belongs to exactly one call. (The deterministic case, with threads the test drives,
//! is in `tests/mock/flight.rs`.)
//!
//! One flight recorder runs at a time: the tests take `SERIAL`.
#![cfg(feature = "enabled")]

use crate::common::serial;
use tickscope::trace::{SpanKind, Trace};
use tickscope::{Capture, Profiler, profile};

/// Four polls: three yields, each putting the task back in a run queue, where the other
/// worker may steal it.
#[profile]
async fn hop() {
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
}

/// Runs `calls` calls of `hop` on two workers through a recorder of `bytes`, all of them
/// finished before the stop; checks the window and returns how many calls in it were polled
/// on both workers.
fn window(bytes: usize, calls: usize) -> usize {
    let _serial = serial();
    let prof = Profiler::builder().flight_recorder(bytes).start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    runtime.block_on(async {
        // Spawned from a worker: into its queue, where the other one steals them while this
        // one records `filler` scopes, many more than the calls: the threads fill their
        // chunks at different rates, so their retained records start far apart.
        tokio::spawn(async move {
            for _ in 0..calls / 16 {
                let tasks: Vec<_> = (0..16).map(|_| tokio::spawn(hop())).collect();
                for _ in 0..100 {
                    drop(tickscope::scope!("filler"));
                }
                for task in tasks {
                    task.await.unwrap();
                }
            }
        })
        .await
        .unwrap();
    });
    prof.stop();
    drop(runtime);
    let trace = prof.trace();
    // 16 records a call: the window holds a fraction of them.
    assert!(trace.overwritten_events > 0);
    let window = trace
        .cut_start_ns
        .expect("a window start common to every thread");
    assert!(trace.start_ns <= window && window <= trace.end_ns);
    let length = trace.end_ns - window;

    let calls = &trace.async_spans;
    assert!(!calls.is_empty());
    assert_eq!(calls.iter().filter(|c| c.open_at_stop).count(), 0);
    for call in calls {
        assert_eq!(call.name(), "hop");
        assert!(call.start_ns >= window && call.end_ns <= trace.end_ns);
        assert!(call.duration_ns() <= length);
        assert!(call.end_thread.is_some());
        if call.cut_at_start {
            assert_eq!(call.start_ns, window);
            assert!(call.polls <= 4);
        } else {
            assert_eq!(call.polls, 4);
        }
    }
    // Every poll slice from the window's start on belongs to a call, each call's slices are
    // as many as its polls, and the slices before belong to none.
    let mut slices = vec![0u32; calls.len()];
    for thread in &trace.threads {
        for span in &thread.spans {
            if let SpanKind::Poll { async_span: task } = span.kind {
                match task {
                    Some(call) => {
                        assert!(span.start_ns >= window);
                        slices[call as usize] += 1;
                    }
                    // Before the window's start tick: at most its nanosecond (a tick is
                    // less than a nanosecond, and times are whole nanoseconds).
                    None => assert!(span.start_ns <= window),
                }
            }
        }
    }
    let polls: Vec<u32> = calls.iter().map(|c| c.polls).collect();
    assert_eq!(slices, polls);

    let report = prof.report();
    let row = report.get("hop").unwrap();
    assert_eq!((row.calls, row.open_at_stop), (calls.len() as u64, 0));
    assert!(row.max_ns <= length);

    // A capture file carries the same window and decodes to the same calls.
    let mut file = Vec::new();
    prof.capture().write_to(&mut file).unwrap();
    let read = Capture::from_bytes(&file).unwrap();
    let decoded = read[0].decode();
    assert_eq!(decoded.cut_start_ns, trace.cut_start_ns);
    let shape = |t: &Trace| -> Vec<(u64, u64, u32, bool, bool)> {
        t.async_spans
            .iter()
            .map(|c| {
                (
                    c.start_ns,
                    c.end_ns,
                    c.polls,
                    c.cut_at_start,
                    c.open_at_stop,
                )
            })
            .collect()
    };
    assert_eq!(shape(&decoded), shape(&trace));
    // Calls polled on both workers in the window.
    let mut threads: Vec<Option<u64>> = calls.iter().map(|c| Some(c.thread)).collect();
    for thread in &trace.threads {
        for span in &thread.spans {
            if let SpanKind::Poll {
                async_span: Some(call),
            } = span.kind
                && threads[call as usize] != Some(thread.id)
            {
                threads[call as usize] = None;
            }
        }
    }
    let moved = threads.iter().filter(|t| t.is_none()).count();
    let cut = calls.iter().filter(|c| c.cut_at_start).count();
    println!(
        "{bytes} B window: {} calls in it, {cut} cut at its start, {moved} polled on both \
         workers; {} events overwritten",
        calls.len(),
        trace.overwritten_events,
    );
    moved
}

// Several rounds each: where the threads' retained records start depends on how the
// workers shared the calls, so each round cuts the window elsewhere.

#[test]
fn calls_moving_between_workers_in_a_1_mib_window() {
    for _ in 0..5 {
        window(1 << 20, 20_000);
    }
}

#[test]
fn calls_moving_between_workers_in_a_16_mib_window() {
    // Hundreds of calls a round move: at 1 MiB, where the window holds a few thousand,
    // a round may see none.
    let moved: usize = (0..2).map(|_| window(16 << 20, 150_000)).sum();
    assert!(moved > 0);
}
