//! Exports and call trees made from captures as they are decoded, piece by piece
//! (`export::write_file_from_captures`, `Table::from_captures`: what `tickscope convert` and
//! `tickscope table --tree` do): the same events and rows as the whole trace's, with exact
//! counts.
#![cfg(feature = "enabled")]

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::{first_difference, scratch, serial_mock};
use tickscope::export::chrome::{self, TimeOrigin};
use tickscope::export::{Format, html, kineto, perfetto, write_file, write_file_from_captures};
use tickscope::table::{Format as TableFormat, Table};
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, counter, instant, scope};

/// Iterations per thread: about 4 scopes each, several pieces of a thread.
const ITERATIONS: u64 = 2_000;

/// Records `threads` threads one after the other, each `ITERATIONS` times `request`
/// (an argument every 7th) holding `parse` and `handle` holding `query`, with edges on one
/// nanosecond (zero increments), instants and counter samples. On the last thread, when
/// `out_of_order`, iteration 1500 drops `handle` before `query` (a scope outliving its
/// parent: an extra lane first needed past the thread's first piece). Then an instant and a
/// counter sample outside every scope, and a scope left open at the stop. Reads the capture
/// back from a file.
pub(crate) fn capture(name: &str, threads: u64, out_of_order: bool) -> Vec<Capture> {
    let (_serial, m) = serial_mock();
    let prof = Profiler::builder().current_thread().start();
    for t in 0..threads {
        let m = m.clone();
        let swap = out_of_order && t + 1 == threads;
        tickscope::thread::Builder::new()
            .name(format!("worker-{t}"))
            .spawn(move || {
                for i in 0..ITERATIONS {
                    let request = if i % 7 == 0 {
                        scope!("request", i = i, kind = "seventh")
                    } else {
                        scope!("request")
                    };
                    m.increment(i % 3);
                    {
                        let _parse = scope!("parse");
                        m.increment(10 + i % 2);
                    }
                    if i % 100 == 0 {
                        instant!("checkpoint", at = i);
                        counter!("done", set = i);
                    }
                    let handle = scope!("handle");
                    m.increment(i % 2);
                    let query = scope!("query");
                    m.increment(5);
                    if swap && i == 1_500 {
                        drop(handle);
                        m.increment(3);
                        drop(query);
                    } else {
                        drop(query);
                        drop(handle);
                    }
                    m.increment(i % 2);
                    drop(request);
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }
    // Events outside every scope.
    instant!("between threads");
    counter!("done", set = 0u64);
    m.increment(1u64);
    let _open = scope!("left open");
    m.increment(100u64);
    prof.stop();
    let path = scratch(name);
    prof.write_capture(&path).unwrap();
    Capture::read_all(&path).unwrap()
}

/// The file `format` writes from the whole trace of `captures`, and the one it writes from the
/// captures as they are decoded.
pub(crate) fn both(captures: &[Capture], format: &dyn Format, name: &str) -> (Vec<u8>, Vec<u8>) {
    let (whole, pieces) = (scratch(&format!("{name}-whole")), scratch(name));
    write_file(&Trace::from_captures(captures), &whole, format).unwrap();
    let refs: Vec<&Capture> = captures.iter().collect();
    write_file_from_captures(&refs, &pieces, format).unwrap();
    (
        std::fs::read(&whole).unwrap(),
        std::fs::read(&pieces).unwrap(),
    )
}

/// The events of a Chrome JSON file (one a line), sorted, and the document parsed.
pub(crate) fn chrome_events(bytes: &[u8]) -> (Vec<String>, serde_json::Value) {
    let doc: serde_json::Value = serde_json::from_slice(bytes).expect("valid JSON");
    let mut lines: Vec<String> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.to_string())
        .collect();
    lines.sort();
    (lines, doc)
}

/// The packets of a Perfetto trace (field 1 of `Trace`, each length-delimited), in file order.
fn packets(bytes: &[u8]) -> Vec<&[u8]> {
    let mut at = 0;
    let mut out = Vec::new();
    let varint = |at: &mut usize| {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            let b = bytes[*at];
            *at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return value;
            }
            shift += 7;
        }
    };
    while at < bytes.len() {
        assert_eq!(varint(&mut at), (1 << 3) | 2, "a packet field at {at}");
        let len = varint(&mut at) as usize;
        out.push(&bytes[at..at + len]);
        at += len;
    }
    out
}

