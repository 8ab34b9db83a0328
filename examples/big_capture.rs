//! Writes a large capture file by streaming a session ([`ProfilerBuilder::stream_to`]): `THREADS`
//! threads (4 by default) each run the same loop of nested scopes (`request` holding
//! `parse`, `handle` and, inside `handle`, `query`) until they recorded about `MIB` MiB of
//! records counted at 16 bytes each (their decoded size: recorded, an entry or exit takes 8;
//! the file, its event chunks packed, holds far less). With
//! `outer`, each thread's loop runs inside one `worker` scope, open from its first record to
//! its last (as a `main` or a worker loop would be). With `links`, each `request` is a `seq`
//! scope (capturing a link), and one in [`LINK_EVERY`] is followed on a thread of its own,
//! `follower`, first in the capture (the links' origins are on later threads), by a `follow`
//! scope holding `ack`. With `memory`, the session tracks memory (`MemoryMode::Timeline`):
//! each iteration allocates a block in `parse` that `query` frees (two allocations and frees
//! recorded, four records more), and each thread keeps a block live to the end. With `async`,
//! each `request` is a call of an `async fn` under `#[profile]`, polled twice (`parse`,
//! `handle` and `query` in its first poll), eight calls open at once. With `tracing` (built
//! with `--features tracing`), each `request` is a `tracing` span with a field, recorded by
//! the bridge: entered twice (the loop's scopes in its first enter), eight alive at once,
//! closed on its thread: an async call of two polls. Modes combine with
//! commas (`outer,memory`). The structure (names, nesting, number of scopes) is the same
//! on every run; only the durations vary. For measuring the `tickscope` command on big
//! captures (`scripts/big_capture.sh`).
//!
//! `cargo run --release --example big_capture -- OUT.tscope MIB [THREADS] [outer,links,memory,async,tracing]`
//!
//! [`ProfilerBuilder::stream_to`]: tickscope::ProfilerBuilder::stream_to

use tickscope::{Link, MemoryMode, Profiler, TrackingAlloc, scope};

/// Records allocations and frees for sessions that track memory (`memory`).
#[global_allocator]
static ALLOC: TrackingAlloc = TrackingAlloc::new(std::alloc::System);

/// Records per iteration of the loop: four scopes, an entry and an exit each.
const RECORDS_PER_ITERATION: u64 = 8;

/// Records per iteration with `memory`: an allocation and a free more, two records each.
const MEMORY_RECORDS_PER_ITERATION: u64 = RECORDS_PER_ITERATION + 4;

/// Records per iteration with `async`: the call's begin and end and two polls (two records
/// each, and an exit a poll), and the three scopes of its first poll.
const ASYNC_RECORDS_PER_ITERATION: u64 = 16;

/// Records per iteration with `tracing`: two enters (two records each, an argument record
/// after each, and an exit), the three scopes of the first, and the close (two records).
const TRACING_RECORDS_PER_ITERATION: u64 = 16;

/// With `async` and `tracing`, the calls open at once on a thread.
const ASYNC_BATCH: u64 = 8;

