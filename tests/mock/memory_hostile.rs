//! A hostile pass over captures of sessions that tracked memory, written from the captures as
//! they are decoded (`Format::write_captures`, `Table::from_captures`, a streamed session's
//! `report()`): the same capture passed twice, a flight recorder's window (allocations made
//! before it, threads without records in it), salvaged captures cut anywhere, scopes dropped
//! out of order and nested deep, allocations on one tick on many threads, sessions of several
//! processes with a session that only counted, reallocations, frees of blocks allocated before
//! the session, and async calls (but for pprof, written from pieces). Each time: pprof, folded stacks, Perfetto and
//! Chrome JSON on Unix time are the whole trace's bytes; Chrome JSON relative to the start and
//! Kineto hold the whole trace's events; the tables are the decoded trace's.
#![cfg(feature = "enabled")]

use std::sync::{Arc, Barrier, Mutex};

use crate::common::{YieldOnce, first_difference, mock, poll_once, scratch, serial, serial_mock};
use crate::pieces::{chrome_events, tables_of};
use tickscope::export::chrome::{self, TimeOrigin};
use tickscope::export::{Format, folded, kineto, perfetto, pprof};
use tickscope::report::Report;
use tickscope::table::Table;
use tickscope::trace::{MemoryKind, Trace};
use tickscope::{Capture, MemoryMode, Profiler, profile, scope};

/// What `format` writes from the whole trace of `captures`, and from the captures as they are
/// decoded (`None` when the format does not write them so).
fn both(captures: &[&Capture], format: &dyn Format) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut whole = Vec::new();
    let trace = Trace::from_captures(captures.iter().copied());
    format.write(&trace, &mut whole).unwrap();
    let mut pieces = Vec::new();
    let written = format.write_captures(captures, &mut pieces);
    (whole, written.map(|r| r.map(|()| pieces).unwrap()))
}

/// Checks every export of `captures` (see the module's docs); returns how many of them were
/// written from the captures rather than from the whole trace.
fn same_exports(captures: &[&Capture], name: &str) -> usize {
    let mut in_pieces = 0;
    let exact: [(&dyn Format, &str); 6] = [
        (&pprof::Options::new(), "pb"),
        (&folded::Options::new(), "folded"),
        (&perfetto::Options::new(), "pftrace"),
        (&perfetto::Options::new().delta_times(true), "d.pftrace"),
        (
            &chrome::Options::new().time_origin(TimeOrigin::UnixEpoch),
            "u.json",
        ),
        (
            &chrome::Options::new()
                .allocation_instants(true)
                .time_origin(TimeOrigin::UnixEpoch),
            "ui.json",
        ),
    ];
    for (format, ext) in exact {
        let (whole, pieces) = both(captures, format);
        if let Some(pieces) = pieces {
            in_pieces += 1;
            assert!(
                whole == pieces,
                "{name}.{ext} differs: {}",
                first_difference(&whole, &pieces)
            );
        }
    }
    let events: [(&dyn Format, &str); 3] = [
        (&chrome::Options::new(), "json"),
        (&chrome::Options::new().allocation_instants(true), "i.json"),
        (&kineto::Options::new(0, 1), "kineto.json"),
    ];
    for (format, ext) in events {
        let (whole, pieces) = both(captures, format);
        let Some(pieces) = pieces else { continue };
        in_pieces += 1;
        assert_eq!(whole.len(), pieces.len(), "{name}.{ext}");
        let (w, p) = (chrome_events(&whole).0, chrome_events(&pieces).0);
        assert_eq!(w.len(), p.len(), "{name}.{ext}");
        if let Some(at) = (0..w.len()).find(|&i| w[i] != p[i]) {
            panic!("{name}.{ext}: event {at} differs:\n{}\n{}", w[at], p[at]);
        }
    }
    in_pieces
}

/// The tables of `captures` (flat, by thread, by the argument `key`, the call tree, by thread
/// too) made from the captures as they are decoded are the decoded trace's, as text, JSON and
/// CSV; returns the flat table's text.
fn same_tables(captures: &[Capture], name: &str) -> String {
    let tables = tables_of(captures);
    let settings: [fn(Table) -> Table; 5] = [
        |t| t,
        |t| t.by_thread(true),
        |t| t.by_arg("k"),
        |t| t.tree(true),
        |t| t.tree(true).by_thread(true),
    ];
    for (setting, table) in settings.into_iter().enumerate() {
        for (pieces, whole) in tables(table) {
            assert_eq!(pieces, whole, "{name}: table {setting}");
        }
    }
    let [(text, _), ..] = tables(|t| t);
    text
}

