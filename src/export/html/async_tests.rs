//! The report of captures with `#[profile] async fn` calls written from their sums and
//! pieces (`stream::data_of`, their calls matched as the threads are read again): the
//! whole trace's page, byte for byte; past the budget of calls, the longest of them.

use super::Options;
use super::page;
use super::stream::set_scope_budget;
use crate::capture::Capture;
use crate::decode::forged_async::{held_back, session};
use crate::export::Format;
use crate::trace::Trace;

/// The page of `captures` written from pieces, which must be written so.
fn streamed(captures: &[&Capture]) -> String {
    let mut out = Vec::new();
    let written = Options::new().write_captures(captures, &mut out);
    assert!(matches!(written, Some(Ok(()))), "written from pieces");
    String::from_utf8(out).unwrap()
}

/// The page of `captures` from pieces is the page of their decoded trace.
fn assert_page_is_whole(captures: &[Capture]) {
    let trace = Trace::from_captures(captures);
    assert!(!trace.async_spans.is_empty());
    let mut whole = Vec::new();
    page::write(&trace, &mut whole, &Options::new()).unwrap();
    let refs: Vec<&Capture> = captures.iter().collect();
    let pieces = streamed(&refs);
    assert!(
        pieces.as_bytes() == whole,
        "{} bytes from pieces, {} from the trace",
        pieces.len(),
        whole.len()
    );
}

#[test]
fn reports_of_async_calls_are_written_from_pieces_with_the_whole_traces_bytes() {
    // Calls begun, polled and ended on other threads, ids reused, calls open at the stop.
    for seed in 0..6 {
        let capture = session(seed, 1 + seed as usize % 4, 600, 1 + seed as usize % 9);
        assert_page_is_whole(&[capture]);
    }
    // Several windows of pairing a thread; a session salvaged without its footer; calls
    // held back by one open call (through a temporary file); beside sessions without calls.
    assert_page_is_whole(&[session(50, 3, 20_000, 97)]);
    let mut salvaged = session(51, 2, 2_000, 13);
    salvaged.salvaged = Some(64);
    assert_page_is_whole(&[salvaged]);
    assert_page_is_whole(&[held_back(3_000)]);
    let plain = || Capture::from_records(Vec::new(), 0, 0);
    assert_page_is_whole(&[plain(), session(52, 2, 500, 8), plain()]);
}

#[test]
fn reports_of_tracing_spans_entered_on_several_threads_are_written_from_pieces() {
    use crate::decode::forged_async::tracing_session;
    for seed in 0..4 {
        let pending = if seed % 2 == 0 { 120 } else { 6 };
        assert_page_is_whole(&[tracing_session(
            seed,
            1 + seed as usize % 3,
            800,
            7,
            pending,
        )]);
    }
}

#[test]
fn reports_of_calls_of_a_flight_window_or_with_memory_are_written_from_pieces() {
    use crate::decode::forged_async::{tracing_session, with_allocs};
    // A flight recorder's calls cut at its start come first in the decoded trace.
    let mut flight = session(62, 2, 600, 5);
    flight.cut_start = Some(300);
    let trace = Trace::from_capture(&flight);
    assert!(trace.async_spans.iter().any(|c| c.cut_at_start));
    let mut tracing = tracing_session(63, 3, 600, 7, 20);
    tracing.cut_start = Some(250);
    // Sessions that tracked memory: the memory timeline after the calls.
    let memory = with_allocs(&session(64, 3, 600, 7), 9);
    let both = with_allocs(&flight, 4);
    assert!(Trace::from_capture(&both).memory.is_some());
    for capture in [flight, tracing, memory, both] {
        assert_page_is_whole(&[capture]);
    }
}

