//! Shared by the criterion benches: timing inside sessions that are restarted in batches.

use std::time::{Duration, Instant};

use tickscope::Config;

/// Iterations per session window: each restart recycles the chunks of the last one.
const BATCH: u64 = 32 * 1024;

/// Times `iters` runs of `body` inside a session made from `config`, restarted every `BATCH`
/// iterations outside the timed part, so that the figure is the steady state, not page
/// faults or post-processing.
pub fn in_sessions(config: Config, iters: u64, body: impl Fn()) -> Duration {
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
