//! Observers: exact entry and exit counts with what they carry, removal, sampling with a
//! fixed seed, global observers on other threads, and callbacks that open scopes or register
//! observers themselves.

use std::sync::{Arc, Mutex};

use tickscope::trace::Value;
use tickscope::{Observer, Phase, Profiler, scope};

type Log = Arc<Mutex<Vec<(Phase, &'static str, Option<u32>, Vec<(&'static str, Value)>)>>>;

/// An observer of the current thread that logs what it gets for scopes named `prefix*`.
fn logger(prefix: &'static str) -> (Log, Observer) {
    let log: Log = Arc::default();
    let sink = log.clone();
    let observer = Observer::new(move |s| {
        if s.name().starts_with(prefix) {
            let seq = s.link.map(|l| l.seq());
            sink.lock()
                .unwrap()
                .push((s.phase, s.name(), seq, s.args.to_vec()));
        }
    });
    (log, observer)
}

#[test]
fn every_kind_of_scope_is_observed_with_its_data() {
    let (log, observer) = logger("obs_");
    let handle = observer.current_thread();
    let prof = Profiler::builder().current_thread().start();
    let link;
    {
        let numbered = scope!("obs_seq", seq);
        link = numbered.link();
        let _plain = scope!("obs_plain");
        let _dynamic = scope!(name = String::from("obs_dynamic"));
        let _args = scope!("obs_args", n = 5u8, s = %"x");
    }
    {
        let _f = scope!("obs_follows", follows = link);
    }
    prof.stop();
    drop(handle);
    let log = log.lock().unwrap();
    let got: Vec<_> = log.iter().map(|(p, n, s, _)| (*p, *n, *s)).collect();
    let seq = Some(link.seq());
    use Phase::{Enter, Exit};
    assert_eq!(
        got,
        [
            (Enter, "obs_seq", seq),
            (Enter, "obs_plain", None),
            (Enter, "obs_dynamic", None),
            (Enter, "obs_args", None),
            (Exit, "obs_args", None),
            (Exit, "obs_dynamic", None),
            (Exit, "obs_plain", None),
            (Exit, "obs_seq", seq),
            (Enter, "obs_follows", seq),
            (Exit, "obs_follows", seq),
        ]
    );
    let args = &log.iter().find(|e| e.1 == "obs_args").unwrap().3;
    assert_eq!(args, &[("n", Value::U64(5)), ("s", Value::Str("x".into()))]);
    // Observing changes nothing in what the session recorded.
    assert_eq!(prof.report().get("obs_args").unwrap().calls, 1);
    assert_eq!(prof.trace().flows.len(), 1);
}

#[test]
fn observers_run_without_a_session_and_stop_when_dropped() {
    let (log, observer) = logger("drop_");
    let handle = observer.current_thread();
    let open = scope!("drop_open");
    {
        let _g = scope!("drop_before");
    }
    drop(handle);
    {
        let _g = scope!("drop_after");
    }
    drop(open); // its exit goes to no one: the observer is gone
    let got: Vec<_> = log.lock().unwrap().iter().map(|e| (e.0, e.1)).collect();
    assert_eq!(
        got,
        [
            (Phase::Enter, "drop_open"),
            (Phase::Enter, "drop_before"),
            (Phase::Exit, "drop_before"),
        ]
    );
}

fn sampled_entries(seed: u64) -> (usize, usize) {
    let (log, observer) = logger("sample_");
    let handle = observer.sample(0.25).seed(seed).current_thread();
    for _ in 0..10_000 {
        let _g = scope!("sample_me");
    }
    drop(handle);
    let log = log.lock().unwrap();
    let enters = log.iter().filter(|e| e.0 == Phase::Enter).count();
    (enters, log.len() - enters)
}

#[test]
fn sampling_follows_its_probability_and_seed() {
    let (enters, exits) = sampled_entries(42);
    // Binomial(10 000, 0.25): mean 2500, sd 43.3; five sd either side.
    assert!((2284..=2716).contains(&enters), "{enters}");
    // A sampled scope's exit goes to the observer too, and only those.
    assert_eq!(exits, enters);
    // The same seed draws the same.
    assert_eq!(sampled_entries(42), (enters, exits));
}

