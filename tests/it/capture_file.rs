//! Capture files: a live session and the same session read back from its file decode to the
//! same trace (byte-identical Chrome JSON, identical reports); size on disk; concatenated
//! files, and their sessions of several processes decoded into one trace; every malformed input read as an error or a warning with its byte offset; and
//! mutated files (bit flips, truncations, forged lengths and fields) that must not panic the
//! reader or the decoder, nor make them allocate more than a few times the input's size
//! (measured by a counting global allocator).
#![cfg(feature = "enabled")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use tickscope::__private::format::{
    CALLSITES, CLOCK, CLOCK_IDENTITY, EVENT_CHUNK, FOOTER_MEMORY, NO_STRING, SESSION_FOOTER,
    SESSION_HEADER, STRINGS, THREADS,
};
use tickscope::__private::{RawEvent, RawKind};
use tickscope::export::{Format, chrome, folded, kineto};
use tickscope::report::Report;
use tickscope::table::Table;
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, profile, scope};

use crate::common::scratch_path as scratch;

// ---------------------------------------------------------------------------------------------
// What reading and decoding allocate, per thread (tests run on several threads at once).

/// Counts the bytes each thread holds allocated, and their peak: the allocator under this
/// binary's `TrackingAlloc` (`tests/it/main.rs`).
pub(crate) struct Counting;

thread_local! {
    /// Bytes this thread allocated minus those it freed (negative when it frees what another
    /// thread allocated).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The most `LIVE` was since [`allocated_peak`] reset it.
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Adds `delta` bytes to this thread's count.
fn count(delta: isize) {
    // `try_with`: nothing to count while the thread's locals are torn down.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments and returns its
// result; counting touches only this thread's two cells (const-initialised, no destructor,
// no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // The old block and the new one may be held at once while it copies.
            count(new_size as isize);
            count(-(layout.size() as isize));
        }
        new
    }
}

/// What `f` returns, and the most bytes this thread held allocated while it ran beyond what
/// it held before (what it returns included).
fn allocated_peak<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(base));
    let result = f();
    let peak = PEAK.with(Cell::get);
    (result, (peak - base).max(0) as usize)
}

/// What `f` returns the second time it runs, and the most bytes this thread held allocated
/// while it did (see [`allocated_peak`]). The first run interns the callsites and strings the
/// input names in process-wide tables, which grow by doubling as the whole test binary fills
/// them: that is not the input's cost, and the second run does not pay it again.
fn second_run_peak<R>(f: impl Fn() -> R) -> (R, usize) {
    drop(f());
    allocated_peak(f)
}

/// The most that reading, or decoding what was read, may allocate for `input` bytes: a few
/// times the input, plus room for fixed costs (the first tables of a session).
fn allocation_bound(input: usize) -> usize {
    8 * input + (256 << 10)
}

fn chrome_json(trace: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    chrome::write(trace, &mut out).unwrap();
    out
}

/// The other text exports of `trace`: Kineto JSON and folded stacks, by thread or not.
fn other_exports(trace: &Trace) -> Vec<Vec<u8>> {
    let mut kineto = Vec::new();
    kineto::Options::new(0, 1)
        .write(trace, &mut kineto)
        .unwrap();
    let folded = |by_thread| {
        let mut out = Vec::new();
        folded::write(trace, &mut out, folded::Options::new().by_thread(by_thread)).unwrap();
        out
    };
    vec![kineto, folded(false), folded(true)]
}

#[profile]
async fn fetch(n: u32) -> u32 {
    tokio::task::yield_now().await;
    let _g = scope!("parse", n = n);
    n * 2
}

/// A stopped session with nested scopes, arguments of every type, a dynamic name, a link to
/// another thread, async calls on a current-thread tokio runtime and a scope open at stop.
fn rich_session() -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    let _open = scope!("open at stop");
    {
        let _outer = scope!(
            "request",
            route = "/api/items/with/a/rather/long/path",
            id = 42u64,
            delta = -7i64,
            ratio = 0.5f64,
            ok = true,
            peer = %"10.0.0.7"
        );
        for i in 0..3u32 {
            let _step = scope!("step", i = i);
            let _leaf = scope!("leaf");
        }
        let _dynamic = scope!(name = format!("dynamic {}", 7));
        let link = tickscope::link();
        let worker = prof.clone();
        std::thread::Builder::new()
            .name("worker".into())
            .spawn(move || {
                worker.join_current_thread();
                let _g = scope!("serve", follows = link, bytes = 512u32);
                let _inner = scope!("write");
            })
            .unwrap()
            .join()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (a, b) = runtime.block_on(async { tokio::join!(fetch(1), fetch(2)) });
        assert_eq!((a, b), (2, 4));
    }
    prof.stop();
    prof
}

#[test]
fn a_session_read_back_from_its_file_decodes_as_the_live_one() {
    let prof = rich_session();
    let path = scratch("round_trip.tscope");
    prof.write_capture(&path).unwrap();
    let capture = Capture::read(&path).unwrap();
    assert!(capture.warnings().is_empty(), "{:?}", capture.warnings());

    let live = prof.trace();
    let file = capture.decode();
    // The real clock's probe overhead is compensated, and the file says by how much.
    assert!(
        matches!(
            live.compensation,
            Some(tickscope::trace::Compensation::Applied { .. })
        ),
        "{:?}",
        live.compensation
    );
    assert_eq!(live.compensation, file.compensation);
    let table = tickscope::table::Table::new(std::sync::Arc::new(file.clone())).to_string();
    assert!(table.contains("\nOverhead compensation: "), "{table}");
    assert!(
        String::from_utf8(chrome_json(&file))
            .unwrap()
            .contains("\"overhead_compensation\":\"applied\",\"probe_inner_ns\":"),
    );
    assert_eq!(chrome_json(&live), chrome_json(&file));
    assert_eq!(Report::new(&live), Report::new(&file));
    assert_eq!(Report::by_thread(&live), Report::by_thread(&file));
    assert_eq!(Report::by_origin(&live), Report::by_origin(&file));
    assert_eq!(Report::by_arg(&live, "i"), Report::by_arg(&file, "i"));
    // The session has what it should, so the comparison means something.
    assert_eq!(file.threads.len(), 2);
    assert_eq!(file.async_spans.len(), 2);
    assert_eq!(file.flows.len(), 1);
    let report = Report::new(&file);
    assert_eq!(report.get("step").unwrap().calls, 3);
    assert_eq!(report.get("dynamic 7").unwrap().calls, 1);
    assert_eq!(report.get("fetch").unwrap().calls, 2);
    assert!(
        file.threads
            .iter()
            .any(|t| t.name.as_deref() == Some("worker"))
    );
    assert!(
        file.threads
            .iter()
            .flat_map(|t| &t.spans)
            .any(|s| s.open_at_stop)
    );
    let json = String::from_utf8(chrome_json(&file)).unwrap();
    assert!(
        json.contains("/api/items/with/a/rather/long/path"),
        "{json}"
    );

    let live_capture = prof.capture();
    assert_eq!(capture.record_count(), live_capture.record_count());
    assert_eq!(capture.thread_count(), live_capture.thread_count());
    assert_eq!(capture.format_version(), tickscope::capture::FORMAT_VERSION);
    assert_eq!(capture.producer(), live_capture.producer());
    assert_eq!(capture.process_id(), std::process::id());
    let exe = std::env::current_exe().unwrap();
    assert_eq!(
        capture.process_name(),
        exe.file_name().unwrap().to_string_lossy()
    );
    assert_eq!(capture.host_name(), live_capture.host_name());
    assert_eq!(capture.tracks_memory(), live_capture.tracks_memory());
    assert_eq!(capture.dropped_events(), live_capture.dropped_events());

    // Writing what was read gives the same file, but for the chunking of the records.
    let mut again = Vec::new();
    capture.write_to(&mut again).unwrap();
    let again = &Capture::from_bytes(&again).unwrap()[0];
    assert_eq!(chrome_json(&again.decode()), chrome_json(&live));
}

#[test]
fn reading_a_file_twice_gives_the_same_callsites() {
    let prof = Profiler::builder().current_thread().start();
    {
        let _g = scope!("twice");
    }
    prof.stop();
    let path = scratch("twice.tscope");
    prof.write_capture(&path).unwrap();
    let first = Capture::read(&path).unwrap().decode();
    let second = Capture::read(&path).unwrap().decode();
    let (a, b) = (
        first.threads[0].spans[0].callsite,
        second.threads[0].spans[0].callsite,
    );
    assert_eq!(a.name(), "twice");
    assert!(std::ptr::eq(a, b), "interned once");
    assert_eq!(a.file(), file!());
}

#[test]
fn gzipped_files_read_back_the_same() {
    let prof = rich_session();
    let (plain, gz) = (scratch("plain.tscope"), scratch("packed.tscope.gz"));
    prof.write_capture(&plain).unwrap();
    prof.write_capture(&gz).unwrap();
    let bytes = std::fs::read(&gz).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
    let (a, b) = (Capture::read(&plain).unwrap(), Capture::read(&gz).unwrap());
    assert!(b.warnings().is_empty(), "{:?}", b.warnings());
    assert_eq!(chrome_json(&a.decode()), chrome_json(&b.decode()));
}

