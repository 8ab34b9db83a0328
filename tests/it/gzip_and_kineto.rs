//! Gzipped capture files read from a path (decompressed into an unlinked temporary file and
//! read chunk by chunk) against the same bytes read from memory and the plain file, whole,
//! cut at many places, damaged, concurrent; and Kineto JSON written piece by piece from
//! captures against the whole trace's: byte for byte, or the same events where a scope stays open
//! over pieces.
#![cfg(feature = "enabled")]

use std::io::Write;

use crate::common::{first_difference, scratch, scratch_path};
use tickscope::export::{Format, chrome, kineto};
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, scope};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// A session on this thread and two spawned ones, with nesting and an out-of-order drop.
fn session(tag: &str) -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    for t in 0..2 {
        let tag = tag.to_owned();
        tickscope::thread::spawn(move || {
            for i in 0..1500u64 {
                let _a = scope!("outer", t = t, i = i);
                let _b = scope!("inner");
                if i % 500 == 0 {
                    let x = scope!("x");
                    let y = scope!("y");
                    drop(x);
                    drop(y);
                }
                let _ = &tag;
            }
        })
        .join()
        .unwrap();
    }
    {
        let _g = scope!("main");
    }
    prof.stop();
    prof
}

fn plain_bytes(prof: &Profiler) -> Vec<u8> {
    let mut out = Vec::new();
    prof.capture().write_to(&mut out).unwrap();
    out
}

/// What a read gives, comparable: per session its counts, warnings and Chrome JSON; or the
/// error's offset and message without the path.
fn fingerprint(result: Result<Vec<Capture>, tickscope::capture::ReadError>) -> String {
    fingerprint_at(result, None)
}

fn fingerprint_at(
    result: Result<Vec<Capture>, tickscope::capture::ReadError>,
    path: Option<&std::path::Path>,
) -> String {
    match result {
        Ok(captures) => {
            let mut s = String::new();
            for c in &captures {
                s += &format!(
                    "session threads={} chunks={} records={} warnings={:?}\n",
                    c.thread_count(),
                    c.chunk_count(),
                    c.record_count(),
                    c.warnings()
                );
            }
            let mut json = Vec::new();
            chrome::write(&Trace::from_captures(&captures), &mut json).unwrap();
            s += &String::from_utf8(json).unwrap();
            s
        }
        Err(e) => {
            let mut text = e.to_string();
            if let Some(path) = path {
                let shown = path.display().to_string();
                text = text
                    .replace(&format!(" {shown}: "), ": ")
                    .replace(&format!("{shown}: "), "");
            }
            format!("error offset={:?} {text}", e.offset())
        }
    }
}

fn via_path(name: &str, bytes: &[u8]) -> String {
    let path = scratch(name);
    std::fs::write(&path, bytes).unwrap();
    let r = std::panic::catch_unwind(|| fingerprint_at(Capture::read_all(&path), Some(&path)));
    r.unwrap_or_else(|_| panic!("read_all panicked on {name}"))
}

fn via_memory(bytes: &[u8]) -> String {
    std::panic::catch_unwind(|| fingerprint(Capture::from_bytes(bytes)))
        .unwrap_or_else(|_| panic!("from_bytes panicked"))
}

#[test]
fn gz_multi_session_one_member_and_two_members() {
    let (a, b) = (plain_bytes(&session("a")), plain_bytes(&session("b")));
    let both = [a.clone(), b.clone()].concat();
    let plain = via_path("gzk-both.tscope", &both);
    assert!(plain.starts_with("session"), "{plain}");
    assert_eq!(via_path("gzk-both1.tscope.gz", &gzip(&both)), plain);
    let two_members = [gzip(&a), gzip(&b)].concat();
    assert_eq!(via_path("gzk-both2.tscope.gz", &two_members), plain);
    // Many members, each a few bytes (member boundaries inside chunks).
    let many: Vec<u8> = both.chunks(37).flat_map(gzip).collect();
    assert_eq!(via_path("gzk-many.tscope.gz", &many), plain);
    // read_index agrees too.
    let path = scratch("gzk-idx.tscope.gz");
    std::fs::write(&path, &two_members).unwrap();
    let index = Capture::read_index(&path).unwrap();
    assert_eq!(index.len(), 2);
    let all = Capture::read_all(&path).unwrap();
    for (i, a) in index.iter().zip(&all) {
        assert_eq!(i.record_count(), a.record_count());
        assert_eq!(i.chunk_count(), a.chunk_count());
    }
}

