//! Round trips, varints, damage (an error, never records) and long runs.

use super::codec::{get_varint, put_varint, unzigzag, zigzag};
use super::errors::PackError;
use super::kept::{DEFAULT_BUDGET, kept_bytes, set_budget};
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
    set_budget(0);
    assert!(check(&content).unwrap().kept.is_none());
    // (Other tests' chunks may be kept meanwhile: room for all of them.)
    set_budget(usize::MAX);
    let kept = check(&content).unwrap().kept.unwrap();
    assert_eq!(kept.prefix.count, 1000);
    let bytes = kept.bytes.len();
    assert!(bytes > 1000 && kept_bytes() >= bytes, "{bytes} bytes");
    let mut records = Vec::new();
    unpack_kept(&kept, &mut records).unwrap();
    assert_eq!(records, nested(100, 5, 30));
    drop(kept);
    set_budget(DEFAULT_BUDGET);
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
