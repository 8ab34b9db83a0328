//! Chrome JSON (both time origins), Kineto and Perfetto of captures with `#[profile] async
//! fn` calls written piece by piece, their calls matched as the threads are read again
//! (`decode::call_stream`): the whole trace's bytes.

use super::Format;
use super::chrome::{self, TimeOrigin};
use super::{kineto, perfetto};
use crate::capture::Capture;
use crate::decode::forged_async::{held_back, session};
use crate::trace::Trace;

/// Each format writes `captures` from pieces, with the bytes of their decoded trace.
fn assert_pieces_are_whole(captures: &[Capture]) {
    let trace = Trace::from_captures(captures);
    assert!(!trace.async_spans.is_empty());
    assert_eq!(exports_written_as_decoded(captures, &trace), 4);
}

/// Each format that writes `captures` from pieces writes the bytes of `trace` (Chrome JSON
/// and Kineto from the session start: the same events, in another order); returns how many
/// formats wrote them from pieces.
pub(crate) fn exports_written_as_decoded(captures: &[Capture], trace: &Trace) -> usize {
    let mut written = 0;
    let refs: Vec<&Capture> = captures.iter().collect();
    let formats: [(&str, &dyn Format); 4] = [
        ("chrome", &chrome::Options::new()),
        (
            "chrome unix",
            &chrome::Options::new().time_origin(TimeOrigin::UnixEpoch),
        ),
        ("kineto", &kineto::Options::new(0, 1)),
        ("perfetto", &perfetto::Options::new()),
    ];
    for (name, format) in formats {
        let mut whole = Vec::new();
        format.write(trace, &mut whole).unwrap();
        let mut pieces = Vec::new();
        let Some(result) = format.write_captures(&refs, &mut pieces) else {
            continue;
        };
        result.unwrap();
        written += 1;
        if whole == pieces {
            continue;
        }
        // Chrome JSON and Kineto from the session start write a scope open over pieces as it
        // ends (after the spans begun inside it before then): the same events, in another
        // order.
        assert!(matches!(name, "chrome" | "kineto"), "{name} differs");
        assert_eq!(whole.len(), pieces.len(), "{name}");
        let events = |bytes: &[u8]| {
            let text = String::from_utf8(bytes.to_vec()).unwrap();
            let mut lines: Vec<String> = (text.lines())
                .map(|l| l.trim_end_matches(',').to_owned())
                .collect();
            lines.sort();
            lines
        };
        assert!(
            events(&whole) == events(&pieces),
            "{name}: the events differ"
        );
    }
    written
}

/// `format` writes `captures` summed from their records (it must), with the bytes of their
/// decoded trace.
fn assert_summed_is_whole(format: &dyn Format, captures: &[Capture], what: &str) {
    let trace = Trace::from_captures(captures);
    assert!(!trace.async_spans.is_empty());
    let refs: Vec<&Capture> = captures.iter().collect();
    let mut whole = Vec::new();
    format.write(&trace, &mut whole).unwrap();
    let mut summed = Vec::new();
    (format.write_captures(&refs, &mut summed))
        .expect("summed from the records")
        .unwrap();
    assert!(whole == summed, "{what} differ");
}

/// The call tree of `captures` (text, JSON, CSV; by thread or not) made of their pieces is
/// their decoded trace's; returns how many async calls it has.
fn assert_trees_are_whole(captures: &[Capture]) -> usize {
    use crate::table::Table;
    use std::sync::Arc;
    let mut bytes = Vec::new();
    for capture in captures {
        capture.write_to(&mut bytes).unwrap();
    }
    let copies = || Capture::from_bytes(&bytes).unwrap();
    let trace = Arc::new(Trace::from_captures(&copies()));
    for by_thread in [false, true] {
        let from_trace = Table::new(trace.clone()).tree(true).by_thread(by_thread);
        let from_captures = Table::from_captures(copies())
            .tree(true)
            .by_thread(by_thread);
        assert_eq!(from_captures.to_string(), from_trace.to_string());
        assert_eq!(from_captures.to_json(), from_trace.to_json());
        assert_eq!(from_captures.to_csv(), from_trace.to_csv());
    }
    trace.async_spans.len()
}

#[test]
fn async_calls_are_written_from_pieces_with_the_whole_traces_bytes() {
    for seed in 0..12 {
        let capture = session(seed, 1 + seed as usize % 4, 600, 1 + seed as usize % 9);
        assert_pieces_are_whole(&[capture]);
    }
    // Several windows of pairing a thread; a session salvaged without its footer.
    assert_pieces_are_whole(&[session(50, 3, 20_000, 97)]);
    let mut salvaged = session(51, 2, 2_000, 13);
    salvaged.salvaged = Some(64);
    assert_pieces_are_whole(&[salvaged]);
    // Beside sessions without calls.
    let plain = || Capture::from_records(Vec::new(), 0, 0);
    assert_pieces_are_whole(&[plain(), session(52, 2, 500, 8), plain()]);
}

