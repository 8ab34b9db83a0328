//! OTLP/JSON written from captures as they are decoded, piece by piece
//! ([`Pieces`](crate::decode::pieces::Pieces)): each piece of a thread is mapped as a trace
//! of its own ([`Otlp::with_carried`]) whose nodes are numbered where they stand in the whole
//! trace, so that ids, sampling and folding are the whole trace's; the events in its time go
//! with it, and the events on no span go to their process's `events outside spans` span after
//! its threads, numbered as the whole trace numbers them (with several processes with events,
//! a first walk of the threads with events finds which are on no span). The requests are
//! batched as [`Otlp::requests`] batches them.
//!
//! A piece may carry the spans open at the end of the last one ([`Piece::carried`]): their
//! walk was made where they began; what it decided ([`Carry`]: the span they are sent as,
//! their trace, depth and folded counts) and the events placed on them go with them to the
//! piece where they end, where they are sent (spans are sent in the order they end, the whole
//! trace's too). A span's fate is decided where it begins, by its parent's and by its
//! duration ([`Options::min_duration`]): with folding by duration, the thread is read twice,
//! first for the ends of the spans carried ([`carried_ends`]).
//!
//! Links ([`PieceLinks`]): a follower's link goes with the span it is sent as (carried with
//! it while it is open), and points to the span its origin is sent as, decided in the piece
//! where the origin began; origins on a thread written after a thread that follows them are
//! decided first, by a walk of the threads up to theirs that sends nothing.
//!
//! What it holds at a time: one piece and its mapping, the spans open and their events, the
//! trace's counters and instants (which the first pass keeps) with a flag each, the ends of a
//! thread's carried spans when folding by duration (one per span open at a cut), a few words
//! per link, and one request.

use std::io::{self, Write};

use prost::Message;

use crate::decode::pieces::{Piece, Pieces, SpanSource, Want};
use crate::record::hash::FxHashMap;

use super::calls::Calls;
use super::carry::{Carried, Carry};
use super::events::{self, Events, Of, Range};
use super::links::PieceLinks;
use super::map::{EventOf, NONE, Otlp, Start};
use super::options::{Options, Stats};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// The pieces of `captures` when their requests can be made from pieces: processes whose
/// threads come in order unless every root is kept, and no event on a thread id that two
/// threads of its process share ([`events::on_shared_threads`]).
pub(super) fn of_captures<'c>(
    captures: &[&'c crate::Capture],
    options: &Options,
) -> Option<(Pieces<'c>, Option<Calls>)> {
    let (pieces, with_calls) = match Pieces::new(captures) {
        Some(pieces) => (pieces, false),
        None => (Pieces::with_memory(captures)?, true),
    };
    let trace = pieces.trace();
    let in_order = trace.threads.is_sorted_by_key(|t| t.process);
    if !(in_order || options.sample_roots == 1) || events::on_shared_threads(trace) {
        return None;
    }
    // Of async calls, where a plan of them can be made.
    let calls = match with_calls {
        true => Some(Calls::of(&pieces, options)?),
        false => None,
    };
    Some((pieces, calls))
}

/// Writes the trace of `source` as OTLP/JSON lines into `out`, as
/// [`Otlp::write_json_to`] writes the whole trace; returns what was sent.
pub(super) fn write_json(
    (source, calls): (&dyn SpanSource, Option<&Calls>),
    options: &Options,
    out: &mut dyn Write,
) -> io::Result<Stats> {
    walk((source, calls), options, &mut JsonLines(out))
}

/// Where the requests of a walk go, one at a time, in order.
pub(super) trait Sink {
    /// Takes `request`, which holds `spans` spans.
    fn send(&mut self, request: ExportTraceServiceRequest, spans: usize) -> io::Result<()>;
}

/// Requests written as OTLP/JSON lines.
struct JsonLines<'a>(&'a mut dyn Write);

impl Sink for JsonLines<'_> {
    fn send(&mut self, request: ExportTraceServiceRequest, _spans: usize) -> io::Result<()> {
        serde_json::to_writer(&mut *self.0, &request).map_err(io::Error::other)?;
        self.0.write_all(b"\n")
    }
}

