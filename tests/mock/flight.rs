//! The flight recorder (`ProfilerBuilder::flight_recorder`): the exact window it retains, scopes cut at
//! its start, the events it overwrote, its memory bound, snapshots while recording, and the
//! dump on panic (in a child process).
//!
//! Flight recorders recycle chunks only while they are the only sessions recording, and the
//! mock clock is process-wide: the tests take `SERIAL` to run one at a time.
#![cfg(feature = "enabled")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use crate::common::{mock, scratch, serial, test_name};
use tickscope::trace::{Span, Trace};
use tickscope::{Capture, Profiler, scope};

/// Records per chunk of entries and exits (`CHUNK_WORDS`: one word each, the mock clock's
/// ticks staying below 2^30 from a chunk's base tick 0).
const CHUNK_EVENTS: usize = 4096;
/// Bytes of words per chunk.
const CHUNK: usize = CHUNK_EVENTS * 8;

/// The spans of the trace's only thread.
fn spans(trace: &Trace) -> &[Span] {
    assert_eq!(trace.threads.len(), 1, "{:?}", trace.threads.len());
    &trace.threads[0].spans
}

/// `(name, start, end, depth, cut_at_start, open_at_stop)` of a span.
fn shape(span: &Span) -> (&'static str, u64, u64, u32, bool, bool) {
    (
        span.name(),
        span.start_ns,
        span.end_ns,
        span.depth,
        span.cut_at_start,
        span.open_at_stop,
    )
}

/// 5000 `inner` scopes inside one `outer` scope: 10 001 records, so chunks of 4096 records
/// hold records 0..4096, 4096..8192 and 8192..10 001. A recorder of two chunks recycles the
/// first: record 4096, the exit of inner scope 2047, opens its window, so `outer` and that
/// inner scope are cut at its start.
#[test]
fn the_window_is_the_latest_chunks_and_scopes_cut_at_its_start_are_marked() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(2 * CHUNK)
        .start();
    let base = {
        m.increment(1000);
        m.value()
    };
    let (recorded, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let worker = {
        let (prof, m) = (prof.clone(), m.clone());
        let (recorded, release) = (recorded.clone(), release.clone());
        std::thread::spawn(move || {
            prof.join_current_thread();
            let outer = scope!("outer");
            for _ in 0..5000 {
                let inner = scope!("inner");
                m.increment(5);
                drop(inner);
                m.increment(5);
            }
            recorded.wait();
            release.wait();
            drop(outer);
        })
    };
    recorded.wait();
    // While recording: the window so far, scopes still open closed at the snapshot.
    let now = m.value();
    let snapshot = prof.trace();
    assert_eq!(snapshot.overwritten_events, CHUNK_EVENTS as u64);
    let got = spans(&snapshot);
    // `outer`, the cut inner scope 2047, and inner scopes 2048..5000.
    assert_eq!(got.len(), 2 + (5000 - 2048));
    assert_eq!(shape(&got[0]), ("outer", base, now, 0, true, true));
    let at = base + 10 * 2047;
    assert_eq!(shape(&got[1]), ("inner", at, at + 5, 1, true, false));
    assert_eq!(got[1].parent, Some(0));
    let at = base + 10 * 2048;
    assert_eq!(shape(&got[2]), ("inner", at, at + 5, 1, false, false));
    assert_eq!(got[2].parent, Some(0));
    let last = base + 10 * 4999;
    assert_eq!(
        shape(got.last().unwrap()),
        ("inner", last, last + 5, 1, false, false)
    );
    assert_eq!(got.iter().filter(|s| s.cut_at_start).count(), 2);
    assert_eq!(snapshot.event_count, 2 + 10_001 - 4096);

    release.wait();
    worker.join().unwrap();
    m.increment(7);
    let end = m.value();
    prof.stop();
    let trace = prof.trace();
    assert_eq!(trace.overwritten_events, CHUNK_EVENTS as u64);
    assert_eq!(trace.dropped_events, 0);
    let got = spans(&trace);
    assert_eq!(got.len(), 2 + (5000 - 2048));
    // Closed by its own exit (at `now`: the clock stood still since).
    assert_eq!(shape(&got[0]), ("outer", base, now, 0, true, false));
    assert!(end > now);
    let table = prof.table().to_string();
    assert!(
        table.contains("4096 overwritten events (flight recorder)"),
        "{table}"
    );

    // A capture file keeps the cut scopes (names, entries, marks) and the count.
    let path = scratch("window.tscope");
    prof.write_capture(&path).unwrap();
    let back = Capture::read(&path).unwrap();
    assert!(back.warnings().is_empty(), "{:?}", back.warnings());
    assert_eq!(back.overwritten_events(), CHUNK_EVENTS as u64);
    let decoded = back.decode();
    assert_eq!(decoded.overwritten_events, CHUNK_EVENTS as u64);
    let shapes = |t: &Trace| spans(t).iter().map(shape).collect::<Vec<_>>();
    assert_eq!(shapes(&decoded), shapes(&trace));

    // The Chrome trace marks them too, and says how many events were overwritten.
    let json = scratch("window.json");
    prof.write_chrome_trace(&json).unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(text.matches("\"cut_at_start\":true").count(), 2);
    assert!(text.contains("\"overwritten_events\":4096"), "{text}");
}

