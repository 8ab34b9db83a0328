//! Shared by the criterion benches: timing inside sessions that are restarted in batches, and
//! the recorded sessions that the capture and export benches read.
// Each bench uses part of this module.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use tickscope::{Profiler, ProfilerBuilder, scope};

/// Iterations per session window: each restart recycles the chunks of the last one.
const BATCH: u64 = 32 * 1024;

/// Times `iters` runs of `body` inside a session made from `config`, restarted every `BATCH`
/// iterations outside the timed part, so that the figure is the steady state, not page
/// faults or post-processing.
pub fn in_sessions(config: ProfilerBuilder, iters: u64, body: impl Fn()) -> Duration {
    let prof = config.start();
    prof.stop();
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH);
        prof.restart();
        let t = Instant::now();
        for _ in 0..n {
            body();
        }
        total += t.elapsed();
        prof.stop();
        left -= n;
    }
    total
}

/// A stopped current-thread session of `outer` × (a `request` scope around three `step`
/// scopes): `4 × outer` scopes, twice as many records, on one thread.
pub fn requests_and_steps(outer: usize) -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    for _ in 0..outer {
        let _o = scope!("request");
        for _ in 0..3 {
            let _i = scope!("step");
        }
    }
    prof.stop();
    prof
}

/// Scopes in one `serve` call of [`server_session`]: the request and its nine nested scopes.
pub const SCOPES_PER_REQUEST: u64 = 10;

/// One request of a small server, as a profiled program would record it: ten scopes with
/// the names real code has, three levels deep, twenty records.
#[inline(never)]
fn serve(i: u64) -> u64 {
    let _request = scope!("http::server::handle_request");
    let mut acc = std::hint::black_box(i);
    {
        let _g = scope!("http::parse_headers");
        acc = acc.wrapping_mul(31);
    }
    {
        let _route = scope!("router::dispatch");
        {
            let _g = scope!("cache::lookup");
            acc ^= 7;
        }
        if !acc.is_multiple_of(4) {
            let _g = scope!("db::query");
            acc = acc.rotate_left(3);
        } else {
            let _g = scope!("cache::lookup");
            acc = acc.rotate_left(5);
        }
    }
    {
        let _render = scope!("render::page");
        {
            let _g = scope!("template::expand");
            acc = acc.wrapping_add(11);
        }
        {
            let _g = scope!("serde_json::to_writer");
            acc = acc.wrapping_add(13);
        }
        {
            let _g = scope!("gzip::compress");
            acc = acc.wrapping_sub(1);
        }
    }
    {
        let _g = scope!("http::write_response");
        acc = acc.wrapping_mul(17);
    }
    acc
}

/// A stopped session of about `events` records (scope entries and exits, two per scope):
/// requests of ten nested scopes ([`SCOPES_PER_REQUEST`]) served by `threads` threads that
/// join the session. Returns the session and its record count.
pub fn server_session(threads: u64, events: u64) -> (Profiler, u64) {
    let requests = events / (2 * SCOPES_PER_REQUEST);
    let per_thread = requests / threads;
    let prof = Profiler::builder().current_thread().start();
    std::thread::scope(|s| {
        for t in 0..threads {
            let prof = prof.clone();
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    prof.join_current_thread();
                    let mut acc = 0;
                    for i in 0..per_thread {
                        acc ^= serve(i);
                    }
                    std::hint::black_box(acc);
                })
                .unwrap();
        }
    });
    prof.stop();
    let records = prof.capture().record_count();
    (prof, records)
}

/// The median of `values` (the upper one of an even count), sorting them.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The `main` of a bench with an interleaved mode: `interleaved(rounds)` when
/// `TICKSCOPE_BENCH_ROUNDS` holds a positive number of rounds, else the criterion group
/// `benches` as `criterion_main!` runs it.
pub fn interleaved_or_criterion(interleaved: fn(usize), benches: fn()) {
    match std::env::var("TICKSCOPE_BENCH_ROUNDS").map(|n| n.parse::<usize>()) {
        Ok(Ok(rounds)) if rounds > 0 => interleaved(rounds),
        Ok(_) => eprintln!("TICKSCOPE_BENCH_ROUNDS must be a positive number of rounds"),
        Err(_) => {
            benches();
            criterion::Criterion::default()
                .configure_from_args()
                .final_summary();
        }
    }
}
