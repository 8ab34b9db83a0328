//! OTLP/JSON of captures whose thread has a scope open over all its others (a `main`, a
//! worker loop): written from pieces that carry the open scopes
//! (`Otlp::write_json_from_captures`), with the whole trace's bytes and counts under each
//! option (depth folding, sampling, one trace per process, batches), the events on the open
//! scopes carried to the piece where they end, each span sent in the order spans end.
#![cfg(feature = "enabled")]

use std::time::Duration;

use crate::common::{first_difference, scratch, serial_mock};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tickscope::export::otlp::{Options, Otlp, Stats};
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, counter, instant, scope};

/// Iterations of the loop inside `main`: four scopes each, many pieces of the thread.
const ITERATIONS: u64 = 5_000;

/// Scopes of the thread: two `before`, `main`, a `phase` per 1,500 iterations, four per
/// iteration, three `tail` holding an `x`.
pub(crate) const SPANS: u64 = 2 + 1 + 4 + 4 * ITERATIONS + 3 * 2;

/// Records one thread: an instant outside every scope, two `before` scopes, then `main`
/// holding a `phase` scope per 1,500 iterations of `request { parse } { handle { query } }`
/// (edges on one nanosecond where the clock does not move), with instants and counter
/// samples on `main` (between phases), on `phase` (every 250 iterations) and on `request`
/// (every 100); then three `tail { x }`.
pub(crate) fn record() -> Vec<Capture> {
    let (_serial, m) = serial_mock();
    let prof = Profiler::builder().current_thread().start();
    m.increment(3);
    instant!("boot");
    m.increment(1);
    for _ in 0..2 {
        let _before = scope!("before");
        m.increment(2);
    }
    {
        let main = scope!("main", role = "loop");
        let mut phase = None;
        for i in 0..ITERATIONS {
            if i % 1_500 == 0 {
                drop(phase.take());
                instant!("between", at = i);
                counter!("phases", set = i);
                m.increment(1);
                phase = Some(scope!("phase", at = i));
            }
            if i % 250 == 0 {
                instant!("tick", at = i);
                counter!("ticks", add = 1);
            }
            let request = scope!("request");
            m.increment(i % 3);
            {
                let _parse = scope!("parse");
                m.increment(i % 2);
            }
            if i % 100 == 0 {
                instant!("checkpoint", at = i);
                counter!("done", set = i);
            }
            let handle = scope!("handle");
            let query = scope!("query");
            m.increment(5);
            drop(query);
            drop(handle);
            drop(request);
        }
        drop(phase);
        instant!("last");
        m.increment(1);
        drop(main);
    }
    for _ in 0..3 {
        let _tail = scope!("tail");
        m.increment(1);
        let _x = scope!("x");
        m.increment(4);
    }
    prof.stop();
    let path = scratch("otlp-carry.tscope");
    prof.write_capture(&path).unwrap();
    Capture::read_all(&path).unwrap()
}

/// The spans' names, in the order the requests hold them.
fn names(json: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    for line in std::str::from_utf8(json).unwrap().lines() {
        let request: ExportTraceServiceRequest = serde_json::from_str(line).unwrap();
        for resource in &request.resource_spans {
            for scope in &resource.scope_spans {
                names.extend(scope.spans.iter().map(|s| s.name.clone()));
            }
        }
    }
    names
}

/// A [`Stats`] with these counts and 0 for the others.
fn stats(sent: u64, folded: u64, sampled_out: u64, events: (u64, u64, u64)) -> Stats {
    let mut stats = Stats::default();
    stats.sent = sent;
    stats.folded = folded;
    stats.sampled_out = sampled_out;
    (stats.events, stats.events_sampled_out, stats.event_spans) = events;
    stats
}

/// Instants and samples: `boot` outside every scope; 4 + 4 between phases and `last` on
/// `main`; 20 + 20 on `phase`; 50 + 50 on `request`.
const EVENTS: u64 = 1 + 9 + 40 + 100;