/// An exit whose entry was overwritten closes the cut scope it belongs to, never an open
/// scope of the same name: here a recursive call's outer level, exited (out of order) while
/// an inner level entered in the window is still open.
#[test]
fn an_exit_whose_entry_was_overwritten_closes_nothing_else() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(CHUNK)
        .start();
    let base = {
        m.increment(1000);
        m.value()
    };
    let prof2 = prof.clone();
    let m2 = m.clone();
    std::thread::spawn(move || {
        prof2.join_current_thread();
        let level0 = scope!("recurse");
        m2.increment(1);
        // Fill the first chunk (4096 records with the entry above) and start the next.
        for _ in 0..2048 {
            drop(scope!("filler"));
        }
        m2.increment(1);
        let level1 = scope!("recurse");
        m2.increment(100);
        drop(level0);
        m2.increment(10);
        drop(level1);
    })
    .join()
    .unwrap();
    prof.stop();
    let trace = prof.trace();
    // Records: recurse, 4096 filler records (the first 4095 overwritten with the entry), then
    // filler's last exit, recurse, recurse's two exits.
    assert_eq!(trace.overwritten_events, CHUNK_EVENTS as u64);
    let got: Vec<_> = spans(&trace)
        .iter()
        .filter(|s| s.name() == "recurse")
        .map(shape)
        .collect();
    assert_eq!(
        got,
        [
            ("recurse", base, base + 102, 0, true, false),
            ("recurse", base + 2, base + 112, 1, false, false),
        ]
    );
    // The filler scope cut at the start: its exit came in the window.
    let fillers: Vec<_> = spans(&trace)
        .iter()
        .filter(|s| s.name() == "filler")
        .collect();
    assert_eq!(fillers.len(), 1);
    assert!(fillers[0].cut_at_start);
}

#[test]
fn one_flight_recorder_at_a_time() {
    let _serial = serial();
    mock();
    let first = Profiler::builder()
        .current_thread()
        .flight_recorder(CHUNK)
        .start();
    let second = Profiler::builder()
        .current_thread()
        .flight_recorder(CHUNK)
        .try_start();
    let err = second.unwrap_err().to_string();
    assert!(err.contains("another flight recorder is running"), "{err}");
    first.stop();
    let again = Profiler::builder()
        .current_thread()
        .flight_recorder(CHUNK)
        .try_start()
        .unwrap();
    again.stop();
}

/// The recorder allocates its chunks at start and then only recycles them: a million scopes
/// through 16 chunks allocate no chunk at all.
#[test]
fn memory_stays_within_the_bound() {
    let _serial = serial();
    // The scanner paused: a chunk it holds while the chunk is recycled goes to the pool when
    // it lets go (the recycling thread takes one from the pool meanwhile), which can leave
    // one more chunk alive. The resident-memory test runs with the scanner.
    let _paused = Paused::new();
    mock();
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(16 * CHUNK)
        .start();
    let live = tickscope::__private::live_chunks();
    let prof2 = prof.clone();
    let worker = std::thread::spawn(move || {
        prof2.join_current_thread();
        for _ in 0..1_000_000 {
            let _g = scope!("work");
        }
        tickscope::__private::live_chunks()
    });
    let during = worker.join().unwrap();
    assert_eq!(during, live);
    let trace = prof.trace();
    // 2 000 000 records; the last 16 chunks kept: 15 full ones and the 1152 records after.
    let kept = 15 * CHUNK_EVENTS + 2_000_000 % CHUNK_EVENTS;
    assert_eq!(spans(&trace).len(), kept / 2);
    assert_eq!(trace.overwritten_events, (2_000_000 - kept) as u64);
    assert_eq!(tickscope::__private::live_chunks(), live);
    prof.stop();
}

/// Threads record while snapshots are taken: every snapshot is well nested, and at the end
/// the retained records and the overwritten ones add up to every record made.
#[test]
fn threads_and_snapshots_together() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().flight_recorder(8 * CHUNK).start();
    const THREADS: usize = 4;
    const SCOPES: usize = 50_000;
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..SCOPES {
                    let _outer = scope!("stress_outer");
                    m.increment(1);
                    let _inner = scope!("stress_inner");
                }
            })
        })
        .collect();
    let mut snapshots = 0;
    while workers.iter().any(|w| !w.is_finished()) || snapshots < 3 {
        let trace = prof.trace();
        for thread in &trace.threads {
            check_nesting(&thread.spans);
        }
        snapshots += 1;
    }
    for worker in workers {
        worker.join().unwrap();
    }
    prof.stop();
    let capture = prof.capture();
    let trace = prof.trace();
    assert_eq!(trace.dropped_events, 0);
    let cut: u64 = trace
        .threads
        .iter()
        .map(|t| t.spans.iter().filter(|s| s.cut_at_start).count() as u64)
        .sum();
    let retained = capture.record_count() - cut;
    assert_eq!(
        retained + trace.overwritten_events,
        (THREADS * SCOPES * 4) as u64
    );
    assert!(trace.overwritten_events > 0);
    for thread in &trace.threads {
        check_nesting(&thread.spans);
    }
}

