//! Streaming sessions (`ProfilerBuilder::stream_to`): the file holds every record, memory stays within
//! the pool however much is recorded, a slow disk blocks or drops with exact counts, and a
//! process that panics or is killed leaves a file that reads up to its last write.
//!
//! One streaming session runs at a time in a process, so these tests take turns.
#![cfg(all(feature = "enabled", unix))]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{scratch, serial, test_name};
use tickscope::__private::live_chunks;
use tickscope::{Capture, Profiler, SlowWriter, scope};

/// Bytes of a chunk's words (4096 of 8 bytes: 4096 entries and exits).
const CHUNK: usize = 32 << 10;
/// Records of a chunk of entries and exits on the real clock: its first takes two words (its
/// tick is the chunk's base), the others one.
const REAL: u64 = 4095;

#[test]
fn a_streamed_session_reads_back_whole() {
    let _turn = serial();
    let path = scratch("whole.tscope");
    let prof = Profiler::builder()
        .current_thread()
        .stream_to(&*path)
        .try_start()
        .unwrap();
    for i in 0..50_000u64 {
        let _outer = scope!("outer");
        let _inner = scope!("inner", i = i);
    }
    prof.stop();
    let stats = prof.stream_stats().unwrap();
    assert_eq!(stats.error, None);
    assert_eq!(stats.dropped_events, 0);
    // An entry and an exit per scope, and the argument of each inner scope.
    assert_eq!(stats.records_written, 50_000 * 5);
    assert_eq!(stats.bytes_written, std::fs::metadata(&path).unwrap().len());

    let capture = Capture::read(&path).unwrap();
    assert_eq!(capture.warnings(), &[] as &[String]);
    assert_eq!(capture.record_count(), 50_000 * 5);
    let report = capture.decode();
    // Both clock chunks of the file state the session's overhead compensation.
    assert!(matches!(
        report.compensation,
        Some(tickscope::trace::Compensation::Applied { .. })
    ));
    assert_eq!(report.compensation, prof.trace().compensation);
    let report = tickscope::report::Report::new(&report);
    assert_eq!(report.get("outer").unwrap().calls, 50_000);
    assert_eq!(report.get("inner").unwrap().calls, 50_000);
    // The session's own report reads the file back.
    let own = prof.report();
    assert_eq!(own.get("outer").unwrap().calls, 50_000);
    assert_eq!(own.get("inner").unwrap().calls, 50_000);
    assert_eq!(
        own.get("inner").unwrap().total_ns,
        report.get("inner").unwrap().total_ns
    );
    // Packed: a few bytes per record at most (about a tenth of a byte in a release build),
    // where unpacked they take 16 and a little for the tables and chunk headers.
    let per_record = stats.bytes_written as f64 / stats.records_written as f64;
    let limit = if cfg!(feature = "compress") {
        4.0
    } else {
        16.5
    };
    assert!(per_record < limit, "{per_record} bytes per record");
    println!("streamed: {per_record:.3} bytes per record");
}

/// A streaming session to `path` with two windows: three `first` scopes, a stop, `between`,
/// a restart and five `second` scopes; returned still running.
fn two_windows(path: &Path, between: impl FnOnce()) -> Profiler {
    let prof = Profiler::builder().current_thread().stream_to(path).start();
    for _ in 0..3 {
        let _g = scope!("first");
    }
    prof.stop();
    between();
    prof.restart();
    for _ in 0..5 {
        let _g = scope!("second");
    }
    prof
}

#[test]
fn a_restarted_stream_appends_a_session() {
    let _turn = serial();
    let path = scratch("restart.tscope");
    let prof = two_windows(&path, || {});
    // A snapshot while running reads what the stream has written.
    assert_eq!(prof.report().get("second").unwrap().calls, 5);
    prof.stop();
    let sessions = Capture::read_all(&path).unwrap();
    assert_eq!(sessions.len(), 2);
    let names = |c: &Capture| {
        let report = tickscope::report::Report::new(&c.decode());
        (
            report.get("first").map(|s| s.calls),
            report.get("second").map(|s| s.calls),
        )
    };
    assert_eq!(names(&sessions[0]), (Some(3), None));
    assert_eq!(names(&sessions[1]), (None, Some(5)));
    assert!(sessions.iter().all(|s| s.warnings().is_empty()));
    // The session reports its last window.
    assert_eq!(prof.report().get("second").unwrap().calls, 5);
    assert_eq!(prof.report().get("first"), None);
}

