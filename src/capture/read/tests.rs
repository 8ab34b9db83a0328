//! Reading in place or copied, bad records, clock checkpoints.

use super::errors::ReadError;
use super::open::parse_with;
use crate::capture::{Capture, Chunk};
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};

static STEP: Callsite = Callsite::new("step", "read.rs", 1, "tests");

/// A capture file of one thread: two scopes, an allocation and its free.
fn file() -> Vec<u8> {
    let id = STEP.id();
    let mut records = vec![RawEvent::begin(id, 10)];
    records.extend(RawEvent::memory(RawKind::Alloc, 64, 0x1000, 11));
    records.extend(RawEvent::memory(RawKind::Free, 64, 0x1000, 12));
    records.extend([
        RawEvent::end(RawEvent::end_key(id, 10), 20),
        RawEvent::begin(id, 30),
        RawEvent::end(RawEvent::end_key(id, 30), 40),
    ]);
    let mut bytes = Vec::new();
    // The format before packed chunks: records as recorded, read in place.
    crate::capture::compress::unpacked(|| {
        Capture::from_records(vec![(1, records)], 0, 100).write_to(&mut bytes)
    })
    .unwrap();
    bytes
}

fn read(bytes: Vec<u8>, in_place: bool) -> Result<Capture, ReadError> {
    parse_with(bytes, None, in_place, None).map(|mut sessions| sessions.remove(0))
}

/// Records read where they lie in the file and records copied out of it read the same,
/// decode the same and write the same bytes back.
#[test]
fn records_read_in_place_or_copied_are_the_same() {
    let bytes = file();
    let in_place = read(bytes.clone(), true).unwrap();
    let copied = read(bytes.clone(), false).unwrap();
    let chunk = |c: &Capture| match &c.threads[0].chunks[..] {
        [Chunk::File(_)] => "file",
        [Chunk::Owned(_)] => "owned",
        _ => "other",
    };
    let expected = if cfg!(target_endian = "little") {
        "file"
    } else {
        "owned"
    };
    assert_eq!(chunk(&in_place), expected);
    assert_eq!(chunk(&copied), "owned");
    assert_eq!(
        *in_place.threads[0].chunks[0].records(),
        *copied.threads[0].chunks[0].records()
    );
    assert_eq!(in_place.record_count(), 8);
    assert!(in_place.tracks_memory() && copied.tracks_memory());
    assert_eq!(in_place.decode(), copied.decode());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    crate::capture::compress::unpacked(|| {
        in_place.write_to(&mut a).unwrap();
        copied.write_to(&mut b).unwrap();
    });
    assert_eq!(a, b);
    assert_eq!(a, bytes);
}

/// A record of unknown kind is the same error either way, and a chunk cut short keeps
/// the same records.
#[test]
fn bad_records_read_the_same_in_place_or_copied() {
    let bytes = file();
    // The event chunk is the last before the footer (48 bytes with its header): its
    // records end 64 bytes before the end of the file. Record 5 of 8 gets kind 99.
    let records_end = bytes.len() - 64;
    let bad_at = records_end - 3 * 16;
    let mut bad = bytes.clone();
    bad[bad_at + 12..bad_at + 16].copy_from_slice(&99u32.to_le_bytes());
    for in_place in [true, false] {
        let e = read(bad.clone(), in_place).unwrap_err();
        assert_eq!(e.offset(), Some(bad_at as u64), "{e}");
        assert!(
            e.to_string().contains("record 5 of the events chunk"),
            "{e}"
        );
    }
    // Cut in the middle of the last record: seven whole records are kept, the footer is
    // lost.
    let cut = &bad[..records_end - 8];
    let mut fixed = cut.to_vec();
    fixed[bad_at + 12..bad_at + 16].copy_from_slice(&(RawKind::End as u32).to_le_bytes());
    for in_place in [true, false] {
        let capture = read(fixed.clone(), in_place).unwrap();
        assert_eq!(capture.record_count(), 7);
        let salvaged = read(cut.to_vec(), in_place).unwrap();
        assert_eq!(
            salvaged.record_count(),
            5,
            "up to the record of unknown kind"
        );
    }
}

/// Clock checkpoints go through a file as they were; a file that announces more than it
/// holds is refused with the counts named.
#[test]
fn clock_checkpoints_are_kept() {
    let mut capture = read(file(), true).unwrap();
    capture.clock.ns_per_tick = Some(0.5);
    capture.clock.checkpoints = vec![(20, 1_000), (60, 2_000)];
    let mut bytes = Vec::new();
    capture.write_to(&mut bytes).unwrap();
    let back = read(bytes.clone(), true).unwrap();
    assert_eq!(back.clock.checkpoints, [(20, 1_000), (60, 2_000)]);
    // The clock chunk follows the session header: its checkpoint count at byte 28 of
    // its content.
    let clock = bytes
        .windows(4)
        .position(|w| w == b"TSCP")
        .and_then(|first| {
            bytes[first + 4..]
                .windows(4)
                .position(|w| w == b"TSCP")
                .map(|at| first + 4 + at)
        })
        .unwrap();
    bytes[clock + 16 + 28] = 200;
    let error = read(bytes, true).unwrap_err().to_string();
    assert!(error.contains("200 checkpoint pairs"), "{error}");
}
