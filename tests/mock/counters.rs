//! Counters, value distributions and instants (`counter!`, `value!`, `instant!`): exact
//! values with a mock clock whose ticks are nanoseconds, across threads, through the report,
//! the table, the Chrome export and capture files.
//!
//! Every test here shares the process-wide mock, so they take `SERIAL` to run one at a time.
#![cfg(feature = "enabled")]

use std::sync::Barrier;

use crate::common::{mock, serial};
use tickscope::trace::{CounterOp, InstantScope, Number, Trace, Value};
use tickscope::{Capture, Profiler, counter, instant, scope, value};

/// Runs `steps` one at a time, each on worker thread `steps[i].0` (0 or 1) of a session that
/// records both, with the mock clock advanced by 10 ns before each; returns the session and
/// the two workers' thread ids as the trace names them.
fn two_threads(m: &tickscope::clock::Mock, steps: &[(usize, &(dyn Fn() + Sync))]) -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    let barrier = Barrier::new(3);
    std::thread::scope(|s| {
        for me in 0..2 {
            let (prof, barrier) = (&prof, &barrier);
            s.spawn(move || {
                prof.join_current_thread();
                barrier.wait();
                for (worker, step) in steps {
                    barrier.wait();
                    if *worker == me {
                        step();
                    }
                    barrier.wait();
                }
            });
        }
        barrier.wait();
        for _ in steps {
            m.increment(10u64);
            barrier.wait();
            barrier.wait();
        }
    });
    m.increment(10u64);
    prof.stop();
    prof
}

#[test]
fn set_and_add_merge_in_time_order_across_threads() {
    let _serial = serial();
    let m = mock();
    let t0 = m.value();
    let prof = two_threads(
        &m,
        &[
            (0, &|| counter!("depth", set = 5)),
            (1, &|| counter!("depth", add = 3)),
            (0, &|| counter!("depth", add = -2i64)),
            (1, &|| counter!("depth", set = 1u8)),
            (0, &|| counter!("depth", add = 10usize)),
        ],
    );
    let trace = prof.trace();
    assert_eq!(trace.counters.len(), 1);
    let track = trace.counter("depth").unwrap();
    assert_eq!(track.name, "depth");
    assert_eq!(track.process, 0);
    let got: Vec<(u64, CounterOp, Number, Number)> = track
        .samples
        .iter()
        .map(|s| (s.ns - t0, s.op, s.amount, s.value))
        .collect();
    use CounterOp::{Add, Set};
    use Number::Int;
    assert_eq!(
        got,
        [
            (10, Set, Int(5), Int(5)),
            (20, Add, Int(3), Int(8)),
            (30, Add, Int(-2), Int(6)),
            (40, Set, Int(1), Int(1)),
            (50, Add, Int(10), Int(11)),
        ]
    );
    // The samples alternate between the two workers.
    let threads: Vec<u64> = track.samples.iter().map(|s| s.thread).collect();
    assert_ne!(threads[0], threads[1]);
    assert_eq!(
        threads,
        [threads[0], threads[1], threads[0], threads[1], threads[0]]
    );
    let stats = prof.report().counter("depth").unwrap().clone();
    assert_eq!(stats.samples, 5);
    assert_eq!(
        (stats.first, stats.last, stats.min, stats.max),
        (Int(5), Int(11), Int(1), Int(11))
    );
    assert_eq!(stats.mean, (5 + 8 + 6 + 1 + 11) as f64 / 5.0);
}

#[test]
fn add_from_many_threads_sums_exactly() {
    let _serial = serial();
    let _m = mock();
    const THREADS: u64 = 4;
    const ADDS: u64 = 5000;
    let prof = Profiler::builder().current_thread().start();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let prof = &prof;
            s.spawn(move || {
                prof.join_current_thread();
                for i in 0..ADDS {
                    // Amounts large enough that a float sum would round: exact as integers.
                    counter!("bytes", add = (1u64 << 40) + t * ADDS + i);
                    if i % 2 == 0 {
                        counter!("bytes", add = -1i32);
                    }
                }
            });
        }
    });
    prof.stop();
    let trace = prof.trace();
    let track = trace.counter("bytes").unwrap();
    assert_eq!(track.samples.len() as u64, THREADS * ADDS * 3 / 2);
    let n = THREADS * ADDS;
    let expected = (n * (1u64 << 40) + n * (n - 1) / 2 - n / 2) as i64;
    assert_eq!(track.last().unwrap().value, Number::Int(expected));
    // Every value is the running sum of the amounts before it, in the track's order.
    let mut sum = 0i64;
    for s in &track.samples {
        assert_eq!(s.op, CounterOp::Add);
        let Number::Int(amount) = s.amount else {
            panic!("integer amount expected: {:?}", s.amount)
        };
        sum += amount;
        assert_eq!(s.value, Number::Int(sum));
    }
    assert!(track.samples.is_sorted_by_key(|s| s.ns));
    assert_eq!(trace.thread_count() as u64, THREADS);
}

