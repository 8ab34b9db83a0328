//! A hostile pass over pieces that carry open scopes (`export::write_file_from_captures`,
//! `Format::write_captures`, `Table::from_captures`): threads whose scopes stay open over
//! many pieces, with arguments recorded at entry, deep nesting, edges on one nanosecond at
//! the cuts, zero-length scopes, scopes open at the stop or cut by a flight recorder's window,
//! salvaged captures, several sessions, a thread tangled late, a clock that runs backwards,
//! and records mutated by hand. Each time: Perfetto (delta and absolute times) and Chrome JSON
//! on Unix time are the whole trace's bytes; Chrome JSON and Kineto hold the whole trace's
//! events; call trees and tables by argument are the decoded trace's.
#![cfg(feature = "enabled")]

use std::sync::Arc;

use crate::common::serial_mock;
use crate::pieces::chrome_events;
use tickscope::__private::{RawKind, capture_from_records, capture_records};
use tickscope::collector::SessionWriter;
use tickscope::export::chrome::{self, TimeOrigin};
use tickscope::export::{Format, kineto, perfetto};
use tickscope::table::{Format as TableFormat, Table};
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, counter, instant, scope};

/// What `format` writes from the whole trace of `captures`, and from the captures as they are
/// decoded (`None` when the format does not write them piece by piece).
fn both(captures: &[Capture], format: &dyn Format) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut whole = Vec::new();
    format
        .write(&Trace::from_captures(captures), &mut whole)
        .unwrap();
    let refs: Vec<&Capture> = captures.iter().collect();
    let mut pieces = Vec::new();
    let written = format.write_captures(&refs, &mut pieces);
    (whole, written.map(|r| r.map(|()| pieces).unwrap()))
}

/// How the pieces of a thread relate to the whole trace in Chrome JSON relative to the
/// session start (the one format that shows a scope written later).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Relative {
    /// Written piece by piece, the same bytes (no scope carried, or none written later).
    Same,
    /// Some carried scope is written in the piece where it ends: other bytes, same events.
    Moved,
    /// Not checked (either).
    Either,
}

/// Checks claims 1 to 3 on `captures`: returns the number of `X` events of Chrome JSON.
/// `keys` are the arguments the tables split by.
fn check(captures: &[Capture], name: &str, relative: Relative, keys: &[&str]) -> usize {
    let edge_formats = [
        (&perfetto::Options::new() as &dyn Format, "pftrace"),
        (&perfetto::Options::new().delta_times(false), "abs.pftrace"),
        (
            &chrome::Options::new().time_origin(TimeOrigin::UnixEpoch),
            "unix.json",
        ),
    ];
    for (format, ext) in edge_formats {
        let (whole, pieces) = both(captures, format);
        let pieces = pieces.unwrap_or_else(|| panic!("{name}.{ext}: not written in pieces"));
        assert!(
            whole == pieces,
            "{name}.{ext}: {}",
            crate::common::first_difference(&whole, &pieces)
        );
    }
    let mut complete = 0;
    for (format, ext) in [
        (&chrome::Options::new() as &dyn Format, "json"),
        (&kineto::Options::new(0, 1), "kineto.json"),
    ] {
        let (whole, pieces) = both(captures, format);
        let pieces = pieces.unwrap_or_else(|| panic!("{name}.{ext}: not written in pieces"));
        assert_eq!(whole.len(), pieces.len(), "{name}.{ext}");
        let (w, p) = (chrome_events(&whole).0, chrome_events(&pieces).0);
        assert_eq!(w.len(), p.len(), "{name}.{ext}");
        if let Some(at) = (0..w.len()).find(|&i| w[i] != p[i]) {
            panic!("{name}.{ext}: event {at} differs:\n{}\n{}", w[at], p[at]);
        }
        match relative {
            Relative::Same => assert!(whole == pieces, "{name}.{ext}: bytes differ"),
            Relative::Moved => assert!(whole != pieces, "{name}.{ext}: nothing carried"),
            Relative::Either => {}
        }
        complete = w.iter().filter(|e| e.contains("\"ph\":\"X\"")).count();
    }
    let decoded = Arc::new(Trace::from_captures(captures));
    let mut file = Vec::new();
    for capture in captures {
        capture.write_to(&mut file).unwrap();
    }
    // A call tree, one split by thread, and a table by each argument key.
    let mut cases: Vec<Option<&str>> = vec![None, Some("")];
    cases.extend(keys.iter().map(|&key| Some(key)));
    for case in cases {
        let table = |t: Table| match case {
            None => t.tree(true),
            Some("") => t.tree(true).by_thread(true),
            Some(key) => t.by_arg(key),
        };
        let from_captures = table(Table::from_captures(
            Capture::from_vec(file.clone()).unwrap(),
        ));
        let from_trace = table(Table::new(decoded.clone()));
        for format in [TableFormat::Text, TableFormat::Json, TableFormat::Csv] {
            assert_eq!(
                from_captures.render(format),
                from_trace.render(format),
                "{name}: {case:?} {format:?}"
            );
        }
    }
    complete
}

