//! Exact statistics and table output, with a mock clock whose ticks are nanoseconds.
//!
//! Every test here shares the process-wide mock, so they take `SERIAL` to run one at a time.
#![cfg(feature = "enabled")]

use std::sync::Arc;

use crate::common::{mock, serial};
use tickscope::table::SortBy;
use tickscope::{Profiler, scope};

/// main 100 ns { parse 60 ns { tokenize 10 ns, tokenize 20 ns, hash 5 ns } , parse 30 ns { } }
fn record_tree(m: &tickscope::clock::Mock) -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    m.increment(5u64); // session start -> main: outside every scope
    {
        let _main = scope!("main");
        m.increment(2u64);
        {
            let _parse = scope!("parse");
            m.increment(3u64);
            {
                let _t = scope!("tokenize");
                m.increment(10u64);
            }
            m.increment(4u64);
            {
                let _t = scope!("tokenize");
                m.increment(20u64);
            }
            {
                let _h = scope!("hash");
                m.increment(5u64);
            }
            m.increment(18u64); // parse = 3 + 10 + 4 + 20 + 5 + 18 = 60
        }
        {
            let _parse = scope!("parse");
            m.increment(30u64);
        }
        m.increment(8u64); // main = 2 + 60 + 30 + 8 = 100
    }
    m.increment(15u64); // stop 120 ns after start
    prof.stop();
    prof
}

#[test]
fn exact_total_self_min_max_avg() {
    let _serial = serial();
    let m = mock();
    let prof = record_tree(&m);
    let report = prof.report();
    assert_eq!(report.wall_ns, 120);
    assert_eq!(report.len(), 4);

    let main = report.get("main").unwrap();
    assert_eq!((main.calls, main.total_ns, main.self_ns), (1, 100, 10));
    assert_eq!((main.min_ns, main.max_ns, main.avg_ns()), (100, 100, 100));

    let parse = report.get("parse").unwrap();
    assert_eq!((parse.calls, parse.total_ns, parse.self_ns), (2, 90, 55));
    assert_eq!((parse.min_ns, parse.max_ns, parse.avg_ns()), (30, 60, 45));
    assert_eq!((parse.p50_ns, parse.p99_ns), (30, 60));

    let tokenize = report.get("tokenize").unwrap();
    assert_eq!(
        (tokenize.calls, tokenize.total_ns, tokenize.self_ns),
        (2, 30, 30)
    );
    assert_eq!(
        (tokenize.min_ns, tokenize.max_ns, tokenize.avg_ns()),
        (10, 20, 15)
    );

    let hash = report.get("hash").unwrap();
    assert_eq!((hash.calls, hash.total_ns, hash.self_ns), (1, 5, 5));
    // Percentages of the time in scopes: every row's self time added up, 10 + 55 + 30 + 5.
    assert_eq!(report.scope_ns, 100);
    assert_eq!((hash.total_percent, hash.self_percent), (5.0, 5.0));
    assert_eq!((main.total_percent, main.self_percent), (100.0, 10.0));
    assert_eq!((parse.total_percent, parse.self_percent), (90.0, 55.0));
    let self_sum: f64 = report.rows().iter().map(|r| r.self_percent).sum();
    assert_eq!(self_sum, 100.0);

    // Nesting as recorded.
    let trace = prof.trace();
    assert_eq!(trace.threads.len(), 1);
    let spans = &trace.threads[0].spans;
    let shape: Vec<(&str, u32, Option<u32>)> = spans
        .iter()
        .map(|s| (s.name(), s.depth, s.parent))
        .collect();
    assert_eq!(
        shape,
        [
            ("main", 0, None),
            ("parse", 1, Some(0)),
            ("tokenize", 2, Some(1)),
            ("tokenize", 2, Some(1)),
            ("hash", 2, Some(1)),
            ("parse", 1, Some(0)),
        ]
    );
    assert_eq!(trace.event_count, 12);
    assert!(spans.iter().all(|s| !s.open_at_stop));
}

#[test]
fn table_flat_sorted_limited() {
    let _serial = serial();
    let m = mock();
    let prof = record_tree(&m);
    let table = prof.table().to_string();
    let expected = "\
Name      Calls   Total  Total %   Self  Self %     Avg     Min     Max     P50     P99
---------------------------------------------------------------------------------------
main          1  100 ns    100.0  10 ns    10.0  100 ns  100 ns  100 ns  100 ns  100 ns
parse         2   90 ns     90.0  55 ns    55.0   45 ns   30 ns   60 ns   30 ns   60 ns
tokenize      2   30 ns     30.0  30 ns    30.0   15 ns   10 ns   20 ns   10 ns   20 ns
hash          1    5 ns      5.0   5 ns     5.0    5 ns    5 ns    5 ns    5 ns    5 ns
120 ns wall, 1 thread, 6 scopes, 0 dropped events
Total % and Self %: of 100 ns in scopes, all threads (every row's Self added up)
";
    assert_eq!(table, expected);

    let by_self = prof.table().sort_by(SortBy::SelfTime).limit(2).to_string();
    let names: Vec<&str> = by_self
        .lines()
        .skip(2)
        .take(2)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["parse", "tokenize"]);
    // The limit leaves the base as it is, and says what it hid.
    assert_eq!(
        by_self.lines().skip(4).collect::<Vec<_>>(),
        [
            "120 ns wall, 1 thread, 6 scopes, 0 dropped events",
            "Total % and Self %: of 100 ns in scopes, all threads (every row's Self added up)",
            "2 rows hidden by the limit of 2",
        ],
        "{by_self}"
    );

    let by_name = prof.table().sort_by(SortBy::Name).to_string();
    let names: Vec<&str> = by_name
        .lines()
        .skip(2)
        .take(4)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["hash", "main", "parse", "tokenize"]);
}

