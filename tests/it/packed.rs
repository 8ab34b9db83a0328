//! Packed event chunks (docs/FORMAT.md, type 9): what the writers write, how small it is, how
//! it reads back every way, and what a damaged or cut chunk gives; and the committed captures
//! of the format before them, which still read.
#![cfg(all(feature = "enabled", feature = "compress"))]

use tickscope::__private::format::{
    CHUNK_HEADER, EVENT_CHUNK, EVENTS_PACKED, SESSION_FOOTER, padded,
};
use tickscope::__private::{RawEvent, RawKind, capture_from_records, unpacked};
use tickscope::export::chrome;
use tickscope::report::Report;
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, scope};

use crate::common::scratch_path as scratch;

/// The chunks of capture file `bytes`: `(offset, type, content length)`, up to the first that
/// runs past the end.
pub(crate) fn chunks(bytes: &[u8]) -> Vec<(usize, u16, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(head) = bytes.get(at..at + CHUNK_HEADER) {
        let kind = u16::from_le_bytes([head[4], head[5]]);
        let len = u64::from_le_bytes(head[8..16].try_into().unwrap()) as usize;
        if at + CHUNK_HEADER + len > bytes.len() {
            break;
        }
        out.push((at, kind, len));
        at += CHUNK_HEADER + padded(len as u64) as usize;
    }
    out
}

