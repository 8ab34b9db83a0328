//! Chrome JSON and folded-stack exports: exact round trips with a mock clock, and error paths.
#![cfg(feature = "enabled")]

use std::io::{self, Write};
use std::sync::Mutex;

use serde_json::Value;
use tickscope::export::{chrome, folded};
use tickscope::{Profiler, scope};

static SERIAL: Mutex<()> = Mutex::new(());

/// On thread "exporter": outer 0..3500 ns { inner 1000..1250 ns }, then "left open" from
/// 4000 ns to the stop at 5000 ns. The mock starts at 1 s after the epoch.
fn session() -> Profiler {
    let m = tickscope::clock::use_mock_clock().unwrap();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::Builder::new()
        .name("exporter".into())
        .spawn(move || {
            if m.value() == 0 {
                m.increment(1_000_000_000u64);
            }
            let prof = Profiler::builder().current_thread().start();
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
            let _open = scope!("left open");
            m.increment(1_000u64);
            prof.stop();
            prof
        })
        .unwrap()
        .join()
        .unwrap()
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
