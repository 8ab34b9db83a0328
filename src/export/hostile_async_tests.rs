//! A hostile pass on async calls summed and written as the threads are read again
//! (`decode::call_stream`, `decode::call_order`): forged captures whose reports, counts,
//! exports and tables must be the decoded trace's, or be declined; never other numbers.

use std::sync::Arc;

use super::async_pieces_tests::exports_written_as_decoded;
use crate::capture::{Capture, Chunk};
use crate::decode::forged_async::Rng;
use crate::decode::forged_async::{FETCH, HANDLE, PARSE, QUERY, with_payload};
use crate::decode::summary::Summary;
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::report::summary_async_tests::assert_summary_is_decoded;
use crate::table::Table;
use crate::trace::Trace;

/// A callsite of the name of [`FETCH`]'s, elsewhere.
static FETCH_TOO: Callsite = Callsite::new("fetch", file!(), line!(), module_path!());

/// How [`hostile`] forges a session.
#[derive(Clone, Copy)]
pub(super) struct Forge {
    pub(super) seed: u64,
    pub(super) threads: usize,
    pub(super) steps: usize,
    /// Some threads' ticks step back now and then.
    pub(super) backwards: bool,
    /// Salvaged without its footer.
    pub(super) salvaged: bool,
    /// Some threads end with a lead whose payload is missing.
    pub(super) cut_lead: bool,
    /// The window starts late on some threads and ends before the last records.
    pub(super) narrow: bool,
    /// Every record at one tick.
    pub(super) flat: bool,
    /// The threads' clocks far apart (calls of walls near `u64::MAX / 2`).
    pub(super) far: bool,
}