/// Counts of each event kind (`ph`) and name of a Chrome document.
fn kinds(doc: &serde_json::Value) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for e in doc["traceEvents"].as_array().unwrap() {
        let key = (
            e["ph"].as_str().unwrap().to_owned(),
            e["name"].as_str().unwrap_or("").to_owned(),
        );
        *counts.entry(key).or_default() += 1;
    }
    counts
}

#[test]
fn nested_threads_are_written_with_the_same_bytes() {
    let captures = capture("pieces-nested.tscope", 2, false);
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.threads.len(), 3);
    assert_eq!(trace.spans().count() as u64, 2 * 4 * ITERATIONS + 1);

    let (whole, pieces) = both(&captures, &chrome::Options::new(), "pieces-nested.json");
    assert!(whole == pieces, "Chrome JSON differs");
    let (_, doc) = chrome_events(&pieces);
    let counts = kinds(&doc);
    for name in ["request", "parse", "handle", "query"] {
        assert_eq!(counts[&("X".into(), name.into())], 2 * ITERATIONS as usize);
    }
    assert_eq!(counts[&("X".into(), "left open".into())], 1);
    assert_eq!(counts[&("i".into(), "checkpoint".into())], 2 * 20);
    assert_eq!(counts[&("C".into(), "done".into())], 2 * 20 + 1);
    assert_eq!(counts[&("i".into(), "between threads".into())], 1);
    let seventh = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["args"]["kind"] == "seventh")
        .count();
    assert_eq!(seventh, 2 * ITERATIONS.div_ceil(7) as usize);
    // Edges on one nanosecond were moved apart: the pieces carried the last edge over.
    assert!(
        doc.to_string().contains("\"dur\":0.009"),
        "a moved edge is written"
    );

    let unix = chrome::Options::new().time_origin(TimeOrigin::UnixEpoch);
    let (whole, pieces) = both(&captures, &unix, "pieces-nested-unix.json");
    assert!(whole == pieces, "Chrome JSON on Unix time differs");

    // Kineto's dialect moves times (whole microseconds for its readers): the pieces carried
    // each lane's last edge over.
    let (whole, pieces) = both(
        &captures,
        &kineto::Options::new(0, 1),
        "pieces-nested.kineto.json",
    );
    assert!(whole == pieces, "Kineto JSON differs");
    let (_, doc) = chrome_events(&pieces);
    let counts = kinds(&doc);
    for name in ["request", "parse", "handle", "query"] {
        assert_eq!(counts[&("X".into(), name.into())], 2 * ITERATIONS as usize);
    }

    let (whole, pieces) = both(
        &captures,
        &perfetto::Options::new(),
        "pieces-nested.pftrace",
    );
    assert!(whole == pieces, "Perfetto differs");
    let absolute = perfetto::Options::new().delta_times(false);
    let (whole, pieces) = both(&captures, &absolute, "pieces-nested-abs.pftrace");
    assert!(whole == pieces, "Perfetto with absolute times differs");
}

#[test]
fn a_lane_first_needed_in_a_later_piece_gives_the_same_events() {
    let captures = capture("pieces-lanes.tscope", 2, true);
    let trace = Trace::from_captures(&captures);
    let spans = trace.spans().count();
    assert_eq!(spans as u64, 2 * 4 * ITERATIONS + 1);

    let (whole, pieces) = both(&captures, &chrome::Options::new(), "pieces-lanes.json");
    let ((whole_events, whole_doc), (piece_events, _)) =
        (chrome_events(&whole), chrome_events(&pieces));
    assert_eq!(whole_events.len(), piece_events.len());
    assert!(whole_events == piece_events, "the events differ");
    let lane = whole_doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["args"]["name"] == "worker-1 (overlapping scopes 1)")
        .count();
    assert_eq!(lane, 1, "the extra lane is named once");

    let kineto = kineto::Options::new(0, 1);
    let (whole, pieces) = both(&captures, &kineto, "pieces-lanes.kineto.json");
    let (whole, pieces) = (chrome_events(&whole).0, chrome_events(&pieces).0);
    assert_eq!(whole.len(), pieces.len());
    assert!(whole == pieces, "the Kineto events differ");

    let (whole, pieces) = both(&captures, &perfetto::Options::new(), "pieces-lanes.pftrace");
    let (mut a, mut b) = (packets(&whole), packets(&pieces));
    assert_eq!(a.len(), b.len());
    a.sort_unstable();
    b.sort_unstable();
    assert!(a == b, "the packets differ");
}

