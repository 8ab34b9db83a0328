//! Memory that no session needs is recycled: start/stop cycles and threads nobody records leave
//! the number of live chunks (and resident memory) flat.
//!
//! Tests share global chunk counters, so they run one at a time.
#![cfg(feature = "enabled")]

use crate::common::serial;
use tickscope::__private::{live_chunks, registered_threads};
use tickscope::{Profiler, scope};

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn cycle(scopes: usize) {
    let prof = Profiler::start();
    for _ in 0..scopes {
        let _g = scope!("cycle");
    }
    std::thread::spawn(|| {
        let _g = scope!("short-lived thread");
    })
    .join()
    .unwrap();
    prof.stop();
    assert_eq!(prof.report().get("cycle").unwrap().calls, scopes as u64);
}

#[test]
fn thousand_cycles_leave_memory_flat() {
    let _serial = serial();
    // 20 000 events per cycle: 5 chunks.
    for _ in 0..20 {
        cycle(10_000);
    }
    let chunks = live_chunks();
    let threads = registered_threads();
    let rss = resident_bytes();
    for _ in 0..1_000 {
        cycle(10_000);
    }
    assert!(
        live_chunks() <= chunks,
        "chunks grew from {chunks} to {}",
        live_chunks()
    );
    assert!(
        registered_threads() <= threads,
        "threads grew from {threads} to {}",
        registered_threads()
    );
    if let (Some(before), Some(after)) = (rss, resident_bytes()) {
        let grown = after.saturating_sub(before);
        assert!(grown < 8 << 20, "resident memory grew by {grown} bytes");
    }
}

#[test]
fn unwanted_threads_do_not_grow() {
    let _serial = serial();
    let prof = Profiler::builder().current_thread().start();
    let chunks = live_chunks();
    std::thread::spawn(|| {
        for _ in 0..1_000_000 {
            let _g = scope!("nobody wants me");
        }
    })
    .join()
    .unwrap();
    assert_eq!(live_chunks(), chunks);
    prof.stop();
    assert!(prof.report().is_empty());
}

#[test]
fn long_session_then_stop_gives_memory_back() {
    let _serial = serial();
    let prof = Profiler::builder().current_thread().start();
    for _ in 0..1_000_000 {
        let _g = scope!("many");
    }
    // 2 M events = 489 chunks held while recording. (Counted absolutely: chunks the prefaulter
    // had ready before the session are among them, and how many it has made ready again by
    // now depends on how busy the machine is.)
    assert!(live_chunks() >= 480, "live chunks {}", live_chunks());
    prof.stop();
    assert_eq!(prof.report().get("many").unwrap().calls, 1_000_000);
    // The stopped session's capture holds the recorded chunks (nothing was copied)...
    assert!(live_chunks() >= 480, "live chunks {}", live_chunks());
    assert!(prof.capture().chunk_count() >= 480);
    // ...until the session goes: then everything but this thread's current chunk goes back
    // to the pool, warm for the next session, and releasing frees all of it.
    drop(prof);
    assert!(live_chunks() >= 480, "live chunks {}", live_chunks());
    let freed = tickscope::release_memory();
    assert!(freed >= 480 * 64 * 1024, "freed {freed} bytes");
    assert!(live_chunks() <= 2, "live chunks {}", live_chunks());
}
