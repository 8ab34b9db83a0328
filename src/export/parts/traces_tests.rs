//! Traces whose large threads are written apart ([`parts`](super)) are the same bytes
//! whatever writes them: one core or several, parts in memory or in temporary files.

use crate::capture::Capture;
use crate::export::Format;
use crate::export::parts;
use crate::record::callsite::Callsite;
use crate::record::event::RawEvent;

static A: Callsite = Callsite::new("apart a", file!(), line!(), module_path!());
static B: Callsite = Callsite::new("apart b", file!(), line!(), module_path!());
static C: Callsite = Callsite::new("apart c", file!(), line!(), module_path!());

/// A thread of `scopes` nested scopes (down to 4 deep) from `seed`; with `tangled`, one
/// exit now and then closes the scope around the innermost one (an extra track).
fn thread(seed: u64, scopes: usize, tangled: bool) -> (Vec<RawEvent>, u64) {
    let mut next = crate::record::test_random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    // Callsites by seed, so that threads intern names in different orders.
    let ids = match seed % 3 {
        0 => [A.id(), B.id(), C.id()],
        1 => [C.id(), A.id(), B.id()],
        _ => [B.id(), C.id(), A.id()],
    };
    let (mut out, mut open, mut t) = (Vec::new(), Vec::<(u32, u64)>::new(), 1_000u64);
    let mut begun = 0;
    while begun < scopes || !open.is_empty() {
        t += 1 + next(900);
        if tangled && open.len() >= 2 && next(500) == 0 {
            let (id, at) = open.remove(open.len() - 2);
            out.push(RawEvent::end(RawEvent::end_key(id, at), t));
        } else if begun < scopes && open.len() < 4 && (open.is_empty() || next(2) == 0) {
            let id = ids[next(3) as usize];
            out.push(RawEvent::begin(id, t));
            open.push((id, t));
            begun += 1;
        } else if let Some((id, at)) = open.pop() {
            out.push(RawEvent::end(RawEvent::end_key(id, at), t));
        }
    }
    (out, t)
}

/// Six threads: four large (one of them tangled), two too small to be written apart. A
/// large thread has more spans than [`parts::APART_FROM`], so that it is written apart from
/// a decoded trace too.
fn capture() -> Capture {
    let shapes = [
        (17_000, false),
        (300, false),
        (16_500, false),
        (17_500, true),
        (200, false),
        (18_000, false),
    ];
    let mut end = 0;
    let threads = (1..)
        .zip(shapes)
        .map(|(id, (scopes, tangled))| {
            let (records, last) = thread(id, scopes, tangled);
            end = end.max(last);
            (id, records)
        })
        .collect();
    Capture::from_records(threads, 0, end + 1)
}

#[test]
fn traces_are_the_same_bytes_whatever_writes_their_threads() {
    let json = same_bytes_whatever_writes(&[&capture()], true);
    // Six threads and an extra track.
    assert_eq!(thread_names(&json), 7);
}

#[test]
fn two_sessions_of_one_process_are_the_same_bytes_whatever_writes_their_threads() {
    // The same threads (process and id) in both: one track each, written twice.
    let (one, two) = (capture(), capture());
    let json = same_bytes_whatever_writes(&[&one, &two], true);
    // Six threads, each session's extra track.
    assert_eq!(thread_names(&json), 8);
}

/// Writes `captures` as Perfetto, Chrome JSON and Kineto traces, from pieces and decoded
/// whole, in turn and apart in several ways, and checks the bytes are the same; `tangled`:
/// they have a thread with an extra track.
pub(crate) fn same_bytes_whatever_writes(captures: &[&Capture], tangled: bool) -> Vec<u8> {
    let mut chrome = Vec::new();
    // Decoded in pieces, and whole: a decoded thread that needs an extra track is tried
    // apart too (and written again in its turn).
    let trace = crate::trace::Trace::from_captures(captures.iter().copied());
    let write = |format: &dyn Format| {
        let mut out = Vec::new();
        format.write_captures(captures, &mut out).unwrap().unwrap();
        let mut whole = Vec::new();
        format.write(&trace, &mut whole).unwrap();
        (out, whole)
    };
    let formats: [(&str, &dyn Format); 3] = [
        ("perfetto", &crate::export::perfetto::Options::new()),
        ("chrome", &crate::export::chrome::Options::new()),
        ("kineto", &crate::export::kineto::Options::new(0, 1)),
    ];
    for (name, format) in formats {
        let mut total = 0;
        parts::set_apart(Some(0), 0);
        let before = parts::written_apart();
        let serial = write(format);
        assert_eq!(parts::written_apart(), before, "{name}: one core");
        // The tangled thread's extra track; the flows.
        let has = |bytes: &[u8], what: &[u8]| bytes.windows(what.len()).any(|w| w == what);
        if name == "chrome" {
            chrome = serial.0.clone();
        }
        for written in [&serial.0, &serial.1] {
            assert_eq!(has(written, b"(overlapping scopes 1)"), tangled, "{name}");
            if !tangled && name != "perfetto" {
                assert!(has(written, b"\"ph\":\"f\""), "{name}: no flow");
            }
        }
        // Two, three and four threads apart at once; parts in memory, in temporary files
        // alone (a budget of one byte), and in both (three blocks' worth).
        for (workers, memory) in [(2, 0), (3, 1), (3, 3 << 20), (4, 0)] {
            parts::set_apart(Some(workers), memory);
            let before = parts::written_apart();
            let apart = write(format);
            assert!(apart == serial, "{name}: {workers} cores, {memory} bytes");
            let written = parts::written_apart() - before;
            // At most three large threads (nested) of each session and source are written
            // apart.
            assert!(written <= 6 * captures.len(), "{name}: {written} parts");
            total += written;
        }
        match name {
            // Kineto numbers its events in order: no thread is written apart.
            "kineto" => assert_eq!(total, 0, "{name}"),
            _ => assert!(total > 0, "{name}: no thread written apart"),
        }
    }
    parts::set_apart(None, 0);
    chrome
}

/// The tracks named in a Chrome JSON trace.
pub(crate) fn thread_names(json: &[u8]) -> usize {
    let name = b"\"thread_name\"";
    json.windows(name.len()).filter(|w| w == name).count()
}