/// Read from a file, a gzipped capture is decompressed into a temporary file that only its
/// user may read and that no folder lists: the captures hold it open while they live.
#[cfg(target_os = "linux")]
#[test]
fn a_gzipped_file_is_decompressed_into_a_private_unlisted_temporary_file() {
    use std::os::unix::fs::PermissionsExt;

    let prof = rich_session();
    let gz = scratch("private.tscope.gz");
    prof.write_capture(&gz).unwrap();
    // This process's open temporary copies (other tests may hold some too): (target, mode).
    let temporaries = || -> Vec<(String, u32)> {
        let prefix = format!(".tickscope-gunzip-{}-", std::process::id());
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| {
                let fd = e.ok()?.path();
                let target = std::fs::read_link(&fd).ok()?.to_string_lossy().into_owned();
                let mode = std::fs::metadata(&fd).ok()?.permissions().mode();
                target.contains(&prefix).then_some((target, mode & 0o777))
            })
            .collect()
    };
    let captures = Capture::read_all(&gz).unwrap();
    let held = temporaries();
    assert!(!held.is_empty(), "no temporary file held");
    for (target, mode) in &held {
        assert!(target.ends_with(" (deleted)"), "{target} is listed");
        assert_eq!(*mode, 0o600, "{target}");
    }
    let plain = scratch("private.tscope");
    prof.write_capture(&plain).unwrap();
    assert_eq!(
        chrome_json(&captures[0].decode()),
        chrome_json(&Capture::read(&plain).unwrap().decode())
    );
}

/// A gzip bomb (members of 1 MiB of zeros, 1 KiB each, one after the other) is an error
/// once it decompresses past 64 times its size plus 64 MiB, not read into memory whole.
#[test]
fn a_gzip_bomb_is_an_error() {
    use std::io::Write;

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![0u8; 1 << 20]).unwrap();
    let bomb = gz.finish().unwrap().repeat(100);
    let limit = 64 * bomb.len() + (64 << 20);
    assert!(limit < 100 << 20, "{} bytes compressed", bomb.len());
    let (read, peak) = allocated_peak(|| Capture::from_bytes(&bomb));
    let e = read.unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "gzipped, it decompresses to more than {} bytes (64 times its {} bytes plus 64 MiB): \
             not read",
            limit,
            bomb.len()
        )),
        "{e}"
    );
    assert_eq!(e.offset(), None);
    // What was decompressed up to the limit, in a vector grown by doubling.
    assert!(peak <= 3 * limit, "{peak} bytes allocated at once");
    // Read from a file, the error names it.
    let path = scratch("bomb.tscope.gz");
    std::fs::write(&path, &bomb).unwrap();
    let e = Capture::read(&path).unwrap_err();
    assert_eq!(e.path(), Some(path.as_path()));
    assert!(
        e.to_string()
            .starts_with(&format!("{}: gzipped, it decompresses", path.display())),
        "{e}"
    );
}

#[test]
fn a_capture_takes_sixteen_bytes_and_a_bit_per_event() {
    const SCOPES: usize = 100_000;
    let prof = Profiler::builder().current_thread().start();
    for _ in 0..SCOPES {
        let _g = scope!("tight");
    }
    prof.stop();
    let capture = prof.capture();
    let mut out = Vec::new();
    let written = capture.write_to(&mut out).unwrap();
    assert_eq!(written, out.len() as u64);
    let events = capture.record_count();
    assert_eq!(events, 2 * SCOPES as u64);
    let per_event = written as f64 / events as f64;
    println!("{written} bytes for {events} events: {per_event:.3} bytes/event");
    assert!(per_event <= 16.5, "{per_event} bytes/event");

    let path = scratch("size.tscope");
    prof.write_capture(&path).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), written);
    let back = Capture::read(&path).unwrap();
    assert_eq!(Report::new(&back.decode()), prof.report());
}

#[test]
fn concatenated_files_hold_every_session_in_order() {
    let session = |name: &'static str, calls: usize| {
        let prof = Profiler::builder().current_thread().start();
        for _ in 0..calls {
            let _g = scope!(name = name);
        }
        prof.stop();
        prof
    };
    let (a, b) = (session("first", 2), session("second", 3));
    let (pa, pb, both) = (
        scratch("a.tscope"),
        scratch("b.tscope"),
        scratch("both.tscope"),
    );
    a.write_capture(&pa).unwrap();
    b.write_capture(&pb).unwrap();
    let mut joined = std::fs::read(&pa).unwrap();
    joined.extend(std::fs::read(&pb).unwrap());
    std::fs::write(&both, &joined).unwrap();

    let all = Capture::read_all(&both).unwrap();
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|c| c.warnings().is_empty()));
    let (ra, rb) = (Report::new(&all[0].decode()), Report::new(&all[1].decode()));
    assert_eq!(ra.get("first").unwrap().calls, 2);
    assert!(ra.get("second").is_none());
    assert_eq!(rb.get("second").unwrap().calls, 3);
    assert!(rb.get("first").is_none());
    assert_eq!(ra, a.report());
    assert_eq!(rb, b.report());

    let first = Capture::read(&both).unwrap();
    assert_eq!(Report::new(&first.decode()), ra);
    assert_eq!(first.warnings().len(), 1);
    assert!(
        first.warnings()[0].contains("holds 2 sessions"),
        "{:?}",
        first.warnings()
    );
}

// ---------------------------------------------------------------------------------------------
// Files made by hand.

fn chunk(kind: u16, version: u16, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"TSCP");
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(content.len() as u64).to_le_bytes());
    out.extend_from_slice(content);
    out.resize(out.len().next_multiple_of(16), 0);
    out
}

fn words(fields: &[u32]) -> Vec<u8> {
    fields.iter().flat_map(|f| f.to_le_bytes()).collect()
}

fn header(format_version: u16) -> Vec<u8> {
    let mut c = Vec::new();
    c.extend_from_slice(&format_version.to_le_bytes());
    c.extend_from_slice(&0u16.to_le_bytes());
    c.extend_from_slice(&7u32.to_le_bytes());
    c.extend_from_slice(&1000u64.to_le_bytes());
    c.extend_from_slice(b"crafted\0proc\0host\0");
    chunk(SESSION_HEADER, 1, &c)
}

/// A clock whose ticks are nanoseconds.
fn clock() -> Vec<u8> {
    let mut c = words(&[CLOCK_IDENTITY, 0, 0, 0]);
    c.extend_from_slice(&[0; 16]);
    chunk(CLOCK, 1, &c)
}

fn strings(strings: &[&str]) -> Vec<u8> {
    let mut c = Vec::new();
    for s in strings {
        c.extend_from_slice(s.as_bytes());
        c.push(0);
    }
    chunk(STRINGS, 1, &c)
}

/// `(id, name, file, line, module)` entries, names as string ids.
fn callsites(entries: &[[u32; 5]]) -> Vec<u8> {
    let c: Vec<u32> = entries
        .iter()
        .flat_map(|e| [e[0], e[1], e[2], e[3], e[4], 0])
        .collect();
    chunk(CALLSITES, 1, &words(&c))
}

/// `(id, from tick, name)` entries.
fn threads(entries: &[(u64, u64, u32)]) -> Vec<u8> {
    let mut c = Vec::new();
    for &(id, from, name) in entries {
        c.extend_from_slice(&id.to_le_bytes());
        c.extend_from_slice(&from.to_le_bytes());
        c.extend_from_slice(&words(&[name, 0]));
    }
    chunk(THREADS, 1, &c)
}

fn events(thread: u64, records: &[RawEvent]) -> Vec<u8> {
    let mut c = Vec::new();
    c.extend_from_slice(&thread.to_le_bytes());
    c.extend_from_slice(&0u64.to_le_bytes());
    for r in records {
        c.extend_from_slice(&r.tick.to_le_bytes());
        c.extend_from_slice(&r.id.to_le_bytes());
        c.extend_from_slice(&(r.kind as u32).to_le_bytes());
    }
    chunk(EVENT_CHUNK, 1, &c)
}

fn footer(start: u64, end: u64, records: u64, flags: u32) -> Vec<u8> {
    let mut c = Vec::new();
    for v in [start, end, records, 0] {
        c.extend_from_slice(&v.to_le_bytes());
    }
    c.extend_from_slice(&words(&[flags, 0]));
    chunk(SESSION_FOOTER, 1, &c)
}

/// "outer" (1) from 100 to 150 around "inner" (2) from 110 to 120, on thread 1 ("main").
fn scope_records() -> Vec<RawEvent> {
    vec![
        RawEvent::begin(1, 100),
        RawEvent::begin(2, 110),
        RawEvent::end(RawEvent::end_key(2, 110), 120),
        RawEvent::end(RawEvent::end_key(1, 100), 150),
    ]
}

/// The chunks of a valid hand-made session, by name.
struct Parts {
    header: Vec<u8>,
    clock: Vec<u8>,
    strings: Vec<u8>,
    callsites: Vec<u8>,
    threads: Vec<u8>,
    events: Vec<u8>,
    footer: Vec<u8>,
}