#[test]
fn tracing_spans_entered_on_several_threads_are_written_from_pieces() {
    use crate::decode::forged_async::tracing_session;
    for capture in crate::decode::forged_async::tracing_sessions() {
        assert_pieces_are_whole(&[capture]);
    }
    // Several windows of pairing a thread; a session salvaged without its footer; beside a
    // session without calls.
    assert_pieces_are_whole(&[tracing_session(40, 3, 20_000, 97, 40)]);
    let mut salvaged = tracing_session(41, 2, 2_000, 13, 20);
    salvaged.salvaged = Some(64);
    assert_pieces_are_whole(&[salvaged]);
    let plain = || Capture::from_records(Vec::new(), 0, 0);
    assert_pieces_are_whole(&[plain(), tracing_session(42, 2, 500, 8, 10)]);
}

#[test]
fn calls_held_back_by_one_open_call_are_written_in_order() {
    // More calls wait behind the first than are held in memory: they go through a
    // temporary file.
    assert_pieces_are_whole(&[held_back(3_000)]);
}

/// Sessions that each hold calls: the calls of each come in the order they began, merged
/// with the others' in order of their start (ties: the earlier session's first), each of
/// its process.
#[test]
fn calls_of_several_sessions_are_written_from_pieces_in_the_merged_order() {
    // Two sessions of one process, at the same moments: their calls interleave, ties too.
    let two = [session(60, 2, 300, 5), session(61, 2, 300, 5)];
    let trace = Trace::from_captures(&two);
    assert_eq!(trace.processes.len(), 1);
    assert!(interleaved(&two, &trace));
    assert_eq!(exports_written_as_decoded(&two, &trace), 4);
    // Three processes, one holding no call; calls held back behind an open one (through
    // a temporary file) beside the others.
    let mut other = session(62, 3, 400, 7);
    other.header.process_id = 7;
    let mut plain = Capture::from_records(Vec::new(), 0, 0);
    plain.header.process_id = 8;
    let three = [held_back(1_500), plain, other, session(63, 1, 200, 3)];
    let trace = Trace::from_captures(&three);
    assert_eq!(trace.processes.len(), 3);
    let processes: std::collections::BTreeSet<u32> =
        trace.async_spans.iter().map(|c| c.process).collect();
    assert_eq!(processes.into_iter().collect::<Vec<_>>(), [0, 2]);
    assert!(interleaved(&three, &trace));
    assert_eq!(exports_written_as_decoded(&three, &trace), 4);
    // The same session twice: each time a session of its own, its calls tied one to one.
    let once = session(64, 2, 300, 5);
    let mut bytes = Vec::new();
    once.write_to(&mut bytes).unwrap();
    once.write_to(&mut bytes).unwrap();
    let twice = Capture::from_bytes(&bytes).unwrap();
    let trace = Trace::from_captures(&twice);
    assert_eq!(exports_written_as_decoded(&twice, &trace), 4);
}

/// The merged calls of `trace` are not those of `captures` one session after the other.
fn interleaved(captures: &[Capture], trace: &Trace) -> bool {
    let apart: Vec<_> = (captures.iter())
        .flat_map(|c| Trace::from_captures(std::slice::from_ref(c)).async_spans)
        .map(|c| (c.start_ns, c.end_ns))
        .collect();
    let merged: Vec<_> = (trace.async_spans.iter())
        .map(|c| (c.start_ns, c.end_ns))
        .collect();
    apart.len() == merged.len() && apart != merged
}

/// Folded stacks, and the call tree (text, JSON, CSV; by thread or not), of captures with
/// async calls are summed from their records and pieces: a call's polls are frames (nodes)
/// of the threads they ran on, as in the decoded trace.
#[test]
fn folded_stacks_and_call_trees_of_async_calls_are_the_decoded_traces() {
    let sessions = || {
        [
            vec![session(70, 3, 3_000, 11)],
            vec![session(71, 1, 40_000, 64)],
            vec![held_back(3_000)],
        ]
    };
    for captures in sessions() {
        assert_summed_is_whole(&super::folded::Options::new(), &captures, "folded stacks");
        assert!(assert_trees_are_whole(&captures) > 0);
    }
}

/// Folded stacks of `tracing` spans entered several times or on several threads, of a
/// flight recorder's window with async calls, and of marks out of order, are summed from
/// their records: a slice is a frame whether it is a poll or a scope.
#[test]
fn folded_stacks_of_any_marks_are_the_decoded_traces() {
    use crate::decode::forged_async::tracing_session;
    let mut flight = session(72, 2, 2_000, 9);
    flight.cut_start = Some(500);
    for capture in [tracing_session(73, 3, 3_000, 7, 100), flight] {
        assert_summed_is_whole(&super::folded::Options::new(), &[capture], "folded stacks");
    }
}

