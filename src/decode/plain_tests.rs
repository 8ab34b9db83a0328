//! The short path of plain scopes ([`Shared::plain`]) against the general pairing
//! ([`Shared::general`]): the same sums, in the same order, of every thread it takes, and
//! none of a thread it does not.

use super::pieces::{Piece, Pieces, Want};
use super::summary::{Calls, Sum, Summary, ThreadSums, WINDOW};
use super::thread::{Decoded, Shared};
use crate::capture::{Capture, Chunk};
use crate::record::callsite::Callsite;
use crate::record::clock::{Compensation, PROBE_UNIT};
use crate::record::event::{RawEvent, RawKind};

static A: Callsite = Callsite::new("a", file!(), line!(), module_path!());
static B: Callsite = Callsite::new("b", file!(), line!(), module_path!());
static C: Callsite = Callsite::new("c", file!(), line!(), module_path!());

/// What a generated thread is like.
#[derive(Clone, Copy)]
struct Shape {
    records: usize,
    /// The deepest nesting.
    depth: usize,
    /// Now and then: entries of unknown callsites, exits that close nothing, ticks that go
    /// back (forged).
    odd: bool,
    /// One exit closes a scope that is not the innermost one, at about this record.
    out_of_order: Option<usize>,
    /// One record of another kind (an instant), at about this record.
    other_kind: Option<usize>,
}

/// A thread's records as `shape` says, from `seed`; and its last tick.
fn records(seed: u64, shape: Shape) -> (Vec<RawEvent>, u64) {
    let mut next = crate::record::test_random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let ids = [A.id(), B.id(), C.id()];
    let (mut out, mut open, mut t) = (Vec::new(), Vec::<(u32, u64)>::new(), 1_000u64);
    while out.len() < shape.records {
        t += next(6);
        if shape.odd && next(50) == 0 {
            t = t.saturating_sub(next(20));
        }
        let at = out.len();
        if shape.out_of_order.is_some_and(|n| at >= n) && open.len() >= 2 {
            let (id, begin) = open.remove(open.len() - 2);
            out.push(RawEvent::end(RawEvent::end_key(id, begin), t));
            continue;
        }
        if shape.other_kind.is_some_and(|n| at == n) {
            out.push(RawEvent::new(RawKind::Instant, ids[0], t));
            continue;
        }
        if shape.odd && next(40) == 0 {
            // An exit of nothing open, or an entry of no known callsite.
            match next(2) {
                0 => out.push(RawEvent::end(next(0) as u32, t)),
                _ => {
                    let id = [0, 40_000][next(2) as usize];
                    out.push(RawEvent::begin(id, t));
                    open.push((id, t));
                }
            }
            continue;
        }
        let deeper = open.len() < shape.depth && (open.is_empty() || next(3) != 0);
        if deeper && (open.len() + 1 < shape.depth || next(2) == 0) {
            let id = ids[next(3) as usize];
            out.push(RawEvent::begin(id, t));
            open.push((id, t));
        } else if let Some((id, begin)) = open.pop() {
            out.push(RawEvent::end(RawEvent::end_key(id, begin), t));
        }
    }
    (out, t)
}

/// `records` in chunks of random sizes (as a file's or a recorder's chunks are).
fn chunked(records: Vec<RawEvent>, next: &mut impl FnMut(u64) -> u64) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut rest = records.as_slice();
    while !rest.is_empty() {
        let take = (1 + next(3000) as usize).min(rest.len());
        chunks.push(Chunk::Owned(rest[..take].to_vec()));
        rest = &rest[take..];
    }
    chunks
}

/// What the checks saw, so that the test shows it took every branch.
#[derive(Default, Debug)]
struct Seen {
    plain: usize,
    given_up: usize,
    /// Counting threads whose ticks go back, given up.
    counting_given_up: usize,
    tangled: usize,
    open_at_end: usize,
    drains: usize,
    /// Pieces compared ([`same_pieces`]), and of them those that carry open spans.
    pieces: usize,
    carrying: usize,
}

