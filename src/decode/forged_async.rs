//! Captures of `#[profile] async fn` calls made by hand, for tests of what is decoded from
//! them as the threads are read again ([`call_stream`](super::call_stream)).

use crate::capture::{Capture, Chunk};
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};

pub(crate) static FETCH: Callsite = Callsite::new("fetch", file!(), line!(), module_path!());
pub(crate) static HANDLE: Callsite = Callsite::new("handle", file!(), line!(), module_path!());
pub(crate) static PARSE: Callsite = Callsite::new("parse", file!(), line!(), module_path!());
pub(crate) static QUERY: Callsite = Callsite::new("query", file!(), line!(), module_path!());

/// A small xorshift: the same records for a seed on every run.
pub(crate) struct Rng(u64);

impl Rng {
    /// The generator of `seed`.
    pub(crate) fn of_seed(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

pub(crate) fn with_payload(
    kind: RawKind,
    site: &'static Callsite,
    tick: u64,
    span: u32,
) -> [RawEvent; 2] {
    [
        RawEvent::new(kind, site.id(), tick),
        RawEvent::payload(span, 0),
    ]
}

/// Threads of async calls made of the records a seed gives: calls begun, polled and ended
/// on any thread (with plain scopes inside polls), span ids reused after an end and
/// sometimes while open, polls of calls never begun and with another callsite, ties in
/// time across threads, and calls, polls and scopes left open at the end. Each thread's
/// records are cut into chunks of `chunk` records.
pub(crate) fn session(seed: u64, threads: usize, steps: usize, chunk: usize) -> Capture {
    let mut rng = Rng::of_seed(seed);
    let calls = [&FETCH, &HANDLE];
    let mut records: Vec<Vec<RawEvent>> = vec![Vec::new(); threads];
    // Per thread, the open slices: (callsite, begin tick).
    let mut stacks: Vec<Vec<(&'static Callsite, u64)>> = vec![Vec::new(); threads];
    // Calls open: (span id, callsite).
    let mut open: Vec<(u32, &'static Callsite)> = Vec::new();
    let mut next_span = 1u32;
    let mut tick = 10;
    for _ in 0..steps {
        // Ties across threads now and then.
        tick += rng.below(3);
        let t = rng.below(threads as u64) as usize;
        let (out, stack) = (&mut records[t], &mut stacks[t]);
        match rng.below(12) {
            // Close the innermost slice.
            0..=3 if !stack.is_empty() => {
                let (site, began) = stack.pop().unwrap();
                out.push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
            }
            // Begin a call (now and then with the id of one still open).
            4 | 5 => {
                let site = calls[rng.below(2) as usize];
                let span = match (rng.below(8), open.first()) {
                    (0, Some(&(span, _))) => span,
                    _ => {
                        next_span += 1;
                        next_span
                    }
                };
                out.extend(with_payload(RawKind::AsyncBegin, site, tick, span));
                open.push((span, site));
            }
            // Poll an open call (now and then one never begun, or with another callsite).
            6..=8 => {
                let (span, site) = match (rng.below(10), open.is_empty()) {
                    (0, _) | (_, true) => (9000 + rng.below(4) as u32, &FETCH),
                    (1, false) => (open[0].0, &QUERY),
                    _ => open[rng.below(open.len() as u64) as usize],
                };
                out.extend(with_payload(RawKind::PollBegin, site, tick, span));
                stack.push((site, tick));
            }
            // End an open call.
            9 if !open.is_empty() => {
                let (span, site) = open.remove(rng.below(open.len() as u64) as usize);
                out.extend(with_payload(RawKind::AsyncEnd, site, tick, span));
            }
            // A plain scope.
            _ => {
                let site = if stack.is_empty() { &QUERY } else { &PARSE };
                out.push(RawEvent::begin(site.id(), tick));
                stack.push((site, tick));
            }
        }
        tick += 1;
    }
    chunked(records, tick + 50, chunk)
}

/// The enter of `tracing` span `span` of `site` at `tick`.
pub(crate) fn span_enter(site: &'static Callsite, tick: u64, span: u64) -> [RawEvent; 2] {
    [
        RawEvent::new(RawKind::SpanEnter, site.id(), tick),
        RawEvent::payload(0, span),
    ]
}

/// The close of `tracing` span `span` at `tick`; `here` when every enter was on this thread.
pub(crate) fn span_close(tick: u64, span: u64, here: bool) -> [RawEvent; 2] {
    let here = if here { RawEvent::SPAN_CLOSED_HERE } else { 0 };
    [
        RawEvent::new(RawKind::SpanClose, 0, tick),
        RawEvent::payload(here, span),
    ]
}

/// Ten [`tracing_session`]s of seeds 0 to 9: one to four threads, 600 steps, chunks of one
/// to nine records, 120 or 6 spans alive at most.
#[cfg(test)]
pub(crate) fn tracing_sessions() -> impl Iterator<Item = Capture> {
    (0..10).map(|seed| {
        let pending = if seed % 3 == 0 { 120 } else { 6 };
        tracing_session(
            seed,
            1 + seed as usize % 4,
            600,
            1 + seed as usize % 9,
            pending,
        )
    })
}

/// Threads of `tracing` spans made of the records a seed gives, as the bridge records them:
/// spans entered once or several times, on one thread or several, closed on one of them or
/// on another (saying whether every enter was on the closing thread), or never; span ids
/// reused once closed; plain scopes inside and around the slices; ties in time across
/// threads; slices left open at the end; and, with `pending`, up to that many spans alive
/// at once (past the 64 enters a thread keeps waiting for their close). Each thread's
/// records are cut into chunks of `chunk` records.
pub(crate) fn tracing_session(
    seed: u64,
    threads: usize,
    steps: usize,
    chunk: usize,
    pending: usize,
) -> Capture {
    let mut rng = Rng::of_seed(seed);
    let sites = [&FETCH, &HANDLE];
    let mut records: Vec<Vec<RawEvent>> = vec![Vec::new(); threads];
    // Per thread, the open slices: (callsite, begin tick, span id if an enter).
    let mut stacks: Vec<Vec<(&'static Callsite, u64, Option<u64>)>> = vec![Vec::new(); threads];
    // Spans alive: (id, callsite, the threads of its enters).
    let mut alive: Vec<(u64, &'static Callsite, Vec<usize>)> = Vec::new();
    // Ids free again (closed), reused first now and then.
    let mut free: Vec<u64> = Vec::new();
    let mut next_id = 1u64;
    let mut tick = 10;
    for _ in 0..steps {
        tick += rng.below(3);
        let t = rng.below(threads as u64) as usize;
        let (out, stack) = (&mut records[t], &mut stacks[t]);
        match rng.below(12) {
            // Exit the innermost slice.
            0..=3 if !stack.is_empty() => {
                let (site, began, _) = stack.pop().unwrap();
                out.push(RawEvent::end(RawEvent::end_key(site.id(), began), tick));
            }
            // A new span, entered here.
            4 | 5 if alive.len() < pending => {
                let id = match (rng.below(2), free.is_empty()) {
                    (0, false) => free.swap_remove(rng.below(free.len() as u64) as usize),
                    _ => {
                        next_id += 1;
                        next_id
                    }
                };
                let site = sites[rng.below(2) as usize];
                out.extend(span_enter(site, tick, id));
                stack.push((site, tick, Some(id)));
                alive.push((id, site, vec![t]));
            }
            // A span alive entered again, here (not while it is entered here).
            6 | 7 if !alive.is_empty() => {
                let at = rng.below(alive.len() as u64) as usize;
                let (id, site, enters) = &mut alive[at];
                if stack.iter().all(|s| s.2 != Some(*id)) {
                    out.extend(span_enter(site, tick, *id));
                    stack.push((site, tick, Some(*id)));
                    enters.push(t);
                }
            }
            // A span alive and entered nowhere now closes, here.
            8 | 9 if !alive.is_empty() => {
                let at = rng.below(alive.len() as u64) as usize;
                let id = alive[at].0;
                let entered = stacks.iter().flatten().any(|s| s.2 == Some(id));
                if !entered {
                    let (_, _, enters) = alive.swap_remove(at);
                    let here = enters.iter().all(|&e| e == t);
                    records[t].extend(span_close(tick, id, here));
                    free.push(id);
                }
            }
            // A plain scope.
            _ => {
                let site = if stack.is_empty() { &QUERY } else { &PARSE };
                out.push(RawEvent::begin(site.id(), tick));
                stack.push((site, tick, None));
            }
        }
        tick += 1;
    }
    chunked(records, tick + 50, chunk)
}

/// A capture of `records` (a thread each, ids from 1, those without records left out),
/// stopped at `end`, each thread's records cut into chunks of `chunk`.
pub(crate) fn chunked(records: Vec<Vec<RawEvent>>, end: u64, chunk: usize) -> Capture {
    let thread_records: Vec<(u64, Vec<RawEvent>)> =
        (1..).zip(records).filter(|(_, r)| !r.is_empty()).collect();
    let mut capture = Capture::from_records(thread_records, 0, end);
    for thread in &mut capture.threads {
        let Chunk::Owned(all) = &thread.chunks[0] else {
            unreachable!("records made by hand")
        };
        let chunks = all.chunks(chunk).map(|c| Chunk::Owned(c.to_vec()));
        thread.chunks = chunks.collect();
    }
    capture
}

/// One thread: a `fetch` call begun first and polled once, never ended (open at the stop),
/// then `calls` `handle` calls, each begun, polled once (a `parse` inside) and ended: every
/// one of them waits behind the first to be handed over in the order they began.
pub(crate) fn held_back(calls: u32) -> Capture {
    let mut records = Vec::new();
    records.extend(with_payload(RawKind::AsyncBegin, &FETCH, 10, 1));
    records.extend(with_payload(RawKind::PollBegin, &FETCH, 10, 1));
    records.push(RawEvent::end(RawEvent::end_key(FETCH.id(), 10), 11));
    let mut tick = 20;
    for span in 2..calls + 2 {
        records.extend(with_payload(RawKind::AsyncBegin, &HANDLE, tick, span));
        records.extend(with_payload(RawKind::PollBegin, &HANDLE, tick, span));
        records.push(RawEvent::begin(PARSE.id(), tick + 1));
        records.push(RawEvent::end(
            RawEvent::end_key(PARSE.id(), tick + 1),
            tick + 2,
        ));
        records.push(RawEvent::end(
            RawEvent::end_key(HANDLE.id(), tick),
            tick + 3,
        ));
        records.extend(with_payload(RawKind::AsyncEnd, &HANDLE, tick + 3, span));
        tick += 5;
    }
    Capture::from_records(vec![(1, records)], 0, tick + 10)
}

/// `capture` (of records made by hand, the identity clock) with memory tracked: each poll
/// allocates 48 + its index bytes as it begins, and every third frees the allocation of the
/// poll before it on its thread; each thread's records cut into chunks of `chunk` records.
pub(crate) fn with_allocs(capture: &Capture, chunk: usize) -> Capture {
    let mut records: Vec<Vec<RawEvent>> = Vec::new();
    for thread in &capture.threads {
        let mut out = Vec::new();
        let mut last: Option<(u64, u64)> = None;
        let all: Vec<RawEvent> = (thread.chunks.iter())
            .flat_map(|c| match c {
                Chunk::Owned(records) => records.clone(),
                _ => unreachable!("records made by hand"),
            })
            .collect();
        let mut polls = 0u64;
        let mut at = 0;
        while at < all.len() {
            let record = all[at];
            out.push(record);
            at += 1;
            if record.kind == RawKind::PollBegin && at < all.len() {
                // Its payload first, then the allocation at its tick.
                out.push(all[at]);
                at += 1;
                let address = (thread.id << 32) | polls;
                out.extend(RawEvent::memory(
                    RawKind::Alloc,
                    48 + polls,
                    address,
                    record.tick,
                ));
                if polls % 3 == 2
                    && let Some((size, address)) = last
                {
                    out.extend(RawEvent::memory(RawKind::Free, size, address, record.tick));
                }
                last = Some((48 + polls, address));
                polls += 1;
            }
        }
        records.push(out);
    }
    let mut tracked = chunked(records, capture.end_tick, chunk);
    tracked.cut_start = capture.cut_start;
    tracked
}

/// A flight recorder's window of `calls` calls (`fetch` and `handle` in turn, 100 ticks
/// apart), each begun and polled on thread 1 (a `parse` inside), polled again and ended on
/// thread 2 450 ticks later; the window starts at `cut`: the calls begun before it and
/// polled after it are cut there. No name is both a scope's and a call's.
pub(crate) fn flight_calls(calls: u64, cut: u64) -> Capture {
    let (mut one, mut two) = (Vec::new(), Vec::new());
    for n in 0..calls {
        let (site, t, span) = (
            if n % 2 == 0 { &FETCH } else { &HANDLE },
            100 * n,
            n as u32 + 1,
        );
        one.extend(with_payload(RawKind::AsyncBegin, site, t, span));
        one.extend(with_payload(RawKind::PollBegin, site, t, span));
        one.push(RawEvent::begin(PARSE.id(), t + 1));
        one.push(RawEvent::end(
            RawEvent::end_key(PARSE.id(), t + 1),
            t + 2 + n % 3,
        ));
        one.push(RawEvent::end(
            RawEvent::end_key(site.id(), t),
            t + 5 + n % 4,
        ));
        let (t, d) = (t + 450, 10 + n % 7);
        two.extend(with_payload(RawKind::PollBegin, site, t, span));
        two.push(RawEvent::end(RawEvent::end_key(site.id(), t), t + d));
        two.extend(with_payload(RawKind::AsyncEnd, site, t + d, span));
    }
    let mut capture = chunked(vec![one, two], 100 * calls + 500, 16);
    capture.cut_start = Some(cut);
    capture
}

/// The key of the arguments [`with_args`] adds, and another.
pub(crate) static SIZE: Callsite = Callsite::new("size", file!(), line!(), module_path!());
pub(crate) static OTHER: Callsite = Callsite::new("other", file!(), line!(), module_path!());

/// `capture` (of [`session`] or [`tracing_session`]) with arguments on its slices, a seed's
/// choice at each begin of a slice (a poll, an enter or a plain scope): none; `size` (an
/// integer or a string, of a few values); `size` twice (the first counts); or `other`; and
/// now and then `size` for the innermost slice after a slice inside it ended (as a
/// `tracing` span's `record()` writes a field while entered). With `links`, each plain scope
/// of the first thread captures a link, and a third of the other threads' plain scopes
/// follow one. Chunks of `chunk` records.
pub(crate) fn with_args(capture: Capture, seed: u64, chunk: usize, links: bool) -> Capture {
    let mut rng = Rng::of_seed(seed);
    let end = capture.end_tick;
    let mut threads = Vec::new();
    let mut captured = 0u32;
    for (t, thread) in capture.threads.into_iter().enumerate() {
        let records = records_of(&thread);
        let mut out = Vec::with_capacity(records.len() * 2);
        // The slices open (depth): arguments go to the innermost.
        let mut depth = 0usize;
        let mut at = 0;
        while at < records.len() {
            let lead = records[at];
            match (links, t, lead.kind) {
                (true, 0, RawKind::Begin) => {
                    out.extend([lead, RawEvent::new(RawKind::Link, captured, lead.tick)]);
                    captured += 1;
                }
                (true, _, RawKind::Begin) if captured > 0 && rng.below(3) == 0 => {
                    let seq = rng.below(u64::from(captured)) as u32;
                    out.extend(RawEvent::begin_follows(lead.id, lead.tick, 1, seq));
                }
                _ => out.push(lead),
            }
            at += 1;
            while at < records.len() && records[at].kind.carries_data() {
                out.push(records[at]);
                at += 1;
            }
            let value = rng.below(4);
            let mut args = crate::record::args::Args::new();
            match lead.kind {
                RawKind::Begin | RawKind::PollBegin | RawKind::SpanEnter => {
                    depth += 1;
                    match rng.below(6) {
                        0 => {}
                        1 => args.str(&SIZE, &format!("s{value}")),
                        2 => {
                            args.u64(&SIZE, value);
                            args.u64(&SIZE, 9);
                        }
                        3 => args.u64(&OTHER, value),
                        _ => args.u64(&SIZE, value),
                    }
                }
                RawKind::End => {
                    depth = depth.saturating_sub(1);
                    if depth > 0 && rng.below(8) == 0 {
                        args.u64(&SIZE, 10 + value);
                    }
                }
                _ => {}
            }
            out.extend_from_slice(args.arguments());
        }
        threads.push(out);
    }
    chunked(threads, end, chunk)
}

/// `capture` with an allocation of 8 bytes and its free in each slice (a poll, an enter or a
/// plain scope) right after its begin: a session that tracked memory. Chunks of `chunk`
/// records.
pub(crate) fn with_memory(capture: Capture, chunk: usize) -> Capture {
    let end = capture.end_tick;
    let threads = (capture.threads.iter())
        .map(|thread| {
            let records = records_of(thread);
            let mut out = Vec::with_capacity(records.len() * 3);
            let mut at = 0;
            while at < records.len() {
                let lead = records[at];
                out.push(lead);
                at += 1;
                while at < records.len() && records[at].kind.carries_data() {
                    out.push(records[at]);
                    at += 1;
                }
                if matches!(
                    lead.kind,
                    RawKind::Begin | RawKind::PollBegin | RawKind::SpanEnter
                ) {
                    out.extend(RawEvent::memory(RawKind::Alloc, 8, 0x40, lead.tick));
                    out.extend(RawEvent::memory(RawKind::Free, 8, 0x40, lead.tick));
                }
            }
            out
        })
        .collect();
    chunked(threads, end, chunk)
}

/// The records of `thread` (made by hand), its chunks joined.
fn records_of(thread: &crate::capture::CaptureThread) -> Vec<RawEvent> {
    (thread.chunks.iter())
        .flat_map(|c| {
            let Chunk::Owned(records) = c else {
                unreachable!("records made by hand")
            };
            records.clone()
        })
        .collect()
}
