//! The README's demo: profile a small workload on several threads, print the table, write a
//! trace for ui.perfetto.dev and a single-file HTML report.
//!
//! `cargo run --release --example quickstart [OUT_DIR]` (the trace goes to
//! `OUT_DIR/quickstart.json`, the report to `OUT_DIR/quickstart.html`, by default in the current
//! directory).

use std::hint::black_box;

use tickscope::{Profiler, scope};

fn tokenize(line: &str) -> Vec<&str> {
    let _g = scope!("tokenize");
    line.split_whitespace().collect()
}

fn checksum(words: &[&str]) -> u64 {
    let _g = scope!("checksum");
    words
        .iter()
        .flat_map(|w| w.bytes())
        .fold(0u64, |acc, b| acc.wrapping_mul(31).wrapping_add(b as u64))
}

fn parse(line: &str) -> u64 {
    let _g = scope!("parse");
    let words = tokenize(line);
    checksum(&words)
}

fn main() -> std::io::Result<()> {
    let out_dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    let text: Vec<String> = (0..2_000)
        .map(|i| format!("line {i} with some words to split and hash {}", i * 7))
        .collect();

    let prof = Profiler::start();
    let total: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = text
            .chunks(500)
            .enumerate()
            .map(|(i, lines)| {
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn_scoped(s, move || {
                        let _g = scope!("worker");
                        lines.iter().map(|l| parse(l)).fold(0u64, u64::wrapping_add)
                    })
                    .expect("spawn worker")
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker panicked"))
            .fold(0, u64::wrapping_add)
    });
    {
        let _g = scope!("report");
        black_box(total);
    }
    prof.stop();

    println!("{}", prof.table());
    println!("{}", prof.table().tree(true));
    let path = std::path::Path::new(&out_dir).join("quickstart.json");
    prof.write_chrome_trace(&path)?;
    println!(
        "trace written to {} (open it in https://ui.perfetto.dev)",
        path.display()
    );
    let html = std::path::Path::new(&out_dir).join("quickstart.html");
    prof.write(
        &html,
        &tickscope::export::html::Options::new().title("quickstart"),
    )?;
    println!(
        "report written to {} (open it in a browser: it needs no network)",
        html.display()
    );
    Ok(())
}