/// The captures of the current session's `prof`, written and read back.
fn written(prof: &Profiler) -> Vec<Capture> {
    let mut file = Vec::new();
    prof.capture().write_to(&mut file).unwrap();
    Capture::from_vec(file).unwrap()
}

/// Scopes open over pieces with arguments recorded at their entry (numbers, strings, bools,
/// floats), instants and counter samples inside them, and leaves with arguments: the
/// carried scopes keep their arguments in every format and table.
#[test]
fn arguments_of_scopes_open_over_pieces() {
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        let main = scope!("main", role = "loop", pi = 3.5f64, on = true, n = 7u64);
        for phase in 0..3u64 {
            let _phase = scope!("phase", at = phase, label = "p");
            for i in 0..2_000u64 {
                let _leaf = if i % 11 == 0 {
                    scope!("leaf", at = i, label = "eleventh")
                } else {
                    scope!("leaf")
                };
                m.increment(i % 3);
                if i % 500 == 0 {
                    instant!("mark", at = i);
                    counter!("level", set = i);
                }
            }
        }
        drop(main);
        prof.stop();
        written(&prof)
    };
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.threads[0].spans.len(), 1 + 3 + 6_000);
    assert_eq!(trace.threads[0].args_of(0).len(), 4);
    let complete = check(
        &captures,
        "hostile-args",
        Relative::Moved,
        &["at", "label", "role", "pi", "on"],
    );
    assert_eq!(complete, 1 + 3 + 6_000);
    // The main scope's arguments, in the pieces' Kineto JSON as in the whole trace's.
    let (_, pieces) = both(&captures, &kineto::Options::new(0, 1));
    let pieces = String::from_utf8(pieces.unwrap()).unwrap();
    let main = pieces
        .lines()
        .find(|l| l.contains("\"name\":\"main\""))
        .unwrap();
    assert!(main.contains("\"role\":\"loop\""), "{main}");
    assert!(main.contains("\"pi\":3.5"), "{main}");
    assert!(main.contains("\"on\":true"), "{main}");
}

/// Hundreds of levels of scopes open at once, each holding leaves, so that pieces are cut at
/// every depth while the chain is deep: edges on one nanosecond everywhere but every 13th.
#[test]
fn deep_nesting_open_over_pieces() {
    const DEPTH: u64 = 400;
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        let mut guards = Vec::new();
        for d in 0..DEPTH {
            guards.push(scope!("level", d = d));
            for i in 0..20u64 {
                let _l = scope!("leaf");
                if (d + i) % 13 == 0 {
                    m.increment(1u64);
                }
            }
        }
        while let Some(g) = guards.pop() {
            for _ in 0..7 {
                let _l = scope!("unwind");
            }
            m.increment(1u64);
            drop(g);
        }
        prof.stop();
        written(&prof)
    };
    let trace = Trace::from_captures(&captures);
    let spans = &trace.threads[0].spans;
    assert_eq!(spans.len() as u64, DEPTH * (1 + 20 + 7));
    assert_eq!(spans.iter().map(|s| s.depth).max(), Some(DEPTH as u32));
    let complete = check(&captures, "hostile-deep", Relative::Moved, &["d"]);
    assert_eq!(complete as u64, DEPTH * 28);
}

