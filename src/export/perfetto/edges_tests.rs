//! Threads of nested plain scopes written from their edges
//! ([`SpanSource::each_edge`](crate::decode::pieces::SpanSource::each_edge)) are the bytes
//! their pieces' walk writes: read from records and from a file's packed columns, in windows
//! cut inside the threads (and a flight recorder's), of salvaged sessions and of two sessions
//! together, with entries of unknown callsites, exits of nothing, scopes open at the end and
//! ticks that repeat.

use super::spans::{EDGE_THREADS, NO_EDGES};
use crate::capture::Capture;
use crate::export::Format;
use crate::record::callsite::Callsite;
use crate::record::event::RawEvent;

static A: Callsite = Callsite::new("edge a", file!(), line!(), module_path!());
static B: Callsite = Callsite::new("edge b", file!(), line!(), module_path!());

/// A thread of `records` records of nested scopes (down to `depth`) from `seed`; with `odd`,
/// now and then an entry of an unknown callsite or an exit of nothing; with `tangled`, now
/// and then an exit of the scope around the innermost one. Scopes may stay open at the end.
fn thread(seed: u64, records: usize, depth: usize, odd: bool, tangled: bool) -> Vec<RawEvent> {
    let mut next = crate::record::test_random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let (mut out, mut open, mut t) = (Vec::new(), Vec::<(u32, u64)>::new(), 1_000u64);
    while out.len() < records {
        // Ticks repeat now and then (scopes of no time, siblings that touch).
        t += next(4);
        if odd && next(60) == 0 {
            match next(2) {
                0 => out.push(RawEvent::end(next(0) as u32, t)),
                _ => {
                    out.push(RawEvent::begin(40_000, t));
                    open.push((40_000, t));
                }
            }
        } else if tangled && open.len() >= 2 && next(300) == 0 {
            let (id, at) = open.remove(open.len() - 2);
            out.push(RawEvent::end(RawEvent::end_key(id, at), t));
        } else if open.len() < depth && (open.is_empty() || next(2) == 0) {
            let id = [A.id(), B.id()][next(2) as usize];
            out.push(RawEvent::begin(id, t));
            open.push((id, t));
        } else if let Some((id, at)) = open.pop() {
            out.push(RawEvent::end(RawEvent::end_key(id, at), t));
        }
    }
    out
}

/// The Perfetto bytes of `captures` written from their edges, checked against those written
/// from their pieces; how many threads were written from edges.
fn same_bytes(captures: &[&Capture], what: &str) -> usize {
    let format = crate::export::perfetto::Options::new();
    let write = |edges: bool| {
        NO_EDGES.set(!edges);
        let before = EDGE_THREADS.get();
        let mut out = Vec::new();
        format.write_captures(captures, &mut out).unwrap().unwrap();
        NO_EDGES.set(false);
        (out, EDGE_THREADS.get() - before)
    };
    let (edges, from_edges) = write(true);
    let (pieces, none) = write(false);
    assert_eq!(none, 0, "{what}");
    assert_eq!(edges.len(), pieces.len(), "{what}");
    assert!(edges == pieces, "{what}: the bytes differ");
    from_edges
}

#[test]
fn threads_written_from_edges_are_their_pieces_bytes() {
    let path = std::env::temp_dir().join(format!("tickscope-edges-{}.tscope", std::process::id()));
    let mut from_edges = 0;
    for seed in 1..=6u64 {
        let shapes = [
            (9_000, 3, false, false),
            (20_000, 8, true, false),
            (5_000, 40, seed % 2 == 0, false),
            (7_000, 5, false, true),
        ];
        let threads: Vec<(u64, Vec<RawEvent>)> = (1..)
            .zip(shapes)
            .map(|(id, (records, depth, odd, tangled))| {
                (id, thread(seed * 10 + id, records, depth, odd, tangled))
            })
            .collect();
        let end = threads
            .iter()
            .flat_map(|(_, r)| r)
            .map(|r| r.tick)
            .max()
            .unwrap_or(0)
            + 1;
        let capture = Capture::from_records(threads, 0, end);
        from_edges += same_bytes(&[&capture], &format!("records, seed {seed}"));
        // From a file: packed chunks, their columns kept and walked.
        let mut bytes = Vec::new();
        capture.write_to(&mut bytes).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let mut read = Capture::read_all(&path).unwrap().remove(0);
        assert!(
            read.threads
                .iter()
                .flat_map(|t| &t.chunks)
                .any(|c| c.kept().is_some())
        );
        from_edges += same_bytes(&[&read], &format!("file, seed {seed}"));
        // Two sessions of one process (threads of the same ids).
        let both = [&capture, &read];
        from_edges += same_bytes(&both, &format!("two sessions, seed {seed}"));
        // Salvaged: what is open closes at each thread's last record.
        let mut salvaged = Capture::read_all(&path).unwrap().remove(0);
        salvaged.salvaged = Some(64);
        from_edges += same_bytes(&[&salvaged], &format!("salvaged, seed {seed}"));
        // A flight recorder's window, and a window that starts and ends inside the threads.
        let mut window = Capture::read_all(&path).unwrap().remove(0);
        window.cut_start = Some(1_000 + end / 4);
        for thread in &mut window.threads {
            thread.from_tick = 1_000 + end / 4;
        }
        from_edges += same_bytes(&[&window], &format!("recorder's window, seed {seed}"));
        read.threads[1].from_tick = 1_000 + end / 3;
        read.end_tick = end - end / 5;
        from_edges += same_bytes(&[&read], &format!("file cut, seed {seed}"));
    }
    std::fs::remove_file(&path).unwrap();
    // The tangled threads are written from their pieces; most others from their edges.
    assert!(from_edges >= 100, "{from_edges} threads written from edges");
}
