//! Chrome JSON and folded-stack exports: exact round trips with a mock clock, and error paths.
#![cfg(feature = "enabled")]

mod common;

use std::io::{self, Write};
use std::sync::Mutex;

use common::{YieldOnce, poll_once};

use serde_json::Value;
use tickscope::export::chrome::{Options, TimeOrigin};
use tickscope::export::{chrome, folded};
use tickscope::{Profiler, profile, scope};

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `body` on a thread named `thread` under a session of that thread, and stops the
/// session while what `body` returned (an open scope, say) is still alive. The mock clock
/// reads 1 s after the epoch at the first session.
fn record_on<G>(thread: &str, body: impl FnOnce(&quanta::Mock) -> G + Send + 'static) -> Profiler {
    let m = tickscope::clock::use_mock_clock().unwrap();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
async fn load(m: std::sync::Arc<quanta::Mock>) {
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
fn kineto_flavor() {
    let prof = session();
    let trace = prof.trace();
    let mut out = Vec::new();
    chrome::write_with(&trace, &mut out, &Options::new().kineto(3, 8)).unwrap();
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
    chrome::write_with(&prof.trace(), &mut out, &Options::new().kineto(0, 1)).unwrap();
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
    prof.write_folded(&stacks).unwrap();
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
    tickscope::export::flamegraph::write(&prof.trace(), &mut out, "test", Default::default())
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
    prof.write_flamegraph(&path).unwrap();
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("outer (3,500 ns")
    );
    std::fs::remove_file(&path).unwrap();
}