impl Parts {
    fn new() -> Self {
        Self {
            header: header(1),
            clock: clock(),
            strings: strings(&["outer", "inner", "t.rs", "m", "main"]),
            callsites: callsites(&[[1, 0, 2, 10, 3], [2, 1, 2, 11, 3]]),
            threads: threads(&[(1, 0, 4)]),
            events: events(1, &scope_records()),
            footer: footer(0, 200, 4, 0),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        [
            &self.header[..],
            &self.clock,
            &self.strings,
            &self.callsites,
            &self.threads,
            &self.events,
            &self.footer,
        ]
        .concat()
    }

    /// Where the event chunk starts.
    fn events_at(&self) -> usize {
        self.header.len()
            + self.clock.len()
            + self.strings.len()
            + self.callsites.len()
            + self.threads.len()
    }
}

fn one(bytes: &[u8]) -> Capture {
    let mut all = Capture::from_bytes(bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(all.len(), 1);
    all.pop().unwrap()
}

/// (name, start, end, open at stop) of each span of the only thread.
fn spans(capture: &Capture) -> Vec<(&'static str, u64, u64, bool)> {
    let trace = capture.decode();
    assert_eq!(trace.threads.len(), 1);
    trace.threads[0]
        .spans
        .iter()
        .map(|s| (s.callsite.name(), s.start_ns, s.end_ns, s.open_at_stop))
        .collect()
}

fn has(warnings: &[String], text: &str) -> bool {
    warnings.iter().any(|w| w.contains(text))
}

#[test]
fn a_hand_made_file_reads_exactly() {
    let capture = one(&Parts::new().bytes());
    assert!(capture.warnings().is_empty(), "{:?}", capture.warnings());
    assert_eq!(capture.producer(), "crafted");
    assert_eq!(capture.process_name(), "proc");
    assert_eq!(capture.host_name(), "host");
    assert_eq!(capture.process_id(), 7);
    assert_eq!(
        spans(&capture),
        [("outer", 100, 150, false), ("inner", 110, 120, false)]
    );
    let trace = capture.decode();
    assert_eq!((trace.start_ns, trace.end_ns), (0, 200));
    assert_eq!(trace.threads[0].name.as_deref(), Some("main"));
}

#[track_caller]
fn error(bytes: &[u8], offset: usize, text: &str) {
    match Capture::from_bytes(bytes) {
        Ok(c) => panic!("read {} sessions, expected an error", c.len()),
        Err(e) => {
            assert_eq!(e.offset(), Some(offset as u64), "{e}");
            let message = e.to_string();
            assert!(
                message.starts_with(&format!("at byte {offset}: ")),
                "{message}"
            );
            assert!(message.contains(text), "{message}");
            assert!(e.path().is_none());
        }
    }
}

#[test]
fn empty_and_short_inputs_are_errors() {
    error(&[], 0, "empty");
    error(&[0x54, 0x53], 0, "too few for a chunk header");
    error(&[0; 64], 0, "expected the magic \"TSCP\"");
}

#[test]
fn a_wrong_magic_is_an_error_at_its_offset() {
    let parts = Parts::new();
    let mut bytes = parts.bytes();
    let at = parts.events_at();
    bytes[at..at + 4].copy_from_slice(b"TSCQ");
    error(&bytes, at, "no chunk starts here");
}

#[test]
fn a_capture_starts_with_a_session_header() {
    let parts = Parts::new();
    error(&parts.clock, 0, "starts with a session header chunk");
}

#[test]
fn an_unknown_format_version_is_an_error() {
    let mut parts = Parts::new();
    parts.header = header(2);
    error(&parts.bytes(), 16, "format version 2 is not supported");
    let mut bytes = Parts::new().bytes();
    bytes[6] = 9; // the header chunk's own version
    error(&bytes, 0, "session header chunk version 9");
}

#[test]
fn a_session_header_cut_short_is_an_error() {
    let bytes = Parts::new().bytes();
    error(
        &bytes[..30],
        0,
        "announces 34 bytes of content, but only 14 are left",
    );
    let mut forged = bytes.clone();
    forged[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    error(&forged, 0, "announces 18446744073709551615 bytes");
}

#[test]
fn a_truncated_event_chunk_is_salvaged() {
    let parts = Parts::new();
    let bytes = parts.bytes();
    // The header, the prefix, two whole records and 5 bytes of the third.
    let cut = parts.events_at() + 16 + 16 + 2 * 16 + 5;
    let capture = one(&bytes[..cut]);
    let w = capture.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        has(
            w,
            &format!(
                "byte {}: the events chunk is cut short by the end of the input: salvaged 48 of 80 bytes",
                parts.events_at()
            )
        ),
        "{w:?}"
    );
    assert!(has(w, "has no footer"), "{w:?}");
    // Both scopes are open at the last record's tick, which ends the window.
    assert_eq!(
        spans(&capture),
        [("outer", 100, 110, true), ("inner", 110, 110, true)]
    );
    assert_eq!(capture.decode().end_ns, 110);
}

#[test]
fn a_forged_event_chunk_length_keeps_the_whole_records() {
    let parts = Parts::new();
    let mut bytes = parts.bytes();
    let at = parts.events_at();
    bytes[at + 8..at + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    // The chunk now runs to the end of the input: its own records are kept, and the footer's
    // header, read as a record, has no valid kind and ends the salvage.
    let capture = one(&bytes);
    let w = capture.warnings();
    assert!(has(w, "salvaged 80 of 18446744073709551615 bytes"), "{w:?}");
    assert!(has(w, "has no footer"), "{w:?}");
    assert_eq!(
        spans(&capture),
        [("outer", 100, 150, false), ("inner", 110, 120, false)]
    );
}

#[test]
fn a_session_without_footer_ends_at_its_last_record() {
    let mut parts = Parts::new();
    parts.footer.clear();
    let events_end = parts.events_at() + parts.events.len();
    let capture = one(&parts.bytes());
    let w = capture.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        has(
            w,
            &format!("the session at byte 0 has no footer (it ends at byte {events_end}")
        ),
        "{w:?}"
    );
    assert!(
        has(
            w,
            "its window ending at its last record, 150 ns after the session start, on thread 1 \"main\"; "
        ),
        "{w:?}"
    );
    assert_eq!(
        spans(&capture),
        [("outer", 100, 150, false), ("inner", 110, 120, false)]
    );
    let trace = capture.decode();
    assert_eq!((trace.start_ns, trace.end_ns), (0, 150));
}

/// A file of three declared threads cut inside thread 1's event chunk, which follows thread
/// 2's: thread 1 recorded "outer" (1) from 100 around "inner" (2) from 110 to 120, and the
/// cut took outer's end (its fourth record, at 150) and the footer; thread 2 recorded "outer"
/// from 200 to 500; thread 3 recorded nothing. Returns the bytes cut 5 bytes into thread 1's
/// fourth record.
fn cut_in_thread_one() -> Vec<u8> {
    let parts = Parts::new();
    let file = [
        &parts.header[..],
        &parts.clock,
        &parts.strings,
        &parts.callsites,
        &threads(&[(1, 0, 4), (2, 0, NO_STRING), (3, 0, NO_STRING)]),
        &events(
            2,
            &[
                RawEvent::begin(1, 200),
                RawEvent::end(RawEvent::end_key(1, 200), 500),
            ],
        ),
    ]
    .concat();
    let at = file.len();
    let whole = [&file[..], &events(1, &scope_records()), &parts.footer].concat();
    // The chunk header, the prefix, three whole records and 5 bytes of the fourth.
    whole[..at + 16 + 16 + 3 * 16 + 5].to_vec()
}

/// A scope left open by the cut ends at its own thread's last salvaged record (120), not at
/// the session's end (500, thread 2's last record); every thread with a salvaged record is
/// in the trace, and the trace counts what was lost: the 16 bytes of the cut chunk past its
/// whole records (80 announced, 64 salvaged), one scope cut open, one declared thread with no
/// record.
#[test]
fn a_scope_cut_open_ends_at_its_own_threads_last_record() {
    let capture = one(&cut_in_thread_one());
    let w = capture.warnings();
    assert!(has(w, "salvaged 64 of 80 bytes"), "{w:?}");
    assert!(has(w, "(16 bytes lost at the cut)"), "{w:?}");
    let trace = capture.decode();
    assert_eq!((trace.start_ns, trace.end_ns), (0, 500));
    let spans: Vec<_> = trace
        .threads
        .iter()
        .map(|t| {
            let spans: Vec<_> = t
                .spans
                .iter()
                .map(|s| (s.callsite.name(), s.start_ns, s.end_ns, s.open_at_stop))
                .collect();
            (t.id, spans)
        })
        .collect();
    assert_eq!(
        spans,
        [
            (
                1,
                vec![("outer", 100, 120, true), ("inner", 110, 120, false)]
            ),
            (2, vec![("outer", 200, 500, false)]),
        ]
    );
    assert_eq!(trace.thread_count(), 2);
    let salvage = &trace.salvage;
    assert_eq!(
        (
            salvage.sessions,
            salvage.lost_bytes,
            salvage.open_scopes,
            salvage.threads_without_records,
        ),
        (1, 16, 1, 1)
    );
    // The table (summed from the records, or of the decoded trace) says so.
    let footer = "3 scopes, 0 dropped events\nTotal % and Self %: of ";
    let salvaged = "\nSalvaged: 1 session cut short (no footer): 16 bytes lost at the cut, 1 \
                    scope cut open (*), 1 declared thread with no record left\n";
    let summed = Table::from_captures(vec![capture])
        .by_thread(true)
        .to_string();
    assert!(summed.contains(footer), "{summed}");
    assert!(summed.contains(salvaged), "{summed}");
    assert_eq!(
        Table::new(Arc::new(trace)).by_thread(true).to_string(),
        summed
    );
    let row = summed.lines().find(|l| l.contains("outer *")).unwrap();
    assert!(row.starts_with("main"), "{summed}");
    assert!(
        row.contains(" 20 ns "),
        "outer on main lasts 100 to 120: {summed}"
    );
}

/// A salvaged session written back (as `tickscope merge --allow-salvaged` does) reads back
/// whole, without warnings, and decodes to the same trace: its footer says it was salvaged.
#[test]
fn a_salvaged_session_written_back_decodes_as_it_did() {
    let capture = one(&cut_in_thread_one());
    let trace = capture.decode();
    let mut again = Vec::new();
    capture.write_to(&mut again).unwrap();
    let back = one(&again);
    assert!(back.warnings().is_empty(), "{:?}", back.warnings());
    let reread = back.decode();
    type Shape = Vec<(u64, Vec<(u64, u64, bool)>)>;
    let shape = |t: &tickscope::trace::Trace| -> Shape {
        t.threads
            .iter()
            .map(|t| {
                let spans = t.spans.iter();
                (
                    t.id,
                    spans
                        .map(|s| (s.start_ns, s.end_ns, s.open_at_stop))
                        .collect(),
                )
            })
            .collect()
    };
    assert_eq!(shape(&reread), shape(&trace));
    assert_eq!(reread.salvage, trace.salvage);
    assert_eq!(
        (reread.start_ns, reread.end_ns),
        (trace.start_ns, trace.end_ns)
    );
    // And once more: the mark is kept.
    let mut third = Vec::new();
    back.write_to(&mut third).unwrap();
    assert_eq!(third, again);
}

/// A gzipped file cut short is salvaged as the plain file cut where its decompressed bytes
/// end, with a warning, instead of failing to decompress.
#[test]
fn a_gzipped_file_cut_short_is_salvaged_as_its_decompressed_prefix() {
    use std::io::{Read, Write};

    let parts = Parts::new();
    // Thread 1 calls "outer" 3000 times, 100 ns each; the file is about 100 KB.
    let records: Vec<RawEvent> = (0..3000u64)
        .flat_map(|i| {
            let t = 1000 + i * 200;
            [
                RawEvent::begin(1, t),
                RawEvent::end(RawEvent::end_key(1, t), t + 100),
            ]
        })
        .collect();
    let events = events(1, &records);
    let plain = [
        &parts.header[..],
        &parts.clock,
        &parts.strings,
        &parts.callsites,
        &parts.threads,
        &events,
        &footer(0, 700_000, 6000, 0),
    ]
    .concat();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    let cut = &gz[..gz.len() / 2];
    // What the cut stream decompresses to, up to where it stops.
    let mut prefix = Vec::new();
    assert!(
        flate2::read::GzDecoder::new(cut)
            .read_to_end(&mut prefix)
            .is_err()
    );
    assert!(prefix.len() > parts.events_at() + 32 && prefix.len() < plain.len());
    assert_eq!(prefix[..], plain[..prefix.len()]);

    let from_gz = one(cut);
    let from_plain = one(&prefix);
    assert!(
        has(from_gz.warnings(), "the gzip stream ends early"),
        "{:?}",
        from_gz.warnings()
    );
    let salvaged = spans(&from_gz);
    // Whole records from the chunk's prefix on; an odd one is a scope cut open.
    let whole = (prefix.len() - parts.events_at() - 32) / 16;
    assert_eq!(salvaged.len(), whole.div_ceil(2));
    assert!(salvaged.len() > 100, "{}", salvaged.len());
    assert_eq!(salvaged, spans(&from_plain));
    assert_eq!(from_gz.decode().salvage, from_plain.decode().salvage);
    assert_eq!(from_gz.record_count(), whole as u64);
}

/// An async call whose end was lost with the rest of the file is open, up to its thread's
/// last salvaged record: a `#[profile] async fn` call polled once, and a `tracing` span
/// entered once whose close was lost (it was in flight: a plain scope only once it closed).
#[test]
fn a_salvaged_async_call_is_open_to_its_threads_last_record() {
    let mut parts = Parts::new();
    parts.strings = strings(&["outer", "inner", "t.rs", "m", "main", "fetch", "handler"]);
    parts.callsites = callsites(&[
        [1, 0, 2, 10, 3],
        [2, 1, 2, 11, 3],
        [3, 5, 2, 12, 3],
        [4, 6, 2, 13, 3],
    ]);
    parts.threads = threads(&[(1, 0, 4), (2, 0, NO_STRING)]);
    let mut one_thread = vec![
        // fetch: begun at 100, its first poll from 100 to 130, then pending.
        RawEvent::new(RawKind::AsyncBegin, 3, 100),
        RawEvent::payload(7, 0),
        RawEvent::new(RawKind::PollBegin, 3, 100),
        RawEvent::payload(7, 0),
        RawEvent::end(RawEvent::end_key(3, 100), 130),
    ];
    // handler: a `tracing` span entered from 140 to 160, not closed.
    one_thread.extend(RawEvent::span_enter(4, 140, 99));
    one_thread.push(RawEvent::end(RawEvent::end_key(4, 140), 160));
    parts.events = [
        events(1, &one_thread),
        events(
            2,
            &[
                RawEvent::begin(1, 200),
                RawEvent::end(RawEvent::end_key(1, 200), 500),
            ],
        ),
    ]
    .concat();
    parts.footer.clear();
    let capture = one(&parts.bytes());
    let trace = capture.decode();
    let calls: Vec<_> = trace
        .async_spans
        .iter()
        .map(|a| {
            (
                a.name(),
                a.start_ns,
                a.end_ns,
                a.polls,
                a.busy_ns,
                a.open_at_stop,
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("fetch", 100, 160, 1, 30, true),
            ("handler", 140, 160, 1, 20, true),
        ]
    );
    assert_eq!(trace.salvage.open_scopes, 2);
    assert_eq!(trace.salvage.lost_bytes, 0);
    let table = Table::from_captures(vec![capture]).to_string();
    for row in ["fetch *", "handler *"] {
        let line = table.lines().find(|l| l.starts_with(row));
        assert!(line.is_some_and(|l| l.contains(" 1 ")), "{row}: {table}");
    }
    assert!(
        table.contains("Salvaged: 1 session cut short (no footer): 0 bytes lost at the cut, 2 scopes cut open (*)\n"),
        "{table}"
    );
}

#[test]
fn unknown_chunk_types_and_versions_are_skipped_with_a_warning() {
    let parts = Parts::new();
    let mut bytes = parts.bytes();
    let at = bytes.len() - parts.footer.len();
    let unknown = chunk(99, 1, b"from a later version");
    let newer = chunk(CALLSITES, 2, &[0xff; 24]);
    let inserted = [unknown.clone(), newer].concat();
    bytes.splice(at..at, inserted);
    let capture = one(&bytes);
    let w = capture.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        has(
            w,
            &format!("byte {at}: unknown chunk type 99 (version 1, 20 bytes): skipped")
        ),
        "{w:?}"
    );
    assert!(
        has(
            w,
            &format!(
                "byte {}: callsite table chunk version 2 is not supported (this build reads version 1): skipped",
                at + unknown.len()
            )
        ),
        "{w:?}"
    );
    assert_eq!(spans(&capture), spans(&one(&parts.bytes())));
}

#[test]
fn an_event_chunk_of_an_undeclared_thread_is_an_error() {
    let mut parts = Parts::new();
    parts.events = events(9, &scope_records());
    error(
        &parts.bytes(),
        parts.events_at(),
        "an events chunk of thread 9, which no thread table of the session declares",
    );
}

#[test]
fn a_callsite_naming_an_undeclared_string_is_an_error() {
    let mut parts = Parts::new();
    parts.callsites = callsites(&[[1, 0, 2, 10, 3], [2, 99, 2, 11, 3]]);
    let entry = parts.header.len() + parts.clock.len() + parts.strings.len() + 16 + 24;
    error(
        &parts.bytes(),
        entry,
        "callsite 2's name names string 99, but the session's string table holds 5 strings",
    );
    let mut parts = Parts::new();
    parts.threads = threads(&[(1, 0, 5)]);
    error(
        &parts.bytes(),
        parts.events_at() - parts.threads.len() + 16,
        "thread 1's name names string 5",
    );
}

#[test]
fn an_unknown_record_kind_is_an_error_at_the_record() {
    let parts = Parts::new();
    let mut bytes = parts.bytes();
    let record = parts.events_at() + 16 + 16 + 16;
    bytes[record + 12..record + 16].copy_from_slice(&77u32.to_le_bytes());
    error(&bytes, record, "record 1 of the events chunk");
}

#[test]
fn forged_callsite_ids_allocate_nothing() {
    let mut parts = Parts::new();
    // Three entries: ids 1, 3 (2 is not declared) and u32::MAX (out of range).
    parts.callsites = callsites(&[[1, 0, 2, 10, 3], [3, 1, 2, 11, 3], [u32::MAX, 1, 2, 12, 3]]);
    let capture = one(&parts.bytes());
    let w = capture.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        has(
            w,
            "callsite id 4294967295 is out of range (the session declares 3 callsites"
        ),
        "{w:?}"
    );
    // Callsite 2 is not declared: its scope is not decoded.
    assert_eq!(spans(&capture), [("outer", 100, 150, false)]);
}

/// Thread entries that all name one long string: each thread's name is a string of its own,
/// so reading copies the names only up to the size of the input, and cuts the rest short
/// (with a warning) rather than allocating thousands of times the input.
#[test]
fn thread_names_cost_no_more_than_the_input() {
    let long = "w".repeat(16 << 10);
    let mut parts = Parts::new();
    parts.strings = strings(&["outer", "inner", "t.rs", "m", &long]);
    let entries: Vec<(u64, u64, u32)> = (1..=4000).map(|id| (id, 0, 4)).collect();
    parts.threads = threads(&entries);
    parts.footer = footer(0, 200, 4, 0);
    let bytes = parts.bytes();
    let ((capture, trace), peak) = second_run_peak(|| {
        let capture = one(&bytes);
        let trace = capture.decode();
        (capture, trace)
    });
    let bound = allocation_bound(bytes.len());
    assert!(
        peak <= bound,
        "reading {} bytes allocated {peak} bytes at once (bound {bound})",
        bytes.len()
    );
    assert_eq!(capture.thread_count(), 4000);
    assert!(
        has(capture.warnings(), "thread names are cut short past"),
        "{:?}",
        capture.warnings()
    );
    // The first threads keep their whole name, thread 1 (the one with records) among them.
    assert_eq!(trace.threads.len(), 1);
    assert_eq!(trace.threads[0].name.as_deref(), Some(long.as_str()));
}

/// A string table of empty strings (nothing but NULs) costs a few bytes a string, not the
/// two slices and a cache slot a string it once did (32 bytes for each byte of input).
#[test]
fn empty_strings_cost_little() {
    let mut parts = Parts::new();
    let mut names = vec![""; 256 << 10];
    names.extend(["outer", "inner", "t.rs", "m", "main"]);
    parts.strings = strings(&names);
    let n = 256 << 10;
    parts.callsites = callsites(&[[1, n, n + 2, 10, n + 3], [2, n + 1, n + 2, 11, n + 3]]);
    parts.threads = threads(&[(1, 0, n + 4)]);
    let bytes = parts.bytes();
    let (capture, peak) = second_run_peak(|| one(&bytes));
    let bound = allocation_bound(bytes.len());
    assert!(
        peak <= bound,
        "reading {} bytes allocated {peak} bytes at once (bound {bound})",
        bytes.len()
    );
    assert_eq!(
        spans(&capture),
        [("outer", 100, 150, false), ("inner", 110, 120, false)]
    );
}

#[test]
fn leftovers_after_a_session_are_warnings() {
    let bytes = Parts::new().bytes();
    // A stray table after the footer, then a few bytes.
    let mut more = [bytes.clone(), strings(&["stray"]), vec![b'T', b'S', b'C']].concat();
    let capture = one(&more);
    let w = capture.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(has(w, "a string table chunk outside any session"), "{w:?}");
    assert!(
        has(w, "the last 3 bytes are too few for a chunk header"),
        "{w:?}"
    );
    // A chunk cut short outside a session.
    more.truncate(bytes.len() + 20);
    let capture = one(&more);
    assert!(
        has(capture.warnings(), "salvaged 0 of 6 bytes"),
        "{:?}",
        capture.warnings()
    );
}

#[test]
fn errors_from_files_name_the_file() {
    let path = scratch("garbage.tscope");
    std::fs::write(&path, b"this is no capture file at all").unwrap();
    let e = Capture::read(&path).unwrap_err();
    assert_eq!(e.path(), Some(path.as_path()));
    let message = e.to_string();
    assert!(
        message.starts_with(&format!(
            "{}: at byte 0: no chunk starts here",
            path.display()
        )),
        "{message}"
    );
    let missing = scratch("missing.tscope");
    let e = Capture::read_all(&missing).unwrap_err();
    assert_eq!(e.offset(), None);
    assert!(
        e.to_string()
            .starts_with(&format!("cannot read {}: ", missing.display())),
        "{e}"
    );
    assert!(std::error::Error::source(&e).is_some());
}

// ---------------------------------------------------------------------------------------------
// Mutations: nothing read from any input may panic, nor may decoding what was read.

/// xorshift64: a fixed sequence for a fixed seed, no dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Reads `bytes` and decodes whatever sessions it holds, checking that neither allocates more
/// than [`allocation_bound`] allows.
fn exercise(bytes: &[u8]) -> usize {
    let bound = allocation_bound(bytes.len());
    let (read, peak) = second_run_peak(|| Capture::from_bytes(bytes));
    assert!(
        peak <= bound,
        "reading {} bytes allocated {peak} bytes at once (bound {bound})",
        bytes.len()
    );
    match read {
        Ok(captures) => {
            for capture in &captures {
                let (trace, peak) = allocated_peak(|| capture.decode());
                assert!(
                    peak <= bound,
                    "decoding {} bytes allocated {peak} bytes at once (bound {bound})",
                    bytes.len()
                );
                std::hint::black_box(Report::new(&trace));
                std::hint::black_box(chrome_json(&trace));
                std::hint::black_box(other_exports(&trace));
                std::hint::black_box(tables(trace));
            }
            // And all of them on one time line.
            let trace = Trace::from_captures(&captures);
            std::hint::black_box(Report::by_thread(&trace));
            std::hint::black_box(chrome_json(&trace));
            captures.len()
        }
        Err(e) => {
            assert!(e.offset().is_some_and(|o| o <= bytes.len() as u64), "{e}");
            0
        }
    }
}

/// A richer hand-made session to mutate: two threads, arguments, async marks, links,
/// allocations (memory tracked), then a second session.
fn base() -> Vec<u8> {
    let mut records = scope_records();
    let str_bytes = u64::from_le_bytes(*b"abcdefgh");
    records.extend([
        RawEvent::begin(1, 160),
        RawEvent::new(RawKind::ArgU64, 3, 42),
        RawEvent::new(RawKind::ArgStr, 3, 14),
        RawEvent::new(RawKind::Bytes, 0x6b6a_6968, str_bytes),
        RawEvent::new(RawKind::Bytes, 0x6e6d, 0x6c6b),
        RawEvent::new(RawKind::Link, 0, 165),
        RawEvent::memory(RawKind::Alloc, 64, 0x1000, 166)[0],
        RawEvent::memory(RawKind::Alloc, 64, 0x1000, 166)[1],
        RawEvent::memory(RawKind::Alloc, 32, 0x2000, 166)[0],
        RawEvent::memory(RawKind::Alloc, 32, 0x2000, 166)[1],
        RawEvent::memory(RawKind::Free, 32, 0x2000, 166)[0],
        RawEvent::memory(RawKind::Free, 32, 0x2000, 166)[1],
        RawEvent::new(RawKind::AsyncBegin, 2, 167),
        RawEvent::payload(5, 0),
        RawEvent::new(RawKind::PollBegin, 2, 168),
        RawEvent::payload(5, 0),
        RawEvent::end(RawEvent::end_key(2, 168), 169),
        RawEvent::new(RawKind::AsyncEnd, 2, 170),
        RawEvent::payload(5, 0),
        RawEvent::end(RawEvent::end_key(1, 160), 180),
    ]);
    let other = [
        RawEvent::begin_follows(2, 170, 1, 0)[0],
        RawEvent::begin_follows(2, 170, 1, 0)[1],
        RawEvent::memory(RawKind::Free, 64, 0x1000, 171)[0],
        RawEvent::memory(RawKind::Free, 64, 0x1000, 171)[1],
        RawEvent::end(RawEvent::end_key(2, 170), 175),
    ];
    let mut clock = words(&[0, 2, 2, 0]);
    clock.extend_from_slice(&0.4f64.to_bits().to_le_bytes());
    clock.extend_from_slice(&[0; 8]);
    for (tick, ns) in [(90u64, 1_000u64), (91, 1_001), (400, 1_124), (401, 1_124)] {
        clock.extend_from_slice(&tick.to_le_bytes());
        clock.extend_from_slice(&ns.to_le_bytes());
    }
    let session = [
        header(1),
        chunk(CLOCK, 1, &clock),
        strings(&["outer", "inner", "t.rs", "m", "main", "key"]),
        callsites(&[[1, 0, 2, 10, 3], [2, 1, 2, 11, 3], [3, 5, 2, 12, 3]]),
        threads(&[(1, 0, 4), (2, 50, NO_STRING)]),
        events(1, &records),
        events(2, &other),
        footer(0, 300, (records.len() + other.len()) as u64, FOOTER_MEMORY),
    ]
    .concat();
    [session.clone(), session].concat()
}

/// Offsets, content lengths and types of the chunks of a valid `bytes`.
fn chunk_offsets(bytes: &[u8]) -> Vec<(usize, u64, u16)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 16 <= bytes.len() {
        let kind = u16::from_le_bytes([bytes[pos + 4], bytes[pos + 5]]);
        let len = u64::from_le_bytes(bytes[pos + 8..pos + 16].try_into().unwrap());
        out.push((pos, len, kind));
        pos += 16 + (len as usize).next_multiple_of(16);
    }
    out
}

