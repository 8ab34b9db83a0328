//! A hostile pass on OTLP/JSON of captures with async calls written piece by piece
//! ([`calls`](super::calls)): sessions forged by a seeded executor (tasks of nested calls
//! polled on any thread, ties in time, calls begun far from their first poll, `tracing`
//! spans entered on several threads, several sessions of one process, flight recorder
//! windows), and sessions recorded for real: each written from pieces with the whole trace's
//! bytes, or decoded whole.

use super::{Options, Otlp, pieces};
use crate::capture::Capture;
use crate::decode::forged_async::{
    FETCH, HANDLE, PARSE, QUERY, Rng, chunked, span_close, span_enter, with_payload,
};
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::trace::Trace;

/// `captures` written to OTLP/JSON from pieces and from their decoded trace: the same bytes
/// and stats. Returns whether their calls were planned (else decoded whole).
fn same_bytes(captures: &[Capture], options: &Options, what: &str) -> bool {
    let trace = Trace::from_captures(captures);
    let refs: Vec<&Capture> = captures.iter().collect();
    let mut whole = Vec::new();
    let otlp = Otlp::new(&trace, options);
    otlp.write_json_to(&mut whole).unwrap();
    let mut from = Vec::new();
    let written = Otlp::write_json_from_captures(&refs, options, &mut from)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    if whole != from {
        let at = (whole.iter().zip(&from))
            .position(|(x, y)| x != y)
            .unwrap_or(whole.len().min(from.len()));
        let around = |b: &[u8]| {
            String::from_utf8_lossy(&b[at.saturating_sub(200)..(at + 200).min(b.len())])
                .into_owned()
        };
        panic!(
            "{what}: {} and {} bytes, differ at {at}:\n{}\n{}",
            whole.len(),
            from.len(),
            around(&whole),
            around(&from)
        );
    }
    assert_eq!(written, otlp.stats(), "{what}");
    pieces::of_captures(&refs, options).is_some_and(|(_, calls)| calls.is_some())
}

/// Requests made piece by piece, encoded as a push encodes them.
#[derive(Default)]
struct Encoded(Vec<Vec<u8>>);

impl pieces::Sink for Encoded {
    fn send(
        &mut self,
        request: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
        _spans: usize,
    ) -> std::io::Result<()> {
        use prost::Message;
        self.0.push(request.encode_to_vec());
        Ok(())
    }
}

/// `captures` pushed from pieces ([`Otlp::push_from_captures`]'s walk): the requests and
/// bytes on the wire of their decoded trace ([`Otlp::encode_requests`]), the same stats.
/// Returns whether their calls were planned.
fn same_wire(captures: &[Capture], options: &Options, what: &str) -> bool {
    let trace = Trace::from_captures(captures);
    let refs: Vec<&Capture> = captures.iter().collect();
    let otlp = Otlp::new(&trace, options);
    let whole: Vec<Vec<u8>> = otlp.encode_requests().collect();
    let Some((pieces, calls)) = pieces::of_captures(&refs, options) else {
        return false;
    };
    let mut sink = Encoded::default();
    let stats = pieces::walk((&pieces, calls.as_ref()), options, &mut sink)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(stats, otlp.stats(), "{what}");
    assert_eq!(sink.0.len(), whole.len(), "{what}: requests");
    for (at, (a, b)) in whole.iter().zip(&sink.0).enumerate() {
        assert!(a == b, "{what}: request {at} differs");
    }
    calls.is_some()
}

/// How the executor's calls are recorded.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// `#[profile] async fn` calls.
    Profile,
    /// `tracing` spans, entered at each poll.
    Tracing,
    /// Either, a seed's choice per call.
    Mixed,
}

/// What [`executor`] forges.
#[derive(Clone, Copy)]
struct Exec {
    seed: u64,
    threads: usize,
    steps: usize,
    chunk: usize,
    kind: Kind,
    /// The first tick.
    from: u64,
    /// Ticks each step moves on: up to this (with `ties`, from 0: ties across threads; of
    /// stride 0, all at one tick), else 1 more.
    stride: u64,
    ties: bool,
    /// Calls begun now and then away from their first poll (and dropped unpolled).
    strays: bool,
    /// Hostile turns: span ids reused (also while open), polls of calls never begun, calls
    /// ended later on any thread (a `tracing` span closed on a thread it was never entered
    /// on), deep nesting.
    chaos: bool,
    /// Instants (of the thread or of the process) and counter samples among the slices.
    events: bool,
}

/// A call of the executor: its callsite, span id, whether a `tracing` span, the threads it
/// was polled on.
struct Call {
    site: &'static Callsite,
    span: u32,
    tracing: bool,
    threads: Vec<usize>,
}