#[cfg(feature = "otlp")]
#[test]
fn otlp_json_is_written_with_the_same_bytes() {
    use std::time::Duration;
    use tickscope::export::otlp::{Options, Otlp};

    let captures = capture("pieces-otlp.tscope", 2, true);
    let refs: Vec<&Capture> = captures.iter().collect();
    let trace = Trace::from_captures(&captures);
    let cases = [
        Options::new().service_name("pieces"),
        Options::new().sample_roots(3).batch_spans(1_000),
        Options::new()
            .min_duration(Duration::from_nanos(8))
            .max_depth(1)
            .max_batch_bytes(100_000),
        Options::new().trace_per_process(true).batch_spans(1),
    ];
    for options in cases {
        let otlp = Otlp::new(&trace, &options);
        let mut whole = Vec::new();
        otlp.write_json_to(&mut whole).unwrap();
        let mut pieces = Vec::new();
        let stats = Otlp::write_json_from_captures(&refs, &options, &mut pieces).unwrap();
        assert_eq!(stats, otlp.stats(), "{options:?}");
        assert!(whole == pieces, "{options:?}: the OTLP/JSON differs");
    }
    let stats = Otlp::new(&trace, &Options::new()).stats();
    assert_eq!(stats.sent, 2 * 4 * ITERATIONS + 1);
    // 40 instants and 40 samples on `request` spans, one of each outside every scope.
    assert_eq!((stats.events, stats.event_spans), (82, 1));
}

/// A table rendered from captures and from their decoded trace.
pub(crate) type Rendered = (String, String);

/// A table of `captures` as text, JSON and CSV, each made by `table` from the captures as they
/// are decoded (`Table::from_captures`) and from their decoded trace (`Table::new`).
pub(crate) fn tables_of(captures: &[Capture]) -> impl Fn(fn(Table) -> Table) -> [Rendered; 3] {
    let decoded = Arc::new(Trace::from_captures(captures));
    let mut file = Vec::new();
    for capture in captures {
        capture.write_to(&mut file).unwrap();
    }
    move |table: fn(Table) -> Table| {
        let captures = Capture::from_vec(file.clone()).unwrap();
        let from_captures = table(Table::from_captures(captures));
        let from_trace = table(Table::new(decoded.clone()));
        [TableFormat::Text, TableFormat::Json, TableFormat::Csv]
            .map(|f| (from_captures.render(f), from_trace.render(f)))
    }
}

#[test]
fn call_trees_and_split_tables_of_captures_are_the_decoded_ones() {
    let captures = capture("pieces-tree.tscope", 2, true);
    let tables = tables_of(&captures);
    for (pieces, whole) in tables(|t| t.tree(true)) {
        assert_eq!(pieces, whole);
    }
    for (pieces, whole) in tables(|t| t.tree(true).by_thread(true)) {
        assert_eq!(pieces, whole);
    }
    for (pieces, whole) in tables(|t| t.by_origin(true)) {
        assert_eq!(pieces, whole);
    }
    for (pieces, whole) in tables(|t| t.by_arg("kind")) {
        assert_eq!(pieces, whole);
    }
    let [(by_i, whole), ..] = tables(|t| t.by_arg("i"));
    assert_eq!(by_i, whole);
    // A row per value of `i` recorded (every 7th request), on both threads.
    let rows = by_i
        .lines()
        .filter(|l| l.trim_start().starts_with("request"))
        .count();
    assert_eq!(rows as u64, ITERATIONS.div_ceil(7) + 1, "{by_i}");
    let [(text, _), ..] = tables(|t| t.tree(true));
    // The swapped `query` (its parent `handle` ended first) is where it was entered.
    let queries: Vec<&str> = text.lines().filter(|l| l.contains("query")).collect();
    assert_eq!(queries.len(), 1, "{text}");
    assert!(
        queries[0].contains(&format!("{}", 2 * ITERATIONS)),
        "{text}"
    );
}