/// Every mutation of `base`; returns how many inputs were read.
fn mutate(base: &[u8], seed: u64, flips: usize) -> usize {
    let mut inputs = 0;
    let mut rng = XorShift(seed);
    // Bit flips: one to four bits anywhere.
    for _ in 0..flips {
        let mut bytes = base.to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len());
            bytes[at] ^= 1 << rng.below(8);
        }
        exercise(&bytes);
        inputs += 1;
    }
    // Truncation at every 97th offset.
    for cut in (0..base.len()).step_by(97) {
        exercise(&base[..cut]);
        inputs += 1;
    }
    // Forged chunk lengths: huge, near the end of the input, near the chunk's own length.
    for (pos, len, _) in chunk_offsets(base) {
        let rest = (base.len() - pos - 16) as u64;
        let values = [
            u64::MAX,
            u64::MAX - 15,
            u64::MAX - 16,
            1 << 63,
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            rest.wrapping_sub(16),
            rest - 1,
            rest,
            rest + 1,
            rest + 16,
            0,
            1,
            15,
            16,
            17,
            len.wrapping_sub(16),
            len.wrapping_sub(1),
            len + 1,
            len + 16,
        ];
        for value in values {
            let mut bytes = base.to_vec();
            bytes[pos + 8..pos + 16].copy_from_slice(&value.to_le_bytes());
            exercise(&bytes);
            inputs += 1;
        }
    }
    // Forged fields: every aligned word of the first 4 KiB set to extremes.
    for at in (0..base.len().min(4096)).step_by(4) {
        for value in [u32::MAX, 0, 1 << 31, 1] {
            let mut bytes = base.to_vec();
            bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
            exercise(&bytes);
            inputs += 1;
        }
        if at % 8 == 0 && at + 8 <= base.len() {
            let mut bytes = base.to_vec();
            bytes[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
            exercise(&bytes);
            inputs += 1;
        }
    }
    inputs
}