/// Spans of one thread of the stress test: cut ones first, each inner scope inside an outer
/// one, nothing deeper.
fn check_nesting(spans: &[Span]) {
    let cut = spans.iter().take_while(|s| s.cut_at_start).count();
    assert!(cut <= 2);
    assert!(spans[cut..].iter().all(|s| !s.cut_at_start));
    for span in spans {
        match span.name() {
            "stress_outer" => assert_eq!((span.depth, span.parent), (0, None)),
            "stress_inner" => {
                let parent = &spans[span.parent.expect("inner scopes have a parent") as usize];
                assert_eq!(parent.name(), "stress_outer");
                assert_eq!(span.depth, 1);
                assert!(parent.start_ns <= span.start_ns && span.end_ns <= parent.end_ns);
            }
            other => panic!("unexpected span {other}"),
        }
    }
}

/// Runs this test binary's ignored test `name` as a child process, with `path` in its
/// environment.
fn child(name: &str, path: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name(module_path!(), name),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TICKSCOPE_FLIGHT_CHILD", path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The child of [`a_panic_dumps_the_window`]: records 100 000 scopes through a recorder of
/// four chunks, panics in a thread with a scope open, and exits at once.
#[test]
#[ignore = "run as a child process by a_panic_dumps_the_window"]
fn child_that_panics() {
    let Some(path) = std::env::var_os("TICKSCOPE_FLIGHT_CHILD").map(PathBuf::from) else {
        return;
    };
    let prof = Profiler::builder()
        .flight_recorder(4 * CHUNK)
        .flight_recorder_dump_on_panic(&path)
        .start();
    let worker = std::thread::spawn(|| {
        for _ in 0..100_000 {
            let _g = scope!("before_panic");
        }
        let _open = scope!("open_at_panic");
        panic!("the end");
    });
    assert!(worker.join().is_err());
    std::mem::forget(prof);
    std::process::exit(3);
}

/// 200 001 records in chunks of 4095 (on the real clock each chunk's first record takes two
/// words, its tick being the chunk's base): 48 full chunks and 3441 records; the last four
/// chunks (three full ones and the 3441 records) are in the dump, from record 45 × 4095, an
/// exit: its scope, entered in the last record overwritten, is cut at the window's start.
#[test]
fn a_panic_dumps_the_window() {
    let path = scratch("panic.tscope");
    let status = child("child_that_panics", &path).wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let capture = Capture::read(&path).unwrap();
    assert!(capture.warnings().is_empty(), "{:?}", capture.warnings());
    // Records of a chunk on the real clock.
    const REAL: usize = CHUNK_EVENTS - 1;
    let kept = 3 * REAL + 200_001 % REAL;
    assert_eq!(capture.overwritten_events(), (200_001 - kept) as u64);
    let trace = capture.decode();
    let report = tickscope::report::Report::new(&trace);
    // The cut scope, then whole ones, then the entry of the scope open at the panic.
    assert_eq!(report.get("before_panic").unwrap().calls, kept as u64 / 2);
    let open = report.get("open_at_panic").unwrap();
    assert_eq!((open.calls, open.open_at_stop), (1, 1));
    let cut: Vec<&str> = trace
        .threads
        .iter()
        .flat_map(|t| &t.spans)
        .filter(|s| s.cut_at_start)
        .map(|s| s.name())
        .collect();
    assert_eq!(cut, ["before_panic"]);
}

/// A dump path ending in `.html` gets the HTML report of the window, whole: its data names
/// the scopes kept.
#[test]
fn a_panic_dumps_an_html_report() {
    let path = scratch("panic.html");
    let status = child("child_that_panics", &path).wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let page = std::fs::read_to_string(&path).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    let open = "id=\"ts-meta\">";
    let start = page.find(open).unwrap() + open.len();
    let meta = &page[start..start + page[start..].find("</script>").unwrap()];
    assert!(meta.contains("\"before_panic\""), "{meta:.300}");
    assert!(meta.contains("\"open_at_panic\""), "{meta:.300}");
}

/// Pauses the recorder's scanner until dropped: chunks are then read only by
/// `flight_read_pending` (the test's choice of moment) or by the thread that recycles them.
struct Paused;

impl Paused {
    fn new() -> Self {
        tickscope::__private::flight_pause_scanner(true);
        Self
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        tickscope::__private::flight_pause_scanner(false);
    }
}

/// Records, on a thread of its own, `outer` around 10 × 2048 `inner` scopes (one tick each,
/// a tick apart) through a recorder of 4 chunks: 40 961 records in chunks 0..=10 (the last
/// holds one). Chunks 0..=6 are recycled: 28 672 records overwritten; `outer` and inner scope
/// 14 335 (entered in the last record of chunk 6) are cut at the window's start.
/// `read_after` chunks' worth of scopes in, the thread waits while the test reads the
/// pending chunks (`flight_read_pending`), whose count is returned with the trace.
fn ten_chunks_through_four(read_after: Option<usize>) -> (Arc<Trace>, usize, (u64, u64)) {
    let m = mock();
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(4 * CHUNK)
        .start();
    let base = {
        m.increment(1000);
        m.value()
    };
    let (reached, resume) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let worker = {
        let (prof, m) = (prof.clone(), m.clone());
        let (reached, resume) = (reached.clone(), resume.clone());
        std::thread::spawn(move || {
            prof.join_current_thread();
            let _outer = scope!("outer");
            for i in 0..10 * 2048 {
                if Some(i) == read_after.map(|c| c * 2048 + 100) {
                    reached.wait();
                    resume.wait();
                }
                let inner = scope!("inner");
                m.increment(1);
                drop(inner);
                m.increment(1);
            }
            std::mem::forget(_outer);
        })
    };
    let read = match read_after {
        Some(_) => {
            reached.wait();
            let read = tickscope::__private::flight_read_pending();
            resume.wait();
            read
        }
        None => 0,
    };
    worker.join().unwrap();
    let trace = prof.trace();
    let reads = tickscope::__private::flight_reads().expect("the recorder runs");
    prof.stop();
    // The window, the same whoever read the recycled chunks.
    assert_eq!(trace.overwritten_events, 7 * CHUNK_EVENTS as u64);
    assert_eq!(trace.event_count, 40_961 - 7 * CHUNK_EVENTS as u64 + 2);
    let got = spans(&trace);
    assert_eq!(got.len(), 2 + (20_480 - 14_336));
    let end = base + 2 * 20_480;
    assert_eq!(shape(&got[0]), ("outer", base, end, 0, true, true));
    let at = base + 2 * 14_335;
    assert_eq!(shape(&got[1]), ("inner", at, at + 1, 1, true, false));
    let at = base + 2 * 14_336;
    assert_eq!(shape(&got[2]), ("inner", at, at + 1, 1, false, false));
    assert_eq!(got.iter().filter(|s| s.cut_at_start).count(), 2);
    assert!(got[1..].iter().all(|s| s.parent == Some(0)));
    (trace, read, reads)
}

/// With the scanner paused, the thread that recycles a chunk reads it: seven chunks read
/// late, none ahead.
#[test]
fn chunks_are_read_when_recycled_without_the_scanner() {
    let _serial = serial();
    let _paused = Paused::new();
    let (_, read, reads) = ten_chunks_through_four(None);
    assert_eq!(read, 0);
    assert_eq!(reads, (0, 7));
}

/// Chunks read ahead (here by the test, as the scanner does, three chunks in: chunks 0, 1
/// and 2 are complete) are only unlinked when recycled; the next four are read late. The
/// window is the same as when every chunk is read late.
#[test]
fn chunks_read_ahead_give_the_same_window() {
    let _serial = serial();
    let _paused = Paused::new();
    let (trace, read, reads) = ten_chunks_through_four(Some(3));
    assert_eq!(read, 3);
    assert_eq!(reads, (3, 4));
    let (late, _, _) = ten_chunks_through_four(None);
    // The same spans, from the start of the recorder (the mock clock went on between the
    // two runs).
    let shapes = |t: &Trace| {
        let base = spans(t)[0].start_ns;
        spans(t)
            .iter()
            .map(|s| {
                let (name, start, end, depth, cut, open) = shape(s);
                (name, start - base, end - base, depth, cut, open)
            })
            .collect::<Vec<_>>()
    };
    assert!(shapes(&trace) == shapes(&late));
}

/// After every late read, the chunks still pending are those the recycling threads have
/// not reached: reading them changes nothing in the window, and the counts add up.
#[test]
fn reading_the_retained_chunks_ahead_leaves_the_window_alone() {
    let _serial = serial();
    let _paused = Paused::new();
    let m = mock();
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(4 * CHUNK)
        .start();
    m.increment(1000);
    let (recorded, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let worker = {
        let (prof, m) = (prof.clone(), m.clone());
        let (recorded, release) = (recorded.clone(), release.clone());
        std::thread::spawn(move || {
            prof.join_current_thread();
            let _outer = scope!("outer");
            for _ in 0..10 * 2048 {
                let inner = scope!("inner");
                m.increment(1);
                drop(inner);
                m.increment(1);
            }
            // The thread waits while the test reads: its last chunk stays its tail.
            recorded.wait();
            release.wait();
        })
    };
    recorded.wait();
    let before = prof.trace();
    // Chunks 0..=6 were read late; 7, 8 and 9 are complete and pending; 10 is the tail.
    assert_eq!(tickscope::__private::flight_reads(), Some((0, 7)));
    assert_eq!(tickscope::__private::flight_read_pending(), 3);
    assert_eq!(tickscope::__private::flight_read_pending(), 0);
    assert_eq!(tickscope::__private::flight_reads(), Some((3, 7)));
    let after = prof.trace();
    let shapes = |t: &Trace| spans(t).iter().map(shape).collect::<Vec<_>>();
    assert_eq!(shapes(&after), shapes(&before));
    assert_eq!(after.overwritten_events, before.overwritten_events);
    release.wait();
    worker.join().unwrap();
    prof.stop();
}

/// Two threads take turns, each completing one chunk a turn (`outer`, then 2048 `inner`
/// scopes a turn: 1 + 4096 × turn records), through a recorder of 4 chunks: chunks are
/// linked A0 A1 B0 B1 A2 B2 A3 B3, and the last four links recycle A0, A1, B0 and B1. A0
/// and B0 are read ahead (after both threads' first turn), A1 and B1 when recycled. Each
/// thread keeps 2048 inner scopes, with `outer` and inner scope 4095 cut at its start.
#[test]
fn two_threads_recycle_each_others_chunks_exactly() {
    let _serial = serial();
    let _paused = Paused::new();
    let m = mock();
    let prof = Profiler::builder().flight_recorder(4 * CHUNK).start();
    m.increment(1000);
    // One baton: each thread waits for its turn on its own channel and hands the next turn
    // back to the test.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let mut turns = Vec::new();
    let mut workers = Vec::new();
    for name in ["a", "b"] {
        let (turn_tx, turn_rx) = std::sync::mpsc::channel::<bool>();
        turns.push(turn_tx);
        let (prof, m, done) = (prof.clone(), m.clone(), done_tx.clone());
        workers.push(
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    prof.join_current_thread();
                    let outer = scope!("outer");
                    while turn_rx.recv() == Ok(true) {
                        for _ in 0..2048 {
                            let inner = scope!("inner");
                            m.increment(1);
                            drop(inner);
                        }
                        done.send(()).unwrap();
                    }
                    std::mem::forget(outer);
                })
                .unwrap(),
        );
    }
    let turn = |t: usize| {
        turns[t].send(true).unwrap();
        done_rx.recv().unwrap();
    };
    // The first entry of each thread links its first chunk: A's before B's.
    turn(0);
    turn(1);
    assert_eq!(tickscope::__private::flight_read_pending(), 2);
    for _ in 0..2 {
        turn(0);
        turn(1);
    }
    let trace = prof.trace();
    assert_eq!(tickscope::__private::flight_reads(), Some((2, 2)));
    for t in &turns {
        t.send(false).unwrap();
    }
    for w in workers {
        w.join().unwrap();
    }
    prof.stop();
    assert_eq!(trace.overwritten_events, 4 * CHUNK_EVENTS as u64);
    assert_eq!(trace.threads.len(), 2);
    for thread in &trace.threads {
        let spans = &thread.spans;
        assert_eq!(spans.len(), 2 + 2048, "{:?}", thread.name);
        let cut: Vec<_> = spans
            .iter()
            .filter(|s| s.cut_at_start)
            .map(|s| (s.name(), s.depth))
            .collect();
        assert_eq!(cut, [("outer", 0), ("inner", 1)], "{:?}", thread.name);
        assert!(
            spans[1..]
                .iter()
                .all(|s| s.name() == "inner" && s.parent == Some(0))
        );
        assert!(spans[0].open_at_stop);
    }
}

