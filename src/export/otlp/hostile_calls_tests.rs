//! A hostile pass on OTLP/JSON of captures with async calls written piece by piece
//! ([`calls`](super::calls)): sessions forged by a seeded executor (tasks of nested calls
//! polled on any thread, ties in time, calls begun far from their first poll, `tracing`
//! spans entered on several threads, several sessions of one process, flight recorder
//! windows), and sessions recorded for real: each written from pieces with the whole trace's
//! bytes, or decoded whole.

use super::hostile_executor::{Exec, Kind, exec, executor, window};
use super::{Options, Otlp, pieces};
use crate::capture::Capture;
use crate::decode::forged_async::Rng;
use crate::record::callsite::Callsite;
use crate::trace::Trace;

/// `captures` written to OTLP/JSON from pieces and from their decoded trace: the same bytes
/// and stats. Returns whether their calls were planned (else decoded whole).
pub(crate) fn same_bytes(captures: &[Capture], options: &Options, what: &str) -> bool {
    let trace = Trace::from_captures(captures);
    let refs: Vec<&Capture> = captures.iter().collect();
    let mut whole = Vec::new();
    let otlp = Otlp::new(&trace, options);
    otlp.write_json_to(&mut whole).unwrap();
    let mut from = Vec::new();
    let written = Otlp::write_json_from_captures(&refs, options, &mut from)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    if whole != from {
        let at = (whole.iter().zip(&from))
            .position(|(x, y)| x != y)
            .unwrap_or(whole.len().min(from.len()));
        let around = |b: &[u8]| {
            String::from_utf8_lossy(&b[at.saturating_sub(200)..(at + 200).min(b.len())])
                .into_owned()
        };
        panic!(
            "{what}: {} and {} bytes, differ at {at}:\n{}\n{}",
            whole.len(),
            from.len(),
            around(&whole),
            around(&from)
        );
    }
    assert_eq!(written, otlp.stats(), "{what}");
    pieces::of_captures(&refs, options).is_some_and(|(_, calls)| calls.is_some())
}

/// Requests made piece by piece, encoded as a push encodes them.
#[derive(Default)]
struct Encoded(Vec<Vec<u8>>);

impl pieces::Sink for Encoded {
    fn send(
        &mut self,
        request: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
        _spans: usize,
    ) -> std::io::Result<()> {
        use prost::Message;
        self.0.push(request.encode_to_vec());
        Ok(())
    }
}

/// `captures` pushed from pieces ([`Otlp::push_from_captures`]'s walk): the requests and
/// bytes on the wire of their decoded trace ([`Otlp::encode_requests`]), the same stats.
/// Returns whether their calls were planned.
pub(crate) fn same_wire(captures: &[Capture], options: &Options, what: &str) -> bool {
    let trace = Trace::from_captures(captures);
    let refs: Vec<&Capture> = captures.iter().collect();
    let otlp = Otlp::new(&trace, options);
    let whole: Vec<Vec<u8>> = otlp.encode_requests().collect();
    let Some((pieces, calls)) = pieces::of_captures(&refs, options) else {
        return false;
    };
    let mut sink = Encoded::default();
    let stats = pieces::walk((&pieces, calls.as_ref()), options, &mut sink)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(stats, otlp.stats(), "{what}");
    assert_eq!(sink.0.len(), whole.len(), "{what}: requests");
    for (at, (a, b)) in whole.iter().zip(&sink.0).enumerate() {
        assert!(a == b, "{what}: request {at} differs");
    }
    calls.is_some()
}

#[test]
fn forged_executors_are_written_from_pieces_with_the_whole_traces_bytes() {
    let options = Options::new();
    let (mut planned, mut with_calls) = (0, 0);
    for seed in 0..48 {
        let e = exec(seed);
        let capture = executor(e);
        if Trace::from_capture(&capture).async_spans.is_empty() {
            continue;
        }
        with_calls += 1;
        let what = format!("executor seed {seed}");
        planned += usize::from(same_bytes(&[capture], &options, &what));
    }
    eprintln!("{planned} of {with_calls} planned");
    assert!(with_calls >= 40, "{with_calls} with calls");
    assert!(
        planned * 2 >= with_calls,
        "{planned} of {with_calls} planned"
    );
}

