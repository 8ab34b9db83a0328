//! Links: two producer threads create jobs, three workers run them. Each job carries the
//! `Link` of the scope that created it, and the worker's scope follows from it, so the table
//! splits `handle` by the scope that caused it and the trace (`links.json` and `links.pftrace`, written into the
//! current directory or the one given as first argument) draws an arrow from each `submit`
//! or `retry` to the `handle` that ran it. The producers usually exit before their last jobs
//! run: links still match.
//!
//! `cargo run --release --example links [OUT_DIR]`

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tickscope::export::perfetto;
use tickscope::{Link, Profiler, scope};

struct Job {
    n: u64,
    link: Link,
}

fn checksum(n: u64) -> u64 {
    let _g = scope!("checksum");
    (0..2_000 + n).fold(n, |acc, x| acc.rotate_left(5) ^ x)
}

fn main() -> std::io::Result<()> {
    let out_dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    let prof = Profiler::start();
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("worker-{w}"))
                .spawn(move || {
                    let mut sum = 0u64;
                    loop {
                        let job = rx.lock().expect("queue").recv();
                        let Ok(job) = job else { break };
                        let _g = scope!("handle", follows = job.link);
                        sum = sum.wrapping_add(checksum(job.n));
                    }
                    sum
                })
                .expect("spawn")
        })
        .collect();
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let tx = tx.clone();
            std::thread::Builder::new()
                .name(format!("producer-{p}"))
                .spawn(move || {
                    for n in 0..20 {
                        // A scope with a sequence number of its own: its link goes with the job.
                        let submit = scope!("submit", seq);
                        tx.send(Job {
                            n,
                            link: submit.link(),
                        })
                        .expect("workers alive");
                        if n % 5 == 0 {
                            // A link captured inside whatever scope is open: `retry`.
                            let _g = scope!("retry");
                            tx.send(Job {
                                n: n + 100,
                                link: tickscope::link(),
                            })
                            .expect("workers alive");
                        }
                    }
                })
                .expect("spawn")
        })
        .collect();
    drop(tx);
    // The producers exit here, usually before their last jobs have run.
    for p in producers {
        p.join().expect("producer");
    }
    let sum = workers
        .into_iter()
        .fold(0u64, |acc, w| acc.wrapping_add(w.join().expect("worker")));
    prof.stop();

    println!("{}", prof.table().by_origin(true));
    let trace = prof.trace();
    let matched = trace.flows.iter().filter(|l| l.origin.is_some()).count();
    println!(
        "checksum {sum:x}; {} links, {matched} matched",
        trace.flows.len()
    );
    let path = Path::new(&out_dir).join("links.json");
    prof.write_chrome_trace(&path)?;
    println!("wrote {}", path.display());
    // The same trace in Perfetto's own protobuf format: flows as `flow_ids`.
    let pftrace = Path::new(&out_dir).join("links.pftrace");
    prof.write_perfetto(&pftrace)?;
    println!("wrote {}", pftrace.display());
    // With absolute times and explicit tracks, for consumers that do not apply packet defaults.
    let absolute = Path::new(&out_dir).join("links.absolute.pftrace");
    prof.write(&absolute, &perfetto::Options::new().delta_times(false))?;
    println!("wrote {}", absolute.display());
    Ok(())
}
