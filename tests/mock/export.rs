//! Chrome JSON and folded-stack exports: exact round trips with a mock clock, and error paths.
#![cfg(feature = "enabled")]

use std::io::{self, Write};

use crate::common::{YieldOnce, poll_once};

use crate::common::serial;
use serde_json::Value;
use tickscope::export::chrome::{Options, TimeOrigin};
use tickscope::export::{chrome, folded, kineto};
use tickscope::{Profiler, profile, scope};

/// Runs `body` on a thread named `thread` under a session of that thread, and stops the
/// session while what `body` returned (an open scope, say) is still alive. The mock clock
/// reads 1 s after the epoch at the first session.
fn record_on<G>(
    thread: &str,
    body: impl FnOnce(&tickscope::clock::Mock) -> G + Send + 'static,
) -> Profiler {
    let m = tickscope::clock::use_mock_clock().unwrap();
    let _serial = serial();
    std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            if m.value() == 0 {
                m.increment(1_000_000_000u64);
            }
            let prof = Profiler::builder().current_thread().start();
            let _alive = body(&m);
            prof.stop();
            prof
        })
        .unwrap()
        .join()
        .unwrap()
}

/// On thread "exporter": outer 0..3500 ns { inner 1000..1250 ns }, then "left open" from
/// 4000 ns to the stop at 5000 ns.
fn session() -> Profiler {
    record_on("exporter", |m| {
        {
            let _outer = scope!("outer");
            m.increment(1_000u64);
            {
                let _inner = scope!("in\"ner;x");
                m.increment(250u64);
            }
            m.increment(2_250u64);
        }
        m.increment(500u64);
        let open = scope!("left open");
        m.increment(1_000u64);
        open
    })
}

#[test]
fn chrome_json_round_trip() {
    let prof = session();
    let trace = prof.trace();
    let mut out = Vec::new();
    chrome::write(&trace, &mut out).unwrap();
    let doc: Value = serde_json::from_slice(&out).expect("valid JSON");
    let events = doc["traceEvents"].as_array().unwrap();
    let pid = u64::from(std::process::id());
    let tid = trace.threads[0].id;

    let meta: Vec<(&str, &Value)> = events
        .iter()
        .filter(|e| e["ph"] == "M")
        .map(|e| (e["name"].as_str().unwrap(), &e["args"]))
        .collect();
    assert_eq!(meta.len(), 3);
    assert_eq!(meta[0].0, "process_name");
    assert_eq!(
        meta[1],
        ("thread_name", &serde_json::json!({"name": "exporter"}))
    );
    assert_eq!(
        meta[2],
        ("thread_sort_index", &serde_json::json!({"sort_index": 0}))
    );

    let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let start = trace.start_ns;
    let expect = [
        ("outer", 0.0, 3.5, false),
        ("in\"ner;x", 1.0, 0.25, false),
        ("left open", 4.0, 1.0, true),
    ];
    assert_eq!(slices.len(), expect.len());
    for (e, (name, ts, dur, open)) in slices.iter().zip(expect) {
        assert_eq!(e["name"], name);
        assert_eq!(e["cat"], "scope");
        assert_eq!(e["pid"].as_u64(), Some(pid));
        assert_eq!(e["tid"].as_u64(), Some(tid));
        assert_eq!(e["ts"].as_f64(), Some(ts), "{name}");
        assert_eq!(e["dur"].as_f64(), Some(dur), "{name}");
        assert_eq!(
            e["args"]["open_at_stop"].as_bool().unwrap_or(false),
            open,
            "{name}"
        );
    }
    assert_eq!(doc["otherData"]["start_unix_ns"].as_u64(), Some(start));
    assert_eq!(
        doc["otherData"]["end_unix_ns"].as_u64(),
        Some(start + 5_000)
    );
    assert_eq!(doc["otherData"]["dropped_events"].as_u64(), Some(0));
    assert_eq!(
        doc["otherData"]["time_origin_unix_ns"].as_u64(),
        Some(start)
    );
}

#[profile]
async fn load(m: std::sync::Arc<tickscope::clock::Mock>) {
    m.increment(50u64);
    YieldOnce::default().await;
    m.increment(25u64);
}

/// On thread "poller", 100 ns after the start: `load` polled at 100..150 ns and 350..375 ns;
/// the session stops at 400 ns.
fn async_session() -> Profiler {
    record_on("poller", |m| {
        m.increment(100u64);
        let mut fut = Box::pin(load(std::sync::Arc::new(m.clone())));
        assert!(poll_once(fut.as_mut()).is_pending());
        m.increment(200u64);
        assert!(poll_once(fut.as_mut()).is_ready());
        m.increment(25u64);
    })
}

#[test]
fn async_calls_are_async_spans_and_polls_are_slices() {
    let prof = async_session();
    let trace = prof.trace();
    let mut out = Vec::new();
    chrome::write(&trace, &mut out).unwrap();
    let doc: Value = serde_json::from_slice(&out).expect("valid JSON");
    let events = doc["traceEvents"].as_array().unwrap();
    let tid = trace.threads[0].id;
    let slices: Vec<(&str, &str, f64, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["cat"].as_str().unwrap(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        slices,
        [("load", "poll", 0.1, 0.05), ("load", "poll", 0.35, 0.025)]
    );
    let spans: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "b" || e["ph"] == "e")
        .collect();
    assert_eq!(spans.len(), 2);
    let (b, e) = (spans[0], spans[1]);
    assert_eq!((b["ph"].as_str(), e["ph"].as_str()), (Some("b"), Some("e")));
    for event in [b, e] {
        assert_eq!(event["name"], "load");
        assert_eq!(event["cat"], "async");
        assert_eq!(event["id"], "0x1");
        assert_eq!(event["tid"].as_u64(), Some(tid));
    }
    assert_eq!(b["ts"].as_f64(), Some(0.1));
    assert_eq!(e["ts"].as_f64(), Some(0.375));
    assert_eq!(
        b["args"],
        serde_json::json!({"polls": 2, "busy_ns": 75, "self_ns": 75, "end_thread": tid})
    );
}