#[test]
fn gz_truncated_at_many_offsets_reads_as_from_memory() {
    let plain = plain_bytes(&session("t"));
    let gz = gzip(&plain);
    let mut offsets: Vec<usize> = (0..gz.len()).step_by(gz.len() / 53 + 1).collect();
    offsets.extend([1, 2, 3, 9, 10, 11, 18, 19, 20]);
    offsets.extend((1..=9).map(|k| gz.len() - k));
    for cut in offsets {
        let bytes = &gz[..cut];
        let p = via_path(&format!("gzk-cut-{cut}.tscope.gz"), bytes);
        let m = via_memory(bytes);
        assert_eq!(p, m, "cut at {cut} of {}", gz.len());
    }
}

#[test]
fn gz_damaged_inputs_read_as_from_memory() {
    let plain = plain_bytes(&session("d"));
    let gz = gzip(&plain);
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut crc = gz.clone();
    let n = crc.len();
    crc[n - 8] ^= 0xff;
    cases.push(("crc", crc));
    let mut isize_ = gz.clone();
    isize_[n - 1] ^= 0x01;
    cases.push(("isize", isize_));
    let mut mid = gz.clone();
    mid[n / 2] ^= 0x55;
    cases.push(("middle", mid));
    cases.push(("trailing-zeros", [gz.clone(), vec![0; 512]].concat()));
    cases.push((
        "trailing-garbage",
        [gz.clone(), b"garbage!".to_vec()].concat(),
    ));
    cases.push(("trailing-magic", [gz.clone(), vec![0x1f, 0x8b]].concat()));
    cases.push((
        "gz-of-garbage",
        gzip(b"this is not a capture at all, not at all"),
    ));
    cases.push(("gz-of-empty", gzip(b"")));
    cases.push((
        "empty-member-then-capture",
        [gzip(b""), gz.clone()].concat(),
    ));
    cases.push(("magic-only", vec![0x1f, 0x8b]));
    cases.push(("header-only", gz[..10].to_vec()));
    let mut bad_method = gz.clone();
    bad_method[2] = 7;
    cases.push(("bad-method", bad_method));
    let mut flags = gz.clone();
    flags[3] = 0xff;
    cases.push(("all-flags", flags));
    for (name, bytes) in &cases {
        let p = via_path(&format!("gzk-{name}.tscope.gz"), bytes);
        let m = via_memory(bytes);
        eprintln!("{name}: {}", p.lines().next().unwrap_or(""));
        assert_eq!(p, m, "{name}");
    }
    // A gzipped gzipped capture: from memory it is decompressed twice (`from_bytes` then
    // `parse_with`), from a path once (as before the temporary file). Kept as it is seen.
    let double = gzip(&gz);
    let p = via_path("gzk-double.tscope.gz", &double);
    let m = via_memory(&double);
    assert!(
        p.starts_with("error offset=Some(0)"),
        "{}",
        &p[..p.len().min(300)]
    );
    assert!(m.starts_with("session"), "{}", &m[..m.len().min(300)]);
}

#[test]
fn gz_concurrent_reads_of_one_file() {
    let plain = plain_bytes(&session("c"));
    let path = scratch_path("gzk-concurrent.tscope.gz");
    std::fs::write(&path, gzip(&plain)).unwrap();
    let expected = fingerprint(Capture::from_bytes(&plain));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    (0..4)
                        .map(|_| fingerprint(Capture::read_all(&path)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for got in h.join().unwrap() {
                assert_eq!(got, expected);
            }
        }
    });
    let _ = std::fs::remove_file(&path);
}

