//! Captures of `tracing` spans made by hand for the hostile tests of what is summed and
//! written of them as the threads are read again ([`hostile_tracing_tests`](super::hostile_tracing_tests)).

use crate::capture::{Capture, Chunk};
use crate::decode::forged_async::Rng;
use crate::decode::forged_async::{FETCH, HANDLE, PARSE, QUERY, span_close, span_enter};
use crate::decode::forged_async::{chunked, with_payload};
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};

/// A callsite of the name of [`HANDLE`]'s, elsewhere.
pub(super) static HANDLE_TOO: Callsite = Callsite::new("handle", file!(), line!(), module_path!());

/// How [`forged`] forges a session of `tracing` spans.
#[derive(Clone, Copy)]
pub(super) struct Forge {
    pub(super) seed: u64,
    pub(super) threads: usize,
    pub(super) steps: usize,
    /// Spans alive at once, at most.
    pub(super) pending: usize,
    /// Closes that say "here" of spans entered elsewhere, and "elsewhere" of spans entered
    /// only here.
    pub(super) lie: bool,
    /// Closes of ids never entered, of spans still entered; ids reused while open (another
    /// callsite's enter of an id alive); spans entered again where they are entered now.
    pub(super) strays: bool,
    /// Every record at one tick.
    pub(super) flat: bool,
    /// Some threads' ticks step back now and then.
    pub(super) backwards: bool,
    /// `#[profile]` async marks among the enters.
    pub(super) marks: bool,
    /// Some threads end with a `SpanEnter` or `SpanClose` whose payload is missing, and such
    /// records come amid the others now and then.
    pub(super) cut_lead: bool,
    /// The window starts late on some threads and ends before the last records.
    pub(super) narrow: bool,
    /// Salvaged without its footer.
    pub(super) salvaged: bool,
    /// A flight recorder's window, starting amid the session.
    pub(super) window: bool,
    /// Now and then a span entered on every thread (5 or more).
    pub(super) wide: bool,
    /// Every chunk of one record (else 1 to 7, some empty).
    pub(super) ones: bool,
    /// Every span entered twice at least (an async call, none a plain scope): first for a
    /// moment where it is entered.
    pub(super) twice: bool,
    /// A session that tracked memory (a timeline): allocations and frees among the records.
    pub(super) memory: bool,
}

pub(super) fn forge(seed: u64) -> Forge {
    Forge {
        seed,
        threads: 1 + seed as usize % 5,
        steps: 300,
        pending: 4 + seed as usize % 12,
        lie: false,
        strays: false,
        flat: false,
        backwards: false,
        marks: false,
        cut_lead: false,
        narrow: false,
        salvaged: false,
        window: false,
        wide: false,
        ones: false,
        twice: false,
        memory: false,
    }
}