/// A whole thread on one nanosecond (the mock clock never moves): a scope holding thousands
/// of zero-length scopes, nested pairs and triples, all of them at the cuts.
#[test]
fn a_thread_on_one_nanosecond() {
    let captures = {
        let (_serial, _m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        let outer = scope!("outer");
        for i in 0..7_000u64 {
            let _a = scope!("a");
            if i % 3 == 0 {
                let _b = scope!("b");
                if i % 9 == 0 {
                    let _c = scope!("c");
                }
            }
        }
        drop(outer);
        prof.stop();
        written(&prof)
    };
    let complete = check(&captures, "hostile-one-ns", Relative::Moved, &[]);
    assert_eq!(complete, 1 + 7_000 + 7_000 / 3 + 1 + 7_000 / 9 + 1);
}

/// Zero-length scopes and scopes a nanosecond long alternate with longer ones at random
/// (a fixed seed) under a scope open over the thread, with zero-length middles (whose Kineto
/// op is placed on a whole microsecond) at every cut.
#[test]
fn zero_length_scopes_at_random_cuts() {
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let outer = scope!("outer");
        let mut mid = Some(scope!("mid"));
        for i in 0..8_000u64 {
            if i % 2_500 == 0 {
                drop(mid.take());
                mid = Some(scope!("mid"));
            }
            let r = next();
            let _s = scope!("s");
            m.increment(r % 4 / 3 * (r >> 8) % 1500);
            if r % 5 == 0 {
                let _t = scope!("t");
                m.increment((r >> 16) % 2);
            }
        }
        drop(mid);
        drop(outer);
        prof.stop();
        written(&prof)
    };
    check(&captures, "hostile-zero", Relative::Moved, &[]);
}

/// Scopes left open at the stop (three levels, on a thread that waits), holding pieces of
/// scopes, and one left open on the current thread: closed at the stop in every format.
#[test]
fn scopes_open_at_the_stop_over_pieces() {
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        let (tx, rx) = std::sync::mpsc::channel();
        let (tx2, rx2) = std::sync::mpsc::channel::<()>();
        let mm = m.clone();
        let h = tickscope::thread::spawn(move || {
            let _a = scope!("open a", k = 1u64);
            for _ in 0..3_000 {
                let _z = scope!("inside a");
                mm.increment(1u64);
            }
            let _b = scope!("open b", k = 2u64);
            for _ in 0..3_000 {
                let _z = scope!("inside b");
            }
            let _c = scope!("open c");
            for i in 0..3_000u64 {
                let _z = scope!("inside c");
                mm.increment(i % 2);
            }
            tx.send(()).unwrap();
            rx2.recv().unwrap();
        });
        rx.recv().unwrap();
        let _open = scope!("open here");
        for _ in 0..5_000 {
            let _z = scope!("here");
        }
        m.increment(7u64);
        prof.stop();
        tx2.send(()).unwrap();
        h.join().unwrap();
        written(&prof)
    };
    let trace = Trace::from_captures(&captures);
    let open: Vec<&str> = trace
        .spans()
        .filter(|(_, s)| s.open_at_stop)
        .map(|(_, s)| s.name())
        .collect();
    assert_eq!(open.len(), 4, "{open:?}");
    let complete = check(&captures, "hostile-open", Relative::Moved, &["k"]);
    assert_eq!(complete, 4 + 9_000 + 5_000);
}

