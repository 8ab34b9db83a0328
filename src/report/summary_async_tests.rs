//! The async calls summed as the threads are read again (`decode::call_stream`) give the
//! rows, footer counts and salvage of the decoded trace.

use super::{Report, Split};
use crate::capture::Capture;
use crate::decode::forged_async::{
    FETCH, HANDLE, PARSE, chunked, session, span_close, span_enter, tracing_session, with_payload,
};
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
fn tracing_spans_entered_on_several_threads_are_summed_as_read() {
    let mut calls = 0;
    for seed in 0..40 {
        let threads = 1 + seed as usize % 4;
        // Few spans alive at once, or more than a thread keeps waiting for their close.
        let pending = if seed % 3 == 0 { 120 } else { 6 };
        let capture = tracing_session(seed, threads, 500, 1 + seed as usize % 9, pending);
        let summary = assert_calls_summed(&[capture]);
        assert!(summary.threads.iter().any(|t| t.enter_polls.is_some()));
        calls += summary.calls();
    }
    assert!(calls > 500, "{calls} calls");
    // Threads of several pairing windows; two sessions; one salvaged without its footer.
    for seed in 40..42 {
        let capture = tracing_session(seed, 3, 30_000, 100 + seed as usize, 40);
        assert!(capture.record_count() > 20_000);
        assert_calls_summed(&[capture]);
    }
    let both = [tracing_session(1, 2, 300, 5, 10), session(2, 2, 300, 7)];
    assert_calls_summed(&both);
    let mut salvaged = tracing_session(3, 3, 600, 7, 20);
    salvaged.salvaged = Some(100);
    let summary = assert_calls_summed(&[salvaged]);
    assert!(summary.trace.salvage.open_scopes > 0);
}

#[test]
fn a_tracing_span_is_a_call_when_entered_twice_and_a_scope_when_once() {
    // Span 7 entered on thread 1 at 10-20 and 30-40 (a `parse` at 32-35), closed there at
    // 50: a call (wall 40, busy 20, self 17). Span 8 entered once on thread 2 at 12-18,
    // closed on thread 1 at 60: a scope of 6. Span 9 entered on threads 1 (62-70) and 2
    // (64-66), closed on 2 at 72: a call (wall 10, busy 10). Span 7's id again: entered once
    // at 80 on thread 2, still open at the stop (100): a scope open at the stop.
    let mut one = Vec::new();
    one.extend(span_enter(&HANDLE, 10, 7));
    one.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), 10), 20));
    one.extend(span_enter(&HANDLE, 30, 7));
    one.push(RawEvent::begin(PARSE.id(), 32));
    one.push(RawEvent::end(RawEvent::end_key(PARSE.id(), 32), 35));
    one.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), 30), 40));
    one.extend(span_close(50, 7, true));
    one.extend(span_close(60, 8, false));
    one.extend(span_enter(&FETCH, 62, 9));
    one.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 62), 70));
    let mut two = Vec::new();
    two.extend(span_enter(&FETCH, 12, 8));
    two.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 12), 18));
    two.extend(span_enter(&FETCH, 64, 9));
    two.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 64), 66));
    two.extend(span_close(72, 9, false));
    two.extend(span_enter(&HANDLE, 80, 7));
    let capture = Capture::from_records(vec![(1, one), (2, two)], 0, 100);
    let summary = assert_calls_summed(&[capture]);
    let report = Report::from_summary(&summary, false);
    let row = |name: &str| report.rows().iter().find(|r| r.name == name).unwrap();
    let handle = row("handle");
    // The call, and the scope open at the stop (20).
    assert_eq!(
        (handle.calls, handle.total_ns, handle.busy_ns),
        (2, 60, Some(20))
    );
    assert_eq!((handle.self_ns, handle.open_at_stop), (37, 1));
    let fetch = row("fetch");
    // The scope (6) and the call (10, busy 10).
    assert_eq!(
        (fetch.calls, fetch.total_ns, fetch.busy_ns),
        (2, 16, Some(10))
    );
    assert_eq!(
        (summary.calls(), summary.polls(), summary.spans()),
        (2, 4, 7)
    );
}