/// Asserts that the short path's decoding of a thread is the general one's.
fn same(
    plain: &(Decoded, Option<ThreadSums>),
    general: &(Decoded, Option<ThreadSums>),
    what: &str,
) {
    let ((pd, ps), (gd, gs)) = (plain, general);
    let (ps, gs) = (ps.as_ref().unwrap(), gs.as_ref().unwrap());
    assert_eq!(pd.events, gd.events, "{what}: records");
    assert_eq!(pd.end_ns, gd.end_ns, "{what}: end");
    assert_eq!(pd.open_scopes, gd.open_scopes, "{what}: open scopes");
    assert_eq!(pd.thread.id, gd.thread.id, "{what}");
    assert_eq!(pd.thread.name, gd.thread.name, "{what}");
    assert!(
        gd.thread.spans.is_empty() && pd.thread.spans.is_empty(),
        "{what}"
    );
    assert!(
        gd.thread.args.is_empty() && pd.thread.args.is_empty(),
        "{what}"
    );
    assert_eq!(pd.thread.memory.len(), gd.thread.memory.len(), "{what}");
    assert_eq!((pd.marks.len(), gd.marks.len()), (0, 0), "{what}");
    assert_eq!(
        format!("{:?}", pd.marks_seen),
        format!("{:?}", gd.marks_seen),
        "{what}"
    );
    assert_eq!(pd.links.overflowed, gd.links.overflowed, "{what}");
    assert!(
        gd.links.origins.is_empty() && gd.links.followers.is_empty(),
        "{what}"
    );
    assert_eq!(pd.links.tracing_uses, gd.links.tracing_uses, "{what}");
    assert!(pd.memory.is_none() && gd.memory.is_none(), "{what}");
    assert!(
        gd.extras.samples.is_empty() && gd.extras.instants.is_empty(),
        "{what}"
    );
    assert!(
        pd.extras.stacks.is_none() && gd.extras.stacks.is_none(),
        "{what}"
    );
    assert_eq!(ps.spans, gs.spans, "{what}: spans");
    assert_eq!(ps.polls, gs.polls, "{what}: polls");
    assert_eq!(ps.cut_at_start, gs.cut_at_start, "{what}");
    assert_eq!(ps.tangled, gs.tangled, "{what}: tangled");
    assert_eq!(ps.open_at_end, gs.open_at_end, "{what}: open at the end");
    assert_eq!(ps.follows, gs.follows, "{what}");
    assert_eq!(
        (ps.memory_events, ps.memory_in_order),
        (gs.memory_events, gs.memory_in_order),
        "{what}"
    );
    assert!(ps.calls.is_empty() && gs.calls.is_empty(), "{what}");
    assert_eq!(ps.sites.len(), gs.sites.len(), "{what}: sites");
    for (p, g) in ps.sites.iter().zip(&gs.sites) {
        assert!(std::ptr::eq(p.callsite, g.callsite), "{what}: site order");
        // The durations in the order they were added.
        assert_eq!(
            format!("{:?}", p.durations),
            format!("{:?}", g.durations),
            "{what}: durations of {}",
            g.callsite.name()
        );
        assert_eq!(
            p.self_ns,
            g.self_ns,
            "{what}: self time of {}",
            g.callsite.name()
        );
        assert_eq!(p.open, g.open, "{what}");
        assert_eq!(
            format!("{:?}", p.memory),
            format!("{:?}", g.memory),
            "{what}"
        );
    }
}

/// Whether the ticks of the records of `thread` in the window go back somewhere.
fn ticks_go_back(capture: &Capture, thread: &crate::capture::CaptureThread) -> bool {
    let window = thread.from_tick..=capture.end_tick;
    let records: Vec<RawEvent> = (thread.chunks.iter())
        .flat_map(|c| c.records().to_vec())
        .filter(|r| window.contains(&r.tick))
        .collect();
    records.windows(2).any(|w| w[1].tick < w[0].tick)
}

