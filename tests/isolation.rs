//! Ten tests that run in parallel in this process, each with its own current-thread session and
//! its own expected counts, while a noise thread records scopes the whole time. Each must see
//! exactly its own scopes.
#![cfg(feature = "enabled")]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use tickscope::{Profiler, scope};

/// Starts a thread that opens scopes until the process exits. It joins no session, so no test
/// may ever see its scopes.
fn start_noise() {
    static NOISE: OnceLock<()> = OnceLock::new();
    static STOP: AtomicBool = AtomicBool::new(false);
    NOISE.get_or_init(|| {
        std::thread::Builder::new()
            .name("noise".into())
            .spawn(|| {
                while !STOP.load(Ordering::Relaxed) {
                    let _g = scope!("noise");
                    let _h = scope!("item");
                }
            })
            .unwrap();
    });
}

fn work(item: u64) -> u64 {
    let _g = scope!("item");
    item.wrapping_mul(2654435761)
}

/// Opens `n` "batch" scopes, each with `n` "item" children, then checks the exact counts.
fn run(n: u64) {
    start_noise();
    let prof = Profiler::builder().current_thread().start();
    let mut acc = 0u64;
    for b in 0..n {
        let _g = scope!("batch");
        for i in 0..n {
            acc = acc.wrapping_add(work(b * n + i));
            std::thread::yield_now();
        }
    }
    std::hint::black_box(acc);
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("batch").unwrap().calls, n);
    assert_eq!(report.get("item").unwrap().calls, n * n);
    assert!(report.get("noise").is_none());
    assert_eq!(report.len(), 2);
    assert_eq!(report.threads, 1);
    let trace = prof.trace();
    let spans = &trace.threads[0].spans;
    assert_eq!(spans.len() as u64, n + n * n);
    assert!(
        spans
            .iter()
            .filter(|s| s.name() == "item")
            .all(|s| s.depth == 1)
    );
    assert_eq!(
        trace.threads[0].name.as_deref(),
        std::thread::current().name()
    );
}

macro_rules! isolated {
    ($($name:ident: $n:expr,)*) => {$(
        #[test]
        fn $name() {
            run($n);
        }
    )*};
}

isolated! {
    isolated_01: 1,
    isolated_02: 2,
    isolated_03: 3,
    isolated_05: 5,
    isolated_08: 8,
    isolated_13: 13,
    isolated_21: 21,
    isolated_34: 34,
    isolated_55: 55,
    isolated_89: 89,
}

/// The scopes of the threads in `trace` by thread name (unnamed threads as `-`), sorted.
fn threads_by_name(trace: &tickscope::trace::Trace) -> Vec<(String, usize)> {
    let mut threads: Vec<(String, usize)> = trace
        .threads
        .iter()
        .map(|t| (t.name.clone().unwrap_or_else(|| "-".into()), t.spans.len()))
        .collect();
    threads.sort();
    threads
}