#[test]
fn a_restart_appends_after_the_last_whole_chunk() {
    let _turn = serial();
    let path = scratch("restart-after-cut.tscope");
    let prof = two_windows(&path, || {
        // The first window's footer cut short, as a write error (a full disk) leaves it.
        let whole = std::fs::metadata(&*path).unwrap().len();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&*path)
            .unwrap();
        file.set_len(whole - 7).unwrap();
    });
    prof.stop();
    let sessions = Capture::read_all(&path).unwrap();
    assert_eq!(sessions.len(), 2);
    // The first window lost only its footer: its records are all there, and it says so.
    let calls = |c: &Capture, name: &str| {
        tickscope::report::Report::new(&c.decode())
            .get(name)
            .map(|s| s.calls)
    };
    assert_eq!(calls(&sessions[0], "first"), Some(3));
    assert_eq!(
        sessions[0].warnings().len(),
        1,
        "{:?}",
        sessions[0].warnings()
    );
    assert!(sessions[0].warnings()[0].contains("has no footer"));
    // The second reads whole, after the first's whole chunks.
    assert_eq!(calls(&sessions[1], "second"), Some(5));
    assert!(
        sessions[1].warnings().is_empty(),
        "{:?}",
        sessions[1].warnings()
    );
    assert_eq!(prof.report().get("second").unwrap().calls, 5);
}

#[test]
fn memory_stays_within_the_pool() {
    let _turn = serial();
    let path = scratch("bounded.tscope");
    let before = live_chunks();
    let pool = 16 * CHUNK;
    let prof = Profiler::builder()
        .current_thread()
        .stream_to(&*path)
        .stream_memory(pool)
        .on_slow_disk(SlowWriter::Block)
        .try_start()
        .unwrap();
    let mut most = 0;
    // 4 M records, 32 MiB: 64 times the pool.
    for round in 0..200 {
        for _ in 0..10_000 {
            let _g = scope!("work");
        }
        if round % 10 == 0 {
            most = most.max(live_chunks());
        }
    }
    prof.stop();
    most = most.max(live_chunks());
    let stats = prof.stream_stats().unwrap();
    assert_eq!(stats.records_written, 4_000_000);
    assert_eq!(stats.dropped_events, 0);
    assert_eq!(stats.overflow_chunks, 0);
    // 16 chunks of 32 KiB of words, and their headers.
    assert_eq!(stats.pool_bytes, 16 * (CHUNK + 48));
    // The pool's chunks (taken from the recycling pool or allocated), and this thread's tail,
    // which it may have had before.
    assert!(
        most <= before + 16 + 1,
        "{most} chunks alive, {before} before: more than the pool's 16"
    );
    assert_eq!(prof.report().get("work").unwrap().calls, 2_000_000);
}

/// A FIFO at `path` and a reader that drains it slowly into memory, as a slow disk would
/// take writes.
fn slow_disk(path: &Path, pause: Duration) -> std::thread::JoinHandle<Vec<u8>> {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
    let path = path.to_owned();
    std::thread::spawn(move || {
        let mut fifo = std::fs::File::open(&path).unwrap();
        let mut bytes = Vec::new();
        let mut buf = vec![0; 16 << 10];
        loop {
            match fifo.read(&mut buf).unwrap() {
                0 => return bytes,
                n => bytes.extend_from_slice(&buf[..n]),
            }
            std::thread::sleep(pause);
        }
    })
}

/// Records `scopes` scopes on this thread in a session streaming to a FIFO that a reader
/// drains slowly (pausing `pause` per 16 KiB), with a pool of two chunks and `policy`; returns
/// the session, its figures and the bytes the reader got.
fn through_a_slow_disk(
    name: &str,
    pause: Duration,
    policy: SlowWriter,
    scopes: u64,
) -> (Profiler, tickscope::capture::StreamStats, Vec<u8>) {
    let path = scratch(name);
    let reader = slow_disk(&path, pause);
    let prof = Profiler::builder()
        .current_thread()
        .stream_to(&*path)
        .stream_memory(2 * CHUNK)
        .on_slow_disk(policy)
        .try_start()
        .unwrap();
    for _ in 0..scopes {
        let _g = scope!("slow_disk");
    }
    prof.stop();
    let stats = prof.stream_stats().unwrap();
    let bytes = reader.join().unwrap();
    assert_eq!(bytes.len() as u64, stats.bytes_written);
    (prof, stats, bytes)
}

#[test]
fn a_slow_disk_with_the_drop_policy_counts_every_event_lost() {
    let _turn = serial();
    const SCOPES: u64 = 300_000;
    let (prof, stats, bytes) = through_a_slow_disk(
        "drop.fifo",
        Duration::from_millis(2),
        SlowWriter::Drop,
        SCOPES,
    );
    assert!(stats.dropped_events > 0, "{stats:?}");
    assert_eq!(stats.waits, 0);
    // Every event is either in the file or counted as dropped.
    assert_eq!(stats.records_written + stats.dropped_events, 2 * SCOPES);
    let sessions = Capture::from_bytes(&bytes).unwrap();
    assert_eq!(sessions.len(), 1);
    let capture = &sessions[0];
    assert_eq!(capture.warnings(), &[] as &[String]);
    assert_eq!(capture.record_count(), stats.records_written);
    assert!(capture.dropped_events() >= stats.dropped_events);
    let table = tickscope::table::Table::new(std::sync::Arc::new(capture.decode())).to_string();
    assert!(table.contains("dropped event"), "{table}");
    // A FIFO cannot be read back: the session says so instead of hanging.
    let own = prof.capture();
    assert_eq!(own.record_count(), 0);
    assert!(
        own.warnings()[0].contains("not a regular file"),
        "{:?}",
        own.warnings()
    );
}

