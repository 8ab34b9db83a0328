//! A plug-in through many session windows: 1,000 start/stop/collect cycles keep the memory
//! flat (run under valgrind by `.ci/run` too), and two sessions on two threads, each with the
//! plug-in, never block each other. The plug-in is examples/plugins/c_sampler, built here
//! with the system `cc`.
#![cfg(all(feature = "enabled", feature = "plugins", target_os = "linux"))]

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use tickscope::{Profiler, scope};

use crate::common::cbuild;

use crate::common::serial;

fn c_sampler(name: &str) -> PathBuf {
    cbuild::shared_object(
        &cbuild::temp_dir("plugin-restart"),
        name,
        "examples/plugins/c_sampler/c_sampler.c",
        &["-O2", "-g", "-pthread"],
    )
}

/// Resident memory of this process in KiB (/proc/self/statm).
fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split(' ').nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    pages * page / 1024
}

/// True under valgrind (`.ci/run` sets `TICKSCOPE_VALGRIND`), whose own memory (a queue of
/// freed blocks held back, 20 MB by default) makes the process's RSS say nothing of ours: the
/// bounds are then left to its leak check.
fn under_valgrind() -> bool {
    std::env::var_os("TICKSCOPE_VALGRIND").is_some()
}

/// One window of `prof`: a scope, then stop (the plug-in stopped and collected) and the
/// counts checked exactly.
fn cycle(prof: &Profiler) {
    prof.restart();
    drop(scope!("cycle"));
    prof.stop();
    assert_eq!(prof.errors(), []);
    let report = prof.report();
    assert_eq!(report.get("cycle").unwrap().calls, 1);
    // At least the interval from the start's reading to the stop's.
    assert!(report.get("sample").unwrap().calls >= 1);
}

#[test]
fn a_thousand_cycles_keep_memory_flat() {
    let _serial = serial();
    let lib = c_sampler("sampler");
    let prof = Profiler::builder().current_thread().plugin(&lib).start();
    prof.stop();
    // Warm up: pools, caches, the plug-in's buffers at their size.
    for _ in 0..100 {
        cycle(&prof);
    }
    let before = rss_kib();
    for _ in 0..1000 {
        cycle(&prof);
    }
    let after = rss_kib();
    println!("RSS after 100 warm-up cycles: {before} KiB; after 1,000 more: {after} KiB");
    // Generous (4 MiB): catches a window's data, a thread's stack or a plug-in's buffers kept
    // per cycle; small leaks are valgrind's to find.
    assert!(
        under_valgrind() || after < before + 4096,
        "RSS grew from {before} KiB to {after} KiB"
    );
    // Loading and unloading, too: a fresh session (and plug-in instance) a time.
    for _ in 0..50 {
        let prof = Profiler::builder().current_thread().plugin(&lib).start();
        drop(scope!("cycle"));
        prof.stop();
        assert_eq!(prof.errors(), []);
    }
    let unloaded = rss_kib();
    println!("RSS after 50 loads and unloads: {unloaded} KiB");
    assert!(
        under_valgrind() || unloaded < before + 8192,
        "RSS grew from {before} KiB to {unloaded} KiB"
    );
}

#[test]
fn sessions_on_two_threads_with_the_plugin_do_not_block_each_other() {
    let _serial = serial();
    let lib = c_sampler("concurrent");
    let (done, finished) = mpsc::channel();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (lib, done) = (lib.clone(), done.clone());
            std::thread::spawn(move || {
                let prof = Profiler::builder().current_thread().plugin(&lib).start();
                prof.stop();
                for _ in 0..200 {
                    cycle(&prof);
                }
                done.send(()).unwrap();
            })
        })
        .collect();
    for _ in 0..2 {
        // A deadlock fails the test instead of hanging it (valgrind included: minutes).
        finished
            .recv_timeout(Duration::from_secs(600))
            .expect("the two sessions deadlocked");
    }
    for w in workers {
        w.join().unwrap();
    }
}