#[test]
fn threads_spawned_by_the_code_under_test_join_its_session() {
    start_noise();
    let prof = Profiler::builder().current_thread().start();
    let test = scope!("test");
    let handles: Vec<_> = (0..3)
        .map(|i| {
            tickscope::thread::spawn(move || {
                for _ in 0..=i {
                    let _g = scope!("spawned");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    tickscope::thread::Builder::new()
        .name("named worker".into())
        .spawn(|| {
            let _g = scope!("named");
        })
        .unwrap()
        .join()
        .unwrap();
    tickscope::thread::scope(|s| {
        s.spawn(|| {
            let _g = scope!("scoped");
            // A scoped thread spawns one more: it joined the session, so its child does too.
            s.spawn(|| {
                let _g = scope!("nested");
            });
        });
        tickscope::thread::Builder::new()
            .name("scoped builder".into())
            .spawn_scoped(s, || {
                let _g = scope!("scoped");
            })
            .unwrap();
    });
    // A thread spawned through std joins nothing.
    std::thread::spawn(|| {
        let _g = scope!("unseen");
    })
    .join()
    .unwrap();
    drop(test);
    prof.stop();

    let report = prof.report();
    let calls = |name| report.get(name).map(|r| r.calls);
    assert_eq!(calls("spawned"), Some(6));
    assert_eq!(calls("named"), Some(1));
    assert_eq!(calls("scoped"), Some(2));
    assert_eq!(calls("nested"), Some(1));
    assert_eq!((calls("unseen"), calls("noise")), (None, None));
    assert_eq!(report.len(), 5);
    // This thread, three spawned, one named, two scoped, one nested.
    assert_eq!(report.threads, 8);
    let trace = prof.trace();
    let me = std::thread::current().name().unwrap().to_owned();
    let mut expected = vec![
        ("-".to_owned(), 1),
        ("-".to_owned(), 1),
        ("-".to_owned(), 1),
        ("-".to_owned(), 2),
        ("-".to_owned(), 3),
        ("named worker".to_owned(), 1),
        ("scoped builder".to_owned(), 1),
        (me, 1),
    ];
    expected.sort();
    assert_eq!(threads_by_name(&trace), expected);
    let table = prof.table().to_string();
    assert!(table.contains(" wall, 8 threads, 11 scopes, "), "{table}");
}

#[test]
fn spawned_threads_join_only_running_sessions() {
    start_noise();
    // No session: the threads are std's.
    let sessions = tickscope::thread::Sessions::current();
    assert!(sessions.is_empty());
    assert_eq!(tickscope::thread::spawn(|| 7).join().unwrap(), 7);

    // Two sessions on this thread, the inner one joined from an outer thread's point of view:
    // a spawned thread joins both.
    let outer = Profiler::builder().current_thread().start();
    let inner = Profiler::builder().current_thread().start();
    assert_eq!(tickscope::thread::Sessions::current().len(), 2);
    tickscope::thread::spawn(|| {
        let _g = scope!("both");
    })
    .join()
    .unwrap();
    inner.stop();
    assert_eq!(tickscope::thread::Sessions::current().len(), 1);
    tickscope::thread::spawn(|| {
        let _g = scope!("outer only");
    })
    .join()
    .unwrap();

    // Sessions are held weakly: one dropped before the thread starts is not kept alive.
    let dropped = Profiler::builder().current_thread().start();
    let held = tickscope::thread::Sessions::current();
    assert_eq!(held.len(), 2);
    drop(dropped);
    std::thread::spawn(move || {
        held.join();
        let _g = scope!("after drop");
    })
    .join()
    .unwrap();
    outer.stop();

    let (outer, inner) = (outer.report(), inner.report());
    assert_eq!(outer.get("both").unwrap().calls, 1);
    assert_eq!(outer.get("outer only").unwrap().calls, 1);
    assert_eq!(outer.get("after drop").unwrap().calls, 1);
    assert_eq!(outer.len(), 3);
    assert_eq!(inner.get("both").unwrap().calls, 1);
    assert_eq!(inner.len(), 1);
}

#[test]
fn pool_threads_join_through_their_start_hook() {
    start_noise();
    let prof = Profiler::builder().current_thread().start();
    let sessions = tickscope::thread::Sessions::current();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .start_handler(move |_| sessions.join())
        .build()
        .unwrap();
    let sum: u64 = pool.install(|| {
        use rayon::prelude::*;
        (0..100u64)
            .into_par_iter()
            .map(|i| {
                let _g = scope!("rayon item");
                i
            })
            .sum()
    });
    assert_eq!(sum, 4950);
    drop(pool);

    let sessions = tickscope::thread::Sessions::current();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || sessions.join())
        .build()
        .unwrap();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..10)
            .map(|_| {
                tokio::spawn(async {
                    let _g = scope!("tokio task");
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    drop(runtime);
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("rayon item").unwrap().calls, 100);
    assert_eq!(report.get("tokio task").unwrap().calls, 10);
    assert_eq!(report.len(), 2);
}
