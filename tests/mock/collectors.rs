//! Rust collectors run beside a session: their tracks in the trace, the table, the exports
//! and capture files, on their own clock; their failures reported without losing data.
#![cfg(feature = "enabled")]

use std::sync::{Arc, Mutex};

use crate::common::{mock, serial};
use tickscope::collector::{BoxError, Collector, SessionWriter, Stage};
use tickscope::export::chrome;
use tickscope::{Capture, Profiler, scope};

/// Kernels launched on a device: (begin, end) in Unix ns.
type Launches = Arc<Mutex<Vec<(u64, u64)>>>;

/// The device clock's value at Unix time 0: it ticks once a nanosecond from there.
const DEVICE_BASE: u64 = 1_000_000_000_000;

/// What a [`Device`] does at each call.
#[derive(Clone, Default)]
struct Script {
    fail_start: bool,
    fail_stop: bool,
    panic_collect: bool,
    /// Appends a session, then these bytes, then fails.
    garbage_after: Option<Vec<u8>>,
}

/// A simulated device on the mock clock: one "kernel" span per launch, on track
/// "stream 1" of process "gpu0", recorded in device ticks.
struct Device {
    name: String,
    mock: Arc<tickscope::clock::Mock>,
    script: Script,
    start_ns: u64,
    /// (begin, end) in Unix ns, launched by the host.
    kernels: Launches,
    starts: usize,
}

impl Device {
    fn new(name: &str, mock: &Arc<tickscope::clock::Mock>, script: Script) -> (Self, Launches) {
        let kernels = Arc::new(Mutex::new(Vec::new()));
        let device = Self {
            name: name.to_owned(),
            mock: mock.clone(),
            script,
            start_ns: 0,
            kernels: kernels.clone(),
            starts: 0,
        };
        (device, kernels)
    }
}

impl Collector for Device {
    fn name(&self) -> &str {
        &self.name
    }

    fn start(&mut self) -> Result<(), BoxError> {
        self.starts += 1;
        if self.script.fail_start {
            return Err("no device".into());
        }
        self.start_ns = self.mock.value();
        self.kernels.lock().unwrap().clear();
        Ok(())
    }

    fn stop(&mut self) -> Result<(), BoxError> {
        if self.script.fail_stop {
            return Err("device lost".into());
        }
        Ok(())
    }

    fn collect(&mut self, out: &mut Vec<u8>) -> Result<(), BoxError> {
        if self.script.panic_collect {
            panic!("driver bug");
        }
        let now = self.mock.value();
        let mut session = SessionWriter::new(
            "gpu0",
            (DEVICE_BASE + self.start_ns, self.start_ns),
            (DEVICE_BASE + now, now),
            1.0,
        );
        let stream = session.thread("stream 1");
        for &(begin, end) in self.kernels.lock().unwrap().iter() {
            session.begin(stream, "kernel", DEVICE_BASE + begin);
            session.arg_u64(stream, "blocks", 64);
            session.end(stream, DEVICE_BASE + end);
        }
        session.write_to(out);
        if let Some(garbage) = &self.script.garbage_after {
            out.extend_from_slice(garbage);
            return Err("buffer overrun".into());
        }
        Ok(())
    }
}

/// Runs a session of this thread with `collectors`: "step" 0..1000 ns from the first
/// session's 1 s, launching a kernel that runs on the device from 200 to 700 ns.
fn run(collectors: Vec<Device>) -> Profiler {
    let mock = tickscope::clock::use_mock_clock().unwrap();
    let _serial = serial();
    if mock.value() == 0 {
        mock.increment(1_000_000_000u64);
    }
    let launches: Vec<_> = collectors.iter().map(|d| d.kernels.clone()).collect();
    let mut builder = Profiler::builder().current_thread();
    for c in collectors {
        builder = builder.collector(c);
    }
    let prof = builder.start();
    let t0 = mock.value();
    {
        let _step = scope!("step");
        mock.increment(200u64);
        for launched in &launches {
            launched.lock().unwrap().push((t0 + 200, t0 + 700));
        }
        mock.increment(800u64);
    }
    prof.stop();
    prof
}

