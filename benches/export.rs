//! Export speed and size: Chrome JSON, native Perfetto protobuf and folded stacks of a 1 M-scope
//! trace, written to a file, and the Perfetto packets encoded by tickscope's own encoder and
//! by prost (`perfetto_to_sink`, `perfetto_prost_to_sink`).
//!
//! `cargo bench --bench export`; prints bytes per scope once, criterion reports scopes per
//! second. Also times post-processing alone (raw events to report), in events per second.

use std::fs::File;
use std::io::BufWriter;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use tickscope::__private::{RawEvent, capture_from_records};
use tickscope::Callsite;
use tickscope::export::{chrome, folded, perfetto};
use tickscope::report::Report;

mod common;
#[path = "../tests/common/perfetto_pb.rs"]
mod perfetto_pb;

const OUTER: usize = 250_000;

fn bench(c: &mut Criterion) {
    // 250 000 × (outer + 3 inner) = 1 M scopes on one thread.
    let prof = common::requests_and_steps(OUTER);
    let trace = prof.trace();
    let scopes = trace.threads.iter().map(|t| t.spans.len()).sum::<usize>() as u64;
    let path = std::env::temp_dir().join(format!("tickscope-bench-{}.json", std::process::id()));

    let mut sized = Vec::new();
    chrome::write(&trace, &mut sized).unwrap();
    println!(
        "chrome JSON: {} bytes for {scopes} scopes = {:.1} bytes/scope",
        sized.len(),
        sized.len() as f64 / scopes as f64
    );

    let mut sized = Vec::new();
    perfetto::write(&trace, &mut sized).unwrap();
    println!(
        "perfetto protobuf: {} bytes for {scopes} scopes = {:.1} bytes/scope",
        sized.len(),
        sized.len() as f64 / scopes as f64
    );
    let mut absolute = Vec::new();
    perfetto::write_with(
        &trace,
        &mut absolute,
        perfetto::Options::new().delta_times(false),
    )
    .unwrap();
    println!(
        "perfetto protobuf, absolute times: {:.1} bytes/scope",
        absolute.len() as f64 / scopes as f64
    );
    let mut with_prost = Vec::new();
    perfetto_pb::write_with_prost(&trace, &mut with_prost);
    println!(
        "perfetto protobuf encoded by prost: {:.1} bytes/scope",
        with_prost.len() as f64 / scopes as f64
    );
    let pftrace = path.with_extension("pftrace");

    let mut g = c.benchmark_group("export");
    g.throughput(Throughput::Elements(scopes));
    g.sample_size(10);
    // A fresh file each time, as `Profiler::write_chrome_trace` writes (to a new temporary
    // file); removing the previous one is not timed.
    g.bench_function("chrome_json_to_file", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(&path);
            },
            |()| {
                let mut out = BufWriter::with_capacity(1 << 16, File::create(&path).unwrap());
                chrome::write(&trace, &mut out).unwrap();
                out.into_inner().unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    // The whole `Profiler::write_chrome_trace`: temporary file, fsync, rename.
    g.bench_function("profiler_write_chrome_trace_fsync", |b| {
        b.iter(|| prof.write_chrome_trace(&path).unwrap())
    });
    g.bench_function("perfetto_to_file", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(&pftrace);
            },
            |()| {
                let mut out = BufWriter::with_capacity(1 << 16, File::create(&pftrace).unwrap());
                perfetto::write(&trace, &mut out).unwrap();
                out.into_inner().unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("perfetto_to_sink", |b| {
        b.iter(|| perfetto::write(&trace, &mut std::io::sink()).unwrap())
    });
    // The same packets built as prost messages and encoded by prost (tests/mock/perfetto.rs checks
    // that they decode the same).
    g.bench_function("perfetto_prost_to_sink", |b| {
        b.iter(|| perfetto_pb::write_with_prost(&trace, &mut std::io::sink()))
    });
    g.bench_function("chrome_json_to_sink", |b| {
        b.iter(|| chrome::write(&trace, &mut std::io::sink()).unwrap())
    });
    g.bench_function("folded_to_file", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(&path);
            },
            |()| {
                let mut out = BufWriter::new(File::create(&path).unwrap());
                folded::write(&trace, &mut out, Default::default()).unwrap();
                out.into_inner().unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&pftrace);

    // Post-processing alone: pairing, nesting, tick conversion, then aggregation, on the same
    // shape of events (2 M raw events).
    static OUTER_SITE: Callsite =
        tickscope::__private::callsite("request", file!(), line!(), module_path!());
    static INNER_SITE: Callsite =
        tickscope::__private::callsite("step", file!(), line!(), module_path!());
    let (outer, inner) = (OUTER_SITE.id(), INNER_SITE.id());
    let mut events = Vec::with_capacity(OUTER * 8);
    let mut tick = 1_000_000u64;
    for _ in 0..OUTER {
        let outer_key = RawEvent::end_key(outer, tick);
        events.push(RawEvent::begin(outer, tick));
        for _ in 0..3 {
            events.push(RawEvent::begin(inner, tick + 3));
            events.push(RawEvent::end(RawEvent::end_key(inner, tick + 3), tick + 20));
            tick += 25;
        }
        events.push(RawEvent::end(outer_key, tick + 5));
        tick += 10;
    }
    let records = events.len() as u64;
    let capture = capture_from_records(vec![(1, events)], 0, tick);
    let mut g = c.benchmark_group("postprocess");
    g.throughput(Throughput::Elements(records));
    g.sample_size(10);
    g.bench_function("pair_convert_aggregate_2M_events", |b| {
        b.iter(|| Report::new(&capture.decode()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