/// Threads with a clock each (threads at different times, ties within and across them):
/// calls begun on one thread and polled or ended on others ahead of or behind it, polls
/// nested in polls of the same or other calls, ends while a poll of the call is open, span
/// ids reused while open and after an end, polls of unknown ids and of other callsites,
/// slices closed out of order, threads with no async record, the records cut in chunks of
/// 1 to 7 records (payloads apart from their leads), some chunks empty.
pub(super) fn hostile(forge: Forge) -> Capture {
    let mut rng = Rng::of_seed(forge.seed);
    let threads = forge.threads;
    let sites = [&FETCH, &HANDLE, &FETCH_TOO];
    let mut records: Vec<Vec<RawEvent>> = vec![Vec::new(); threads];
    let mut ticks: Vec<u64> = (0..threads as u64)
        .map(|t| 10 + rng.below(20) + if forge.far { t * (u64::MAX / 6) } else { 0 })
        .collect();
    let mut stacks: Vec<Vec<(&'static Callsite, u64)>> = vec![Vec::new(); threads];
    // Calls begun (some ended since): (span id, callsite).
    let mut calls: Vec<(u32, &'static Callsite)> = Vec::new();
    // Threads that make no async record.
    let plain = |t: usize| threads > 1 && t % 3 == 2;
    for _ in 0..forge.steps {
        let t = rng.below(threads as u64) as usize;
        let tick = &mut ticks[t];
        if !forge.flat {
            *tick += [0, 0, 0, 1, 1, 2, 5][rng.below(7) as usize];
        }
        if forge.backwards && rng.below(40) == 0 {
            *tick = tick.saturating_sub(3);
        }
        let tick = *tick;
        let (out, stack) = (&mut records[t], &mut stacks[t]);
        let pick = rng.below(16);
        match pick {
            0..=3 if !stack.is_empty() => {
                // Mostly the innermost; now and then one below it (dropped out of order).
                let at = if rng.below(6) == 0 {
                    rng.below(stack.len() as u64) as usize
                } else {
                    stack.len() - 1
                };
                let (site, began) = stack.remove(at);
                out.push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
            }
            4 | 5 if !plain(t) => {
                let site = sites[rng.below(3) as usize];
                let span = match (rng.below(5), calls.is_empty()) {
                    // An id used before: open or ended.
                    (0 | 1, false) => calls[rng.below(calls.len() as u64) as usize].0,
                    _ => 1 + rng.below(400) as u32,
                };
                out.extend(with_payload(RawKind::AsyncBegin, site, tick, span));
                calls.push((span, site));
            }
            6..=9 if !plain(t) => {
                let (span, site) = match (rng.below(12), calls.is_empty()) {
                    (0, _) | (_, true) => (5000 + rng.below(4) as u32, &FETCH),
                    (1, false) => (calls[rng.below(calls.len() as u64) as usize].0, &QUERY),
                    (2, false) => {
                        let (span, site) = calls[rng.below(calls.len() as u64) as usize];
                        let other = if std::ptr::eq(site, &FETCH) {
                            &HANDLE
                        } else {
                            &FETCH
                        };
                        (span, other)
                    }
                    _ => calls[calls.len() - 1 - rng.below(calls.len().min(6) as u64) as usize],
                };
                out.extend(with_payload(RawKind::PollBegin, site, tick, span));
                stack.push((site, tick));
            }
            10 | 11 if !plain(t) && !calls.is_empty() => {
                let (span, site) = calls[rng.below(calls.len() as u64) as usize];
                out.extend(with_payload(RawKind::AsyncEnd, site, tick, span));
            }
            12 if !plain(t) => {
                // Begin, poll and end at one tick, the poll's slice closing later.
                let span = 1 + rng.below(400) as u32;
                out.extend(with_payload(RawKind::AsyncBegin, &HANDLE, tick, span));
                out.extend(with_payload(RawKind::PollBegin, &HANDLE, tick, span));
                out.extend(with_payload(RawKind::AsyncEnd, &HANDLE, tick, span));
                stack.push((&HANDLE, tick));
                calls.push((span, &HANDLE));
            }
            _ => {
                let site = if stack.is_empty() { &QUERY } else { &PARSE };
                out.push(RawEvent::begin(site.id(), tick));
                stack.push((site, tick));
            }
        }
    }
    if forge.cut_lead {
        for (t, out) in records.iter_mut().enumerate() {
            if t % 2 == 0 {
                let kind = [RawKind::AsyncBegin, RawKind::PollBegin, RawKind::AsyncEnd][t % 3];
                out.push(RawEvent::new(kind, FETCH.id(), ticks[t] + 1));
            }
        }
    }
    let last = ticks.iter().copied().max().unwrap_or(0);
    let end = if forge.narrow {
        last * 3 / 4
    } else {
        last + 50
    };
    let thread_records: Vec<(u64, Vec<RawEvent>)> =
        (1..).zip(records).filter(|(_, r)| !r.is_empty()).collect();
    let mut capture = Capture::from_records(thread_records, 0, end);
    for thread in &mut capture.threads {
        let Chunk::Owned(all) = &thread.chunks[0] else {
            unreachable!("records made by hand")
        };
        let mut chunks = Vec::new();
        let mut rest = &all[..];
        while !rest.is_empty() {
            if rng.below(9) == 0 {
                chunks.push(Chunk::Owned(Vec::new()));
            }
            let n = (1 + rng.below(7) as usize).min(rest.len());
            chunks.push(Chunk::Owned(rest[..n].to_vec()));
            rest = &rest[n..];
        }
        thread.chunks = chunks;
        if forge.narrow && thread.id % 2 == 0 {
            thread.from_tick = 10 + rng.below(last / 3 + 1);
        }
    }
    if forge.salvaged {
        capture.salvaged = Some(100);
    }
    capture
}

/// What the summary of the captures `make` gives is the decoded trace's: its reports (by
/// thread or not), counts and salvage; each format's bytes written from pieces; the table's
/// text, JSON and CSV. `None` when the summary was declined. Panics when `must_sum` and it
/// was declined.
fn assert_as_decoded(make: &dyn Fn() -> Vec<Capture>, must_sum: bool) -> Option<u64> {
    let captures = make();
    let trace = Trace::from_captures(&captures);
    let summary = Summary::of(&captures);
    assert!(summary.is_some() || !must_sum, "declined");
    if let Some(summary) = &summary {
        assert_summary_is_decoded(summary, &trace);
    }
    let written = exports_written_as_decoded(&captures, &trace);
    // The calls are written from pieces when they are summed as read (of several sessions,
    // merged as the trace merges them).
    if must_sum {
        assert_eq!(written, 4);
    }
    let whole = Arc::new(trace);
    for by_thread in [false, true] {
        let decoded = Table::new(Arc::clone(&whole)).by_thread(by_thread);
        let summed = Table::from_captures(make()).by_thread(by_thread);
        assert_eq!(summed.to_string(), decoded.to_string(), "by {by_thread}");
        assert_eq!(summed.to_json(), decoded.to_json(), "by {by_thread}");
        assert_eq!(summed.to_csv(), decoded.to_csv(), "by {by_thread}");
    }
    summary.map(|s| s.calls())
}

pub(super) fn forge(seed: u64) -> Forge {
    Forge {
        seed,
        threads: 1 + seed as usize % 5,
        steps: 300,
        backwards: false,
        salvaged: false,
        cut_lead: false,
        narrow: false,
        flat: false,
        far: false,
    }
}

#[test]
fn hostile_sessions_of_threads_far_apart_in_time_sum_as_decoded() {
    for seed in 700..720 {
        let f = Forge {
            far: true,
            threads: 2 + seed as usize % 4,
            salvaged: seed % 2 == 0,
            ..forge(seed)
        };
        assert_as_decoded(&|| vec![hostile(f)], true);
    }
}

#[test]
fn hostile_sessions_at_one_tick_and_past_a_pairing_window_sum_as_decoded() {
    for seed in 500..520 {
        let f = Forge {
            flat: true,
            salvaged: seed % 2 == 0,
            ..forge(seed)
        };
        assert_as_decoded(&|| vec![hostile(f)], true);
    }
    // Threads of several pairing windows (spans final, and polls pending, as chunks come).
    for seed in 520..524 {
        let f = Forge {
            threads: 3,
            steps: 15_000,
            salvaged: seed % 2 == 0,
            narrow: seed == 523,
            ..forge(seed)
        };
        assert_as_decoded(&|| vec![hostile(f)], true);
    }
}

#[test]
fn hostile_sessions_sum_and_write_as_decoded() {
    let mut calls = 0;
    for seed in 0..60 {
        calls += assert_as_decoded(&|| vec![hostile(forge(seed))], true).unwrap();
    }
    assert!(calls > 2000, "{calls} calls");
}

#[test]
fn hostile_salvaged_sessions_and_cut_leads_sum_as_decoded() {
    for seed in 100..140 {
        let f = Forge {
            salvaged: seed % 2 == 0,
            cut_lead: seed % 3 != 0,
            ..forge(seed)
        };
        assert_as_decoded(&|| vec![hostile(f)], true);
    }
}

#[test]
fn hostile_sessions_in_narrow_windows_sum_as_decoded() {
    for seed in 400..440 {
        let f = Forge {
            narrow: true,
            salvaged: seed % 3 == 0,
            cut_lead: seed % 2 == 0,
            ..forge(seed)
        };
        assert_as_decoded(&|| vec![hostile(f)], true);
    }
}

#[test]
fn hostile_sessions_with_ticks_stepping_back_are_declined_or_as_decoded() {
    let mut declined = 0;
    for seed in 200..240 {
        let f = Forge {
            backwards: true,
            salvaged: seed % 4 == 0,
            ..forge(seed)
        };
        declined += u32::from(assert_as_decoded(&|| vec![hostile(f)], false).is_none());
    }
    assert!(declined > 0);
}

#[test]
fn hostile_sessions_several_with_and_without_calls() {
    let plain = || Capture::from_records(vec![(7, vec![RawEvent::begin(QUERY.id(), 5)])], 0, 9);
    for seed in 300..310 {
        let make = || vec![plain(), hostile(forge(seed)), plain()];
        assert_as_decoded(&make, true);
        let captures = make();
        let trace = Trace::from_captures(&captures);
        assert_eq!(exports_written_as_decoded(&captures, &trace), 4);
        assert_as_decoded(
            &|| vec![hostile(forge(seed)), plain(), hostile(forge(seed + 1))],
            true,
        );
    }
    // Sessions each of calls, beside one whose ticks step back (declined: all are decoded
    // whole) or not: never other bytes than the merged trace's.
    let mut declined = 0;
    for seed in 310..316 {
        let odd = Forge {
            backwards: seed % 2 == 0,
            salvaged: seed % 3 == 0,
            far: seed % 3 == 1,
            ..forge(seed)
        };
        let make = || {
            vec![
                hostile(forge(seed + 10)),
                hostile(odd),
                hostile(forge(seed + 20)),
            ]
        };
        declined += u32::from(assert_as_decoded(&make, !odd.backwards).is_none());
    }
    assert!(declined > 0);
}

#[test]
fn many_calls_open_at_the_stop_sum_as_decoded() {
    // 3,000 calls begun and polled on two threads, none ended: each waits for the stop.
    let make = || {
        let mut one = Vec::new();
        let mut two = Vec::new();
        for span in 1..=3_000u32 {
            let tick = 10 + u64::from(span);
            one.extend(with_payload(RawKind::AsyncBegin, &FETCH, tick, span));
            two.extend(with_payload(RawKind::PollBegin, &FETCH, tick, span));
            two.push(RawEvent::end(RawEvent::end_key(FETCH.id(), tick), tick));
        }
        vec![Capture::from_records(vec![(1, one), (2, two)], 0, 80_000)]
    };
    assert_eq!(assert_as_decoded(&make, true), Some(3_000));
}

#[test]
fn calls_spilled_to_a_file_keep_a_thread_id_of_all_ones() {
    // More calls wait behind the first than are held in memory, ended on a thread whose id
    // (a forged file's) is `u64::MAX`: they come back from the temporary file as they went.
    let make = || {
        let mut capture = crate::decode::forged_async::held_back(3_000);
        capture.threads[0].id = u64::MAX;
        vec![capture]
    };
    let captures = make();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.async_spans[1].end_thread, Some(u64::MAX));
    assert_eq!(exports_written_as_decoded(&captures, &trace), 4);
}

#[test]
fn hostile_sessions_with_thread_ids_repeated_or_zero_sum_as_decoded() {
    for seed in 600..610 {
        let make = || {
            let mut capture = hostile(Forge {
                threads: 4,
                salvaged: seed % 2 == 0,
                ..forge(seed)
            });
            for thread in &mut capture.threads {
                thread.id = if seed % 3 == 0 { 0 } else { thread.id % 2 };
            }
            vec![capture]
        };
        assert_as_decoded(&make, true);
    }
}

#[test]
fn calls_of_equal_totals_settled_out_of_the_order_they_began() {
    // `handle` begins first (10) and `fetch` next (11), each 30 ns long; `handle` is summed
    // last, once its poll on thread 2 ([10, 100]) is final. Then the same with two callsites
    // of one name.
    let make = || {
        let mut one = Vec::new();
        one.extend(with_payload(RawKind::AsyncBegin, &HANDLE, 10, 1));
        one.extend(with_payload(RawKind::AsyncBegin, &FETCH, 11, 2));
        one.extend(with_payload(RawKind::AsyncEnd, &HANDLE, 40, 1));
        one.extend(with_payload(RawKind::AsyncEnd, &FETCH, 41, 2));
        let mut two = Vec::new();
        two.extend(with_payload(RawKind::PollBegin, &HANDLE, 10, 1));
        two.push(RawEvent::end(RawEvent::end_key(HANDLE.id(), 10), 100));
        two.extend(with_payload(RawKind::PollBegin, &FETCH, 11, 2));
        two.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 11), 101));
        vec![Capture::from_records(vec![(1, one), (2, two)], 0, 200)]
    };
    assert_eq!(assert_as_decoded(&make, true), Some(2));
    let make = || {
        let mut one = Vec::new();
        one.extend(with_payload(RawKind::AsyncBegin, &FETCH_TOO, 10, 1));
        one.extend(with_payload(RawKind::AsyncBegin, &FETCH, 11, 2));
        one.extend(with_payload(RawKind::AsyncEnd, &FETCH_TOO, 40, 1));
        one.extend(with_payload(RawKind::AsyncEnd, &FETCH, 41, 2));
        let mut two = Vec::new();
        two.extend(with_payload(RawKind::PollBegin, &FETCH_TOO, 10, 1));
        two.push(RawEvent::end(RawEvent::end_key(FETCH_TOO.id(), 10), 100));
        two.extend(with_payload(RawKind::PollBegin, &FETCH, 11, 2));
        two.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 11), 101));
        vec![Capture::from_records(vec![(1, one), (2, two)], 0, 200)]
    };
    assert_eq!(assert_as_decoded(&make, true), Some(2));
}

