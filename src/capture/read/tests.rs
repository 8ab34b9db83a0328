//! Reading in place or copied, bad records, clock checkpoints.

use super::errors::ReadError;
use super::open::parse_with;
use crate::capture::{Capture, Chunk};
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};

static STEP: Callsite = Callsite::new("step", "read.rs", 1, "tests");

/// One thread's records: two scopes, an allocation and its free.
fn records() -> Vec<RawEvent> {
    let id = STEP.id();
    let mut records = vec![RawEvent::begin(id, 10)];
    records.extend(RawEvent::memory(RawKind::Alloc, 64, 0x1000, 11));
    records.extend(RawEvent::memory(RawKind::Free, 64, 0x1000, 12));
    records.extend([
        RawEvent::end(RawEvent::end_key(id, 10), 20),
        RawEvent::begin(id, 30),
        RawEvent::end(RawEvent::end_key(id, 30), 40),
    ]);
    records
}

/// A capture file of [`records`] in event chunks of 16-byte records (version 4, the format
/// before 8-byte words), which are read in place.
fn file() -> Vec<u8> {
    let mut bytes = Vec::new();
    crate::capture::compress::as_records(|| {
        Capture::from_records(vec![(1, records())], 0, 100).write_to(&mut bytes)
    })
    .unwrap();
    bytes
}

/// A capture file of [`records`] in event chunks of 8-byte words (version 5, as recorded).
fn words_file() -> Vec<u8> {
    let mut bytes = Vec::new();
    crate::capture::compress::unpacked(|| {
        Capture::from_records(vec![(1, records())], 0, 100).write_to(&mut bytes)
    })
    .unwrap();
    bytes
}

/// Each chunk of a capture file: where it starts, its type, version and content length.
fn chunks(bytes: &[u8]) -> Vec<(usize, u16, u16, usize)> {
    let mut found = Vec::new();
    let mut pos = 0;
    while pos + 16 <= bytes.len() {
        let kind = u16::from_le_bytes([bytes[pos + 4], bytes[pos + 5]]);
        let version = u16::from_le_bytes([bytes[pos + 6], bytes[pos + 7]]);
        let len = u64::from_le_bytes(bytes[pos + 8..pos + 16].try_into().unwrap()) as usize;
        found.push((pos, kind, version, len));
        pos += 16 + len.next_multiple_of(16);
    }
    found
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
    crate::capture::compress::as_records(|| {
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

/// Event chunks of 8-byte words (version 5) read from memory and from a file give the
/// records written, and write back the same bytes.
#[test]
fn words_read_from_memory_or_a_file_are_the_records_written() {
    use crate::capture::format::EVENT_CHUNK;
    let bytes = words_file();
    let events: Vec<_> = chunks(&bytes)
        .into_iter()
        .filter(|c| c.1 == EVENT_CHUNK)
        .collect();
    // One word for each entry and exit (ticks below 2^30 from base 0), two for each of the
    // allocation, the free and their payloads: 12 words.
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].2, events[0].3), (5, 16 + 12 * 8));
    let path = std::env::temp_dir().join(format!("tickscope-words-{}.tscope", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let from_file = Capture::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    for capture in [read(bytes.clone(), true).unwrap(), from_file] {
        assert_eq!(capture.threads[0].chunks.len(), 1);
        assert_eq!(*capture.threads[0].chunks[0].records(), records()[..]);
        assert_eq!(capture.record_count(), 8);
        assert!(capture.tracks_memory());
        let mut again = Vec::new();
        crate::capture::compress::unpacked(|| capture.write_to(&mut again)).unwrap();
        assert_eq!(again, bytes);
    }
    let copied = read(bytes, false).unwrap();
    assert_eq!(copied.decode(), read(file(), true).unwrap().decode());
}

/// A bad word is an error that names where it is; a chunk of words cut short keeps its
/// whole records, and one cut inside a two-word record ends before it.
#[test]
fn bad_words_are_errors_and_cut_words_are_salvaged() {
    use crate::capture::format::EVENT_CHUNK;
    let bytes = words_file();
    let (pos, ..) = chunks(&bytes)
        .into_iter()
        .find(|c| c.1 == EVENT_CHUNK)
        .unwrap();
    let words = pos + 32;
    // Word 5 (the free's first) gets tag 3.
    let mut bad = bytes.clone();
    bad[words + 5 * 8] |= 3;
    let e = read(bad, true).unwrap_err();
    assert_eq!(e.offset(), Some((words + 5 * 8) as u64), "{e}");
    assert!(e.to_string().contains("word 5 has tag 3"), "{e}");
    // Cut after 11 of the 12 words: every record but the last exit is kept.
    let cut = read(bytes[..words + 11 * 8].to_vec(), true).unwrap();
    assert_eq!(cut.record_count(), 7);
    assert_eq!(*cut.threads[0].chunks[0].records(), records()[..7]);
    // Cut inside the allocation's payload (words 3 and 4): the entry and the allocation are
    // kept, not the payload whose second word is missing.
    let cut = read(bytes[..words + 4 * 8 + 3].to_vec(), true).unwrap();
    assert_eq!(*cut.threads[0].chunks[0].records(), records()[..2]);
}
