//! Cost of one scope (enter + exit), enabled, disabled and nested, next to the floor: two raw
//! clock reads, which any enabled scope must pay; a `#[profile]` function next to the same
//! function with a hand-written `scope!`; and a scope with arguments, one following a link,
//! and one with an observer registered; `counter!` (set and add), `value!` and `instant!`
//! (with and without an argument) next to one raw clock read, each with and without a session.
//!
//! `cargo bench --bench scope`. Enabled runs restart the session every 32 Ki scopes (outside
//! the timed part) so chunks are recycled and the figure is the steady state, not page faults;
//! `enabled_streaming` runs one streaming session (`ProfilerBuilder::stream_to`) for all its
//! repetitions, its chunks written out (to `/dev/null`) as they fill.
//!
//! On a loaded machine, `TICKSCOPE_BENCH_ROUNDS=3000 cargo bench --bench scope` measures
//! instead the floor and the enabled scope in turn, in short batches of [`BATCH`], and prints
//! each one's median batch (ns per scope) and the median of the per-round ratio of the scope
//! to the floor: most batches run unpreempted, and the medians leave out those that were not.
//! It then measures a flight recorder against a normal session of the same window (1 MiB and
//! 16 MiB), a tenth as many rounds of 64 Ki scopes, in wall time and in the recording thread's
//! CPU time (which leaves out the time it waited for a core);
//! `TICKSCOPE_BENCH_FLIGHT_SCANNER=0` pauses the recorder's scanner, so that the recording
//! thread reads every chunk it recycles.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use tickscope::{Profiler, profile, scope};

mod common;

/// Times `iters` runs of `body` inside current-thread sessions restarted in batches.
fn in_sessions(iters: u64, body: impl Fn()) -> Duration {
    common::in_sessions(Profiler::builder().current_thread(), iters, body)
}

