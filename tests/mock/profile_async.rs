//! Exact async accounting with a mock clock whose ticks are nanoseconds: a call polled on two
//! threads, nested async calls, cancellation and calls still pending at stop.
//!
//! The mock is process-wide, so the tests take `SERIAL`.
#![cfg(feature = "enabled")]

use std::sync::Arc;
use std::task::Poll;

use crate::common::{YieldOnce, poll_once};
use crate::common::{mock, serial};
use tickscope::trace::SpanKind;
use tickscope::{Profiler, profile};

#[profile]
async fn step(m: Arc<tickscope::clock::Mock>) -> u32 {
    m.increment(10u64);
    YieldOnce::default().await;
    m.increment(4u64);
    check(&m);
    m.increment(3u64);
    5
}

#[profile]
fn check(m: &tickscope::clock::Mock) {
    m.increment(3u64);
}

#[test]
fn a_call_polled_on_two_threads_counts_once_with_its_wall_time() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    m.increment(5u64);
    let mut fut = Box::pin(step(m.clone()));
    assert!(poll_once(fut.as_mut()).is_pending()); // poll 1 on this thread: 10 ns
    m.increment(100u64); // pending: no poll runs
    let other = std::thread::spawn({
        let prof = prof.clone();
        move || {
            prof.join_current_thread();
            // Poll 2 on another thread: 4 + check 3 + 3 = 10 ns, 7 of them its own.
            assert_eq!(poll_once(fut.as_mut()), Poll::Ready(5));
        }
    });
    other.join().unwrap();
    m.increment(20u64);
    prof.stop();

    let report = prof.report();
    let row = report.get("step").unwrap();
    assert_eq!(
        (row.calls, row.total_ns, row.self_ns, row.min_ns, row.max_ns),
        (1, 120, 17, 120, 120)
    );
    assert_eq!(row.open_at_stop, 0);
    let check = report.get("check").unwrap();
    assert_eq!((check.calls, check.total_ns), (1, 3));
    assert_eq!(report.len(), 2);
    // Busy: the time its polls ran, beside the wall time; plain scopes have none.
    assert_eq!((row.busy_ns, check.busy_ns), (Some(20), None));
    let table = prof.table().to_string();
    assert_eq!(
        table,
        "Name   Calls   Total  Total %   Self  Self %   Busy  Busy %     Avg     Min     Max     P50     P99\n\
         ---------------------------------------------------------------------------------------------------\n\
         step       1  120 ns    100.0  17 ns    85.0  20 ns    16.7  120 ns  120 ns  120 ns  120 ns  120 ns\n\
         check      1    3 ns     15.0   3 ns    15.0                   3 ns    3 ns    3 ns    3 ns    3 ns\n\
         145 ns wall, 2 threads, 1 scope, 1 async call (2 polls), 0 dropped events\n\
         Total % and Self %: of 20 ns in scopes, all threads (every row's Self added up; async \
         calls count their Busy time); Busy %: of the row's Total\n"
    );
    // The CSV has the busy time too, empty for a plain scope.
    let csv = prof.table().to_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].ends_with(",total_percent,self_percent,open_at_stop,busy_ns"),
        "{csv}"
    );
    assert!(lines[1].starts_with(",step,,,1,120,17,"), "{csv}");
    assert!(lines[1].ends_with(",0,20"), "{csv}");
    assert!(lines[2].ends_with(",0,"), "{csv}");

    let trace = prof.trace();
    assert_eq!(trace.async_spans.len(), 1);
    let call = &trace.async_spans[0];
    let (first, second) = (&trace.threads[0], &trace.threads[1]);
    assert_eq!(call.name(), "step");
    assert_eq!(call.duration_ns(), 120);
    assert_eq!(call.start_ns - trace.start_ns, 5);
    assert_eq!((call.polls, call.busy_ns, call.self_ns), (2, 20, 17));
    assert_eq!((call.thread, call.end_thread), (first.id, Some(second.id)));
    assert!(!call.open_at_stop);
    // One poll slice on each thread; `check` nests in the second.
    assert_eq!(first.spans.len(), 1);
    assert_eq!(
        first.spans[0].kind,
        SpanKind::Poll {
            async_span: Some(0)
        }
    );
    assert_eq!(first.spans[0].duration_ns(), 10);
    assert_eq!(second.spans.len(), 2);
    assert_eq!(
        second.spans[0].kind,
        SpanKind::Poll {
            async_span: Some(0)
        }
    );
    assert_eq!(second.spans[0].duration_ns(), 10);
    assert_eq!(second.spans[1].name(), "check");
    assert_eq!(
        (second.spans[1].depth, second.spans[1].parent),
        (1, Some(0))
    );
}

