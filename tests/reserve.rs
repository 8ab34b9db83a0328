//! Reserved memory (`ProfilerBuilder::reserve_memory`): chunks prepared before the session starts,
//! taken by its threads instead of fresh ones, and given back at stop.
//!
//! Counts are exact: in this process nothing else takes chunks, and a thread served from the
//! reservation never wakes the prefaulter. (The sessions do not compensate overhead: the
//! first session that does calibrates through real scopes, whose chunks would wake it.) Tests share the global counters, so they run one
//! at a time.
#![cfg(feature = "enabled")]

mod common;

use common::serial;
use tickscope::__private::{live_chunks, reserved_chunks};
use tickscope::{Profiler, scope};

/// Bytes of records in a chunk: 4096 words of 8 bytes.
const CHUNK: usize = 32 << 10;
/// Bytes of a chunk in memory: 16 of bookkeeping, the 16-byte header, the 16-byte event
/// prefix and the words (what `release_memory` counts).
const CHUNK_SIZE: usize = 48 + CHUNK;
/// Entries and exits that fill a chunk on the real clock: a word each, but the first, which
/// takes two (its tick is the chunk's base).
const RECORDS_PER_CHUNK: usize = 4095;

/// Scopes (two records each) that fill `chunks` chunks of one thread, and not one more.
fn scopes_filling(chunks: usize) -> usize {
    chunks * RECORDS_PER_CHUNK / 2
}

/// Records `scopes` scopes on a new thread that joins `prof`.
fn record_on_a_thread(prof: &Profiler, scopes: usize) {
    let prof = prof.clone();
    std::thread::spawn(move || {
        prof.join_current_thread();
        for _ in 0..scopes {
            let _g = scope!("reserved");
        }
    })
    .join()
    .unwrap();
}

#[test]
fn threads_take_reserved_chunks_and_the_rest_goes_back_at_stop() {
    let _serial = serial();
    tickscope::release_memory();
    let before = live_chunks();
    // 200 chunks of records; a size that is not a whole number of chunks rounds up.
    let prof = Profiler::builder()
        .current_thread()
        .compensate_overhead(false)
        .reserve_memory(199 * CHUNK + 1)
        .start();
    assert_eq!(reserved_chunks(), 200);
    let at_start = live_chunks();
    // The reservation: the few chunks every start prepares (recycled into it) and new ones.
    assert_eq!(at_start - before, 200);

    // 100 full chunks on a thread and a scope on this one: 101 chunks taken, all of them
    // reserved ones, and not one allocated.
    record_on_a_thread(&prof, scopes_filling(100));
    {
        let _g = scope!("one more");
    }
    assert_eq!(reserved_chunks(), 99);
    assert_eq!(live_chunks(), at_start);

    prof.stop();
    assert_eq!(reserved_chunks(), 0);
    let report = prof.report();
    assert_eq!(
        report.get("reserved").unwrap().calls,
        scopes_filling(100) as u64
    );
    assert_eq!(report.get("one more").unwrap().calls, 1);
    assert_eq!(prof.capture().chunk_count(), 101);
    // The 99 reserved chunks not taken wait in the pool (nothing freed yet, nothing new).
    assert_eq!(live_chunks(), at_start);

    // Once the session and its capture go, everything but this thread's current chunk is
    // recycled, and releasing the pool frees it.
    drop(report);
    drop(prof);
    let freed = tickscope::release_memory();
    assert_eq!(live_chunks(), before + 1);
    assert_eq!(freed, (at_start - before - 1) * CHUNK_SIZE);
}

#[test]
fn a_reservation_beyond_the_pool_bound_is_freed_at_stop() {
    let _serial = serial();
    tickscope::release_memory();
    let before = live_chunks();
    // 2200 chunks (69 MiB): more than the pool keeps (2048 chunks, 64 MiB).
    let prof = Profiler::builder()
        .current_thread()
        .compensate_overhead(false)
        .reserve_memory(2200 * CHUNK)
        .start();
    assert_eq!(reserved_chunks(), 2200);
    assert_eq!(live_chunks() - before, 2200);
    prof.stop();
    assert_eq!(reserved_chunks(), 0);
    // Nothing was recorded: the pool is full at 2048 chunks, the other 152 are freed.
    assert_eq!(live_chunks() - before, 2048);
    assert_eq!(tickscope::release_memory(), 2048 * CHUNK_SIZE);
    assert_eq!(live_chunks(), before);
}

#[test]
fn each_restart_reserves_again_and_overlapping_sessions_give_back_their_claims() {
    let _serial = serial();
    tickscope::release_memory();
    let a = Profiler::builder()
        .current_thread()
        .compensate_overhead(false)
        .reserve_memory(10 * CHUNK)
        .start();
    let b = Profiler::builder()
        .current_thread()
        .compensate_overhead(false)
        .reserve_memory(30 * CHUNK)
        .start();
    assert_eq!(reserved_chunks(), 40);
    // Both sessions' threads take from the one store.
    record_on_a_thread(&b, scopes_filling(5));
    assert_eq!(reserved_chunks(), 35);
    // The first to stop takes back its claim, the last what is left.
    a.stop();
    assert_eq!(reserved_chunks(), 25);
    b.stop();
    assert_eq!(reserved_chunks(), 0);
    b.restart();
    assert_eq!(reserved_chunks(), 30);
    // A session dropped while running gives its claim back too.
    drop(b);
    assert_eq!(reserved_chunks(), 0);
    assert_eq!(
        a.report().get("reserved"),
        None,
        "a recorded only its own thread"
    );
}

#[test]
fn streaming_sessions_reserve_nothing() {
    let _serial = serial();
    let dir = std::env::temp_dir().join(format!("tickscope-reserve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prof = Profiler::builder()
        .current_thread()
        .compensate_overhead(false)
        .stream_to(dir.join("run.tscope"))
        .reserve_memory(50 * CHUNK)
        .start();
    assert_eq!(reserved_chunks(), 0);
    prof.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_restarted_session_reserves_the_chunks_it_gave_back() {
    let _serial = serial();
    tickscope::release_memory();
    let before = live_chunks();
    let prof = Profiler::builder()
        .current_thread()
        .compensate_overhead(false)
        .reserve_memory(100 * CHUNK)
        .start();
    assert_eq!(live_chunks() - before, 100);
    record_on_a_thread(&prof, scopes_filling(10));
    assert_eq!(reserved_chunks(), 90);
    prof.stop();
    // The 90 reserved chunks not taken wait in the pool, warm...
    assert_eq!(live_chunks() - before, 100);
    // ...and the next window reserves them again, with the 10 its capture held (the restart
    // lets go of the stopped window): nothing new.
    prof.restart();
    assert_eq!(reserved_chunks(), 100);
    assert_eq!(live_chunks() - before, 100);
    prof.stop();
    drop(prof);
    // This thread recorded nothing, and the other one is gone: all of it is freed.
    tickscope::release_memory();
    assert_eq!(live_chunks(), before);
}
