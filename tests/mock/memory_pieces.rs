//! Chrome JSON and Perfetto of sessions that kept a memory timeline, written from captures as
//! they are decoded (`export::write_file_from_captures`: what `tickscope convert` does): the
//! allocations and frees of every thread merged in time order as the threads are read again,
//! with the same bytes as the whole trace's.
#![cfg(feature = "enabled")]

use std::sync::{Arc, Mutex};

use crate::common::{first_difference, serial_mock};
use crate::pieces::{both, tables_of};
use tickscope::export::chrome::{self, TimeOrigin};
use tickscope::export::{Format, folded, html, perfetto, pprof};
use tickscope::table::Table;
use tickscope::trace::{MemoryKind, Trace};
use tickscope::{Capture, MemoryMode, Profiler, scope};

/// Iterations per thread: several pieces of each thread.
const ITERATIONS: u64 = 3_000;

/// A session of `threads` threads at once, tracking memory in `mode`: each iteration a
/// `request` holding `parse` allocates a block that lives on (handed to the next thread,
/// which frees it, or at the end the session's own thread: frees matched across threads) and one freed within the same nanosecond (a
/// peak inside one timestamp); some on equal ticks on several threads. Then an allocation
/// outside every scope, one left live at the stop, and a scope open at the stop.
pub(crate) fn session(threads: u64, mode: MemoryMode) -> Vec<u8> {
    let (_serial, m) = serial_mock();
    let prof = Profiler::builder()
        .current_thread()
        .track_memory(mode)
        .start();
    // Blocks handed from thread t to thread t + 1.
    let handed: Arc<Vec<Mutex<Vec<Vec<u8>>>>> =
        Arc::new((0..=threads).map(|_| Mutex::new(Vec::new())).collect());
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (m, handed) = (m.clone(), handed.clone());
            tickscope::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn(move || {
                    for i in 0..ITERATIONS {
                        let _request = scope!("request");
                        m.increment(i % 3);
                        {
                            let _parse = scope!("parse", k = i % 3);
                            let kept = vec![t as u8; 64 + (i % 7) as usize];
                            handed[t as usize + 1].lock().unwrap().push(kept);
                            std::hint::black_box(vec![0u8; 1000 + (i % 5) as usize]);
                            m.increment(1);
                        }
                        // Frees of blocks another thread allocated.
                        let mine = std::mem::take(&mut *handed[t as usize].lock().unwrap());
                        drop(mine);
                        m.increment(i % 2);
                    }
                })
                .unwrap()
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    // The blocks not taken yet are freed here: every kept block is freed on a thread other
    // than its own.
    drop(handed);
    let outside = vec![1u8; 4096];
    m.increment(3);
    drop(outside);
    let _live = std::hint::black_box(vec![2u8; 512]);
    let _open = scope!("left open");
    m.increment(100);
    prof.stop();
    let mut file = Vec::new();
    prof.capture().write_to(&mut file).unwrap();
    drop(_live);
    file
}

/// pprof (with its memory sample types), folded stacks, Chrome JSON (both time origins, with
/// and without allocation instants), Perfetto (both encodings) and (with the feature)
/// OTLP/JSON of `captures`, and the HTML report, are the same bytes whole and piece by piece.
fn same_bytes(captures: &[Capture], name: &str) {
    let formats: [(&dyn Format, &str); 8] = [
        (&pprof::Options::new(), "pb"),
        (&folded::Options::new(), "folded"),
        (&chrome::Options::new(), "json"),
        (&chrome::Options::new().allocation_instants(true), "i.json"),
        (
            &chrome::Options::new()
                .allocation_instants(true)
                .time_origin(TimeOrigin::UnixEpoch),
            "u.json",
        ),
        (&perfetto::Options::new(), "pftrace"),
        (&perfetto::Options::new().delta_times(true), "d.pftrace"),
        (&html::Options::new(), "html"),
    ];
    for (format, ext) in formats {
        let (whole, pieces) = both(captures, format, &format!("{name}.{ext}"));
        assert!(
            whole == pieces,
            "{name}.{ext} differs: {}",
            first_difference(&whole, &pieces)
        );
    }
    #[cfg(feature = "otlp")]
    {
        // Each span's memory figures as its attributes.
        let trace = Trace::from_captures(captures);
        let (whole, pieces) = crate::pieces::otlp_json_both(captures);
        assert!(
            whole == pieces,
            "{name}.otlp.json differs: {}",
            first_difference(&whole, &pieces)
        );
        let tracked = trace
            .memory
            .as_ref()
            .is_some_and(|m| m.mode != MemoryMode::Off);
        let has = |s: &[u8]| pieces.windows(s.len()).any(|w| w == s);
        assert_eq!(has(b"tickscope.alloc.bytes"), tracked);
    }
}