#[test]
fn gz_read_index_of_a_salvaged_session() {
    let plain = plain_bytes(&session("s"));
    // Cut at 70%: no footer.
    let cut = &plain[..plain.len() * 7 / 10];
    let (p, g) = (scratch("gzk-salv.tscope"), scratch("gzk-salv.tscope.gz"));
    std::fs::write(&p, cut).unwrap();
    std::fs::write(&g, gzip(cut)).unwrap();
    let (ip, ig) = (
        Capture::read_index(&p).unwrap(),
        Capture::read_index(&g).unwrap(),
    );
    assert_eq!(ip.len(), ig.len());
    for (a, b) in ip.iter().zip(&ig) {
        assert_eq!(a.record_count(), b.record_count());
        assert_eq!(a.warnings(), b.warnings());
    }
    let mut x = Vec::new();
    let mut y = Vec::new();
    chrome::write(&Trace::from_captures(&ip), &mut x).unwrap();
    chrome::write(&Trace::from_captures(&ig), &mut y).unwrap();
    assert!(x == y);
    // Salvaged and gzip-cut together.
    let gz = gzip(cut);
    let gz_cut = &gz[..gz.len() * 9 / 10];
    let g2 = scratch("gzk-salv2.tscope.gz");
    std::fs::write(&g2, gz_cut).unwrap();
    let a = fingerprint_at(Capture::read_index(&g2), Some(&g2));
    let b = fingerprint(Capture::from_bytes(gz_cut));
    assert_eq!(a, b);
}

// ---- Kineto written piece by piece ----

fn kineto_both(captures: &[Capture]) -> (Vec<u8>, Vec<u8>) {
    let refs: Vec<&Capture> = captures.iter().collect();
    let options = kineto::Options::new(0, 1);
    let mut pieces = Vec::new();
    options
        .write_captures(&refs, &mut pieces)
        .expect("these captures are written piece by piece")
        .unwrap();
    let mut whole = Vec::new();
    options
        .write(&Trace::from_captures(captures), &mut whole)
        .unwrap();
    (whole, pieces)
}

/// Kineto's events from the whole trace and from pieces are the same, once sorted: a scope
/// left open at the stop (open over more than a piece of its thread) is written in the piece
/// where it ends, after the spans begun inside it, with the same event number.
fn assert_same_events(whole: &[u8], pieces: &[u8]) {
    assert_eq!(whole.len(), pieces.len());
    let lines = |bytes: &[u8]| {
        let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
            .lines()
            .map(|l| l.trim_end_matches(',').to_owned())
            .collect();
        lines.sort_unstable();
        lines
    };
    let (a, b) = (lines(whole), lines(pieces));
    assert!(a == b, "the events differ");
}

/// Records with the public API: several threads, several pieces each, zero-ish scopes,
/// optionally out-of-order drops, a scope left open at stop; writes, reads back.
fn recorded(name: &str, out_of_order: bool, left_open: bool) -> Vec<Capture> {
    recorded_with(name, out_of_order, left_open, |t, i| {
        i % 997 == (t * 13) % 997
    })
}

