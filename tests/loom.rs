//! Loom model of the per-thread buffer protocol: one writer filling chunks, a collector reading
//! and reclaiming concurrently.
//!
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom` (chunks hold 3 events under loom).
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use tickscope::buffer::{CHUNK_EVENTS, ChunkPtr, ThreadBuffer, Writer};
use tickscope::event::RawEvent;

/// Pushes events with ticks `1..=n`, switching chunks when one fills.
fn write(buffer: &ThreadBuffer, n: u64) {
    let writer = Writer::new();
    for tick in 1..=n {
        let event = RawEvent::begin(1, tick);
        if !writer.try_push(event) {
            writer.switch_to(buffer, ChunkPtr::alloc());
            assert!(writer.try_push(event));
        }
    }
}

fn ticks(buffer: &ThreadBuffer) -> Vec<u64> {
    let mut ticks = Vec::new();
    buffer.for_each(|e| ticks.push(e.tick));
    ticks
}

fn free_all(buffer: &ThreadBuffer) {
    let mut chunks = Vec::new();
    buffer.reclaim(None, |c| chunks.push(c));
    for c in chunks {
        // SAFETY: reclaimed chunks are unlinked and the writer has retired.
        unsafe { c.free() };
    }
}

#[test]
fn reader_sees_a_prefix_in_order() {
    assert_eq!(CHUNK_EVENTS, 3);
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = {
            let buffer = buffer.clone();
            thread::spawn(move || {
                write(&buffer, 4);
                buffer.retire();
            })
        };
        let seen = ticks(&buffer);
        assert!(seen.iter().copied().eq(1..=seen.len() as u64), "{seen:?}");
        writer.join().unwrap();
        assert_eq!(ticks(&buffer), [1, 2, 3, 4]);
        free_all(&buffer);
        assert!(buffer.is_drained());
    });
}

#[test]
fn reclaim_never_takes_the_live_chunk() {
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = {
            let buffer = buffer.clone();
            thread::spawn(move || write(&buffer, 5))
        };
        // Reclaim chunks whose events are all older than tick 4, while the writer writes.
        let mut reclaimed = Vec::new();
        buffer.reclaim(Some(4), |c| reclaimed.push(c));
        writer.join().unwrap();
        let left = ticks(&buffer);
        // Only the full first chunk (ticks 1..=3) may have gone; the rest is intact, in order.
        match reclaimed.len() {
            0 => assert_eq!(left, [1, 2, 3, 4, 5]),
            1 => assert_eq!(left, [4, 5]),
            n => panic!("reclaimed {n} chunks"),
        }
        for c in reclaimed {
            // SAFETY: unlinked under the mutex, never the writer's chunk.
            unsafe { c.free() };
        }
        buffer.retire();
        free_all(&buffer);
    });
}

/// Records written together (an allocation and its block) are seen together or not at all,
/// and reclamation goes by the lead record's tick, never by the block's address.
#[test]
fn records_pushed_together_are_seen_together() {
    use tickscope::event::RawKind;
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = {
            let buffer = buffer.clone();
            thread::spawn(move || {
                let writer = Writer::new();
                for tick in [1, 2] {
                    // The block's "tick" is an address, far above every real tick.
                    let pair = RawEvent::memory(RawKind::Alloc, 8, u64::MAX - tick, tick);
                    if !writer.try_push_all(&pair) {
                        writer.switch_to(&buffer, ChunkPtr::alloc());
                        assert!(writer.try_push_all(&pair));
                    }
                }
                buffer.retire();
            })
        };
        let mut kinds = Vec::new();
        buffer.for_each(|e| kinds.push(e.kind));
        assert!(kinds.len() % 2 == 0, "{kinds:?}");
        let mut reclaimed = Vec::new();
        buffer.reclaim(Some(2), |c| reclaimed.push(c));
        writer.join().unwrap();
        // Three slots per chunk: each pair takes a chunk of its own. Only the first (tick 1)
        // may go at horizon 2.
        let mut left = Vec::new();
        buffer.for_each(|e| left.push((e.kind, e.tick)));
        let second = [(RawKind::Alloc, 2), (RawKind::Wide, u64::MAX - 2)];
        match reclaimed.len() {
            0 => assert_eq!(left[2..], second),
            1 => assert_eq!(left, second),
            n => panic!("reclaimed {n} chunks"),
        }
        for c in reclaimed {
            // SAFETY: unlinked under the mutex, never the writer's chunk.
            unsafe { c.free() };
        }
        free_all(&buffer);
    });
}