#[test]
fn mutated_hand_made_files_never_panic() {
    let base = base();
    assert_eq!(exercise(&base), 2);
    for capture in Capture::from_bytes(&base).unwrap() {
        assert!(capture.warnings().is_empty(), "{:?}", capture.warnings());
        let trace = capture.decode();
        assert_eq!(trace.threads.len(), 2);
        assert_eq!(trace.flows.len(), 1);
        assert_eq!(trace.async_spans.len(), 1);
        assert!(trace.memory.is_some());
    }
    let inputs = mutate(&base, 0x9E37_79B9_7F4A_7C15, 4000);
    assert!(inputs > 4000);
}

/// Event chunks of 8-byte words (version 5) with bytes changed read or fail, never panic.
#[test]
fn mutated_word_files_never_panic() {
    let words = fuzz_seeds().pop().unwrap();
    assert_eq!(words.0, "words.tscope");
    assert_eq!(exercise(&words.1), 2);
    mutate(&words.1, 0x7E37_79B9_7F4A_7C15, 2000);
}

#[test]
#[cfg(feature = "compress")]
fn mutated_packed_files_never_panic() {
    let packed = fuzz_seeds().remove(4);
    assert_eq!(packed.0, "packed.tscope");
    assert_eq!(exercise(&packed.1), 2);
    mutate(&packed.1, 0x8E37_79B9_7F4A_7C15, 2000);
}

