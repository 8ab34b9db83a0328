//! Unit tests of the flight recorder's scan of a chunk's scopes.

use super::*;
use crate::record::event::{RawEvent, RawKind};

#[test]
fn scan_keeps_what_is_open_at_the_end() {
    let mut open = Vec::new();
    let a = RawEvent::begin(1, 10);
    let b = RawEvent::begin(2, 11);
    let c = RawEvent::begin(3, 12);
    scan(
        &mut open,
        &[
            a,
            b,
            c,
            RawEvent::end(RawEvent::end_key(3, 12), 13),
            RawEvent::new(RawKind::PollBegin, 4, 14),
            RawEvent::new(RawKind::Payload, 9, 0),
        ],
    );
    let names: Vec<(u32, u64, bool)> = open.iter().map(|s| (s.id, s.tick, s.poll)).collect();
    assert_eq!(names, [(1, 10, false), (2, 11, false), (4, 14, true)]);
    // Exits in the next chunk close them, out of order too; an unknown exit closes none.
    scan(
        &mut open,
        &[
            RawEvent::end(RawEvent::end_key(2, 11), 15),
            RawEvent::end(RawEvent::end_key(7, 1), 16),
        ],
    );
    let names: Vec<u32> = open.iter().map(|s| s.id).collect();
    assert_eq!(names, [1, 4]);
    assert_eq!(open[1].record(), RawEvent::new(RawKind::PollBegin, 4, 14));
}

/// [`scan`] without its shortcut for leaf scopes: every entry pushed, every exit popped.
fn scan_naive(open: &mut Vec<CutScope>, records: &[RawEvent]) {
    for record in records {
        match record.kind {
            RawKind::End => {
                if let Some(at) = open.iter().rposition(|s| s.key == record.id) {
                    open.remove(at);
                }
            }
            RawKind::Begin | RawKind::BeginFollows | RawKind::SpanEnter => {
                open.push(CutScope::entered(record, false));
            }
            RawKind::PollBegin => open.push(CutScope::entered(record, true)),
            _ => {}
        }
    }
}

#[test]
fn scan_skips_leaves_exactly() {
    // A leaf; an entry followed by another scope's exit (out of order); an exit whose
    // entry is in the next chunk's records, and one whose entry came before.
    let a = RawEvent::begin(1, 10);
    let b = RawEvent::begin(2, 11);
    let records = [
        RawEvent::begin(5, 1),
        RawEvent::end(RawEvent::end_key(5, 1), 2),
        a,
        b,
        RawEvent::end(RawEvent::end_key(1, 10), 12),
        RawEvent::begin(3, 13),
    ];
    let mut open = Vec::new();
    scan(&mut open, &records);
    let ids: Vec<u32> = open.iter().map(|s| s.id).collect();
    assert_eq!(ids, [2, 3]);
    scan(&mut open, &[RawEvent::end(RawEvent::end_key(3, 13), 14)]);
    let ids: Vec<u32> = open.iter().map(|s| s.id).collect();
    assert_eq!(ids, [2]);

    // Pseudo-random nesting, out-of-order exits and payloads, cut into chunks anywhere:
    // the same stacks as the naive scan.
    let mut random = crate::record::test_random(0x2545_f491_4f6c_dd1d);
    let mut next = || random(0);
    let (mut records, mut live) = (Vec::new(), Vec::<(u32, u64)>::new());
    for tick in 0..5000u64 {
        let r = next();
        match r % 7 {
            0..=2 => {
                let id = (r >> 8) as u32 % 5 + 1;
                let kind = match r % 3 {
                    0 => RawKind::PollBegin,
                    1 => RawKind::BeginFollows,
                    _ => RawKind::Begin,
                };
                records.push(RawEvent::new(kind, id, tick));
                live.push((id, tick));
            }
            3..=5 if !live.is_empty() => {
                // Mostly the innermost, sometimes another one.
                let at = if r % 5 == 0 {
                    (r >> 16) as usize % live.len()
                } else {
                    live.len() - 1
                };
                let (id, entered) = live.remove(at);
                records.push(RawEvent::end(RawEvent::end_key(id, entered), tick));
            }
            _ => records.push(RawEvent::new(RawKind::Payload, 9, tick)),
        }
    }
    let (mut fast, mut naive) = (Vec::new(), Vec::new());
    let mut rest = &records[..];
    while !rest.is_empty() {
        let cut = (next() as usize % 97 + 1).min(rest.len());
        let (chunk, tail) = rest.split_at(cut);
        scan(&mut fast, chunk);
        scan_naive(&mut naive, chunk);
        assert_eq!(fast, naive);
        rest = tail;
    }
    assert!(!fast.is_empty());
}