/// Decodes every thread of `capture` both ways, in each way of summing, and checks them;
/// false when the short path gave one up.
fn both_ways(capture: &Capture, what: &str, seen: &mut Seen) -> bool {
    let shared = Shared::new(capture, capture.memory.is_on(), false);
    let mut took_all = true;
    for (sites, exact) in [(true, true), (true, false), (false, false)] {
        let sum = Sum {
            exact,
            stacks: false,
            calls: Calls::Sum,
            sites,
        };
        for (index, thread) in capture.threads.iter().enumerate() {
            if !shared.has_records(thread) {
                continue;
            }
            let general = shared.general(index, thread, Some(sum));
            let Some(plain) = shared.plain(thread, sum) else {
                // Only counting, a thread whose ticks go back is the general path's.
                match !sites && ticks_go_back(capture, thread) {
                    true => seen.counting_given_up += 1,
                    false => {
                        took_all = false;
                        seen.given_up += 1;
                    }
                }
                continue;
            };
            let what = format!("{what}, thread {}, sites {sites}, exact {exact}", thread.id);
            same(&plain, &general, &what);
            let sums = plain.1.as_ref().unwrap();
            seen.plain += 1;
            seen.tangled += usize::from(sums.tangled);
            seen.open_at_end += usize::from(!sums.open_at_end.is_empty());
            seen.drains += usize::from(sums.spans > 2 * WINDOW);
        }
    }
    same_pieces(capture, what, seen);
    took_all
}

/// The pieces of every thread read as plain scopes ([`ThreadSums::plain`]) on the short path
/// ([`plain_pieces`](super::plain_pieces)) are the general pairing's, field by field: after a
/// first reading that counts (an export's) and one that sums (a table's, which lets ticks go
/// back), carrying open spans or whole trees; without the spans' figures, the same but for
/// those (0 on the short path).
fn same_pieces(capture: &Capture, what: &str, seen: &mut Seen) {
    fn pieces_of(pieces: &Pieces<'_>, thread: usize, want: Want) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        (pieces.decode_pieces(thread, want, &mut |piece| {
            let mut spans = piece.spans.to_vec();
            if !want.figures {
                for span in &mut spans {
                    (span.children_ns, span.overhead_ns) = (0, 0);
                }
            }
            let piece = Piece {
                spans: &spans,
                ..piece
            };
            out.push((format!("{piece:?}"), !piece.carried.is_empty()));
            Ok(())
        }))
        .unwrap();
        out
    }
    let captures = [capture];
    for sites in [false, true] {
        let sum = Sum {
            exact: true,
            stacks: false,
            calls: Calls::Sum,
            sites,
        };
        let summary = Summary::summed(&captures, sum).expect("a summary");
        let mut pieces = Pieces::of_summary(&captures, &summary).expect("pieces");
        for thread in 0..pieces.thread_count() {
            if !pieces.plain[thread] {
                continue;
            }
            for (whole_trees, figures) in [(false, true), (true, true), (false, false)] {
                let want = Want {
                    whole_trees,
                    figures,
                };
                let plain = pieces_of(&pieces, thread, want);
                pieces.plain[thread] = false;
                let general = pieces_of(&pieces, thread, want);
                pieces.plain[thread] = true;
                let what = format!("{what}, pieces of thread {thread}, sites {sites}, {want:?}");
                assert_eq!(plain.len(), general.len(), "{what}");
                for (at, (p, g)) in plain.iter().zip(&general).enumerate() {
                    assert_eq!(p, g, "{what}: piece {at}");
                }
                seen.pieces += plain.len();
                seen.carrying += plain.iter().filter(|(_, carrying)| *carrying).count();
            }
        }
    }
}