/// Maps the trace of `source` piece by piece and hands its requests, batched as
/// [`Otlp::requests`] batches the whole trace's, to `sink`; returns what was sent.
pub(super) fn walk(
    (source, calls): (&dyn SpanSource, Option<&Calls>),
    options: &Options,
    sink: &mut dyn Sink,
) -> io::Result<Stats> {
    let trace = source.trace();
    // Nodes are numbered as the whole trace numbers them: the async calls, then thread by
    // thread, span by span, then the events' holders.
    let mut bases = Vec::with_capacity(trace.threads.len());
    let mut nodes = calls.map_or(0, Calls::count);
    for thread in 0..trace.threads.len() {
        bases.push(nodes);
        nodes = nodes.saturating_add(source.span_count(thread) as u32);
    }
    // Requests hold their spans process by process.
    let mut order: Vec<usize> = (0..trace.threads.len()).collect();
    order.sort_by_key(|&t| trace.threads[t].process);
    // Each process's events on no span are sent after its spans, in a span numbered after
    // every thread's in the order the whole trace makes them (of their first event on no
    // span): with several processes with events, a first walk of the threads with events
    // places them.
    let with_events = events::with_events(trace);
    let holders = match with_events.len() {
        0 | 1 => with_events.clone(),
        _ => {
            let mut first = Walker::new((source, calls), options, &bases);
            for &thread in &order {
                if first.events.has_events(&trace.threads[thread]) {
                    first.thread(thread, &mut |_, _| Ok(()))?;
                }
            }
            first.events.holders(trace)
        }
    };
    let mut links = PieceLinks::new(trace, &order);
    // The origins of links followed on a thread written before theirs: decided first, by a
    // walk that sends nothing.
    let mut ahead = Walker::new((source, calls), options, &bases);
    for &thread in &order[..links.ahead()] {
        ahead.thread(thread, &mut |otlp, piece| {
            links.record(otlp, thread, piece);
            Ok(())
        })?;
    }
    let mut walker = Walker::new((source, calls), options, &bases);
    let mut batch = Batch::new(options, sink);
    // Process by process (one without threads may have events), each one's threads then its
    // events outside spans.
    let processes = (order.iter().map(|&t| trace.threads[t].process))
        .chain(with_events.iter().copied())
        .max()
        .map_or(0, |p| p as usize + 1)
        .max(trace.processes.len());
    let mut threads = order.iter().copied().peekable();
    for process in 0..processes as u32 {
        // Its async calls first.
        if let Some(calls) = calls {
            calls.send(
                process,
                trace,
                (&bases, options),
                &mut walker.stats,
                &mut |otlp| otlp.kept.iter().try_for_each(|&i| batch.push(otlp, i)),
            )?;
        }
        while let Some(thread) = threads.next_if(|&t| trace.threads[t].process == process) {
            let mut pending = Vec::new();
            walker.thread(thread, &mut |otlp, piece| {
                links.record(otlp, thread, piece);
                links.link(&trace.flows, otlp, thread, piece, &mut pending);
                otlp.kept.iter().try_for_each(|&i| batch.push(otlp, i))
            })?;
            // The last piece ends every span: no link is left to send.
            if !pending.is_empty() {
                return Err(out_of_step());
            }
        }
        let outside = walker.events.outside(trace, process);
        if outside.instants.is_empty() && outside.counters.is_empty() {
            continue;
        }
        let holder = holders.iter().position(|&p| p == process);
        let start = Start {
            node: nodes.saturating_add(holder.ok_or_else(out_of_step)? as u32),
            roots: walker.roots,
            holders: true,
        };
        let otlp = Otlp::with(&outside, options, start);
        add(&mut walker.stats, otlp.stats());
        for &i in &otlp.kept {
            batch.push(&otlp, i)?;
        }
    }
    batch.flush()?;
    Ok(walker.stats)
}

/// What [`Walker::thread`] hands each piece, mapped, to.
type Each<'e> = dyn FnMut(&mut Otlp<'_>, Piece<'_>) -> io::Result<()> + 'e;

/// A walk of the threads of a trace decoded in pieces: where their events go, what was sent.
struct Walker<'s> {
    source: &'s dyn SpanSource,
    /// The plan of the async calls, when there are some.
    calls: Option<&'s Calls>,
    options: &'s Options,
    /// The node of each thread's first span.
    bases: &'s [u32],
    events: Events,
    /// The roots met so far (what sampling counts from).
    roots: u32,
    stats: Stats,
}