/// The scanner, a second reader (this test's `flight_read_pending`), snapshots and two
/// recording threads race: every snapshot is well nested, each thread's `outer` scope is
/// cut once it was overwritten, and at the end the retained and overwritten records add up,
/// every recycled chunk read once (ahead or late).
#[test]
fn readers_snapshots_and_recycling_race() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().flight_recorder(8 * CHUNK).start();
    const THREADS: usize = 2;
    const SCOPES: usize = 100_000;
    let stop = Arc::new(AtomicBool::new(false));
    let recorded = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (m, stop, recorded) = (m.clone(), stop.clone(), recorded.clone());
            std::thread::spawn(move || {
                let _outer = scope!("stress_outer");
                for _ in 0..SCOPES {
                    m.increment(1);
                    let _inner = scope!("stress_inner");
                }
                // Keep `stress_outer` open until the test has looked.
                recorded.fetch_add(1, Ordering::AcqRel);
                while !stop.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    let mut snapshots = 0;
    while recorded.load(Ordering::Acquire) < THREADS || snapshots < 3 {
        tickscope::__private::flight_read_pending();
        let trace = prof.trace();
        for thread in &trace.threads {
            check_nesting(&thread.spans);
        }
        snapshots += 1;
    }
    // Every thread has recorded everything and waits: the window stands still.
    let trace = prof.trace();
    let cut: u64 = trace
        .threads
        .iter()
        .map(|t| t.spans.iter().filter(|s| s.cut_at_start).count() as u64)
        .sum();
    let (ahead, late) = tickscope::__private::flight_reads().unwrap();
    // What each thread kept, should the records not add up.
    let threads: Vec<_> = (trace.threads.iter())
        .map(|t| {
            let cut: Vec<_> = t
                .spans
                .iter()
                .filter(|s| s.cut_at_start)
                .map(|s| s.name())
                .collect();
            let open = t.spans.iter().filter(|s| s.open_at_stop).count();
            (t.name.clone(), t.spans.len(), cut, open)
        })
        .collect();
    assert_eq!(
        trace.event_count - cut + trace.overwritten_events,
        (THREADS * (2 * SCOPES + 1)) as u64,
        "events {}, overwritten {}, read ahead {ahead}, late {late}; threads {threads:?}",
        trace.event_count,
        trace.overwritten_events,
    );
    let recycled = trace.overwritten_events / CHUNK_EVENTS as u64;
    assert!(ahead + late >= recycled, "{ahead} + {late} < {recycled}");
    assert!(late <= recycled);
    assert_eq!(trace.threads.len(), THREADS);
    for thread in &trace.threads {
        check_nesting(&thread.spans);
        let cut: Vec<_> = thread.spans.iter().filter(|s| s.cut_at_start).collect();
        assert_eq!(cut[0].name(), "stress_outer");
        assert!(cut[0].open_at_stop);
    }
    stop.store(true, Ordering::Release);
    for w in workers {
        w.join().unwrap();
    }
    prof.stop();
}

/// A `tracing` span entered when the recorder recycles its first chunk is cut at the window's
/// start like a scope (its enter is a scope's entry); a span entered twice whose first enter
/// was overwritten is one enter in the window. The capture file and the streamed table agree.
#[cfg(feature = "tracing")]
#[test]
fn a_tracing_span_entered_across_the_cut_is_a_cut_scope() {
    use tracing_subscriber::layer::SubscriberExt;

    let _serial = serial();
    let m = mock();
    let dispatch =
        tracing::Dispatch::new(tracing_subscriber::registry().with(tickscope::tracing::layer()));
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(2 * CHUNK)
        .start();
    let outer = tracing::info_span!("cut_outer");
    let multi = tracing::info_span!("cut_multi");
    m.increment(10);
    multi.in_scope(|| m.increment(10));
    {
        let _e = outer.enter();
        for _ in 0..5000 {
            m.increment(5);
            let _g = scope!("filler");
            m.increment(5);
        }
        multi.in_scope(|| m.increment(10));
    }
    drop(outer);
    drop(multi);
    prof.stop();
    let trace = prof.trace();
    // The first chunk's 4096 words: `cut_multi`'s enter and exit (two records with the
    // enter's payload, five words), `cut_outer`'s enter (two, four), 2043 fillers and the
    // next one's entry (4087, one each): 4092 records.
    assert_eq!(trace.overwritten_events, 4092);
    let spans = &trace.threads[0].spans;
    let first = &spans[0];
    assert_eq!(
        (first.name(), first.depth, first.cut_at_start),
        ("cut_outer", 0, true)
    );
    assert_eq!(first.kind, tickscope::trace::SpanKind::Scope);
    let last = spans.last().unwrap();
    assert_eq!(
        (last.name(), last.depth, last.cut_at_start),
        ("cut_multi", 1, false)
    );
    assert!(trace.async_spans.is_empty());
    assert!(
        spans
            .iter()
            .all(|s| s.kind == tickscope::trace::SpanKind::Scope)
    );

    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    let read = Capture::from_bytes(&bytes).unwrap();
    assert!(read[0].warnings().is_empty(), "{:?}", read[0].warnings());
    let decoded = read[0].decode();
    let names = |t: &Trace| -> Vec<(&'static str, u32, bool)> {
        t.threads[0]
            .spans
            .iter()
            .map(|s| (s.name(), s.depth, s.cut_at_start))
            .collect()
    };
    assert_eq!(names(&decoded), names(&trace));
    let streamed = tickscope::table::Table::from_captures(read).to_string();
    assert_eq!(streamed, prof.table().to_string());
}

/// A plain scope begun before the window is counted in the footer of the table made from the
/// captures (summed without keeping spans) as in the session's own.
#[test]
fn a_scope_begun_before_the_window_is_counted_by_the_table_of_its_captures() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(2 * CHUNK)
        .start();
    {
        let _outer = scope!("cut_outer");
        for _ in 0..5000 {
            m.increment(5);
            let _g = scope!("filler");
            m.increment(5);
        }
    }
    prof.stop();
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    let read = Capture::from_bytes(&bytes).unwrap();
    let streamed = tickscope::table::Table::from_captures(read).to_string();
    assert_eq!(streamed, prof.table().to_string());
    assert!(
        streamed.ends_with(
            "\n2 calls begun before the flight recorder's window, counted from its start\n"
        ),
        "{streamed}"
    );
}