/// Several threads at once against a slow disk with the drop policy: each thread that finds
/// no chunk drops on its own until chunks come back (a dry spell), many times over, and still
/// every event is either in the file or counted, exactly; the threads record as before once
/// the stream stops.
#[test]
fn threads_refused_by_a_slow_disk_count_every_event_they_drop() {
    let _turn = serial();
    const THREADS: u64 = 4;
    const BATCHES: u64 = 20;
    const SCOPES: u64 = 20_000;
    let path = scratch("drop-threads.fifo");
    let reader = slow_disk(&path, Duration::from_millis(1));
    let prof = Profiler::builder()
        .stream_to(&*path)
        .stream_memory(2 * CHUNK)
        .on_slow_disk(SlowWriter::Drop)
        .try_start()
        .unwrap();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..BATCHES {
                    for _ in 0..SCOPES {
                        let _g = scope!("dry_spells");
                    }
                    // Chunks come back meanwhile: the spells end and begin again.
                    std::thread::sleep(Duration::from_millis(3));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    prof.stop();
    let stats = prof.stream_stats().unwrap();
    let bytes = reader.join().unwrap();
    assert!(stats.dropped_events > 0, "{stats:?}");
    assert!(stats.records_written > 0, "{stats:?}");
    assert_eq!(stats.waits, 0);
    assert_eq!(
        stats.records_written + stats.dropped_events,
        2 * THREADS * BATCHES * SCOPES
    );
    let sessions = Capture::from_bytes(&bytes).unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].record_count(), stats.records_written);
    assert_eq!(sessions[0].dropped_events(), stats.dropped_events);
    // Nothing refuses once the stream is gone: a session in memory gets every scope.
    let after = Profiler::builder().start();
    let thread = std::thread::spawn(|| {
        for _ in 0..50_000 {
            let _g = scope!("after_the_stream");
        }
    });
    thread.join().unwrap();
    after.stop();
    assert_eq!(
        after.report().get("after_the_stream").unwrap().calls,
        50_000
    );
    assert_eq!(after.capture().dropped_events(), 0);
}

#[test]
fn a_slow_disk_with_the_block_policy_loses_nothing() {
    let _turn = serial();
    const SCOPES: u64 = 40_000;
    let (_prof, stats, bytes) = through_a_slow_disk(
        "block.fifo",
        Duration::from_millis(1),
        SlowWriter::Block,
        SCOPES,
    );
    assert_eq!(stats.dropped_events, 0);
    assert!(stats.waits > 0, "{stats:?}");
    assert_eq!(stats.records_written, 2 * SCOPES);
    let sessions = Capture::from_bytes(&bytes).unwrap();
    let report = tickscope::report::Report::new(&sessions[0].decode());
    assert_eq!(report.get("slow_disk").unwrap().calls, SCOPES);
    assert_eq!(sessions[0].dropped_events(), 0);
}

#[test]
fn a_file_that_cannot_be_written_is_an_error_or_an_in_memory_session() {
    let _turn = serial();
    let path = scratch("no-such-dir").join("run.tscope");
    let err = Profiler::builder()
        .current_thread()
        .stream_to(&*path)
        .try_start()
        .unwrap_err();
    assert!(err.to_string().contains("run.tscope"), "{err}");
    assert!(err.to_string().contains("cannot open"), "{err}");
    let prof = Profiler::builder()
        .current_thread()
        .stream_to(&*path)
        .start();
    for _ in 0..4 {
        let _g = scope!("kept");
    }
    prof.stop();
    assert_eq!(prof.report().get("kept").unwrap().calls, 4);
    let stats = prof.stream_stats().unwrap();
    assert!(stats.error.unwrap().contains("cannot open"));
    assert_eq!(stats.records_written, 0);
}

