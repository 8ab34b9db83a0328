//! The `ORIGIN` chunk of a session taken by an attach: read with the session
//! (`Capture::origin`), written back after its header, so that a merged file keeps where each
//! of its sessions came from.
#![cfg(feature = "enabled")]

use tickscope::__private::format::{CHUNK_HEADER, ORIGIN, ORIGIN_VERSION, padded};
use tickscope::attach::{Origin, origins, protocol};
use tickscope::{Capture, Profiler, scope};

use crate::common::scratch_path as scratch;

/// One session of `n` scopes `name`, recorded on this thread, as a capture file's bytes.
fn session(name: &'static str, n: usize) -> Vec<u8> {
    let prof = Profiler::builder().current_thread().start();
    for _ in 0..n {
        match name {
            "window" => drop(scope!("window")),
            _ => drop(scope!("live")),
        }
    }
    prof.stop();
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    bytes
}

/// `bytes` (one session) with an `ORIGIN` chunk of `content` after its header, as an attach
/// writes it.
fn with_origin(bytes: &[u8], content: &[u8]) -> Vec<u8> {
    let end = origin_offset(bytes);
    let mut out = bytes[..end].to_vec();
    protocol::write_chunk(&mut out, ORIGIN, ORIGIN_VERSION, content).unwrap();
    out.extend_from_slice(&bytes[end..]);
    out
}

/// An `ORIGIN` chunk's content: origin code, reserved, attach time.
fn origin(code: u32, at: u64) -> Vec<u8> {
    let mut content = code.to_le_bytes().to_vec();
    content.extend_from_slice(&[0; 4]);
    content.extend_from_slice(&at.to_le_bytes());
    content
}

/// The names and calls of a session.
fn calls(capture: &Capture) -> Vec<(String, u64)> {
    let trace = capture.decode();
    let report = tickscope::report::Report::new(&trace);
    report
        .rows()
        .iter()
        .map(|r| (r.name.to_owned(), r.calls))
        .collect()
}

#[test]
fn a_merged_file_keeps_the_origin_of_each_session() {
    const AT: u64 = 1_795_654_800_123_456_789;
    let window = with_origin(&session("window", 3), &origin(1, AT));
    let live = with_origin(&session("live", 5), &origin(2, AT));
    let plain = session("live", 2);
    let attached = scratch("origins-attached.tscope");
    std::fs::write(&attached, [window, live].concat()).unwrap();
    let other = scratch("origins-plain.tscope");
    std::fs::write(&other, &plain).unwrap();

    let mut sessions = Capture::read_all(&attached).unwrap();
    sessions.extend(Capture::read_all(&other).unwrap());
    let read: Vec<_> = sessions.iter().map(Capture::origin).collect();
    assert_eq!(
        read,
        [Some((Origin::Flight, AT)), Some((Origin::Live, AT)), None]
    );
    assert!(sessions.iter().all(|s| s.warnings().is_empty()));

    // Merged (`tickscope merge` writes this way), then read back: each session as it was.
    let merged = scratch("origins-merged.tscope");
    let all: Vec<&Capture> = sessions.iter().collect();
    Capture::write_all(&merged, &all).unwrap();
    let bytes = std::fs::read(&merged).unwrap();
    assert_eq!(
        origins(&bytes),
        [Some((Origin::Flight, AT)), Some((Origin::Live, AT)), None]
    );
    let back = Capture::read_all(&merged).unwrap();
    assert_eq!(back.iter().map(Capture::origin).collect::<Vec<_>>(), read);
    let pid = std::process::id();
    assert!(
        back.iter()
            .all(|s| s.process_id() == pid && s.warnings().is_empty())
    );
    assert_eq!(calls(&back[0]), [("window".to_owned(), 3)]);
    assert_eq!(calls(&back[1]), [("live".to_owned(), 5)]);
    assert_eq!(calls(&back[2]), [("live".to_owned(), 2)]);
    // The origin chunk right after the header, as an attach writes it: the same bytes.
    let mut again = Vec::new();
    back[0].write_to(&mut again).unwrap();
    let header = origin_offset(&again);
    let mut expected = Vec::new();
    protocol::write_chunk(&mut expected, ORIGIN, ORIGIN_VERSION, &origin(1, AT)).unwrap();
    assert_eq!(again[header..header + expected.len()], expected[..]);
    for path in [attached, other, merged] {
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn an_origin_of_an_unknown_code_is_skipped_with_a_warning() {
    let plain = session("live", 1);
    let bytes = with_origin(&plain, &origin(7, 42));
    let read = Capture::from_bytes(&bytes).unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].origin(), None);
    assert_eq!(
        read[0].warnings(),
        [format!(
            "byte {}: an origin chunk of 16 bytes that says no origin this build knows: skipped",
            origin_offset(&plain)
        )]
    );
    // A short one too.
    let short = with_origin(&plain, &[2, 0, 0, 0]);
    let read = Capture::from_bytes(&short).unwrap();
    assert_eq!(read[0].origin(), None);
    assert_eq!(
        read[0].warnings(),
        [format!(
            "byte {}: an origin chunk of 4 bytes that says no origin this build knows: skipped",
            origin_offset(&plain)
        )]
    );
}

/// Where [`with_origin`] puts the chunk: after the session header that starts `bytes`.
fn origin_offset(bytes: &[u8]) -> usize {
    CHUNK_HEADER
        + usize::try_from(padded(u64::from_le_bytes(bytes[8..16].try_into().unwrap()))).unwrap()
}