#[test]
fn otlp_json_of_a_scope_open_over_its_thread_is_written_from_carried_pieces() {
    let captures = record();
    let refs: Vec<&Capture> = captures.iter().collect();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.threads.len(), 1);
    assert_eq!(trace.threads[0].spans.len() as u64, SPANS);
    let requests = ITERATIONS;
    let folded_6ns = 3 * requests + requests.div_ceil(6) + 3;
    let cases = [
        // Every span sent; 9 events on `main`, carried from piece to piece.
        (
            Options::new().service_name("carry"),
            stats(SPANS, 0, 0, (EVENTS, 0, 1)),
        ),
        // Depth 1: the loop's scopes fold into their `phase` (carried, folded over pieces).
        (
            Options::new().max_depth(1).batch_spans(1_000),
            stats(13, 4 * requests, 0, (EVENTS, 0, 1)),
        ),
        // Depth 0: everything folds into its root, `main` folding over every piece.
        (
            Options::new().max_depth(0),
            stats(6, 4 + 4 * requests + 3, 0, (EVENTS, 0, 1)),
        ),
        // Depth 2: `request` kept, what is inside folds into it.
        (
            Options::new().max_depth(2).max_batch_bytes(60_000),
            stats(13 + requests, 3 * requests, 0, (EVENTS, 0, 1)),
        ),
        // Roots 0, 2 (`main`) and 4 kept.
        (
            Options::new().sample_roots(2),
            stats(1 + (SPANS - 8) + 2, 0, 1 + 2 + 2, (EVENTS, 0, 1)),
        ),
        // Roots 0 and 3 kept: `main` sampled out with everything in it and its events.
        (
            Options::new()
                .sample_roots(3)
                .trace_per_process(true)
                .batch_spans(7),
            stats(3, 0, 1 + (SPANS - 8) + 4, (1, EVENTS - 1, 1)),
        ),
        (
            Options::new().trace_per_process(true).batch_spans(333),
            stats(SPANS, 0, 0, (EVENTS, 0, 1)),
        ),
        // Folding by duration: `parse`, `handle` (5 ns) with its `query`, the `request`s of
        // 5 ns (every 6th) and `x` (4 ns) fold; the durations of the spans open at a cut
        // are read first.
        (
            Options::new().min_duration(Duration::from_nanos(6)),
            stats(SPANS - folded_6ns, folded_6ns, 0, (EVENTS, 0, 1)),
        ),
        (
            Options::new()
                .min_duration(Duration::from_nanos(6))
                .max_depth(2)
                .sample_roots(2),
            stats(1 + (SPANS - 8 - 15_834) + 1, 15_834 + 1, 5, (EVENTS, 0, 1)),
        ),
        // Longer than a `phase`: all folds into `main`, carried over every piece.
        (
            Options::new().min_duration(Duration::from_micros(50)),
            stats(6, 4 + 4 * requests + 3, 0, (EVENTS, 0, 1)),
        ),
    ];
    for (options, expect) in cases {
        let otlp = Otlp::new(&trace, &options);
        assert_eq!(otlp.stats(), expect, "{options:?}");
        let mut whole = Vec::new();
        otlp.write_json_to(&mut whole).unwrap();
        let mut pieces = Vec::new();
        let stats = Otlp::write_json_from_captures(&refs, &options, &mut pieces).unwrap();
        assert_eq!(stats, expect, "{options:?}");
        assert!(
            whole == pieces,
            "{options:?}: the OTLP/JSON differs: {}",
            first_difference(&whole, &pieces)
        );
        let names = names(&pieces);
        assert_eq!(names.len() as u64, expect.sent + expect.event_spans);
    }
    // Spans are sent as they end: `main` after everything inside it, then the tails.
    let mut json = Vec::new();
    Otlp::write_json_from_captures(&refs, &Options::new(), &mut json).unwrap();
    let names = names(&json);
    let main = names.iter().position(|n| n == "main").unwrap();
    assert_eq!(main as u64, SPANS - 1 - 6);
    assert_eq!(&names[..3], ["before", "before", "parse"]);
    assert_eq!(names[main - 1], "phase");
    assert_eq!(names[main + 1..main + 3], ["x", "tail"]);
    assert_eq!(names.last().unwrap(), "events outside spans");
}

/// Two threads with a `main` over their loop (`spanning` of the piece tests): the first
/// carried, the second written in whole trees (its guards dropped out of order once).
#[test]
fn a_carried_thread_beside_one_in_whole_trees_gives_the_whole_traces_bytes() {
    let captures = crate::pieces::spanning("otlp-carry-tangled.tscope", true);
    let refs: Vec<&Capture> = captures.iter().collect();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.threads.len(), 2);
    let cases = [
        Options::new(),
        Options::new().max_depth(1).batch_spans(500),
        Options::new().min_duration(Duration::from_nanos(3)),
        Options::new().sample_roots(2).trace_per_process(true),
    ];
    for options in cases {
        let otlp = Otlp::new(&trace, &options);
        let mut whole = Vec::new();
        otlp.write_json_to(&mut whole).unwrap();
        let mut pieces = Vec::new();
        let stats = Otlp::write_json_from_captures(&refs, &options, &mut pieces).unwrap();
        assert_eq!(stats, otlp.stats(), "{options:?}");
        assert_eq!(stats.total(), 2 * (1 + 3 + 4 * 4_000), "{options:?}");
        assert!(
            whole == pieces,
            "{options:?}: the OTLP/JSON differs: {}",
            first_difference(&whole, &pieces)
        );
    }
}