#[test]
fn one_streaming_session_at_a_time() {
    let _turn = serial();
    let one = scratch("one.tscope");
    let first = Profiler::builder()
        .current_thread()
        .stream_to(&*one)
        .try_start()
        .unwrap();
    {
        let _g = scope!("first");
    }
    // Refused, and the file it names is left alone: here, the running stream's own.
    let err = Profiler::builder()
        .current_thread()
        .stream_to(&*one)
        .try_start()
        .unwrap_err();
    assert!(
        err.to_string().contains("another streaming session"),
        "{err}"
    );
    first.stop();
    let report = tickscope::report::Report::new(&Capture::read(&one).unwrap().decode());
    assert_eq!(report.get("first").unwrap().calls, 1);
    let again = Profiler::builder()
        .current_thread()
        .stream_to(&*scratch("two.tscope"))
        .try_start();
    assert!(again.is_ok());
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
        .env("TICKSCOPE_STREAM_CHILD", path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn child_path() -> Option<PathBuf> {
    std::env::var_os("TICKSCOPE_STREAM_CHILD").map(PathBuf::from)
}

/// The child of [`a_panic_writes_what_was_recorded`]: records, panics in a thread with a scope
/// open, and exits at once, without running any destructor.
#[test]
#[ignore = "run as a child process by a_panic_writes_what_was_recorded"]
fn child_that_panics() {
    let Some(path) = child_path() else {
        return;
    };
    let prof = Profiler::builder().stream_to(&*path).start();
    let worker = std::thread::spawn(|| {
        for _ in 0..1000 {
            let _g = scope!("before_panic");
        }
        let _open = scope!("open_at_panic");
        panic!("the end");
    });
    assert!(worker.join().is_err());
    std::mem::forget(prof);
    std::process::exit(3);
}

#[test]
fn a_panic_writes_what_was_recorded() {
    let path = scratch("panic.tscope");
    let status = child("child_that_panics", &path).wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let capture = Capture::read(&path).unwrap();
    assert!(
        capture
            .warnings()
            .iter()
            .any(|w| w.contains("has no footer")),
        "{:?}",
        capture.warnings()
    );
    let report = tickscope::report::Report::new(&capture.decode());
    assert_eq!(report.get("before_panic").unwrap().calls, 1000);
    assert_eq!(report.get("open_at_panic").unwrap().calls, 1);
}

/// The child of [`one_panic_hook_writes_the_stream_and_the_dump_before_the_previous_hook`]: a
/// program's own panic hook, then a streaming session and a flight recorder that dumps on
/// panic, both recording; panics in a thread with a scope open, and exits at once. The
/// program's hook, run last, notes whether the dump was there by then.
#[test]
#[ignore = "run as a child process by one_panic_hook_writes_the_stream_and_the_dump_before_the_previous_hook"]
fn child_with_a_hook_a_stream_and_a_flight_recorder_that_panics() {
    let Some(path) = child_path() else {
        return;
    };
    let (dump, marker) = (
        path.with_extension("dump.tscope"),
        path.with_extension("hook"),
    );
    let dumped = dump.clone();
    std::panic::set_hook(Box::new(move |_| {
        let seen = if dumped.exists() { "dump" } else { "none" };
        std::fs::write(&marker, seen).unwrap();
    }));
    let stream = Profiler::builder().stream_to(&*path).start();
    let flight = Profiler::builder()
        .flight_recorder(4 * CHUNK)
        .flight_recorder_dump_on_panic(&dump)
        .start();
    let worker = std::thread::spawn(|| {
        for _ in 0..1000 {
            let _g = scope!("before_panic");
        }
        let _open = scope!("open_at_panic");
        panic!("the end");
    });
    assert!(worker.join().is_err());
    std::mem::forget((stream, flight));
    std::process::exit(3);
}

/// A streaming session and a flight recorder in one process share the one panic hook: the
/// stream's file and the recorder's dump both hold what was recorded, and the hook in place
/// before them runs after both (the dump is written by then).
#[test]
fn one_panic_hook_writes_the_stream_and_the_dump_before_the_previous_hook() {
    let path = scratch("both.tscope");
    // Where the child puts the dump and the note of its own hook (`path`'s extension changed).
    let (dump, marker) = (scratch("both.dump.tscope"), scratch("both.hook"));
    let name = "child_with_a_hook_a_stream_and_a_flight_recorder_that_panics";
    let status = child(name, &path).wait().unwrap();
    assert_eq!(status.code(), Some(3));
    assert_eq!(std::fs::read_to_string(&*marker).unwrap(), "dump");
    for file in [&*path, &*dump] {
        let capture = Capture::read(file).unwrap();
        let report = tickscope::report::Report::new(&capture.decode());
        assert_eq!(report.get("before_panic").unwrap().calls, 1000, "{file:?}");
        assert_eq!(report.get("open_at_panic").unwrap().calls, 1, "{file:?}");
    }
}

/// The child of [`kill_9_leaves_a_file_that_reads_to_its_last_chunk`]: records on two threads
/// until it is killed.
#[test]
#[ignore = "run as a child process by kill_9_leaves_a_file_that_reads_to_its_last_chunk"]
fn child_that_is_killed() {
    let Some(path) = child_path() else {
        return;
    };
    let _prof = Profiler::builder().stream_to(&*path).start();
    let worker = || loop {
        let _outer = scope!("outer");
        for _ in 0..10 {
            let _g = scope!("inner");
        }
    };
    std::thread::spawn(worker);
    worker();
}

#[test]
fn kill_9_leaves_a_file_that_reads_to_its_last_chunk() {
    let path = scratch("killed.tscope");
    let mut child = child("child_that_is_killed", &path);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&path).map_or(0, |m| m.len()) < 1 << 20 {
        assert!(Instant::now() < deadline, "the child wrote too little");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    let capture = Capture::read(&path).unwrap();
    assert!(
        capture
            .warnings()
            .iter()
            .any(|w| w.contains("has no footer")),
        "{:?}",
        capture.warnings()
    );
    // Every whole chunk of the file, packed or not, and nothing of a chunk cut short.
    let records = capture.record_count();
    let (whole, cut) = whole_chunk_records(&std::fs::read(&path).unwrap());
    assert_eq!(records, whole, "{cut} bytes cut short");
    assert!(cut < 2 * CHUNK, "{cut} bytes after the last whole chunk");
    eprintln!(
        "killed at {size} bytes: {records} records salvaged ({:.3} bytes a record), {:?}",
        size as f64 / records as f64,
        capture.warnings()
    );
    let report = tickscope::report::Report::new(&capture.decode());
    let outer = report.get("outer").unwrap().calls;
    let inner = report.get("inner").unwrap().calls;
    assert!(
        outer > 1000 && inner >= 9 * outer,
        "{outer} outer, {inner} inner"
    );
}

/// The records in the whole event chunks of capture file `bytes` (16 bytes each in an event
/// chunk, the count of its prefix in a packed one), and the bytes after the last whole chunk.
fn whole_chunk_records(bytes: &[u8]) -> (u64, usize) {
    use tickscope::capture::format::{CHUNK_HEADER, EVENT_CHUNK, EVENTS_PACKED, padded};
    let (mut at, mut records) = (0, 0);
    while let Some(head) = bytes.get(at..at + CHUNK_HEADER) {
        let kind = u16::from_le_bytes([head[4], head[5]]);
        let len = u64::from_le_bytes(head[8..16].try_into().unwrap()) as usize;
        let Some(content) = bytes.get(at + CHUNK_HEADER..at + CHUNK_HEADER + len) else {
            break;
        };
        match kind {
            EVENT_CHUNK => records += (len as u64 - 16) / 16,
            EVENTS_PACKED => {
                records += u64::from(u32::from_le_bytes(content[16..20].try_into().unwrap()))
            }
            _ => {}
        }
        at = (at + CHUNK_HEADER + padded(len as u64) as usize).min(bytes.len());
    }
    (records, bytes.len() - at)
}

#[test]
fn a_session_in_memory_beside_a_stream_keeps_its_window() {
    let _turn = serial();
    let path = scratch("beside.tscope");
    let memory = Profiler::builder().current_thread().start();
    let streamed = Profiler::builder()
        .current_thread()
        .stream_to(&*path)
        .stream_memory(2 * CHUNK)
        .try_start()
        .unwrap();
    // Many chunks: the stream writes them, the session in memory still needs them all.
    for _ in 0..100_000 {
        let _g = scope!("both");
    }
    streamed.stop();
    let _after = scope!("memory_only");
    drop(_after);
    memory.stop();
    let stats = streamed.stream_stats().unwrap();
    assert_eq!(stats.records_written, 200_000);
    assert_eq!(stats.waits, 0);
    assert_eq!(streamed.report().get("both").unwrap().calls, 100_000);
    assert_eq!(streamed.report().get("memory_only"), None);
    let report = memory.report();
    assert_eq!(report.get("both").unwrap().calls, 100_000);
    assert_eq!(report.get("memory_only").unwrap().calls, 1);
}

#[test]
fn a_pool_of_one_chunk_keeps_recording_with_the_drop_policy() {
    let _turn = serial();
    let path = scratch("one-chunk.tscope");
    let prof = Profiler::builder()
        .current_thread()
        .on_slow_disk(SlowWriter::Drop)
        .stream_memory(CHUNK)
        .stream_to(&*path)
        .try_start()
        .unwrap();
    const SCOPES: u64 = 1_000_000;
    for _ in 0..100 {
        for _ in 0..SCOPES / 100 {
            let _g = scope!("one_chunk");
        }
        // Pauses give the writer (which polls every 2 ms) its turn even where threads are
        // serialised (valgrind): the pool's one chunk must come back between batches.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    prof.stop();
    let stats = prof.stream_stats().unwrap();
    // The options hold whatever their order.
    assert_eq!(stats.pool_bytes, CHUNK + 48);
    assert_eq!(stats.records_written + stats.dropped_events, 2 * SCOPES);
    // A full chunk is written and given back while it is still the thread's last one: the
    // thread records on, more than its one chunk.
    assert!(stats.records_written >= 3 * 4096, "{stats:?}");
    assert_eq!(
        Capture::read(&path).unwrap().record_count(),
        stats.records_written
    );
}

#[test]
fn a_pool_too_large_is_an_error() {
    let _turn = serial();
    let path = scratch("huge.tscope");
    let err = Profiler::builder()
        .stream_to(&*path)
        .stream_memory(usize::MAX)
        .try_start()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("bytes allowed"), "{err}");
    assert!(!path.exists());
}

/// Waits until `done` holds (the writer works on its own thread, on its own time), failing
/// after a minute.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "still not {what} after a minute");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_file_that_cannot_be_opened_keeps_the_last_pool_of_records_and_counts_the_rest() {
    let _turn = serial();
    let path = scratch("missing-dir").join("run.tscope");
    // The in-memory window is a flight recorder's: its scanner paused, as in tests/mock/flight.rs
    // (a chunk it holds when the chunk is recycled goes to the pool when it lets go, and the
    // thread takes another meanwhile).
    tickscope::__private::flight_pause_scanner(true);
    // A fresh thread, whose chunks are all the window's, and no overhead probe before it.
    let recorded = std::thread::spawn(move || {
        let prof = Profiler::builder()
            .current_thread()
            .compensate_overhead(false)
            .stream_to(&path)
            .stream_memory(2 * CHUNK)
            .start();
        // The window's two chunks are allocated (the threads' first chunks prepared too).
        let before = live_chunks();
        let mut most = 0;
        // 400 000 records, 98 chunks of 4095 (on the real clock a chunk's first record takes
        // two of its 4096 words): 49 times the stream's memory of two.
        for round in 0..20 {
            for _ in 0..10_000 {
                let _g = scope!("kept");
            }
            if round % 2 == 0 {
                most = most.max(live_chunks());
            }
        }
        most = most.max(live_chunks());
        // Still recording: the window so far says it too.
        assert_eq!(prof.stream_stats().unwrap().records_lost, 96 * REAL);
        prof.stop();
        // The window's chunks, recycled: not one more.
        assert_eq!(most, before, "{most} chunks alive, {before} at start");
        let error = format!(
            "{}: cannot open: No such file or directory (os error 2)",
            path.display()
        );
        // The last chunk full (4095 records), the one being filled (2785), the 96 before
        // overwritten.
        let table = stream_failed(&prof, &error, 0, 96 * REAL);
        let trace = prof.trace();
        assert_eq!(trace.overwritten_events, 96 * REAL);
        let report = prof.report();
        assert_eq!(report.get("kept").unwrap().calls, (4095 + 2785) / 2);
        assert!(
            table.contains("393120 overwritten events (flight recorder)"),
            "{table}"
        );
        assert!(!path.exists());
    })
    .join();
    tickscope::__private::flight_pause_scanner(false);
    recorded.unwrap();
}

/// `prof` stopped with its stream failed with `error`, `written` records in its file and
/// `lost` counted as lost: in `stream_stats`, in `Report::stream_failure` and in the table's
/// footer. Returns the table.
fn stream_failed(prof: &Profiler, error: &str, written: u64, lost: u64) -> String {
    let stats = prof.stream_stats().unwrap();
    assert_eq!(stats.error.as_deref(), Some(error));
    assert_eq!((stats.records_written, stats.records_lost), (written, lost));
    assert_eq!(
        prof.report().stream_failure,
        Some(tickscope::report::StreamFailure::new(error, lost))
    );
    let table = prof.table().to_string();
    assert!(
        table.contains(&format!(
            "\nStream failed: {error}; {lost} events lost (in neither the file nor memory)\n"
        )),
        "{table}"
    );
    table
}

/// On a thread of its own, streams to `path`, which cannot be streamed to (with `error`)
/// beside the running session of the caller, where a flight recorder could not bound the
/// window: the session keeps nothing and counts every record as lost, the chunks it takes
/// going back as it goes (checked after every 4096 records, 409,602 in all).
fn keeps_nothing_and_counts_all(
    path: PathBuf,
    error: impl FnOnce(&Path) -> String + Send + 'static,
) {
    std::thread::spawn(move || {
        let prof = Profiler::builder()
            .current_thread()
            .compensate_overhead(false)
            .stream_to(&path)
            .start();
        {
            let _g = scope!("lost");
        }
        // This thread's chunk is taken (the session's first chunks are prepared).
        let before = live_chunks();
        let mut recorded = 2;
        // About a chunk's worth of records at a time (4096; a chunk holds 4095, its first
        // record taking two words): each round fills the chunk being filled and takes one
        // more, and the writer gives the full one back, counting its records: the next round
        // takes that one again, and no chunk is ever allocated. Every full chunk is counted
        // once at most the records of the one being filled (fewer than a chunk's 4095) are
        // not: waiting for more would wait for the writer's timed take of that one.
        for _ in 0..100 {
            for _ in 0..2048 {
                let _g = scope!("lost");
            }
            recorded += 4096;
            wait_until("counted", || {
                prof.stream_stats().unwrap().records_lost + REAL > recorded
            });
            assert!(
                live_chunks() <= before,
                "{} chunks alive, {before} before",
                live_chunks()
            );
        }
        prof.stop();
        stream_failed(&prof, &error(&path), 0, 409_602);
        assert_eq!(prof.report().get("lost"), None);
    })
    .join()
    .unwrap();
}

#[test]
fn a_file_that_cannot_be_opened_beside_another_flight_recorder_keeps_nothing_and_counts_all() {
    let _turn = serial();
    // The one flight recorder of the process, recording nothing here: the stream's window
    // cannot be one.
    let other = Profiler::builder()
        .current_thread()
        .flight_recorder(CHUNK)
        .start();
    let file = scratch("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    keeps_nothing_and_counts_all(file.join("run.tscope"), |path| {
        format!(
            "{}: cannot open: Not a directory (os error 20)",
            path.display()
        )
    });
    other.stop();
}