impl<'s> Walker<'s> {
    fn new(
        (source, calls): (&'s dyn SpanSource, Option<&'s Calls>),
        options: &'s Options,
        bases: &'s [u32],
    ) -> Self {
        Self {
            source,
            calls,
            options,
            bases,
            events: Events::new(source.trace()),
            roots: 0,
            stats: Stats::default(),
        }
    }

    /// Maps thread `thread` piece by piece, its events with it, and hands each piece mapped
    /// to `each` (which sends its kept spans, or not).
    fn thread(&mut self, thread: usize, each: &mut Each<'_>) -> io::Result<()> {
        let (source, options) = (self.source, self.options);
        let trace = source.trace();
        // Folding by duration decides a span when it begins, by its duration: the spans
        // still open at the end of a piece are then read to their end first.
        let ends = match options.min_duration_ns > 0 {
            true => carried_ends(source, thread)?,
            false => FxHashMap::default(),
        };
        let mut carry = Carrying::default();
        let mut polls = self.calls.and_then(|c| c.thread(thread));
        source.each_piece(thread, Want::ALL, &mut |piece| {
            if piece.carried.len() != carry.seeds.len() {
                return Err(out_of_step());
            }
            let open = !piece.open.is_empty();
            // The events in the piece's time: from where the last piece stopped (its open
            // spans hold those between), up to the end of its last span, or, with spans
            // still open, up to where it is cut (the last end in it), not included.
            let lo = match piece.carried.is_empty() {
                true => piece.spans.first().map_or(0, |s| s.start_ns),
                false => carry.cut,
            };
            let ended = (0..)
                .zip(piece.spans)
                .filter(|&(i, _)| !piece.is_open(i))
                .map(|(_, s)| s.end_ns)
                .max();
            let hi = match ended {
                Some(end) => end,
                None => piece.spans.iter().map(|s| s.start_ns).max().unwrap_or(0),
            };
            let range = Range { lo, hi, open };
            let (mut mini, of) =
                (self.events).piece(trace, &trace.threads[thread], piece, range, &carry.events);
            if options.min_duration_ns > 0 {
                // Their durations: still not sent here.
                let spans = &mut mini.threads[0].spans;
                for &o in piece.open {
                    let end = ends.get(&piece.index(o)).copied();
                    spans[o as usize].end_ns = end.ok_or_else(out_of_step)?;
                }
            }
            let base = self.bases[thread];
            let start = Start {
                node: base + piece.base,
                roots: self.roots,
                holders: false,
            };
            let global = match piece.carried.is_empty() {
                true => Vec::new(),
                false => (0..piece.spans.len() as u32)
                    .map(|i| base + piece.index(i))
                    .collect(),
            };
            let carried = Carried {
                seeds: std::mem::take(&mut carry.seeds),
                open: piece.open.to_vec(),
                global,
                ..Carried::default()
            };
            let mut carried = carried;
            if let Some(polls) = polls.as_mut() {
                polls.attach(piece, (self.bases, options), &mut carried)?;
            }
            let mut otlp = Otlp::with_carried(&mini, options, start, carried);
            // Links name the whole trace's flows.
            otlp.flows = &trace.flows;
            self.roots = otlp.roots;
            self.events.placed(&of, &otlp.outside);
            each(&mut otlp, piece)?;
            let mut more = otlp.stats();
            // The events carried in were counted where they were first placed.
            more.events = more.events.saturating_sub(carry.events.len() as u64);
            add(&mut self.stats, more);
            carry = Carrying::after(&otlp, piece, &of)?;
            carry.cut = hi;
            Ok(())
        })
    }
}

/// The error of pieces that do not carry what the last one left open.
fn out_of_step() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "a piece does not carry the spans open at the end of the last one",
    )
}

/// The end of each span of thread `thread` carried from one piece to the next, by its index
/// in the thread: a first reading of its pieces.
fn carried_ends(source: &dyn SpanSource, thread: usize) -> io::Result<FxHashMap<u32, u64>> {
    let mut ends = FxHashMap::default();
    source.each_piece(thread, Want::ALL, &mut |piece| {
        for (i, span) in (0..piece.carried.len() as u32).zip(piece.spans) {
            if !piece.is_open(i) {
                ends.insert(piece.index(i), span.end_ns);
            }
        }
        Ok(())
    })?;
    Ok(ends)
}

