//! Scheduled sessions (PyTorch's `schedule` and `on_trace_ready`), with a mock clock whose
//! ticks are nanoseconds: which steps are recorded, the windows handed over, the
//! `ProfilerStep#N` scopes, a step in progress at stop.
//!
//! The tests share the process-wide mock, so they take `SERIAL` to run one at a time.
#![cfg(feature = "enabled")]

use std::io;
use std::sync::{Arc, Mutex};

use crate::common::{mock, serial};
use tickscope::schedule::{Schedule, ScheduledWindow};
use tickscope::{Profiler, scope};

/// What a test keeps of each window handed over: its index, steps, the `work` calls it
/// holds (each tagged with its step by its duration) and its time span.
#[derive(Debug, PartialEq)]
struct Seen {
    index: u64,
    steps: std::ops::Range<u64>,
    work: Vec<u64>,
    step_scopes: Vec<String>,
    span: (u64, u64),
}

/// The windows seen so far.
type Windows = Arc<Mutex<Vec<Seen>>>;

fn collector() -> (
    Windows,
    impl Fn(&ScheduledWindow) -> io::Result<()> + Send + Sync + 'static,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let callback = move |window: &ScheduledWindow| {
        let trace = window.trace();
        let mut work = Vec::new();
        let mut step_scopes = Vec::new();
        for thread in &trace.threads {
            for span in &thread.spans {
                if span.name() == "work" {
                    work.push(span.duration_ns());
                } else {
                    step_scopes.push(format!("{}@{}", span.name(), span.depth));
                }
            }
        }
        let first = trace
            .threads
            .iter()
            .flat_map(|t| &t.spans)
            .map(|s| s.start_ns)
            .min();
        let last = trace
            .threads
            .iter()
            .flat_map(|t| &t.spans)
            .map(|s| s.end_ns)
            .max();
        keep.lock().unwrap().push(Seen {
            index: window.index(),
            steps: window.steps(),
            work,
            step_scopes,
            span: (first.unwrap_or(0), last.unwrap_or(0)),
        });
        Ok(())
    };
    (seen, callback)
}

/// Runs `steps` steps of a program whose step `n` holds one `work` scope of `n + 1` ns
/// (so each recorded call names its step), calling `step` after each.
fn run(m: &tickscope::clock::Mock, prof: &Profiler, steps: u64) {
    for n in 0..steps {
        m.increment(1000u64);
        {
            let _g = scope!("work");
            m.increment(n + 1);
        }
        prof.step().unwrap();
    }
}

#[test]
fn only_the_scheduled_steps_are_recorded_and_each_window_is_handed_over_once() {
    let _serial = serial();
    let m = mock();
    let (seen, callback) = collector();
    // Step 0 skipped; cycles of 1 wait, 1 warmup, 2 active steps, twice.
    let prof = Profiler::builder()
        .current_thread()
        .schedule(Schedule::new(1, 1, 2).skip_first(1).repeat(2))
        .on_trace_ready(callback)
        .start();
    assert!(!prof.is_running());
    run(&m, &prof, 12);
    prof.stop();
    let seen = seen.lock().unwrap();
    let windows: Vec<(u64, std::ops::Range<u64>, Vec<u64>)> = seen
        .iter()
        .map(|s| (s.index, s.steps.clone(), s.work.clone()))
        .collect();
    // Cycle 1: step 1 waits, 2 warms up, 3 and 4 are active; cycle 2: 5, 6, then 7 and 8.
    // A work call of step n lasts n + 1 ns: the warmup steps (2 and 6) are not there.
    assert_eq!(windows, [(0, 3..5, vec![4, 5]), (1, 7..9, vec![8, 9])]);
    for s in seen.iter() {
        let steps: Vec<String> = s
            .steps
            .clone()
            .map(|n| format!("ProfilerStep#{n}@0"))
            .collect();
        assert_eq!(s.step_scopes, steps);
    }
    // The windows never overlap.
    assert!(seen[0].span.1 <= seen[1].span.0);
    // After the second cycle nothing runs, and the stop hands nothing more over.
    assert!(!prof.is_running());
    assert_eq!(seen.len(), 2);
}