fn chrome_json(trace: &Trace) -> String {
    let mut out = Vec::new();
    chrome::write(trace, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// A pseudo-random sequence, the same every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `requests` requests of a small server (`benches/common`'s `serve`: ten scopes three deep,
/// one of two branches by request) on one thread, with ticks that advance 20 to 51 apart (a
/// 3 GHz counter, about 10 ns between records, jittered): what a program of nested scopes at
/// steady rates records, the same every run.
fn server_records(requests: u64) -> Vec<RawEvent> {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut tick = 1_000_000_000u64;
    let mut records = Vec::new();
    let mut open = Vec::new();
    let mut step = |records: &mut Vec<RawEvent>, open: &mut Vec<(u32, u64)>, id: Option<u32>| {
        tick += 20 + rng.next() % 32;
        match id {
            Some(id) => {
                records.push(RawEvent::begin(id, tick));
                open.push((id, tick));
            }
            None => {
                let (id, began) = open.pop().unwrap();
                records.push(RawEvent::end(RawEvent::end_key(id, began), tick));
            }
        }
    };
    for i in 0..requests {
        step(&mut records, &mut open, Some(1));
        for (id, children) in [
            (2, &[][..]),
            (3, &[4, if i % 4 == 0 { 4 } else { 5 }]),
            (6, &[7, 8, 9]),
            (10, &[]),
        ] {
            step(&mut records, &mut open, Some(id));
            for &child in children {
                step(&mut records, &mut open, Some(child));
                step(&mut records, &mut open, None);
            }
            step(&mut records, &mut open, None);
        }
        step(&mut records, &mut open, None);
    }
    records
}

/// Bytes of `capture`'s packed event chunks (headers included) and of the whole file.
fn sizes(capture: &Capture) -> (usize, usize) {
    let mut bytes = Vec::new();
    capture.write_to(&mut bytes).unwrap();
    let packed = chunks(&bytes)
        .iter()
        .filter(|c| c.1 == EVENTS_PACKED)
        .map(|c| CHUNK_HEADER + padded(c.2 as u64) as usize)
        .sum();
    (packed, bytes.len())
}

#[test]
fn a_nested_program_packs_to_a_byte_an_event() {
    // 100,000 requests: a million scopes, two million records.
    let records = server_records(100_000);
    assert_eq!(records.len(), 2_000_000);
    let capture = capture_from_records(vec![(1, records)], 0, u64::MAX);
    let (packed, file) = sizes(&capture);
    let per_event = file as f64 / 2e6;
    println!(
        "{file} bytes ({packed} of packed chunks) for 2,000,000 events: {per_event:.3} \
         bytes/event"
    );
    assert!(per_event <= 1.0, "{per_event} bytes an event");
    // Unpacked, the same records take 8 bytes each as recorded (entries and exits, one word
    // each), 16 as 16-byte records (event chunk version 4).
    let words = unpacked(|| sizes(&capture).1);
    assert!(words > 2_000_000 * 8, "{words}");
    assert!(words >= 8 * file, "{words} bytes unpacked, {file} packed");
    let plain = tickscope::__private::as_records(|| sizes(&capture).1);
    assert!(plain > 2_000_000 * 16, "{plain}");
    assert!(plain >= 16 * file, "{plain} bytes unpacked, {file} packed");
}

#[test]
fn a_live_capture_is_packed_and_reads_back_every_way() {
    let prof = Profiler::builder().current_thread().start();
    for i in 0..10_000u64 {
        let _outer = scope!("outer", i = i);
        let _inner = scope!("inner");
    }
    prof.stop();
    let live = prof.trace();
    let path = scratch("packed_live.tscope");
    prof.write_capture(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let kinds: Vec<u16> = chunks(&bytes).iter().map(|c| c.1).collect();
    // 50,000 records (two scopes and an argument a step), 60,000 words and one more at the
    // start of each chunk (an entry or exit takes one, an argument two), in 4096-word chunks:
    // fifteen packed chunks, no event chunk.
    assert_eq!(kinds.iter().filter(|&&k| k == EVENTS_PACKED).count(), 15);
    assert!(!kinds.contains(&EVENT_CHUNK));
    assert_eq!(kinds.last(), Some(&SESSION_FOOTER));

    let from_path = Capture::read(&path).unwrap();
    let from_bytes = Capture::from_bytes(&bytes).unwrap().remove(0);
    let index = Capture::read_index(&path).unwrap().remove(0);
    for capture in [&from_path, &from_bytes, &index] {
        assert!(capture.warnings().is_empty(), "{:?}", capture.warnings());
        assert_eq!(capture.record_count(), 50_000);
    }
    let json = chrome_json(&live);
    assert_eq!(chrome_json(&from_path.decode()), json);
    assert_eq!(chrome_json(&from_bytes.decode()), json);
    assert_eq!(chrome_json(&index.decode()), json);
    assert_eq!(
        Report::new(&from_path.decode()).get("inner").unwrap().calls,
        10_000
    );

    // Written again, packed or not, it reads back the same.
    for pack in [true, false] {
        let mut again = Vec::new();
        if pack {
            from_path.write_to(&mut again).unwrap();
        } else {
            unpacked(|| from_path.write_to(&mut again)).unwrap();
        }
        let kind = if pack { EVENTS_PACKED } else { EVENT_CHUNK };
        assert!(chunks(&again).iter().any(|c| c.1 == kind));
        let back = Capture::from_bytes(&again).unwrap().remove(0);
        assert_eq!(chrome_json(&back.decode()), json);
    }
    let _ = std::fs::remove_file(&path);
}

/// A capture of five threads of 4080 records each (a packed chunk each), and where its
/// packed chunks lie.
fn five_chunks() -> (Vec<u8>, Vec<(usize, u16, usize)>) {
    let threads = (1..=5).map(|t| (t, server_records(204))).collect();
    let capture = capture_from_records(threads, 0, u64::MAX);
    assert_eq!(capture.record_count(), 5 * 4080);
    let mut bytes = Vec::new();
    capture.write_to(&mut bytes).unwrap();
    let packed: Vec<_> = chunks(&bytes)
        .into_iter()
        .filter(|c| c.1 == EVENTS_PACKED)
        .collect();
    (bytes, packed)
}

#[test]
fn a_damaged_packed_chunk_is_an_error_at_its_offset() {
    let records = server_records(50);
    let capture = capture_from_records(vec![(1, records)], 0, u64::MAX);
    let mut bytes = Vec::new();
    capture.write_to(&mut bytes).unwrap();
    let [(at, _, len)] = chunks(&bytes)[..]
        .iter()
        .copied()
        .filter(|c| c.1 == EVENTS_PACKED)
        .collect::<Vec<_>>()[..]
    else {
        panic!("one packed chunk");
    };
    let path = scratch("packed_damaged.tscope");
    let json = chrome_json(&capture.decode());
    let (mut errors, mut flips) = (0, 0);
    // Every byte of the frame and of the prefix's counts, flipped in turn: an error at the
    // chunk, from bytes and from the file, never records.
    // (The version, bytes 20 and 21, is the reader's to judge: a newer one is skipped; bytes
    // 36 to 39 are reserved.)
    for offset in (16..20).chain(22..36).chain(40..len) {
        let mut bad = bytes.clone();
        bad[at + CHUNK_HEADER + offset] ^= 0x20;
        std::fs::write(&path, &bad).unwrap();
        for read in [Capture::from_bytes(&bad), Capture::read_all(&path)] {
            match read {
                Err(e) => {
                    assert_eq!(e.offset(), Some(at as u64), "{e}");
                    assert!(e.to_string().contains("packed events chunk"), "{e}");
                    errors += 1;
                }
                // A bit zstd does not need (its frame header has a few): the same records,
                // which its checksum vouches for.
                Ok(back) => assert_eq!(chrome_json(&back[0].decode()), json, "byte {offset}"),
            }
        }
        flips += 2;
    }
    assert!(errors + 8 >= flips, "{errors} errors of {flips} flips");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_packed_chunk_cut_short_is_lost_and_the_chunks_before_kept() {
    let (bytes, packed) = five_chunks();
    assert_eq!(packed.len(), 5);
    let (third, _, len) = packed[2];
    // Cut anywhere in the third packed chunk: its 4080 records are lost, the two before kept.
    for cut in [
        third + 1,
        third + CHUNK_HEADER + 40,
        third + CHUNK_HEADER + len - 1,
    ] {
        let capture = Capture::from_bytes(&bytes[..cut]).unwrap().remove(0);
        assert_eq!(capture.record_count(), 2 * 4080, "cut at {cut}");
        assert!(
            capture.warnings().iter().any(|w| w.contains("cut short")),
            "{:?}",
            capture.warnings()
        );
    }
    // Cut right after it: three chunks.
    let next = third + CHUNK_HEADER + padded(len as u64) as usize;
    let capture = Capture::from_bytes(&bytes[..next]).unwrap().remove(0);
    assert_eq!(capture.record_count(), 3 * 4080);
}

#[test]
fn a_packed_chunk_that_says_too_many_records_is_an_error() {
    // 200 records: a chunk of a few hundred bytes.
    let capture = capture_from_records(vec![(1, server_records(10))], 0, u64::MAX);
    let mut bytes = Vec::new();
    capture.write_to(&mut bytes).unwrap();
    let (at, _, len) = *chunks(&bytes)
        .iter()
        .find(|c| c.1 == EVENTS_PACKED)
        .unwrap();
    assert!(len < 512, "{len}");
    // 65,537: more than a packed chunk holds; 128 a byte of the chunk and one: a bomb.
    for count in [65_537, 128 * len as u32 + 1] {
        let mut bad = bytes.clone();
        bad[at + CHUNK_HEADER + 16..at + CHUNK_HEADER + 20].copy_from_slice(&count.to_le_bytes());
        let e = Capture::from_bytes(&bad).unwrap_err();
        assert_eq!(e.offset(), Some(at as u64), "{e}");
        assert!(
            e.to_string().contains(&format!("says {count} records")),
            "{e}"
        );
    }
}

/// The committed captures of the format before packed chunks (the fuzz seeds, and a window
/// an attach wrote) read as they always did: from bytes and from their files, to the same
/// records; written again they are packed and read back to the same trace.
#[test]
fn committed_captures_of_the_format_before_still_read() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    // (file, sessions, records of each session)
    let samples: [(&str, &[u64]); 6] = [
        ("read_capture/hand_made.tscope", &[4]),
        ("read_capture/two_sessions.tscope", &[29, 29]),
        ("read_capture/two_sessions.tscope.gz", &[29, 29]),
        ("read_capture/salvaged.tscope", &[3]),
        ("read_capture/salvaged-written-back", &[29, 28]),
        ("attach_protocol/window.tscope", &[84]),
    ];
    for (name, records) in samples {
        let path = root.join(name);
        let bytes = std::fs::read(&path).unwrap();
        if !name.ends_with(".gz") {
            assert!(
                chunks(&bytes).iter().all(|c| c.1 != EVENTS_PACKED),
                "{name}"
            );
        }
        let from_bytes = Capture::from_bytes(&bytes).unwrap();
        let from_path = Capture::read_all(&path).unwrap();
        let counts: Vec<u64> = from_path.iter().map(Capture::record_count).collect();
        assert_eq!(counts, records, "{name}");
        for (a, b) in from_bytes.iter().zip(&from_path) {
            assert_eq!(a.record_count(), b.record_count(), "{name}");
            let json = chrome_json(&a.decode());
            assert_eq!(chrome_json(&b.decode()), json, "{name}");
            let mut again = Vec::new();
            a.write_to(&mut again).unwrap();
            if a.record_count() > 0 {
                assert!(
                    chunks(&again).iter().any(|c| c.1 == EVENTS_PACKED),
                    "{name}"
                );
            }
            let back = Capture::from_bytes(&again).unwrap().remove(0);
            assert_eq!(back.record_count(), a.record_count(), "{name}");
            assert_eq!(chrome_json(&back.decode()), json, "{name}");
        }
    }
}

/// The records of a packed chunk: kinds that carry data, an exit closing an entry of an
/// earlier chunk, guards dropped out of order, every kind.
#[test]
fn odd_records_round_trip_through_a_file() {
    let mut records = vec![
        RawEvent::begin(1, 10),
        RawEvent::new(RawKind::ArgU64, 3, u64::MAX),
        RawEvent::new(RawKind::ArgI64, 3, (-5i64) as u64),
        RawEvent::begin(2, 20),
        RawEvent::begin(3, 25),
        // Out of order: 2 closes before 3.
        RawEvent::end(RawEvent::end_key(2, 20), 30),
        RawEvent::end(RawEvent::end_key(3, 25), 31),
    ];
    records.extend(RawEvent::memory(RawKind::Alloc, 1 << 40, 0xdead_beef, 32));
    records.push(RawEvent::new(RawKind::Instant, 4, 5));
    records.push(RawEvent::end(RawEvent::end_key(1, 10), 40));
    let capture = capture_from_records(vec![(1, records.clone()), (2, records)], 0, 100);
    let mut bytes = Vec::new();
    capture.write_to(&mut bytes).unwrap();
    let back = Capture::from_bytes(&bytes).unwrap().remove(0);
    assert_eq!(back.record_count(), 22);
    assert_eq!(chrome_json(&back.decode()), chrome_json(&capture.decode()));
}