/// The call tree (text, JSON, CSV; by thread or not) of captures with `tracing` spans
/// entered several times, on several threads, closed on either or never, comes from pieces
/// whose enters' slices are polls or scopes as the summing pass matched them: the decoded
/// trace's.
#[test]
fn call_trees_of_tracing_spans_entered_on_several_threads_are_the_decoded_traces() {
    use crate::decode::forged_async::tracing_session;
    use crate::decode::pieces::Pieces;
    use crate::decode::summary::Summary;
    for (seed, pending) in [(80, 6), (81, 120)] {
        let captures = [
            tracing_session(seed, 3, 4_000, 9, pending),
            session(seed, 2, 500, 7),
        ];
        let refs: Vec<&Capture> = captures.iter().collect();
        let summary = Summary::of(&refs).expect("summed");
        assert!(!summary.tracing_unresolved);
        assert!(summary.threads.iter().any(|t| t.enter_polls.is_some()));
        assert!(Pieces::of_summary_with_polls(&refs, &summary).is_some());
        assert!(assert_trees_are_whole(&captures) > 50);
    }
}

/// pprof profiles of captures with async calls (`#[profile] async fn`s, `tracing` spans
/// entered several times, a flight recorder's window) are summed by stack as the calls are
/// matched again, each call counted once: the decoded trace's bytes.
#[test]
fn pprof_profiles_of_async_calls_are_the_decoded_traces() {
    use crate::decode::forged_async::tracing_session;
    let mut flight = session(74, 2, 2_000, 9);
    flight.cut_start = Some(500);
    let mut salvaged = session(75, 2, 1_000, 13);
    salvaged.salvaged = Some(64);
    let sessions = [
        vec![session(76, 3, 3_000, 11)],
        vec![tracing_session(77, 3, 3_000, 7, 100)],
        vec![flight],
        vec![salvaged],
        vec![session(78, 2, 400, 5), tracing_session(79, 2, 400, 5, 8)],
    ];
    for captures in sessions {
        assert_summed_is_whole(&super::pprof::Options::new(), &captures, "pprof profiles");
    }
}

/// A flight recorder's window with async calls (those begun before it cut at its start come
/// first in the decoded trace, in the order of their first mark), and sessions that tracked
/// memory with async calls (each poll allocating, some freeing): Chrome JSON (both time
/// origins), Kineto, Perfetto and the call tree are written from pieces with the decoded
/// trace's bytes.
#[test]
fn flight_windows_and_tracked_memory_with_async_calls_are_written_from_pieces() {
    use crate::decode::forged_async::{tracing_session, with_allocs};
    use crate::table::Table;
    use std::sync::Arc;
    let mut cut = 0;
    let flight = |mut capture: Capture, at: u64| {
        capture.cut_start = Some(at);
        capture
    };
    let cases = [
        flight(session(90, 2, 1_500, 9), 400),
        flight(session(91, 3, 800, 5), 120),
        flight(tracing_session(92, 3, 800, 7, 20), 300),
        with_allocs(&session(93, 3, 800, 7), 11),
        with_allocs(&flight(session(94, 2, 800, 7), 250), 6),
    ];
    for capture in cases {
        let trace = Trace::from_capture(&capture);
        assert!(!trace.async_spans.is_empty());
        cut += trace.async_spans.iter().filter(|c| c.cut_at_start).count();
        if capture.memory.is_on() {
            let memory = trace.memory.as_ref().expect("tracked");
            assert!(memory.events.len() > 100, "{}", memory.events.len());
        }
        let captures = [capture];
        assert_eq!(exports_written_as_decoded(&captures, &trace), 4);
        let mut bytes = Vec::new();
        captures[0].write_to(&mut bytes).unwrap();
        let copies = || Capture::from_bytes(&bytes).unwrap();
        let trace = Arc::new(Trace::from_captures(&copies()));
        let from_trace = Table::new(trace).tree(true);
        let from_captures = Table::from_captures(copies()).tree(true);
        assert_eq!(from_captures.to_string(), from_trace.to_string());
    }
    assert!(cut > 10, "{cut} calls cut");
    // A window beside sessions of calls (one that tracked memory), merged in order of their
    // start: each session's calls cut at its window start first.
    use crate::decode::forged_async::flight_calls;
    let several = [
        session(95, 2, 400, 5),
        flight_calls(40, 1_010),
        with_allocs(&session(96, 2, 400, 7), 9),
    ];
    let trace = Trace::from_captures(&several);
    assert_eq!(
        trace.async_spans.iter().filter(|c| c.cut_at_start).count(),
        5
    );
    assert_eq!(exports_written_as_decoded(&several, &trace), 4);
}
