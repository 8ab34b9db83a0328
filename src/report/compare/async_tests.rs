//! A [`Diff`] of captures with `#[profile] async fn` calls read in pieces
//! ([`Diff::of_captures`]): the scopes merged in start order, then each async call matched as
//! the threads are read again, in the order it began: the diff of the decoded traces.

use super::{Diff, Metric, Options};
use crate::capture::Capture;
use crate::decode::forged_async::{FETCH, HANDLE, PARSE, held_back, session};
use crate::trace::{SpanKind, Trace};

/// Every metric, with and without time blocks and repetitions.
fn variants() -> Vec<(Options, bool)> {
    let of = |metric, blocks| Options {
        metric,
        blocks,
        ..Options::default()
    };
    vec![
        (of(Metric::PerCall, Options::BLOCKS), false),
        (of(Metric::PerCall, 7), false),
        (of(Metric::PerCall, 0), false),
        (of(Metric::SelfTime, Options::BLOCKS), false),
        (of(Metric::Total, Options::BLOCKS), false),
        (of(Metric::PerCall, Options::BLOCKS), true),
        (of(Metric::SelfTime, Options::BLOCKS), true),
    ]
}

/// The diff of `base` and `new` read in pieces (which must be read so) is the diff of their
/// decoded traces.
fn assert_streamed_is_whole(base: &[Capture], new: &[Capture]) {
    let traces = |captures: &[Capture]| -> Vec<Trace> {
        (captures.iter())
            .map(|c| Trace::from_captures(std::slice::from_ref(c)))
            .collect()
    };
    let (base_each, new_each) = (traces(base), traces(new));
    let (base_all, new_all) = (Trace::from_captures(base), Trace::from_captures(new));
    assert!(!base_all.async_spans.is_empty() && !new_all.async_spans.is_empty());
    for (options, repetitions) in variants() {
        let whole = match repetitions {
            true => Diff::from_repetitions(&base_each, &new_each, &options),
            false => Diff::new(&base_all, &new_all, &options),
        };
        let streamed = Diff::of_captures(base, new, &options, repetitions)
            .unwrap_or_else(|| panic!("read in pieces: {options:?}, {repetitions}"));
        assert_eq!(streamed, whole, "{options:?}, repetitions {repetitions}");
        for site in [&FETCH, &HANDLE] {
            let row = streamed.row(site.name()).expect("a row of async calls");
            assert!(row.base.is_some_and(|side| side.calls > 0));
        }
    }
}

#[test]
fn diffs_of_async_calls_are_read_in_pieces_as_the_decoded_traces() {
    // Calls polled and ended on other threads, calls open at the stop, ids reused.
    assert_streamed_is_whole(&[session(80, 3, 3_000, 11)], &[session(81, 2, 3_000, 7)]);
    // Calls held back by one open call (through a temporary file), a session salvaged
    // without its footer.
    let mut salvaged = session(82, 2, 2_000, 13);
    salvaged.salvaged = Some(64);
    assert_streamed_is_whole(&[held_back(3_000)], &[salvaged]);
}

/// `spans` `tracing` spans of `fetch` and `handle`, each entered on thread 1 (a `parse`
/// inside) and again on thread 2, and closed on thread 3: calls of two polls, the `n`th
/// lasting `stretch` ticks more a poll.
fn tracing_calls(spans: u64, stretch: u64) -> Capture {
    use crate::decode::forged_async::{span_close, span_enter};
    use crate::record::event::RawEvent;
    let (mut one, mut two, mut three) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..spans {
        let (site, t) = (if n % 2 == 0 { &FETCH } else { &HANDLE }, 100 * n);
        let d = 10 + n % 7 + stretch * (n % 3);
        one.extend(span_enter(site, t, n + 1));
        one.push(RawEvent::begin(PARSE.id(), t + 1));
        one.push(RawEvent::end(RawEvent::end_key(PARSE.id(), t + 1), t + 2));
        one.push(RawEvent::end(RawEvent::end_key(site.id(), t), t + d));
        two.extend(span_enter(site, t + 50, n + 1));
        two.push(RawEvent::end(
            RawEvent::end_key(site.id(), t + 50),
            t + 50 + d,
        ));
        three.extend(span_close(t + 90, n + 1, false));
    }
    crate::decode::forged_async::chunked(vec![one, two, three], 100 * spans + 10, 64)
}

#[test]
fn diffs_of_tracing_spans_entered_on_several_threads_are_read_in_pieces() {
    assert_streamed_is_whole(&[tracing_calls(300, 0)], &[tracing_calls(400, 6)]);
}

#[test]
fn diffs_of_several_sessions_with_calls_are_read_in_pieces() {
    // The sessions of a run merged (their calls in order of their start, across sessions)
    // or each a repetition; a session of another process, calls held back by an open one.
    let base = [session(83, 2, 400, 5), session(84, 2, 400, 5)];
    let mut other = session(86, 2, 400, 5);
    other.header.process_id = 7;
    let new = [session(85, 2, 400, 5), other, held_back(500)];
    assert_streamed_is_whole(&base, &new);
}

#[test]
fn a_name_of_scopes_and_async_calls_both_is_read_in_pieces() {
    use crate::decode::forged_async::tracing_session;
    use crate::record::event::RawEvent;
    // A plain scope of `fetch`'s callsite beside its async calls (a session of its own),
    // one starting with a call (at 20: scopes come first at one start).
    let scope = || {
        let end = RawEvent::end(RawEvent::end_key(FETCH.id(), 20), 30);
        let records = vec![RawEvent::begin(FETCH.id(), 20), end];
        Capture::from_records(vec![(9, records)], 0, 40)
    };
    let run = [scope(), session(87, 2, 400, 5)];
    let trace = Trace::from_captures(&run);
    assert!(trace.async_spans.iter().any(|c| c.name() == "fetch"));
    let scopes = trace.threads.iter().flat_map(|t| &t.spans);
    let fetch: Vec<_> = (scopes.filter(|s| s.kind == SpanKind::Scope))
        .filter(|s| s.name() == "fetch")
        .collect();
    assert_eq!(fetch.len(), 1);
    assert_streamed_is_whole(&run, &[scope(), session(88, 2, 400, 5)]);
    // `tracing` spans, plain scopes when entered once and calls when entered more.
    assert_streamed_is_whole(
        &[tracing_session(89, 3, 3_000, 7, 40)],
        &[tracing_session(90, 2, 3_000, 9, 8)],
    );
}

#[test]
fn diffs_of_flight_windows_and_tracked_memory_with_calls_are_read_in_pieces() {
    use crate::decode::forged_async::{flight_calls, with_allocs};
    // A flight recorder's window (its calls cut at the start come first), beside a session
    // that tracked memory; both.
    let flight = flight_calls(60, 2_020);
    let trace = Trace::from_capture(&flight);
    assert_eq!(
        trace.async_spans.iter().filter(|c| c.cut_at_start).count(),
        5
    );
    let memory = with_allocs(&session(88, 2, 1_500, 9), 7);
    assert!(memory.memory.is_on());
    assert_streamed_is_whole(&[flight], &[memory]);
    let both = with_allocs(&flight_calls(50, 1_510), 5);
    assert_streamed_is_whole(&[both], &[flight_calls(40, 990)]);
}
