//! An async program instrumented with `tracing` (tokio + `#[instrument]`) whose spans and events
//! show in tickscope's table and Chrome trace next to its own `scope!`s, through
//! `tickscope::tracing::layer()`.
//!
//! `cargo run --release --features tracing --example tracing_bridge [OUT_DIR]`

use std::path::Path;
use std::time::Duration;

use tickscope::{Profiler, scope};
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt;

/// Some CPU work, timed by tickscope itself.
fn checksum(data: &[u8]) -> u64 {
    let _g = scope!("checksum", bytes = data.len());
    data.iter()
        .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
}

#[tracing::instrument]
async fn fetch(id: u64) -> Vec<u8> {
    tokio::time::sleep(Duration::from_millis(1 + id % 3)).await;
    let data = vec![id as u8; 64 * 1024];
    // An instant with its fields; the `monotonic_counter.` field adds to counter `bytes_fetched`.
    tracing::info!(
        id,
        monotonic_counter.bytes_fetched = data.len() as u64,
        "fetched"
    );
    data
}

#[tracing::instrument(skip(data), fields(len = data.len()))]
async fn store(id: u64, data: Vec<u8>) -> u64 {
    tokio::task::yield_now().await;
    checksum(&data)
}

#[tracing::instrument]
async fn request(id: u64) -> u64 {
    let data = fetch(id).await;
    store(id, data).await
}

fn main() -> std::io::Result<()> {
    let out_dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(tickscope::tracing::layer()),
    )
    .expect("no other global subscriber");

    let prof = Profiler::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .thread_name("worker")
        .build()?;
    let total = rt.block_on(
        async {
            let tasks: Vec<_> = (0..8)
                .map(|id| tokio::spawn(request(id).in_current_span()))
                .collect();
            let mut total = 0u64;
            for task in tasks {
                total = total.wrapping_add(task.await.expect("task panicked"));
            }
            let _g = scope!("summarise");
            total
        }
        .instrument(tracing::info_span!("batch", requests = 8)),
    );
    drop(rt);
    prof.stop();

    println!("checksum total = {total}");
    println!("{}", prof.table());
    let report = prof.report();
    assert_eq!(report.get("request").map(|r| r.calls), Some(8));
    assert_eq!(report.get("checksum").map(|r| r.calls), Some(8));
    let trace = prof.trace();
    // Events are named by their message (a literal), else by `target:line`.
    let fetched = trace
        .instants
        .iter()
        .filter(|i| i.name() == "fetched")
        .count();
    assert_eq!(fetched, 8);
    let bytes = trace.counters.iter().find(|c| c.name == "bytes_fetched");
    let last = bytes.and_then(|c| c.last()).map(|s| s.value);
    assert_eq!(last, Some(tickscope::trace::Number::Int(8 * 64 * 1024)));
    let json = Path::new(&out_dir).join("tracing_bridge.json");
    prof.write_chrome_trace(&json)?;
    println!(
        "wrote {} (open in https://ui.perfetto.dev): tracing spans next to scope!s",
        json.display()
    );
    Ok(())
}