#[test]
fn a_second_stream_beside_a_running_one_keeps_nothing_and_counts_all() {
    let _turn = serial();
    // A streaming session that writes its file, recording nothing here.
    let first = scratch("first.tscope");
    let other = Profiler::builder()
        .current_thread()
        .stream_to(&*first)
        .try_start()
        .unwrap();
    // One stream at a time: this one cannot start, and a flight recorder beside the running
    // stream could not recycle its chunks. The window keeps nothing, and writes no file.
    let second = scratch("second.tscope");
    keeps_nothing_and_counts_all(second.to_path_buf(), |path| {
        format!(
            "{}: another streaming session is running (one at a time)",
            path.display()
        )
    });
    assert!(!second.exists());
    other.stop();
    // The running stream saw none of it: its thread recorded nothing.
    assert_eq!(other.report().len(), 0);
}

/// Streams 10 000 scopes to `path` through a pool of two chunks, waits until they are
/// written, lets `gone` take the file away and waits until the stream sees it, then records
/// 50 000 more (25 chunks: the writer must give them back) and stops.
fn lose_the_file(path: &Path, gone: impl FnOnce()) -> Profiler {
    let prof = Profiler::builder()
        .current_thread()
        .stream_to(path)
        .stream_memory(2 * CHUNK)
        .on_slow_disk(SlowWriter::Block)
        .try_start()
        .unwrap();
    let record = || {
        for _ in 0..10_000 {
            let _g = scope!("step");
        }
    };
    record();
    // The chunk being filled is written too, every quarter of a second.
    wait_until("written", || {
        prof.stream_stats().unwrap().records_written == 20_000
    });
    gone();
    wait_until("failed", || prof.stream_stats().unwrap().error.is_some());
    for _ in 0..5 {
        record();
    }
    prof.stop();
    let stats = prof.stream_stats().unwrap();
    // The writer gave every chunk back after the failure: the pool was enough.
    assert_eq!((stats.overflow_chunks, stats.dropped_events), (0, 0));
    prof
}