/// A flight recorder whose window opens inside four nested scopes (cut at its start), which
/// stay open over many pieces; then a salvaged copy of the same session.
#[test]
fn scopes_cut_at_start_open_over_pieces_and_salvaged() {
    let (_serial, m) = serial_mock();
    // 8 chunks of 4096 words (an entry or exit each): about 16,000 spans.
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(8 * 4096 * 8)
        .start();
    let a = scope!("a", x = 1u64);
    let b = scope!("b");
    // Five words before the first `warm` (`a`'s argument takes two): every `warm` entry is at
    // an odd word, so a chunk that begins among them begins inside one.
    let warming = scope!("warming");
    for _ in 0..10_000u64 {
        let _w = scope!("warm");
        m.increment(1u64);
    }
    drop(warming);
    let c = scope!("c");
    for i in 0..10_000u64 {
        let _l = scope!("late");
        m.increment(i % 2);
    }
    drop(c);
    drop(b);
    for _ in 0..100 {
        let _l = scope!("tail");
    }
    drop(a);
    prof.stop();
    let capture = prof.capture();
    assert!(capture.overwritten_events() > 0);
    let trace = capture.decode();
    let cut: Vec<&str> = trace.threads[0]
        .spans
        .iter()
        .filter(|s| s.cut_at_start)
        .map(|s| s.name())
        .collect();
    // The window opens inside `warm` (where a chunk of the ring begins).
    assert_eq!(cut, ["a", "b", "warming", "warm"]);
    let mut file = Vec::new();
    capture.write_to(&mut file).unwrap();
    let captures = Capture::from_vec(file.clone()).unwrap();
    check(&captures, "hostile-cut", Relative::Moved, &["x"]);

    file.truncate(file.len() - file.len() / 5);
    let salvaged = Capture::from_vec(file).unwrap();
    assert!(salvaged[0].warnings().iter().any(|w| w.contains("footer")));
    let trace = Trace::from_captures(&salvaged);
    assert!(trace.spans().any(|(_, s)| s.open_at_stop));
    check(&salvaged, "hostile-salvaged", Relative::Either, &["x"]);
}

/// Two sessions in one file, each with two threads inside one scope each (one of them a
/// scope left open at the stop), and a third thread whose guards were dropped out of order on
/// its very last scopes after thousands of spans: that one keeps whole trees (one piece).
#[test]
fn several_sessions_and_a_thread_tangled_late() {
    let mut file = Vec::new();
    for session in 0..2u64 {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        for t in 0..2u64 {
            let m = m.clone();
            tickscope::thread::spawn(move || {
                let _main = scope!("main", session = session, t = t);
                for i in 0..2_500u64 {
                    let _r = scope!("r");
                    m.increment((i + t) % 3);
                }
            })
            .join()
            .unwrap();
        }
        if session == 1 {
            let m = m.clone();
            tickscope::thread::spawn(move || {
                let main = scope!("tangled main");
                for i in 0..3_000u64 {
                    let _r = scope!("r");
                    m.increment(i % 2);
                }
                let x = scope!("x");
                let y = scope!("y");
                m.increment(3u64);
                drop(x);
                drop(main);
                m.increment(3u64);
                drop(y);
            })
            .join()
            .unwrap();
        }
        prof.stop();
        prof.capture().write_to(&mut file).unwrap();
    }
    let captures = Capture::from_vec(file).unwrap();
    assert_eq!(captures.len(), 2);
    let complete = check(
        &captures,
        "hostile-sessions",
        Relative::Moved,
        &["session", "t"],
    );
    assert_eq!(complete, 4 * 2_501 + 3_003);

    // The tangled thread alone: one piece, so even relative Chrome JSON is the same bytes.
    let (_serial, m) = serial_mock();
    let prof = Profiler::builder().current_thread().start();
    let main = scope!("tangled main");
    for i in 0..3_000u64 {
        let _r = scope!("r");
        m.increment(i % 2);
    }
    let x = scope!("x");
    let y = scope!("y");
    m.increment(3u64);
    drop(x);
    drop(main);
    m.increment(3u64);
    drop(y);
    prof.stop();
    let captures = written(&prof);
    drop(_serial);
    check(&captures, "hostile-tangled", Relative::Same, &[]);
}