/// A slice open on a thread: its callsite, begin tick, whether a poll.
type Open = (&'static Callsite, u64, bool);

/// Records of an executor as a seed drives it: tasks of nested calls (a call awaiting
/// another polls it inside its own polls), each task polled on any idle thread, now and then
/// inside a worker's plain scope; plain scopes inside polls; tasks yielding, completing (each
/// call ending right after its last poll), spawned from inside a poll; ties in time across
/// threads; slices and calls left open at the stop.
fn executor(e: Exec) -> Capture {
    let mut rng = Rng::of_seed(e.seed);
    let sites = [&FETCH, &HANDLE];
    let mut records: Vec<Vec<RawEvent>> = vec![Vec::new(); e.threads];
    let mut stacks: Vec<Vec<Open>> = vec![Vec::new(); e.threads];
    // Per thread, the task it polls.
    let mut running: Vec<Option<usize>> = vec![None; e.threads];
    // Tasks: the calls awaited, outermost first (empty: done); whether on a thread.
    let mut tasks: Vec<(Vec<Call>, bool)> = Vec::new();
    let mut next_span = 0u32;
    let mut tick = e.from;
    let call = |rng: &mut Rng, span: &mut u32| {
        *span += 1;
        let reused = e.chaos && *span > 3 && rng.below(8) == 0;
        let id = if reused {
            1 + rng.below(u64::from(*span - 1)) as u32
        } else {
            *span
        };
        let tracing = match e.kind {
            Kind::Profile => false,
            Kind::Tracing => true,
            Kind::Mixed => rng.below(2) == 0,
        };
        let site = sites[rng.below(2) as usize];
        (site, id, tracing)
    };
    // Calls ended later (`chaos`).
    let mut later: Vec<Call> = Vec::new();
    for _ in 0..e.steps {
        tick += rng.below(e.stride + 1) + u64::from(!e.ties);
        let t = rng.below(e.threads as u64) as usize;
        let out = &mut records[t];
        let stack = &mut stacks[t];
        if e.events {
            match rng.below(8) {
                0 => out.push(RawEvent::new(RawKind::Instant, PARSE.id(), tick)),
                1 => out.push(RawEvent::new(RawKind::InstantProcess, QUERY.id(), tick)),
                2 => out.extend(RawEvent::sample(
                    RawKind::CounterSet,
                    HANDLE.id(),
                    tick,
                    (RawEvent::NUMBER_INT, tick % 7),
                )),
                _ => {}
            }
        }
        let r = rng.below(16);
        let Some(task) = running[t] else {
            let idle = (0..tasks.len()).filter(|&k| !tasks[k].1 && !tasks[k].0.is_empty());
            let idle: Vec<usize> = idle.collect();
            if r < 2 && stack.is_empty() {
                // A worker's plain scope around the polls to come.
                out.push(RawEvent::begin(QUERY.id(), tick));
                stack.push((&QUERY, tick, false));
            } else if r < 9 && !idle.is_empty() {
                // An idle task polled here, each of its calls.
                let k = idle[rng.below(idle.len() as u64) as usize];
                for c in &mut tasks[k].0 {
                    poll_begin(out, stack, c, t, tick);
                }
                tasks[k].1 = true;
                running[t] = Some(k);
            } else if r < 12 || (e.strays && r < 13) {
                // A new task, begun here, polled now (or, a stray, later).
                let (site, span, tracing) = call(&mut rng, &mut next_span);
                let mut c = Call {
                    site,
                    span,
                    tracing,
                    threads: Vec::new(),
                };
                if !tracing {
                    out.extend(with_payload(RawKind::AsyncBegin, site, tick, span));
                }
                let now = r < 12;
                if now {
                    poll_begin(out, stack, &mut c, t, tick);
                    running[t] = Some(tasks.len());
                }
                tasks.push((vec![c], now));
            } else if e.chaos && r == 13 && !later.is_empty() {
                let c = later.swap_remove(rng.below(later.len() as u64) as usize);
                end_call(out, &c, t, tick);
            } else if e.chaos && r == 14 {
                // A poll of a call never begun, around what comes.
                out.extend(with_payload(RawKind::PollBegin, &FETCH, tick, 9000));
                stack.push((&FETCH, tick, false));
            } else if let Some((site, began, _)) = stack.pop() {
                out.push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
            } else {
                out.push(RawEvent::begin(QUERY.id(), tick));
                out.push(RawEvent::end(RawEvent::end_key(QUERY.id(), tick), tick));
            }
            continue;
        };
        let chain = &mut tasks[task].0;
        match r {
            // A plain scope begins, or ends.
            0..=2 if stack.len() < 12 => {
                out.push(RawEvent::begin(PARSE.id(), tick));
                stack.push((&PARSE, tick, false));
            }
            3..=4 if stack.last().is_some_and(|s| !s.2 && s.0.id() == PARSE.id()) => {
                let (site, began, _) = stack.pop().unwrap();
                out.push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
            }
            // A call awaited: begun and polled inside the innermost.
            5..=7 if chain.len() < if e.chaos { 40 } else { 7 } => {
                let (site, span, tracing) = call(&mut rng, &mut next_span);
                let mut c = Call {
                    site,
                    span,
                    tracing,
                    threads: Vec::new(),
                };
                if !tracing {
                    out.extend(with_payload(RawKind::AsyncBegin, site, tick, span));
                }
                poll_begin(out, stack, &mut c, t, tick);
                chain.push(c);
            }
            // A task spawned: its call begun here, polled later anywhere.
            8 if e.strays => {
                let (site, span, _) = call(&mut rng, &mut next_span);
                out.extend(with_payload(RawKind::AsyncBegin, site, tick, span));
                let c = Call {
                    site,
                    span,
                    tracing: false,
                    threads: Vec::new(),
                };
                tasks.push((vec![c], false));
            }
            // The innermost call completes (its plain scopes end first).
            9..=11 => {
                let c = chain.pop().unwrap();
                close_to_poll(out, stack, tick);
                let (site, began, _) = stack.pop().unwrap();
                out.push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
                match e.chaos && r == 11 {
                    true => later.push(c),
                    false => end_call(out, &c, t, tick),
                }
                if chain.is_empty() {
                    tasks[task].1 = false;
                    running[t] = None;
                }
            }
            // The task yields: every slice of it ends.
            _ => {
                for _ in 0..chain.len() {
                    close_to_poll(out, stack, tick);
                    let (site, began, _) = stack.pop().unwrap();
                    out.push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
                }
                tasks[task].1 = false;
                running[t] = None;
            }
        }
    }
    chunked(records, tick + 50, e.chunk)
}

/// The poll of `c` begins on thread `t` at `tick`.
fn poll_begin(out: &mut Vec<RawEvent>, stack: &mut Vec<Open>, c: &mut Call, t: usize, tick: u64) {
    match c.tracing {
        true => out.extend(span_enter(c.site, tick, u64::from(c.span))),
        false => out.extend(with_payload(RawKind::PollBegin, c.site, tick, c.span)),
    }
    stack.push((c.site, tick, true));
    c.threads.push(t);
}

/// Ends the plain scopes above the innermost poll.
fn close_to_poll(out: &mut Vec<RawEvent>, stack: &mut Vec<Open>, tick: u64) {
    while let Some(&(site, began, false)) = stack.last() {
        stack.pop();
        out.push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
    }
}

/// Call `c` ends on thread `t` at `tick`, right after its last poll.
fn end_call(out: &mut Vec<RawEvent>, c: &Call, t: usize, tick: u64) {
    match c.tracing {
        true => {
            let here = c.threads.iter().all(|&at| at == t);
            out.extend(span_close(tick, u64::from(c.span), here));
        }
        false => out.extend(with_payload(RawKind::AsyncEnd, c.site, tick, c.span)),
    }
}

/// `capture` as a flight recorder's window starting at `cut` would hold it: each thread's
/// records before `cut` lost (a record with its data), its calls begun before cut there.
fn window(capture: &Capture, cut: u64) -> Capture {
    let threads = (capture.threads.iter())
        .map(|thread| {
            let all: Vec<RawEvent> = (thread.chunks.iter())
                .flat_map(|c| match c {
                    crate::capture::Chunk::Owned(records) => records.clone(),
                    _ => unreachable!("records made by hand"),
                })
                .collect();
            let mut out = Vec::new();
            let mut keep = false;
            for record in all {
                if !record.kind.carries_data() {
                    keep = record.tick >= cut;
                }
                if keep {
                    out.push(record);
                }
            }
            out
        })
        .collect();
    let mut windowed = chunked(threads, capture.end_tick, 7);
    windowed.cut_start = Some(cut);
    windowed
}

/// An [`Exec`] of `seed`, all else a seed's choice.
fn exec(seed: u64) -> Exec {
    let mut rng = Rng::of_seed(seed ^ 0x5EED);
    Exec {
        seed,
        threads: 1 + rng.below(5) as usize,
        steps: 100 + rng.below(500) as usize,
        chunk: 1 + rng.below(20) as usize,
        kind: [Kind::Profile, Kind::Profile, Kind::Tracing, Kind::Mixed][rng.below(4) as usize],
        from: 10,
        stride: rng.below(4),
        ties: rng.below(2) == 0,
        strays: rng.below(3) == 0,
        chaos: false,
        events: false,
    }
}

#[test]
fn forged_executors_are_written_from_pieces_with_the_whole_traces_bytes() {
    let options = Options::new();
    let (mut planned, mut with_calls) = (0, 0);
    for seed in 0..48 {
        let e = exec(seed);
        let capture = executor(e);
        if Trace::from_capture(&capture).async_spans.is_empty() {
            continue;
        }
        with_calls += 1;
        let what = format!("executor seed {seed}");
        planned += usize::from(same_bytes(&[capture], &options, &what));
    }
    eprintln!("{planned} of {with_calls} planned");
    assert!(with_calls >= 40, "{with_calls} with calls");
    assert!(
        planned * 2 >= with_calls,
        "{planned} of {with_calls} planned"
    );
}

#[test]
fn sessions_of_one_process_that_interleave_are_written_as_decoded() {
    let options = Options::new();
    let per_process = Options::new().trace_per_process(true);
    let mut planned = 0;
    for seed in 0..16 {
        // Two to four sessions from the same tick (ties between their calls' starts), of
        // one process, or of two.
        let mut rng = Rng::of_seed(seed + 77);
        let sessions = 2 + rng.below(3) as usize;
        let captures: Vec<Capture> = (0..sessions as u64)
            .map(|s| {
                let mut capture = executor(Exec {
                    stride: rng.below(3),
                    ties: seed % 3 == 0,
                    kind: Kind::Profile,
                    steps: 150 + rng.below(150) as usize,
                    ..exec(seed * 16 + s)
                });
                if seed % 4 == 3 {
                    capture.header.process_id = 40 + (s % 2) as u32;
                }
                capture
            })
            .collect();
        let what = format!("sessions of seed {seed}");
        planned += usize::from(same_bytes(&captures, &options, &what));
        same_bytes(&captures, &per_process, &what);
    }
    eprintln!("{planned} of 16 planned");
    assert!(planned >= 8, "{planned} of 16 planned");
}

#[test]
fn flight_windows_that_cut_calls_are_written_as_decoded() {
    let options = Options::new();
    let mut planned = 0;
    for seed in 0..16 {
        let capture = executor(Exec {
            kind: [Kind::Profile, Kind::Mixed][seed as usize % 2],
            ..exec(seed + 500)
        });
        let cut = 10 + (capture.end_tick - 10) * (1 + seed % 3) / 5;
        let windowed = window(&capture, cut);
        if Trace::from_capture(&windowed).async_spans.is_empty() {
            continue;
        }
        let what = format!("window of seed {seed} at {cut}");
        planned += usize::from(same_bytes(&[windowed], &options, &what));
    }
    eprintln!("{planned} windows planned");
}

#[test]
fn hostile_executors_are_written_as_decoded() {
    let options = Options::new();
    let (mut planned, mut with_calls) = (0, 0);
    let seeds: u64 = std::env::var("HOSTILE_SEEDS").map_or(48, |s| s.parse().unwrap());
    for seed in 0..seeds {
        let capture = executor(Exec {
            chaos: true,
            ..exec(seed + 9_000)
        });
        if Trace::from_capture(&capture).async_spans.is_empty() {
            continue;
        }
        with_calls += 1;
        let what = format!("hostile executor seed {seed}");
        planned += usize::from(same_bytes(&[capture], &options, &what));
    }
    eprintln!("{planned} of {with_calls} planned");
}

#[test]
fn executors_with_events_arguments_links_and_memory_are_written_as_decoded() {
    use crate::decode::forged_async::{with_args, with_memory};
    let options = Options::new();
    let mut planned = 0;
    for seed in 0..24 {
        let e = Exec {
            events: true,
            chaos: seed % 4 == 3,
            ..exec(seed + 3_000)
        };
        let mut capture = executor(e);
        capture = match seed % 3 {
            0 => capture,
            1 => with_args(capture, seed, 1 + seed as usize % 9, true),
            _ => with_memory(with_args(capture, seed, 5, seed % 2 == 0), 3),
        };
        if Trace::from_capture(&capture).async_spans.is_empty() {
            continue;
        }
        let what = format!("executor with events, seed {seed}");
        planned += usize::from(same_bytes(&[capture], &options, &what));
    }
    eprintln!("{planned} of 24 planned");
}

#[test]
fn thousands_of_calls_of_sessions_that_interleave_cross_chunks_as_decoded() {
    let options = Options::new();
    let big = |seed: u64, process: u32| {
        let mut capture = executor(Exec {
            threads: 3,
            steps: 15_000,
            chunk: 64,
            kind: Kind::Profile,
            stride: 1,
            ties: false,
            strays: false,
            ..exec(seed)
        });
        capture.header.process_id = process;
        capture
    };
    let captures = [big(1, 5), big(2, 5), big(3, 6)];
    let trace = Trace::from_captures(&captures);
    eprintln!("{} calls", trace.async_spans.len());
    assert!(trace.async_spans.len() > 4096 + 744);
    assert!(
        same_bytes(&captures, &options, "thousands"),
        "decoded whole"
    );
}

#[test]
fn pushes_in_small_batches_are_the_whole_traces_requests() {
    let options = [
        Options::new().batch_spans(1),
        Options::new().batch_spans(7).service_name("svc"),
        Options::new().max_batch_bytes(600).trace_per_process(true),
        Options::new().batch_spans(64).max_batch_bytes(4_000),
    ];
    let mut planned = 0;
    for seed in 0..12 {
        let capture = executor(Exec {
            events: seed % 2 == 0,
            ties: false,
            ..exec(seed + 7_000)
        });
        let mut other = executor(Exec {
            ties: seed % 3 == 0,
            ..exec(seed + 7_100)
        });
        other.header.process_id = 3;
        let captures = [capture, other];
        let options = &options[seed as usize % 4];
        let what = format!("push of seed {seed}");
        planned += usize::from(same_wire(&captures, options, &what));
        same_bytes(&captures, options, &what);
    }
    eprintln!("{planned} of 12 planned");
    assert!(planned >= 6, "{planned} of 12 planned");
}

/// A future pending `0` more times, then ready.
struct Yield(u32);

impl std::future::Future for Yield {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        match self.0 {
            0 => std::task::Poll::Ready(()),
            _ => {
                self.0 -= 1;
                std::task::Poll::Pending
            }
        }
    }
}

