//! OTLP/JSON of captures with async calls written piece by piece ([`calls`](super::calls)):
//! the whole trace's bytes.

use super::pieces;
use super::{Options, Otlp};
use crate::capture::Capture;
use crate::decode::forged_async::{
    flight_calls, held_back, session, tracing_session, with_args, with_memory,
};
use crate::trace::Trace;

/// `captures` written to OTLP/JSON from pieces with `options`: the bytes of their
/// decoded trace; returns whether their calls were planned (else decoded whole).
fn planned_as_whole(captures: &[Capture], options: &Options) -> bool {
    let trace = Trace::from_captures(captures);
    assert!(!trace.async_spans.is_empty());
    let refs: Vec<&Capture> = captures.iter().collect();
    let mut whole = Vec::new();
    let stats = Otlp::new(&trace, options);
    stats.write_json_to(&mut whole).unwrap();
    let mut from = Vec::new();
    let written = Otlp::write_json_from_captures(&refs, options, &mut from).unwrap();
    assert_eq!(written, stats.stats());
    if whole != from {
        let (a, b) = (
            String::from_utf8_lossy(&whole),
            String::from_utf8_lossy(&from),
        );
        let at = a
            .bytes()
            .zip(b.bytes())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        panic!(
            "differ at {at}:\n{}\n{}",
            &a[at.saturating_sub(300)..(at + 200).min(a.len())],
            &b[at.saturating_sub(300)..(at + 200).min(b.len())]
        );
    }
    pieces::of_captures(&refs, options).is_some_and(|(_, calls)| calls.is_some())
}

#[test]
fn calls_and_their_polls_are_written_from_pieces_with_the_whole_traces_bytes() {
    let options = Options::new();
    let per_process = Options::new().trace_per_process(true);
    let mut planned = 0;
    for seed in 0..12 {
        let capture = session(seed, 1 + seed as usize % 4, 600, 1 + seed as usize % 9);
        planned += usize::from(planned_as_whole(&[capture], &options));
    }
    eprintln!("planned {planned}");
    assert!(planned_as_whole(&[held_back(3_000)], &options));
    assert!(planned_as_whole(&[flight_calls(400, 20_000)], &options));
    assert!(planned_as_whole(&[flight_calls(400, 20_000)], &per_process));
    let capture = with_memory(with_args(session(7, 3, 2_000, 11), 7, 11, true), 11);
    planned_as_whole(&[capture], &options);
}

#[test]
fn tracing_spans_entered_several_times_are_written_from_pieces() {
    let options = Options::new();
    let mut planned = 0;
    for seed in 0..10 {
        let pending = if seed % 3 == 0 { 120 } else { 6 };
        let capture = tracing_session(
            seed,
            1 + seed as usize % 4,
            600,
            1 + seed as usize % 9,
            pending,
        );
        planned += usize::from(planned_as_whole(&[capture], &options));
    }
    eprintln!("planned {planned}");
    planned_as_whole(&[tracing_session(40, 3, 20_000, 97, 40)], &options);
}