/// An async call polled by hand, moved between the test's two worker threads.
type Call = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Pending once: two polls, a tick each.
#[tickscope::profile]
async fn hop(m: Arc<tickscope::clock::Mock>) {
    m.increment(1);
    crate::common::YieldOnce::default().await;
    m.increment(1);
}

/// A thread that runs the jobs it is given, one at a time, each to its end before
/// [`Worker::run`] returns: the test decides which thread records what, in which order.
struct Worker {
    jobs: Option<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>>,
    done: std::sync::mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    fn new(prof: &Profiler, name: &str) -> Self {
        let (jobs, rx) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        let (done_tx, done) = std::sync::mpsc::channel();
        let prof = prof.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                prof.join_current_thread();
                for job in rx {
                    job();
                    done_tx.send(()).unwrap();
                }
            })
            .unwrap();
        Self {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
        }
    }

    fn run(&self, job: impl FnOnce() + Send + 'static) {
        self.jobs.as_ref().unwrap().send(Box::new(job)).unwrap();
        self.done.recv().unwrap();
    }

    /// Polls `call` once here; returns it.
    fn poll(&self, call: Call) -> Call {
        let (tx, rx) = std::sync::mpsc::channel();
        self.run(move || {
            let mut call = call;
            let _ = crate::common::poll_once(call.as_mut());
            tx.send(call).unwrap();
        });
        rx.recv().unwrap()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

/// Async calls move between threads A and B through a recorder of 4 chunks. A records first
/// (its chunk A0 is linked before B's B0): it begins `y` (5 records, 9 words: its begin, poll
/// and their payloads take two each); B begins `x`; A polls `x` to its end (5 records, 9
/// words, in A0), then records 6200 `filler` scopes (a word an entry or exit), whose entry
/// 2039 opens A1 and entry 6135 A3: linking A3 recycles A0 (chunks A0, B0, A1, A2 were
/// linked), its 4088 records. B ends `y`; then `z` begins on A and ends on B. Each thread's
/// retained records start at its own oldest chunk: B's at `x`'s begin, A's at filler 2039. The window common to both starts at
/// filler 2039: `x` (begun on B, ended in A's lost part) was left open at stop before, and
/// `y` (begun in A's lost part) was left out; now `x` is left out, `y` is cut at the
/// window's start, `z` is whole, and every thread keeps its poll slices as recorded.
#[test]
fn async_calls_moved_between_threads_are_cut_at_the_common_window_start() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().flight_recorder(4 * CHUNK).start();
    m.increment(1000);
    let (a, b) = (Worker::new(&prof, "a"), Worker::new(&prof, "b"));
    let y: Call = Box::pin(hop(m.clone()));
    let y = a.poll(y);
    m.increment(10);
    let x_start = m.value();
    let x: Call = Box::pin(hop(m.clone()));
    let x = b.poll(x);
    m.increment(10);
    let x_end = m.value() + 1;
    drop(a.poll(x));
    m.increment(10);
    let window = Arc::new(AtomicU64::new(0));
    a.run({
        let (m, window) = (m.clone(), window.clone());
        move || {
            for k in 0..6200 {
                if k == 2039 {
                    window.store(m.value(), Ordering::Relaxed);
                }
                let g = scope!("filler");
                m.increment(1);
                drop(g);
                m.increment(1);
            }
        }
    });
    let window = window.load(Ordering::Relaxed);
    assert!(x_end < window);
    m.increment(10);
    let y_end = m.value() + 1;
    drop(b.poll(y));
    m.increment(10);
    let z_start = m.value();
    let z: Call = Box::pin(hop(m.clone()));
    let z = a.poll(z);
    m.increment(10);
    let z_end = m.value() + 1;
    drop(b.poll(z));
    drop((a, b));
    m.increment(10);
    prof.stop();

    let trace = prof.trace();
    let id = |name: &str| {
        let thread = trace
            .threads
            .iter()
            .find(|t| t.name.as_deref() == Some(name));
        thread.unwrap().id
    };
    let (a_id, b_id) = (id("a"), id("b"));
    assert_eq!(trace.overwritten_events, 10 + 2 * 2039);
    assert_eq!(trace.cut_start_ns, Some(window));
    let shapes = |trace: &Trace| -> Vec<_> {
        trace
            .async_spans
            .iter()
            .map(|c| {
                (
                    c.name(),
                    c.start_ns,
                    c.end_ns,
                    c.thread,
                    c.end_thread,
                    c.polls,
                    c.cut_at_start,
                    c.open_at_stop,
                )
            })
            .collect()
    };
    assert_eq!(
        shapes(&trace),
        [
            ("hop", window, y_end, b_id, Some(b_id), 1, true, false),
            ("hop", z_start, z_end, a_id, Some(b_id), 2, false, false),
        ]
    );
    for call in &trace.async_spans {
        assert!(call.duration_ns() <= trace.end_ns - window);
    }
    // The poll slices stay on their threads as recorded: `x`'s first (on B, before the
    // window's start) belongs to no call.
    let thread = |id: u64| trace.threads.iter().find(|t| t.id == id).unwrap();
    let polls = |id: u64| -> Vec<(u64, Option<u32>)> {
        thread(id)
            .spans
            .iter()
            .filter_map(|s| match s.kind {
                tickscope::trace::SpanKind::Poll { async_span: task } => Some((s.start_ns, task)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        polls(b_id),
        [(x_start, None), (y_end - 1, Some(0)), (z_end - 1, Some(1))]
    );
    assert_eq!(polls(a_id), [(z_start, Some(1))]);
    let a_spans = &thread(a_id).spans;
    assert_eq!(a_spans.len(), (6200 - 2039) + 1);
    assert_eq!(a_spans[0].start_ns, window);
    assert!(a_spans.iter().all(|s| !s.cut_at_start && !s.open_at_stop));
    let row = prof.report();
    let row = row.get("hop").unwrap();
    assert_eq!((row.calls, row.open_at_stop), (2, 0));
    assert_eq!(row.total_ns, (y_end - window) + (z_end - z_start));
    // Wall time and shares are of the window the data covers, not of the whole session.
    let covered = trace.end_ns - window;
    assert_eq!(trace.covered_ns(), covered);
    assert!(covered < trace.wall_ns());
    let report = prof.report();
    assert_eq!(report.wall_ns, covered);
    let hop = report.get("hop").unwrap();
    // An async call's Total % is its busy time's share of the time in scopes.
    let busy = hop.busy_ns.unwrap() as f64;
    assert_eq!(hop.total_percent, busy * 100.0 / report.scope_ns as f64);
    let table = prof.table().to_string();
    let footer = table.lines().find(|l| l.contains(" wall, ")).unwrap();
    let expected = format!(
        "{} wall, the flight recorder's window of a {} session, 2 threads, ",
        tickscope::table::format_ns(covered),
        tickscope::table::format_ns(trace.wall_ns())
    );
    assert!(footer.starts_with(&expected), "{footer}\n{expected}");
    // `y`, begun before the window, is said to count from its start.
    assert!(
        table.contains(
            "\n1 call begun before the flight recorder's window, counted from its start\n"
        ),
        "{table}"
    );

    // A capture file carries the same window: read back, it decodes to the same calls, and
    // the table of the file is the live one.
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    // The footer ends the file: 56 bytes (padded to 64), the window's start last.
    let footer = &bytes[bytes.len() - 80..];
    assert_eq!(&footer[..4], b"TSCP");
    assert_eq!(u16::from_le_bytes([footer[4], footer[5]]), 7);
    assert_eq!(u64::from_le_bytes(footer[8..16].try_into().unwrap()), 56);
    assert_eq!(
        u64::from_le_bytes(footer[16 + 48..16 + 56].try_into().unwrap()),
        window
    );
    let read = Capture::from_bytes(&bytes).unwrap();
    assert!(read[0].warnings().is_empty(), "{:?}", read[0].warnings());
    let decoded = read[0].decode();
    assert_eq!(decoded.cut_start_ns, Some(window));
    assert_eq!(shapes(&decoded), shapes(&trace));
    let table = tickscope::table::Table::from_captures(read).to_string();
    assert_eq!(table, prof.table().to_string());
    // The Chrome trace marks the cut call (no scope is cut: A's window opens at an entry).
    let json = scratch("calls.json");
    prof.write_chrome_trace(&json).unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(text.matches("\"cut_at_start\":true").count(), 1, "{text}");
    // Perfetto and Chrome JSON on Unix time written from the file's pieces (its calls
    // matched as its threads are read again, the cut one first): the decoded trace's bytes.
    use tickscope::export::chrome::{self, TimeOrigin};
    use tickscope::export::{Format, perfetto};
    let read = Capture::from_bytes(&bytes).unwrap();
    let refs: Vec<&Capture> = read.iter().collect();
    let formats: [&dyn Format; 2] = [
        &perfetto::Options::new(),
        &chrome::Options::new().time_origin(TimeOrigin::UnixEpoch),
    ];
    for format in formats {
        let (mut whole, mut pieces) = (Vec::new(), Vec::new());
        format.write(&decoded, &mut whole).unwrap();
        let written = format.write_captures(&refs, &mut pieces);
        assert!(matches!(written, Some(Ok(()))), "written from pieces");
        assert!(whole == pieces);
    }
}