#[test]
fn mutated_live_files_never_panic() {
    let prof = rich_session();
    let mut base = Vec::new();
    prof.capture().write_to(&mut base).unwrap();
    assert_eq!(exercise(&base), 1);
    mutate(&base, 0x2545_F491_4F6C_DD1D, 1000);
}

/// The seeds of the `read_capture` fuzz target (`fuzz/`), by file name: the hand-made files
/// the tests above mutate, gzipped, cut short, and written again packed.
fn fuzz_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use std::io::Write;

    let base = base();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&base).unwrap();
    let gz = gz.finish().unwrap();
    // Callsite ids with a gap, no footer, the last event chunk cut short.
    let mut gaps = Parts::new();
    gaps.callsites = callsites(&[[2, 0, 2, 10, 3], [3, 1, 2, 11, 3]]);
    let mut salvaged = gaps.bytes();
    salvaged.truncate(gaps.events_at() + 16 + 16 + 3 * 16 + 5);
    // The two sessions written again: packed event chunks (type 9); then the first once
    // more, the file cut short in its packed chunk (its footer and 16 bytes before lost).
    let mut packed = Vec::new();
    for capture in Capture::from_bytes(&base).unwrap() {
        capture.write_to(&mut packed).unwrap();
    }
    let first = Capture::from_bytes(&base).unwrap().remove(0);
    let mut packed_cut = packed.clone();
    first.write_to(&mut packed_cut).unwrap();
    packed_cut.truncate(packed_cut.len() - 80);
    // The two sessions as recorded, unpacked: event chunks of 8-byte words (version 5).
    let mut words = Vec::new();
    for capture in Capture::from_bytes(&base).unwrap() {
        tickscope::__private::unpacked(|| capture.write_to(&mut words)).unwrap();
    }
    let mut seeds = vec![
        ("hand_made.tscope", Parts::new().bytes()),
        ("two_sessions.tscope", base),
        ("two_sessions.tscope.gz", gz),
        ("salvaged.tscope", salvaged),
    ];
    // Written unpacked by a build without the feature: not seeds.
    if cfg!(feature = "compress") {
        seeds.extend([("packed.tscope", packed), ("packed_cut.tscope", packed_cut)]);
    }
    seeds.push(("words.tscope", words));
    seeds
}

/// Writes the fuzz seeds into `fuzz/corpus/read_capture`:
/// `cargo test --test it -- --ignored capture_file::write_fuzz_seeds`.
#[test]
#[ignore = "writes the fuzz seeds into the source tree"]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/read_capture");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in fuzz_seeds() {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// The fuzz seeds in the source tree are the ones [`fuzz_seeds`] makes (gzipped ones once
/// decompressed: compressors differ), and read.
#[test]
fn fuzz_seeds_are_current_and_read() {
    use std::io::Read;

    let gunzip = |bytes: &[u8]| {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
        out
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/read_capture");
    for (name, bytes) in fuzz_seeds() {
        assert!(exercise(&bytes) > 0, "{name}");
        if let Ok(mut committed) = std::fs::read(dir.join(name)) {
            let mut bytes = bytes;
            if name.ends_with(".gz") {
                (committed, bytes) = (gunzip(&committed), gunzip(&bytes));
            }
            assert!(
                committed == bytes,
                "fuzz/corpus/read_capture/{name} is out of date: run `cargo test --test \
                 it -- --ignored capture_file::write_fuzz_seeds`"
            );
        }
    }
}

/// Files of older versions still read, as they did: the seed `two_sessions.tscope`, whose
/// event chunks are of version 1 (16-byte records, committed since that version), decodes
/// as the same sessions written as recorded now (event chunks of version 5, 8-byte words:
/// `words.tscope`) and packed (`packed.tscope`, whose records keep version 4's kinds).
#[test]
#[cfg(feature = "compress")]
fn files_of_older_versions_still_read() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/read_capture");
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let versions = |bytes: &[u8], kind: u16| -> Vec<u16> {
        let mut found = Vec::new();
        let mut at = 0;
        while let Some(head) = bytes.get(at..at + 16) {
            let len = u64::from_le_bytes(head[8..16].try_into().unwrap()) as usize;
            if u16::from_le_bytes([head[4], head[5]]) == kind {
                found.push(u16::from_le_bytes([head[6], head[7]]));
            }
            at += 16 + len.next_multiple_of(16);
        }
        found
    };
    let (old, words, packed) = (
        read("two_sessions.tscope"),
        read("words.tscope"),
        read("packed.tscope"),
    );
    assert_eq!(versions(&old, EVENT_CHUNK), [1, 1, 1, 1]);
    assert_eq!(versions(&words, EVENT_CHUNK), [5, 5, 5, 5]);
    assert!(versions(&packed, EVENT_CHUNK).is_empty());
    let decode = |bytes: &[u8]| -> Vec<_> {
        Capture::from_bytes(bytes)
            .unwrap()
            .iter()
            .map(|c| {
                assert!(c.warnings().is_empty(), "{:?}", c.warnings());
                c.decode()
            })
            .collect()
    };
    let old = decode(&old);
    assert_eq!(old.len(), 2);
    assert_eq!(old, decode(&words));
    assert_eq!(old, decode(&packed));
}

/// Records no recorder writes but a forged file can hold: ticks out of order and at the ends
/// of the range, allocation sizes that overflow any sum.
#[test]
fn extreme_records_decode_without_overflow() {
    const MAX: u64 = u64::MAX;
    let key = RawEvent::end_key;
    let alloc = |kind, tick| RawEvent::memory(kind, MAX, 0x10, tick);
    let mut records = vec![RawEvent::begin(1, 0), RawEvent::begin(2, 0)];
    for _ in 0..3 {
        records.extend(alloc(RawKind::Alloc, 1));
    }
    for _ in 0..3 {
        records.extend(alloc(RawKind::Free, 2));
    }
    records.extend([
        RawEvent::end(key(2, 0), MAX),
        RawEvent::begin(2, 0),
        RawEvent::end(key(2, 0), MAX),
        RawEvent::begin(2, 0),
        RawEvent::end(key(2, 0), MAX),
        RawEvent::end(key(1, 0), MAX),
        RawEvent::new(RawKind::AsyncBegin, 2, MAX),
        RawEvent::payload(9, 0),
    ]);
    for _ in 0..3 {
        records.extend([
            RawEvent::new(RawKind::PollBegin, 2, 0),
            RawEvent::payload(9, 0),
            RawEvent::end(key(2, 0), MAX),
        ]);
    }
    records.extend([
        RawEvent::new(RawKind::AsyncEnd, 2, 0),
        RawEvent::payload(9, 0),
    ]);
    let mut parts = Parts::new();
    parts.events = events(1, &records);
    parts.footer = footer(0, MAX, records.len() as u64, FOOTER_MEMORY);
    let capture = one(&parts.bytes());
    assert!(capture.warnings().is_empty(), "{:?}", capture.warnings());
    let trace = capture.decode();
    assert_eq!(trace.threads[0].spans.len(), 7);
    let report = Report::new(&trace);
    assert_eq!(report.get("inner").unwrap().calls, 3 + 1);
    chrome_json(&trace);
    // Folded stacks and every table: their sums saturate as the report's do (the call
    // tree's overflowed, found by fuzzing; the folded stacks' likewise).
    other_exports(&trace);
    let tables = tables(trace);
    assert!(tables[2].contains("outer"), "{}", tables[2]);
}

