//! A seeded executor of async calls forged for the hostile tests of OTLP of captures with
//! async calls written piece by piece ([`hostile_calls_tests`](super::hostile_calls_tests)).

use crate::capture::Capture;
use crate::decode::forged_async::{
    FETCH, HANDLE, PARSE, QUERY, Rng, chunked, span_close, span_enter, with_payload,
};
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};

/// How the executor's calls are recorded.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    /// `#[profile] async fn` calls.
    Profile,
    /// `tracing` spans, entered at each poll.
    Tracing,
    /// Either, a seed's choice per call.
    Mixed,
}

/// What [`executor`] forges.
#[derive(Clone, Copy)]
pub(super) struct Exec {
    pub(super) seed: u64,
    pub(super) threads: usize,
    pub(super) steps: usize,
    pub(super) chunk: usize,
    pub(super) kind: Kind,
    /// The first tick.
    pub(super) from: u64,
    /// Ticks each step moves on: up to this (with `ties`, from 0: ties across threads; of
    /// stride 0, all at one tick), else 1 more.
    pub(super) stride: u64,
    pub(super) ties: bool,
    /// Calls begun now and then away from their first poll (and dropped unpolled).
    pub(super) strays: bool,
    /// Hostile turns: span ids reused (also while open), polls of calls never begun, calls
    /// ended later on any thread (a `tracing` span closed on a thread it was never entered
    /// on), deep nesting.
    pub(super) chaos: bool,
    /// Instants (of the thread or of the process) and counter samples among the slices.
    pub(super) events: bool,
    /// Tasks seldom yield: polls long open, across the pieces a thread is read in.
    pub(super) linger: bool,
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
pub(super) fn executor(e: Exec) -> Capture {
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
    // A new call, its `AsyncBegin` (unless a `tracing` span) recorded into `out` at `tick`; a
    // task `spawned` is a `#[profile]` call, whatever the kind.
    let call =
        |rng: &mut Rng, span: &mut u32, out: &mut Vec<RawEvent>, tick: u64, spawned: bool| {
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
            } && !spawned;
            let site = sites[rng.below(2) as usize];
            if !tracing {
                out.extend(with_payload(RawKind::AsyncBegin, site, tick, id));
            }
            Call {
                site,
                span: id,
                tracing,
                threads: Vec::new(),
            }
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
                let mut c = call(&mut rng, &mut next_span, out, tick, false);
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
                let mut c = call(&mut rng, &mut next_span, out, tick, false);
                poll_begin(out, stack, &mut c, t, tick);
                chain.push(c);
            }
            // A task spawned: its call begun here, polled later anywhere.
            8 if e.strays => {
                let c = call(&mut rng, &mut next_span, out, tick, true);
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
            // A short plain scope, where tasks linger.
            _ if e.linger && rng.below(24) != 0 => {
                out.push(RawEvent::begin(QUERY.id(), tick));
                out.push(RawEvent::end(RawEvent::end_key(QUERY.id(), tick), tick));
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
        true => out.extend(span_enter(c.site, tick, tracing_id(c.span))),
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
            out.extend(span_close(tick, tracing_id(c.span), here));
        }
        false => out.extend(with_payload(RawKind::AsyncEnd, c.site, tick, c.span)),
    }
}

/// `capture` as a flight recorder's window starting at `cut` would hold it: each thread's
/// records before `cut` lost (a record with its data), its calls begun before cut there.
pub(super) fn window(capture: &Capture, cut: u64) -> Capture {
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
pub(super) fn exec(seed: u64) -> Exec {
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
        linger: false,
    }
}

/// The `tracing` span id of span `span`: high bits set, as `tracing-subscriber`'s ids have.
fn tracing_id(span: u32) -> u64 {
    0x4000_0000_0000 | u64::from(span)
}