/// An async call that yields `i % 3` times, a `parse` scope in its first poll.
#[crate::profile(crate = crate)]
async fn leaf(i: u64) -> u64 {
    {
        let _parse = crate::scope!("parse");
        std::hint::black_box(i);
    }
    Yield((i % 3) as u32).await;
    i
}

/// An async call awaiting `i % 4` [`leaf`] calls, yielding between them.
#[crate::profile(crate = crate)]
async fn request(i: u64) -> u64 {
    let mut sum = 0;
    for k in 0..i % 4 {
        sum += leaf(i + k).await;
        Yield(1).await;
    }
    sum
}

type Task = std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send>>;

/// Records `tasks` [`request`] calls run to their end by `workers` threads taking them from
/// one queue and polling each once before putting it back (its polls hop between threads),
/// the first `open` of them left unfinished at the stop; the capture read back from its bytes.
fn recorded(tasks: u64, workers: usize, open: u64) -> Vec<Capture> {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    let prof = crate::Profiler::builder().current_thread().start();
    let queue: Mutex<VecDeque<(u64, Task)>> = Mutex::new(
        (0..tasks)
            .map(|i| (i, Box::pin(request(i)) as Task))
            .collect(),
    );
    let left: Mutex<Vec<Task>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                prof.join_current_thread();
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                loop {
                    let Some((i, mut task)) = queue.lock().unwrap().pop_front() else {
                        break;
                    };
                    if task.as_mut().poll(&mut cx).is_pending() {
                        match i < open {
                            true => left.lock().unwrap().push(task),
                            false => queue.lock().unwrap().push_back((i, task)),
                        }
                    }
                }
            });
        }
    });
    prof.stop();
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    drop(left);
    Capture::from_bytes(&bytes).unwrap()
}

#[test]
fn calls_recorded_on_a_pool_of_threads_are_written_from_pieces() {
    let options = Options::new();
    for (tasks, workers, open) in [(40, 1, 0), (300, 3, 5), (1_200, 4, 0)] {
        let captures = recorded(tasks, workers, open);
        let trace = Trace::from_captures(&captures);
        // (A task left open began its first leaf only.)
        let leaves: u64 = (0..tasks)
            .map(|i| if i < open { (i % 4).min(1) } else { i % 4 })
            .sum();
        assert_eq!(trace.async_spans.len() as u64, tasks + leaves, "{tasks}");
        let what = format!("{tasks} recorded on {workers}");
        // (Two workers may poll at one instant: then decoded whole.)
        let planned = same_bytes(&captures, &options, &what);
        eprintln!("{what}: planned {planned}");
        same_wire(&captures, &Options::new().batch_spans(100), &what);
    }
}