/// Chrome JSON, Perfetto, the HTML report and (with the feature) OTLP/JSON of `captures`,
/// written from the whole trace and piece by piece, are the same bytes.
fn same_bytes(captures: &[Capture], name: &str) {
    for (format, ext) in [
        (&chrome::Options::new() as &dyn Format, "json"),
        (&perfetto::Options::new(), "pftrace"),
        (&html::Options::new(), "html"),
    ] {
        let (whole, pieces) = both(captures, format, &format!("{name}.{ext}"));
        assert!(whole == pieces, "{name}.{ext} differs");
    }
    #[cfg(feature = "otlp")]
    {
        let (whole, pieces) = otlp_json_both(captures);
        assert!(whole == pieces, "{name}.otlp.json differs");
    }
}

/// OTLP/JSON of `captures` (default options) written from the whole trace, and from the
/// captures as they are decoded.
#[cfg(feature = "otlp")]
pub(crate) fn otlp_json_both(captures: &[Capture]) -> (Vec<u8>, Vec<u8>) {
    use tickscope::export::otlp::{Options, Otlp};
    let trace = Trace::from_captures(captures);
    let mut whole = Vec::new();
    Otlp::new(&trace, &Options::new())
        .write_json_to(&mut whole)
        .unwrap();
    let refs: Vec<&Capture> = captures.iter().collect();
    let mut pieces = Vec::new();
    Otlp::write_json_from_captures(&refs, &Options::new(), &mut pieces).unwrap();
    (whole, pieces)
}

#[test]
fn a_flight_recorders_window_and_a_salvaged_session_give_the_same_bytes() {
    let (_serial, m) = serial_mock();
    // 4 chunks of 4096 words (an entry or exit each): the window opens inside `warm`, cut at
    // its start.
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(4 * 4096 * 8)
        .start();
    let warm = scope!("warm");
    for _ in 0..3_000 {
        let _inner = scope!("inner");
        m.increment(3u64);
    }
    drop(warm);
    for i in 0..5_000u64 {
        let _request = scope!("request");
        m.increment(i % 2);
        let _parse = scope!("parse");
        m.increment(4u64);
    }
    prof.stop();
    let capture = prof.capture();
    assert!(capture.overwritten_events() > 0);
    let trace = capture.decode();
    assert!(trace.threads[0].spans[0].cut_at_start);
    let mut file = Vec::new();
    capture.write_to(&mut file).unwrap();
    same_bytes(&Capture::from_vec(file.clone()).unwrap(), "pieces-flight");

    // The same session without its footer and last records (an eighth of the packed file:
    // the footer and part of the last chunk): salvaged.
    file.truncate(file.len() - file.len() / 8);
    let salvaged = Capture::from_vec(file).unwrap();
    assert!(salvaged[0].warnings().iter().any(|w| w.contains("footer")));
    same_bytes(&salvaged, "pieces-salvaged");
}