#[test]
fn plain_sums_are_those_of_the_general_path() {
    let mut seen = Seen::default();
    let plain = |records, depth| Shape {
        records,
        depth,
        odd: false,
        out_of_order: None,
        other_kind: None,
    };
    for seed in 1..=40u64 {
        let mut next = crate::record::test_random(seed);
        let shape = match seed % 5 {
            0 => plain(9_000, 4),
            1 => Shape {
                odd: true,
                ..plain(6_000, 8)
            },
            // Deeper than the window: the general path keeps more open scopes aside.
            2 => plain(8_000, WINDOW + 300),
            3 => Shape {
                odd: true,
                ..plain(300, 3)
            },
            _ => plain(5_000, 30),
        };
        let (first, last) = records(seed, shape);
        let (second, _) = records(seed + 1_000, Shape { depth: 2, ..shape });
        let mut capture = Capture::from_records(vec![(7, first), (9, second)], 0, last);
        for thread in &mut capture.threads {
            let all = thread
                .chunks
                .iter()
                .flat_map(|c| c.records().to_vec())
                .collect();
            thread.chunks = chunked(all, &mut next);
        }
        // Ticks of 1.37 ns (rounded), a probe cost subtracted, a window cut at both ends, a
        // salvaged session.
        capture.clock.ns_per_tick = Some(1.37);
        if seed % 2 == 0 {
            let unit = PROBE_UNIT as u32;
            capture.clock.compensation = Compensation::Ticks {
                inner: (1 + next(3) as u32) * unit + 7,
                outer: next(3) as u32 * unit,
            };
        }
        if seed % 3 == 0 {
            capture.threads[0].from_tick = 1_000 + next(2_000);
            capture.end_tick = last - next(last / 4);
        }
        if seed % 7 == 0 {
            capture.salvaged = Some(capture.end_tick);
        }
        assert!(
            both_ways(&capture, &format!("seed {seed}"), &mut seen),
            "seed {seed}: given up"
        );
    }
    // What the short path gives up: the general path's.
    for seed in 1..=6u64 {
        let shape = Shape {
            out_of_order: (seed % 2 == 0).then_some(900 * seed as usize),
            other_kind: (seed % 2 == 1).then_some(900 * seed as usize),
            ..plain(6_000, 6)
        };
        let (records, last) = records(seed, shape);
        let capture = Capture::from_records(vec![(7, records)], 0, last);
        let shared = Shared::new(&capture, false, false);
        let sum = Sum {
            exact: true,
            stacks: false,
            calls: Calls::Sum,
            sites: true,
        };
        assert!(
            shared.plain(&capture.threads[0], sum).is_none(),
            "seed {seed}"
        );
        seen.given_up += 1;
    }
    // Every branch was taken.
    assert!(seen.plain >= 200, "{seen:?}");
    assert!(seen.tangled >= 5, "{seen:?}");
    assert!(seen.open_at_end >= 20, "{seen:?}");
    assert!(seen.drains >= 20, "{seen:?}");
    assert!(seen.pieces >= 500 && seen.carrying >= 20, "{seen:?}");
    assert_eq!(seen.given_up, 6, "{seen:?}");
    assert!(seen.counting_given_up >= 5, "{seen:?}");
}

/// Threads read from a capture file: their chunks' records made from the columns kept from
/// the check as the short path takes them (a chunk cut by the window from its records), the
/// same sums as the general path's.
#[test]
fn plain_sums_of_a_files_kept_columns_are_those_of_the_general_path() {
    let mut seen = Seen::default();
    let path = std::env::temp_dir().join(format!("tickscope-plain-{}.tscope", std::process::id()));
    for seed in 1..=8u64 {
        let shape = Shape {
            records: 20_000,
            depth: [4, 30, WINDOW + 100, 8][seed as usize % 4],
            odd: seed % 2 == 0,
            out_of_order: None,
            other_kind: None,
        };
        let (first, last) = records(seed, shape);
        let (second, _) = records(seed + 500, Shape { depth: 3, ..shape });
        let capture = Capture::from_records(vec![(7, first), (9, second)], 0, last);
        let mut bytes = Vec::new();
        capture.write_to(&mut bytes).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let mut read = Capture::read_all(&path).unwrap().remove(0);
        let kept = (read.threads.iter().flat_map(|t| &t.chunks)).filter(|c| c.kept().is_some());
        assert!(kept.count() >= 10, "seed {seed}: packed chunks kept");
        assert!(both_ways(&read, &format!("file, seed {seed}"), &mut seen));
        // A window that starts and ends inside chunks.
        read.threads[0].from_tick = 1_000 + last / 3;
        read.end_tick = last - last / 5;
        assert!(both_ways(
            &read,
            &format!("file cut, seed {seed}"),
            &mut seen
        ));
    }
    std::fs::remove_file(&path).unwrap();
    assert!(seen.plain >= 80 && seen.drains >= 20, "{seen:?}");
}
