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
