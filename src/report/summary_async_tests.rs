//! The async calls summed as the threads are read again (`decode::call_stream`) give the
//! rows, footer counts and salvage of the decoded trace.

use super::{Report, Split};
use crate::capture::Capture;
use crate::decode::forged_async::{FETCH, HANDLE, PARSE, session, with_payload};
use crate::decode::summary::Summary;
use crate::record::event::{RawEvent, RawKind};
use crate::trace::{SpanKind, Trace};

/// The summary of `captures` sums their calls, and gives the decoded trace's reports, by
/// thread or not, its call, poll and span counts and its salvage.
fn assert_calls_summed(captures: &[Capture]) -> Summary {
    let summary = Summary::of(captures).expect("async calls summed");
    assert!(summary.streamed_calls);
    assert_summary_is_decoded(&summary, &Trace::from_captures(captures));
    summary
}

/// `summary` gives the reports of `trace` (by thread or not), its call, poll and span counts
/// and its salvage.
pub(crate) fn assert_summary_is_decoded(summary: &Summary, trace: &Trace) {
    for split_threads in [false, true] {
        let decoded = Report::build(trace, split_threads, Split::None);
        let summed = Report::from_summary(summary, split_threads);
        assert!(
            summed == decoded,
            "split {split_threads}: {summed:?}\n!=\n{decoded:?}"
        );
    }
    let spans = trace.threads.iter().flat_map(|t| &t.spans);
    let polls = spans.filter(|s| s.kind != SpanKind::Scope).count();
    assert_eq!(summary.polls(), polls);
    assert_eq!(summary.calls(), trace.async_spans.len() as u64);
    let spans: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
    assert_eq!(summary.spans(), spans);
    assert_eq!(summary.trace.salvage, trace.salvage);
}

#[test]
fn async_calls_summed_as_read_give_the_decoded_rows() {
    let mut calls = 0;
    for seed in 0..40 {
        let capture = session(seed, 1 + seed as usize % 4, 400, 1 + seed as usize % 9);
        calls += assert_calls_summed(&[capture]).calls();
    }
    // The sessions made calls, some open at the stop.
    assert!(calls > 1000, "{calls} calls");
    // Threads of several pairing windows (spans final, and polls pending, as chunks come).
    for seed in 40..44 {
        let capture = session(seed, 2, 30_000, 100 + seed as usize);
        assert!(capture.record_count() > 20_000);
        assert_calls_summed(&[capture]);
    }
}

#[test]
fn async_calls_of_several_sessions_and_of_a_salvaged_one_are_summed() {
    let captures = [
        session(1, 3, 300, 5),
        session(2, 2, 300, 64),
        session(3, 1, 50, 2),
    ];
    let summary = assert_calls_summed(&captures);
    assert_eq!(summary.trace.threads.len(), 6);
    // Salvaged without its footer: what is open closes at each thread's last record, and
    // the calls cut open are counted with the scopes.
    let mut salvaged = session(4, 3, 500, 7);
    salvaged.salvaged = Some(100);
    let summary = assert_calls_summed(&[salvaged]);
    assert!(summary.trace.salvage.open_scopes > 0);
}

#[test]
fn a_call_open_at_the_stop_and_its_polls_on_two_threads() {
    // Call 5 begins on thread 1 at 10, polled there [10, 20] (a parse inside, [12, 15]) and
    // on thread 2 [30, 45]; call 6 begins at 50 on thread 2 and is still open at the stop
    // (100), last polled on thread 1 [60, 70].
    let mut one = Vec::new();
    one.extend(with_payload(RawKind::AsyncBegin, &FETCH, 10, 5));
    one.extend(with_payload(RawKind::PollBegin, &FETCH, 10, 5));
    one.push(RawEvent::begin(PARSE.id(), 12));
    one.push(RawEvent::end(RawEvent::end_key(PARSE.id(), 12), 15));
    one.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 10), 20));
    one.extend(with_payload(RawKind::PollBegin, &HANDLE, 60, 6));
    one.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), 60), 70));
    let mut two = Vec::new();
    two.extend(with_payload(RawKind::PollBegin, &FETCH, 30, 5));
    two.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 30), 45));
    two.extend(with_payload(RawKind::AsyncEnd, &FETCH, 45, 5));
    two.extend(with_payload(RawKind::AsyncBegin, &HANDLE, 50, 6));
    let capture = Capture::from_records(vec![(1, one), (2, two)], 0, 100);
    let summary = assert_calls_summed(&[capture]);
    let report = Report::from_summary(&summary, false);
    let row = |name: &str| report.rows().iter().find(|r| r.name == name).unwrap();
    let fetch = row("fetch");
    assert_eq!(
        (fetch.calls, fetch.total_ns, fetch.busy_ns),
        (1, 35, Some(25))
    );
    assert_eq!((fetch.self_ns, fetch.open_at_stop), (22, 0));
    let handle = row("handle");
    assert_eq!(
        (handle.calls, handle.total_ns, handle.busy_ns),
        (1, 50, Some(10))
    );
    assert_eq!(handle.open_at_stop, 1);
    assert_eq!(
        (summary.calls(), summary.polls(), summary.spans()),
        (2, 3, 4)
    );
}

#[test]
fn tracing_spans_entered_twice_and_flight_windows_are_not_summed() {
    // A `tracing` span entered twice on one thread and closed there is an async call whose
    // enters the merge does not stream.
    let enter = |tick| {
        [
            RawEvent::new(RawKind::SpanEnter, HANDLE.id(), tick),
            RawEvent::payload(0, 7),
        ]
    };
    let mut records = Vec::new();
    records.extend(enter(10));
    records.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), 10), 20));
    records.extend(enter(30));
    records.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), 30), 40));
    records.extend([
        RawEvent::new(RawKind::SpanClose, HANDLE.id(), 50),
        RawEvent::payload(RawEvent::SPAN_CLOSED_HERE, 7),
    ]);
    let capture = Capture::from_records(vec![(1, records)], 0, 100);
    assert_eq!(Trace::from_capture(&capture).async_spans.len(), 1);
    assert!(Summary::of(&[capture]).is_none());
    let mut flight = session(9, 2, 200, 8);
    flight.cut_start = Some(0);
    assert!(Summary::of(&[flight]).is_none());
}
