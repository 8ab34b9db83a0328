//! Snapshots (insta) of what a user reads: the text table, the call tree and a Chrome trace of
//! a small deterministic program, two frames of `frame { update { physics }, render }` on
//! the mock clock.
//!
//! The snapshots live in `tests/snapshots/`. After a deliberate change of the output, review
//! and accept the new text with `cargo insta review`, or rerun with `INSTA_UPDATE=always` and
//! check the diff; with `CI=true` (as in `.ci/run`) a difference fails instead of writing a
//! `.snap.new` file.
//!
//! Every test shares the process-wide mock clock, so they take `SERIAL` to run one at a time.
//! What varies between runs is replaced by a placeholder in the Chrome trace: the process id
//! and executable name, the thread id (a counter over the threads of this test binary), the
//! session's Unix times (the mock clock's value, which depends on the tests that ran before)
//! and the crate version. The trace's `ts` count from the session start, so they stay.
#![cfg(feature = "enabled")]

use crate::common::serial;
use tickscope::trace::Trace;
use tickscope::{Profiler, scope};

/// The name of the thread the program runs on.
const THREAD: &str = "game-loop";

/// Runs the program under a session of its own thread and returns the stopped session. Per
/// frame: `(update, physics within update, render)` in nanoseconds.
fn record() -> Profiler {
    let mock = tickscope::clock::use_mock_clock().expect("the mock clock is installed first");
    let _serial = serial();
    std::thread::Builder::new()
        .name(THREAD.into())
        .spawn(move || {
            let prof = Profiler::builder().current_thread().start();
            mock.increment(100u64);
            for (bodies, (update, physics, render)) in
                [(1_200u64, 700u64, 2_500u64), (800, 300, 3_100)]
                    .into_iter()
                    .enumerate()
            {
                let _frame = scope!("frame");
                mock.increment(50u64);
                {
                    let _update = scope!("update");
                    mock.increment(update - physics);
                    let _physics = scope!("physics", bodies = bodies + 1);
                    mock.increment(physics);
                }
                {
                    let _render = scope!("render");
                    mock.increment(render);
                }
                mock.increment(50u64);
            }
            mock.increment(100u64);
            prof.stop();
            prof
        })
        .expect("spawn the program's thread")
        .join()
        .expect("the program ran")
}

#[test]
fn table() {
    let prof = record();
    insta::assert_snapshot!("table", prof.table().to_string());
}

#[test]
fn call_tree() {
    let prof = record();
    insta::assert_snapshot!("call_tree", prof.table().tree(true).to_string());
}

/// `trace` as Chrome JSON, as written, with what varies between runs replaced.
fn chrome_json(trace: &Trace) -> String {
    let mut out = Vec::new();
    tickscope::export::chrome::write(trace, &mut out).expect("write to a Vec");
    let mut json = String::from_utf8(out).expect("UTF-8");
    serde_json::from_str::<serde_json::Value>(&json).expect("valid JSON");

    let [thread] = &trace.threads[..] else {
        panic!("one thread expected, got {}", trace.threads.len());
    };
    assert_eq!(thread.display_name(), THREAD);
    let exe = std::env::current_exe().expect("test executable");
    let exe = exe.file_stem().expect("file name").to_string_lossy();
    let pid = std::process::id();
    let tid = thread.id;
    assert_ne!(
        tid, 0,
        "thread ids start at 1; 0 is the process's metadata track"
    );
    for (from, to) in [
        (format!("\"pid\":{pid},"), "\"pid\":\"[pid]\",".to_owned()),
        (format!("\"tid\":{tid},"), "\"tid\":\"[tid]\",".to_owned()),
        (
            format!("\"args\":{{\"name\":\"{exe}\"}}"),
            "\"args\":{\"name\":\"[executable]\"}".to_owned(),
        ),
        (
            format!("\"producer\":\"tickscope {}\"", env!("CARGO_PKG_VERSION")),
            "\"producer\":\"tickscope [version]\"".to_owned(),
        ),
        (
            format!("\"start_unix_ns\":{},", trace.start_ns),
            "\"start_unix_ns\":\"[start]\",".to_owned(),
        ),
        (
            format!("\"end_unix_ns\":{},", trace.end_ns),
            "\"end_unix_ns\":\"[end]\",".to_owned(),
        ),
        (
            format!("\"time_origin_unix_ns\":{}}}", trace.start_ns),
            "\"time_origin_unix_ns\":\"[start]\"}".to_owned(),
        ),
    ] {
        assert!(json.contains(&from), "{from} not found in\n{json}");
        json = json.replace(&from, &to);
    }
    // Still JSON, and nothing of this run left but relative times.
    serde_json::from_str::<serde_json::Value>(&json).expect("valid JSON after normalising");
    assert!(!json.contains(&format!(":{pid},")), "{json}");
    assert!(!json.contains(&format!("\"tid\":{tid}")), "{json}");
    json
}

#[test]
fn chrome_trace() {
    let prof = record();
    insta::assert_snapshot!("chrome_trace", chrome_json(&prof.trace()));
}
