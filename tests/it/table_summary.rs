//! `Table::from_captures`, which sums a flat table straight from the records (what
//! `tickscope table` prints), prints exactly what the table of the decoded trace prints,
//! for every setting, and falls back to the trace where sums cannot stand for the spans.

use std::sync::Arc;
use std::task::Poll;

use crate::common::{YieldOnce, poll_once};
use tickscope::table::{SortBy, Table};
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, counter, instant, profile, scope, value};

/// The capture file `prof` writes, as bytes.
fn file(prof: &Profiler) -> Vec<u8> {
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    bytes
}

/// A table setting, named.
type Setting = (String, Box<dyn Fn(Table) -> Table>);

/// Every table setting `tickscope table` offers.
fn settings() -> Vec<Setting> {
    let mut all: Vec<Setting> = Vec::new();
    for sort in SortBy::ALL {
        for by_thread in [false, true] {
            for limit in [None, Some(2)] {
                all.push((
                    format!("sort {sort:?} by_thread {by_thread} limit {limit:?}"),
                    Box::new(move |t: Table| {
                        let t = t.sort_by(sort).by_thread(by_thread);
                        match limit {
                            Some(n) => t.limit(n),
                            None => t,
                        }
                    }),
                ));
            }
        }
    }
    all.push(("tree".into(), Box::new(|t: Table| t.tree(true))));
    all.push((
        "tree by thread, limit 3".into(),
        Box::new(|t: Table| t.tree(true).by_thread(true).limit(3)),
    ));
    all.push(("by origin".into(), Box::new(|t: Table| t.by_origin(true))));
    all.push(("by arg".into(), Box::new(|t: Table| t.by_arg("bytes"))));
    all
}

/// For every setting, the table summed from the captures of `bytes` is the decoded one;
/// returns the default table.
fn assert_same_tables(bytes: &[u8]) -> String {
    let captures = || Capture::from_bytes(bytes).unwrap();
    let trace = Arc::new(Trace::from_captures(&captures()));
    // One table from captures serves every setting, as a clone: what it made is shared.
    let summed = Table::from_captures(captures());
    for (name, setting) in settings() {
        let expected = setting(Table::new(Arc::clone(&trace))).to_string();
        assert_eq!(setting(summed.clone()).to_string(), expected, "{name}");
        assert_eq!(
            setting(Table::from_captures(captures())).to_string(),
            expected,
            "{name}, a table of its own"
        );
    }
    summed.to_string()
}

/// A row's cells, by name (the first row of that name).
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    let line = table
        .lines()
        .find(|l| l.split("  ").next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"));
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// A small server on three threads with everything a session records but memory and async
/// calls: nested scopes, arguments, a link, counters, values, instants, guards dropped out of
/// order, and a scope still open at stop.
fn server() -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    let link = tickscope::link();
    std::thread::scope(|s| {
        for t in 0..3u32 {
            let prof = prof.clone();
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    prof.join_current_thread();
                    for i in 0..200u32 {
                        let _request = scope!("request", bytes = 512 * (i % 3));
                        {
                            let _parse = scope!("parse");
                        }
                        let outer = scope!("outer");
                        let inner = scope!("inner");
                        drop(outer); // out of order: inner outlives outer
                        drop(inner);
                        counter!("queue", add = 1);
                        value!("batch", f64::from(i % 7));
                    }
                    let _served = scope!("served", follows = link);
                    instant!("done");
                })
                .unwrap();
        }
    });
    let open = scope!("still open");
    prof.stop();
    drop(open);
    prof
}

#[test]
fn summed_tables_are_the_decoded_tables() {
    let prof = server();
    let bytes = file(&prof);
    let table = assert_same_tables(&bytes);
    // The numbers: 3 threads × 200 requests.
    assert_eq!(row(&table, "request")[1], "600");
    assert_eq!(row(&table, "inner")[1], "600");
    assert_eq!(row(&table, "served")[1], "3");
    assert_eq!(row(&table, "still open *")[1], "1");
    assert!(table.contains(", 2404 scopes, 0 dropped events"), "{table}");
    assert!(table.contains("\nCounters\n"), "{table}");
    assert!(table.contains("\nValues\n"), "{table}");
    // What the session itself prints.
    assert_eq!(table, prof.table().to_string());
}

#[test]
fn concatenated_sessions_sum_like_their_merged_trace() {
    let (first, second) = (server(), server());
    let both = [file(&first), file(&second)].concat();
    let table = assert_same_tables(&both);
    assert_eq!(row(&table, "request")[1], "1200");
    assert!(table.contains(", 4808 scopes, 0 dropped events"), "{table}");
}

#[profile]
async fn fetch() -> u32 {
    YieldOnce::default().await;
    7
}

#[test]
fn async_calls_and_memory_are_counted_from_the_trace() {
    let prof = Profiler::builder().current_thread().start();
    {
        let _g = scope!("poller");
        let mut call = Box::pin(fetch());
        assert!(poll_once(call.as_mut()).is_pending());
        assert_eq!(poll_once(call.as_mut()), Poll::Ready(7));
    }
    prof.stop();
    let table = assert_same_tables(&file(&prof));
    // One call of two polls.
    assert_eq!(row(&table, "fetch")[1], "1");

    let prof = Profiler::builder()
        .current_thread()
        .track_memory(true)
        .start();
    for _ in 0..3 {
        let _g = scope!("alloc");
        std::hint::black_box(vec![1u8; 100]);
    }
    prof.stop();
    let table = assert_same_tables(&file(&prof));
    assert!(table.starts_with("Name   Calls"), "{table}");
    assert!(table.lines().next().unwrap().ends_with("Peak"), "{table}");
    assert_eq!(row(&table, "alloc")[1], "3");
}
