//! A long-running service to attach to: it keeps its last 16 MiB of events in a flight
//! recorder and listens for `tickscope` (`ProfilerBuilder::listen`), so that a capture of it can be
//! taken at any time, the seconds before the attach included, without restarting it.
//!
//! ```text
//! cargo run --example service &                        # prints its pid, serves until killed
//! tickscope ps                                         # the programs that can be attached to
//! tickscope record --pid PID --duration 5s -o run.tscope
//! tickscope table run.tscope                           # or convert, info, diff ...
//! ```
//!
//! `cargo run --example service -- --requests 2000` stops after 2000 requests and prints its
//! own table; `--count-file PATH` writes `unix_ms requests_so_far` lines to PATH four times a
//! second (what `scripts/top_tmux.sh` compares `tickscope top`'s rates with). Unix only
//! (elsewhere it runs without listening, and says so).

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tickscope::{Profiler, scope};

fn main() {
    let arg = |name: &str| std::env::args().skip_while(|a| a != name).nth(1);
    let limit: Option<u64> = arg("--requests").and_then(|n| n.parse().ok());
    let mut counts = arg("--count-file").map(|path| std::fs::File::create(path).unwrap());
    let mut last_count = Instant::now();
    let prof = Profiler::builder()
        .flight_recorder(16 << 20)
        .listen(true)
        .start();
    eprintln!(
        "service: pid {}: `tickscope record --pid {} --duration 5s -o run.tscope` to look",
        std::process::id(),
        std::process::id()
    );
    let mut served = 0u64;
    while limit.is_none_or(|limit| served < limit) {
        handle(served);
        served += 1;
        if let Some(file) = &mut counts
            && last_count.elapsed() >= Duration::from_millis(250)
        {
            last_count = Instant::now();
            let ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis();
            writeln!(file, "{ms} {served}").unwrap();
        }
        // About a thousand requests a second.
        std::thread::sleep(Duration::from_millis(1));
    }
    prof.stop();
    println!("{}", prof.table());
}

/// One request: parse it, look it up, answer.
fn handle(id: u64) {
    let _request = scope!("request");
    let key = {
        let _g = scope!("parse");
        std::hint::black_box(id.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    };
    {
        let _g = scope!("lookup");
        std::hint::black_box((0..64u64).fold(key, |h, x| h.rotate_left(5) ^ x));
    }
    let _g = scope!("respond");
    std::hint::black_box(key.to_string());
}
