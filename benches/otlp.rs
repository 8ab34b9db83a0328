//! OTLP encoding speed and size (cargo feature `otlp`): the requests of a 200 000-scope trace
//! encoded as protobuf (what `Otlp::push` sends before gzip), in spans per second, by our own
//! encoder (`map_and_encode_protobuf`) and by building the `opentelemetry-proto` messages and
//! encoding them with prost (`map_and_encode_protobuf_prost`, the reference);
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
    let ours: Vec<Vec<u8>> = otlp.encode_requests().collect();
    let reference: Vec<Vec<u8>> = otlp.requests().map(|r| r.encode_to_vec()).collect();
    assert!(ours == reference, "our encoder writes what prost writes");
    for bytes in ours {
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
    // Mapping (tree, folding, ids) and encoding every request with our own encoder: what
    // `Otlp::push` does before gzip.
    g.bench_function("map_and_encode_protobuf", |b| {
        b.iter(|| {
            let otlp = Otlp::new(&trace, &options);
            otlp.encode_requests().map(|r| r.len()).sum::<usize>()
        })
    });
    // The reference: the same requests built as `opentelemetry-proto` messages and encoded by
    // prost (what `Otlp::push` did before our encoder).
    g.bench_function("map_and_encode_protobuf_prost", |b| {
        b.iter(|| {
            let otlp = Otlp::new(&trace, &options);
            let mut buf = Vec::new();
            let mut len = 0;
            for request in otlp.requests() {
                buf.clear();
                request.encode(&mut buf).unwrap();
                len += buf.len();
            }
            len
        })
    });
    // The mapping alone, the part both share.
    g.bench_function("map", |b| {
        b.iter(|| Otlp::new(&trace, &options).stats().sent)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