#[test]
fn table_tree_and_threads() {
    let _serial = serial();
    let m = mock();
    let prof = record_tree(&m);
    let tree = prof.table().tree(true).to_string();
    let expected = "\
Call tree     Calls   Total  Total %   Self  Self %
---------------------------------------------------
main              1  100 ns    100.0  10 ns    10.0
  parse           2   90 ns     90.0  55 ns    55.0
    tokenize      2   30 ns     30.0  30 ns    30.0
    hash          1    5 ns      5.0   5 ns     5.0
120 ns wall, 1 thread, 6 scopes, 0 dropped events
Total % and Self %: of 100 ns in scopes, all threads (every row's Self added up)
";
    assert_eq!(tree, expected);

    let by_thread = prof.table().by_thread(true).limit(1).to_string();
    let row = by_thread.lines().nth(2).unwrap();
    let thread = std::thread::current().name().unwrap().to_owned();
    assert!(row.starts_with(&thread), "{by_thread}");
    assert!(row.contains("main"), "{by_thread}");
}

#[test]
fn open_scope_at_stop_is_closed_and_marked() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    let outer = scope!("outer");
    m.increment(10u64);
    let inner = scope!("inner");
    m.increment(7u64);
    prof.stop();
    drop(inner);
    drop(outer);
    let report = prof.report();
    let outer = report.get("outer").unwrap();
    assert_eq!(
        (
            outer.calls,
            outer.total_ns,
            outer.self_ns,
            outer.open_at_stop
        ),
        (1, 17, 10, 1)
    );
    let inner = report.get("inner").unwrap();
    assert_eq!((inner.calls, inner.total_ns, inner.open_at_stop), (1, 7, 1));
    let table = prof.table().to_string();
    assert!(table.contains("outer *"), "{table}");
    assert!(
        table.ends_with("* 2 calls still open at stop, closed at the stop time\n"),
        "{table}"
    );
}

#[test]
fn out_of_order_drop_closes_the_right_scope() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    let a = scope!("a");
    m.increment(1u64);
    let b = scope!("b");
    m.increment(2u64);
    drop(a);
    m.increment(4u64);
    drop(b);
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("a").unwrap().total_ns, 3);
    assert_eq!(report.get("b").unwrap().total_ns, 6);
    assert_eq!(report.get("b").unwrap().open_at_stop, 0);
}

#[test]
fn snapshot_while_running() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    {
        let _g = scope!("done");
        m.increment(3u64);
    }
    let _open = scope!("running");
    m.increment(4u64);
    let live = prof.report();
    assert!(prof.is_running());
    assert_eq!(live.get("done").unwrap().total_ns, 3);
    assert_eq!(live.get("running").unwrap().open_at_stop, 1);
    assert_eq!(live.get("running").unwrap().total_ns, 4);
}

#[test]
fn table_by_arg_splits_rows_by_value() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    for (bytes, ns) in [(512u32, 10u64), (4096, 40), (512, 20)] {
        let _g = scope!("read", bytes = bytes);
        m.increment(ns);
    }
    {
        let _g = scope!("read");
        m.increment(5u64);
    }
    {
        let _g = scope!("parse", bytes = 512u32, file = "a");
        m.increment(7u64);
    }
    m.increment(18u64); // stop 100 ns after start
    prof.stop();
    let table = prof.table().by_arg("bytes").to_string();
    let expected = "\
Name   bytes  Calls  Total  Total %   Self  Self %    Avg    Min    Max    P50    P99
-------------------------------------------------------------------------------------
read   4096       1  40 ns     48.8  40 ns    48.8  40 ns  40 ns  40 ns  40 ns  40 ns
read   512        2  30 ns     36.6  30 ns    36.6  15 ns  10 ns  20 ns  10 ns  20 ns
parse  512        1   7 ns      8.5   7 ns     8.5   7 ns   7 ns   7 ns   7 ns   7 ns
read              1   5 ns      6.1   5 ns     6.1   5 ns   5 ns   5 ns   5 ns   5 ns
100 ns wall, 1 thread, 5 scopes, 0 dropped events
Total % and Self %: of 82 ns in scopes, all threads (every row's Self added up)
";
    assert_eq!(table, expected);

    // Sorted by name, a name's rows follow the argument's value (none first).
    let by_name = prof
        .table()
        .by_arg("bytes")
        .sort_by(SortBy::Name)
        .to_string();
    let rows: Vec<(&str, &str)> = by_name
        .lines()
        .skip(2)
        .take(4)
        .map(|l| (l[..5].trim_end(), l[7..12].trim_end()))
        .collect();
    assert_eq!(
        rows,
        [
            ("parse", "512"),
            ("read", ""),
            ("read", "4096"),
            ("read", "512")
        ]
    );

    // A key no scope recorded: one row per name, an empty column.
    let none = prof.table().by_arg("size").to_string();
    assert!(none.starts_with("Name   size  Calls"), "{none}");
    assert_eq!(
        none.lines().count(),
        6,
        "header, rule, 2 rows, footer of 2 lines:\n{none}"
    );

    // Split by thread or by origin first.
    let by_thread = prof.table().by_thread(true);
    assert_eq!(
        by_thread.clone().by_arg("bytes").to_string(),
        by_thread.to_string()
    );
    let by_origin = prof.table().by_origin(true);
    assert_eq!(
        by_origin.clone().by_arg("bytes").to_string(),
        by_origin.to_string()
    );
}

