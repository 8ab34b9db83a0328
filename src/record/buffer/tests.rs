//! Unit tests of the thread buffers: writers, sharing, holding and retiring chunks.

use super::*;

fn ticks(shared: &[SharedChunk]) -> Vec<u64> {
    shared
        .iter()
        .flat_map(|c| c.records().into_iter().map(|e| e.tick))
        .collect()
}

/// A buffer takes one writer at a time, and the writer holds it while attached.
#[test]
fn a_buffer_takes_one_writer_at_a_time() {
    let buffer = Arc::new(ThreadBuffer::new());
    let (first, second) = (Writer::new(), Writer::new());
    let linked = first.switch_to(&buffer, ChunkBox::alloc(), 1).unwrap();
    assert_eq!(linked.index(), 0);
    assert_eq!(Arc::strong_count(&buffer), 2);
    assert!(first.try_push(RawEvent::begin(1, 10)));
    // Refused: the chunk comes back, nothing is linked, the second writer stays detached.
    assert!(second.switch_to(&buffer, ChunkBox::alloc(), 2).is_err());
    assert!(!second.try_push(RawEvent::begin(1, 11)));
    assert_eq!(buffer.chunks(), 1);
    assert_eq!(Arc::strong_count(&buffer), 2);
    // The attached writer links again into its own buffer without a second hold.
    let next = first.switch_to(&buffer, ChunkBox::alloc(), 1).unwrap();
    assert_eq!(next.index(), 1);
    assert_eq!(Arc::strong_count(&buffer), 2);
    first.detach();
    assert_eq!(Arc::strong_count(&buffer), 1);
    assert!(!first.try_push(RawEvent::begin(1, 12)));
    // Detached, the buffer takes the other writer.
    let third = second.switch_to(&buffer, ChunkBox::alloc(), 2).unwrap();
    assert_eq!(third.index(), 2);
    assert!(second.try_push(RawEvent::begin(1, 13)));
    second.detach();
    assert_eq!(ticks(&buffer.share(0)), [10, 13]);
    buffer.retire();
    buffer.reclaim(None, None, drop);
    assert!(buffer.is_drained());
}

/// A writer that attaches to another buffer lets go of the first one.
#[test]
fn switching_buffers_detaches_from_the_first() {
    let (a, b) = (Arc::new(ThreadBuffer::new()), Arc::new(ThreadBuffer::new()));
    let writer = Writer::new();
    writer.switch_to(&a, ChunkBox::alloc(), 1).unwrap();
    writer.switch_to(&b, ChunkBox::alloc(), 1).unwrap();
    assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (1, 2));
    // `a` is free for another writer.
    let other = Writer::new();
    assert!(other.switch_to(&a, ChunkBox::alloc(), 2).is_ok());
    other.detach();
    writer.detach();
    assert_eq!(Arc::strong_count(&b), 1);
}

/// Retired while its writer is still attached, a buffer keeps the tail the writer fills;
/// once detached, the tail goes too.
#[test]
fn an_attached_writers_tail_outlives_retirement() {
    let buffer = Arc::new(ThreadBuffer::new());
    let writer = Writer::new();
    let linked = writer.switch_to(&buffer, ChunkBox::alloc(), 1).unwrap();
    assert!(writer.try_push(RawEvent::begin(1, 10)));
    buffer.retire();
    let mut reclaimed = 0;
    buffer.reclaim(None, None, |_| reclaimed += 1);
    assert_eq!((reclaimed, buffer.chunks()), (0, 1));
    assert!(buffer.hold_complete(linked).is_none());
    assert_eq!(buffer.evict_through(0, |_| {}, drop).unwrap_err(), Busy);
    assert!(writer.try_push(RawEvent::begin(1, 11)));
    writer.detach();
    let held = buffer
        .hold_complete(linked)
        .expect("complete once detached");
    assert_eq!(ticks(std::slice::from_ref(&held)), [10, 11]);
    drop(held);
    buffer.reclaim(None, None, |_| reclaimed += 1);
    assert_eq!(reclaimed, 1);
    assert!(buffer.is_drained());
}

/// A chunk linked into one buffer is never held through another, even at an index the
/// other buffer has.
#[test]
fn a_chunk_is_held_only_through_its_own_buffer() {
    let (a, b) = (Arc::new(ThreadBuffer::new()), Arc::new(ThreadBuffer::new()));
    let (wa, wb) = (Writer::new(), Writer::new());
    let in_a = wa.switch_to(&a, ChunkBox::alloc(), 1).unwrap();
    let in_b = wb.switch_to(&b, ChunkBox::alloc(), 2).unwrap();
    assert!(wa.try_push(RawEvent::begin(1, 10)));
    assert!(wb.try_push(RawEvent::begin(1, 20)));
    wa.switch_to(&a, ChunkBox::alloc(), 1).unwrap();
    wb.switch_to(&b, ChunkBox::alloc(), 2).unwrap();
    assert_eq!((in_a.index(), in_b.index()), (0, 0));
    assert!(b.hold_complete(in_a).is_none());
    assert!(a.hold_complete(in_b).is_none());
    let held = a.hold_complete(in_a).expect("complete");
    assert_eq!(
        (held.thread(), ticks(std::slice::from_ref(&held))),
        (1, vec![10])
    );
    drop(held);
    for (buffer, writer) in [(&a, &wa), (&b, &wb)] {
        writer.detach();
        buffer.retire();
        buffer.reclaim(None, None, drop);
        assert!(buffer.is_drained());
    }
}