#[test]
fn device_spans_are_a_process_and_track_of_their_own_on_the_host_clock() {
    let (device, _) = Device::new("device", &mock(), Script::default());
    let prof = run(vec![device]);
    assert!(prof.errors().is_empty(), "{:?}", prof.errors());
    let trace = prof.trace();
    assert_eq!(trace.processes.len(), 2);
    let host = trace
        .threads
        .iter()
        .find(|t| t.spans.iter().any(|s| s.name() == "step"))
        .unwrap();
    let gpu = trace
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("stream 1"))
        .unwrap();
    assert_eq!(trace.processes[gpu.process as usize].name, "gpu0");
    assert_ne!(gpu.process, host.process);
    let step = &host.spans[0];
    assert_eq!(gpu.spans.len(), 1);
    let kernel = &gpu.spans[0];
    assert_eq!(kernel.name(), "kernel");
    // Device ticks from an offset base, converted through its own pairs: exactly the host
    // times the kernel ran at.
    assert_eq!(kernel.start_ns, step.start_ns + 200);
    assert_eq!(kernel.end_ns, step.start_ns + 700);
    assert_eq!(gpu.args.len(), 1);
    assert_eq!(gpu.args[0].key, "blocks");
    assert_eq!(gpu.args[0].value.to_string(), "64");

    // The table split by thread has a row for the device's track.
    let table = prof.table().by_thread(true).to_string();
    let row = table.lines().find(|l| l.contains("kernel")).unwrap();
    assert!(row.contains("gpu0"), "{table}");
    assert!(row.contains("stream 1"), "{table}");
    assert!(table.lines().any(|l| l.contains("step")), "{table}");

    // The Chrome trace: the kernel under the device's pid, named, at the host's time.
    let dir = std::env::temp_dir().join(format!("tickscope-collectors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    prof.write(&path, &chrome::Options::new()).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let complete = |name: &str| {
        events
            .iter()
            .find(|e| e["name"] == name && e["ph"] == "X")
            .unwrap_or_else(|| panic!("no {name} in {json}"))
            .clone()
    };
    let (k, s) = (complete("kernel"), complete("step"));
    assert_ne!(k["pid"], s["pid"]);
    assert_eq!(k["dur"].as_f64().unwrap(), 0.5);
    let delta = k["ts"].as_f64().unwrap() - s["ts"].as_f64().unwrap();
    assert!(
        (delta - 0.2).abs() < 1e-6,
        "kernel at {delta} µs after step"
    );
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["args"]["name"] == "gpu0")
    );
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["args"]["name"] == "stream 1")
    );

    // The capture file holds both sessions, and decodes to the same trace.
    let file = dir.join("both.tscope");
    prof.write_capture(&file).unwrap();
    let captures = Capture::read_all(&file).unwrap();
    assert_eq!(captures.len(), 2);
    assert_eq!(captures[1].process_name(), "gpu0");
    let again = tickscope::trace::Trace::from_captures(&captures);
    let gpu = again
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("stream 1"))
        .unwrap();
    assert_eq!(
        (gpu.spans[0].start_ns, gpu.spans[0].end_ns),
        (kernel.start_ns, kernel.end_ns)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn failures_are_reported_and_lose_nothing_of_the_others() {
    let m = mock();
    let (ok, _) = Device::new("good", &m, Script::default());
    let (no_start, _) = Device::new(
        "absent",
        &m,
        Script {
            fail_start: true,
            ..Script::default()
        },
    );
    let (panics, _) = Device::new(
        "buggy",
        &m,
        Script {
            panic_collect: true,
            ..Script::default()
        },
    );
    let (lost, _) = Device::new(
        "flaky",
        &m,
        Script {
            fail_stop: true,
            ..Script::default()
        },
    );
    let prof = run(vec![ok, no_start, panics, lost]);
    let errors: Vec<String> = prof.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [
            "collector `absent`: start failed: no device",
            "collector `buggy`: collect failed: panicked: driver bug",
            "collector `flaky`: stop failed: device lost",
        ]
    );
    assert_eq!(prof.errors()[0].stage, Stage::Start);
    let trace = prof.trace();
    // The host's scope, and the kernels of "good" and "flaky" (its stop failed, its collect
    // did not): one track of process gpu0 each collector session.
    let names: Vec<(&str, usize)> = trace
        .threads
        .iter()
        .map(|t| (t.name.as_deref().unwrap_or(""), t.spans.len()))
        .filter(|(n, _)| *n == "stream 1")
        .collect();
    assert_eq!(names, [("stream 1", 1), ("stream 1", 1)]);
    assert_eq!(prof.report().get("step").unwrap().calls, 1);
    assert_eq!(prof.report().get("kernel").unwrap().calls, 2);
    let table = prof.table().to_string();
    for e in &errors {
        assert!(table.contains(&format!("Error: {e}")), "{table}");
    }
}

#[test]
fn malformed_bytes_keep_the_well_formed_session_before_them() {
    let garbage = b"TSCX not a chunk header at all".to_vec();
    let (device, _) = Device::new(
        "device",
        &mock(),
        Script {
            garbage_after: Some(garbage),
            ..Script::default()
        },
    );
    let prof = run(vec![device]);
    let errors = prof.errors();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        errors[0].to_string(),
        "collector `device`: collect failed: buffer overrun"
    );
    assert!(
        errors[1].message.starts_with("malformed chunks: "),
        "{}",
        errors[1]
    );
    assert!(errors[1].message.contains("magic"), "{}", errors[1]);
    assert_eq!(prof.report().get("kernel").unwrap().calls, 1);
    assert_eq!(prof.report().get("step").unwrap().calls, 1);
}

#[test]
fn restarts_start_collectors_again_and_errors_are_per_window() {
    let m = mock();
    let (device, launched) = Device::new("device", &m, Script::default());
    let prof = run(vec![device]);
    for round in 1..=3u64 {
        let _serial = serial();
        prof.restart();
        {
            let _g = scope!("again");
            let t = m.value();
            // Each window launches `round` kernels; the device forgets the last window's.
            for k in 0..round {
                launched.lock().unwrap().push((t + 10 * k, t + 10 * k + 5));
            }
            m.increment(100u64);
        }
        prof.stop();
        assert!(prof.errors().is_empty());
        assert_eq!(prof.report().get("kernel").unwrap().calls, round);
        assert_eq!(prof.report().get("again").unwrap().calls, 1);
        assert!(prof.report().get("step").is_none());
    }
}