#[test]
fn absolute_unix_time_option() {
    let prof = session();
    let trace = prof.trace();
    let mut out = Vec::new();
    let options = Options::new().time_origin(TimeOrigin::UnixEpoch);
    chrome::write_with(&trace, &mut out, &options).unwrap();
    let text = String::from_utf8(out).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let start = trace.start_ns;
    // The text keeps every nanosecond; a double keeps what it can.
    let outer_ts = format!("\"ts\":{}.{:03}", start / 1000, start % 1000);
    assert!(text.contains(&outer_ts), "{outer_ts} in {text}");
    assert_eq!(doc["otherData"]["time_origin_unix_ns"].as_u64(), Some(0));
    // Scopes are B/E pairs in nesting order, each E with its B's name, at exact ns text.
    let edges: Vec<(String, String, u64)> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "B" || e["ph"] == "E")
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            (
                e["ph"].as_str().unwrap().to_owned(),
                e["name"].as_str().unwrap().to_owned(),
                ((ts * 1000.0).round() as u64).abs_diff(start),
            )
        })
        .collect();
    let phases: Vec<(&str, &str)> = edges
        .iter()
        .map(|(ph, name, _)| (ph.as_str(), name.as_str()))
        .collect();
    assert_eq!(
        phases,
        [
            ("B", "outer"),
            ("B", "in\"ner;x"),
            ("E", "in\"ner;x"),
            ("E", "outer"),
            ("B", "left open"),
            ("E", "left open")
        ]
    );
    // Read back as doubles, times are within the 0.25 µs a double resolves at 1 s + epoch.
    for ((_, name, off), want) in edges.iter().zip([0, 1000, 1250, 3500, 4000, 5000]) {
        assert!(off.abs_diff(want) <= 1, "{name}: {off} vs {want}");
    }
    assert_eq!(
        doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .count(),
        0
    );
}

#[test]
fn kineto_dialect() {
    let prof = session();
    let trace = prof.trace();
    let mut out = Vec::new();
    kineto::write(&trace, &mut out, &kineto::Options::new(3, 8)).unwrap();
    // HolisticTraceAnalysis finds a file's rank with the regex `"rank":\s+(\d+)`.
    assert!(String::from_utf8_lossy(&out).contains("\"rank\": 3,"));
    let doc: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["schemaVersion"], 1);
    // Kineto's time base: `ts` counts from `baseTimeNanoseconds`, the session start.
    assert_eq!(doc["baseTimeNanoseconds"].as_u64(), Some(trace.start_ns));
    assert_eq!(
        doc["distributedInfo"],
        serde_json::json!({"backend": "none", "rank": 3, "world_size": 8})
    );
    let events = doc["traceEvents"].as_array().unwrap();
    assert!(events.iter().all(|e| e["ph"] == "X" || e["ph"] == "M"));
    let ops: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(ops.len(), 3);
    for (i, (op, (name, ts))) in ops
        .iter()
        .zip([("outer", 0.0), ("in\"ner;x", 1.0), ("left open", 4.0)])
        .enumerate()
    {
        assert_eq!(op["cat"], "cpu_op");
        assert_eq!(op["name"], name);
        assert_eq!(op["ts"].as_f64(), Some(ts));
        assert_eq!(op["args"]["External id"].as_u64(), Some(i as u64 + 1));
        assert_eq!(op["args"]["Ev Idx"].as_u64(), Some(i as u64));
        assert!(op["args"]["Record function id"].as_u64().unwrap() > 0);
    }
    assert_eq!(ops[2]["args"]["open_at_stop"], true);
    // Kineto has no async spans: only the poll slices of async calls.
    let prof = async_session();
    let mut out = Vec::new();
    kineto::write(&prof.trace(), &mut out, &kineto::Options::new(0, 1)).unwrap();
    let doc: Value = serde_json::from_slice(&out).unwrap();
    let phases: Vec<&str> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ph"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["M", "M", "M", "X", "X"]);
}