#[test]
fn a_file_deleted_mid_run_fails_the_stream_and_counts_everything_lost() {
    let _turn = serial();
    let path = scratch("deleted.tscope");
    let prof = lose_the_file(&path, || std::fs::remove_file(&path).unwrap());
    let error = format!(
        "{}: cannot write: the file was deleted while the session streamed to it",
        path.display()
    );
    // Nothing is left of what was written, and nothing was written after.
    stream_failed(&prof, &error, 0, 120_000);
    assert_eq!(prof.stream_stats().unwrap().bytes_written, 0);
    assert!(!path.exists());
    assert_eq!(prof.report().get("step"), None);
}

#[test]
fn a_file_moved_mid_run_keeps_what_it_got_and_the_rest_is_counted_lost() {
    let _turn = serial();
    let path = scratch("moving.tscope");
    let moved = scratch("moved.tscope");
    let prof = lose_the_file(&path, || std::fs::rename(&path, &moved).unwrap());
    let error = format!(
        "{}: cannot write: the file was moved or replaced while the session streamed to it",
        path.display()
    );
    stream_failed(&prof, &error, 20_000, 100_000);
    let capture = Capture::read(&*moved).unwrap();
    assert_eq!(capture.record_count(), 20_000);
    assert_eq!(
        prof.stream_stats().unwrap().bytes_written,
        std::fs::metadata(&moved).unwrap().len()
    );
    // The session's own capture does not read its path, which now names nothing (or, as
    // well, another file).
    let own = prof.capture();
    assert_eq!(own.record_count(), 0);
    assert_eq!(own.dropped_events(), 100_000);
    assert_eq!(
        own.warnings(),
        [format!(
            "{error}: 100000 records lost (in neither the file nor memory)"
        )]
    );
}

