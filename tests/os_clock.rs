//! The OS monotonic clock instead of the CPU's counter: chosen in code
//! (`clock::use_os_clock`, this binary's own process, since the clock is process-wide) or
//! with `TICKSCOPE_CLOCK=os` (a child process of this binary). The trace, the capture file
//! and the table footer say so, and ticks still convert to Unix time.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use tickscope::clock::{self, CLOCK_ENV, ClockInUse, ClockSource};
use tickscope::{Capture, Profiler, scope};

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as u64
}

/// Records `outer` around two `inner`s on this thread and checks the trace's shape and
/// clock; returns the session.
fn record_and_check() -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    let before = unix_now();
    {
        let _o = scope!("outer");
        for _ in 0..2 {
            let _i = scope!("inner");
        }
    }
    let after = unix_now();
    prof.stop();
    let trace = prof.trace();
    assert_eq!(trace.clock_source, Some(ClockSource::Monotonic));
    let spans: Vec<(&str, u32)> = trace.spans().map(|(_, s)| (s.name(), s.depth)).collect();
    assert_eq!(spans, [("outer", 0), ("inner", 1), ("inner", 1)]);
    let (_, outer) = trace
        .spans()
        .find(|(_, s)| s.name() == "outer")
        .expect("outer recorded");
    // Ticks become Unix nanoseconds through the session's calibration: the scope lies
    // between the system-clock reads around it, give or take the calibration's error (the
    // gap between two back-to-back reads, well under a millisecond).
    const SLACK_NS: u64 = 1_000_000;
    assert!(
        outer.start_ns + SLACK_NS >= before && outer.end_ns <= after + SLACK_NS,
        "outer {}..{} outside {before}..{after}",
        outer.start_ns,
        outer.end_ns
    );
    assert!(outer.start_ns <= outer.end_ns);
    prof
}

#[test]
fn the_os_clock_chosen_in_code() {
    clock::use_os_clock().expect("no clock in use yet");
    clock::use_os_clock().expect("choosing it again is fine");
    assert_eq!(clock::use_mock_clock().err(), Some(ClockInUse));
    assert_eq!(clock::source(), ClockSource::Monotonic);

    let prof = record_and_check();
    let table = prof.table().to_string();
    assert!(
        table.contains(
            "Clock: OS monotonic clock (no CPU counter confirmed invariant, or the OS clock \
             chosen)"
        ),
        "{table}"
    );

    // A capture file keeps the clock source.
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).expect("written");
    let read = Capture::from_bytes(&bytes).expect("read back").remove(0);
    assert_eq!(read.decode().clock_source, Some(ClockSource::Monotonic));
}

/// Run by [`the_os_clock_chosen_by_the_environment`] in a child process with
/// `TICKSCOPE_CLOCK=os`; does nothing in a process without it.
#[test]
#[ignore = "run in a child process by the_os_clock_chosen_by_the_environment"]
fn child_with_the_environment() {
    if std::env::var(CLOCK_ENV).as_deref() != Ok("os") {
        return;
    }
    assert_eq!(clock::source(), ClockSource::Monotonic);
    record_and_check();
    assert_eq!(clock::use_os_clock(), Ok(()));
    println!("child checked the OS clock");
}

#[test]
fn the_os_clock_chosen_by_the_environment() {
    let exe = std::env::current_exe().expect("this test binary");
    let out = Command::new(exe)
        .args([
            "--exact",
            "child_with_the_environment",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CLOCK_ENV, "os")
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("child checked the OS clock"), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}
