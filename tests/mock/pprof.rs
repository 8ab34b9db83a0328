//! pprof profiles decoded by an independent protobuf implementation (prost, with the message
//! definitions of google/pprof's `profile.proto` for the fields tickscope writes): exact
//! stacks, calls and self times under a mock clock whose ticks are nanoseconds.
#![cfg(feature = "enabled")]

use std::collections::BTreeMap;

use crate::common::serial;
use prost::Message;
use tickscope::{Profiler, scope};

#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
    #[prost(int64, tag = "5")]
    start_line: i64,
}

#[test]
fn stacks_calls_and_self_times_decode_exactly() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    m.increment(5u64);
    {
        let _main = scope!("main");
        m.increment(2u64);
        for d in [10u64, 20] {
            let _parse = scope!("parse");
            m.increment(3u64);
            let _t = scope!("tokenize");
            m.increment(d);
        }
        m.increment(1u64);
    }
    prof.stop();
    let mut bytes = Vec::new();
    tickscope::export::pprof::write(&prof.trace(), &mut bytes).unwrap();
    let profile = Profile::decode(bytes.as_slice()).expect("a valid Profile message");

    let s = |i: i64| profile.string_table[i as usize].as_str();
    assert_eq!(s(0), "");
    let types: Vec<(&str, &str)> = profile
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(types, [("calls", "count"), ("wall", "nanoseconds")]);
    assert_eq!(s(profile.default_sample_type), "wall");
    assert_eq!(profile.period, 1);
    let window = prof.trace();
    assert_eq!(profile.time_nanos as u64, window.start_ns);
    assert_eq!(profile.duration_nanos as u64, window.wall_ns());

    // Each location has one line, of a function named by its scope, in this file.
    let function = |id: u64| profile.function.iter().find(|f| f.id == id).unwrap();
    let name_of = |location: u64| {
        let location = profile.location.iter().find(|l| l.id == location).unwrap();
        assert_eq!(location.line.len(), 1);
        let f = function(location.line[0].function_id);
        assert_eq!(s(f.filename), file!());
        assert_eq!(f.start_line, location.line[0].line);
        s(f.name)
    };
    let samples: BTreeMap<String, Vec<i64>> = profile
        .sample
        .iter()
        .map(|sample| {
            // Leaf first in pprof: reversed into root;…;leaf.
            let stack: Vec<&str> = sample
                .location_id
                .iter()
                .rev()
                .map(|&l| name_of(l))
                .collect();
            (stack.join(";"), sample.value.clone())
        })
        .collect();
    let expected: BTreeMap<String, Vec<i64>> = [
        ("main", vec![1, 2 + 1]),
        ("main;parse", vec![2, 3 + 3]),
        ("main;parse;tokenize", vec![2, 10 + 20]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(samples, expected);
    // Summed, they are the table's calls and self times.
    let report = prof.report();
    let (calls, self_ns): (u64, u64) = report
        .rows()
        .iter()
        .fold((0, 0), |(c, t), r| (c + r.calls, t + r.self_ns));
    let sum = |i: usize| samples.values().map(|v| v[i] as u64).sum::<u64>();
    assert_eq!((sum(0), sum(1)), (calls, self_ns));

    // A file: gzipped for .gz, and the same profile inside.
    let path = std::env::temp_dir().join(format!("tickscope-pprof-{}.pb.gz", std::process::id()));
    prof.write_pprof(&path).unwrap();
    let gz = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(&gz[..2], [0x1f, 0x8b]);
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut plain)
        .unwrap();
    assert_eq!(plain, bytes);
}

#[test]
fn allocations_are_sample_values_with_memory_tracking() {
    let _serial = serial();
    let _m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder()
        .current_thread()
        .track_memory(true)
        .start();
    {
        let _outer = scope!("outer");
        let kept = std::hint::black_box(vec![1u8; 1000]);
        {
            let _inner = scope!("inner");
            drop(std::hint::black_box(vec![2u64; 100]));
            drop(std::hint::black_box(vec![3u8; 24]));
        }
        drop(kept);
    }
    prof.stop();
    let mut bytes = Vec::new();
    tickscope::export::pprof::write(&prof.trace(), &mut bytes).unwrap();
    let profile = Profile::decode(bytes.as_slice()).unwrap();
    let s = |i: i64| profile.string_table[i as usize].as_str();
    let types: Vec<&str> = profile.sample_type.iter().map(|t| s(t.r#type)).collect();
    assert_eq!(types, ["calls", "wall", "alloc_space", "alloc_objects"]);
    let leaf = |sample: &Sample| {
        let location = sample.location_id[0];
        let location = profile.location.iter().find(|l| l.id == location).unwrap();
        let f = profile
            .function
            .iter()
            .find(|f| f.id == location.line[0].function_id)
            .unwrap();
        s(f.name).to_owned()
    };
    let by_leaf: BTreeMap<String, Vec<i64>> = profile
        .sample
        .iter()
        .map(|sample| (leaf(sample), sample.value.clone()))
        .collect();
    assert_eq!(by_leaf["outer"][2..], [1000, 1]);
    assert_eq!(by_leaf["inner"][2..], [800 + 24, 2]);
    // The report's own figures, the same.
    let report = prof.report();
    let inner = report.get("inner").unwrap().memory.unwrap();
    assert_eq!((inner.self_alloc_bytes, inner.self_allocs), (824, 2));
}
