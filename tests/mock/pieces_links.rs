//! Captures with thousands of links between threads, split by origin and written to OTLP from
//! pieces (`Table::from_captures(..).by_origin(true)`, `Otlp::write_json_from_captures`): the
//! same text and bytes as from the whole trace, whichever thread (earlier, later, the same)
//! captured each link, and for a link captured outside every scope.
#![cfg(feature = "enabled")]

use std::sync::mpsc;

use crate::common::{scratch, serial_mock};
use crate::pieces::tables_of;
use tickscope::trace::Trace;
use tickscope::{Capture, Link, Profiler, scope};

/// Links made by `late`.
const JOBS: u64 = 5_000;

/// Records three threads, one after the other on the mock clock: `early` (first in the trace)
/// opens `start`, then waits; `late` opens `produce` around `JOBS` `submit` scopes, each
/// capturing a link (and every 500th a `retry` inside it capturing another), every 100th
/// followed by an `again` on `late` itself, then captures a link outside every scope; `early`
/// then follows half the links (its origins on a later thread), inside `main` > `batch` (50
/// a batch), each `handle` holding an `inner`; and a third thread `third` follows the other
/// half (its origins on an earlier thread), `handle` at its top level. Each thread's scopes
/// span several pieces, with `main` and `produce` open over all of them.
pub(crate) fn linked(name: &str) -> Vec<Capture> {
    let (_serial, m) = serial_mock();
    let prof = Profiler::builder().current_thread().start();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (links_tx, links_rx) = mpsc::channel::<Vec<Link>>();
    let mm = m.clone();
    let early = tickscope::thread::Builder::new()
        .name("early".into())
        .spawn(move || {
            {
                let _start = scope!("start");
                mm.increment(1);
            }
            ready_tx.send(()).unwrap();
            let links = links_rx.recv().unwrap();
            let _main = scope!("main");
            mm.increment(1);
            for batch in links.chunks(50) {
                let _batch = scope!("batch");
                mm.increment(1);
                for (n, &link) in (0u64..).zip(batch) {
                    let _handle = scope!("handle", follows = link);
                    mm.increment(2 + n % 7);
                    let _inner = scope!("inner");
                    mm.increment(1 + n % 3);
                }
            }
        })
        .unwrap();
    ready_rx.recv().unwrap();
    let mm = m.clone();
    let links = tickscope::thread::Builder::new()
        .name("late".into())
        .spawn(move || {
            let mut links = Vec::new();
            {
                let _produce = scope!("produce");
                mm.increment(1);
                for n in 0..JOBS {
                    let submit = scope!("submit", seq);
                    mm.increment(n % 4);
                    links.push(submit.link());
                    if n % 500 == 0 {
                        let _retry = scope!("retry");
                        mm.increment(1);
                        links.push(tickscope::link());
                    }
                    drop(submit);
                    if n % 100 == 1 {
                        let _again = scope!("again", follows = links[links.len() - 2]);
                        mm.increment(3);
                    }
                }
            }
            mm.increment(1);
            links.push(tickscope::link());
            links
        })
        .unwrap()
        .join()
        .unwrap();
    let (outside, links) = links.split_last().unwrap();
    let (first, second) = links.split_at(links.len() / 2);
    // The link outside every scope goes to `early` too.
    let mut first = first.to_vec();
    first.push(*outside);
    links_tx.send(first).unwrap();
    early.join().unwrap();
    let second = second.to_vec();
    let mm = m.clone();
    tickscope::thread::Builder::new()
        .name("third".into())
        .spawn(move || {
            for (n, link) in (0u64..).zip(second) {
                let _handle = scope!("handle", follows = link);
                mm.increment(1 + n % 5);
            }
        })
        .unwrap()
        .join()
        .unwrap();
    prof.stop();
    let path = scratch(name);
    prof.write_capture(&path).unwrap();
    Capture::read_all(&path).unwrap()
}

