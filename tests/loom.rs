//! Loom model of the per-thread buffer protocol: one writer filling chunks while a collector
//! takes captures (holds on chunks) and reclaims concurrently.
//!
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom` (chunks hold 3 words under loom:
//! three entries, or an entry and a two-word record).
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use tickscope::buffer::{CHUNK_WORDS, ChunkBox, LinkedChunk, SharedChunk, ThreadBuffer, Writer};
use tickscope::dry::{DrySpell, Returns};
use tickscope::event::{RawEvent, RawKind};

/// Pushes `groups` (records published together), switching chunks when one fills.
fn write_groups(buffer: &Arc<ThreadBuffer>, groups: &[&[RawEvent]]) {
    let writer = Writer::new();
    for group in groups {
        if !writer.try_push_all(group) {
            let linked = writer.switch_to(buffer, ChunkBox::alloc(), 7);
            assert!(linked.is_ok(), "the only writer");
            assert!(writer.try_push_all(group));
        }
    }
    writer.detach();
}

/// Pushes events with ticks `1..=n`.
fn write(buffer: &Arc<ThreadBuffer>, n: u64) {
    let events: Vec<RawEvent> = (1..=n).map(|tick| RawEvent::begin(1, tick)).collect();
    let groups: Vec<&[RawEvent]> = events.chunks(1).collect();
    write_groups(buffer, &groups);
}

/// Runs `body` on a new thread, the buffer's writer.
fn spawn_writer(
    buffer: &Arc<ThreadBuffer>,
    body: impl FnOnce(&Arc<ThreadBuffer>) + Send + 'static,
) -> thread::JoinHandle<()> {
    let buffer = buffer.clone();
    thread::spawn(move || body(&buffer))
}

fn ticks(shared: &[SharedChunk]) -> Vec<u64> {
    shared
        .iter()
        .flat_map(|c| c.records().into_iter().map(|e| e.tick))
        .collect()
}

#[test]
fn a_capture_sees_a_prefix_in_order() {
    assert_eq!(CHUNK_WORDS, 3);
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = spawn_writer(&buffer, |buffer| {
            write(buffer, 4);
            buffer.retire();
        });
        let seen = ticks(&buffer.share(0));
        assert!(seen.iter().copied().eq(1..=seen.len() as u64), "{seen:?}");
        writer.join().unwrap();
        let shared = buffer.share(0);
        assert_eq!(ticks(&shared), [1, 2, 3, 4]);
        assert!(shared.iter().all(|c| c.thread() == 7));
        drop(shared);
        buffer.reclaim(None, None, drop);
        assert!(buffer.is_drained());
    });
}

#[test]
fn reclaim_never_takes_the_live_chunk() {
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = spawn_writer(&buffer, |buffer| write(buffer, 5));
        // Reclaim chunks whose events are all older than tick 4, while the writer writes.
        let mut reclaimed = Vec::new();
        buffer.reclaim(Some(4), None, |c| reclaimed.push(c));
        writer.join().unwrap();
        let left = ticks(&buffer.share(0));
        // Only the full first chunk (ticks 1..=3) may have gone; the rest is intact, in order.
        match reclaimed.len() {
            0 => assert_eq!(left, [1, 2, 3, 4, 5]),
            1 => assert_eq!(left, [4, 5]),
            n => panic!("reclaimed {n} chunks"),
        }
        buffer.retire();
        buffer.reclaim(None, None, drop);
    });
}

/// A chunk that a capture holds is not handed back when it is unlinked: the capture's records
/// stay intact while the writer goes on, and the last holder gets the chunk.
#[test]
fn a_held_chunk_outlives_its_unlinking() {
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = spawn_writer(&buffer, |buffer| {
            write(buffer, 4);
            buffer.retire();
        });
        let held = buffer.share(0);
        let before = ticks(&held);
        let mut reclaimed = Vec::new();
        buffer.reclaim(Some(u64::MAX), None, |c| reclaimed.push(c));
        writer.join().unwrap();
        let mut after_reclaim = Vec::new();
        buffer.reclaim(None, None, |c| after_reclaim.push(c));
        assert!(buffer.is_drained());
        // Whatever was unlinked while held did not come back yet, and the records held read
        // the same.
        assert_eq!(ticks(&held), before);
        let handed_back = reclaimed.len() + after_reclaim.len();
        let mut released = 0;
        for chunk in held {
            released += usize::from(chunk.release().is_some());
        }
        // Every chunk comes back exactly once: two chunks in all (4 events, 3 per chunk).
        assert_eq!(handed_back + released, 2);
    });
}

/// Records written together (an entry and its payload) are seen together or not at all,
/// and reclamation goes by the lead record's tick, never by the payload's address.
#[test]
fn records_pushed_together_are_seen_together() {
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = spawn_writer(&buffer, |buffer| {
            // The payload's "tick" is an address, far above every real tick: one word for the
            // entry, two for the payload.
            let payload = |address| RawEvent::new(RawKind::Payload, 0, address);
            let first = [RawEvent::begin(1, 1), payload(u64::MAX - 1)];
            let second = [RawEvent::begin(1, 2), payload(u64::MAX - 2)];
            write_groups(buffer, &[&first, &second]);
            buffer.retire();
        });
        let kinds: Vec<RawKind> = buffer
            .share(0)
            .iter()
            .flat_map(|c| c.records().into_iter().map(|e| e.kind))
            .collect();
        assert!(kinds.len() % 2 == 0, "{kinds:?}");
        let mut reclaimed = Vec::new();
        buffer.reclaim(Some(2), None, |c| reclaimed.push(c));
        writer.join().unwrap();
        // Three words per chunk: each pair takes a chunk of its own. Only the first (tick 1)
        // may go at horizon 2.
        let left: Vec<(RawKind, u64)> = buffer
            .share(0)
            .iter()
            .flat_map(|c| c.records().into_iter().map(|e| (e.kind, e.tick)))
            .collect();
        let second = [(RawKind::Begin, 2), (RawKind::Payload, u64::MAX - 2)];
        match reclaimed.len() {
            0 => assert_eq!(left[2..], second),
            1 => assert_eq!(left, second),
            n => panic!("reclaimed {n} chunks"),
        }
        buffer.reclaim(None, None, drop);
    });
}

/// A streaming session's writer: it takes what it has not written yet (chunks by index, the
/// part of a chunk it has not written) while the thread records, gives back what it wrote,
/// and in the end has written every record exactly once, in order.
#[test]
fn a_stream_writes_every_record_once() {
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = spawn_writer(&buffer, |buffer| {
            write(buffer, 5);
            buffer.retire();
        });
        let mut written = Vec::new();
        // (index of the next chunk to write, records of it already written)
        let mut cursor = (0u64, 0usize);
        let mut pass = |tail: bool, written: &mut Vec<u64>| {
            for held in buffer.share_from(0, cursor.0, tail) {
                let from = if held.index == cursor.0 { cursor.1 } else { 0 };
                let records = held.chunk.records();
                written.extend(records[from..].iter().map(|e| e.tick));
                cursor = if held.complete {
                    (held.index + 1, 0)
                } else {
                    (held.index, records.len())
                };
            }
            buffer.reclaim(None, Some(cursor.0), drop);
        };
        pass(true, &mut written);
        writer.join().unwrap();
        pass(false, &mut written);
        pass(true, &mut written);
        assert_eq!(written, [1, 2, 3, 4, 5]);
        assert_eq!(cursor, (2, 0));
        assert_eq!(buffer.next_index(), (2, true));
        assert!(buffer.is_drained());
    });
}

/// A flight recorder recycling a thread's oldest chunk while the thread records: it unlinks
/// the chunk only once full (a tail still being filled is refused, `Busy`), reads exactly its
/// records, and the records left are the rest, in order: every record is either recycled or
/// kept, once.
#[test]
fn a_flight_recorder_recycles_only_full_chunks() {
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let writer = spawn_writer(&buffer, |buffer| {
            write(buffer, 4);
            buffer.retire();
        });
        let mut recycled = Vec::new();
        let mut spare = 0;
        let evicted = buffer.evict_through(
            0,
            |records| recycled.extend(records.iter().map(|e| e.tick)),
            |_| spare += 1,
        );
        writer.join().unwrap();
        let left = ticks(&buffer.share(0));
        match evicted {
            // Nothing linked yet, or the first chunk still being filled: nothing unlinked.
            Ok(None) | Err(_) => {
                assert!(recycled.is_empty(), "{recycled:?}");
                assert_eq!(left, [1, 2, 3, 4]);
            }
            // The first chunk, full: handed over, reusable.
            Ok(Some(chunk)) => {
                assert_eq!(recycled, [1, 2, 3]);
                assert_eq!(left, [4]);
                drop(chunk);
            }
        }
        assert_eq!(spare, 0);
        buffer.reclaim(None, None, drop);
        assert!(buffer.is_drained());
    });
}

/// A flight recorder's scanner holding a thread's chunk while the thread fills the next one:
/// it holds the chunk only once complete, and then all of it, never a prefix; a chunk
/// recycled while held goes to the scanner when it lets go, and once recycled it is not
/// held again.
#[test]
fn a_scanner_reads_only_complete_chunks() {
    loom::model(|| {
        let buffer = Arc::new(ThreadBuffer::new());
        let first = Arc::new(loom::sync::Mutex::new(None::<LinkedChunk>));
        let writer = {
            let first = first.clone();
            spawn_writer(&buffer, move |buffer| {
                let writer = Writer::new();
                for tick in 1..=4 {
                    let event = RawEvent::begin(1, tick);
                    if !writer.try_push(event) {
                        let linked = writer
                            .switch_to(buffer, ChunkBox::alloc(), 7)
                            .expect("the only writer");
                        first.lock().unwrap().get_or_insert(linked);
                        assert!(writer.try_push(event));
                    }
                }
                writer.detach();
            })
        };
        let read = |chunk: LinkedChunk| {
            let held = buffer.hold_complete(chunk)?;
            Some(
                held.records()
                    .into_iter()
                    .map(|e| e.tick)
                    .collect::<Vec<_>>(),
            )
        };
        let linked = *first.lock().unwrap();
        if let Some(chunk) = linked {
            assert_eq!(chunk.index(), 0);
            // Still filled (or just full): nothing, or every record.
            if let Some(ticks) = read(chunk) {
                assert_eq!(ticks, [1, 2, 3]);
            }
        }
        writer.join().unwrap();
        let chunk = first
            .lock()
            .unwrap()
            .expect("the writer linked its first chunk");
        // Complete now: the writer linked the next one. Recycled while held, it goes to the
        // holder that lets go last.
        let held = buffer.hold_complete(chunk).expect("complete");
        let recycled = buffer.evict_through(0, |_| {}, drop);
        assert!(matches!(recycled, Ok(None)));
        assert_eq!(read(chunk), None);
        assert_eq!(
            held.records()
                .into_iter()
                .map(|e| e.tick)
                .collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert!(held.release().is_some());
        buffer.retire();
        buffer.reclaim(None, None, drop);
        assert!(buffer.is_drained());
    });
}

/// A thread in a dry spell (a streaming pool refused it a chunk) never misses a chunk given
/// back: a writer puts one back in the pool and announces it while the thread looks, goes dry
/// and tries again. However they interleave, every attempt either takes the chunk or is
/// refused (counted once), the chunk is taken at most once, and once the writer is done the
/// thread's next attempt finds it (or found it already): no spell outlives a give-back.
#[test]
fn a_dry_spell_ends_when_a_chunk_comes_back() {
    loom::model(|| {
        let pool = Arc::new(loom::sync::Mutex::new(Vec::<u32>::new()));
        let returns = Arc::new(Returns::new());
        let writer = {
            let (pool, returns) = (pool.clone(), returns.clone());
            thread::spawn(move || {
                pool.lock().unwrap().push(7);
                returns.announce();
            })
        };
        let spell = DrySpell::new();
        // One attempt of the recording thread: `Some(chunk)` or refused.
        let attempt = || {
            if spell.holds(&returns) {
                return None;
            }
            let seen = returns.seen();
            match pool.lock().unwrap().pop() {
                Some(chunk) => {
                    spell.end();
                    Some(chunk)
                }
                None => {
                    spell.begin(seen);
                    None
                }
            }
        };
        let (mut taken, mut refused) = (0, 0);
        for _ in 0..2 {
            match attempt() {
                Some(chunk) => {
                    assert_eq!(chunk, 7);
                    taken += 1;
                }
                None => refused += 1,
            }
        }
        writer.join().unwrap();
        if taken == 0 {
            assert_eq!(attempt(), Some(7), "a spell outlived the give-back");
            taken += 1;
        } else {
            assert_eq!(attempt(), None);
            refused += 1;
        }
        assert_eq!((taken, taken + refused), (1, 3));
    });
}