#[test]
fn floats_and_integers_outside_i64() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    counter!("load", set = 0.25f64);
    m.increment(1u64);
    counter!("load", add = 2);
    m.increment(1u64);
    counter!("load", add = 0.5f32);
    counter!("huge", set = u64::MAX);
    counter!("int", set = i64::MAX);
    counter!("int", add = 1);
    prof.stop();
    let trace = prof.trace();
    let load: Vec<Number> = trace.counter("load").unwrap().values().collect();
    assert_eq!(
        load,
        [
            Number::Float(0.25),
            Number::Float(2.25),
            Number::Float(2.75)
        ]
    );
    assert_eq!(
        trace.counter("huge").unwrap().last().unwrap().value,
        Number::Float(u64::MAX as f64)
    );
    // An integer sum that leaves i64's range becomes a float.
    let int: Vec<Number> = trace.counter("int").unwrap().values().collect();
    assert_eq!(
        int,
        [Number::Int(i64::MAX), Number::Float(i64::MAX as f64 + 1.0)]
    );
    let names: Vec<&str> = trace.counters.iter().map(|c| c.name).collect();
    assert_eq!(names, ["huge", "int", "load"]);
}

#[test]
fn value_distribution_statistics() {
    let _serial = serial();
    let m = mock();
    let t0 = m.value();
    let prof = Profiler::builder().current_thread().start();
    for v in (1..=100).rev() {
        m.increment(1u64);
        value!("batch", v);
    }
    value!("ratio", 0.5);
    value!("ratio", 1.5);
    prof.stop();
    let trace = prof.trace();
    let batch = trace.value_series("batch").unwrap();
    assert_eq!(batch.samples.len(), 100);
    assert_eq!(batch.samples[0].ns - t0, 1);
    assert_eq!(batch.samples[0].value, Number::Int(100));
    assert_eq!(batch.samples[99].value, Number::Int(1));
    let report = prof.report();
    let stats = report.value("batch").unwrap();
    assert_eq!(
        (
            stats.count,
            stats.min,
            stats.max,
            stats.mean,
            stats.p50,
            stats.p99
        ),
        (100, 1.0, 100.0, 50.5, 50.0, 99.0)
    );
    let ratio = report.value("ratio").unwrap();
    assert_eq!(
        (
            ratio.count,
            ratio.min,
            ratio.max,
            ratio.mean,
            ratio.p50,
            ratio.p99
        ),
        (2, 0.5, 1.5, 1.0, 0.5, 1.5)
    );
    // Values have no timeline: no counter tracks.
    assert!(trace.counters.is_empty());
}

#[test]
fn instants_with_scope_and_arguments() {
    let _serial = serial();
    let m = mock();
    let t0 = m.value();
    let prof = Profiler::builder().current_thread().start();
    {
        let _g = scope!("work");
        m.increment(5u64);
        instant!("cache_miss", key = 42u64, table = "users");
        m.increment(5u64);
        instant!("flush", process);
        instant!("epoch", process, n = -3);
        instant!("tick");
    }
    prof.stop();
    let trace = prof.trace();
    type Row = (&'static str, u64, InstantScope, Vec<(&'static str, Value)>);
    let got: Vec<Row> = trace
        .instants
        .iter()
        .map(|i| (i.name(), i.ns - t0, i.scope, i.args.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "cache_miss",
                5,
                InstantScope::Thread,
                vec![
                    ("key", Value::U64(42)),
                    ("table", Value::Str("users".into()))
                ]
            ),
            ("flush", 10, InstantScope::Process, vec![]),
            (
                "epoch",
                10,
                InstantScope::Process,
                vec![("n", Value::I64(-3))]
            ),
            ("tick", 10, InstantScope::Thread, vec![]),
        ]
    );
    // The instants' arguments are not the enclosing scope's.
    let work = &trace.threads[0];
    assert_eq!(work.spans.len(), 1);
    assert!(work.args.is_empty());
    assert_eq!(work.spans[0].end_ns - work.spans[0].start_ns, 10);
}