/// A span alive: its id, callsite and the threads of its enters.
type Alive = (u64, &'static Callsite, Vec<usize>);

/// Threads of `tracing` spans (and, with [`Forge::marks`], `#[profile]` async calls) as
/// `f` asks: spans entered once or several times on one thread or several, exited mostly
/// innermost first, closed on one of them or another, ids reused at once when closed,
/// plain scopes inside and around, ties in time across threads, slices left open at the end.
pub(super) fn forged(f: Forge) -> Capture {
    let mut rng = Rng::of_seed(f.seed);
    let sites = [&FETCH, &HANDLE, &HANDLE_TOO];
    let threads = f.threads;
    let mut records: Vec<Vec<RawEvent>> = vec![Vec::new(); threads];
    let mut now = 10;
    let mut ticks: Vec<u64> = vec![10; threads];
    let mut stacks: Vec<Vec<(&'static Callsite, u64, Option<u64>)>> = vec![Vec::new(); threads];
    let mut alive: Vec<Alive> = Vec::new();
    let mut free: Vec<u64> = Vec::new();
    let mut next_id = 0u64;
    let mut calls: Vec<(u32, &'static Callsite)> = Vec::new();
    for _ in 0..f.steps {
        let t = rng.below(threads as u64) as usize;
        if !f.flat {
            now += [0, 0, 1, 1, 2, 5][rng.below(6) as usize];
        }
        // One clock: the records of all threads in time order, ties across threads.
        let mut tick = now.max(ticks[t]);
        if f.backwards && rng.below(30) == 0 {
            tick = tick.saturating_sub(4);
        }
        ticks[t] = tick;
        let entered_here = |stack: &[(&Callsite, u64, Option<u64>)], id: u64| {
            stack.iter().any(|s| s.2 == Some(id))
        };
        match rng.below(20) {
            0..=4 if !stacks[t].is_empty() => {
                let stack = &mut stacks[t];
                let at = if f.strays && rng.below(8) == 0 {
                    rng.below(stack.len() as u64) as usize
                } else {
                    stack.len() - 1
                };
                let (site, began, _) = stack.remove(at);
                records[t].push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
            }
            5 | 6 if alive.len() < f.pending => {
                let id = match (rng.below(3), free.pop()) {
                    // Reused at once, when just closed.
                    (0 | 1, Some(id)) => id,
                    (_, back) => {
                        free.extend(back);
                        match (f.strays && rng.below(4) == 0, alive.first()) {
                            // An id still open, entered by another span.
                            (true, Some(a)) => a.0,
                            // Ids at the ends of their range (0: a span not recorded).
                            (true, None) => [0, u64::MAX][rng.below(2) as usize],
                            _ => {
                                next_id += 1;
                                next_id
                            }
                        }
                    }
                };
                let site = sites[rng.below(3) as usize];
                if f.twice {
                    records[t].extend(span_enter(site, tick, id));
                    records[t].push(RawEvent::end(RawEvent::end_key(site.id(), tick), tick));
                }
                records[t].extend(span_enter(site, tick, id));
                stacks[t].push((site, tick, Some(id)));
                alive.push((id, site, vec![t]));
            }
            7 | 8 if !alive.is_empty() => {
                let at = rng.below(alive.len() as u64) as usize;
                let (id, site, enters) = &mut alive[at];
                if f.strays || !entered_here(&stacks[t], *id) {
                    records[t].extend(span_enter(site, tick, *id));
                    stacks[t].push((site, tick, Some(*id)));
                    enters.push(t);
                }
            }
            9 | 10 if !alive.is_empty() => {
                let at = rng.below(alive.len() as u64) as usize;
                let id = alive[at].0;
                let entered = stacks.iter().flatten().any(|s| s.2 == Some(id));
                if f.strays || !entered {
                    let (_, _, enters) = alive.swap_remove(at);
                    let mut here = enters.iter().all(|&e| e == t);
                    if f.lie && rng.below(3) == 0 {
                        here = !here;
                    }
                    records[t].extend(span_close(tick, id, here));
                    if !entered {
                        free.push(id);
                    }
                }
            }
            11 if f.strays => {
                let here = rng.below(2) == 0;
                records[t].extend(span_close(tick, 1_000_000 + rng.below(8), here));
            }
            12 if f.wide && !alive.is_empty() => {
                // A span alive entered on every thread, at the same ticks.
                let at = rng.below(alive.len() as u64) as usize;
                let (id, site, enters) = &mut alive[at];
                for (u, out) in records.iter_mut().enumerate() {
                    if stacks[u].iter().all(|s| s.2 != Some(*id)) {
                        let tick = ticks[u].max(tick);
                        out.extend(span_enter(site, tick, *id));
                        out.push(RawEvent::end(RawEvent::end_key(site.id(), tick), tick + 1));
                        ticks[u] = tick + 1;
                        enters.push(u);
                    }
                }
                now = tick + 1;
            }
            13 if f.marks => {
                let span = 1 + rng.below(40) as u32;
                let site = sites[rng.below(2) as usize];
                records[t].extend(with_payload(RawKind::AsyncBegin, site, tick, span));
                calls.push((span, site));
            }
            14 | 15 if f.marks && !calls.is_empty() => {
                let (span, site) = calls[rng.below(calls.len() as u64) as usize];
                records[t].extend(with_payload(RawKind::PollBegin, site, tick, span));
                stacks[t].push((site, tick, None));
            }
            16 if f.marks && !calls.is_empty() => {
                let (span, site) = calls[rng.below(calls.len() as u64) as usize];
                records[t].extend(with_payload(RawKind::AsyncEnd, site, tick, span));
            }
            18 | 19 if f.memory => {
                let kind = [RawKind::Alloc, RawKind::Free][rng.below(2) as usize];
                let (size, at) = (1 + rng.below(64), 0x7f00_0000_1000 + 16 * rng.below(8));
                records[t].extend(RawEvent::memory(kind, size, at, tick));
            }
            17 if f.cut_lead => {
                let (kind, site) = match rng.below(2) {
                    0 => (RawKind::SpanEnter, HANDLE.id()),
                    _ => (RawKind::SpanClose, 0),
                };
                records[t].push(RawEvent::new(kind, site, tick));
            }
            _ => {
                let site = if stacks[t].is_empty() { &QUERY } else { &PARSE };
                records[t].push(RawEvent::begin(site.id(), tick));
                stacks[t].push((site, tick, None));
            }
        }
    }
    if f.cut_lead {
        // An enter or a close cut short: its payload lost.
        for (t, out) in records.iter_mut().enumerate().filter(|(t, _)| t % 3 != 2) {
            let (kind, site) = match t % 3 {
                0 => (RawKind::SpanEnter, FETCH.id()),
                _ => (RawKind::SpanClose, 0),
            };
            out.push(RawEvent::new(kind, site, ticks[t] + 1));
        }
    }
    let last = ticks.iter().copied().max().unwrap_or(0);
    let end = if f.narrow { last * 3 / 4 } else { last + 50 };
    let mut capture = chunked(records, end, usize::MAX);
    if f.narrow {
        for thread in capture.threads.iter_mut().filter(|t| t.id % 2 == 0) {
            thread.from_tick = 10 + rng.below(last / 3 + 1);
        }
    }
    if !f.ones {
        for thread in &mut capture.threads {
            let Chunk::Owned(all) = &thread.chunks[0] else {
                unreachable!("records made by hand")
            };
            let mut chunks = Vec::new();
            let mut rest = &all[..];
            while !rest.is_empty() {
                if rng.below(9) == 0 {
                    chunks.push(Chunk::Owned(Vec::new()));
                }
                let n = (1 + rng.below(7) as usize).min(rest.len());
                chunks.push(Chunk::Owned(rest[..n].to_vec()));
                rest = &rest[n..];
            }
            thread.chunks = chunks;
        }
    } else {
        capture = rechunk(capture, 1);
    }
    if f.salvaged {
        capture.salvaged = Some(100);
    }
    if f.memory {
        capture.memory = crate::record::memory::MemoryMode::Timeline;
    }
    if f.window {
        capture.cut_start = Some(10 + last / 3);
    }
    capture
}

/// `capture` with each thread's records cut into chunks of `chunk`.
fn rechunk(mut capture: Capture, chunk: usize) -> Capture {
    for thread in &mut capture.threads {
        let all: Vec<RawEvent> = (thread.chunks.iter())
            .flat_map(|c| match c {
                Chunk::Owned(records) => records.clone(),
                _ => unreachable!("records made by hand"),
            })
            .collect();
        thread.chunks = all
            .chunks(chunk)
            .map(|c| Chunk::Owned(c.to_vec()))
            .collect();
    }
    capture
}