/// The same work twice: once instrumented by the attribute, once by hand.
#[profile]
#[inline(never)]
fn attributed(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[inline(never)]
fn handwritten(x: u64) -> u64 {
    let _g = scope!("handwritten");
    black_box(x).wrapping_mul(3)
}

fn bench(c: &mut Criterion) {
    let clock = quanta::Clock::new();
    let mut g = c.benchmark_group("scope");
    g.bench_function("floor_two_raw_reads", |b| {
        b.iter(|| {
            let start = clock.raw();
            let end = clock.raw();
            black_box((start, end))
        })
    });
    g.bench_function("enabled", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                let _g = scope!("enabled");
            })
        })
    });
    // One streaming session for every repetition, never restarted: its threads record into
    // the stream's fixed pool, which its writer hands back as it writes the chunks out. The
    // file is /dev/null where there is one, so that the figure is the hot path's and not the
    // disk's (a disk slower than the scopes makes them wait: see the stats printed).
    let path = std::path::PathBuf::from("/dev/null");
    let path = if path.exists() {
        path
    } else {
        std::env::temp_dir().join(format!("tickscope-bench-{}.tscope", std::process::id()))
    };
    let streaming = Profiler::builder()
        .current_thread()
        .stream_to(&path)
        .try_start()
        .expect("the bench's stream file");
    g.bench_function("enabled_streaming", |b| {
        b.iter(|| {
            let _g = scope!("streamed");
        })
    });
    streaming.stop();
    if let Some(stats) = streaming.stream_stats() {
        eprintln!(
            "streaming: {} records written ({:.1} MiB), {} dropped, {} waits ({:?}), pool {} KiB",
            stats.records_written,
            stats.bytes_written as f64 / (1 << 20) as f64,
            stats.dropped_events,
            stats.waits,
            stats.waited,
            stats.pool_bytes >> 10,
        );
    }
    drop(streaming);
    if path.is_file() {
        let _ = std::fs::remove_file(&path);
    }
    // One flight recorder for every repetition, never restarted: its chunks touched at start
    // and recycled oldest first as the scopes fill them (beside "enabled", whose sessions
    // restart and reuse the pool's few warm chunks). With 1 MiB the ring stays in cache, as
    // those chunks do; with 16 MiB every recycled chunk comes from memory.
    for (name, bytes) in [
        ("enabled_flight_recorder_1mib", 1 << 20),
        ("enabled_flight_recorder_16mib", 16 << 20),
    ] {
        let flight = Profiler::builder()
            .current_thread()
            .flight_recorder(bytes)
            .try_start()
            .expect("no other flight recorder runs");
        g.bench_function(name, |b| {
            b.iter(|| {
                let _g = scope!("flight");
            })
        });
        let overwritten = flight.capture().overwritten_events();
        flight.stop();
        eprintln!("{name}: {overwritten} events overwritten");
    }
    g.bench_function("enabled_dynamic_name", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                let _g = scope!(name = black_box("dynamic"));
            })
        })
    });
    g.bench_function("nested_3_per_scope", |b| {
        b.iter_custom(|iters| {
            // Three scopes per iteration; report the cost per scope.
            in_sessions(iters.div_ceil(3), || {
                let _a = scope!("a");
                let _b = scope!("b");
                let _c = scope!("c");
            })
        })
    });
    g.bench_function("profile_attribute_fn", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                black_box(attributed(black_box(7)));
            })
        })
    });
    g.bench_function("handwritten_scope_fn", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                black_box(handwritten(black_box(7)));
            })
        })
    });
    g.bench_function("enabled_with_args", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                let _g = scope!("args", bytes = black_box(4096u64), kind = %black_box("png"));
            })
        })
    });
    g.bench_function("enabled_with_link", |b| {
        let link = {
            let prof = Profiler::builder().current_thread().start();
            let link = tickscope::link();
            prof.stop();
            link
        };
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                let _g = scope!("follows", follows = black_box(link));
            })
        })
    });
    g.bench_function("enabled_one_observer", |b| {
        let handle = tickscope::Observer::new(|s| {
            black_box(s.name());
        })
        .current_thread();
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                let _g = scope!("observed");
            })
        });
        drop(handle);
    });
    g.bench_function("disabled", |b| {
        b.iter(|| {
            let _g = scope!("disabled");
        })
    });
    g.bench_function("floor_one_raw_read", |b| b.iter(|| black_box(clock.raw())));
    g.bench_function("counter_set", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                tickscope::counter!("depth", set = black_box(7u64));
            })
        })
    });
    g.bench_function("counter_add", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                tickscope::counter!("bytes", add = black_box(512u64));
            })
        })
    });
    g.bench_function("value", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                tickscope::value!("batch", black_box(16u64));
            })
        })
    });
    g.bench_function("instant", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                tickscope::instant!("tick");
            })
        })
    });
    g.bench_function("instant_with_arg", |b| {
        b.iter_custom(|iters| {
            in_sessions(iters, || {
                tickscope::instant!("miss", key = black_box(42u64));
            })
        })
    });
    g.bench_function("counter_add_disabled", |b| {
        b.iter(|| tickscope::counter!("bytes", add = black_box(512u64)))
    });
    g.bench_function("value_disabled", |b| {
        b.iter(|| tickscope::value!("batch", black_box(16u64)))
    });
    g.bench_function("instant_disabled", |b| {
        b.iter(|| tickscope::instant!("tick"))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}

/// Scopes (or pairs of reads) per batch of the interleaved measurement.
const BATCH: u32 = 4096;

/// Nanoseconds per run of `body` over one batch.
fn batch(body: impl Fn()) -> f64 {
    let t = Instant::now();
    for _ in 0..BATCH {
        body();
    }
    t.elapsed().as_nanos() as f64 / f64::from(BATCH)
}

/// The interleaved measurement (see the module's docs), `rounds` rounds.
fn interleaved(rounds: usize) {
    let clock = quanta::Clock::new();
    let prof = Profiler::builder().current_thread().start();
    prof.stop();
    let (mut floor, mut enabled, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let floor_first = round % 2 == 0;
        let mut times = [0.0; 2];
        for k in 0..2 {
            if (k == 0) == floor_first {
                times[0] = batch(|| {
                    let start = clock.raw();
                    let end = clock.raw();
                    black_box((start, end));
                });
            } else {
                prof.restart();
                drop(scope!("enabled")); // the thread's first look at the session, untimed
                times[1] = batch(|| {
                    let _g = scope!("enabled");
                });
                prof.stop();
            }
        }
        floor.push(times[0]);
        enabled.push(times[1]);
        ratios.push(times[1] / times[0]);
    }
    println!("scope interleaved: {rounds} rounds of {BATCH} per case");
    println!(
        "floor_two_raw_reads: median {:.2} ns; enabled: median {:.2} ns, {:.4} x floor (median ratio)",
        common::median(&mut floor),
        common::median(&mut enabled),
        common::median(&mut ratios)
    );
    interleaved_flight(rounds.div_ceil(10));
}

/// Scopes timed per round of [`interleaved_flight`]: 32 chunks, so that chunk switches
/// (where a flight recorder differs from a normal session) weigh as in a long run.
const WINDOW_BATCH: u32 = 64 * 1024;

/// The calling thread's CPU time in nanoseconds (none where it cannot be read): unlike the
/// wall clock, it leaves out the time the thread waited for a core, so that on a loaded
/// machine it is still the cost of the thread's own work.
fn thread_cpu_ns() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid `timespec` to write, and the clock id is a constant.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        (rc == 0).then_some(t.tv_sec as f64 * 1e9 + t.tv_nsec as f64)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Nanoseconds per scope of `session` (restarted, then stopped again), wall and this
/// thread's CPU time: `window` scopes untimed first, so that a flight recorder of `window`
/// scopes recycles from the first timed chunk on, then [`WINDOW_BATCH`] timed.
fn window_batch(session: &Profiler, window: u32) -> (f64, Option<f64>) {
    session.restart();
    for _ in 0..window {
        let _g = scope!("window");
    }
    let cpu = thread_cpu_ns();
    let t = Instant::now();
    for _ in 0..WINDOW_BATCH {
        let _g = scope!("window");
    }
    let wall = t.elapsed().as_nanos() as f64 / f64::from(WINDOW_BATCH);
    let cpu = cpu
        .zip(thread_cpu_ns())
        .map(|(a, b)| (b - a) / f64::from(WINDOW_BATCH));
    session.stop();
    (wall, cpu)
}

/// The flight recorder against a normal session of the same window (1 MiB and 16 MiB of
/// records: 32 Ki and 512 Ki scopes), `rounds` rounds, each case once a round in a rotating
/// order: medians of the wall time and of the recording thread's CPU time, and the median
/// per-round ratio of the recorder to the session. `TICKSCOPE_BENCH_FLIGHT_SCANNER=0` pauses
/// the recorder's scanner, so that the recording thread reads each chunk when recycling it.
fn interleaved_flight(rounds: usize) {
    const MIB_SCOPES: u32 = (1 << 20) / 32;
    let windows = [("1mib", 1u32), ("16mib", 16)];
    let paused = std::env::var("TICKSCOPE_BENCH_FLIGHT_SCANNER").is_ok_and(|v| v == "0");
    tickscope::__private::flight_pause_scanner(paused);
    let sessions: Vec<[Profiler; 2]> = windows
        .iter()
        .map(|&(_, mib)| {
            let normal = Profiler::builder().current_thread().start();
            normal.stop();
            let flight = Profiler::builder()
                .current_thread()
                .flight_recorder((mib as usize) << 20)
                .start();
            flight.stop();
            [normal, flight]
        })
        .collect();
    // Per window and case: wall and CPU times; per window: the ratios of both.
    let mut times = vec![[[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]]; windows.len()];
    let mut ratios = vec![[Vec::new(), Vec::new()]; windows.len()];
    let cases = windows.len() * 2;
    for round in 0..rounds {
        let mut got = vec![[(0.0, None); 2]; windows.len()];
        for k in 0..cases {
            let case = (k + round) % cases;
            let (w, f) = (case / 2, case % 2);
            got[w][f] = window_batch(&sessions[w][f], windows[w].1 * MIB_SCOPES);
        }
        for (w, [normal, flight]) in got.into_iter().enumerate() {
            times[w][0][0].push(normal.0);
            times[w][1][0].push(flight.0);
            ratios[w][0].push(flight.0 / normal.0);
            if let (Some(n), Some(f)) = (normal.1, flight.1) {
                times[w][0][1].push(n);
                times[w][1][1].push(f);
                ratios[w][1].push(f / n);
            }
        }
    }
    tickscope::__private::flight_pause_scanner(false);
    println!(
        "flight interleaved: {rounds} rounds of {WINDOW_BATCH} scopes per case, scanner {}",
        if paused { "paused" } else { "on" }
    );
    for (w, (name, _)) in windows.iter().enumerate() {
        for (m, measure) in ["wall", "thread cpu"].iter().enumerate() {
            if ratios[w][m].is_empty() {
                continue;
            }
            let [normal, flight] = &mut times[w];
            println!(
                "window {name} ({measure}): session median {:.2} ns; flight recorder median {:.2} ns, {:.4} x session (median ratio)",
                common::median(&mut normal[m]),
                common::median(&mut flight[m]),
                common::median(&mut ratios[w][m])
            );
        }
    }
}

fn main() {
    common::interleaved_or_criterion(interleaved, benches);
}