#[test]
fn no_session_records_nothing_and_evaluates_nothing() {
    let _serial = serial();
    let _m = mock();
    let evaluated = std::cell::Cell::new(0);
    let count = || {
        evaluated.set(evaluated.get() + 1);
        1
    };
    counter!("c", add = count());
    value!("v", count());
    instant!("i", n = count());
    assert_eq!(evaluated.get(), 0);
    let prof = Profiler::builder().current_thread().start();
    counter!("c", add = count());
    value!("v", count());
    instant!("i", n = count());
    prof.stop();
    assert_eq!(evaluated.get(), 3);
    let trace = prof.trace();
    assert_eq!(
        (
            trace.counters.len(),
            trace.values.len(),
            trace.instants.len()
        ),
        (1, 1, 1)
    );
    assert_eq!(trace.event_count, 2 + 2 + 2);
}

/// A session with two counters, a distribution and a scope, for the table and exports.
fn mixed(m: &tickscope::clock::Mock) -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    {
        let _g = scope!("produce");
        for (i, depth) in [3, 7, 2, 4].into_iter().enumerate() {
            m.increment(10u64);
            counter!("queue_depth", set = depth);
            counter!("bytes_sent", add = 100 * (i + 1));
            value!("batch_size", depth * 2);
        }
        instant!("drained", items = 4);
    }
    m.increment(10u64);
    prof.stop();
    prof
}

#[test]
fn table_sections_after_the_scopes() {
    let _serial = serial();
    let m = mock();
    let prof = mixed(&m);
    let table = prof.table().to_string();
    let sections = table.split_once("\nCounters\n").expect(&table).1;
    assert_eq!(
        sections,
        "\
Name         Samples  First  Last  Min   Max  Mean
--------------------------------------------------
bytes_sent         4    100  1000  100  1000   500
queue_depth        4      3     4    2     7     4

Values
Name        Count  Min  Max  Mean  P50  P99
-------------------------------------------
batch_size      4    4   14     8    6   14
"
    );
    assert!(table.starts_with("Name     Calls"), "{table}");
    // Sortable: by Max, largest first; by name.
    let by_max = prof
        .table()
        .sort_by(tickscope::table::SortBy::Max)
        .to_string();
    let counters = by_max.split_once("\nCounters\n").unwrap().1;
    let rows: Vec<&str> = counters.lines().skip(2).take(2).collect();
    assert!(rows[0].starts_with("bytes_sent"), "{by_max}");
    let by_min = prof
        .table()
        .sort_by(tickscope::table::SortBy::Min)
        .to_string();
    let counters = by_min.split_once("\nCounters\n").unwrap().1;
    let rows: Vec<&str> = counters.lines().skip(2).take(2).collect();
    assert!(rows[0].starts_with("bytes_sent"), "{by_min}");
    assert!(rows[1].starts_with("queue_depth"), "{by_min}");
    let by_avg = prof
        .table()
        .sort_by(tickscope::table::SortBy::Avg)
        .to_string();
    let counters = by_avg.split_once("\nCounters\n").unwrap().1;
    assert!(counters.lines().nth(2).unwrap().starts_with("bytes_sent"));
    // Limited like the scope rows.
    let one = prof.table().limit(1).to_string();
    let counters = one.split_once("\nCounters\n").unwrap().1;
    // Header, rule, one row; a blank line; "Values", header, rule, one row.
    assert_eq!(counters.lines().count(), 3 + 1 + 4);
}

