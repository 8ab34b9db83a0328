//! Allocation tracking: a producer builds buffers in scopes and hands them to two workers,
//! which transform and free them on their own threads; a cache keeps some of them past the
//! end of the session. Prints the table (with the allocation columns and the memory still live
//! at stop) and writes `allocations.json`, a Chrome trace with a `memory` counter track
//! and one instant per allocation and free.
//!
//! `cargo run --release --example allocations [OUT_DIR]`

use std::path::Path;
use std::sync::mpsc;

use tickscope::export::chrome::Options;
use tickscope::trace::MemoryKind;
use tickscope::{Profiler, TrackingAlloc, scope};

#[global_allocator]
static ALLOC: TrackingAlloc = TrackingAlloc::new(std::alloc::System);

/// A request body of `n` bytes.
fn build(n: usize) -> Vec<u8> {
    let _g = scope!("build");
    let mut body = Vec::with_capacity(16);
    body.extend((0..n).map(|i| i as u8));
    body
}

/// Compresses `body` the naive way (run-length pairs); frees the input.
fn squeeze(body: Vec<u8>) -> Vec<(u8, u8)> {
    let _g = scope!("squeeze");
    let mut out: Vec<(u8, u8)> = Vec::new();
    for b in body {
        match out.last_mut() {
            Some((v, run)) if *v == b && *run < u8::MAX => *run += 1,
            _ => out.push((b, 1)),
        }
    }
    out
}

fn main() -> std::io::Result<()> {
    let out_dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    let prof = Profiler::builder().track_memory(true).start();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let workers: Vec<_> = (0..2)
        .map(|i| {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || {
                    let mut squeezed = 0;
                    loop {
                        let body = rx.lock().unwrap().recv();
                        let Ok(body) = body else { break };
                        let _g = scope!("handle");
                        squeezed += squeeze(body).len();
                    }
                    squeezed
                })
                .expect("spawn")
        })
        .collect();
    let mut cache = Vec::new();
    {
        let _g = scope!("produce");
        for n in 0..200 {
            let body = build(1_000 + n * 10);
            if n % 50 == 0 {
                let _g = scope!("cache");
                cache.push(body.clone());
            }
            tx.send(body).expect("workers alive");
        }
    }
    drop(tx);
    let pairs: usize = workers.into_iter().map(|w| w.join().expect("worker")).sum();
    prof.stop();

    println!("{}", prof.table());
    println!("{pairs} run-length pairs, {} buffers cached", cache.len());
    let trace = prof.trace();
    let memory = trace.memory.as_ref().expect("the session tracked memory");
    let allocs = memory
        .events
        .iter()
        .filter(|e| e.kind == MemoryKind::Alloc)
        .count();
    let peak = memory.live_bytes().into_iter().max().unwrap_or(0);
    println!(
        "recorded {allocs} allocations and {} frees; peak live bytes {peak}",
        memory.events.len() - allocs
    );
    let path = Path::new(&out_dir).join("allocations.json");
    prof.write(&path, &Options::new().allocation_instants(true))?;
    println!("wrote {}", path.display());
    Ok(())
}