/// A clock that runs backwards inside a scope open over the thread (forged ticks): children
/// that begin before their parent, ends clamped to their begins, a parent that ends before a
/// child; written the same as the whole trace.
#[test]
fn a_clock_that_runs_backwards_inside_open_scopes() {
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        m.increment(1_000_000u64);
        let outer = scope!("outer");
        for i in 0..3_000u64 {
            let _r = scope!("r");
            if i % 97 == 0 {
                m.decrement(40u64);
            } else {
                m.increment(i % 5);
            }
            let _s = scope!("s");
            m.increment(1u64);
        }
        drop(outer);
        prof.stop();
        written(&prof)
    };
    check(&captures, "hostile-backwards", Relative::Either, &[]);
}

/// A thread of 5,001 spans: `main` (argument `k`) holding 2,500 `r` (every fifth with `k`)
/// each holding an `s`.
fn looped() -> Arc<Capture> {
    let (_serial, m) = serial_mock();
    let prof = Profiler::builder().current_thread().start();
    let main = scope!("main", k = 1u64);
    for i in 0..2_500u64 {
        let _r = if i % 5 == 0 {
            scope!("r", k = i)
        } else {
            scope!("r")
        };
        m.increment(i % 3);
        let _s = scope!("s");
        m.increment(1u64);
    }
    drop(main);
    prof.stop();
    prof.capture()
}

/// Threads above ten thousand spans inside one scope whose children are not all the same
/// depth, then records changed by hand (ticks, kinds, keys, records left out or repeated):
/// never a panic, and every capture still written piece by piece gives the whole trace's
/// output. For a longer run: `HOSTILE_ROUNDS` (6), `HOSTILE_SEED`, `HOSTILE_MUTATIONS` (at
/// most 4 a round).
#[test]
fn mutated_records_of_open_scopes_never_panic_and_match() {
    let records = capture_records(&looped());
    assert_eq!(records.len(), 1);
    let (thread, records) = records.into_iter().next().unwrap();
    // Each scope's begin and end, and an argument record on `main` and every fifth `r`.
    assert_eq!(records.len(), 2 * (1 + 2 * 2_500) + 1 + 500);
    let mut rng =
        std::env::var("HOSTILE_SEED").map_or(0x9E37_79B9_7F4A_7C15u64, |v| v.parse().unwrap());
    let mut next = move |below: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % below as u64) as usize
    };
    let kinds = [
        RawKind::Begin,
        RawKind::End,
        RawKind::ArgU64,
        RawKind::ArgStr,
        RawKind::Bytes,
        RawKind::Payload,
        RawKind::Instant,
    ];
    let mut written_in_pieces = 0;
    let rounds: usize = std::env::var("HOSTILE_ROUNDS").map_or(6, |v| v.parse().unwrap());
    for round in 0..rounds {
        let mut records = records.clone();
        let most: usize = std::env::var("HOSTILE_MUTATIONS").map_or(4, |v| v.parse().unwrap());
        for _ in 0..1 + next(most) {
            let at = next(records.len());
            match next(7) {
                6 => records[at].tick = [0, u64::MAX, u64::MAX / 2, 1 << 63][next(4)],
                0 => records[at].tick = records[at].tick.wrapping_add(next(5_000) as u64),
                1 => records[at].tick = records[at].tick.saturating_sub(next(5_000) as u64),
                2 => records[at].kind = kinds[next(kinds.len())],
                3 => records[at].id ^= 1 << next(32),
                4 => {
                    records.remove(at);
                }
                _ => records.insert(at, records[next(records.len())]),
            }
        }
        let capture = capture_from_records(vec![(thread, records)], 0, u64::MAX);
        let mut file = Vec::new();
        capture.write_to(&mut file).unwrap();
        let captures = Capture::from_vec(file).unwrap();
        let refs: Vec<&Capture> = captures.iter().collect();
        if perfetto::Options::new()
            .write_captures(&refs, &mut std::io::sink())
            .is_some()
        {
            written_in_pieces += 1;
            // Chrome JSON on Unix time and Perfetto write a scope's arguments and marks with
            // its begin: a thread whose scope gets an argument after a scope began inside it
            // is not carried, and a scope open at the stop is marked from its begin.
            let name = format!("hostile-mutated-{round}");
            check(&captures, &name, Relative::Either, &["k"]);
        }
    }
    eprintln!("{written_in_pieces} written in pieces");
    assert_eq!(written_in_pieces, rounds);
}

