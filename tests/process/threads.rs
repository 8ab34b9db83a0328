//! 32 threads × 10 000 scopes under an all-threads session, half of them exiting before stop.
//!
//! The only test in this binary: an all-threads session would also see other tests' scopes.
#![cfg(feature = "enabled")]

use std::collections::HashSet;
use std::sync::{Arc, Barrier, mpsc};

use tickscope::{Profiler, scope};

use crate::common::serial;

const THREADS: usize = 32;
const SCOPES: usize = 10_000;

#[test]
fn threads_keep_events_ids_and_names() {
    let _serial = serial();
    let prof = Profiler::start();
    let recorded = Arc::new(Barrier::new(THREADS + 1));
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let recorded = recorded.clone();
            let release_rx = release_rx.clone();
            std::thread::Builder::new()
                .name(format!("w-{i}"))
                .spawn(move || {
                    for _ in 0..SCOPES {
                        let _g = scope!("work");
                    }
                    for _ in 0..i {
                        let _g = scope!("extra");
                    }
                    recorded.wait();
                    if i % 2 == 1 {
                        // Odd threads stay alive until after stop.
                        let _ = release_rx.lock().unwrap().recv();
                    }
                })
                .unwrap()
        })
        .collect();
    recorded.wait();
    let (even, odd): (Vec<_>, Vec<_>) = handles
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    for (_, h) in even {
        h.join().unwrap(); // these threads have exited before stop
    }
    prof.stop();
    for _ in &odd {
        release_tx.send(()).unwrap();
    }
    for (_, h) in odd {
        h.join().unwrap();
    }

    let trace = prof.trace();
    let workers: Vec<_> = trace
        .threads
        .iter()
        .filter(|t| t.name.as_deref().is_some_and(|n| n.starts_with("w-")))
        .collect();
    assert_eq!(workers.len(), THREADS);
    let ids: HashSet<u64> = workers.iter().map(|t| t.id).collect();
    assert_eq!(ids.len(), THREADS, "thread ids are distinct");
    let mut names: Vec<String> = workers.iter().map(|t| t.name.clone().unwrap()).collect();
    names.sort();
    let mut expected: Vec<String> = (0..THREADS).map(|i| format!("w-{i}")).collect();
    expected.sort();
    assert_eq!(names, expected);
    for t in &workers {
        let i: usize = t.name.as_ref().unwrap()[2..].parse().unwrap();
        let work = t.spans.iter().filter(|s| s.name() == "work").count();
        let extra = t.spans.iter().filter(|s| s.name() == "extra").count();
        assert_eq!((work, extra), (SCOPES, i), "thread w-{i}");
        assert!(t.spans.iter().all(|s| !s.open_at_stop && s.depth == 0));
    }
    let report = prof.report();
    assert_eq!(report.get("work").unwrap().calls, (THREADS * SCOPES) as u64);
    assert_eq!(
        report.get("extra").unwrap().calls,
        (0..THREADS).sum::<usize>() as u64
    );
    assert_eq!(report.dropped_events, 0);

    // New threads never take over an exited thread's identity.
    prof.restart();
    let late: Vec<_> = (0..4)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("late-{i}"))
                .spawn(|| {
                    for _ in 0..5 {
                        let _g = scope!("late");
                    }
                })
                .unwrap()
        })
        .collect();
    for h in late {
        h.join().unwrap();
    }
    prof.stop();
    let trace = prof.trace();
    let late: Vec<_> = trace
        .threads
        .iter()
        .filter(|t| t.spans.iter().any(|s| s.name() == "late"))
        .collect();
    assert_eq!(late.len(), 4);
    for t in late {
        assert!(!ids.contains(&t.id), "reused id {}", t.id);
        assert!(t.name.as_deref().unwrap().starts_with("late-"));
        assert_eq!(t.spans.len(), 5);
        assert!(t.spans.iter().all(|s| s.name() == "late"));
    }
    assert!(
        trace
            .threads
            .iter()
            .all(|t| !t.spans.iter().any(|s| s.name() == "work"))
    );
}
