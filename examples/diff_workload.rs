//! The deterministic workload behind `tickscope diff`'s measured error rates
//! (`scripts/diff_error_rates.sh`) and the CI recipe (`docs/ci.md`): 1,000 rounds of 20 calls
//! of `small` (about 200 ns), 10 of `medium` (about 2 µs) and one of `large` (about 50 µs),
//! each a fixed number of iterations of integer work, recorded and written as
//! `diff_workload.tscope`.
//!
//! ```text
//! cargo run --release --example diff_workload -- --calibrate
//!     prints the iterations of each scope on this machine: "SMALL MEDIUM LARGE"
//! cargo run --release --example diff_workload -- OUT_DIR [--iterations S,M,L] [--slower NAME=PERCENT]...
//!     writes OUT_DIR/diff_workload.tscope; --slower medium=5 gives medium 5 % more iterations
//! ```
//!
//! The work is a number of iterations, not a time: two runs with the same arguments do the same
//! work, and `--slower medium=5` adds exactly 5 % more of it to each `medium` call. A build
//! made with `DIFF_WORKLOAD_SLOWER=NAME=PERCENT` in its environment is that slower build: it
//! does so without the argument (how `.ci/run` makes a base and a "pull request" build).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use tickscope::{Profiler, scope};

/// The scopes: name, target duration in ns, calls per round.
const SCOPES: [(&str, f64, u32); 3] = [
    ("small", 200.0, 20),
    ("medium", 2_000.0, 10),
    ("large", 50_000.0, 1),
];

/// Iterations used when none are given and none calibrated: about the targets at 1 ns each.
const DEFAULT_ITERATIONS: [u64; 3] = [200, 2_000, 50_000];

const ROUNDS: u32 = 1_000;

/// `iterations` rounds of integer work that the compiler cannot remove.
fn work(iterations: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15_u64;
    for i in 0..iterations {
        x = black_box(x.rotate_left(5) ^ i).wrapping_mul(0x2545_F491_4F6C_DD1D);
    }
    x
}

/// Iterations of `work` that take each scope's target duration here (the fastest of 20
/// timings of a million iterations).
fn calibrate() -> [u64; 3] {
    const N: u64 = 1_000_000;
    let per_iteration = (0..20)
        .map(|_| {
            let start = Instant::now();
            black_box(work(N));
            start.elapsed().as_nanos() as f64 / N as f64
        })
        .fold(f64::INFINITY, f64::min);
    SCOPES.map(|(_, ns, _)| (ns / per_iteration).round().max(1.0) as u64)
}

/// Reads `NAME=PERCENT` into `slower`, by scope.
fn slow_down(slower: &mut [f64; 3], spec: &str) -> Result<(), String> {
    let (name, percent) = spec.split_once('=').ok_or("--slower NAME=PERCENT")?;
    let i = SCOPES
        .iter()
        .position(|s| s.0 == name)
        .ok_or_else(|| format!("--slower: no scope {name}"))?;
    slower[i] = percent.parse::<f64>().map_err(|e| format!("{spec}: {e}"))?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut out = PathBuf::from(".");
    let mut iterations = DEFAULT_ITERATIONS;
    let mut slower = [0.0f64; 3];
    // The slower build's change, compiled in.
    if let Some(spec) = option_env!("DIFF_WORKLOAD_SLOWER") {
        slow_down(&mut slower, spec)?;
    }
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--calibrate" => {
                let [s, m, l] = calibrate();
                println!("{s} {m} {l}");
                return Ok(());
            }
            "--iterations" => {
                let list = args.next().ok_or("--iterations needs S,M,L")?;
                let parsed: Vec<u64> = list
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--iterations {list}: {e}"))?;
                iterations = parsed
                    .try_into()
                    .map_err(|_| format!("--iterations {list}: give three counts"))?;
            }
            "--slower" => {
                let spec = args.next().ok_or("--slower needs NAME=PERCENT")?;
                slow_down(&mut slower, &spec)?;
            }
            dir => out = PathBuf::from(dir),
        }
    }
    let [small, medium, large] =
        std::array::from_fn(|i| (iterations[i] as f64 * (1.0 + slower[i] / 100.0)).round() as u64);
    let prof = Profiler::builder().current_thread().start();
    let mut sum = 0u64;
    for _ in 0..ROUNDS {
        for _ in 0..SCOPES[0].2 {
            let _g = scope!("small");
            sum = sum.wrapping_add(work(small));
        }
        for _ in 0..SCOPES[1].2 {
            let _g = scope!("medium");
            sum = sum.wrapping_add(work(medium));
        }
        let _g = scope!("large");
        sum = sum.wrapping_add(work(large));
    }
    prof.stop();
    black_box(sum);
    let path = out.join("diff_workload.tscope");
    prof.write_capture(&path)?;
    println!("wrote {}", path.display());
    Ok(())
}
