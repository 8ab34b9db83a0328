//! The thread registry holds exited threads only while a session still needs their events.
//!
//! The tests count registered threads, which every thread of the process changes, so they run
//! in a binary of their own, one at a time, each on a thread of its own that has exited
//! (thread-local destructors included) before the next test starts.
#![cfg(feature = "enabled")]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use tickscope::__private::registered_threads;
use tickscope::{Observer, Phase, Profiler, scope};

/// Runs `test` on a fresh thread while no other test of this file runs, and waits until that
/// thread has exited.
fn serial(test: impl FnOnce() + Send + 'static) {
    let _serial = common::serial();
    std::thread::spawn(test).join().unwrap();
}

const THREADS: u64 = 2_000;

/// Spawns `n` threads one after another, each running one `short_lived` scope, and waits for
/// each to exit (its thread-local destructors included).
fn short_lived_threads(n: u64, join: Option<&Profiler>) {
    for _ in 0..n {
        let prof = join.cloned();
        std::thread::spawn(move || {
            if let Some(prof) = prof {
                prof.join_current_thread();
            }
            let _g = scope!("short_lived");
        })
        .join()
        .unwrap();
    }
}

/// Issue 13, defect 9: with only an observer registered (no session), threads register so
/// that observers get their ids; once they exit, nothing needs them.
#[test]
fn exited_threads_are_released_while_only_an_observer_is_registered() {
    serial(only_an_observer);
}

fn only_an_observer() {
    let entries = std::sync::Arc::new(AtomicU64::new(0));
    let seen = entries.clone();
    let handle = Observer::new(move |s| {
        if s.phase == Phase::Enter && s.name() == "short_lived" {
            assert_ne!(s.thread, 0);
            seen.fetch_add(1, Ordering::Relaxed);
        }
    })
    .global();
    let baseline = registered_threads();
    short_lived_threads(THREADS, None);
    assert_eq!(entries.load(Ordering::Relaxed), THREADS);
    assert_eq!(registered_threads(), baseline);
    drop(handle);
    assert_eq!(registered_threads(), baseline);
}

/// Exited threads whose events a running session needs stay until it stops; those it does not
/// record are released at once.
#[test]
fn exited_threads_stay_while_a_session_needs_their_events() {
    serial(a_session_of_joined_threads);
}

fn a_session_of_joined_threads() {
    // Registers this thread (a session of joined threads starts with its own thread).
    let prof = Profiler::builder().current_thread().start();
    let baseline = registered_threads();

    // Not members: their events are not wanted, so they go as they exit.
    short_lived_threads(100, None);
    assert_eq!(registered_threads(), baseline);

    // Members: their scopes are in the session's window until it stops.
    short_lived_threads(100, Some(&prof));
    assert_eq!(registered_threads(), baseline + 100);
    prof.stop();
    assert_eq!(prof.report().get("short_lived").unwrap().calls, 100);
    assert_eq!(prof.report().threads, 100);
    assert_eq!(registered_threads(), baseline);
}