#[test]
fn gz_paths_are_gzipped() {
    use std::io::Read;
    let prof = async_session();
    let dir = std::env::temp_dir().join(format!("tickscope-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("trace.json");
    let gz = dir.join("trace.json.gz");
    prof.write_chrome_trace(&plain).unwrap();
    prof.write_chrome_trace(&gz).unwrap();
    let compressed = std::fs::read(&gz).unwrap();
    assert_eq!(&compressed[..2], &[0x1f, 0x8b], "gzip magic");
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(&compressed[..])
        .read_to_end(&mut unpacked)
        .unwrap();
    assert_eq!(unpacked, std::fs::read(&plain).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn folded_stacks_exact() {
    let prof = session();
    let trace = prof.trace();
    let mut out = Vec::new();
    folded::write(&trace, &mut out, folded::Options::default()).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "left open 1000\nouter 3250\nouter;in\"ner:x 250\n"
    );
    let mut out = Vec::new();
    folded::write(&trace, &mut out, folded::Options { by_thread: true }).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "exporter;left open 1000\nexporter;outer 3250\nexporter;outer;in\"ner:x 250\n"
    );
}

#[test]
fn files_are_written_whole_or_not_at_all() {
    let prof = session();
    let dir = std::env::temp_dir().join(format!("tickscope-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let json = dir.join("trace.json");
    prof.write_chrome_trace(&json).unwrap();
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["traceEvents"].as_array().unwrap().len(), 6);
    let stacks = dir.join("trace.folded");
    prof.write(&stacks, &folded::Options::new()).unwrap();
    assert_eq!(std::fs::read_to_string(&stacks).unwrap().lines().count(), 3);

    // A missing directory: an error that names the path, and no file.
    let missing = dir.join("no/such/dir/trace.json");
    let err = prof.write_chrome_trace(&missing).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert!(err.to_string().contains("no/such/dir/trace.json"), "{err}");
    assert!(!missing.exists());

    // A path that is a directory: an error, the directory untouched, no temporary file left.
    let err = prof.write_chrome_trace(&dir).unwrap_err();
    assert!(err.to_string().contains(&*dir.to_string_lossy()), "{err}");
    assert!(dir.is_dir());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every format goes through `export::write_file` (and `Profiler::write`), also as a
/// `&dyn Format`, and the file holds what the format streams.
#[test]
fn every_format_writes_files_through_one_entry_point() {
    use tickscope::export::{self, Format};
    let prof = session();
    let trace = prof.trace();
    let dir = std::env::temp_dir().join(format!("tickscope-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let chrome = chrome::Options::new().time_origin(TimeOrigin::UnixEpoch);
    let formats: [(&str, &dyn Format); 3] = [
        ("trace.json", &chrome),
        ("trace.kineto.json", &kineto::Options::default()),
        ("trace.folded", &folded::Options::new().by_thread(true)),
    ];
    for (name, format) in formats {
        let mut streamed = Vec::new();
        format.write(&trace, &mut streamed).unwrap();
        let path = dir.join(name);
        export::write_file(&trace, &path, format).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), streamed, "{name}");
        prof.write(&path, format).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), streamed, "{name}");
    }
    let mut kineto = Vec::new();
    kineto::write(&trace, &mut kineto, &kineto::Options::new(0, 1)).unwrap();
    assert_eq!(
        std::fs::read(dir.join("trace.kineto.json")).unwrap(),
        kineto,
        "rank 0 of 1 by default"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A writer that fails after `limit` bytes, like a full disk.
struct Full {
    written: usize,
    limit: usize,
}

impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written + buf.len() > self.limit {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"));
        }
        self.written += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn write_errors_are_returned() {
    let prof = session();
    let trace = prof.trace();
    for limit in [0, 10, 100, 300] {
        let err = chrome::write(&trace, &mut Full { written: 0, limit }).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        let err = folded::write(
            &trace,
            &mut Full {
                written: 0,
                limit: limit / 10,
            },
            Default::default(),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    }
}

#[cfg(feature = "flamegraph")]
#[test]
fn flamegraph_svg() {
    let prof = session();
    let mut out = Vec::new();
    tickscope::export::flamegraph::write(
        &prof.trace(),
        &mut out,
        &tickscope::export::flamegraph::Options::new().title("test"),
    )
    .unwrap();
    let svg = String::from_utf8(out).unwrap();
    assert!(svg.starts_with("<?xml"), "{}", &svg[..100]);
    let titles: Vec<&str> = svg
        .match_indices("<title>")
        .map(|(i, _)| &svg[i + 7..i + svg[i..].find("</title>").unwrap()])
        .collect();
    let mut titles = titles;
    titles.sort_unstable();
    assert_eq!(
        titles,
        [
            "all (4,500 ns, 100%)",
            "in&quot;ner:x (250 ns, 5.56%)",
            "left open (1,000 ns, 22.22%)",
            "outer (3,500 ns, 77.78%)"
        ]
    );
    // The file variant: whole or nothing, like the others.
    let path = std::env::temp_dir().join(format!("tickscope-fg-{}.svg", std::process::id()));
    prof.write(&path, &tickscope::export::flamegraph::Options::new())
        .unwrap();
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("outer (3,500 ns")
    );
    std::fs::remove_file(&path).unwrap();
}

/// Writes `bytes` as `name` into `$TICKSCOPE_INTEROP_DIR`, when it is set: `scripts/interop.sh`
/// runs the traces of these tests through Perfetto and HolisticTraceAnalysis.
fn keep_for_interop(name: &str, bytes: &[u8]) {
    if let Some(dir) = std::env::var_os("TICKSCOPE_INTEROP_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(std::path::Path::new(&dir).join(name), bytes).unwrap();
    }
}

/// The `X` events of a Chrome JSON document, in file order.
fn complete_events(doc: &Value) -> Vec<&Value> {
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect()
}

/// A `ts` or `dur` (µs with three decimals) in ns.
fn ns(v: &Value) -> u64 {
    (v.as_f64().unwrap() * 1000.0).round() as u64
}

/// On thread "sub-us", times in ns from the start, scopes shorter than a microsecond next to,
/// inside and around each other, some of zero length, several boundaries in one microsecond:
///
/// ```text
/// step 0..5000 { x 100..2400, y 2450..4000 { z 2460..2480, leaf 2600..2700,
///                pair 3100..3900 { a1 3200..3300, a2 3300..3300, a3 3600..3800 } },
///                w 4000..4000, tail 4300..4700 }
/// after 5000..5100
/// ```
fn sub_microsecond_session() -> Profiler {
    record_on("sub-us", |m| {
        let step = scope!("step");
        m.increment(100u64);
        {
            let _x = scope!("x");
            m.increment(2_300u64);
        }
        m.increment(50u64);
        {
            let _y = scope!("y");
            m.increment(10u64);
            {
                let _z = scope!("z");
                m.increment(20u64);
            }
            m.increment(120u64);
            {
                let _leaf = scope!("leaf");
                m.increment(100u64);
            }
            m.increment(400u64);
            {
                let _pair = scope!("pair");
                m.increment(100u64);
                {
                    let _a1 = scope!("a1");
                    m.increment(100u64);
                }
                {
                    let _a2 = scope!("a2");
                }
                m.increment(300u64);
                {
                    let _a3 = scope!("a3");
                    m.increment(200u64);
                }
                m.increment(100u64);
            }
            m.increment(100u64);
        }
        {
            let _w = scope!("w");
        }
        m.increment(300u64);
        {
            let _tail = scope!("tail");
            m.increment(400u64);
        }
        m.increment(300u64);
        drop(step);
        {
            let _after = scope!("after");
            m.increment(100u64);
        }
    })
}

/// HolisticTraceAnalysis's order of the ends of one thread's ops (`_less_than` in
/// `hta/common/trace_call_stack.py`, version 0.5.0): `(index, dur, kind, time)` with kind -1
/// for a start and 1 for an end. It raises on a negative duration; so does this.
fn hta_less(x: (usize, i64, i8, i64), y: (usize, i64, i8, i64)) -> bool {
    let ((xi, xd, xk, xt), (yi, yd, yk, yt)) = (x, y);
    const OPEN: i8 = -1;
    const CLOSE: i8 = 1;
    if xt != yt {
        return xt < yt;
    }
    if xi == yi {
        return xk == OPEN;
    }
    if xd == 0 || yd == 0 {
        return match (xd, yd) {
            (0, d) if d > 0 => yk == CLOSE,
            (d, 0) if d > 0 => xk == OPEN,
            (0, 0) if xk == OPEN && yk == OPEN => xi < yi,
            (0, 0) if xk == CLOSE && yk == CLOSE => xi > yi,
            (0, 0) => xk == OPEN,
            _ => panic!("HTA: Unexpected case: {x:?} {y:?}"),
        };
    }
    match (xk, yk) {
        (CLOSE, OPEN) => true,
        (OPEN, CLOSE) => false,
        (OPEN, OPEN) if xd != yd => xd > yd,
        (CLOSE, CLOSE) if xd != yd => xd < yd,
        (OPEN, _) => xi < yi,
        _ => xi > yi,
    }
}

/// HolisticTraceAnalysis's call stack of one thread's ops, given as (start, end) in µs after
/// its rounding: each op's parent, as `CallStackGraph` builds it (sort the ends with
/// [`hta_less`], then push on a start and pop on an end). Fails where HTA's own check that
/// the sort succeeded would.
fn hta_parents(ops: &[(i64, i64)]) -> Vec<Option<usize>> {
    let mut ends: Vec<(usize, i64, i8, i64)> = Vec::new();
    for (i, &(start, end)) in ops.iter().enumerate() {
        ends.push((i, end - start, -1, start));
        ends.push((i, end - start, 1, end));
    }
    ends.sort_by(|&x, &y| {
        if hta_less(x, y) {
            std::cmp::Ordering::Less
        } else if hta_less(y, x) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    for pair in ends.windows(2) {
        assert!(
            hta_less(pair[0], pair[1]),
            "HTA: the events array is not sorted: {pair:?}"
        );
    }
    let mut parents = vec![None; ops.len()];
    let mut stack: Vec<usize> = Vec::new();
    for (i, _, kind, _) in ends {
        if kind == -1 {
            parents[i] = stack.last().copied();
            stack.push(i);
        } else {
            stack.pop();
        }
    }
    parents
}

/// The PyTorch TensorBoard plugin's operator tree of one thread's ops, given as (start, end)
/// in µs as written (torch-tb-profiler 0.4.3, `OpTreeBuilder._build_tree_internal`): sorted
/// by start, longer first, else in file order; each op nests in the innermost op on the stack
/// that ends after it begins, when it ends no later (else the plugin rejects it: a panic
/// here). Each op's parent.
fn torch_tb_parents(ops: &[(f64, f64)]) -> Vec<Option<usize>> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by(|&a, &b| {
        let ((sa, ea), (sb, eb)) = (ops[a], ops[b]);
        sa.total_cmp(&sb).then(eb.total_cmp(&ea))
    });
    let mut parents = vec![None; ops.len()];
    let mut stack: Vec<usize> = Vec::new();
    for i in order {
        let (start, end) = ops[i];
        while stack.last().is_some_and(|&top| start >= ops[top].1) {
            stack.pop();
        }
        if let Some(&top) = stack.last() {
            assert!(end <= ops[top].1, "torch-tb rejects op {i} in op {top}");
        }
        parents[i] = stack.last().copied();
        stack.push(i);
    }
    parents
}

/// The Kineto dialect's times in both of its readers. HolisticTraceAnalysis rounds (ceil of
/// `ts`, floor of `ts + dur`; `round_down_time_stamps` in `hta/common/trace_parser.py`) and
/// builds call stacks from the rounded times; the PyTorch TensorBoard plugin builds its
/// operator tree from the times as written. Sub-microsecond scopes keep their nesting and
/// sibling order through both (as written, each child begins before its parent ends), last
/// no less than nothing in HTA, the plugin gives every op its parent, and HTA every op that
/// lasts a microsecond or more.
#[test]
fn kineto_times_nest_in_both_readers() {
    let prof = sub_microsecond_session();
    let trace = prof.trace();
    let thread = &trace.threads[0];
    let spans = &thread.spans;
    let mut out = Vec::new();
    kineto::write(&trace, &mut out, &kineto::Options::new(0, 1)).unwrap();
    keep_for_interop("sub_us.kineto.json", &out);
    let mut plain = Vec::new();
    chrome::write(&trace, &mut plain).unwrap();
    keep_for_interop("sub_us.json", &plain);
    let doc: Value = serde_json::from_slice(&out).unwrap();
    let ops = complete_events(&doc);
    assert_eq!(ops.len(), spans.len());
    // The times as written (the TensorBoard plugin's), and after HTA's rounding, in doubles as
    // both do it.
    let written: Vec<(f64, f64)> = ops
        .iter()
        .map(|op| {
            let (ts, dur) = (op["ts"].as_f64().unwrap(), op["dur"].as_f64().unwrap());
            (ts, ts + dur)
        })
        .collect();
    let rounded: Vec<(i64, i64)> = written
        .iter()
        .map(|&(s, e)| (s.ceil() as i64, e.floor() as i64))
        .collect();
    let start = trace.start_ns as i64;
    for (i, span) in spans.iter().enumerate() {
        let name = span.name();
        assert_eq!(ops[i]["name"], name);
        let (s, e) = rounded[i];
        assert!(e >= s, "{name}: [{s}, {e}] lasts less than nothing in HTA");
        // No time is early (a zero-length op's by at most 0.5 µs from its middle), nor more
        // than 1 µs late (this thread is short).
        let (ws, we) = written[i];
        let (ws, we) = ((ws * 1000.0).round() as i64, (we * 1000.0).round() as i64);
        let (start_ns, end_ns) = (span.start_ns as i64 - start, span.end_ns as i64 - start);
        let (least_late, most_late) = if ws == we {
            let late = ws - (start_ns + end_ns) / 2;
            (late + 500, late)
        } else {
            (
                (ws - start_ns).min(we - end_ns),
                (ws - start_ns).max(we - end_ns),
            )
        };
        assert!(
            least_late >= 0 && most_late <= 1000,
            "{name}: [{ws}, {we}] ns for [{start_ns}, {end_ns}]"
        );
        if let Some(p) = span.parent {
            let p = p as usize;
            let ((ps, pe), (rps, rpe)) = (written[p], rounded[p]);
            let (ws, we) = written[i];
            assert!(
                ps <= ws && ws < pe && we <= pe,
                "{name} [{ws}, {we}] leaves its parent [{ps}, {pe}]"
            );
            assert!(
                rps <= s && e <= rpe,
                "{name} [{s}, {e}] leaves its parent [{rps}, {rpe}] in HTA"
            );
        }
        // The previous sibling ends before this one starts.
        if let Some(prev) = (0..i).rev().find(|&j| spans[j].parent == span.parent) {
            assert!(
                written[prev].1 <= written[i].0,
                "{name} overlaps its sibling"
            );
            assert!(rounded[prev].1 <= s, "{name} overlaps its sibling in HTA");
        }
    }
    // No microsecond holds a scope that closes, one that opens and one of zero length: HTA's
    // order of its ends would have no solution.
    for t in rounded.iter().flat_map(|&(s, e)| [s, e]) {
        let closes = rounded.iter().any(|&(s, e)| e == t && s < e);
        let opens = rounded.iter().any(|&(s, e)| s == t && s < e);
        let zero = rounded.iter().any(|&(s, e)| s == t && e == t);
        assert!(
            !(closes && opens && zero),
            "HTA cannot order microsecond {t}"
        );
    }
    // HTA's call stack: every op that lasts a microsecond or more has its own parent.
    let parents = hta_parents(&rounded);
    for (i, span) in spans.iter().enumerate() {
        let (s, e) = rounded[i];
        if e > s {
            assert_eq!(
                parents[i],
                span.parent.map(|p| p as usize),
                "{}'s parent in HTA",
                span.name()
            );
        }
    }
    // The TensorBoard plugin's tree, from the times as written: every op under its parent.
    let tree = torch_tb_parents(&written);
    for (i, span) in spans.iter().enumerate() {
        let want = span.parent.map(|p| p as usize);
        assert_eq!(tree[i], want, "{}'s parent in torch-tb", span.name());
    }
    // The times of this trace (ns): as recorded, but that the leaves which contain no whole
    // microsecond (`z`, `leaf`, `a1`..`a3`, `w`, `tail`, `after`) last no time, on the whole
    // microsecond nearest their middle or the first after the edge before (`z` after `y`'s
    // begin at 2450, `a1` after `pair`'s at 3100, `w` after `y`'s end); and that each edge
    // comes a nanosecond after the one before (`pair` ends at 4001 after `a3` on 4000, `y`
    // at 4002), and an end not on a whole microsecond unless its begin is (`step` ends at
    // 5001, after `tail` on 5000).
    let got: Vec<(&str, i64, i64)> = spans
        .iter()
        .zip(&written)
        .map(|(span, &(s, e))| {
            let ns = |t: f64| (t * 1000.0).round() as i64;
            (span.name(), ns(s), ns(e))
        })
        .collect();
    assert_eq!(
        got,
        [
            ("step", 0, 5001),
            ("x", 100, 2400),
            ("y", 2450, 4002),
            ("z", 3000, 3000),
            ("leaf", 3000, 3000),
            ("pair", 3100, 4001),
            ("a1", 4000, 4000),
            ("a2", 4000, 4000),
            ("a3", 4000, 4000),
            ("w", 5000, 5000),
            ("tail", 5000, 5000),
            ("after", 6000, 6000),
        ]
    );
}

/// On thread "overlap", guards dropped out of order. First `a` 0..20 ns with `b` 10..50 ns
/// opened inside it (b outlives a by 30 ns). Then, in µs: `outer` 100..400 { `x` 200..600
/// { `y` 300..700 } }, dropped outer, x, y; a link captured in `y` at 400 µs, followed by
/// `follower` 500..600 (inside `y`); `z` 800..850 after everything.
fn overlap_session() -> Profiler {
    record_on("overlap", |m| {
        let a = scope!("a");
        m.increment(10u64);
        let b = scope!("b");
        m.increment(10u64);
        drop(a);
        m.increment(30u64);
        drop(b);
        m.increment(100_000u64 - 50);
        let outer = scope!("outer");
        m.increment(100_000u64);
        let x = scope!("x");
        m.increment(100_000u64);
        let y = scope!("y");
        m.increment(100_000u64);
        drop(outer);
        let link = tickscope::link();
        m.increment(100_000u64);
        {
            let _f = scope!("follower", follows = link);
            m.increment(100_000u64);
        }
        drop(x);
        m.increment(100_000u64);
        drop(y);
        m.increment(100_000u64);
        {
            let _z = scope!("z");
            m.increment(50_000u64);
        }
    })
}

/// Every span of the overlap session: name, start and end in ns from the start, parent name.
const OVERLAP: [(&str, u64, u64, Option<&str>); 7] = [
    ("a", 0, 20, None),
    ("b", 10, 50, Some("a")),
    ("outer", 100_000, 400_000, None),
    ("x", 200_000, 600_000, Some("outer")),
    ("y", 300_000, 700_000, Some("x")),
    ("follower", 500_000, 600_000, Some("y")),
    ("z", 800_000, 850_000, None),
];

/// Lane of each span of [`OVERLAP`]: the lowest track where it nests or that is free.
const OVERLAP_LANES: [usize; 7] = [0, 1, 0, 1, 2, 0, 0];

#[test]
fn scopes_that_outlive_their_parent_keep_their_duration_on_lanes() {
    let prof = overlap_session();
    let trace = prof.trace();
    let thread = &trace.threads[0];
    let start = trace.start_ns;
    let spans: Vec<(&str, u64, u64, Option<&str>)> = thread
        .spans
        .iter()
        .map(|s| {
            let parent = s.parent.map(|p| thread.spans[p as usize].name());
            (s.name(), s.start_ns - start, s.end_ns - start, parent)
        })
        .collect();
    assert_eq!(spans, OVERLAP, "the decoder's spans");

    let mut out = Vec::new();
    chrome::write(&trace, &mut out).unwrap();
    keep_for_interop("overlap.json", &out);
    let doc: Value = serde_json::from_slice(&out).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    // One slice per span, with the span's own duration, on its lane's track.
    let slices = complete_events(&doc);
    assert_eq!(slices.len(), OVERLAP.len());
    for (slice, (name, s, e, _)) in slices.iter().zip(OVERLAP) {
        assert_eq!(slice["name"], name);
        assert_eq!((ns(&slice["ts"]), ns(&slice["dur"])), (s, e - s), "{name}");
    }
    let tid = thread.id;
    let tids: Vec<u64> = slices.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
    let lane_tids = [tid, tids[1], tids[4]];
    assert!(lane_tids[1] > tid && lane_tids[2] > tid && lane_tids[1] != lane_tids[2]);
    for (i, (name, ..)) in OVERLAP.iter().enumerate() {
        assert_eq!(tids[i], lane_tids[OVERLAP_LANES[i]], "{name}'s track");
    }
    assert_ne!(tids[0], tids[1], "a and b share a track");
    // Each track nests: a slice starts after the previous one ended or lies inside it.
    for lane in lane_tids {
        let mut open: Vec<(u64, u64)> = Vec::new();
        for slice in slices.iter().filter(|e| e["tid"].as_u64() == Some(lane)) {
            let (s, e) = (ns(&slice["ts"]), ns(&slice["ts"]) + ns(&slice["dur"]));
            open.retain(|&(_, end)| end > s);
            if let Some(&(ps, pe)) = open.last() {
                assert!(
                    ps <= s && e <= pe,
                    "{slice} overlaps ({ps}, {pe}) on {lane}"
                );
            }
            open.push((s, e));
        }
    }
    // The lanes' tracks are named after the thread and sorted right after it.
    let meta = |tid: u64, what: &str| {
        events
            .iter()
            .find(|e| e["ph"] == "M" && e["tid"].as_u64() == Some(tid) && e["name"] == what)
            .map(|e| e["args"].clone())
    };
    assert_eq!(
        meta(lane_tids[1], "thread_name"),
        Some(serde_json::json!({"name": "overlap (overlapping scopes 1)"}))
    );
    assert_eq!(
        meta(lane_tids[2], "thread_name"),
        Some(serde_json::json!({"name": "overlap (overlapping scopes 2)"}))
    );
    for (lane, tid) in lane_tids.iter().enumerate() {
        assert_eq!(
            meta(*tid, "thread_sort_index"),
            Some(serde_json::json!({ "sort_index": lane }))
        );
    }
    // The flow leaves `y` on its track, at the capture, and enters `follower` on its own.
    let flow: Vec<(&str, u64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "s" || e["ph"] == "f")
        .map(|e| {
            (
                e["ph"].as_str().unwrap(),
                e["tid"].as_u64().unwrap(),
                ns(&e["ts"]),
            )
        })
        .collect();
    assert_eq!(
        flow,
        [("s", lane_tids[2], 400_000), ("f", lane_tids[0], 500_000)]
    );
    let expected = serde_json::json!({
        "spans": OVERLAP.len(),
        "slices": OVERLAP.iter().map(|(name, s, e, _)| (name, e - s)).collect::<Vec<_>>(),
        "flows": [["y", "follower"]],
    });
    keep_for_interop("overlap.expected.json", expected.to_string().as_bytes());

    // Unix-epoch times: B/E pairs, each track's in nesting order, at the spans' own ends.
    let mut out = Vec::new();
    let options = Options::new().time_origin(TimeOrigin::UnixEpoch);
    chrome::write_with(&trace, &mut out, &options).unwrap();
    keep_for_interop("overlap.unix.json", &out);
    let doc: Value = serde_json::from_slice(&out).unwrap();
    let mut durations: Vec<(String, u64)> = Vec::new();
    for lane in lane_tids {
        let mut open: Vec<(String, u64)> = Vec::new();
        for e in doc["traceEvents"].as_array().unwrap() {
            if e["tid"].as_u64() != Some(lane) || !(e["ph"] == "B" || e["ph"] == "E") {
                continue;
            }
            let (name, ts) = (e["name"].as_str().unwrap().to_owned(), ns(&e["ts"]));
            if e["ph"] == "B" {
                open.push((name, ts));
            } else {
                let (begun, at) = open.pop().expect("an E with no open B");
                assert_eq!(begun, name, "E closes another slice");
                durations.push((name, ts - at));
            }
        }
        assert!(open.is_empty());
    }
    durations.sort();
    let mut want: Vec<(String, u64)> = OVERLAP
        .iter()
        .map(|(name, s, e, _)| (name.to_string(), e - s))
        .collect();
    want.sort();
    assert_eq!(durations, want);

    // Kineto: the same tracks and times, but that `b` (10..50 ns, on a track of its own)
    // contains no whole microsecond, which HolisticTraceAnalysis needs: it lasts no time, on
    // the microsecond nearest its middle (`a`, 0..20 ns, contains 0 µs).
    let mut out = Vec::new();
    kineto::write(&trace, &mut out, &kineto::Options::new(0, 1)).unwrap();
    keep_for_interop("overlap.kineto.json", &out);
    let doc: Value = serde_json::from_slice(&out).unwrap();
    let ops = complete_events(&doc);
    let got: Vec<(u64, u64, u64)> = ops
        .iter()
        .map(|e| (e["tid"].as_u64().unwrap(), ns(&e["ts"]), ns(&e["dur"])))
        .collect();
    let want: Vec<(u64, u64, u64)> = OVERLAP
        .iter()
        .zip(OVERLAP_LANES)
        .map(|(&(name, s, e, _), lane)| match name {
            "b" => (lane_tids[lane], 0, 0),
            _ => (lane_tids[lane], s, e - s),
        })
        .collect();
    assert_eq!(got, want);

    // Folded stacks: self times as the report has them (a's self excludes only the part of b
    // inside it).
    let mut out = Vec::new();
    folded::write(&trace, &mut out, folded::Options::default()).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "a 10\na;b 40\nouter 100000\nouter;x 100000\nouter;x;y 300000\n\
         outer;x;y;follower 100000\nz 50000\n"
    );
    let report = prof.report();
    for (name, self_ns) in [("a", 10), ("b", 40), ("x", 100_000), ("y", 300_000)] {
        let row = report.get(name).unwrap();
        assert_eq!(row.self_ns, self_ns, "{name}'s self time in the report");
    }
}

/// Speedscope 1.25.0's import of one track's `X` events (`eventListToProfile` in
/// `src/import/chrome.ts`), as strict as it can be: times rebased on the first one, the
/// events sorted by `ts` and then longer first (a stable sort: file order last), each turned
/// into a begin and an end at `ts + dur` (doubles), both queues sorted by time (stable), then
/// replayed as a stack, taking the begin first on a tie only when the two fronts have the same
/// key (name and args). Where speedscope would repair the stack (swap a later end of the same
/// instant to the front, or end the top instead) or warn, this fails with what happened;
/// otherwise it gives each event's parent (file indices).
fn speedscope_parents(events: &[&Value]) -> Result<Vec<Option<usize>>, String> {
    let key = |e: &Value| match e.get("args") {
        Some(args) => format!("{} {args}", e["name"].as_str().unwrap()),
        None => e["name"].as_str().unwrap().to_owned(),
    };
    let first = events
        .iter()
        .map(|e| e["ts"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    let mut x: Vec<(f64, f64, usize)> = (0..events.len())
        .map(|i| {
            let e = events[i];
            (
                e["ts"].as_f64().unwrap() - first,
                e["dur"].as_f64().unwrap(),
                i,
            )
        })
        .collect();
    x.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let mut begins: Vec<(f64, usize)> = x.iter().map(|&(ts, _, i)| (ts, i)).collect();
    let mut ends: Vec<(f64, usize)> = x.iter().map(|&(ts, dur, i)| (ts + dur, i)).collect();
    begins.sort_by(|a, b| a.0.total_cmp(&b.0));
    ends.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut b, mut e) = (0, 0);
    let mut stack: Vec<usize> = Vec::new();
    let mut parents = vec![None; events.len()];
    while b < begins.len() || e < ends.len() {
        let take_begin = e == ends.len()
            || (b < begins.len()
                && (begins[b].0 < ends[e].0
                    || (begins[b].0 == ends[e].0
                        && key(events[begins[b].1]) == key(events[ends[e].1]))));
        if take_begin {
            let i = begins[b].1;
            parents[i] = stack.last().copied();
            stack.push(i);
            b += 1;
            continue;
        }
        let (ts, i) = ends[e];
        let Some(&top) = stack.last() else {
            return Err(format!(
                "ts={ts}: tried to end {} on an empty stack",
                key(events[i])
            ));
        };
        if top != i {
            return Err(format!(
                "ts={ts}: tried to end {} when {} was on the top of the stack",
                key(events[i]),
                key(events[top])
            ));
        }
        stack.pop();
        e += 1;
    }
    Ok(parents)
}

/// On thread "ties", edges that share a nanosecond (the mock clock stands still between
/// them, as a busy machine's clock can make them): `a` 0..200 { `b` 0..100 { `c` 0..100 },
/// `d` 100..150, `z` 150..150, `y` 150..170 { `w` 150..150 }, `q` 200..200 { `r` 200..200 } }.
fn ties_session() -> Profiler {
    record_on("ties", |m| {
        let a = scope!("a");
        {
            let _b = scope!("b");
            let _c = scope!("c");
            m.increment(100u64);
        }
        {
            let _d = scope!("d");
            m.increment(50u64);
        }
        drop(scope!("z"));
        {
            let _y = scope!("y");
            drop(scope!("w"));
            m.increment(20u64);
        }
        m.increment(30u64);
        {
            let _q = scope!("q");
            drop(scope!("r"));
        }
        drop(a);
    })
}

/// A child that starts on its parent's nanosecond or ends on it, and siblings that share a
/// start or an end, are written 1 ns apart (a zero-length scope stays zero-length), so that
/// speedscope, which rebuilds stacks from begins and ends sorted by time, reads every parent
/// right without repairing its stack.
#[test]
fn chrome_edges_that_share_a_nanosecond_nest_in_speedscope() {
    let prof = ties_session();
    let trace = prof.trace();
    let spans = &trace.threads[0].spans;
    let start = trace.start_ns;
    let recorded: Vec<(&str, u64, u64)> = spans
        .iter()
        .map(|s| (s.name(), s.start_ns - start, s.end_ns - start))
        .collect();
    assert_eq!(
        recorded,
        [
            ("a", 0, 200),
            ("b", 0, 100),
            ("c", 0, 100),
            ("d", 100, 150),
            ("z", 150, 150),
            ("y", 150, 170),
            ("w", 150, 150),
            ("q", 200, 200),
            ("r", 200, 200),
        ]
    );
    let mut out = Vec::new();
    chrome::write(&trace, &mut out).unwrap();
    keep_for_interop("ties.json", &out);
    let doc: Value = serde_json::from_slice(&out).unwrap();
    let slices = complete_events(&doc);
    let parents = speedscope_parents(&slices).expect("speedscope reads the stacks as written");
    let want: Vec<Option<usize>> = spans.iter().map(|s| s.parent.map(|p| p as usize)).collect();
    assert_eq!(parents, want);
    let written: Vec<(&str, u64, u64)> = slices
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), ns(&e["ts"]), ns(&e["dur"])))
        .collect();
    assert_eq!(
        written,
        [
            ("a", 0, 203),
            ("b", 1, 100),
            ("c", 2, 98),
            ("d", 102, 48),
            ("z", 151, 0),
            ("y", 152, 18),
            ("w", 153, 0),
            ("q", 200, 2),
            ("r", 201, 0),
        ]
    );
}

/// An allocation freed within the nanosecond it was made (the mock clock stands still): the
/// Chrome JSON memory counter shows its peak at that time and the value after it 1 ns later,
/// so that no viewer misses the peak; elsewhere one sample per time, the value after it.
#[test]
fn the_memory_counter_keeps_a_peak_within_one_nanosecond() {
    let _serial = crate::common::serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = tickscope::Profiler::builder()
        .current_thread()
        .track_memory(true)
        .start();
    {
        let _outer = tickscope::scope!("outer");
        m.increment(1u64);
        let kept = std::hint::black_box(vec![1u8; 1000]);
        m.increment(1u64);
        // Made and freed on one tick.
        drop(std::hint::black_box(vec![2u64; 100]));
        m.increment(1u64);
        drop(kept);
    }
    prof.stop();
    let trace = prof.trace();
    let mut out = Vec::new();
    tickscope::export::chrome::write(&trace, &mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let samples: Vec<(f64, u64)> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "memory")
        .map(|e| {
            (
                e["ts"].as_f64().unwrap(),
                e["args"]["live_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let values: Vec<u64> = samples.iter().map(|&(_, v)| v).collect();
    assert_eq!(values, [0, 1000, 1800, 1000, 0]);
    // The peak and the value after it, 1 ns apart.
    let gap = samples[3].0 - samples[2].0;
    assert!((gap - 0.001).abs() < 1e-9, "{samples:?}");
    let memory = trace.memory.as_ref().unwrap();
    assert_eq!(memory.live_bytes().into_iter().max(), Some(1800));
}