#[test]
fn a_global_observer_sees_other_threads() {
    let (log, observer) = logger("global_");
    let handle = observer.global();
    let threads: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..10 {
                    let _g = scope!("global_work");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(handle);
    {
        let _g = scope!("global_work");
    }
    assert_eq!(log.lock().unwrap().len(), 3 * 10 * 2);
}

#[test]
fn callbacks_may_open_scopes_and_register_observers() {
    let prof = Profiler::builder().current_thread().start();
    let calls = Arc::new(Mutex::new(0u32));
    let count = calls.clone();
    let handle = Observer::new(move |s| {
        if s.name() == "outer_work" && s.phase == Phase::Enter {
            *count.lock().unwrap() += 1;
            // Recorded, but not observed: no recursion.
            let _g = scope!("inside_callback");
            // Registering and dropping an observer from a callback does not deadlock.
            drop(Observer::new(|_| {}).current_thread());
            drop(Observer::new(|_| {}).global());
        }
    })
    .current_thread();
    for _ in 0..5 {
        let _g = scope!("outer_work");
    }
    drop(handle);
    prof.stop();
    assert_eq!(*calls.lock().unwrap(), 5);
    let report = prof.report();
    assert_eq!(report.get("outer_work").unwrap().calls, 5);
    assert_eq!(report.get("inside_callback").unwrap().calls, 5);
}

/// Registering an observer while other threads register and drop theirs: from the moment
/// `current_thread()` returns, every scope reaches it.
#[test]
fn an_observer_sees_every_scope_while_others_come_and_go() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let churn: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    drop(Observer::new(|_| {}).global());
                    drop(Observer::new(|_| {}).current_thread());
                }
            })
        })
        .collect();
    for _ in 0..300 {
        let seen = Arc::new(AtomicU64::new(0));
        let count = seen.clone();
        let handle = Observer::new(move |s| {
            if s.phase == Phase::Enter && s.name() == "churn_me" {
                count.fetch_add(1, Ordering::Relaxed);
            }
        })
        .current_thread();
        for _ in 0..20 {
            let _g = scope!("churn_me");
        }
        drop(handle);
        assert_eq!(seen.load(Ordering::Relaxed), 20);
    }
    stop.store(true, Ordering::Relaxed);
    for t in churn {
        t.join().unwrap();
    }
}

/// The tests whose observers panic read the process-wide count of caught panics, so they run
/// one at a time.
static PANICKING: Mutex<()> = Mutex::new(());

/// Issue 13, defect 10: a callback that panics on entry does not take the scope (or the
/// program) down; the panic is counted process-wide and by the session recording the thread,
/// and the observer gets no further calls while the others keep theirs.
#[test]
fn a_panicking_callback_is_caught_counted_and_deactivated() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let _serial = PANICKING.lock().unwrap_or_else(|e| e.into_inner());
    let before = Observer::panic_count();
    let prof = Profiler::builder().current_thread().start();
    let calls = Arc::new(AtomicU64::new(0));
    let count = calls.clone();
    let panicky = Observer::new(move |s| {
        if s.name() == "panic_work" {
            count.fetch_add(1, Ordering::Relaxed);
            if s.phase == Phase::Enter {
                panic!("observer failed on entry");
            }
        }
    })
    .current_thread();
    let (log, observer) = logger("panic_");
    let healthy = observer.current_thread();
    let mut ran = 0;
    for _ in 0..3 {
        let _g = scope!("panic_work");
        ran += 1;
    }
    prof.stop();
    drop((panicky, healthy));
    assert_eq!(ran, 3);
    // Its first call panicked; no further call, not even that scope's exit.
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(Observer::panic_count() - before, 1);
    // The other observer, after it in the same delivery, got every call.
    assert_eq!(log.lock().unwrap().len(), 3 * 2);
    let report = prof.report();
    assert_eq!(report.get("panic_work").unwrap().calls, 3);
    assert_eq!(report.observer_panics, 1);
    let table = prof.table().to_string();
    assert!(
        table.contains(" 0 dropped events, 1 observer panic\n"),
        "{table}"
    );
}

#[derive(Debug, PartialEq)]
struct Original(u32);

/// Issue 13, defect 10: a panic unwinding through a scope whose observer panics on its exit
/// reaches `join` with its own payload instead of aborting the process (this test's process).
#[test]
fn an_observer_panicking_during_unwinding_does_not_abort() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let _serial = PANICKING.lock().unwrap_or_else(|e| e.into_inner());
    let before = Observer::panic_count();
    let prof = Profiler::builder().current_thread().start();
    // Records only this thread, which no observer panics on.
    let bystander = Profiler::builder().current_thread().start();
    let exits = Arc::new(AtomicU64::new(0));
    let worker = {
        let (prof, exits) = (prof.clone(), exits.clone());
        std::thread::spawn(move || {
            prof.join_current_thread();
            let _observer = Observer::new(move |s| {
                if s.name() == "unwinding" && s.phase == Phase::Exit {
                    exits.fetch_add(1, Ordering::Relaxed);
                    panic!("observer failed on exit");
                }
            })
            .current_thread();
            let _g = scope!("unwinding");
            std::panic::panic_any(Original(7));
        })
    };
    let payload = worker.join().expect_err("the thread panicked");
    assert_eq!(payload.downcast_ref::<Original>(), Some(&Original(7)));
    assert_eq!(exits.load(Ordering::Relaxed), 1);
    assert_eq!(Observer::panic_count() - before, 1);
    bystander.stop();
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("unwinding").unwrap().calls, 1);
    assert_eq!(report.observer_panics, 1);
    assert!(
        prof.table().to_string().contains(", 1 observer panic\n"),
        "{}",
        prof.table()
    );
    assert_eq!(bystander.report().observer_panics, 0);
    assert!(!bystander.table().to_string().contains("observer panic"));
}