/// Exports and tables of `captures` (see [`same_exports`], [`same_tables`]); returns how many
/// exports were written from the captures.
fn check(captures: &[Capture], name: &str) -> usize {
    let refs: Vec<&Capture> = captures.iter().collect();
    let in_pieces = same_exports(&refs, name);
    same_tables(captures, name);
    in_pieces
}

/// The capture file of the stopped session `prof`.
fn written(prof: &Profiler) -> Vec<u8> {
    let mut file = Vec::new();
    prof.capture().write_to(&mut file).unwrap();
    file
}

/// Three threads (one a recycled name) each allocating in `request` holding `parse` and
/// handing a block to the next (which frees it), on ticks shared between threads.
fn handing_session(m: &Arc<tickscope::clock::Mock>, iterations: u64) {
    let handed: Arc<Vec<Mutex<Vec<Vec<u8>>>>> =
        Arc::new((0..4).map(|_| Mutex::new(Vec::new())).collect());
    let workers: Vec<_> = (0..3usize)
        .map(|t| {
            let (m, handed) = (m.clone(), handed.clone());
            tickscope::thread::spawn(move || {
                for i in 0..iterations {
                    let _request = scope!("request");
                    m.increment(i % 2);
                    {
                        let _parse = scope!("parse", k = i % 3);
                        handed[t + 1].lock().unwrap().push(vec![t as u8; 40]);
                        std::hint::black_box(vec![0u8; 300]);
                    }
                    drop(std::mem::take(&mut *handed[t].lock().unwrap()));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
}

/// The same capture passed twice: two sessions of one process at the same moments, whose
/// blocks have the same addresses. Their frees match within their own capture, so each
/// allocation is freed once and nothing stays live that the program freed.
#[test]
fn the_same_capture_passed_twice_matches_frees_within_each() {
    let file = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(MemoryMode::Timeline)
            .start();
        handing_session(&m, 400);
        prof.stop();
        written(&prof)
    };
    let captures = Capture::from_bytes(&file).unwrap();
    let twice = [&captures[0], &captures[0]];
    let trace = Trace::from_captures(twice);
    let memory = trace.memory.as_ref().unwrap();
    // Every live byte counted twice, and freed twice.
    let live = memory.live_bytes();
    let once = Trace::from_captures(&captures).memory.unwrap().live_bytes();
    assert_eq!(live.len(), 2 * once.len());
    assert_eq!(live.last(), once.last().map(|b| 2 * b).as_ref());
    assert_eq!(same_exports(&twice, "twice"), 9);
}

/// A flight recorder that kept a memory timeline: its window opens inside a scope that holds
/// blocks allocated before it (their frees in the window match nothing), after a thread that
/// ran early and ended; a scope is open at the stop. (Folded stacks and pprof count the scopes
/// cut at the window's start.)
fn flight_session(mode: MemoryMode) -> Vec<Capture> {
    let file = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(mode)
            .flight_recorder(4 * 4096 * 16)
            .start();
        tickscope::thread::spawn({
            let m = m.clone();
            move || {
                for _ in 0..50 {
                    let _early = scope!("early");
                    m.increment(2);
                    std::hint::black_box(vec![1u8; 64]);
                }
            }
        })
        .join()
        .unwrap();
        let warm = scope!("warm");
        let mut before: Vec<Vec<u8>> = Vec::new();
        for i in 0..3_000u64 {
            let _w = scope!("fill", k = i % 2);
            before.push(vec![2u8; 24]);
            m.increment(1);
        }
        handing_session(&m, 1_500);
        for block in before.drain(..) {
            let _f = scope!("free-old");
            drop(block);
            m.increment(1);
        }
        drop(before);
        drop(warm);
        let _open = scope!("open at stop");
        let _live = std::hint::black_box(vec![3u8; 512]);
        m.increment(5);
        prof.stop();
        assert!(prof.capture().overwritten_events() > 0);
        written(&prof)
    };
    let captures = Capture::from_bytes(&file).unwrap();
    let trace = Trace::from_captures(&captures);
    assert!(trace.spans().any(|(_, s)| s.cut_at_start));
    captures
}

#[test]
fn a_flight_recorders_window_of_a_memory_timeline() {
    let captures = flight_session(MemoryMode::Timeline);
    let trace = Trace::from_captures(&captures);
    let memory = trace.memory.as_ref().unwrap();
    // Frees of blocks allocated before the window: matched to nothing.
    assert!(
        (memory.events.iter())
            .filter(|e| e.kind == MemoryKind::Free && e.matched.is_none())
            .count()
            > 1_000
    );
    assert_eq!(check(&captures, "flight"), 9);
}

/// The same window, of a session that counted allocations: counts cut at the window's start.
#[test]
fn a_flight_recorders_window_of_counted_allocations() {
    let captures = flight_session(MemoryMode::Counts);
    assert_eq!(check(&captures, "flight-counts"), 9);
}

/// A session that kept a memory timeline, its file cut short at many lengths: salvaged
/// captures, with threads cut between an allocation and its payload, scopes left open.
#[test]
fn salvaged_memory_timelines_cut_anywhere() {
    let file = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(MemoryMode::Timeline)
            .start();
        let _main = scope!("main");
        handing_session(&m, 400);
        prof.stop();
        // Unpacked: 8 or 16 bytes a record, so cuts fall on every kind of record.
        tickscope::__private::unpacked(|| written(&prof))
    };
    let mut salvaged = 0;
    for cut in [3, 5, 8, 13] {
        let mut cut_file = file.clone();
        cut_file.truncate(file.len() - file.len() / cut - 8 * cut);
        let Ok(captures) = Capture::from_vec(cut_file) else {
            continue;
        };
        salvaged += 1;
        assert!(captures[0].warnings().iter().any(|w| w.contains("footer")));
        check(&captures, &format!("salvaged-{cut}"));
    }
    assert_eq!(salvaged, 4);
}

/// Scopes nested `depth` deep on the current thread, each allocating (some blocks freed
/// while they are open, the rest as they end); with `out_of_order`, dropped outermost first
/// (every guard outliving its parent), else innermost first.
fn nest(m: &tickscope::clock::Mock, depth: u64, out_of_order: bool) {
    let mut kept = Vec::new();
    let mut guards = Vec::new();
    for i in 0..depth {
        guards.push(scope!("deep", k = i % 3));
        kept.push(vec![1u8; 8 + (i % 5) as usize]);
        m.increment(i % 2);
        if i % 97 == 0 {
            drop(kept.swap_remove(0));
        }
    }
    if out_of_order {
        for guard in guards {
            drop(guard);
            m.increment(1);
        }
    } else {
        while let Some(guard) = guards.pop() {
            drop(guard);
            drop(kept.pop());
        }
    }
}

/// A session tracking memory in `mode`: a thread of scopes nested 2,100 deep (more open at
/// once than a piece holds) inside one scope, each allocating; a thread whose 300 nested
/// scopes are dropped outermost first; a thread of short scopes; a scope open at the stop
/// holding an allocation.
fn deep_session(mode: MemoryMode) -> Vec<Capture> {
    let file = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(mode)
            .start();
        let threads = [(2_100, false), (300, true)].map(|(depth, out_of_order)| {
            let m = m.clone();
            tickscope::thread::spawn(move || {
                let _main = scope!("main", k = depth);
                nest(&m, depth, out_of_order);
            })
        });
        for thread in threads {
            thread.join().unwrap();
        }
        tickscope::thread::spawn({
            let m = m.clone();
            move || {
                for i in 0..400u64 {
                    let _short = scope!("short", k = i % 4);
                    std::hint::black_box(vec![0u8; 16]);
                    m.increment(i % 2);
                }
            }
        })
        .join()
        .unwrap();
        let _open = scope!("open at stop", k = 1u64);
        let _live = std::hint::black_box(vec![3u8; 512]);
        m.increment(3);
        prof.stop();
        written(&prof)
    };
    let captures = Capture::from_bytes(&file).unwrap();
    let trace = Trace::from_captures(&captures);
    assert!(trace.spans().any(|(_, s)| s.depth == 2_100));
    assert!(trace.spans().any(|(_, s)| s.open_at_stop));
    captures
}

#[test]
fn scopes_nested_deep_and_dropped_out_of_order_with_memory() {
    assert_eq!(check(&deep_session(MemoryMode::Timeline), "deep"), 9);
}

/// 2,100 nested scopes that allocate, dropped outermost first: each closes past all its
/// closed ancestors (decoding looked each of them up among the open scopes: cubic, minutes
/// in all). The flat table and Perfetto from the captures are the decoded trace's.
#[test]
fn guards_dropped_outermost_first_deep_decode_in_quadratic_time() {
    let file = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(MemoryMode::Timeline)
            .start();
        nest(&m, 2_100, true);
        prof.stop();
        written(&prof)
    };
    let captures = Capture::from_bytes(&file).unwrap();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.spans().filter(|(_, s)| s.depth == 2_099).count(), 1);
    let refs: Vec<&Capture> = captures.iter().collect();
    let (whole, pieces) = both(&refs, &perfetto::Options::new());
    assert!(whole == pieces.unwrap(), "Perfetto differs");
    let [(pieces, whole), ..] = tables_of(&captures)(|t| t);
    assert_eq!(pieces, whole);
}