/// Two threads: `a` 30 ns holding `b` 10 ns here, `worker` 60 ns holding `b` 20 ns on a
/// spawned thread. The time in scopes is 20 + 30 + 40 = 90 ns over both threads.
#[test]
fn percentages_are_shares_of_the_time_in_scopes() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    {
        let _a = scope!("a");
        m.increment(10u64);
        {
            let _b = scope!("b");
            m.increment(10u64);
        }
        m.increment(10u64);
    }
    let worker = Arc::clone(&m);
    tickscope::thread::spawn(move || {
        let _w = scope!("worker");
        worker.increment(15u64);
        {
            let _b = scope!("b");
            worker.increment(20u64);
        }
        worker.increment(25u64);
    })
    .join()
    .unwrap();
    m.increment(1000u64); // outside every scope: no part of the base
    prof.stop();

    let report = prof.report();
    assert_eq!(report.scope_ns, 90);
    let shares = |name: &str| {
        let row = report.get(name).unwrap();
        (row.total_percent, row.self_percent)
    };
    assert_eq!(shares("worker"), (60.0 * 100.0 / 90.0, 40.0 * 100.0 / 90.0));
    assert_eq!(shares("b"), (30.0 * 100.0 / 90.0, 30.0 * 100.0 / 90.0));
    assert_eq!(shares("a"), (30.0 * 100.0 / 90.0, 20.0 * 100.0 / 90.0));
    // The two roots hold all the time in scopes.
    assert_eq!(shares("worker").0 + shares("a").0, 100.0);

    let table = prof.table().to_string();
    let cells = |name: &str| -> Vec<String> {
        let line = table.lines().find(|l| l.starts_with(name)).unwrap();
        let cells: Vec<&str> = line.split_whitespace().collect();
        // Name, Calls, Total (2 words), Total %, Self (2 words), Self %.
        vec![cells[4].to_owned(), cells[7].to_owned()]
    };
    assert_eq!(cells("worker"), ["66.7", "44.4"], "{table}");
    assert_eq!(cells("b "), ["33.3", "33.3"], "{table}");
    assert_eq!(cells("a "), ["33.3", "22.2"], "{table}");
    assert!(
        table.contains(
            "\nTotal % and Self %: of 90 ns in scopes, all threads (every row's Self added up)\n"
        ),
        "{table}"
    );

    // By thread the rows split, the base stays: `b`'s two rows add up to its row above.
    let report = tickscope::report::Report::by_thread(&prof.trace());
    let b: Vec<f64> = (report.rows().iter())
        .filter(|r| r.name == "b")
        .map(|r| r.self_percent)
        .collect();
    assert_eq!(b, [10.0 * 100.0 / 90.0, 20.0 * 100.0 / 90.0]);

    // JSON and CSV carry the same shares, the base and the rows the limit hid.
    let json = prof.table().limit(1).to_json();
    assert!(json.contains("\"schema\": 2,"), "{json}");
    assert!(json.contains("\"scope_ns\": 90,"), "{json}");
    assert!(json.contains("\"hidden_rows\": 2,"), "{json}");
    assert!(
        json.contains(&format!(
            "\"total_percent\": {}, \"self_percent\": {}",
            60.0 * 100.0 / 90.0,
            40.0 * 100.0 / 90.0
        )),
        "{json}"
    );
    assert!(
        json.contains("\"2 rows hidden by the limit of 1\""),
        "{json}"
    );
    let csv = prof.table().to_csv();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(
        header[12..15],
        ["total_percent", "self_percent", "open_at_stop"]
    );
    assert!(!csv.contains("hidden"), "{csv}");

    // Markdown: the base and the limit as paragraphs after the table.
    let markdown = prof.table().limit(2).to_markdown();
    assert!(
        markdown.ends_with(
            "\n\nTotal % and Self %: of 90 ns in scopes, all threads (every row's Self added up)\n\
             \n1 row hidden by the limit of 2\n"
        ),
        "{markdown}"
    );
}
