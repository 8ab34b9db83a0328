//! Tables split by argument or by origin of captures with async calls: made without the
//! decoded trace, they are the decoded trace's, in every format.

use std::sync::Arc;

use super::Table;
use crate::capture::Capture;
use crate::decode::forged_async::{session, tracing_session, with_args};
use crate::trace::Trace;

/// The tables of the captures `make` gives, split by argument `size` and by origin: those
/// made from the captures are the decoded trace's (text, JSON, CSV) and did not decode them
/// whole. Returns the rows labelled by `size`.
fn assert_split_tables(make: &dyn Fn() -> Vec<Capture>) -> usize {
    let whole = Arc::new(Trace::from_captures(&make()));
    let split = |t: Table, arg: bool| {
        if arg {
            t.by_arg("size")
        } else {
            t.by_origin(true)
        }
    };
    let mut labelled = 0;
    for arg in [true, false] {
        let decoded = split(Table::new(whole.clone()), arg);
        let summed = split(Table::from_captures(make()), arg);
        let text = decoded.to_string();
        assert_eq!(summed.to_string(), text, "by arg {arg}");
        assert_eq!(summed.to_json(), decoded.to_json(), "by arg {arg}");
        assert_eq!(summed.to_csv(), decoded.to_csv(), "by arg {arg}");
        assert!(!summed.decoded_whole(), "by arg {arg}: decoded whole");
        if arg {
            labelled = (text.lines().skip(2))
                .take_while(|l| !l.is_empty())
                .filter(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .is_some_and(|c| c.starts_with('s') || c.parse::<u64>().is_ok())
                })
                .count();
        }
    }
    labelled
}

#[test]
fn async_calls_split_by_their_polls_arguments_without_the_decoded_trace() {
    let mut labelled = 0;
    for seed in 0..12 {
        let (threads, chunk) = (1 + seed as usize % 4, 1 + seed as usize % 9);
        labelled += assert_split_tables(&|| {
            vec![with_args(session(seed, threads, 400, chunk), seed, chunk)]
        });
    }
    assert!(labelled > 50, "{labelled} labelled rows");
    // Several pairing windows, and two sessions at once.
    assert_split_tables(&|| vec![with_args(session(40, 2, 20_000, 150), 40, 150)]);
    assert_split_tables(&|| {
        vec![
            with_args(session(41, 2, 300, 7), 41, 7),
            with_args(session(42, 3, 300, 5), 42, 5),
        ]
    });
}

#[test]
fn tracing_spans_split_by_their_fields_without_the_decoded_trace() {
    let mut labelled = 0;
    for seed in 0..12 {
        let (threads, chunk) = (1 + seed as usize % 3, 1 + seed as usize % 9);
        labelled += assert_split_tables(&|| {
            vec![with_args(
                tracing_session(seed, threads, 500, chunk, 12),
                seed,
                chunk,
            )]
        });
    }
    assert!(labelled > 50, "{labelled} labelled rows");
    assert_split_tables(&|| vec![with_args(tracing_session(43, 3, 20_000, 130, 40), 43, 130)]);
}
