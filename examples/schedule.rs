//! A training loop under a schedule (PyTorch's `schedule` + `on_trace_ready`): 20 steps, of
//! which the session records two windows of three steps, each after a wait of four steps and
//! a step of warmup. Each window is written as Chrome JSON into the current directory (or the
//! directory given as the first argument): `train-window-0.json`, `train-window-1.json`.
//!
//! `cargo run --release --example schedule [OUT_DIR]`

use tickscope::schedule::{self, Schedule};
use tickscope::{Profiler, scope};

fn forward(batch: u64) -> u64 {
    let _g = scope!("forward");
    (0..20_000).fold(batch, |h, x: u64| h.rotate_left(7) ^ x)
}

fn backward(loss: u64) -> u64 {
    let _g = scope!("backward");
    (0..40_000).fold(loss, |h, x: u64| h.wrapping_mul(31) ^ x)
}

fn main() -> std::io::Result<()> {
    let out_dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    let prof = Profiler::builder()
        .current_thread()
        .schedule(Schedule::new(4, 1, 3).repeat(2))
        .on_trace_ready({
            let write = schedule::chrome_trace_handler(&out_dir, "train-");
            move |window| {
                let report = window.report();
                println!(
                    "window {}: steps {:?}, {} forward and {} backward calls",
                    window.index(),
                    window.steps(),
                    report.get("forward").map_or(0, |r| r.calls),
                    report.get("backward").map_or(0, |r| r.calls),
                );
                write(window)
            }
        })
        .start();
    let mut weights = 1;
    for batch in 0..20 {
        weights ^= backward(forward(batch));
        prof.step()?;
    }
    prof.try_stop()?;
    std::hint::black_box(weights);
    println!("{}", prof.table());
    Ok(())
}