#[test]
fn a_memory_timeline_is_written_piece_by_piece_with_the_same_bytes() {
    let file = session(3, MemoryMode::Timeline);
    let captures = Capture::from_bytes(&file).unwrap();
    let trace = Trace::from_captures(&captures);
    let memory = trace.memory.as_ref().unwrap();
    // Two blocks an iteration, freed, and the ones outside: every allocation of the workers
    // was seen, and frees matched across threads.
    let allocs = (memory.events.iter())
        .filter(|e| e.kind == MemoryKind::Alloc && e.scope_name() == Some("parse"))
        .count();
    assert!(
        allocs >= 2 * 3 * ITERATIONS as usize,
        "{allocs} allocations"
    );
    let across = (memory.events.iter())
        .filter(|e| e.kind == MemoryKind::Free)
        .filter_map(|e| Some((e.thread, memory.events[e.matched? as usize].thread)))
        .filter(|(free, alloc)| free != alloc)
        .count();
    assert!(
        across >= 3 * ITERATIONS as usize,
        "{across} frees across threads"
    );
    assert!(trace.threads.iter().any(|t| t.spans.len() > 4 * 1024));
    same_bytes(&captures, "timeline");
    // The profile summed from the captures has the memory sample types, and the bytes.
    let (_, pb) = both(&captures, &pprof::Options::new(), "timeline-types.pb");
    let has = |s: &[u8]| pb.windows(s.len()).any(|w| w == s);
    assert!(has(b"alloc_space") && has(b"alloc_objects"));
}

#[test]
fn memory_timelines_of_several_sessions_are_merged_in_time_with_the_same_bytes() {
    // Two sessions of this process (one capture each) and a session that only counted: one
    // process, frees matched within their capture, the events merged by time.
    let mut file = session(2, MemoryMode::Timeline);
    file.extend(session(1, MemoryMode::Counts));
    file.extend(session(2, MemoryMode::Timeline));
    let captures = Capture::from_bytes(&file).unwrap();
    assert_eq!(captures.len(), 3);
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.processes.len(), 1);
    assert_eq!(trace.memory.as_ref().unwrap().mode, MemoryMode::Timeline);
    same_bytes(&captures, "sessions");
}

#[test]
fn a_session_that_counted_memory_is_written_piece_by_piece_with_the_same_bytes() {
    let captures = Capture::from_bytes(&session(2, MemoryMode::Counts)).unwrap();
    let trace = Trace::from_captures(&captures);
    assert!(trace.memory.as_ref().unwrap().events.is_empty());
    same_bytes(&captures, "counts");
}

#[test]
fn memory_timelines_of_several_processes_at_the_same_times_give_the_same_bytes() {
    // One session written as if three processes had recorded it at the same moments: every
    // event has twins of the same time in the others, ordered by capture.
    let one = session(2, MemoryMode::Timeline);
    let mut file = Vec::new();
    for pid in [7u32, 8, 9] {
        let mut bytes = one.clone();
        bytes[20..24].copy_from_slice(&pid.to_le_bytes());
        file.extend_from_slice(&bytes);
    }
    let captures = Capture::from_bytes(&file).unwrap();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.processes.len(), 3);
    let events = &trace.memory.as_ref().unwrap().events;
    assert!(
        events
            .windows(3)
            .any(|w| w[0].ns == w[2].ns && w[0].process != w[2].process)
    );
    same_bytes(&captures, "processes");
}

/// The tables of `captures` (flat, by thread, split by argument, and the call tree) made from
/// the captures as they are decoded are the decoded trace's, memory columns and allocations
/// live at the stop included; returns the flat table's text.
fn same_tables(captures: &[Capture]) -> String {
    let tables = tables_of(captures);
    let settings: [fn(Table) -> Table; 4] = [
        |t| t,
        |t| t.by_thread(true),
        |t| t.by_arg("k"),
        |t| t.tree(true),
    ];
    for table in settings {
        for (pieces, whole) in tables(table) {
            assert_eq!(pieces, whole);
        }
    }
    let [(text, _), ..] = tables(|t| t);
    text
}

#[test]
fn tables_of_sessions_that_tracked_memory_are_summed_with_their_memory_figures() {
    let timeline = Capture::from_bytes(&session(3, MemoryMode::Timeline)).unwrap();
    let text = same_tables(&timeline);
    assert!(text.contains("Alloc") && text.contains("Peak"), "{text}");
    // The block left live at the stop, outside every scope, and the kept blocks' vectors.
    assert!(text.contains("Live at stop"), "{text}");
    let counts = Capture::from_bytes(&session(2, MemoryMode::Counts)).unwrap();
    let text = same_tables(&counts);
    assert!(
        text.contains("Alloc") && !text.contains("Live at stop"),
        "{text}"
    );
}