/// [`recorded`], the out-of-order drops on the iterations `swap` picks.
fn recorded_with(
    name: &str,
    out_of_order: bool,
    left_open: bool,
    swap: fn(u64, u64) -> bool,
) -> Vec<Capture> {
    let prof = Profiler::builder().current_thread().start();
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            tickscope::thread::spawn(move || {
                for i in 0..3_000u64 {
                    let a = scope!("request");
                    {
                        let _p = scope!("parse");
                    }
                    // Empty scopes, back to back: edges on the same tick or nearly.
                    for _ in 0..3 {
                        let _z = scope!("empty");
                    }
                    if out_of_order && swap(t, i) {
                        let x = scope!("x");
                        let y = scope!("y");
                        let z = scope!("z");
                        drop(x);
                        drop(y);
                        drop(a);
                        drop(z);
                    } else {
                        drop(a);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let _open = left_open.then(|| scope!("left open"));
    let _inner = left_open.then(|| scope!("left open inner"));
    for _ in 0..1200 {
        let _g = scope!("main");
    }
    prof.stop();
    let path = scratch(name);
    prof.write_capture(&path).unwrap();
    Capture::read_all(&path).unwrap()
}

#[test]
fn kineto_pieces_nested_many_threads() {
    let captures = recorded("gzk-k1.tscope", false, true);
    let (whole, pieces) = kineto_both(&captures);
    assert_same_events(&whole, &pieces);
}

#[test]
fn kineto_pieces_out_of_order() {
    let captures = recorded("gzk-k2.tscope", true, true);
    let (whole, pieces) = kineto_both(&captures);
    let text = String::from_utf8_lossy(&whole);
    assert!(text.contains("(overlapping scopes 2)"), "extra lanes");
    assert!(text.contains("\"left open\""), "a scope left open");
    assert_same_events(&whole, &pieces);
}

#[test]
fn kineto_pieces_several_sessions_and_files() {
    let a = recorded("gzk-k3a.tscope", false, false);
    // Without a scope open over pieces, byte for byte.
    let (whole, pieces) = kineto_both(&a);
    assert!(whole == pieces, "{}", first_difference(&whole, &pieces));
    let b = recorded("gzk-k3b.tscope", false, true);
    let both: Vec<Capture> = a.into_iter().chain(b).collect();
    let (whole, pieces) = kineto_both(&both);
    assert_same_events(&whole, &pieces);
    // The same two sessions from one concatenated, gzipped file.
    let refs: Vec<&Capture> = both.iter().collect();
    let path = scratch("gzk-k3.tscope.gz");
    Capture::write_all(&path, &refs).unwrap();
    let again = Capture::read_all(&path).unwrap();
    assert_eq!(again.len(), 2);
    let (w2, p2) = kineto_both(&again);
    assert_same_events(&w2, &p2);
    assert!(
        w2 == whole,
        "gz readback differs: {}",
        first_difference(&whole, &w2)
    );
}

/// Out-of-order drops first on iteration 1500 of each thread (about 7 spans each: past the
/// thread's first piece), so that the extra lane is first needed in a later piece: the same
/// events, the lane's track named before the first piece that uses it (later in the file than
/// from the whole trace, as in the Chrome format).
#[test]
fn kineto_pieces_lane_first_needed_in_a_later_piece() {
    let captures = recorded_with("gzk-k4.tscope", true, true, |_, i| i == 1500);
    let (whole, pieces) = kineto_both(&captures);
    assert!(
        String::from_utf8_lossy(&whole).contains("(overlapping scopes 1)"),
        "an extra lane"
    );
    assert_same_events(&whole, &pieces);
}

/// Three sessions as three processes (the process id patched), one of them twice (a pid
/// shared by two sessions), concatenated and gzipped in separate members: read from the path,
/// Kineto from pieces has the whole trace's events.
#[test]
fn kineto_pieces_several_processes_from_a_gzipped_file() {
    let mut file = Vec::new();
    for (k, pid) in [(0u32, 1001u32), (1, 1002), (2, 1001)] {
        let captures = recorded(&format!("gzk-k5-{k}.tscope"), false, k == 2);
        let mut bytes = Vec::new();
        captures[0].write_to(&mut bytes).unwrap();
        bytes[20..24].copy_from_slice(&pid.to_le_bytes());
        file.extend(gzip(&bytes));
    }
    let path = scratch("gzk-k5.tscope.gz");
    std::fs::write(&path, &file).unwrap();
    let captures = Capture::read_all(&path).unwrap();
    assert_eq!(captures.len(), 3);
    let (whole, pieces) = kineto_both(&captures);
    assert_same_events(&whole, &pieces);
    let from_memory = Capture::from_bytes(&file).unwrap();
    let (whole2, _) = kineto_both(&from_memory);
    assert!(whole == whole2, "{}", first_difference(&whole, &whole2));
}