/// A scope left open at the stop over more than two pieces' spans (a `main` still running
/// when the session stops) keeps its `open_at_stop` mark written piece by piece: Perfetto and
/// Chrome JSON on Unix time write the mark with the scope's begin, which the first piece
/// writes before the stop closes the scope (the first pass says which scopes end open).
#[test]

fn a_scope_open_at_the_stop_over_pieces_is_marked_at_its_begin() {
    let captures = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder().current_thread().start();
        let _main = scope!("main");
        for _ in 0..5_000 {
            let _z = scope!("step");
            m.increment(1u64);
        }
        prof.stop();
        written(&prof)
    };
    let trace = Trace::from_captures(&captures);
    assert!(trace.threads[0].spans[0].open_at_stop);
    let unix = chrome::Options::new().time_origin(TimeOrigin::UnixEpoch);
    let (whole, pieces) = both(&captures, &unix);
    let (whole, pieces) = (
        String::from_utf8(whole).unwrap(),
        String::from_utf8(pieces.unwrap()).unwrap(),
    );
    let marked = |json: &str| json.matches("\"open_at_stop\":true").count();
    assert_eq!(
        (marked(&whole), marked(&pieces)),
        (1, 1),
        "Chrome JSON on Unix time"
    );
    assert_eq!(whole, pieces);
    let (whole, pieces) = both(&captures, &perfetto::Options::new());
    let pieces = pieces.unwrap();
    let marked = |bytes: &[u8]| bytes.windows(12).filter(|w| w == b"open_at_stop").count();
    assert_eq!((marked(&whole), marked(&pieces)), (1, 1), "Perfetto");
    assert!(whole == pieces);
}

/// `tracing` spans entered once, without fields, are plain scopes: a `main` span holding
/// thousands of spans is carried over pieces like a scope. (A span with fields makes its
/// capture decoded whole: `write_captures` gives `None`.)
#[cfg(feature = "tracing")]
#[test]
fn tracing_spans_open_over_pieces() {
    use tracing_subscriber::layer::SubscriberExt;

    let (_serial, m) = serial_mock();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(tickscope::tracing::layer()));
    let _d = tracing::dispatcher::set_default(&dispatch);
    m.increment(1_000u64);
    let prof = Profiler::builder().current_thread().start();
    {
        let main = tracing::info_span!("main");
        let _e = main.enter();
        for i in 0..3_000u64 {
            tracing::info_span!("step").in_scope(|| {
                m.increment(i % 3);
                let _s = scope!("inner", i = i);
            });
        }
    }
    m.increment(10u64);
    prof.stop();
    let captures = written(&prof);
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.threads[0].spans.len(), 1 + 2 * 3_000);
    assert!(trace.async_spans.is_empty());
    let complete = check(&captures, "hostile-tracing", Relative::Moved, &["i"]);
    assert_eq!(complete, 1 + 2 * 3_000);
}

/// A collector's session (`SessionWriter`) of a track whose `main` span holds 3,000 spans,
/// in two processes, one of them a track whose spans end on the tick their parent ends.
#[test]
fn collector_sessions_of_two_processes_open_over_pieces() {
    let mut file = Vec::new();
    for process in 1..=2u32 {
        let mut session =
            SessionWriter::new("gpu", (0, 1_000), (100_000, 101_000), 1.0).process_id(process);
        let track = session.thread("stream");
        session.begin(track, "main", 10);
        session.arg_u64(track, "process", u64::from(process));
        let mut tick = 10;
        for i in 0..3_000u64 {
            session.begin(track, "kernel", tick);
            session.arg_u64(track, "i", i);
            session.span(track, "copy", tick, tick + i % 3);
            tick += i % 3 + u64::from(process);
            session.end(track, tick);
        }
        session.end(track, tick);
        session.write_to(&mut file);
    }
    let captures = Capture::from_vec(file).unwrap();
    assert_eq!(captures.len(), 2);
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.spans().count(), 2 * (1 + 2 * 3_000));
    let complete = check(
        &captures,
        "hostile-collector",
        Relative::Moved,
        &["process", "i"],
    );
    assert_eq!(complete, 2 * (1 + 2 * 3_000));
}