/// Runs this test binary's ignored test `name` as a child process with `path` in its
/// environment, through `sh -c script` (`$0 "$@"` is the child's command line); returns
/// its output.
fn child_output(name: &str, path: &Path, script: &str) -> std::process::Output {
    Command::new("sh")
        .args(["-c", script])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name(module_path!(), name),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TICKSCOPE_STREAM_CHILD", path)
        .output()
        .unwrap()
}

/// The child of [`start_warns_once_on_stderr_when_the_file_cannot_be_opened`]: starts a
/// session streaming to a path in a missing directory, restarts it, another to a path under
/// a file (this test binary), and one with more memory than a stream may have.
#[test]
#[ignore = "run as a child process by start_warns_once_on_stderr_when_the_file_cannot_be_opened"]
fn child_that_cannot_open() {
    let Some(path) = child_path() else {
        return;
    };
    let prof = Profiler::builder()
        .current_thread()
        .stream_to(&path)
        .start();
    prof.stop();
    // The same failure again: said once is enough.
    prof.restart();
    prof.stop();
    let under_a_file = std::env::current_exe().unwrap().join("run.tscope");
    let other = Profiler::builder()
        .current_thread()
        .stream_to(under_a_file)
        .stream_memory(3 * CHUNK + 1)
        .start();
    other.stop();
    // More memory than a stream may have: the window in memory is capped.
    let huge = Profiler::builder()
        .current_thread()
        .stream_to(&path)
        .stream_memory(usize::MAX)
        .start();
    assert!(huge.is_running());
    huge.stop();
}

