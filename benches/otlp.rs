//! OTLP encoding speed and size (cargo feature `otlp`): the requests of a 200 000-scope trace
//! built and encoded as protobuf (what `Otlp::push` sends before gzip), in spans per second;
//! prints the bytes per span on the wire (gzipped protobuf, as pushed) and in the `.otlp.json`
//! file once.
//!
//! `cargo bench --features otlp --bench otlp`

use std::io::Write;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use prost::Message;
use tickscope::export::otlp::{Options, Otlp};

mod common;

const OUTER: usize = 50_000;

fn bench(c: &mut Criterion) {
    // 50 000 × (request + 3 steps) = 200 000 scopes on one thread.
    let prof = common::requests_and_steps(OUTER);
    let trace = prof.trace();
    let options = Options::new();
    let otlp = Otlp::new(&trace, &options);
    let spans = otlp.stats().sent;

    let mut protobuf = 0usize;
    let mut wire = 0usize;
    for request in otlp.requests() {
        let bytes = request.encode_to_vec();
        protobuf += bytes.len();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        wire += gz.finish().unwrap().len();
    }
    let mut json = Vec::new();
    otlp.write_json_to(&mut json).unwrap();
    println!(
        "otlp: {spans} spans; protobuf {:.1} bytes/span, gzipped (on the wire) {:.1} bytes/span, \
         .otlp.json {:.1} bytes/span",
        protobuf as f64 / spans as f64,
        wire as f64 / spans as f64,
        json.len() as f64 / spans as f64
    );

    let mut g = c.benchmark_group("otlp");
    g.throughput(Throughput::Elements(spans));
    g.sample_size(10);
    // Mapping (tree, folding, ids) and building and encoding every request.
    g.bench_function("map_and_encode_protobuf", |b| {
        b.iter(|| {
            let otlp = Otlp::new(&trace, &options);
            let mut buf = Vec::new();
            for request in otlp.requests() {
                buf.clear();
                request.encode(&mut buf).unwrap();
            }
            buf.len()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
