//! The sums of `decode::summary` give the reports of the decoded trace.

use super::{Report, Split};
use crate::capture::Capture;
use crate::decode::summary::{Summary, WINDOW};
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::trace::Trace;

static ROOT: Callsite = Callsite::new("root", file!(), line!(), module_path!());
static OUTER: Callsite = Callsite::new("outer", file!(), line!(), module_path!());
static INNER: Callsite = Callsite::new("inner", file!(), line!(), module_path!());

fn begin(site: &'static Callsite, tick: u64) -> RawEvent {
    RawEvent::begin(site.id(), tick)
}

fn end(site: &'static Callsite, began: u64, tick: u64) -> RawEvent {
    RawEvent::end(RawEvent::end_key(site.id(), began), tick)
}

/// The sums of `captures` give the reports, split by thread or not, and the span count
/// of their decoded trace.
fn assert_sums_match(captures: &[Capture]) -> Summary {
    let summary = Summary::of(captures).expect("summable");
    let trace = Trace::from_captures(captures);
    for split_threads in [false, true] {
        let decoded = Report::build(&trace, split_threads, Split::None);
        let summed = Report::from_summary(&summary, split_threads);
        assert!(
            summed == decoded,
            "split {split_threads}: {summed:?}\n!=\n{decoded:?}"
        );
    }
    let spans: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
    assert_eq!(summary.spans(), spans);
    assert_eq!(summary.trace.threads.len(), trace.threads.len());
    assert!(summary.trace.threads.iter().all(|t| t.spans.is_empty()));
    summary
}

#[test]
fn sums_are_exact() {
    // outer [100, 200] holds inner [120, 150] and inner [160, 170]; an inner still open
    // at the end (300) is closed there.
    let records = vec![
        begin(&OUTER, 100),
        begin(&INNER, 120),
        end(&INNER, 120, 150),
        begin(&INNER, 160),
        end(&INNER, 160, 170),
        end(&OUTER, 100, 200),
        begin(&INNER, 250),
    ];
    let captures = [Capture::from_records(vec![(1, records)], 0, 300)];
    let summary = assert_sums_match(&captures);
    let sites = &summary.threads[0].sites;
    assert_eq!(sites.len(), 2);
    assert_eq!(sites[0].callsite.name(), "outer");
    assert_eq!(
        (sites[0].durations.exact(), sites[0].self_ns, sites[0].open),
        (Some(&[100][..]), 60, 0)
    );
    assert_eq!(sites[1].callsite.name(), "inner");
    assert_eq!(
        (sites[1].durations.exact(), sites[1].self_ns, sites[1].open),
        (Some(&[30, 10, 50][..]), 90, 1)
    );
    assert_eq!(summary.spans(), 4);
}

#[test]
fn spans_let_go_early_sum_like_the_trace() {
    let mut threads = Vec::new();
    // Requests of three scopes, many windows of them.
    let mut records = Vec::new();
    for i in 0..3 * WINDOW as u64 {
        let t = i * 100;
        records.extend([
            begin(&OUTER, t),
            begin(&INNER, t + 10),
            end(&INNER, t + 10, t + 10 + i % 13),
            begin(&INNER, t + 40),
            end(&INNER, t + 40, t + 41 + i % 7),
            end(&OUTER, t, t + 60 + i % 5),
        ]);
    }
    threads.push((1, records));
    // A root open from start to end around many windows of scopes: it stays while its
    // children go.
    let mut records = vec![begin(&ROOT, 0)];
    for i in 0..3 * WINDOW as u64 {
        let t = 10 + i * 20;
        records.extend([begin(&INNER, t), end(&INNER, t, t + 5 + i % 3)]);
    }
    threads.push((2, records));
    // Scopes nested deeper than a window, closed in order.
    let depth = 2 * WINDOW as u64 + 3;
    let mut records: Vec<RawEvent> = (0..depth).map(|i| begin(&OUTER, 10 + i)).collect();
    records.extend((0..depth).rev().map(|i| end(&OUTER, 10 + i, 100_000 - i)));
    threads.push((3, records));
    // Guards dropped out of order: each outer ends before its inner, which then counts
    // in the outer's time only up to the outer's end; and an end with no entry.
    let mut records = vec![end(&INNER, 1, 2)];
    for i in 0..3 * WINDOW as u64 {
        let t = 10 + i * 100;
        records.extend([
            begin(&OUTER, t),
            begin(&INNER, t + 10),
            end(&OUTER, t, t + 30),
            begin(&INNER, t + 40),
            end(&INNER, t + 10, t + 50 + i % 11),
            end(&INNER, t + 40, t + 60),
        ]);
    }
    // The last ones stay open at the end of the window.
    records.extend([begin(&OUTER, 900_000), begin(&INNER, 900_001)]);
    threads.push((4, records));
    let captures = [Capture::from_records(threads, 0, 1_000_000)];
    let summary = assert_sums_match(&captures);
    let root = summary.threads[1]
        .sites
        .iter()
        .find(|s| s.callsite.name() == "root");
    assert_eq!(root.map(|s| (s.durations.count(), s.open)), Some((1, 1)));
    let nested = &summary.threads[2].sites[0];
    assert_eq!(nested.durations.count(), depth);
    assert_eq!(
        summary.spans(),
        3 * 3 * WINDOW + 1 + 3 * WINDOW + depth as usize + 3 * 3 * WINDOW + 2
    );
}

