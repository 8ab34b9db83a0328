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

/// Each of `captures` (with calls) written to OTLP/JSON from pieces with `options`, its calls
/// planned, with the whole trace's bytes.
fn assert_planned(captures: &[Capture], options: &Options) {
    assert!(planned_as_whole(captures, options), "decoded whole");
}

#[test]
fn calls_and_their_polls_are_written_from_pieces_with_the_whole_traces_bytes() {
    let options = Options::new();
    let per_process = Options::new().trace_per_process(true);
    for seed in 0..12 {
        let capture = session(seed, 1 + seed as usize % 4, 600, 1 + seed as usize % 9);
        assert_planned(&[capture], &options);
    }
    // Several windows of pairing a thread, with one trace per process; a session salvaged
    // without its footer; beside sessions without calls; calls held back by one open call
    // past those held in memory; a flight recorder's window with calls cut at its start; a
    // session that tracked memory, with arguments and links.
    assert_planned(&[session(50, 3, 20_000, 97)], &per_process);
    let mut salvaged = session(51, 2, 2_000, 13);
    salvaged.salvaged = Some(64);
    assert_planned(&[salvaged], &options);
    let plain = || Capture::from_records(Vec::new(), 0, 0);
    assert_planned(&[plain(), session(52, 2, 500, 8), plain()], &options);
    assert_planned(&[held_back(3_000)], &options);
    assert_planned(&[flight_calls(400, 20_000)], &options);
    assert_planned(&[flight_calls(400, 20_000)], &per_process);
    let capture = with_memory(with_args(session(7, 3, 2_000, 11), 7, 11, true), 11);
    assert_planned(&[capture], &options);
}

#[test]
fn tracing_spans_entered_several_times_are_written_from_pieces() {
    let options = Options::new();
    for capture in crate::decode::forged_async::tracing_sessions() {
        assert_planned(&[capture], &options);
    }
    assert_planned(&[tracing_session(40, 3, 20_000, 97, 40)], &options);
    let mut salvaged = tracing_session(41, 2, 2_000, 13, 20);
    salvaged.salvaged = Some(64);
    assert_planned(&[salvaged], &options);
}

#[test]
fn folded_or_sampled_calls_are_decoded_whole_with_the_same_bytes() {
    let capture = session(3, 3, 600, 5);
    let folds = [
        Options::new().min_duration(std::time::Duration::from_nanos(3)),
        Options::new().max_depth(1),
        Options::new().sample_roots(2),
    ];
    for options in folds {
        assert!(!planned_as_whole(std::slice::from_ref(&capture), &options));
    }
}

/// Forged `tracing` sessions (spans entered on several threads, closes that lie, ties and
/// ticks stepping back, `#[profile]` marks among the enters, salvaged, windows, memory)
/// written to OTLP/JSON from pieces, planned or decoded whole, with the whole trace's bytes.
#[test]
fn hostile_sessions_are_written_as_decoded() {
    use crate::export::forged_tracing::{Forge, forge, forged};
    let options = Options::new();
    let mut planned = 0;
    let forges: [&dyn Fn(u64) -> Forge; 5] = [
        &forge,
        &|seed| Forge {
            twice: true,
            lie: seed % 2 == 0,
            ..forge(seed)
        },
        &|seed| Forge {
            flat: seed % 2 == 0,
            backwards: seed % 2 == 1,
            lie: seed % 3 == 0,
            ..forge(seed)
        },
        &|seed| Forge {
            marks: true,
            cut_lead: seed % 3 == 0,
            salvaged: seed % 4 < 2,
            window: seed % 5 == 0,
            strays: seed % 6 == 0,
            ..forge(seed)
        },
        &|seed| Forge {
            memory: true,
            marks: seed % 2 == 0,
            threads: 3 + seed as usize % 3,
            wide: true,
            ..forge(seed)
        },
    ];
    for (at, make) in forges.iter().enumerate() {
        for seed in 0..8 {
            let capture = forged(make(1_000 + 10 * at as u64 + seed));
            if Trace::from_capture(&capture).async_spans.is_empty() {
                continue;
            }
            planned += usize::from(planned_as_whole(&[capture], &options));
        }
    }
    // Plain forges (the first eight) are all planned.
    assert!(planned >= 8, "{planned} planned");
}

#[test]
fn calls_of_several_sessions_of_processes_of_their_own_are_written_from_pieces() {
    let options = Options::new();
    // Three processes, one holding no call, the calls of the others interleaved in time:
    // numbered process by process.
    let mut other = session(62, 3, 400, 7);
    other.header.process_id = 7;
    let mut plain = Capture::from_records(Vec::new(), 0, 0);
    plain.header.process_id = 8;
    let three = [held_back(1_500), plain, other];
    let trace = Trace::from_captures(&three);
    assert_eq!(trace.processes.len(), 3);
    assert_planned(&three, &options);
    assert_planned(&three, &Options::new().trace_per_process(true));
    // Sessions of one process: their calls merged by start (of one start, the earlier
    // session's first), ties included; the same session twice.
    let mut second = session(63, 1, 200, 3);
    second.header.process_id = 7;
    let shared = [held_back(300), session(62, 3, 400, 7), second];
    let trace = Trace::from_captures(&shared);
    assert_eq!(trace.processes.len(), 2);
    assert_planned(&shared, &options);
    let (a, b) = (session(60, 2, 300, 5), session(61, 2, 300, 5));
    assert_planned(&[a, b], &options);
    let once = session(64, 2, 300, 5);
    let mut bytes = Vec::new();
    once.write_to(&mut bytes).unwrap();
    once.write_to(&mut bytes).unwrap();
    assert_planned(&Capture::from_bytes(&bytes).unwrap(), &options);
    // More calls than a block of the plan's file holds, of two sessions of one process.
    assert_planned(&[held_back(3_000), session(65, 3, 2_000, 11)], &options);
}