/// The flows of `trace`: (count, with an origin on a later thread, on an earlier one, on the
/// same one, without origin).
fn flow_kinds(trace: &Trace) -> [usize; 5] {
    let mut kinds = [trace.flows.len(), 0, 0, 0, 0];
    for flow in &trace.flows {
        let at = match flow.origin {
            Some(o) if o.thread > flow.follower.thread => 1,
            Some(o) if o.thread < flow.follower.thread => 2,
            Some(_) => 3,
            None => 4,
        };
        kinds[at] += 1;
    }
    kinds
}

/// Split by origin from pieces: the whole trace's text, JSON and CSV, with a row per
/// (follower, origin) pair.
#[test]
fn a_table_by_origin_of_links_between_threads_is_the_whole_traces() {
    let captures = linked("links-by-origin.tscope");
    let trace = Trace::from_captures(&captures);
    // 5,000 submits, 10 retries, the one outside every scope; 50 `again`s (more captures
    // than a thread's first pass keeps: those followed are read again).
    assert_eq!(flow_kinds(&trace), [5_061, 2_505, 2_505, 50, 1]);
    let tables = tables_of(&captures);
    for (pieces, whole) in tables(|t| t.by_origin(true)) {
        assert_eq!(pieces, whole);
    }
    let [_, _, (csv, _)] = tables(|t| t.by_origin(true));
    let mut rows: Vec<(&str, &str, u64)> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|cells| ["handle", "again"].contains(&cells[1]))
        .map(|cells| (cells[1], cells[2], cells[4].parse().unwrap()))
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            ("again", "retry", 10),
            ("again", "submit", 40),
            ("handle", "", 1),
            ("handle", "retry", 10),
            ("handle", "submit", 5_000),
        ],
        "{csv}"
    );
}

/// OTLP/JSON from pieces, under sampling, folding by depth and by duration, one trace per
/// process and small batches: the whole trace's bytes and stats, every link to its origin's
/// span (or its ancestor's it folded into, or none when sampled out), also where the
/// follower folds into a scope open over pieces (`main`) and where the origin is on a thread
/// written after its follower's.
#[cfg(feature = "otlp")]
#[test]
fn otlp_json_of_links_between_threads_is_the_whole_traces() {
    use std::time::Duration;
    use tickscope::export::otlp::{Options, Otlp};

    let captures = linked("links-otlp.tscope");
    let refs: Vec<&Capture> = captures.iter().collect();
    let trace = Trace::from_captures(&captures);
    let cases = [
        Options::new(),
        Options::new().sample_roots(2).batch_spans(1_000),
        Options::new().sample_roots(3).max_depth(2),
        Options::new()
            .min_duration(Duration::from_nanos(4))
            .max_depth(1)
            .max_batch_bytes(100_000),
        Options::new().max_depth(0).trace_per_process(true),
        Options::new()
            .min_duration(Duration::from_nanos(3))
            .trace_per_process(true)
            .batch_spans(7),
    ];
    let mut linked_spans = Vec::new();
    for options in cases {
        let otlp = Otlp::new(&trace, &options);
        let mut whole = Vec::new();
        otlp.write_json_to(&mut whole).unwrap();
        let mut pieces = Vec::new();
        let stats = Otlp::write_json_from_captures(&refs, &options, &mut pieces).unwrap();
        assert_eq!(stats, otlp.stats(), "{options:?}");
        assert!(
            whole == pieces,
            "{options:?}: {}",
            crate::common::first_difference(&whole, &pieces)
        );
        linked_spans.push(stats.links);
    }
    // Every link but the one outside every scope; fewer sampled; those of `handle`s folded
    // into `batch` (depth 1) or `main` (depth 0, open over every piece) still there.
    assert_eq!(linked_spans[0], 5_060);
    assert!(
        linked_spans[1] < 5_060 && linked_spans[2] < 5_060,
        "{linked_spans:?}"
    );
    assert_eq!(linked_spans[3..], [5_060, 5_060, 5_060]);
}