/// Top-level scopes of no length, back to back on one nanosecond or a few apart,
/// thousands of them (piece boundaries fall between zero-length siblings, whose Kineto
/// microseconds carry over), nested ones of no length, and a thread whose scope is open at
/// the stop over 2,000 scopes (carried from piece to piece): Kineto and Chrome JSON from
/// pieces hold the whole trace's events, with the same times.
#[test]
fn zero_length_top_level_scopes_give_the_same_bytes() {
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        for t in 0..3u64 {
            let m = m.clone();
            tickscope::thread::spawn(move || {
                for i in 0..4_000u64 {
                    {
                        let _z = scope!("zero");
                    }
                    if (i + t) % 3 == 0 {
                        m.increment(1);
                    }
                    if i % 5 == 0 {
                        let _a = scope!("a");
                        let _b = scope!("b");
                        m.increment(i % 2);
                    }
                    if i % 250 == 0 {
                        m.increment(999);
                    }
                }
            })
            .join()
            .unwrap();
        }
        // A thread whose scope is open at the stop, after many closed ones.
        let (tx, rx) = std::sync::mpsc::channel();
        let (tx2, rx2) = std::sync::mpsc::channel::<()>();
        let mm = m.clone();
        let h = tickscope::thread::spawn(move || {
            for _ in 0..3_000 {
                let _z = scope!("zero");
            }
            let _open = scope!("open at stop");
            for _ in 0..2_000 {
                let _z = scope!("zero inside");
                mm.increment(1);
            }
            tx.send(()).unwrap();
            rx2.recv().unwrap();
        });
        rx.recv().unwrap();
        m.increment(7);
        prof.stop();
        tx2.send(()).unwrap();
        h.join().unwrap();
        let path = scratch("pieces-zero.tscope");
        prof.write_capture(&path).unwrap();
        Capture::read_all(&path).unwrap()
    };
    for (format, name) in [
        (
            &kineto::Options::new(0, 1) as &dyn Format,
            "pieces-zero.kineto.json",
        ),
        (&chrome::Options::new(), "pieces-zero.json"),
    ] {
        let refs: Vec<&Capture> = captures.iter().collect();
        assert!(
            format.write_captures(&refs, &mut std::io::sink()).is_some(),
            "{name}: written piece by piece"
        );
        let (whole, pieces) = both(&captures, format, name);
        // The scope open at the stop holds more than two pieces' spans: written in the piece
        // where it ends (the last), after the scopes inside it; every other event in place.
        assert_eq!(whole.len(), pieces.len(), "{name}");
        assert!(
            chrome_events(&whole).0 == chrome_events(&pieces).0,
            "{name}: the events differ"
        );
        assert_ne!(whole, pieces, "{name}: a scope written later");
        assert!(String::from_utf8_lossy(&whole).contains("open at stop"));
    }
}

/// Records a thread whose `main` scope holds everything it does, with a `phase` scope inside
/// it over each 1,500 iterations (carried open scopes that end between pieces), arguments,
/// edges on one nanosecond, instants and counter samples; and, when `tangled`, a second such
/// thread whose iteration 2,500 drops `handle` before `query` (its pieces stay whole trees).
pub(crate) fn spanning(name: &str, tangled: bool) -> Vec<Capture> {
    let (_serial, m) = serial_mock();
    let prof = Profiler::builder().current_thread().start();
    for t in 0..1 + u64::from(tangled) {
        let m = m.clone();
        tickscope::thread::Builder::new()
            .name(format!("loop-{t}"))
            .spawn(move || {
                let main = scope!("main", role = "loop");
                let mut phase = None;
                for i in 0..4_000u64 {
                    if i % 1_500 == 0 {
                        drop(phase.take());
                        phase = Some(scope!("phase", at = i));
                    }
                    let request = if i % 7 == 0 {
                        scope!("request", i = i)
                    } else {
                        scope!("request")
                    };
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
                    if t == 1 && i == 2_500 {
                        drop(handle);
                        drop(query);
                    } else {
                        drop(query);
                        drop(handle);
                    }
                    drop(request);
                }
                drop(phase);
                m.increment(1);
                drop(main);
            })
            .unwrap()
            .join()
            .unwrap();
    }
    prof.stop();
    let path = scratch(name);
    prof.write_capture(&path).unwrap();
    Capture::read_all(&path).unwrap()
}

