//! Cost of a 64-byte allocation plus its free through `TrackingAlloc`: with no session
//! tracking memory, with one recording its timeline (`tracking_on`), with one counting it
//! (`tracking_counts`, `MemoryMode::Counts`), and straight through `System`, in one run.
//!
//! `cargo bench --bench alloc`. The tracking case restarts its session every 32 Ki pairs
//! (outside the timed part) so that buffers are recycled and the figure is the steady state.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
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
criterion_main!(benches);
