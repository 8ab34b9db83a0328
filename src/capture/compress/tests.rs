//! Round trips, varints, damage (an error, never records) and long runs.

use super::codec::{get_varint, put_varint, unzigzag, zigzag};
use super::cursor::Step;
use super::errors::PackError;
use super::kept::{held_here, kept_bytes, set_budget_here};
use super::packer::{pack, pack_each};
use super::unpacker::{check, unpack, unpack_kept};
use super::{MAX_PACKED_RECORDS, WRITE_RECORDS};
use crate::record::event::{RawEvent, RawKind};
use crate::record::memory::MemoryMode;

fn round_trip(records: &[RawEvent]) -> Vec<u8> {
    let mut content = Vec::new();
    pack(7, 1, 4, records, &mut content).unwrap();
    let mut back = Vec::new();
    let prefix = unpack(&content, &mut back).unwrap();
    assert_eq!(back, records);
    let checked = check(&content).unwrap();
    let last = records.iter().rev().find(|r| !r.kind.carries_data());
    assert_eq!(checked.last_tick, last.map(|r| r.tick));
    let memory = records
        .iter()
        .map(|r| MemoryMode::of_kind(r.kind as u32))
        .max();
    assert_eq!(checked.memory, memory.unwrap_or(MemoryMode::Off));
    // Columns kept from the check (unless the budget was full) give the same records.
    if let Some(kept) = &checked.kept {
        let mut again = vec![RawEvent::begin(1, 1)];
        unpack_kept(kept, &mut again).unwrap();
        assert_eq!(again, records);
    }
    assert_eq!((prefix.thread, prefix.reserved, prefix.version), (7, 1, 4));
    assert_eq!(prefix.count, records.len());
    content
}

/// `depth`-deep nested scopes, `n` times, ticks `step` apart with a jitter.
fn nested(n: usize, depth: u32, step: u64) -> Vec<RawEvent> {
    let mut records = Vec::new();
    let mut tick = 1_000_000_000u64;
    let mut open = Vec::new();
    for i in 0..n {
        for d in 0..depth {
            tick += step + (i as u64 * 7 + u64::from(d)) % 5;
            records.push(RawEvent::new(RawKind::Begin, d + 1, tick));
            open.push((d + 1, tick));
        }
        while let Some((id, began)) = open.pop() {
            tick += step + (i as u64 * 3) % 4;
            records.push(RawEvent::new(
                RawKind::End,
                RawEvent::end_key(id, began),
                tick,
            ));
        }
    }
    records
}

/// A check keeps the chunk's columns while the budget has room, counts them while they are
/// kept, and gives them back when they are let go; with no budget, it keeps none.
#[test]
fn checked_columns_are_kept_within_the_budget() {
    let mut content = Vec::new();
    pack(7, 0, 4, &nested(100, 5, 30), &mut content).unwrap();
    // (This thread's budget: other tests' chunks are kept meanwhile, in the process's.)
    set_budget_here(Some(0));
    assert!(check(&content).unwrap().kept.is_none());
    assert_eq!(held_here(), 0);
    set_budget_here(Some(usize::MAX));
    let kept = check(&content).unwrap().kept.unwrap();
    assert_eq!(kept.prefix.count, 1000);
    let bytes = kept.bytes.len();
    assert!(bytes > 1000 && kept_bytes() >= bytes, "{bytes} bytes");
    assert_eq!(held_here(), bytes as isize);
    let mut records = Vec::new();
    unpack_kept(&kept, &mut records).unwrap();
    assert_eq!(records, nested(100, 5, 30));
    drop(kept);
    assert_eq!(held_here(), 0);
    set_budget_here(None);
}

/// The room a check takes for a chunk's columns comes back on every path: a chunk with any
/// byte damaged (most fail their check, some pass), cut at any length, or kept and let go.
#[test]
fn the_room_of_the_columns_comes_back_whatever_the_chunk() {
    let mut content = Vec::new();
    pack(1, 0, 4, &nested(100, 3, 50), &mut content).unwrap();
    set_budget_here(Some(usize::MAX));
    let (mut passed, mut failed) = (0, 0);
    for at in 0..content.len() {
        for flip in [0x55u8, 0x01, 0x80] {
            let mut damaged = content.clone();
            damaged[at] ^= flip;
            match check(&damaged) {
                Ok(checked) => {
                    passed += 1;
                    drop(checked);
                }
                Err(_) => failed += 1,
            }
            assert_eq!(held_here(), 0, "byte {at} ^ {flip:#x}");
        }
    }
    for len in 0..content.len() {
        assert!(check(&content[..len]).is_err(), "cut at {len}");
        assert_eq!(held_here(), 0, "cut at {len}");
    }
    set_budget_here(None);
    // The prefix's reserved fields pass when damaged; the frame's checksum fails.
    assert!(
        passed > 10 && failed > 100,
        "{passed} passed, {failed} failed"
    );
}

