//! Resident memory of a session that never stops, through a flight recorder: a binary of its
//! own, with the system allocator, so that nothing else of the process (other tests, a tracking
//! allocator's per-thread state) moves what it measures. Slow in a debug build: run it with
//! `cargo test --release --test resident -- --ignored` (`.ci/run` does).
#![cfg(all(feature = "enabled", target_os = "linux"))]

use tickscope::{Profiler, scope};

/// Resident memory while 100 million scopes go through a 16 MiB recorder: it grows by the
/// recorder's chunks and a little more, never with the scopes.
#[test]
#[ignore = "100 million scopes: run in release (see .ci/run)"]
fn flight_recorder_resident_memory_stays_within_the_bound() {
    const BOUND: u64 = 16 << 20;
    // The recorder's bookkeeping, the scanner's stack, and now and then a step of about
    // 3.9 MiB at one moment of the run (the recorder took fresh chunks once, or the allocator
    // mapped more): never a growth with the scopes, which 100 M of (3.2 GB of records) would be.
    const SLACK: u64 = 6 << 20;
    let before = resident();
    let prof = Profiler::builder()
        .current_thread()
        .flight_recorder(BOUND as usize)
        .start();
    let mut most = 0;
    for round in 0..100 {
        for _ in 0..1_000_000 {
            let _g = scope!("work");
        }
        let growth = resident().saturating_sub(before);
        most = most.max(growth);
        assert!(
            growth <= BOUND + SLACK,
            "after {} M scopes resident memory grew by {growth} bytes",
            round + 1
        );
    }
    let trace = prof.trace();
    // Every record is overwritten or in the window, and the window also keeps the entries of
    // the scopes cut at its start (whose records were overwritten): one when the window
    // starts at an exit (on the real clock a chunk holds 4095 records, the first taking two
    // words).
    let cut = trace
        .threads
        .iter()
        .flat_map(|t| &t.spans)
        .filter(|s| s.cut_at_start)
        .count() as u64;
    assert!(cut <= 1, "{cut} scopes cut at the window's start");
    assert_eq!(
        trace.overwritten_events + trace.event_count,
        200_000_000 + cut
    );
    prof.stop();
    println!(
        "100 M scopes through a 16 MiB flight recorder: resident memory grew by at most \
         {most} bytes ({:.2} MiB)",
        most as f64 / (1 << 20) as f64
    );
}

/// Resident bytes of this process (`/proc/self/statm`).
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