/// A scope open over a whole thread (a `main` or a worker loop) no longer makes the thread
/// one piece: its open scopes are carried from piece to piece. Formats written edge by edge
/// (Chrome JSON on Unix time, Perfetto) are the whole trace's bytes; those written a complete
/// event per scope (Chrome JSON, Kineto) hold the whole trace's events, times and ids, the
/// carried scopes written in the piece where they end. Call trees and tables by argument are
/// the decoded trace's. A thread whose guards were dropped out of order is written in whole
/// trees, as before.
#[test]
fn scopes_open_over_pieces_give_the_whole_traces_events() {
    for tangled in [false, true] {
        let name = if tangled {
            "pieces-open-tangled"
        } else {
            "pieces-open"
        };
        let captures = spanning(&format!("{name}.tscope"), tangled);
        let trace = Trace::from_captures(&captures);
        assert_eq!(trace.threads.len(), 1 + usize::from(tangled));
        assert_eq!(trace.threads[0].spans.len(), 1 + 3 + 4 * 4_000);
        for (format, ext) in [
            (&perfetto::Options::new() as &dyn Format, "pftrace"),
            (&perfetto::Options::new().delta_times(false), "abs.pftrace"),
            (
                &chrome::Options::new().time_origin(TimeOrigin::UnixEpoch),
                "unix.json",
            ),
        ] {
            let (whole, pieces) = both(&captures, format, &format!("{name}.{ext}"));
            assert!(
                whole == pieces,
                "{name}.{ext}: {}",
                first_difference(&whole, &pieces)
            );
        }
        for (format, ext) in [
            (&chrome::Options::new() as &dyn Format, "json"),
            (&kineto::Options::new(0, 1), "kineto.json"),
        ] {
            let (whole, pieces) = both(&captures, format, &format!("{name}.{ext}"));
            assert_eq!(whole.len(), pieces.len(), "{name}.{ext}");
            let ((whole_events, doc), (piece_events, _)) =
                (chrome_events(&whole), chrome_events(&pieces));
            assert!(
                whole_events == piece_events,
                "{name}.{ext}: the events differ"
            );
            // The loop thread's scopes open over pieces are written later from pieces.
            assert_ne!(whole, pieces, "{name}.{ext}");
            let counts = kinds(&doc);
            assert_eq!(
                counts[&("X".into(), "main".into())],
                1 + usize::from(tangled)
            );
            assert_eq!(
                counts[&("X".into(), "phase".into())],
                3 * (1 + usize::from(tangled))
            );
            assert_eq!(
                counts[&("X".into(), "query".into())],
                4_000 * (1 + usize::from(tangled))
            );
        }
        let tables = tables_of(&captures);
        for (pieces, whole) in tables(|t| t.tree(true).by_thread(true)) {
            assert_eq!(pieces, whole);
        }
        for (pieces, whole) in tables(|t| t.by_arg("at")) {
            assert_eq!(pieces, whole);
        }
        for (pieces, whole) in tables(|t| t.by_arg("role")) {
            assert_eq!(pieces, whole);
        }
        let [(text, _), ..] = tables(|t| t.by_arg("at"));
        let phases = text
            .lines()
            .filter(|l| l.trim_start().starts_with("phase"))
            .count();
        assert_eq!(phases, 3, "{text}");
    }
}

