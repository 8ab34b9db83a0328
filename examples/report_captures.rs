//! Captures for the HTML report's browser check and benchmark (`scripts/html_check.sh`,
//! `scripts/html_bench.sh`): `hostile.tscope`, whose scope names are quotes, `</script>`, HTML
//! tags, emoji, control characters and a 100 KB name, with counters, instants and links;
//! `mixed.tscope`, with memory tracked (a timeline of allocations), `#[profile] async fn`
//! calls polled in several steps and a process-wide instant; and
//! with `--scopes N`, `scopes-N.tscope`, N scopes on 4 threads (nested three deep: a `frame`
//! holds `update`s, each holding `step`s), the size the benchmark measures.
//!
//! `cargo run --release --example report_captures -- OUT_DIR [--scopes N [--html]]`: with
//! `--html`, also writes `scopes-N.html` (`Profiler::write` with `export::html::Options`) and
//! prints how long that took.

use std::future::Future;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tickscope::{Profiler, TrackingAlloc, counter, instant, profile, scope};

#[global_allocator]
static ALLOC: TrackingAlloc = TrackingAlloc::new(std::alloc::System);

/// Pending `n` times, then ready.
struct Pending(u32);

impl Future for Pending {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            Poll::Ready(())
        } else {
            self.0 -= 1;
            Poll::Pending
        }
    }
}

#[profile]
async fn load(size: usize) -> usize {
    let mut data = Vec::new();
    for _ in 0..3 {
        data.extend(std::iter::repeat_n(1u8, size));
        Pending(1).await;
    }
    data.len()
}

/// Polls `fut` until it is ready, with a waker that does nothing.
fn run<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        let _g = scope!("between polls");
        black_box(work(500));
    }
}

fn mixed(out: &Path) -> std::io::Result<()> {
    let prof = Profiler::builder().track_memory(true).start();
    let mut kept = Vec::new();
    for i in 0..20usize {
        let _g = scope!("request");
        let body = {
            let _b = scope!("build");
            vec![i as u8; 1024 * (i + 1)]
        };
        kept.push(run(load(body.len() / 4)));
        if i % 5 == 0 {
            instant!("checkpoint", process);
        }
    }
    black_box(&kept);
    prof.stop();
    let path = out.join("mixed.tscope");
    prof.write_capture(&path)?;
    println!("wrote {}", path.display());
    Ok(())
}

fn work(n: u64) -> u64 {
    (0..n).fold(1u64, |a, b| black_box(a.wrapping_mul(31).wrapping_add(b)))
}

/// Names that would break a page that wrote them as HTML or inside a script.
fn hostile_names() -> Vec<String> {
    vec![
        "</script><script>alert(1)</script>".to_owned(),
        "<img src=x onerror=alert(2)>".to_owned(),
        "\"quoted\" 'single' `back` & ampersand".to_owned(),
        "emoji 🦀🔥 and ünïcödé".to_owned(),
        "line\nbreak\ttab \u{2028} separator".to_owned(),
        "<!-- comment --> ]]> {{template}} ${x}".to_owned(),
        format!("long-{}", "x".repeat(100 * 1024)),
    ]
}

fn hostile(out: &Path) -> std::io::Result<()> {
    let names = hostile_names();
    let prof = Profiler::start();
    let worker = std::thread::Builder::new()
        .name("<b>worker</b> \"2\"".into())
        .spawn({
            let names = names.clone();
            move || {
                let mut link = None;
                for (i, name) in names.iter().enumerate() {
                    let _g = scope!(name = name.as_str());
                    counter!("queue </script>", set = i as u64);
                    black_box(work(2_000));
                    // Captured in a scope: the flow starts there.
                    link.get_or_insert_with(tickscope::link);
                }
                link.expect("at least one name")
            }
        })?;
    {
        let _g = scope!("main");
        for name in &names {
            let _outer = scope!(name = name.as_str());
            let _inner = scope!("inner <i>");
            black_box(work(5_000));
        }
        instant!("instant <u>mark</u>");
    }
    let link = worker.join().expect("worker panicked");
    {
        let _g = scope!("after link", follows = link);
        black_box(work(1_000));
    }
    prof.stop();
    let path = out.join("hostile.tscope");
    prof.write_capture(&path)?;
    println!("wrote {}", path.display());
    Ok(())
}

fn scopes(out: &Path, total: u64, html: bool) -> std::io::Result<()> {
    const THREADS: u64 = 4;
    const STEPS: u64 = 8;
    const UPDATES: u64 = 4;
    // Each frame is 1 + UPDATES * (1 + STEPS) scopes.
    let per_frame = 1 + UPDATES * (1 + STEPS);
    let frames = total.div_ceil(THREADS * per_frame);
    let prof = Profiler::start();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn_scoped(s, move || {
                    for _ in 0..frames {
                        let _f = scope!("frame");
                        for _ in 0..UPDATES {
                            let _u = scope!("update");
                            for k in 0..STEPS {
                                let _s = scope!("step");
                                black_box(work(10 + k * 5));
                            }
                        }
                    }
                })
                .expect("spawn worker");
        }
    });
    prof.stop();
    let path = out.join(format!("scopes-{total}.tscope"));
    prof.write_capture(&path)?;
    println!(
        "wrote {} ({} scopes)",
        path.display(),
        frames * THREADS * per_frame
    );
    if html {
        let path = out.join(format!("scopes-{total}.html"));
        let trace = prof.trace();
        let start = std::time::Instant::now();
        tickscope::export::write_file(&trace, &path, &tickscope::export::html::Options::new())?;
        let took = start.elapsed();
        println!(
            "wrote {} ({} bytes) in {:.3} s",
            path.display(),
            std::fs::metadata(&path)?.len(),
            took.as_secs_f64()
        );
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut out = PathBuf::from(".");
    let mut total = None;
    let mut html = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--scopes" => {
                let n = args.next().ok_or("--scopes needs a count")?;
                total = Some(n.parse::<u64>().map_err(|e| format!("--scopes {n}: {e}"))?);
            }
            "--html" => html = true,
            dir => out = PathBuf::from(dir),
        }
    }
    match total {
        Some(n) => scopes(&out, n, html)?,
        None => {
            hostile(&out)?;
            mixed(&out)?;
        }
    }
    Ok(())
}