/// A link captured in the last nanoseconds of the clock's range: Kineto JSON moves its
/// arrow's start to a whole microsecond, which rounded past `u64::MAX` (an overflow, found by
/// fuzzing); it now stays at the last one.
#[test]
fn a_link_at_the_end_of_time_exports_without_overflow() {
    const MAX: u64 = u64::MAX;
    let key = RawEvent::end_key;
    let origin = [
        RawEvent::begin(1, MAX - 10),
        RawEvent::new(RawKind::Link, 0, MAX - 1),
        RawEvent::end(key(1, MAX - 10), MAX),
    ];
    let follower = [
        RawEvent::begin_follows(2, MAX - 5, 1, 0)[0],
        RawEvent::begin_follows(2, MAX - 5, 1, 0)[1],
        RawEvent::end(key(2, MAX - 5), MAX),
    ];
    let mut parts = Parts::new();
    parts.threads = threads(&[(1, 0, 4), (2, 0, NO_STRING)]);
    parts.events = [events(1, &origin), events(2, &follower)].concat();
    // The window starts at 1 ms: Kineto's times count from there.
    parts.footer = footer(1_000_000, MAX, 6, 0);
    let capture = one(&parts.bytes());
    assert!(capture.warnings().is_empty(), "{:?}", capture.warnings());
    let trace = capture.decode();
    assert_eq!(trace.flows.len(), 1);
    assert_eq!(trace.flows[0].origin_ns, Some(MAX - 1));
    let kineto = &other_exports(&trace)[0];
    let kineto = String::from_utf8_lossy(kineto);
    assert!(kineto.contains("\"ph\":\"s\""), "{kineto}");
    assert!(
        String::from_utf8(chrome_json(&trace))
            .unwrap()
            .contains("\"ph\":\"f\"")
    );
}

/// Every table of `trace` the `tickscope table` command prints: flat, by thread, call tree,
/// call tree by thread.
fn tables(trace: Trace) -> Vec<String> {
    let trace = Arc::new(trace);
    let table = || Table::new(Arc::clone(&trace));
    vec![
        table().to_string(),
        table().by_thread(true).to_string(),
        table().tree(true).to_string(),
        table().tree(true).by_thread(true).to_string(),
    ]
}

/// A capture read from a file with a gap in its callsite ids is written back with the gap
/// declared (dense ids), so the ids after it survive: reading, writing and reading again (as
/// `tickscope merge` does) keeps every span.
#[test]
fn callsite_ids_with_gaps_survive_a_rewrite() {
    let mut parts = Parts::new();
    // Id 1 is declared by nobody; id 2 twice (the first counts).
    parts.callsites = callsites(&[[2, 0, 2, 10, 3], [2, 1, 2, 11, 3]]);
    parts.events = events(
        1,
        &[
            RawEvent::begin(2, 100),
            RawEvent::end(RawEvent::end_key(2, 100), 150),
        ],
    );
    parts.footer = footer(0, 200, 2, 0);
    let first = one(&parts.bytes());
    assert_eq!(spans(&first), [("outer", 100, 150, false)]);
    let mut rewritten = Vec::new();
    first.write_to(&mut rewritten).unwrap();
    let second = one(&rewritten);
    assert_eq!(spans(&second), [("outer", 100, 150, false)]);
    let mut again = Vec::new();
    second.write_to(&mut again).unwrap();
    assert_eq!(again, rewritten);
    assert_eq!(spans(&one(&again)), [("outer", 100, 150, false)]);
}

/// Many callsites naming one long string share it: the string is interned once, and each
/// callsite costs a fixed size, not a copy of its strings.
#[test]
fn callsites_share_the_strings_they_name() {
    let long = "n".repeat(64 * 1024);
    let mut parts = Parts::new();
    parts.strings = strings(&[&long, "inner", "t.rs", "m", "main"]);
    let entries: Vec<[u32; 5]> = (1..=200).map(|id| [id, 0, 2, id, 3]).collect();
    parts.callsites = callsites(&entries);
    parts.events = events(
        1,
        &[
            RawEvent::begin(1, 100),
            RawEvent::end(RawEvent::end_key(1, 100), 110),
            RawEvent::begin(200, 120),
            RawEvent::end(RawEvent::end_key(200, 120), 130),
        ],
    );
    let capture = one(&parts.bytes());
    let trace = capture.decode();
    let spans = &trace.threads[0].spans;
    assert_eq!(spans.len(), 2);
    let (a, b) = (spans[0].callsite, spans[1].callsite);
    assert_eq!((a.line(), b.line()), (1, 200));
    assert!(
        std::ptr::eq(a.name(), b.name()),
        "the name is one interned string"
    );
    assert_eq!(a.name().len(), 64 * 1024);
}

// ---------------------------------------------------------------------------------------------
// Sessions of several processes, concatenated, decoded into one trace.

/// Unix nanoseconds at the start of the first session.
const T0: u64 = 1_763_780_000_000_000_000;
/// How much later the second session starts.
const D: u64 = 2_500_123;

/// A session of process `pid` (`name` on `host`) whose ticks are Unix nanoseconds (the
/// identity clock), its window from `start` for 1 ms: thread 1 ("main") runs "outer"
/// (`start` + 100 to + 150) around "inner" (+ 110 to + 120), which allocates 64 bytes at + 112
/// and frees them at + 118; with `worker`, thread 2 ("worker") runs "outer" (+ 200 to + 300).
fn session_of(pid: u32, name: &str, host: &str, start: u64, worker: bool) -> Vec<u8> {
    let mut head = Vec::new();
    head.extend_from_slice(&1u16.to_le_bytes());
    head.extend_from_slice(&0u16.to_le_bytes());
    head.extend_from_slice(&pid.to_le_bytes());
    head.extend_from_slice(&start.to_le_bytes());
    head.extend_from_slice(format!("crafted\0{name}\0{host}\0").as_bytes());
    let main: Vec<RawEvent> = [
        vec![
            RawEvent::begin(1, start + 100),
            RawEvent::begin(2, start + 110),
        ],
        RawEvent::memory(RawKind::Alloc, 64, 0x1000, start + 112).to_vec(),
        RawEvent::memory(RawKind::Free, 64, 0x1000, start + 118).to_vec(),
        vec![
            RawEvent::end(RawEvent::end_key(2, start + 110), start + 120),
            RawEvent::end(RawEvent::end_key(1, start + 100), start + 150),
        ],
    ]
    .concat();
    let mut table = vec![(1, 0, 4)];
    let mut chunks = events(1, &main);
    let mut records = main.len() as u64;
    if worker {
        let work = [
            RawEvent::begin(1, start + 200),
            RawEvent::end(RawEvent::end_key(1, start + 200), start + 300),
        ];
        table.push((2, 0, 5));
        chunks.extend(events(2, &work));
        records += 2;
    }
    [
        chunk(SESSION_HEADER, 1, &head),
        clock(),
        strings(&["outer", "inner", "t.rs", "m", "main", "worker"]),
        callsites(&[[1, 0, 2, 10, 3], [2, 1, 2, 11, 3]]),
        threads(&table),
        chunks,
        footer(start, start + 1_000_000, records, FOOTER_MEMORY),
    ]
    .concat()
}

fn json_of(trace: &Trace, options: &chrome::Options) -> serde_json::Value {
    let mut out = Vec::new();
    chrome::write_with(trace, &mut out, options).unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// The events of phase `ph`.
fn phase<'a>(doc: &'a serde_json::Value, ph: &str) -> Vec<&'a serde_json::Value> {
    let events = doc["traceEvents"].as_array().unwrap();
    events.iter().filter(|e| e["ph"] == ph).collect()
}

/// `(pid, name)` of each `process_name` metadata event.
fn process_names(doc: &serde_json::Value) -> Vec<(u64, String)> {
    phase(doc, "M")
        .into_iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].to_string()))
        .collect()
}

/// `(pid, tid, name)` of each `thread_name` metadata event.
fn thread_names(doc: &serde_json::Value) -> Vec<(u64, u64, String)> {
    phase(doc, "M")
        .into_iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| {
            let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            (pid, tid, e["args"]["name"].to_string())
        })
        .collect()
}

/// `(pid, tid, name, ts)` of each complete event.
fn slices(doc: &serde_json::Value) -> Vec<(u64, u64, String, f64)> {
    phase(doc, "X")
        .into_iter()
        .map(|e| {
            let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            (pid, tid, e["name"].to_string(), e["ts"].as_f64().unwrap())
        })
        .collect()
}

/// Microseconds from `T0` (as the Chrome trace writes them) of `T0 + ns`.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