/// Through the public API: a collector's `SessionWriter::arg_u64` called after spans inside
/// the open span ended gives that span an argument late (the innermost open span's). Perfetto
/// and Chrome JSON on Unix time write arguments with a span's begin, which a piece may have
/// written before: such a thread's pieces are whole trees (the first pass saw the late
/// argument), so every format is the whole trace's, byte for byte.
#[test]

fn a_late_collector_argument_of_a_span_open_over_pieces_is_written() {
    let mut session = SessionWriter::new("gpu", (0, 1_000), (100_000, 101_000), 1.0);
    let track = session.thread("stream");
    session.begin(track, "main", 10);
    for i in 0..3_000u64 {
        session.span(track, "kernel", 10 + 3 * i, 12 + 3 * i);
    }
    session.arg_u64(track, "status", 200);
    session.end(track, 9_100);
    let mut file = Vec::new();
    session.write_to(&mut file);
    let captures = Capture::from_vec(file).unwrap();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.threads[0].spans[0].name(), "main");
    assert_eq!(trace.threads[0].args_of(0).len(), 1);
    check(
        &captures,
        "hostile-collector-late",
        Relative::Same,
        &["status"],
    );
    let unix = chrome::Options::new().time_origin(TimeOrigin::UnixEpoch);
    let (whole, pieces) = both(&captures, &unix);
    let status = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .matches("\"status\":200")
            .count()
    };
    assert_eq!(
        (status(&whole), status(&pieces.unwrap())),
        (1, 1),
        "Chrome JSON on Unix time"
    );
    let (whole, pieces) = both(&captures, &perfetto::Options::new());
    let status = |bytes: &[u8]| bytes.windows(6).filter(|w| w == b"status").count();
    assert_eq!(
        (status(&whole), status(&pieces.unwrap())),
        (1, 1),
        "Perfetto"
    );
}

/// A capture of a thread inside one scope, written as recorded (8-byte words), with one
/// to four bits flipped anywhere: what reads is written piece by piece to files
/// (`write_file_from_captures`) and as call trees and tables by argument without a panic.
#[test]
fn flipped_bits_of_a_capture_of_open_scopes_never_panic() {
    let capture = looped();
    let mut base = Vec::new();
    tickscope::__private::unpacked(|| capture.write_to(&mut base)).unwrap();
    assert!(base.len() > 8 * 10_000, "{}", base.len());
    let path = crate::common::scratch("hostile-flipped.out");
    let mut rng = 0xD6E8_FEB8_6659_FD93u64;
    let mut next = move |below: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % below as u64) as usize
    };
    let (mut inputs, mut readable) = (0, 0);
    for _ in 0..30 {
        let mut bytes = base.clone();
        for _ in 0..1 + next(4) {
            let at = next(bytes.len());
            bytes[at] ^= 1 << next(8);
        }
        inputs += 1;
        let Ok(captures) = Capture::from_vec(bytes) else {
            continue;
        };
        readable += 1;
        let refs: Vec<&Capture> = captures.iter().collect();
        for format in [
            &chrome::Options::new() as &dyn Format,
            &chrome::Options::new().time_origin(TimeOrigin::UnixEpoch),
            &kineto::Options::new(0, 1),
            &perfetto::Options::new(),
        ] {
            tickscope::export::write_file_from_captures(&refs, &path, format).unwrap();
        }
        let mut bytes = Vec::new();
        for capture in &refs {
            capture.write_to(&mut bytes).unwrap();
        }
        let table = Table::from_captures(captures);
        assert!(!table.tree(true).render(TableFormat::Text).is_empty());
        let by_arg = Table::from_captures(Capture::from_vec(bytes).unwrap()).by_arg("k");
        assert!(!by_arg.render(TableFormat::Csv).is_empty());
    }
    assert_eq!(inputs, 30);
    assert!(readable >= 10, "{readable} of {inputs} read");
}