#[test]
fn hostile_calls_spilled_to_a_file_are_written_as_decoded() {
    // A call open at the stop begun first, then 3,000 calls waiting behind it (more than
    // tests hold in memory): begun on
    // thread 1, polled on thread 2 (a parse inside) until after they end on thread
    // `u64::MAX`, every seventh begun again while open (no end thread), ids reused.
    let make = || {
        let (mut one, mut two, mut three) = (Vec::new(), Vec::new(), Vec::new());
        one.extend(with_payload(RawKind::AsyncBegin, &FETCH, 5, 1));
        for i in 0..3_000u64 {
            let (tick, span) = (10 + 4 * i, 2 + (i % 2_000) as u32);
            one.extend(with_payload(RawKind::AsyncBegin, &HANDLE, tick, span));
            two.extend(with_payload(RawKind::PollBegin, &HANDLE, tick, span));
            two.push(RawEvent::begin(PARSE.id(), tick + 1));
            two.push(RawEvent::end(
                RawEvent::end_key(PARSE.id(), tick + 1),
                tick + 2,
            ));
            two.push(RawEvent::end(
                RawEvent::end_key(HANDLE.id(), tick),
                tick + 3,
            ));
            if i % 7 == 0 {
                one.extend(with_payload(RawKind::AsyncBegin, &HANDLE, tick + 1, span));
                three.extend(with_payload(RawKind::AsyncEnd, &HANDLE, tick + 3, span));
            } else {
                three.extend(with_payload(RawKind::AsyncEnd, &HANDLE, tick + 2, span));
            }
        }
        let threads = vec![(1, one), (2, two), (u64::MAX, three)];
        vec![Capture::from_records(threads, 0, 400_000)]
    };
    assert_eq!(assert_as_decoded(&make, true), Some(3_430));
}