#[test]
fn start_warns_once_on_stderr_when_the_file_cannot_be_opened() {
    let path = scratch("missing").join("run.tscope");
    let out = child_output("child_that_cannot_open", &path, "exec \"$0\" \"$@\"");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("tickscope"))
        .collect();
    let exe = std::env::current_exe().unwrap();
    assert_eq!(
        warnings,
        [
            format!(
                "tickscope: {}: cannot open: No such file or directory (os error 2); the \
                 session records its last 16 MiB in memory instead",
                path.display()
            ),
            format!(
                "tickscope: {}/run.tscope: cannot open: Not a directory (os error 20); the \
                 session records its last 96 KiB in memory instead",
                exe.display()
            ),
            format!(
                "tickscope: {}: a stream's memory of {} bytes is more than the 68719476736 \
                 bytes allowed; the session records its last 64 MiB in memory instead",
                path.display(),
                usize::MAX
            ),
        ]
    );
}

/// The child of [`a_full_disk_mid_run_fails_the_stream_and_counts_every_record`]: streams a
/// million records through a pool of two chunks to a file the shell limits to a few KiB (the
/// records are packed), and prints its figures and its table.
#[test]
#[ignore = "run as a child process by a_full_disk_mid_run_fails_the_stream_and_counts_every_record"]
fn child_that_fills_the_disk() {
    let Some(path) = child_path() else {
        return;
    };
    let prof = Profiler::builder()
        .current_thread()
        .stream_to(&path)
        .stream_memory(2 * CHUNK)
        .on_slow_disk(SlowWriter::Block)
        .try_start()
        .unwrap();
    for _ in 0..500_000 {
        let _g = scope!("fill");
    }
    prof.stop();
    let stats = prof.stream_stats().unwrap();
    println!(
        "FIGURES {} {} {} {} {}",
        stats.records_written,
        stats.records_lost,
        stats.bytes_written,
        stats.overflow_chunks,
        stats.dropped_events
    );
    println!("ERROR {}", stats.error.unwrap_or_default());
    print!("{}", prof.table());
}

#[test]
fn a_full_disk_mid_run_fails_the_stream_and_counts_every_record() {
    let path = scratch("full.tscope");
    // A file of at most 16 KiB (`ulimit -f` counts blocks of 512 or 1024 bytes, by shell),
    // its writes past that an error (EFBIG) rather than the end of the process.
    let out = child_output(
        "child_that_fills_the_disk",
        &path,
        "trap '' XFSZ; ulimit -f 16 && exec \"$0\" \"$@\"",
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.split_once(key).map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("no {key} in {stdout}"))
            .to_owned()
    };
    let figures: Vec<u64> = line("FIGURES ")
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    let [written, lost, bytes, overflow, dropped] = figures[..] else {
        panic!("{figures:?}");
    };
    let error = format!(
        "{}: cannot write: File too large (os error 27)",
        path.display()
    );
    assert_eq!(line("ERROR "), error);
    // Every record is in the file or counted lost; the chunks were given back meanwhile.
    assert_eq!(written + lost, 1_000_000);
    assert!(written > 0 && lost > 0, "{figures:?}");
    assert_eq!((overflow, dropped), (0, 0));
    // The file holds what the stream counts as written, the bytes it took, and no more.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes);
    assert!(bytes <= 16 << 10, "{bytes}");
    let capture = Capture::read(&path).unwrap();
    assert_eq!(capture.record_count(), written);
    assert!(stdout.contains(&format!(
        "\nStream failed: {error}; {lost} events lost (in neither the file nor memory)\n"
    )));
    // Said once on stderr when it happened, as a stream that cannot start says it.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "tickscope: {error}; the stream stops writing: what the session records from now \
             on is lost, and counted (`Profiler::stream_stats`, the table's footer)\n"
        )
    );
}
