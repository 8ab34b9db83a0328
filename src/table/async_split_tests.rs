//! Tables split by argument or by origin of captures with async calls: made without the
//! decoded trace, they are the decoded trace's, in every format.

use std::sync::Arc;

use super::Table;
use crate::capture::Capture;
use crate::decode::forged_async::{session, tracing_session, with_args, with_memory};
use crate::trace::Trace;

/// The tables of the captures `make` gives, split by argument `size` and by origin: those
/// made from the captures are the decoded trace's (text, JSON, CSV) and did not decode them
/// whole. Returns the rows of async calls (`fetch`, `handle`) labelled by `size`, and the
/// rows labelled by origin.
fn assert_split_tables(make: &dyn Fn() -> Vec<Capture>) -> [usize; 2] {
    let whole = Arc::new(Trace::from_captures(&make()));
    let split = |t: Table, arg: bool| {
        if arg {
            t.by_arg("size")
        } else {
            t.by_origin(true)
        }
    };
    let mut labelled = [0; 2];
    for arg in [true, false] {
        let decoded = split(Table::new(whole.clone()), arg);
        let summed = split(Table::from_captures(make()), arg);
        assert_eq!(summed.to_string(), decoded.to_string(), "by arg {arg}");
        assert_eq!(summed.to_json(), decoded.to_json(), "by arg {arg}");
        let csv = decoded.to_csv();
        assert_eq!(summed.to_csv(), csv, "by arg {arg}");
        assert!(!summed.decoded_whole(), "by arg {arg}: decoded whole");
        // thread,name,caused_by,arg,…
        let rows = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>());
        labelled[usize::from(!arg)] += rows
            .filter(|r| match arg {
                true => matches!(r[1], "fetch" | "handle") && !r[3].is_empty(),
                false => !r[2].is_empty(),
            })
            .count();
    }
    labelled
}

#[test]
fn async_calls_split_by_their_polls_arguments_without_the_decoded_trace() {
    let mut labelled = [0; 2];
    for seed in 0..12 {
        let (threads, chunk) = (1 + seed as usize % 4, 1 + seed as usize % 9);
        let links = seed % 2 == 0;
        let rows = assert_split_tables(&|| {
            vec![with_args(
                session(seed, threads, 400, chunk),
                seed,
                chunk,
                links,
            )]
        });
        labelled = [labelled[0] + rows[0], labelled[1] + rows[1]];
    }
    // Calls by their polls' arguments, and scopes by their links' origins.
    assert!(
        labelled[0] > 100 && labelled[1] >= 4,
        "{labelled:?} labelled rows"
    );
    // Several pairing windows, and two sessions at once.
    assert_split_tables(&|| vec![with_args(session(40, 2, 20_000, 150), 40, 150, true)]);
    assert_split_tables(&|| {
        vec![
            with_args(session(41, 2, 300, 7), 41, 7, true),
            with_args(session(42, 3, 300, 5), 42, 5, false),
        ]
    });
}

#[test]
fn tracing_spans_split_by_their_fields_without_the_decoded_trace() {
    let mut labelled = [0; 2];
    for seed in 0..12 {
        let (threads, chunk) = (1 + seed as usize % 3, 1 + seed as usize % 9);
        let links = seed % 2 == 1;
        let rows = assert_split_tables(&|| {
            let capture = tracing_session(seed, threads, 500, chunk, 12);
            vec![with_args(capture, seed, chunk, links)]
        });
        labelled = [labelled[0] + rows[0], labelled[1] + rows[1]];
    }
    assert!(
        labelled[0] > 100 && labelled[1] >= 4,
        "{labelled:?} labelled rows"
    );
    let capture = || tracing_session(43, 3, 20_000, 130, 40);
    assert_split_tables(&|| vec![with_args(capture(), 43, 130, true)]);
}

#[test]
fn a_flight_recorders_calls_split_by_their_polls_arguments_without_the_decoded_trace() {
    // Calls polled or ended in the window but begun before it start at its start.
    for seed in 0..12 {
        let (threads, chunk) = (1 + seed as usize % 3, 1 + seed as usize % 7);
        assert_split_tables(&|| {
            let capture = match seed % 2 {
                0 => session(seed, threads, 400, chunk),
                _ => tracing_session(seed, threads, 400, chunk, 8),
            };
            let mut capture = with_args(capture, seed, chunk, seed % 4 < 2);
            capture.cut_start = Some(10 + 100 * (seed % 4));
            vec![capture]
        });
    }
}

#[test]
fn calls_of_a_session_that_tracked_memory_split_without_the_decoded_trace() {
    for seed in 0..6 {
        let (threads, chunk) = (1 + seed as usize % 3, 1 + seed as usize % 7);
        assert_split_tables(&|| {
            let capture = match seed % 2 {
                0 => session(seed, threads, 300, chunk),
                _ => tracing_session(seed, threads, 300, chunk, 8),
            };
            vec![with_memory(
                with_args(capture, seed, chunk, seed % 4 < 2),
                chunk,
            )]
        });
    }
    // Each slice allocated: the tables have the memory columns, each call its polls' figures.
    let capture = with_memory(with_args(session(1, 2, 300, 5), 1, 5, false), 5);
    let trace = Trace::from_capture(&capture);
    let memory = trace.memory.as_ref().expect("memory tracked");
    assert!(memory.events.len() > 100, "{} events", memory.events.len());
}

#[test]
fn split_rows_past_the_exact_budget_keep_the_durations_of_rows_of_few_calls() {
    use crate::decode::summary::{Calls, Sum, Summary};
    use crate::report::{Report, Split};

    let capture = with_args(session(5, 3, 3000, 40), 5, 40, false);
    let sum = Sum {
        exact: false,
        stacks: false,
        calls: Calls::Sum,
        sites: true,
    };
    let summary = Summary::summed(&[&capture], sum).expect("summed");
    let split = Report::split_with_calls_of(&[&capture], &summary, Split::Arg("size"));
    let split = split.expect("calls matched again");
    assert!(split.approximate_quantiles);
    let decoded = Report::by_arg(&Trace::from_capture(&capture), "size");
    assert_eq!(split.rows().len(), decoded.rows().len());
    let (mut few, mut many) = (0, 0);
    for (row, exact) in split.rows().iter().zip(decoded.rows()) {
        let key = |r: &crate::report::ScopeStats| {
            let sums = (
                r.calls, r.total_ns, r.self_ns, r.min_ns, r.max_ns, r.busy_ns,
            );
            (r.name, r.arg.clone(), sums)
        };
        assert_eq!(key(row), key(exact));
        // Rows of up to 16 calls keep each duration: their quantiles are exact.
        if row.calls <= 16 {
            assert_eq!((row.p50_ns, row.p99_ns), (exact.p50_ns, exact.p99_ns));
            few += 1;
        } else {
            many += 1;
        }
    }
    assert!(
        few > 0 && many > 0,
        "{few} rows of few calls, {many} of many"
    );
}