#[test]
fn chrome_counter_and_instant_events() {
    let _serial = serial();
    let m = mock();
    let prof = mixed(&m);
    let trace = prof.trace();
    let mut out = Vec::new();
    tickscope::export::chrome::write(&trace, &mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let counter = |name: &str| -> Vec<(f64, i64)> {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .map(|e| {
                assert_eq!(e["tid"], 0);
                (
                    e["ts"].as_f64().unwrap(),
                    e["args"]["value"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        counter("queue_depth"),
        [(0.01, 3), (0.02, 7), (0.03, 2), (0.04, 4)]
    );
    assert_eq!(
        counter("bytes_sent"),
        [(0.01, 100), (0.02, 300), (0.03, 600), (0.04, 1000)]
    );
    let instants: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "i").collect();
    assert_eq!(instants.len(), 1);
    assert_eq!(instants[0]["name"], "drained");
    assert_eq!(instants[0]["s"], "t");
    assert_eq!(instants[0]["args"]["items"], 4);
    assert_eq!(instants[0]["tid"], trace.threads[0].id);
    // Values have no track of their own.
    assert!(!events.iter().any(|e| e["name"] == "batch_size"));
}

/// The capture's bytes, its chunks walked: (offset, type, version) of each.
fn chunks(bytes: &[u8]) -> Vec<(usize, u16, u16)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= bytes.len() {
        let kind = u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]);
        let version = u16::from_le_bytes([bytes[at + 6], bytes[at + 7]]);
        let len = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap()) as usize;
        out.push((at, kind, version));
        at += 16 + len.div_ceil(16) * 16;
    }
    out
}

fn same_extras(a: &Trace, b: &Trace) {
    assert_eq!(a.counters, b.counters);
    assert_eq!(a.values, b.values);
    // Callsites read from a file are other objects than the live ones: compare names.
    let plain = |t: &Trace| {
        t.instants
            .iter()
            .map(|i| (i.name(), i.ns, i.process, i.thread, i.scope, i.args.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(plain(a), plain(b));
}

#[test]
fn capture_round_trip() {
    let _serial = serial();
    let m = mock();
    let prof = mixed(&m);
    let live = prof.trace();
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    // One packed event chunk (type 9) of records of event chunk version 4 (bytes 20 and 21
    // of its content): the kinds of version 4, which version 5 keeps.
    let events: Vec<u16> = chunks(&bytes)
        .into_iter()
        .filter(|&(_, kind, _)| kind == 9)
        .map(|(at, _, _)| u16::from_le_bytes([bytes[at + 36], bytes[at + 37]]))
        .collect();
    assert_eq!(events, [4]);
    let read = Capture::from_bytes(&bytes).unwrap();
    assert_eq!(read.len(), 1);
    assert!(read[0].warnings().is_empty(), "{:?}", read[0].warnings());
    let decoded = read[0].decode();
    same_extras(&live, &decoded);
    assert_eq!(decoded.counters.len(), 2);
    assert_eq!(decoded.instants.len(), 1);
    // Two captures of one process: one track per counter, samples of both in time order.
    let twice = [bytes.clone(), bytes].concat();
    let both = Trace::from_captures(&Capture::from_bytes(&twice).unwrap());
    let depth = both.counter("queue_depth").unwrap();
    assert_eq!(depth.samples.len(), 8);
    assert_eq!(both.instants.len(), 2);
    assert_eq!(both.values[0].samples.len(), 8);
}

#[test]
fn event_chunks_of_versions_1_and_2_still_read() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    {
        let _g = scope!("old");
        m.increment(7u64);
    }
    prof.stop();
    // In the format before packed event chunks and 8-byte words (16-byte records), whose
    // versions are patched below.
    let mut written = Vec::new();
    tickscope::__private::as_records(|| prof.capture().write_to(&mut written)).unwrap();
    for version in [1u16, 2] {
        let mut bytes = written.clone();
        let mut patched = 0;
        for (at, kind, _) in chunks(&bytes) {
            if kind == 5 {
                bytes[at + 6..at + 8].copy_from_slice(&version.to_le_bytes());
                patched += 1;
            }
        }
        assert_eq!(patched, 1);
        let read = Capture::from_bytes(&bytes).unwrap();
        assert!(read[0].warnings().is_empty(), "{:?}", read[0].warnings());
        let trace = read[0].decode();
        assert_eq!(trace.threads[0].spans.len(), 1);
        assert_eq!(trace.threads[0].spans[0].name(), "old");
        assert_eq!(trace.threads[0].spans[0].duration_ns(), 7);
    }
}