#[test]
fn several_captures_sum_like_their_merged_trace() {
    let session = |thread: u64, shift: u64| {
        let records = vec![
            begin(&OUTER, shift + 10),
            begin(&INNER, shift + 20),
            end(&INNER, shift + 20, shift + 25 + thread),
            end(&OUTER, shift + 10, shift + 40),
        ];
        Capture::from_records(vec![(thread, records)], shift, shift + 100)
    };
    let captures = [session(1, 0), session(2, 1000), session(1, 5000)];
    let summary = assert_sums_match(&captures);
    assert_eq!(summary.threads.len(), 3);
    assert_eq!(summary.spans(), 6);
}

#[test]
fn async_calls_and_scopes_with_tracked_memory_are_summed_with_their_memory() {
    // A call polled once, counting an allocation of 64 bytes in its poll.
    let records = vec![
        RawEvent::new(RawKind::AsyncBegin, OUTER.id(), 10),
        RawEvent::payload(5, 0),
        RawEvent::new(RawKind::PollBegin, OUTER.id(), 10),
        RawEvent::payload(5, 0),
        RawEvent::new(RawKind::AllocCount, 1, 64),
        end(&OUTER, 10, 20),
        RawEvent::new(RawKind::AsyncEnd, OUTER.id(), 20),
        RawEvent::payload(5, 0),
    ];
    let captures = [Capture::from_records(vec![(1, records)], 0, 100)];
    assert!(captures[0].memory.is_on());
    let summary = Summary::of(&captures).expect("summed");
    let trace = Trace::from_captures(&captures);
    super::summary_async_tests::assert_summary_is_decoded(&summary, &trace);
    let call = &summary.threads[0].calls[0];
    let memory = (call.memory.self_allocs, call.memory.self_alloc_bytes);
    assert_eq!((call.count, memory), (1, (1, 64)));
    let records = vec![
        begin(&OUTER, 10),
        RawEvent::new(RawKind::AllocCount, 1, 64),
        end(&OUTER, 10, 20),
    ];
    let captures = [Capture::from_records(vec![(1, records)], 0, 100)];
    assert!(captures[0].memory.is_on());
    // Tracked memory is summed, with each row's memory figures.
    let summary = assert_sums_match(&captures);
    assert_eq!(summary.threads[0].sites[0].memory.self_allocs, 1);
    assert_eq!(summary.threads[0].sites[0].memory.self_alloc_bytes, 64);
}

#[test]
fn quantiles_past_the_budget_come_from_histograms() {
    // 100 `outer` calls: 99 of 1 ms and one of 5 ms; 100 `inner` calls of 300, 310, ...,
    // 1290 ns, after them.
    let mut records = Vec::new();
    for i in 0..100u64 {
        let t = i * 10_000_000;
        let outer = if i == 42 { 5_000_000 } else { 1_000_000 };
        records.extend([
            begin(&OUTER, t),
            end(&OUTER, t, t + outer),
            begin(&INNER, t + 6_000_000),
            end(&INNER, t + 6_000_000, t + 6_000_300 + 10 * i),
        ]);
    }
    let captures = [Capture::from_records(vec![(1, records)], 0, 1_000_000_000)];
    let row = |report: &Report, name: &str| {
        let row = report.rows().iter().find(|r| r.name == name).unwrap();
        (
            row.calls,
            row.total_ns,
            row.min_ns,
            row.max_ns,
            row.p50_ns,
            row.p99_ns,
        )
    };
    let exact = Report::from_summary(&Summary::of_with(&captures, true, false).unwrap(), false);
    assert!(!exact.approximate_quantiles);
    assert!(exact == Report::build(&Trace::from_captures(&captures), false, Split::None));
    assert_eq!(
        row(&exact, "outer"),
        (100, 104_000_000, 1_000_000, 5_000_000, 1_000_000, 1_000_000)
    );
    assert_eq!(row(&exact, "inner"), (100, 79_500, 300, 1290, 790, 1280));
    let binned = Report::from_summary(&Summary::of_with(&captures, false, false).unwrap(), false);
    assert!(binned.approximate_quantiles);
    // 1 ms lies in the bucket 999_424..=1_001_471, whose middle is 1_000_447 (0.045 % off);
    // 790 in 790..=791 (middle 790); 1280 in 1280..=1283 (middle 1281).
    assert_eq!(
        row(&binned, "outer"),
        (100, 104_000_000, 1_000_000, 5_000_000, 1_000_447, 1_000_447)
    );
    assert_eq!(row(&binned, "inner"), (100, 79_500, 300, 1290, 790, 1281));
    // Everything else is the exact report's.
    let (mut a, mut b) = (exact.clone(), binned.clone());
    for r in a.rows.iter_mut().chain(b.rows.iter_mut()) {
        (r.p50_ns, r.p99_ns) = (0, 0);
    }
    b.approximate_quantiles = false;
    assert!(a == b);
}