/// The report with a diff view against a baseline, both runs with async calls (of a flight
/// recorder's window, with tracked memory), written from sums and pieces (the baseline's call
/// tree from its polls as spans): the page of both traces decoded whole.
#[test]
fn reports_with_a_baseline_of_async_calls_are_written_from_pieces() {
    use crate::decode::forged_async::{flight_calls, with_allocs};
    use std::sync::Arc;
    // (Of a flight window, no name both a scope's and a call's: else the diff is decoded
    // whole.)
    let runs = [
        (session(66, 3, 800, 7), session(67, 2, 800, 9)),
        (
            flight_calls(60, 2_020),
            with_allocs(&session(68, 2, 600, 7), 5),
        ),
        (
            with_allocs(&flight_calls(40, 1_530), 7),
            flight_calls(50, 1_010),
        ),
    ];
    for (base, new) in runs {
        let base_trace = Arc::new(Trace::from_capture(&base));
        let new_trace = Trace::from_capture(&new);
        assert!(!base_trace.async_spans.is_empty() && !new_trace.async_spans.is_empty());
        if base.cut_start.is_some() {
            assert!(base_trace.async_spans.iter().any(|c| c.cut_at_start));
        }
        let options = Options::new();
        let mut whole = Vec::new();
        page::write(
            &new_trace,
            &mut whole,
            &options.clone().baseline(base_trace),
        )
        .unwrap();
        let bases = [&base];
        let with = super::WithBaseline {
            options: &options,
            base: &bases,
        };
        let mut pieces = Vec::new();
        let written = with.write_captures(&[&new], &mut pieces);
        assert!(matches!(written, Some(Ok(()))), "written from pieces");
        assert!(
            pieces == whole,
            "{} bytes from pieces, {} from the traces",
            pieces.len(),
            whole.len()
        );
    }
}

#[test]
fn reports_of_several_sessions_with_calls_are_written_from_pieces() {
    // Two sessions of one process at the same moments (calls interleaved, ties too), and
    // three processes, one without calls, calls held back behind an open one beside others.
    assert_page_is_whole(&[session(60, 2, 300, 5), session(61, 2, 300, 5)]);
    let mut other = session(62, 3, 400, 7);
    other.header.process_id = 7;
    let mut plain = Capture::from_records(Vec::new(), 0, 0);
    plain.header.process_id = 8;
    assert_page_is_whole(&[held_back(1_500), plain, other, session(63, 1, 200, 3)]);
}

/// Past the budget of calls (a quarter of the scopes' budget), the page lists the calls
/// that lasted longest, says how many of how many, and each row's histogram counts every
/// call; past the scopes' budget, the polls (which the first pass does not time) count
/// toward the threshold of the scopes shown.
#[test]
fn reports_of_many_calls_show_the_longest() {
    let capture = session(53, 3, 20_000, 97);
    let trace = Trace::from_captures(std::slice::from_ref(&capture));
    let calls = trace.async_spans.len() as u64;
    let spans: u64 = trace.threads.iter().map(|t| t.spans.len() as u64).sum();
    let budget = 4 * (calls / 3);
    set_scope_budget(Some(budget));
    let page = streamed(&[&capture]);
    set_scope_budget(None);
    // The members of the level of detail (and the session's count of calls).
    let lod = &page[page.find("\"lod\":{").unwrap()..];
    let lod = &lod[..=lod.find('}').unwrap()];
    let field = |key: &str| -> u64 {
        let text = if key == "async_calls" {
            page.as_str()
        } else {
            lod
        };
        let at = text.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
        let end = at + text[at..].find([',', '}']).unwrap();
        text[at..end].parse().unwrap()
    };
    assert_eq!(field("calls"), calls);
    assert_eq!(field("async_calls"), calls);
    assert_eq!(field("calls_budget"), budget / 4);
    let shown = field("calls_shown");
    assert!(shown > 0 && shown <= budget / 4, "{shown} of {calls} shown");
    let least = field("calls_min_ns");
    let longer = (trace.async_spans.iter())
        .filter(|c| c.duration_ns() >= least)
        .count() as u64;
    assert_eq!(shown, longer);
    assert_eq!(field("scopes"), spans);
    // Fewer scopes than spans: the scopes' level of detail too, whose histogram holds the
    // polls.
    assert!(spans > budget);
    assert!(field("min_ns") > 0);
}
