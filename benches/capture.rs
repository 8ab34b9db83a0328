//! Capture file speed and size: a 1 M-scope capture written to memory and to a file, and read
//! back and decoded; then what the `tickscope` command does with a 10 M-event capture file.
//!
//! `cargo bench --bench capture`; prints bytes per event once, criterion reports bytes per
//! second (of the capture file) for each step of the `capture` group. The `cli_10m` group
//! reads a file of 10 M records (5 M scopes of a small server, ten nested scopes a request, on
//! four threads) the way the command does, from the file to the output, and reports events
//! per second for `tickscope table` (read, decode, aggregate, format) and scopes per second
//! for `tickscope convert` to Chrome JSON (read, decode, write). The `pack` group packs and
//! unpacks the 4096-record chunks of that workload's records (one thread's), as capture
//! writers and readers do, and reports bytes per second of raw records (16 bytes each).

use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, SamplingMode, Throughput, criterion_group};
use tickscope::Capture;
use tickscope::export::chrome;
use tickscope::table::Table;

mod common;

const OUTER: usize = 250_000;

/// Records in the capture of the `cli_10m` group, and the threads that recorded them.
const CLI_EVENTS: u64 = 10_000_000;
const CLI_THREADS: u64 = 4;

fn bench(c: &mut Criterion) {
    // 250 000 × (outer + 3 inner) = 1 M scopes, 2 M records, on one thread.
    let prof = common::requests_and_steps(OUTER);
    let capture = prof.capture();
    let path = scratch("tscope");

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

/// What `tickscope table` and `tickscope convert` do with a 10 M-event capture file, from the
/// file to their output.
fn cli(c: &mut Criterion) {
    let (prof, events) = common::server_session(CLI_THREADS, CLI_EVENTS);
    let path = scratch("10m.tscope");
    prof.write_capture(&path).unwrap();
    drop(prof);
    let json = scratch("10m.json");
    let trace = Capture::read(&path).unwrap().decode();
    let scopes = trace.threads.iter().map(|t| t.spans.len()).sum::<usize>() as u64;
    let rows = Table::new(Arc::new(trace)).to_string().lines().count();
    println!(
        "cli capture: {} bytes, {events} events, {scopes} scopes on {CLI_THREADS} threads, \
         table of {rows} lines",
        std::fs::metadata(&path).unwrap().len()
    );

    let mut g = c.benchmark_group("cli_10m");
    // A second or so an iteration: ten samples of one or two iterations each.
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(15));
    // `tickscope table FILE`: read, decode, aggregate and format (the output is a few lines).
    g.throughput(Throughput::Elements(events));
    g.bench_function("table", |b| {
        b.iter(|| {
            let trace = Capture::read(&path).unwrap().decode();
            Table::new(Arc::new(trace)).to_string()
        })
    });
    // `tickscope convert FILE -o OUT.json`: read, decode, Chrome JSON into a buffered file
    // (a fresh one each time; removing the previous one is not timed), and into a sink, to
    // tell the file system's share.
    g.throughput(Throughput::Elements(scopes));
    g.bench_function("convert_json_to_file", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(&json);
            },
            |()| {
                let trace = Capture::read(&path).unwrap().decode();
                let mut out = BufWriter::with_capacity(1 << 16, File::create(&json).unwrap());
                chrome::write(&trace, &mut out).unwrap();
                out.into_inner().unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("convert_json_to_sink", |b| {
        b.iter(|| {
            let trace = Capture::read(&path).unwrap().decode();
            chrome::write(&trace, &mut std::io::sink()).unwrap()
        })
    });
    g.finish();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&json);
}

/// Packing and unpacking the records of the `cli_10m` workload, a chunk of 4096 at a time
/// (what the stream writer and `Capture::write_to` do for each chunk, and a reader for each
/// packed chunk), on one core; throughput in raw records' bytes.
fn pack(c: &mut Criterion) {
    use tickscope::__private::{capture_records, pack_records, unpack_records};

    let (prof, _) = common::server_session(1, 2_000_000);
    let capture = prof.capture();
    drop(prof);
    let records: Vec<_> = capture_records(&capture)
        .into_iter()
        .flat_map(|(_, r)| r)
        .collect();
    let chunks: Vec<_> = records.chunks(4096).collect();
    let raw = (records.len() * 16) as u64;
    let mut out = Vec::new();
    let packed: Vec<Vec<u8>> = chunks
        .iter()
        .map(|chunk| {
            pack_records(chunk, &mut out).unwrap();
            out.clone()
        })
        .collect();
    let bytes: usize = packed.iter().map(|p| p.len() + 16).sum();
    println!(
        "packed: {} records in {bytes} bytes of chunks = {:.3} bytes/record, {:.1} x smaller",
        records.len(),
        bytes as f64 / records.len() as f64,
        raw as f64 / bytes as f64
    );
    let mut g = c.benchmark_group("pack");
    g.throughput(Throughput::Bytes(raw));
    g.sample_size(20);
    g.bench_function("pack_4096", |b| {
        b.iter(|| {
            for chunk in &chunks {
                pack_records(chunk, &mut out).unwrap();
            }
        })
    });
    let mut back = Vec::new();
    g.bench_function("unpack_4096", |b| {
        b.iter(|| {
            for content in &packed {
                unpack_records(content, &mut back).unwrap();
            }
        })
    });
    g.finish();
}

/// A path in the temporary directory, unique to this process.
fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tickscope-bench-{}-{name}", std::process::id()))
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    targets = bench, cli, pack
}

/// `TICKSCOPE_CLI_CAPTURE=PATH cargo bench --bench capture` writes the capture of the
/// `cli_10m` group to `PATH` and exits, for timing the `tickscope` command itself as a process
/// (`scripts/cli_speed.sh`; unpacked with `TICKSCOPE_CLI_UNPACKED=1`); without it, the benches
/// run.
fn main() {
    if let Some(path) = std::env::var_os("TICKSCOPE_CLI_CAPTURE") {
        let (prof, events) = common::server_session(CLI_THREADS, CLI_EVENTS);
        // `TICKSCOPE_CLI_UNPACKED=1`: event chunks as recorded, 8 bytes an entry or exit (the
        // format of builds without packing, for comparisons).
        if std::env::var_os("TICKSCOPE_CLI_UNPACKED").is_some_and(|v| v == "1") {
            tickscope::__private::unpacked(|| prof.write_capture(&path)).unwrap();
        } else {
            prof.write_capture(&path).unwrap();
        }
        println!(
            "wrote {}: {} bytes, {events} events on {CLI_THREADS} threads",
            std::path::Path::new(&path).display(),
            std::fs::metadata(&path).unwrap().len()
        );
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