/// The same, counting allocations only: the per-span figures of the tables and pprof.
#[test]
fn scopes_nested_deep_and_dropped_out_of_order_counting_memory() {
    let captures = deep_session(MemoryMode::Counts);
    let memory = Trace::from_captures(&captures).memory.unwrap();
    assert!(memory.events.is_empty());
    assert_eq!(check(&captures, "deep-counts"), 9);
}

/// Eight threads allocating and freeing on one tick, handing blocks to each other (frees of
/// blocks allocated elsewhere, addresses reused on another thread at the same tick).
#[test]
fn allocations_on_one_tick_on_many_threads() {
    let file = {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(MemoryMode::Timeline)
            .start();
        m.increment(10);
        let pool: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let start = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let (pool, start) = (pool.clone(), start.clone());
                tickscope::thread::spawn(move || {
                    start.wait();
                    for i in 0..300u64 {
                        let _s = scope!("same tick", k = t % 2);
                        let block = vec![t as u8; 32 + (i % 3) as usize];
                        let mut pool = pool.lock().unwrap();
                        if i % 2 == 0 {
                            pool.push(block);
                        } else {
                            drop(pool.pop());
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        drop(pool);
        m.increment(10);
        prof.stop();
        written(&prof)
    };
    let captures = Capture::from_bytes(&file).unwrap();
    let trace = Trace::from_captures(&captures);
    let events = &trace.memory.as_ref().unwrap().events;
    let at_once = events
        .iter()
        .filter(|e| e.ns == events[events.len() / 2].ns);
    assert!(at_once.count() > 4_000);
    assert_eq!(check(&captures, "one-tick"), 9);
}

/// Sessions of three processes (one of two sessions), one of which only counted its
/// allocations, written one after the other into one file.
#[test]
fn sessions_of_several_processes_with_one_that_counted() {
    let mut file = Vec::new();
    for (pid, mode) in [
        (7u32, MemoryMode::Timeline),
        (8, MemoryMode::Counts),
        (7, MemoryMode::Timeline),
        (9, MemoryMode::Timeline),
    ] {
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(mode)
            .start();
        handing_session(&m, 100 + u64::from(pid));
        let _live = std::hint::black_box(vec![pid as u8; 100 * pid as usize]);
        prof.stop();
        let mut bytes = written(&prof);
        bytes[20..24].copy_from_slice(&pid.to_le_bytes());
        file.extend(bytes);
    }
    let captures = Capture::from_bytes(&file).unwrap();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.processes.len(), 3);
    assert_eq!(check(&captures, "processes"), 9);
    // One session as if three processes had recorded it (the same thread ids in each).
    let mut three = Vec::new();
    for pid in [11u32, 12, 13] {
        let mut bytes = Vec::new();
        captures[0].write_to(&mut bytes).unwrap();
        bytes[20..24].copy_from_slice(&pid.to_le_bytes());
        three.extend(bytes);
    }
    let three = Capture::from_bytes(&three).unwrap();
    assert_eq!(Trace::from_captures(&three).processes.len(), 3);
    let text = same_tables(&three, "three");
    assert!(text.contains("Live at stop"), "{text}");
    // Two of them in one file, the session that counted first.
    let counted_first = [&captures[1], &captures[3]];
    assert_eq!(same_exports(&counted_first, "counted-first"), 9);
}

/// Blocks allocated before the session and freed in it, vectors and strings grown by
/// reallocation, shrunk, and a session with no allocation in a scope.
#[test]
fn reallocations_and_frees_of_blocks_from_before_the_session() {
    let file = {
        let (_serial, m) = serial_mock();
        let before: Vec<Vec<u8>> = (0..200).map(|i| vec![0u8; 10 + i]).collect();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(MemoryMode::Timeline)
            .start();
        let worker = tickscope::thread::spawn({
            let m = m.clone();
            move || {
                let mut grown = Vec::new();
                let mut text = String::new();
                for i in 0..2_000u64 {
                    let _g = scope!("grow", k = i % 2);
                    grown.push(i);
                    text.push_str("ab");
                    if i % 500 == 499 {
                        grown.shrink_to_fit();
                        text = String::new();
                    }
                    m.increment(i % 2);
                }
                grown
            }
        });
        for (i, block) in before.into_iter().enumerate() {
            let _f = scope!("free before", k = i % 2);
            drop(block);
            m.increment(1);
        }
        let grown = worker.join().unwrap();
        drop(grown);
        prof.stop();
        written(&prof)
    };
    let captures = Capture::from_bytes(&file).unwrap();
    assert_eq!(check(&captures, "realloc"), 9);
}

#[profile]
async fn allocating_step(m: Arc<tickscope::clock::Mock>) -> usize {
    let first = std::hint::black_box(vec![0u8; 128]);
    m.increment(10u64);
    YieldOnce::default().await;
    m.increment(4u64);
    first.len() + std::hint::black_box(vec![1u8; 64]).len()
}

/// Async calls polled on two threads, allocating: written from pieces (the calls matched as
/// the threads are read again, the memory timeline after them; pprof summed by stack, each
/// call counted once), with the same outputs.
#[test]
fn async_calls_that_allocate_are_written_from_pieces() {
    let file = {
        let _serial = serial();
        let m = mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(MemoryMode::Timeline)
            .start();
        let mut futures: Vec<_> = (0..20)
            .map(|_| Box::pin(allocating_step(m.clone())))
            .collect();
        for fut in &mut futures {
            let _s = scope!("poll first", k = 1u64);
            assert!(poll_once(fut.as_mut()).is_pending());
        }
        std::thread::spawn({
            let prof = prof.clone();
            move || {
                prof.join_current_thread();
                for mut fut in futures {
                    assert!(poll_once(fut.as_mut()).is_ready());
                }
            }
        })
        .join()
        .unwrap();
        prof.stop();
        written(&prof)
    };
    let captures = Capture::from_bytes(&file).unwrap();
    assert_eq!(Trace::from_captures(&captures).async_spans.len(), 20);
    assert_eq!(check(&captures, "async"), 9);
}

/// Streaming sessions that kept a memory timeline or counted allocations: their `report()`
/// and call tree, summed from their file, are those of their decoded trace.
#[test]
fn a_streamed_sessions_report_is_its_decoded_traces() {
    for mode in [MemoryMode::Timeline, MemoryMode::Counts] {
        let path = scratch("memory-hostile-stream.tscope");
        let (_serial, m) = serial_mock();
        let prof = Profiler::builder()
            .current_thread()
            .track_memory(mode)
            .stream_to(&*path)
            .try_start()
            .unwrap();
        let _main = scope!("main");
        handing_session(&m, 1_000);
        let _live = std::hint::black_box(vec![1u8; 999]);
        prof.stop();
        let report = prof.report();
        let trace = Trace::from_captures(&Capture::read_all(&*path).unwrap());
        assert_eq!(report, Report::new(&trace));
        assert_eq!(
            !report.live_at_stop.is_empty(),
            mode == MemoryMode::Timeline
        );
        assert_eq!(
            prof.table().tree(true).to_string(),
            Table::new(Arc::new(trace)).tree(true).to_string()
        );
    }
}
