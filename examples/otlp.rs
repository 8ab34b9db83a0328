//! OTLP traces and pprof profiles: a small workload of requests (a parse and a few queries
//! each, with arguments; an instant per parse and a counter of the rows queried, which become
//! span events), its table printed, written as `otlp.otlp.json` (one OTLP `ExportTraceServiceRequest` per
//! line, for the Collector's `otlpjsonfile` receiver) and `otlp.pb.gz` (a pprof profile) into
//! the current directory or the one given as first argument (with its capture, `otlp.tscope`,
//! for `tickscope push`); with `--endpoint URL` it also
//! pushes the trace over OTLP/HTTP to `URL/v1/traces` (an OpenTelemetry Collector at
//! `http://localhost:4318`, Jaeger, Tempo, or Arize Phoenix at `http://127.0.0.1:6006`).
//!
//! `cargo run --release --features otlp --example otlp [OUT_DIR] [--endpoint URL]`

use std::path::PathBuf;

use tickscope::export::otlp::{Options, Otlp, PushOptions};
use tickscope::{Profiler, counter, instant, scope};

fn query(table: &str, rows: u64) -> u64 {
    let _g = scope!("query", table = table, rows = rows);
    counter!("rows", add = rows);
    (0..rows * 200).fold(rows, |acc, x| acc.rotate_left(3) ^ x)
}

fn handle(id: u64) -> u64 {
    let _g = scope!("handle", id = id);
    let parsed = {
        let _p = scope!("parse");
        let half = (0..2_500).fold(id, |acc, x| acc.wrapping_mul(31) ^ x);
        // Mid-scope, microseconds from its edges: a span event of `parse` on any clock.
        instant!("parsed", id = id);
        (2_500..5_000).fold(half, |acc, x| acc.wrapping_mul(31) ^ x)
    };
    ["users", "orders", "items"]
        .iter()
        .enumerate()
        .map(|(i, t)| query(t, 10 + i as u64 * 5))
        .fold(parsed, u64::wrapping_add)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut out_dir = PathBuf::from(".");
    let mut endpoint = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--endpoint" {
            endpoint = Some(args.next().ok_or("--endpoint needs a URL")?);
        } else {
            out_dir = PathBuf::from(arg);
        }
    }
    let prof = Profiler::start();
    let sum = (0..50).map(handle).fold(0, u64::wrapping_add);
    prof.stop();
    std::hint::black_box(sum);

    println!("{}", prof.table());
    prof.write_capture(out_dir.join("otlp.tscope"))?;
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new().service_name("tickscope-example"));
    let json = out_dir.join("otlp.otlp.json");
    let stats = otlp.write_json(&json)?;
    println!(
        "{}: {} spans ({} folded, {} sampled out), {} span events",
        json.display(),
        stats.sent,
        stats.folded,
        stats.sampled_out,
        stats.events
    );
    let pprof = out_dir.join("otlp.pb.gz");
    prof.write_pprof(&pprof)?;
    println!("{}", pprof.display());
    if let Some(endpoint) = endpoint {
        let report = otlp.push(endpoint.as_str(), &PushOptions::from_env()?)?;
        println!(
            "pushed {} spans to {endpoint}/v1/traces in {} requests ({} bytes gzipped)",
            report.accepted_spans, report.requests, report.wire_bytes
        );
    }
    Ok(())
}