#[test]
fn a_tracing_close_that_says_here_of_a_span_entered_elsewhere_is_summed_or_decoded_whole() {
    // Span 7 entered on thread 2 and on thread 1, closed on 1 saying every enter was there
    // (the recorder's word, wrong): the decoded trace takes thread 1's enter for a plain
    // scope, and thread 2's for a span never closed, entered once: a scope too.
    let forged = |inside: bool| {
        let mut one = Vec::new();
        one.extend(span_enter(&HANDLE, 30, 7));
        if inside {
            // Span 8 entered inside: the merge matches span 7's enter before its close says
            // it was plain, and finds it in span 7's enters from thread 2.
            one.extend(span_enter(&FETCH, 32, 8));
            one.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 32), 34));
            one.extend(span_close(36, 8, true));
        }
        one.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), 30), 40));
        one.extend(span_close(50, 7, true));
        let mut two = Vec::new();
        two.extend(span_enter(&HANDLE, 10, 7));
        two.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), 10), 20));
        // A record a chunk: the merge matches what it has read.
        chunked(vec![one, two], 100, 1)
    };
    let summary = assert_calls_summed(&[forged(false)]);
    assert_eq!(
        (summary.calls(), summary.polls(), summary.spans()),
        (0, 0, 2)
    );
    // Matched before it was found plain: not summed, decoded whole.
    let capture = forged(true);
    assert_eq!(Trace::from_capture(&capture).async_spans.len(), 0);
    assert!(Summary::of(&[capture]).is_none());
}

#[test]
fn closes_after_many_spans_closed_elsewhere_are_matched_the_same() {
    // Thread 1 enters 20,000 spans that close on thread 2 (past the ids a thread remembers
    // as moved to the marks, so every later close there is marked), then span 1 once and
    // span 2 twice, both closed there: a scope and a call, as before.
    let (mut one, mut two) = (Vec::new(), Vec::new());
    let mut tick = 10;
    for span in 100..20_100 {
        one.extend(span_enter(&FETCH, tick, span));
        one.push(RawEvent::end(RawEvent::end_key(FETCH.id(), tick), tick + 1));
        two.extend(span_close(tick + 2, span, false));
        tick += 3;
    }
    one.extend(span_enter(&PARSE, tick, 1));
    one.push(RawEvent::end(RawEvent::end_key(PARSE.id(), tick), tick + 5));
    one.extend(span_close(tick + 6, 1, true));
    for at in [tick + 10, tick + 20] {
        one.extend(span_enter(&HANDLE, at, 2));
        one.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), at), at + 4));
    }
    one.extend(span_close(tick + 30, 2, true));
    let capture = chunked(vec![one, two], tick + 50, 1000);
    let trace = Trace::from_capture(&capture);
    let calls: Vec<_> = trace
        .async_spans
        .iter()
        .map(|c| (c.name(), c.polls))
        .collect();
    assert_eq!(calls, [("handle", 2)]);
    let parse = trace.threads[0].spans.iter().find(|s| s.name() == "parse");
    assert_eq!(
        parse.map(|s| (s.kind, s.duration_ns())),
        Some((SpanKind::Scope, 5))
    );
    let summary = assert_calls_summed(&[capture]);
    assert_eq!((summary.calls(), summary.polls()), (1, 2));
}

#[test]
fn a_flight_recorders_calls_cut_at_its_window_start_are_summed() {
    // The window starts amid the session: marks before it make no call, and a call polled
    // or ended in it but begun before starts at the window's start.
    let mut cut = 0;
    for seed in 0..24 {
        let mut capture = if seed % 2 == 0 {
            session(seed, 1 + seed as usize % 3, 400, 1 + seed as usize % 7)
        } else {
            tracing_session(seed, 1 + seed as usize % 3, 400, 1 + seed as usize % 7, 8)
        };
        capture.cut_start = Some(10 + 100 * (seed % 4));
        let trace = Trace::from_capture(&capture);
        let calls_cut = trace.async_spans.iter().filter(|c| c.cut_at_start).count();
        let summary = assert_calls_summed(&[capture]);
        let scopes_cut = (trace.threads.iter().flat_map(|t| &t.spans))
            .filter(|s| s.cut_at_start && s.kind == SpanKind::Scope)
            .count();
        assert_eq!(summary.cut_at_start(), calls_cut + scopes_cut);
        cut += calls_cut;
    }
    assert!(cut > 20, "{cut} calls cut");
}
