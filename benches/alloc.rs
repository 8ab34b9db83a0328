//! Cost of a 64-byte allocation plus its free through `TrackingAlloc`: with no session
//! tracking memory, with one recording its timeline (`tracking_on`), with one counting it
//! (`tracking_counts`, `MemoryMode::Counts`), and straight through `System`, in one run.
//!
//! `cargo bench --bench alloc`. The tracking case restarts its session every 32 Ki pairs
//! (outside the timed part) so that buffers are recycled and the figure is the steady state.
//!
//! On a loaded machine, where a criterion case running after another sees different load,
//! `TICKSCOPE_BENCH_ROUNDS=2000 cargo bench --bench alloc` measures instead the four cases in
//! turn, in short batches of [`BATCH`] pairs, the order rotating each round, and prints each
//! case's median batch (ns per pair) and the median of its per-round ratio to `system`: a
//! batch is short enough that most run unpreempted, and the medians leave out those that
//! were not.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group};
use tickscope::{MemoryMode, Profiler, TrackingAlloc};

#[global_allocator]
static ALLOC: TrackingAlloc = TrackingAlloc::new(System);

mod common;

/// One allocation of 64 bytes and its free, through `alloc`.
#[inline(always)]
fn pair(alloc: &impl GlobalAlloc) {
    let layout = black_box(Layout::from_size_align(64, 8).expect("valid layout"));
    // SAFETY: `layout` has a non-zero size; the block is freed with the same layout.
    unsafe {
        let p = alloc.alloc(layout);
        black_box(p);
        alloc.dealloc(p, layout);
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc_free_64");
    g.bench_function("system", |b| b.iter(|| pair(&System)));
    g.bench_function("tracking_off", |b| b.iter(|| pair(&ALLOC)));
    g.bench_function("tracking_on", |b| {
        b.iter_custom(|iters| {
            let config = Profiler::builder().current_thread().track_memory(true);
            common::in_sessions(config, iters, || pair(&ALLOC))
        })
    });
    g.bench_function("tracking_counts", |b| {
        b.iter_custom(|iters| {
            let config = Profiler::builder()
                .current_thread()
                .track_memory(MemoryMode::Counts);
            common::in_sessions(config, iters, || pair(&ALLOC))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);

/// Pairs per batch of the interleaved measurement.
const BATCH: u32 = 4096;

/// Nanoseconds per pair of one batch of `BATCH` pairs through `alloc`.
fn batch(alloc: &impl GlobalAlloc) -> f64 {
    let t = Instant::now();
    for _ in 0..BATCH {
        pair(alloc);
    }
    t.elapsed().as_nanos() as f64 / f64::from(BATCH)
}

/// The interleaved measurement (see the module's docs), `rounds` rounds.
fn interleaved(rounds: usize) {
    const CASES: [&str; 4] = ["system", "tracking_off", "tracking_counts", "tracking_on"];
    let counts = Profiler::builder()
        .current_thread()
        .track_memory(MemoryMode::Counts)
        .start();
    counts.stop();
    let timeline = Profiler::builder()
        .current_thread()
        .track_memory(true)
        .start();
    timeline.stop();
    let in_session = |prof: &Profiler| {
        prof.restart();
        pair(&ALLOC); // the thread's first look at the new session, untimed
        let ns = batch(&ALLOC);
        prof.stop();
        ns
    };
    let mut times = vec![Vec::with_capacity(rounds); CASES.len()];
    for round in 0..rounds {
        for k in 0..CASES.len() {
            let case = (round + k) % CASES.len();
            let ns = match case {
                0 => batch(&System),
                1 => batch(&ALLOC),
                2 => in_session(&counts),
                _ => in_session(&timeline),
            };
            times[case].push(ns);
        }
    }
    println!("alloc_free_64 interleaved: {rounds} rounds of {BATCH} pairs per case");
    for (case, name) in CASES.iter().enumerate() {
        let mut ratios: Vec<f64> = times[case]
            .iter()
            .zip(&times[0])
            .map(|(t, system)| t / system)
            .collect();
        let ratio = common::median(&mut ratios);
        let ns = common::median(&mut times[case].clone());
        println!("{name:>16}: median {ns:6.2} ns per pair, {ratio:.3} x system (median ratio)");
    }
}

fn main() {
    common::interleaved_or_criterion(interleaved, benches);
}