#[test]
fn sessions_of_one_process_that_interleave_are_written_as_decoded() {
    let options = Options::new();
    let per_process = Options::new().trace_per_process(true);
    let mut planned = 0;
    for seed in 0..16 {
        // Two to four sessions from the same tick (ties between their calls' starts), of
        // one process, or of two.
        let mut rng = Rng::of_seed(seed + 77);
        let sessions = 2 + rng.below(3) as usize;
        let captures: Vec<Capture> = (0..sessions as u64)
            .map(|s| {
                let mut capture = executor(Exec {
                    stride: rng.below(3),
                    ties: seed % 3 == 0,
                    kind: Kind::Profile,
                    steps: 150 + rng.below(150) as usize,
                    ..exec(seed * 16 + s)
                });
                if seed % 4 == 3 {
                    capture.header.process_id = 40 + (s % 2) as u32;
                }
                capture
            })
            .collect();
        let what = format!("sessions of seed {seed}");
        planned += usize::from(same_bytes(&captures, &options, &what));
        same_bytes(&captures, &per_process, &what);
    }
    eprintln!("{planned} of 16 planned");
    assert!(planned >= 8, "{planned} of 16 planned");
}

#[test]
fn flight_windows_that_cut_calls_are_written_as_decoded() {
    let options = Options::new();
    let mut planned = 0;
    for seed in 0..16 {
        let capture = executor(Exec {
            kind: [Kind::Profile, Kind::Mixed][seed as usize % 2],
            ..exec(seed + 500)
        });
        let cut = 10 + (capture.end_tick - 10) * (1 + seed % 3) / 5;
        let windowed = window(&capture, cut);
        if Trace::from_capture(&windowed).async_spans.is_empty() {
            continue;
        }
        let what = format!("window of seed {seed} at {cut}");
        planned += usize::from(same_bytes(&[windowed], &options, &what));
    }
    eprintln!("{planned} windows planned");
}

#[test]
fn hostile_executors_are_written_as_decoded() {
    let options = Options::new();
    let (mut planned, mut with_calls) = (0, 0);
    let seeds: u64 = std::env::var("HOSTILE_SEEDS").map_or(48, |s| s.parse().unwrap());
    for seed in 0..seeds {
        let capture = executor(Exec {
            chaos: true,
            ..exec(seed + 9_000)
        });
        if Trace::from_capture(&capture).async_spans.is_empty() {
            continue;
        }
        with_calls += 1;
        let what = format!("hostile executor seed {seed}");
        planned += usize::from(same_bytes(&[capture], &options, &what));
    }
    eprintln!("{planned} of {with_calls} planned");
}

#[test]
fn executors_with_events_arguments_links_and_memory_are_written_as_decoded() {
    use crate::decode::forged_async::{with_args, with_memory};
    let options = Options::new();
    let mut planned = 0;
    for seed in 0..24 {
        let e = Exec {
            events: true,
            chaos: seed % 4 == 3,
            ..exec(seed + 3_000)
        };
        let mut capture = executor(e);
        capture = match seed % 3 {
            0 => capture,
            1 => with_args(capture, seed, 1 + seed as usize % 9, true),
            _ => with_memory(with_args(capture, seed, 5, seed % 2 == 0), 3),
        };
        if Trace::from_capture(&capture).async_spans.is_empty() {
            continue;
        }
        let what = format!("executor with events, seed {seed}");
        planned += usize::from(same_bytes(&[capture], &options, &what));
    }
    eprintln!("{planned} of 24 planned");
}

#[test]
fn thousands_of_calls_of_sessions_that_interleave_cross_chunks_as_decoded() {
    let options = Options::new();
    let big = |seed: u64, process: u32| {
        let mut capture = executor(Exec {
            threads: 3,
            steps: 15_000,
            chunk: 64,
            kind: Kind::Profile,
            stride: 1,
            ties: false,
            strays: false,
            ..exec(seed)
        });
        capture.header.process_id = process;
        capture
    };
    let captures = [big(1, 5), big(2, 5), big(3, 6)];
    let trace = Trace::from_captures(&captures);
    eprintln!("{} calls", trace.async_spans.len());
    assert!(trace.async_spans.len() > 4096 + 744);
    assert!(
        same_bytes(&captures, &options, "thousands"),
        "decoded whole"
    );
}