#[profile]
async fn request(m: Arc<tickscope::clock::Mock>) -> u32 {
    m.increment(2u64);
    let a = step(m.clone()).await;
    m.increment(1u64);
    a + 1
}

#[test]
fn nested_async_calls_nest_their_polls() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    let mut fut = Box::pin(request(m.clone()));
    assert!(poll_once(fut.as_mut()).is_pending()); // request 2 + step 10
    m.increment(50u64);
    assert_eq!(poll_once(fut.as_mut()), Poll::Ready(6)); // step 4 + 3 + 3, request 1
    prof.stop();

    let report = prof.report();
    let request = report.get("request").unwrap();
    let step = report.get("step").unwrap();
    // request: 2 + 10 + 50 + 10 + 1 = 73 wall, its own polls ran 2 + 1 ns.
    assert_eq!(
        (request.calls, request.total_ns, request.self_ns),
        (1, 73, 3)
    );
    // step: 10 + 50 + 10 = 70 wall, 10 + 7 ns of its own.
    assert_eq!((step.calls, step.total_ns, step.self_ns), (1, 70, 17));

    let trace = prof.trace();
    let names: Vec<_> = trace.threads[0]
        .spans
        .iter()
        .map(|s| (s.name(), s.depth, matches!(s.kind, SpanKind::Poll { .. })))
        .collect();
    assert_eq!(
        names,
        [
            ("request", 0, true),
            ("step", 1, true),
            ("request", 0, true),
            ("step", 1, true),
            ("check", 2, false)
        ]
    );
    let tree = prof.table().tree(true).to_string();
    let lines: Vec<&str> = tree.lines().collect();
    assert!(lines[2].starts_with("request (poll)"), "{tree}");
    assert!(lines[3].starts_with("  step (poll)"), "{tree}");
    assert!(lines[4].starts_with("    check"), "{tree}");
}

#[test]
fn cancelled_and_pending_calls() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    let mut cancelled = Box::pin(step(m.clone()));
    assert!(poll_once(cancelled.as_mut()).is_pending()); // 10 ns
    m.increment(30u64);
    drop(cancelled); // the call ends when dropped: 40 ns
    let mut pending = Box::pin(step(m.clone()));
    assert!(poll_once(pending.as_mut()).is_pending()); // 10 ns
    m.increment(25u64);
    prof.stop(); // still pending: closed at the stop, 35 ns
    drop(pending);

    let report = prof.report();
    let row = report.get("step").unwrap();
    assert_eq!(
        (row.calls, row.min_ns, row.max_ns, row.self_ns),
        (2, 35, 40, 20)
    );
    assert_eq!(row.open_at_stop, 1);
    let trace = prof.trace();
    assert_eq!(trace.async_spans.len(), 2);
    assert!(!trace.async_spans[0].open_at_stop);
    assert!(trace.async_spans[1].open_at_stop);
    assert_eq!(trace.async_spans[1].end_thread, None);
}

#[test]
fn calls_begun_before_the_session_are_left_out_of_the_table() {
    let _serial = serial();
    let m = mock();
    let mut early = Box::pin(step(m.clone()));
    assert!(poll_once(early.as_mut()).is_pending()); // no session yet
    let prof = Profiler::builder().current_thread().start();
    assert_eq!(poll_once(early.as_mut()), Poll::Ready(5));
    prof.stop();
    let trace = prof.trace();
    // The poll is in the trace, unmatched; the call is not counted.
    assert!(trace.async_spans.is_empty());
    let spans = &trace.threads[0].spans;
    assert_eq!(spans[0].kind, SpanKind::Poll { async_span: None });
    assert_eq!(spans[0].duration_ns(), 10);
    let report = prof.report();
    assert!(report.get("step").is_none());
    assert_eq!(report.get("check").unwrap().calls, 1);
}
