//! Capture file speed and size: a 1 M-scope capture written to memory and to a file, and read
//! back and decoded.
//!
//! `cargo bench --bench capture`; prints bytes per event once, criterion reports bytes per
//! second (of the capture file) for each step.

use std::fs::File;
use std::io::BufWriter;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use tickscope::{Capture, Profiler, scope};

const OUTER: usize = 250_000;

fn bench(c: &mut Criterion) {
    // 250 000 × (outer + 3 inner) = 1 M scopes, 2 M records, on one thread.
    let prof = Profiler::builder().current_thread().start();
    for _ in 0..OUTER {
        let _o = scope!("request");
        for _ in 0..3 {
            let _i = scope!("step");
        }
    }
    prof.stop();
    let capture = prof.capture();
    let path = std::env::temp_dir().join(format!("tickscope-bench-{}.tscope", std::process::id()));

    let mut memory = Vec::new();
    let size = capture.write_to(&mut memory).unwrap();
    let events = capture.record_count();
    println!(
        "capture file: {size} bytes for {events} events = {:.3} bytes/event",
        size as f64 / events as f64
    );

    let mut g = c.benchmark_group("capture");
    g.throughput(Throughput::Bytes(size));
    g.sample_size(10);
    g.bench_function("write_to_vec", |b| {
        b.iter(|| {
            memory.clear();
            capture.write_to(&mut memory).unwrap()
        })
    });
    // A fresh file each time, buffered; removing the previous one is not timed.
    g.bench_function("write_to_file", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(&path);
            },
            |()| {
                let mut out = BufWriter::with_capacity(1 << 16, File::create(&path).unwrap());
                capture.write_to(&mut out).unwrap();
                out.into_inner().unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    // The whole `Profiler::write_capture`: temporary file, fsync, rename.
    g.bench_function("profiler_write_capture_fsync", |b| {
        b.iter(|| prof.write_capture(&path).unwrap())
    });
    g.bench_function("read", |b| b.iter(|| Capture::read(&path).unwrap()));
    g.bench_function("read_decode", |b| {
        b.iter(|| Capture::read(&path).unwrap().decode())
    });
    g.bench_function("decode_live", |b| b.iter(|| capture.decode()));
    g.finish();
    let _ = std::fs::remove_file(&path);
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