/// A walk of plain columns hands over what their records are ([`Cursor::next`]): entries of
/// known and unknown ids, exits of the innermost entry, of others and of nothing, ticks that
/// go back and wrap.
#[test]
fn walks_of_plain_columns_are_their_records() {
    set_budget_here(Some(usize::MAX));
    let mut walked = 0;
    for seed in 1..=400u64 {
        let mut next = crate::record::test_random(seed * 0x9e37_79b9);
        let (mut records, mut open) = (Vec::new(), Vec::<(u32, u64)>::new());
        let mut t = match seed % 5 {
            0 => u64::MAX - 3000,
            _ => next(1 << 40),
        };
        for _ in 0..1 + next(3000) {
            t = match next(10) {
                0 => t.wrapping_sub(next(100)),
                _ => t.wrapping_add(next(5)),
            };
            match next(12) {
                0 => records.push(RawEvent::end(next(0) as u32, t)),
                1 if !open.is_empty() => {
                    let (id, at) = open[next(open.len() as u64) as usize];
                    records.push(RawEvent::end(RawEvent::end_key(id, at), t));
                }
                2..=6 => {
                    let id = [1, 2, 40_000, u32::MAX][next(4) as usize];
                    records.push(RawEvent::begin(id, t));
                    open.push((id, t));
                }
                _ => match open.pop() {
                    Some((id, at)) => records.push(RawEvent::end(RawEvent::end_key(id, at), t)),
                    None => records.push(RawEvent::end(next(0) as u32, t)),
                },
            }
        }
        let mut content = Vec::new();
        pack(1, 0, 4, &records, &mut content).unwrap();
        let kept = check(&content).unwrap().kept.unwrap();
        let mut open = Vec::new();
        let mut cursor = kept.cursor(&mut open);
        if !cursor.plain() {
            continue;
        }
        walked += 1;
        let mut steps = Vec::new();
        (cursor.walk(|step| {
            steps.push(step);
            Ok::<(), ()>(())
        }))
        .unwrap();
        let made: Vec<Step> = (records.iter())
            .map(|r| match r.kind {
                RawKind::Begin => Step::Begin {
                    id: r.id,
                    tick: r.tick,
                    key: RawEvent::end_key(r.id, r.tick),
                },
                _ => Step::End {
                    key: r.id,
                    tick: r.tick,
                },
            })
            .collect();
        assert_eq!(steps, made, "seed {seed}");
    }
    set_budget_here(None);
    assert!(walked > 100, "{walked} plain chunks walked");
}

#[test]
fn nested_scopes_round_trip_small() {
    let records = nested(512, 4, 40);
    assert_eq!(records.len(), 4096);
    let content = round_trip(&records);
    // 4096 records of 16 bytes: well under a sixteenth.
    assert!(content.len() < 4096, "{} bytes", content.len());
}

#[test]
fn every_kind_and_odd_values_round_trip() {
    let mut records = Vec::new();
    for raw in 1..=255u32 {
        if let Some(kind) = RawKind::from_u32(raw) {
            records.push(RawEvent::new(kind, raw * 1000, u64::MAX - u64::from(raw)));
            records.push(RawEvent::new(kind, u32::MAX, 0));
        }
    }
    // An exit that closes nothing open, and one that closes an entry further down.
    records.push(RawEvent::new(RawKind::Begin, 5, 10));
    records.push(RawEvent::new(RawKind::Begin, 6, 20));
    records.push(RawEvent::new(RawKind::End, RawEvent::end_key(5, 10), 30));
    records.push(RawEvent::new(RawKind::End, RawEvent::end_key(6, 20), 40));
    records.push(RawEvent::new(RawKind::End, 12345, 5));
    round_trip(&records);
    round_trip(&[]);
}

#[test]
fn varints_and_zigzag_invert() {
    for v in [0, 1, 127, 128, 300, u64::MAX, u64::MAX / 2, 1 << 63] {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        let mut at = 0;
        assert_eq!(get_varint(&out, &mut at), Ok(v));
        assert_eq!(at, out.len());
        assert_eq!(unzigzag(zigzag(v)), v);
    }
    assert_eq!(zigzag(1), 2);
    assert_eq!(zigzag(u64::MAX), 1);
}

#[test]
fn damage_is_an_error_never_records() {
    let records = nested(100, 3, 50);
    let mut content = Vec::new();
    pack(1, 0, 4, &records, &mut content).unwrap();
    let mut out = Vec::new();
    // Every byte flipped in turn: an error, or (a byte the checksum does not cover, such
    // as the thread) the same number of records.
    for at in 0..content.len() {
        let mut bad = content.clone();
        bad[at] ^= 0x55;
        // Checking finds what unpacking finds.
        assert_eq!(check(&bad).is_ok(), unpack(&bad, &mut Vec::new()).is_ok());
        match unpack(&bad, &mut out) {
            Ok(prefix) => {
                // The thread, the reserved field and the version are the reader's to
                // check.
                let unchecked = at < 16 || (20..22).contains(&at) || (36..40).contains(&at);
                assert!(unchecked, "byte {at} changed and still unpacked");
                assert_eq!(out.len(), prefix.count);
            }
            Err(_) => assert!(out.is_empty()),
        }
    }
    // Cut short anywhere: an error.
    for len in 0..content.len() {
        assert!(unpack(&content[..len], &mut out).is_err(), "cut at {len}");
        assert!(out.is_empty());
    }
    // A prefix that says too much.
    let mut bad = content.clone();
    bad[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        unpack(&bad, &mut out),
        Err(PackError::TooLarge { .. })
    ));
    let mut bad = content;
    bad[22] = 9;
    assert_eq!(unpack(&bad, &mut out), Err(PackError::Codec(9)));
}

#[test]
fn large_runs_split() {
    let records = nested(MAX_PACKED_RECORDS / 4 + 10, 2, 30);
    let mut out = Vec::new();
    let mut back = Vec::new();
    let mut chunks = 0;
    pack_each::<std::io::Error>(3, 0, 4, &records, &mut out, |content| {
        let mut part = Vec::new();
        unpack(content, &mut part).unwrap();
        back.extend(part);
        chunks += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(chunks, records.len().div_ceil(WRITE_RECORDS));
    assert_eq!(back, records);
}