/// Links between threads (a producer's `submit` scopes, each with a sequence number, and a
/// `retry` scope's link; a consumer's `handle` scopes following from them), over many pieces
/// of each thread, and a link captured outside every scope: the captures are written piece by
/// piece (their flows come from the first pass, by the index of their spans), with the same
/// bytes as the whole trace in Chrome JSON (both time origins), Kineto and Perfetto (delta
/// and absolute times), and with every flow.
#[test]
fn links_between_threads_are_written_piece_by_piece_with_the_same_bytes() {
    use tickscope::Link;
    const JOBS: u64 = 3_000;
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        let mm = m.clone();
        let links: Vec<Link> = tickscope::thread::spawn(move || {
            let mut links = Vec::new();
            for n in 0..JOBS {
                let submit = scope!("submit", seq);
                mm.increment(n % 3);
                links.push(submit.link());
                if n % 500 == 0 {
                    let _retry = scope!("retry");
                    mm.increment(1);
                    links.push(tickscope::link());
                }
            }
            links.push(tickscope::link());
            links
        })
        .join()
        .unwrap();
        let mm = m.clone();
        tickscope::thread::spawn(move || {
            for link in links {
                let _handle = scope!("handle", follows = link);
                mm.increment(2);
                let _inner = scope!("inner");
                mm.increment(1);
            }
        })
        .join()
        .unwrap();
        prof.stop();
        let path = scratch("pieces-links.tscope");
        prof.write_capture(&path).unwrap();
        Capture::read_all(&path).unwrap()
    };
    let trace = Trace::from_captures(&captures);
    let flows = JOBS as usize + JOBS.div_ceil(500) as usize + 1;
    assert_eq!(trace.flows.len(), flows);
    assert_eq!(
        trace.flows.iter().filter(|f| f.origin.is_some()).count(),
        flows - 1
    );
    let refs: Vec<&Capture> = captures.iter().collect();
    for (format, ext) in [
        (&chrome::Options::new() as &dyn Format, "json"),
        (
            &chrome::Options::new().time_origin(TimeOrigin::UnixEpoch),
            "unix.json",
        ),
        (&kineto::Options::new(0, 1), "kineto.json"),
        (&perfetto::Options::new(), "pftrace"),
        (&perfetto::Options::new().delta_times(false), "abs.pftrace"),
    ] {
        assert!(
            format.write_captures(&refs, &mut std::io::sink()).is_some(),
            "{ext}: written piece by piece"
        );
        let (whole, pieces) = both(&captures, format, &format!("pieces-links.{ext}"));
        assert!(
            whole == pieces,
            "{ext}: {}",
            first_difference(&whole, &pieces)
        );
        if ext.ends_with("json") {
            let (_, doc) = chrome_events(&pieces);
            let counts = kinds(&doc);
            let starts: usize = (counts.iter())
                .filter(|((ph, _), _)| ph == "s")
                .map(|(_, n)| n)
                .sum();
            let ends: usize = (counts.iter())
                .filter(|((ph, _), _)| ph == "f")
                .map(|(_, n)| n)
                .sum();
            assert_eq!((starts, ends), (flows - 1, flows - 1), "{ext}");
        }
    }
    // The call tree and the table split by argument, from pieces too; split by origin, from
    // the decoded trace (the links' spans are needed).
    let tables = tables_of(&captures);
    for table in [
        (|t| t.tree(true)) as fn(Table) -> Table,
        |t| t.tree(true).by_thread(true),
        |t| t.by_arg("seq"),
        |t| t.by_origin(true),
    ] {
        for (pieces, whole) in tables(table) {
            assert_eq!(pieces, whole);
        }
    }
    let [(text, _), ..] = tables(|t| t.by_origin(true));
    assert!(
        text.lines()
            .any(|l| l.contains("handle") && l.contains("submit")),
        "{text}"
    );
}

/// Scopes nested 3,000 deep, thousands of short scopes at the bottom and at each of a few
/// levels on the way back: the open scopes (up to 3,000) are carried from piece to piece;
/// Perfetto keeps the whole trace's bytes, Chrome JSON its events, and the call tree its rows.
#[test]
fn scopes_nested_deeper_than_a_piece_are_carried() {
    fn down(depth: u32, m: &tickscope::clock::Mock) {
        let _level = scope!("level");
        m.increment(1);
        if depth > 0 {
            down(depth - 1, m);
        } else {
            for _ in 0..5_000 {
                let _leaf = scope!("leaf");
                m.increment(1);
            }
        }
        if depth.is_multiple_of(1_000) {
            for _ in 0..3_000 {
                let _back = scope!("back");
                m.increment(2);
            }
        }
    }
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        let mm = m.clone();
        tickscope::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || down(2_999, &mm))
            .unwrap()
            .join()
            .unwrap();
        prof.stop();
        let path = scratch("pieces-deep.tscope");
        prof.write_capture(&path).unwrap();
        Capture::read_all(&path).unwrap()
    };
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.threads.len(), 1);
    assert_eq!(trace.threads[0].spans.len(), 3_000 + 5_000 + 3 * 3_000);
    let (whole, pieces) = both(&captures, &perfetto::Options::new(), "pieces-deep.pftrace");
    assert!(whole == pieces, "{}", first_difference(&whole, &pieces));
    let (whole, pieces) = both(&captures, &chrome::Options::new(), "pieces-deep.json");
    assert!(chrome_events(&whole).0 == chrome_events(&pieces).0);
    assert_ne!(whole, pieces, "the levels are written as they end");
    let tables = tables_of(&captures);
    for (pieces, whole) in tables(|t| t.tree(true)) {
        assert_eq!(pieces, whole);
    }
}
