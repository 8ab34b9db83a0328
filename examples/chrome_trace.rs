//! Writes a Chrome trace (for ui.perfetto.dev) and folded stacks (for flamegraphs) of a small
//! recursive workload on two threads; also the same trace gzipped with absolute Unix-epoch
//! timestamps, in the Kineto (PyTorch profiler) dialect, and as a native Perfetto trace
//! (`chrome_trace.pftrace`).
//!
//! `cargo run --release --example chrome_trace [OUT_DIR]`

use std::path::Path;

use tickscope::export::chrome::{self, TimeOrigin};
use tickscope::export::{folded, kineto};
use tickscope::{Profiler, scope};

fn fib(n: u32) -> u64 {
    let _g = scope!("fib");
    if n < 2 {
        u64::from(n)
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

fn main() -> std::io::Result<()> {
    let out_dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    let prof = Profiler::start();
    let helper = std::thread::Builder::new()
        .name("helper".into())
        .spawn(|| {
            let _g = scope!("helper job");
            fib(12)
        })?;
    let main_result = {
        let _g = scope!("main job");
        fib(14)
    };
    let helper_result = helper.join().expect("helper panicked");
    prof.stop();

    println!("fib(14) = {main_result}, fib(12) = {helper_result}");
    println!("{}", prof.table());
    let json = Path::new(&out_dir).join("chrome_trace.json");
    let folded = Path::new(&out_dir).join("chrome_trace.folded");
    let gz = Path::new(&out_dir).join("chrome_trace.unix.json.gz");
    let kineto = Path::new(&out_dir).join("chrome_trace.kineto.json");
    prof.write_chrome_trace(&json)?;
    prof.write(
        &gz,
        &chrome::Options::new().time_origin(TimeOrigin::UnixEpoch),
    )?;
    prof.write(&kineto, &kineto::Options::new(0, 1))?;
    prof.write(&folded, &folded::Options::new())?;
    // Perfetto's own protobuf format: exact nanoseconds, about a third of the JSON's size.
    prof.write_perfetto(Path::new(&out_dir).join("chrome_trace.pftrace"))?;
    println!("wrote {} (open in https://ui.perfetto.dev)", json.display());
    println!("wrote {} (gzipped, Unix-epoch timestamps)", gz.display());
    println!("wrote {} (Kineto dialect)", kineto.display());
    println!(
        "wrote {} (render with inferno-flamegraph)",
        folded.display()
    );
    Ok(())
}