#[test]
fn pushes_in_small_batches_are_the_whole_traces_requests() {
    let options = [
        Options::new().batch_spans(1),
        Options::new().batch_spans(7).service_name("svc"),
        Options::new().max_batch_bytes(600).trace_per_process(true),
        Options::new().batch_spans(64).max_batch_bytes(4_000),
    ];
    let mut planned = 0;
    for seed in 0..12 {
        let capture = executor(Exec {
            events: seed % 2 == 0,
            ties: false,
            ..exec(seed + 7_000)
        });
        let mut other = executor(Exec {
            ties: seed % 3 == 0,
            ..exec(seed + 7_100)
        });
        other.header.process_id = 3;
        let captures = [capture, other];
        let options = &options[seed as usize % 4];
        let what = format!("push of seed {seed}");
        planned += usize::from(same_wire(&captures, options, &what));
        same_bytes(&captures, options, &what);
    }
    eprintln!("{planned} of 12 planned");
    assert!(planned >= 6, "{planned} of 12 planned");
}

/// Two sessions of process 42 that recorded one thread (id 1) at once, as two sessions of a
/// process may: the first a `query` scope from 10 to 40 (with `calls`, the poll of a `fetch`
/// call), the second a `query` from 15 to 30 holding a counter sample at 20 and an instant
/// at 25.
fn one_thread_twice(calls: bool) -> [Capture; 2] {
    use crate::decode::forged_async::{FETCH, HANDLE, PARSE, QUERY, with_payload};
    use crate::record::event::{RawEvent, RawKind};
    let mut first = Vec::new();
    if calls {
        first.extend(with_payload(RawKind::AsyncBegin, &FETCH, 10, 1));
        first.extend(with_payload(RawKind::PollBegin, &FETCH, 10, 1));
        first.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 10), 40));
        first.extend(with_payload(RawKind::AsyncEnd, &FETCH, 40, 1));
    } else {
        first.push(RawEvent::begin(QUERY.id(), 10));
        first.push(RawEvent::end(RawEvent::end_key(QUERY.id(), 10), 40));
    }
    let mut second = vec![RawEvent::begin(QUERY.id(), 15)];
    let value = (RawEvent::NUMBER_INT, 3);
    second.extend(RawEvent::sample(
        RawKind::CounterSet,
        HANDLE.id(),
        20,
        value,
    ));
    second.push(RawEvent::new(RawKind::Instant, PARSE.id(), 25));
    second.push(RawEvent::end(RawEvent::end_key(QUERY.id(), 15), 30));
    [first, second].map(|records| {
        let mut capture = Capture::from_records(vec![(1, records)], 0, 100);
        capture.header.process_id = 42;
        capture
    })
}

/// The whole trace places an event on the innermost span open at its time on any thread of
/// its process with its thread's id (of two as deep, the later thread's): here the second
/// session's `query`, whichever session recorded it.
#[test]
fn events_of_sessions_of_one_process_on_one_thread_are_placed_as_decoded() {
    let options = Options::new();
    for calls in [false, true] {
        let captures = one_thread_twice(calls);
        let trace = Trace::from_captures(&captures);
        assert_eq!(trace.threads.len(), 2);
        assert_eq!(trace.processes.len(), 1);
        assert_eq!(trace.async_spans.len(), usize::from(calls));
        same_bytes(
            &captures,
            &options,
            &format!("one thread twice, calls {calls}"),
        );
        same_wire(&captures, &options, "one thread twice");
    }
}

#[test]
fn polls_open_across_the_pieces_of_their_thread_are_written_as_decoded() {
    let options = Options::new();
    for seed in 0..3 {
        let capture = executor(Exec {
            threads: 1 + seed as usize % 2,
            steps: 6_000,
            linger: true,
            chaos: seed == 2,
            ties: false,
            ..exec(seed + 20_000)
        });
        let trace = Trace::from_capture(&capture);
        let most = trace.threads.iter().map(|t| t.spans.len()).max();
        // Read in pieces of 1,024 spans (`summary::WINDOW`).
        assert!(most > Some(1_024), "{most:?} spans");
        let what = format!("lingering seed {seed}");
        assert!(
            same_bytes(&[capture], &options, &what),
            "{what}: decoded whole"
        );
    }
}