#[test]
fn concatenated_sessions_of_two_processes_decode_into_one_trace() {
    let both = [
        session_of(100, "server", "node-a", T0, true),
        session_of(200, "client", "node-a", T0 + D, false),
    ]
    .concat();
    let path = scratch("two_processes.tscope");
    std::fs::write(&path, &both).unwrap();
    let captures = Capture::read_all(&path).unwrap();
    assert_eq!(captures.len(), 2);
    assert!(captures.iter().all(|c| c.warnings().is_empty()));
    let trace = Trace::from_captures(&captures);

    let processes: Vec<(u32, &str, &str)> = trace
        .processes
        .iter()
        .map(|p| (p.id, p.name.as_str(), p.host.as_str()))
        .collect();
    assert_eq!(
        processes,
        [(100, "server", "node-a"), (200, "client", "node-a")]
    );
    let threads: Vec<(u32, u64, Option<&str>, usize)> = trace
        .threads
        .iter()
        .map(|t| (t.process, t.id, t.name.as_deref(), t.spans.len()))
        .collect();
    assert_eq!(
        threads,
        [
            (0, 1, Some("main"), 2),
            (0, 2, Some("worker"), 1),
            (1, 1, Some("main"), 2)
        ]
    );
    assert_eq!(trace.thread_count(), 3);
    // One time line: each session's Unix times, the window from the first start to the last end.
    assert_eq!((trace.start_ns, trace.end_ns), (T0, T0 + D + 1_000_000));
    let (a, b) = (&trace.threads[0].spans[0], &trace.threads[2].spans[0]);
    assert_eq!((a.name(), b.name()), ("outer", "outer"));
    assert_eq!((a.start_ns, b.start_ns), (T0 + 100, T0 + D + 100));
    assert_eq!(b.start_ns - a.start_ns, D);
    assert_eq!(trace.event_count, 8 + 2 + 8);
    assert_eq!(
        trace.memory.as_ref().unwrap().live_bytes(),
        [64, 0, 64, 0],
        "each process counts its own live bytes"
    );

    // Chrome JSON: a process each, under its own pid, threads under their process, times on
    // the one origin (the first session's start).
    let doc = json_of(&trace, &chrome::Options::new());
    assert_eq!(
        process_names(&doc),
        [(100, "\"server\"".into()), (200, "\"client\"".into())]
    );
    assert_eq!(
        thread_names(&doc),
        [
            (100, 1, "\"main\"".into()),
            (100, 2, "\"worker\"".into()),
            (200, 1, "\"main\"".into())
        ]
    );
    assert_eq!(
        slices(&doc),
        [
            (100, 1, "\"outer\"".into(), us(100)),
            (100, 1, "\"inner\"".into(), us(110)),
            (100, 2, "\"outer\"".into(), us(200)),
            (200, 1, "\"outer\"".into(), us(D + 100)),
            (200, 1, "\"inner\"".into(), us(D + 110)),
        ]
    );
    assert_eq!(doc["otherData"]["start_unix_ns"], T0);
    assert_eq!(doc["otherData"]["end_unix_ns"], T0 + D + 1_000_000);
    // A memory counter per process.
    let counters: Vec<(u64, f64, u64)> = phase(&doc, "C")
        .into_iter()
        .map(|e| {
            let bytes = e["args"]["live_bytes"].as_u64().unwrap();
            (e["pid"].as_u64().unwrap(), e["ts"].as_f64().unwrap(), bytes)
        })
        .collect();
    assert_eq!(
        counters,
        [
            (100, 0.0, 0),
            (200, 0.0, 0),
            (100, us(112), 64),
            (100, us(118), 0),
            (200, us(D + 112), 64),
            (200, us(D + 118), 0),
        ]
    );
    // Absolute times put each slice at its Unix time.
    let unix = json_of(
        &trace,
        &chrome::Options::new().time_origin(chrome::TimeOrigin::UnixEpoch),
    );
    let begins: Vec<(u64, f64)> = phase(&unix, "B")
        .into_iter()
        .filter(|e| e["name"] == "outer")
        .map(|e| (e["pid"].as_u64().unwrap(), e["ts"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        begins,
        [
            (100, (T0 + 100) as f64 / 1000.0),
            (100, (T0 + 200) as f64 / 1000.0),
            (200, (T0 + D + 100) as f64 / 1000.0)
        ]
    );
    // The Kineto dialect: the same processes, on the first session's base time.
    let mut out = Vec::new();
    tickscope::export::kineto::write(&trace, &mut out, &Default::default()).unwrap();
    let kineto: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(kineto["baseTimeNanoseconds"], T0);
    assert_eq!(process_names(&kineto), process_names(&doc));
    let pids: Vec<u64> = slices(&kineto).iter().map(|s| s.0).collect();
    assert_eq!(pids, [100, 100, 100, 200, 200]);
    assert_eq!(kineto_ts(&kineto, 200, "outer"), us(D + 100));

    // The report sums each name over the processes; by thread, a row per thread of each.
    let report = Report::new(&trace);
    let calls: Vec<(&str, u64, u64)> = report
        .rows()
        .iter()
        .map(|r| (r.name, r.calls, r.total_ns))
        .collect();
    assert_eq!(calls, [("outer", 3, 50 + 100 + 50), ("inner", 2, 20)]);
    assert_eq!(report.threads, 3);
    let by_thread: Vec<(Option<u32>, Option<u64>, &str, u64)> = Report::by_thread(&trace)
        .rows()
        .iter()
        .map(|r| (r.process, r.thread, r.name, r.calls))
        .collect();
    assert_eq!(
        by_thread,
        [
            (Some(0), Some(1), "outer", 1),
            (Some(0), Some(1), "inner", 1),
            (Some(0), Some(2), "outer", 1),
            (Some(1), Some(1), "outer", 1),
            (Some(1), Some(1), "inner", 1),
        ]
    );
    let table = tickscope::table::Table::new(std::sync::Arc::new(trace.clone()));
    let text = table.clone().by_thread(true).to_string();
    let threads: Vec<&str> = text.lines().skip(2).map(|l| &l[..17]).collect();
    assert_eq!(
        &threads[..5],
        [
            "server 100/main  ",
            "server 100/main  ",
            "server 100/worker",
            "client 200/main  ",
            "client 200/main  "
        ],
        "{text}"
    );
    assert!(
        text.contains("3.50 ms wall, 2 processes, 3 threads, 5 scopes, 0 dropped events"),
        "{text}"
    );
    let text = table.to_string();
    let first: Vec<&str> = text.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(first[..2], ["outer", "3"], "{text}");

    // Folded stacks: merged by name, or a tower per process and thread.
    let folded = |by_thread| {
        let mut out = Vec::new();
        tickscope::export::folded::write(
            &trace,
            &mut out,
            tickscope::export::folded::Options::new().by_thread(by_thread),
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(folded(false), "outer 180\nouter;inner 20\n");
    assert_eq!(
        folded(true),
        "client 200;main;outer 40\nclient 200;main;outer;inner 10\n\
         server 100;main;outer 40\nserver 100;main;outer;inner 10\nserver 100;worker;outer 100\n"
    );
}

/// The `ts` of the complete event `name` on `pid`.
fn kineto_ts(doc: &serde_json::Value, pid: u64, name: &str) -> f64 {
    phase(doc, "X")
        .into_iter()
        .find(|e| e["pid"] == pid && e["name"] == name)
        .unwrap()["ts"]
        .as_f64()
        .unwrap()
}

#[test]
fn processes_that_share_a_pid_stay_apart() {
    // The same program as pid 7 on two hosts (containers), at the same time.
    let both = [
        session_of(7, "proc", "node-a", T0, false),
        session_of(7, "proc", "node-b", T0, false),
    ]
    .concat();
    let trace = Trace::from_captures(&Capture::from_bytes(&both).unwrap());
    assert_eq!(trace.processes.len(), 2);
    assert_eq!(trace.process_label(0), "node-a/proc 7");
    assert_eq!(trace.process_label(1), "node-b/proc 7");
    let doc = json_of(&trace, &chrome::Options::new());
    // The second is written with a pid past every process id of the trace, and says its own.
    assert_eq!(
        process_names(&doc),
        [
            (7, "\"node-a/proc\"".into()),
            (8, "\"node-b/proc (pid 7)\"".into())
        ]
    );
    let tracks: Vec<(u64, u64)> = slices(&doc).iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(tracks, [(7, 1), (7, 1), (8, 1), (8, 1)]);
    let text = tickscope::table::Table::new(std::sync::Arc::new(trace))
        .by_thread(true)
        .to_string();
    assert!(text.contains("\nnode-a/proc 7/main  outer "), "{text}");
    assert!(text.contains("\nnode-b/proc 7/main  outer "), "{text}");
}

#[test]
fn two_sessions_of_one_process_are_one_process() {
    // A program that stopped, wrote its capture, restarted and wrote another.
    let both = [
        session_of(7, "proc", "host", T0, false),
        session_of(7, "proc", "host", T0 + D, false),
    ]
    .concat();
    let captures = Capture::from_bytes(&both).unwrap();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.processes, captures[0].decode().processes);
    let threads: Vec<(u32, u64)> = trace.threads.iter().map(|t| (t.process, t.id)).collect();
    assert_eq!(threads, [(0, 1), (0, 1)]);
    assert_eq!(trace.thread_count(), 1);
    let doc = json_of(&trace, &chrome::Options::new());
    // One process, one track for its thread, each session's scopes at their time.
    assert_eq!(process_names(&doc), [(7, "\"proc\"".into())]);
    assert_eq!(thread_names(&doc), [(7, 1, "\"main\"".into())]);
    let ts: Vec<(u64, u64, f64)> = slices(&doc).iter().map(|s| (s.0, s.1, s.3)).collect();
    assert_eq!(
        ts,
        [
            (7, 1, us(100)),
            (7, 1, us(110)),
            (7, 1, us(D + 100)),
            (7, 1, us(D + 110))
        ]
    );
    let table = tickscope::table::Table::new(std::sync::Arc::new(trace));
    let text = table.by_thread(true).to_string();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(2)
        .take(2)
        .map(|l| l.split_whitespace().take(3).collect())
        .collect();
    assert_eq!(
        rows,
        [["main", "outer", "2"], ["main", "inner", "2"]],
        "{text}"
    );
    assert!(
        text.contains("3.50 ms wall, 1 thread, 4 scopes, 0 dropped events"),
        "{text}"
    );
}
