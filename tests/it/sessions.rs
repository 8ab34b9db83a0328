//! Session semantics: nesting, restarts, joining threads, panics, dynamic names.
//!
//! Every session here records only the current thread (and threads that join it), so these
//! tests run in parallel without seeing each other.
#![cfg(feature = "enabled")]

use std::panic::AssertUnwindSafe;

use tickscope::{Profiler, Threads, scope};

fn local() -> Profiler {
    Profiler::builder().current_thread().start()
}

#[test]
fn nested_sessions_cover_their_own_window() {
    let outer = local();
    let a = scope!("a");
    let inner = local();
    for _ in 0..2 {
        let _b = scope!("b");
    }
    inner.stop();
    {
        let _c = scope!("c");
    }
    drop(a);
    outer.stop();

    let inner = inner.report();
    assert_eq!(inner.len(), 1, "{inner:?}");
    assert_eq!(inner.get("b").unwrap().calls, 2);

    let outer = outer.report();
    assert_eq!(outer.get("a").unwrap().calls, 1);
    assert_eq!(outer.get("b").unwrap().calls, 2);
    assert_eq!(outer.get("c").unwrap().calls, 1);
    assert_eq!(outer.total_calls(), 4);
    // b and c are children of a in the outer window.
    let a = outer.get("a").unwrap();
    assert_eq!(
        a.self_ns,
        a.total_ns - outer.get("b").unwrap().total_ns - outer.get("c").unwrap().total_ns
    );
}

#[test]
fn current_is_the_innermost_running_session() {
    assert!(Profiler::current().is_none());
    let outer = local();
    let inner = local();
    let current = Profiler::current().unwrap();
    {
        let _g = scope!("seen by both");
    }
    inner.stop();
    // `current` is the inner session: stopped together with it.
    assert!(!current.is_running());
    assert_eq!(current.report().get("seen by both").unwrap().calls, 1);
    let now = Profiler::current().unwrap();
    assert!(now.is_running());
    outer.stop();
    assert!(!now.is_running());
    assert!(Profiler::current().is_none());
}

#[test]
fn each_stop_yields_its_own_data() {
    let prof = local();
    for round in 1..=5u64 {
        if round > 1 {
            prof.restart();
        }
        for _ in 0..round * 3 {
            let _g = scope!("round");
        }
        prof.stop();
        assert_eq!(prof.report().get("round").unwrap().calls, round * 3);
    }
    // Stopping twice is harmless and keeps the data.
    prof.stop();
    assert_eq!(prof.report().get("round").unwrap().calls, 15);
}

#[test]
fn thousand_start_stop_cycles_are_exact() {
    for i in 0..1_000u64 {
        let prof = local();
        for _ in 0..(i % 7) {
            let _g = scope!("cycle");
        }
        prof.stop();
        let report = prof.report();
        assert_eq!(
            report.get("cycle").map_or(0, |s| s.calls),
            i % 7,
            "cycle {i}"
        );
    }
}

#[test]
fn panic_unwinding_through_a_scope_closes_it() {
    let prof = local();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let _outer = scope!("will panic");
        let _inner = scope!("inside");
        panic!("boom");
    }));
    assert!(result.is_err());
    prof.stop();
    let report = prof.report();
    for name in ["will panic", "inside"] {
        let s = report.get(name).unwrap();
        assert_eq!((s.calls, s.open_at_stop), (1, 0), "{name}");
    }
    let trace = prof.trace();
    assert_eq!(trace.threads[0].spans[1].parent, Some(0));
}

#[test]
fn joined_threads_only() {
    let prof = local();
    let handle = prof.clone();
    std::thread::spawn(move || {
        handle.join_current_thread();
        for _ in 0..7 {
            let _g = scope!("joined");
        }
    })
    .join()
    .unwrap();
    std::thread::spawn(|| {
        for _ in 0..9 {
            let _g = scope!("not joined");
        }
    })
    .join()
    .unwrap();
    {
        let _g = scope!("starter");
    }
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("joined").unwrap().calls, 7);
    assert_eq!(report.get("starter").unwrap().calls, 1);
    assert!(report.get("not joined").is_none());
    assert_eq!(report.threads, 2);

    // Members stay members across a restart.
    prof.restart();
    {
        let _g = scope!("starter");
    }
    prof.stop();
    assert_eq!(prof.report().total_calls(), 1);
}

#[test]
fn dynamic_names_are_interned() {
    let prof = local();
    for i in 0..12 {
        let kind = ["png", "jpg", "gif"][i % 3];
        let _g = scope!(name = format!("decode {kind}"));
        let _s = scope!(name = kind);
    }
    prof.stop();
    let report = prof.report();
    for kind in ["png", "jpg", "gif"] {
        assert_eq!(report.get(&format!("decode {kind}")).unwrap().calls, 4);
        assert_eq!(report.get(kind).unwrap().calls, 4);
    }
    assert_eq!(report.len(), 6);
}

#[test]
fn dynamic_name_is_not_evaluated_while_off() {
    let evaluated = std::cell::Cell::new(0);
    let name = || {
        evaluated.set(evaluated.get() + 1);
        "x".to_owned()
    };
    {
        let _g = scope!(name = name());
    }
    assert_eq!(evaluated.get(), 0);
    let prof = local();
    {
        let _g = scope!(name = name());
    }
    prof.stop();
    assert_eq!(evaluated.get(), 1);
}

#[test]
fn dropping_a_running_session_stops_it() {
    let prof = local();
    let weak_view = prof.clone();
    drop(prof);
    assert!(weak_view.is_running(), "a clone keeps it alive");
    drop(weak_view);
    assert!(Profiler::current().is_none());
    let guard = scope!("after");
    assert!(!guard.is_recording());
}

#[test]
fn guards_record_only_while_wanted() {
    let g = scope!("off");
    assert!(!g.is_recording());
    let prof = local();
    let on = scope!("on");
    assert!(on.is_recording());
    drop(on);
    prof.stop();
    assert!(!scope!("off again").is_recording());
    assert_eq!(prof.report().len(), 1);
}

#[test]
fn builder_threads_option() {
    let prof = Profiler::builder().threads(Threads::Joined).start();
    std::thread::spawn(|| {
        let _g = scope!("other thread");
    })
    .join()
    .unwrap();
    prof.stop();
    assert!(prof.report().is_empty());
}

#[test]
fn snapshots_while_threads_write_see_growing_prefixes() {
    const WRITERS: usize = 4;
    const SCOPES: u64 = 50_000;
    let prof = local();
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let prof = prof.clone();
            std::thread::spawn(move || {
                prof.join_current_thread();
                for _ in 0..SCOPES {
                    let _g = scope!("stress");
                }
            })
        })
        .collect();
    let mut last = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        let report = prof.report();
        let seen = report.get("stress").map_or(0, |s| s.calls);
        assert!(seen >= last, "snapshot went back from {last} to {seen}");
        assert!(seen <= WRITERS as u64 * SCOPES);
        last = seen;
    }
    for w in writers {
        w.join().unwrap();
    }
    prof.stop();
    let report = prof.report();
    let stress = report.get("stress").unwrap();
    assert_eq!(
        (stress.calls, stress.open_at_stop),
        (WRITERS as u64 * SCOPES, 0)
    );
    assert_eq!(report.threads, WRITERS);
}