/// Threads of a session with calls that hold no span: one with only a call's begin, one
/// with only an instant; a call begun and ended unpolled; a call first polled inside the
/// poll of a call whose first poll was inside a scope of another thread (the trace of both
/// is that scope's).
#[test]
fn threads_without_spans_and_traces_across_threads_are_written_from_pieces() {
    use crate::decode::forged_async::{FETCH, HANDLE, PARSE, QUERY, with_payload};
    use crate::record::event::{RawEvent, RawKind::*};
    let end =
        |site: &'static Callsite, began, at| RawEvent::end(RawEvent::end_key(site.id(), began), at);
    let mut one = with_payload(AsyncBegin, &FETCH, 10, 1).to_vec();
    one.extend(with_payload(AsyncBegin, &HANDLE, 11, 2));
    one.extend(with_payload(AsyncEnd, &HANDLE, 11, 2));
    let mut two = vec![RawEvent::begin(QUERY.id(), 12)];
    two.extend(with_payload(PollBegin, &FETCH, 13, 1));
    two.push(end(&FETCH, 13, 15));
    two.push(end(&QUERY, 12, 16));
    let mut three = with_payload(PollBegin, &FETCH, 20, 1).to_vec();
    three.extend(with_payload(AsyncBegin, &HANDLE, 21, 3));
    three.extend(with_payload(PollBegin, &HANDLE, 21, 3));
    three.push(end(&HANDLE, 21, 22));
    three.push(end(&FETCH, 20, 23));
    three.extend(with_payload(PollBegin, &HANDLE, 30, 3));
    three.push(end(&HANDLE, 30, 31));
    three.extend(with_payload(AsyncEnd, &HANDLE, 31, 3));
    three.extend(with_payload(AsyncEnd, &FETCH, 32, 1));
    let four = vec![RawEvent::new(Instant, PARSE.id(), 14)];
    let records = vec![(1, one), (2, two), (3, three), (4, four)];
    let capture = Capture::from_records(records, 0, 50);
    let trace = Trace::from_capture(&capture);
    assert_eq!(trace.async_spans.len(), 3);
    assert_eq!(trace.instants.len(), 1);
    for options in [Options::new(), Options::new().trace_per_process(true)] {
        let captures = std::slice::from_ref(&capture);
        assert!(
            same_bytes(captures, &options, "spanless threads"),
            "decoded whole"
        );
        assert!(same_wire(captures, &options, "spanless threads"));
    }
}

/// Sessions of one process whose calls all start at one of two ticks (each session's first
/// `n` at 10, the rest at 11): the whole trace orders them by session among each tick, across
/// the blocks of the plans' files and the chunks the calls are sent in.
#[test]
fn calls_of_one_start_in_several_sessions_are_numbered_as_decoded() {
    use crate::decode::forged_async::{FETCH, HANDLE, with_payload};
    use crate::record::event::{RawEvent, RawKind::*};
    let burst = |calls: u32, n: u32, thread: u64| {
        let mut records = Vec::new();
        for span in 1..=calls {
            let (site, at) = match span <= n {
                true => (&FETCH, 10),
                false => (&HANDLE, 11),
            };
            records.extend(with_payload(AsyncBegin, site, at, span));
            records.extend(with_payload(PollBegin, site, at, span));
            records.push(RawEvent::end(RawEvent::end_key(site.id(), at), at));
            records.extend(with_payload(AsyncEnd, site, at, span));
        }
        let mut capture = Capture::from_records(vec![(thread, records)], 0, 20);
        capture.header.process_id = 9;
        capture
    };
    let captures = [
        burst(7, 3, 1),
        burst(2_500, 2_000, 2),
        burst(5, 5, 3),
        burst(1, 0, 4),
    ];
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.async_spans.len(), 7 + 2_500 + 5 + 1);
    let at_10 = trace
        .async_spans
        .iter()
        .take_while(|c| c.start_ns == 10)
        .count();
    assert_eq!(at_10, 3 + 2_000 + 5);
    for options in [Options::new(), Options::new().batch_spans(1_000)] {
        assert!(
            same_bytes(&captures, &options, "one start"),
            "decoded whole"
        );
        assert!(same_wire(&captures, &options, "one start"));
    }
}