/// With `links`, the requests whose link is followed: one in this many.
const LINK_EVERY: u64 = 100;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: big_capture OUT.tscope MIB [THREADS] [outer,links,memory,async,tracing]";
    let path = args.next().ok_or(usage)?;
    let mib: u64 = args.next().ok_or(usage)?.parse()?;
    let threads: u64 = args.next().map_or(Ok(4), |t| t.parse())?;
    let (mut outer, mut links, mut memory, mut calls) = (false, false, false, false);
    let mut traced = false;
    if let Some(modes) = args.next() {
        for mode in modes.split(',') {
            match mode {
                "outer" => outer = true,
                "links" => links = true,
                "memory" => memory = true,
                "async" => calls = true,
                "tracing" => traced = true,
                _ => return Err(usage.into()),
            }
        }
    }
    if (calls || traced) && (links || memory) || calls && traced {
        return Err("async and tracing combine with outer only".into());
    }
    if traced && !cfg!(feature = "tracing") {
        return Err("the tracing mode needs `--features tracing`".into());
    }
    let per_iteration = match (memory, calls, traced) {
        (true, _, _) => MEMORY_RECORDS_PER_ITERATION,
        (_, true, _) => ASYNC_RECORDS_PER_ITERATION,
        (_, _, true) => TRACING_RECORDS_PER_ITERATION,
        _ => RECORDS_PER_ITERATION,
    };
    let iterations = (mib << 20) / 16 / per_iteration / threads.max(1);

    let mut builder = Profiler::builder().stream_to(&path).stream_memory(64 << 20);
    if memory {
        builder = builder.track_memory(MemoryMode::Timeline);
    }
    let prof = builder.try_start()?;
    #[cfg(feature = "tracing")]
    if traced {
        use tracing_subscriber::layer::SubscriberExt;
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(tickscope::tracing::layer()),
        )?;
    }
    // The follower records first, then follows the links the workers send.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (links_tx, links_rx) = std::sync::mpsc::channel::<Link>();
    let follower = links.then(|| {
        std::thread::Builder::new()
            .name("follower".into())
            .spawn(move || {
                drop(scope!("start"));
                ready_tx.send(()).ok();
                let mut followed = 0u64;
                for link in links_rx {
                    let _follow = scope!("follow", follows = link);
                    let _ack = scope!("ack");
                    followed += 1;
                }
                followed
            })
    });
    let follower = follower.transpose()?;
    if follower.is_some() {
        ready_rx.recv()?;
    }
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let links_tx = links.then(|| links_tx.clone());
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn(move || {
                    let _worker = outer.then(|| scope!("worker"));
                    // A block live to the end of the session.
                    let kept = memory.then(|| vec![t as u8; 4096]);
                    let mut sum = 0u64;
                    if calls {
                        return requests(t, iterations);
                    }
                    #[cfg(feature = "tracing")]
                    if traced {
                        return spans(t, iterations);
                    }
                    for i in 0..iterations {
                        let _request = match &links_tx {
                            Some(tx) => {
                                let request = scope!("request", seq);
                                if i % LINK_EVERY == 0 {
                                    tx.send(request.link()).ok();
                                }
                                Some(request)
                            }
                            None => None,
                        };
                        let _plain = links_tx.is_none().then(|| scope!("request"));
                        let block = {
                            let _parse = scope!("parse");
                            sum = sum.wrapping_add(std::hint::black_box(i ^ t));
                            memory.then(|| vec![0u8; 64 + (i % 64) as usize])
                        };
                        let _handle = scope!("handle");
                        let _query = scope!("query");
                        drop(std::hint::black_box(block));
                        sum = sum.rotate_left(3);
                    }
                    // Still live at the stop: never freed.
                    std::mem::forget(kept);
                    sum
                })
        })
        .collect::<Result<_, _>>()?;
    for worker in workers {
        std::hint::black_box(worker.join().map_err(|_| "a worker panicked")?);
    }
    drop(links_tx);
    let followed = match follower {
        Some(follower) => follower.join().map_err(|_| "the follower panicked")?,
        None => 0,
    };
    prof.stop();
    let stats = prof.stream_stats().ok_or("not a streaming session")?;
    if let Some(error) = stats.error {
        return Err(error.into());
    }
    println!(
        "wrote {path}: {} bytes, {} records ({:.3} bytes a record), {} scopes on {threads} \
         threads, {} async calls, {} dropped",
        stats.bytes_written,
        stats.records_written,
        stats.bytes_written as f64 / stats.records_written.max(1) as f64,
        iterations * threads * if calls || traced { 3 } else { 4 }
            + if outer { threads } else { 0 }
            + u64::from(links)
            + 2 * followed,
        if calls || traced {
            iterations * threads
        } else {
            0
        },
        stats.dropped_events
    );
    Ok(())
}

/// Pending on its first poll, ready on the second.
#[derive(Default)]
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

/// One request of the `async` mode: the loop's scopes in its first poll, then a second.
#[tickscope::profile]
async fn request(i: u64, t: u64) -> u64 {
    let mut sum = {
        let _parse = scope!("parse");
        std::hint::black_box(i ^ t)
    };
    {
        let _handle = scope!("handle");
        let _query = scope!("query");
        sum = sum.rotate_left(3);
    }
    YieldOnce::default().await;
    sum
}

/// The `async` mode's loop on thread `t`: `iterations` requests, [`ASYNC_BATCH`] open at
/// once, each batch polled once in turn and then again to their end.
fn requests(t: u64, iterations: u64) -> u64 {
    use std::future::Future;
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut sum = 0u64;
    for batch in 0..iterations.div_ceil(ASYNC_BATCH) {
        let first = batch * ASYNC_BATCH;
        let mut calls: Vec<_> = (first..(first + ASYNC_BATCH).min(iterations))
            .map(|i| Box::pin(request(i, t)))
            .collect();
        for call in &mut calls {
            let _ = call.as_mut().poll(&mut cx);
        }
        for call in &mut calls {
            if let std::task::Poll::Ready(value) = call.as_mut().poll(&mut cx) {
                sum = sum.wrapping_add(value);
            }
        }
    }
    sum
}

/// The `tracing` mode's loop on thread `t`: `iterations` requests, [`ASYNC_BATCH`] spans
/// alive at once, each entered once in turn (the loop's scopes inside), then again, then
/// closed.
#[cfg(feature = "tracing")]
fn spans(t: u64, iterations: u64) -> u64 {
    let mut sum = 0u64;
    for batch in 0..iterations.div_ceil(ASYNC_BATCH) {
        let first = batch * ASYNC_BATCH;
        let spans: Vec<(u64, tracing::Span)> = (first..(first + ASYNC_BATCH).min(iterations))
            .map(|i| (i, tracing::info_span!("request", i)))
            .collect();
        for (i, span) in &spans {
            let _entered = span.enter();
            {
                let _parse = scope!("parse");
                sum = sum.wrapping_add(std::hint::black_box(i ^ t));
            }
            let _handle = scope!("handle");
            let _query = scope!("query");
            sum = sum.rotate_left(3);
        }
        for (_, span) in &spans {
            let _entered = span.enter();
            sum = sum.wrapping_add(1);
        }
    }
    sum
}
