//! `#[profile]` on sync functions, an `impl` block and async functions running on a
//! multi-threaded tokio runtime, where each async call counts once with its wall time even when
//! its polls move between worker threads.
//!
//! `cargo run --release --example profile_attr [OUT_DIR]`

use std::path::Path;
use std::time::Duration;

use tickscope::{Profiler, profile};

struct Tokenizer {
    separator: char,
}

#[profile]
impl Tokenizer {
    fn tokens<'a>(&self, line: &'a str) -> Vec<&'a str> {
        line.split(self.separator)
            .filter(|t| !t.is_empty())
            .collect()
    }

    fn checksum(&self, tokens: &[&str]) -> u64 {
        tokens
            .iter()
            .flat_map(|t| t.bytes())
            .fold(0xcbf2_9ce4_8422_2325, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            })
    }

    #[profile(skip)]
    fn separator(&self) -> char {
        self.separator
    }
}

#[profile]
fn parse(tokenizer: &Tokenizer, line: &str) -> Result<u64, String> {
    let tokens = tokenizer.tokens(line);
    if tokens.is_empty() {
        return Err(format!("no tokens split by {:?}", tokenizer.separator()));
    }
    Ok(tokenizer.checksum(&tokens))
}

/// An I/O-bound call: most of its wall time is spent waiting, little of it running.
#[profile(name = "fetch")]
async fn fetch_page(page: u32) -> String {
    tokio::time::sleep(Duration::from_millis(u64::from(page % 4) + 1)).await;
    tokio::task::yield_now().await;
    format!(
        "page {page}: alpha beta gamma delta {}",
        "x".repeat(page as usize)
    )
}

#[profile]
async fn crawl(pages: u32) -> Result<u64, String> {
    let tokenizer = Tokenizer { separator: ' ' };
    let handles: Vec<_> = (0..pages).map(|p| tokio::spawn(fetch_page(p))).collect();
    let mut sum = 0u64;
    for handle in handles {
        let body = handle.await.map_err(|e| e.to_string())?;
        sum = sum.wrapping_add(parse(&tokenizer, &body)?);
    }
    Ok(sum)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    let prof = Profiler::start();

    let tokenizer = Tokenizer { separator: ',' };
    let mut sync_sum = 0u64;
    for line in ["a,b,c", "", "dd,ee", ",,"] {
        match parse(&tokenizer, line) {
            Ok(sum) => sync_sum = sync_sum.wrapping_add(sum),
            Err(e) => println!("skipped {line:?}: {e}"),
        }
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .thread_name("worker")
        .enable_time()
        .build()?;
    let async_sum = runtime.block_on(crawl(32))?;
    drop(runtime);
    prof.stop();

    println!("sync checksum {sync_sum:#x}, async checksum {async_sum:#x}");
    println!("{}", prof.table());
    println!("{}", prof.table().tree(true).limit(12));
    let trace = prof.trace();
    let moved = trace
        .async_spans
        .iter()
        .filter(|call| call.end_thread != Some(call.thread))
        .count();
    println!(
        "{} async calls, {moved} of them ended on another thread than their first poll",
        trace.async_spans.len()
    );
    let json = Path::new(&out_dir).join("profile_attr.json");
    prof.write_chrome_trace(&json)?;
    println!("wrote {} (open in https://ui.perfetto.dev)", json.display());
    Ok(())
}