/// What the pieces of a thread carry from one to the next.
#[derive(Default)]
struct Carrying {
    /// The state of the spans open at the end of the last piece.
    seeds: Vec<Carry>,
    /// The events placed on them, by their index in the whole trace: placed again, on the
    /// same span, in the piece where it ends.
    events: Vec<EventOf>,
    /// Where the last piece's events stopped.
    cut: u64,
}

impl Carrying {
    /// What the open spans of `piece`, mapped as `otlp` with its events `of`, carry.
    fn after(otlp: &Otlp<'_>, piece: Piece<'_>, of: &Of) -> io::Result<Self> {
        let broken = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "the spans open at the end of a piece are not a chain from a top-level scope",
            )
        };
        let at = |node: u32| piece.open.iter().position(|&o| o == node);
        let mut seeds = Vec::with_capacity(piece.open.len());
        for &o in piece.open {
            let node = otlp.nodes.get(o as usize).ok_or_else(broken)?;
            let rep = match node.rep {
                NONE => NONE,
                rep => at(rep).ok_or_else(broken)? as u32,
            };
            seeds.push(Carry {
                rep,
                trace: node.trace,
                depth: node.depth,
                folded_count: node.folded_count,
                folded_ns: node.folded_ns,
            });
        }
        let events = (otlp.events.iter())
            .filter(|e| piece.is_open(e.node))
            .map(|e| match e.of {
                EventOf::Instant(i) => EventOf::Instant(of.instants[i as usize]),
                EventOf::Counter(c, s) => {
                    let (track, samples) = &of.samples[c as usize];
                    EventOf::Counter(*track, samples[s as usize])
                }
            })
            .collect();
        Ok(Self {
            seeds,
            events,
            cut: 0,
        })
    }
}

/// Adds the counts of `more` to `stats`.
fn add(stats: &mut Stats, more: Stats) {
    stats.sent += more.sent;
    stats.folded += more.folded;
    stats.sampled_out += more.sampled_out;
    stats.links += more.links;
    stats.events += more.events;
    stats.events_sampled_out += more.events_sampled_out;
    stats.event_spans += more.event_spans;
}

/// The request being filled, as [`Otlp::requests`] fills them: at most
/// [`Options::batch_spans`] spans and [`Options::max_batch_bytes`] bytes each.
struct Batch<'a> {
    sink: &'a mut dyn Sink,
    batch_spans: usize,
    max_bytes: usize,
    request: ExportTraceServiceRequest,
    bytes: usize,
    count: usize,
    last_process: Option<u32>,
}

impl<'a> Batch<'a> {
    fn new(options: &Options, sink: &'a mut dyn Sink) -> Self {
        Self {
            sink,
            batch_spans: options.batch_spans,
            max_bytes: options.max_batch_bytes,
            request: ExportTraceServiceRequest::default(),
            bytes: 0,
            count: 0,
            last_process: None,
        }
    }

    /// Adds kept node `i` of `otlp`, writing the request before when it is full.
    fn push(&mut self, otlp: &Otlp<'_>, i: u32) -> io::Result<()> {
        if self.count >= self.batch_spans {
            self.flush()?;
        }
        let process = otlp.nodes[i as usize].process;
        let span = otlp.span(i);
        let len = span.encoded_len() + 8;
        let mut resource =
            (self.last_process != Some(process)).then(|| otlp.resource_spans(process));
        let mut extra = resource.as_ref().map_or(0, |r| r.encoded_len() + 8);
        if self.count > 0 && self.bytes + len + extra > self.max_bytes {
            self.flush()?;
            let new = otlp.resource_spans(process);
            extra = new.encoded_len() + 8;
            resource = Some(new);
        }
        if let Some(resource) = resource {
            self.request.resource_spans.push(resource);
            self.bytes += extra;
            self.last_process = Some(process);
        }
        if let Some(last) = self.request.resource_spans.last_mut() {
            last.scope_spans[0].spans.push(span);
        }
        self.bytes += len;
        self.count += 1;
        Ok(())
    }

    /// Hands the request to the sink, if it holds a span, and starts the next.
    fn flush(&mut self) -> io::Result<()> {
        if self.count > 0 {
            let request = std::mem::take(&mut self.request);
            self.sink.send(request, self.count)?;
        }
        self.bytes = 0;
        self.count = 0;
        self.last_process = None;
        Ok(())
    }
}