#[test]
fn a_step_in_progress_at_stop_ends_its_window() {
    let _serial = serial();
    let m = mock();
    let (seen, callback) = collector();
    let prof = Profiler::builder()
        .current_thread()
        .schedule(Schedule::new(0, 0, 3))
        .on_trace_ready(callback)
        .start();
    assert!(prof.is_running());
    // Steps 0..=3 done: window 0 holds steps 0, 1 and 2; step 3 begins window 1.
    run(&m, &prof, 4);
    m.increment(10u64);
    {
        let _g = scope!("work");
        m.increment(100u64);
    }
    // Step 4 is in progress: the stop ends it and hands over steps 3 and 4.
    prof.try_stop().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        (seen[0].steps.clone(), seen[0].work.clone()),
        (0..3, vec![1, 2, 3])
    );
    assert_eq!(
        (seen[1].steps.clone(), seen[1].work.clone()),
        (3..5, vec![4, 100])
    );
    assert_eq!(
        seen[1].step_scopes,
        ["ProfilerStep#3@0", "ProfilerStep#4@0"]
    );
    // The work of step 4 is inside its step scope, which the stop closed.
    let report = prof.report();
    assert_eq!(report.get("ProfilerStep#4").unwrap().total_ns, 110);
    assert_eq!(report.get("work").unwrap().calls, 2);
    // Later steps record nothing.
    run(&m, &prof, 3);
    assert!(!prof.is_running());
    assert_eq!(seen.len(), 2);
}

#[test]
fn a_warmup_cut_short_by_the_stop_is_thrown_away_and_callback_errors_are_returned() {
    let _serial = serial();
    let m = mock();
    let calls = Arc::new(Mutex::new(0));
    let count = calls.clone();
    let prof = Profiler::builder()
        .current_thread()
        .schedule(Schedule::new(0, 2, 1))
        .on_trace_ready(move |window| {
            *count.lock().unwrap() += 1;
            Err(io::Error::other(format!(
                "window {} refused",
                window.index()
            )))
        })
        .start();
    // Steps 0 and 1 warm up, step 2 is active: the step that ends it returns the error.
    m.increment(5u64);
    prof.step().unwrap();
    prof.step().unwrap();
    let err = prof.step().unwrap_err();
    assert_eq!(err.to_string(), "window 0 refused");
    // Step 3 warms up again; the stop throws it away.
    prof.try_stop().unwrap();
    assert_eq!(*calls.lock().unwrap(), 1);
}

#[test]
fn steps_without_a_schedule_are_marked() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    // Step 0 began before the session could mark it: steps are marked from step 1.
    run(&m, &prof, 3);
    prof.stop();
    let report = prof.report();
    // Steps 1 and 2 hold their work (2 and 3 ns); step 3 began at the last step call and
    // ended at the stop, at the same mock time.
    assert_eq!(report.get("ProfilerStep#1").unwrap().total_ns, 1000 + 2);
    assert_eq!(report.get("ProfilerStep#2").unwrap().total_ns, 1000 + 3);
    assert_eq!(report.get("ProfilerStep#3").unwrap().total_ns, 0);
    assert_eq!(report.get("ProfilerStep#3").unwrap().open_at_stop, 0);
    assert_eq!(report.get("ProfilerStep#0"), None);
    assert_eq!(report.get("work").unwrap().calls, 3);
}

#[test]
fn the_handlers_write_a_file_per_window() {
    let _serial = serial();
    let m = mock();
    let dir = std::env::temp_dir().join(format!("tickscope-schedule-{}", std::process::id()));
    let chrome = tickscope::schedule::chrome_trace_handler(dir.join("json"), "run-");
    let capture = tickscope::schedule::capture_handler(dir.join("tscope"), "run-");
    let html = tickscope::schedule::html_report_handler(dir.join("html"), "run-");
    let prof = Profiler::builder()
        .current_thread()
        .schedule(Schedule::new(1, 0, 1).repeat(2))
        .on_trace_ready(move |window| {
            chrome(window)
                .and_then(|()| capture(window))
                .and_then(|()| html(window))
        })
        .start();
    run(&m, &prof, 6);
    prof.stop();
    for index in 0..2 {
        let json =
            std::fs::read_to_string(dir.join(format!("json/run-window-{index}.json"))).unwrap();
        assert_eq!(json.matches("\"name\":\"work\"").count(), 1, "{json}");
        let file = dir.join(format!("tscope/run-window-{index}.tscope"));
        let report =
            tickscope::report::Report::new(&tickscope::Capture::read(&file).unwrap().decode());
        assert_eq!(report.get("work").unwrap().calls, 1);
        // Window 0 is step 1, window 1 step 3: a work call of step n lasts n + 1 ns.
        assert_eq!(report.get("work").unwrap().total_ns, 2 * index + 2);
        let page =
            std::fs::read_to_string(dir.join(format!("html/run-window-{index}.html"))).unwrap();
        assert!(page.contains(&format!("tickscope window {index} (steps ")));
        assert!(page.contains("\"work\""));
    }
    assert!(!dir.join("html/run-window-2.html").exists());
    assert!(!dir.join("json/run-window-2.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
