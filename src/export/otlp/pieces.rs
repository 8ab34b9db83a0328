//! OTLP/JSON written from captures as they are decoded, piece by piece
//! ([`Pieces`](crate::decode::pieces::Pieces)): each piece of a thread is mapped as a trace
//! of its own ([`Otlp::with_carried`]) whose nodes are numbered where they stand in the whole
//! trace, so that ids, sampling and folding are the whole trace's; the events in its time go
//! with it, and the events on no span go to the `events outside spans` spans after every
//! thread. The requests are batched as [`Otlp::requests`] batches them.
//!
//! A piece may carry the spans open at the end of the last one ([`Piece::carried`]): their
//! walk was made where they began; what it decided ([`Carry`]: the span they are sent as,
//! their trace, depth and folded counts) and the events placed on them go with them to the
//! piece where they end, where they are sent (spans are sent in the order they end, the whole
//! trace's too). A span's fate is decided where it begins, by its parent's and by its
//! duration ([`Options::min_duration`]): with folding by duration, the thread is read twice,
//! first for the ends of the spans carried ([`carried_ends`]).
//!
//! What it holds at a time: one piece and its mapping, the spans open and their events, the
//! trace's counters and instants (which the first pass keeps), the ends of a thread's carried
//! spans when folding by duration (one per span open at a cut), and one request.

use std::io::{self, Write};

use prost::Message;

use crate::decode::pieces::{Piece, Pieces, SpanSource};
use crate::record::hash::FxHashMap;
use crate::trace::{CounterTrack, ThreadTrace, Trace};

use super::carry::{Carried, Carry};
use super::map::{EventOf, NONE, Otlp, Start};
use super::options::{Options, Stats};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// The pieces of `captures` when their requests can be made from pieces: no span links (a
/// trace with flows is mapped whole: links go with the spans of a piece's trace), and
/// processes whose threads come in order unless every root is kept.
pub(super) fn of_captures<'c>(
    captures: &[&'c crate::Capture],
    options: &Options,
) -> Option<Pieces<'c>> {
    let pieces = Pieces::new(captures)?;
    let trace = pieces.trace();
    let in_order = trace.threads.is_sorted_by_key(|t| t.process);
    let no_flows = trace.flows.is_empty();
    (no_flows && (in_order || options.sample_roots == 1)).then_some(pieces)
}

/// Writes the trace of `source` as OTLP/JSON lines into `out`, as
/// [`Otlp::write_json_to`] writes the whole trace; returns what was sent.
pub(super) fn write_json(
    source: &dyn SpanSource,
    options: &Options,
    out: &mut dyn Write,
) -> io::Result<Stats> {
    walk(source, options, &mut JsonLines(out))
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
    source: &dyn SpanSource,
    options: &Options,
    sink: &mut dyn Sink,
) -> io::Result<Stats> {
    let trace = source.trace();
    // Nodes are numbered as the whole trace numbers them: thread by thread, span by span
    // (a trace decoded in pieces has no async calls), then the events' holders.
    let mut bases = Vec::with_capacity(trace.threads.len());
    let mut nodes = 0u32;
    for thread in 0..trace.threads.len() {
        bases.push(nodes);
        nodes = nodes.saturating_add(source.span_count(thread) as u32);
    }
    // Requests hold their spans process by process.
    let mut order: Vec<usize> = (0..trace.threads.len()).collect();
    order.sort_by_key(|&t| trace.threads[t].process);
    let mut events = Events::new(trace);
    let mut batch = Batch::new(options, sink);
    let mut stats = Stats::default();
    let mut roots = 0;
    for thread in order {
        // Folding by duration decides a span when it begins, by its duration: the spans
        // still open at the end of a piece are then read to their end first.
        let ends = match options.min_duration_ns > 0 {
            true => carried_ends(source, thread)?,
            false => FxHashMap::default(),
        };
        let mut carry = Carrying::default();
        source.each_piece(thread, false, &mut |piece| {
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
                events.piece(trace, &trace.threads[thread], piece, range, &carry.events);
            if options.min_duration_ns > 0 {
                // Their durations: still not sent here.
                let spans = &mut mini.threads[0].spans;
                for &o in piece.open {
                    let end = ends.get(&piece.index(o)).copied();
                    spans[o as usize].end_ns = end.ok_or_else(out_of_step)?;
                }
            }
            let start = Start {
                node: bases[thread] + piece.base,
                roots,
                holders: false,
            };
            let global = match piece.carried.is_empty() {
                true => Vec::new(),
                false => (0..piece.spans.len() as u32)
                    .map(|i| bases[thread] + piece.index(i))
                    .collect(),
            };
            let carried = Carried {
                seeds: std::mem::take(&mut carry.seeds),
                open: piece.open.to_vec(),
                global,
            };
            let otlp = Otlp::with_carried(&mini, options, start, carried);
            roots = otlp.roots;
            events.placed(&of, &otlp.outside);
            let mut more = otlp.stats();
            // The events carried in were counted where they were first placed.
            more.events = more.events.saturating_sub(carry.events.len() as u64);
            add(&mut stats, more);
            carry = Carrying::after(&otlp, piece, &of, options)?;
            carry.cut = hi;
            otlp.kept.iter().try_for_each(|&i| batch.push(&otlp, i))
        })?;
    }
    let outside = events.outside(trace);
    let start = Start {
        node: nodes,
        roots,
        holders: true,
    };
    let otlp = Otlp::with(&outside, options, start);
    add(&mut stats, otlp.stats());
    for &i in &otlp.kept {
        batch.push(&otlp, i)?;
    }
    batch.flush()?;
    Ok(stats)
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
    source.each_piece(thread, false, &mut |piece| {
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
    fn after(otlp: &Otlp<'_>, piece: Piece<'_>, of: &Of, options: &Options) -> io::Result<Self> {
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
            let trace = match options.trace_per_process {
                true => node.trace,
                false => at(node.trace).ok_or_else(broken)? as u32,
            };
            seeds.push(Carry {
                rep,
                trace,
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

/// The time of a piece's events: from `lo` up to `hi`, included unless `open` (the piece
/// is cut at `hi` with spans open).
#[derive(Clone, Copy)]
struct Range {
    lo: u64,
    hi: u64,
    open: bool,
}

impl Range {
    /// True when `ns` comes after the range.
    fn after(&self, ns: u64) -> bool {
        ns > self.hi || (self.open && ns == self.hi)
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

/// A thread's counter samples: per track, (sample index, time), in time order.
type ThreadSamples = Vec<(u32, Vec<(u32, u64)>)>;

/// The instants and counter samples of a trace, by thread, and which are placed on a span.
struct Events {
    /// Instants by (process, thread id): their indices, in time order.
    instants: FxHashMap<(u32, u64), Vec<u32>>,
    /// Counter samples by (process, thread id): per track, (sample index, time), in time order.
    samples: FxHashMap<(u32, u64), ThreadSamples>,
    placed_instants: Vec<bool>,
    placed_samples: Vec<Vec<bool>>,
}

/// Which instants and samples of the whole trace a piece's trace holds, at their index there.
struct Of {
    instants: Vec<u32>,
    /// Per track of the piece's trace: its track in the whole trace, and its samples' indices.
    samples: Vec<(u32, Vec<u32>)>,
}

impl Events {
    fn new(trace: &Trace) -> Self {
        let mut instants: FxHashMap<(u32, u64), Vec<u32>> = FxHashMap::default();
        for (i, instant) in (0..).zip(&trace.instants) {
            let key = (instant.process, instant.thread);
            instants.entry(key).or_default().push(i);
        }
        for list in instants.values_mut() {
            list.sort_by_key(|&i| (trace.instants[i as usize].ns, i));
        }
        let mut samples: FxHashMap<(u32, u64), ThreadSamples> = FxHashMap::default();
        for (c, track) in (0..).zip(&trace.counters) {
            for (s, sample) in (0..).zip(&track.samples) {
                let tracks = samples.entry((track.process, sample.thread)).or_default();
                if tracks.last().is_none_or(|(last, _)| *last != c) {
                    tracks.push((c, Vec::new()));
                }
                if let Some((_, list)) = tracks.last_mut() {
                    list.push((s, sample.ns));
                }
            }
        }
        for tracks in samples.values_mut() {
            for (_, list) in tracks.iter_mut() {
                list.sort_by_key(|&(s, ns)| (ns, s));
            }
        }
        Self {
            instants,
            samples,
            placed_instants: vec![false; trace.instants.len()],
            placed_samples: trace
                .counters
                .iter()
                .map(|t| vec![false; t.samples.len()])
                .collect(),
        }
    }

    /// The trace of `piece` of `thread` alone, with the events of its thread in its time
    /// (`range`) not placed yet and those `carried` (placed on its carried spans), and which
    /// they are.
    fn piece(
        &self,
        trace: &Trace,
        thread: &ThreadTrace,
        piece: Piece<'_>,
        range: Range,
        carried: &[EventOf],
    ) -> (Trace, Of) {
        let mut mini = frame(trace);
        let lo = range.lo;
        let key = (thread.process, thread.id);
        let mut of = Of {
            instants: Vec::new(),
            samples: Vec::new(),
        };
        if let Some(list) = self.instants.get(&key) {
            let from = list.partition_point(|&i| trace.instants[i as usize].ns < lo);
            for &i in &list[from..] {
                let instant = &trace.instants[i as usize];
                if range.after(instant.ns) {
                    break;
                }
                if !self.placed_instants[i as usize] {
                    of.instants.push(i);
                }
            }
        }
        of.instants.extend(carried.iter().filter_map(|e| match *e {
            EventOf::Instant(i) => Some(i),
            EventOf::Counter(..) => None,
        }));
        if !of.instants.is_empty() {
            // In the whole trace's order.
            of.instants.sort_unstable();
            of.instants.dedup();
            mini.instants = of
                .instants
                .iter()
                .map(|&i| trace.instants[i as usize].clone())
                .collect();
        }
        for (c, list) in self.samples.get(&key).into_iter().flatten() {
            let from = list.partition_point(|&(_, ns)| ns < lo);
            let mut taken: Vec<u32> = list[from..]
                .iter()
                .take_while(|&&(_, ns)| !range.after(ns))
                .filter(|&&(s, _)| !self.placed_samples[*c as usize][s as usize])
                .map(|&(s, _)| s)
                .collect();
            taken.extend(carried.iter().filter_map(|e| match *e {
                EventOf::Counter(track, s) if track == *c => Some(s),
                _ => None,
            }));
            if taken.is_empty() {
                continue;
            }
            taken.sort_unstable();
            taken.dedup();
            let track = &trace.counters[*c as usize];
            mini.counters.push(subtrack(track, &taken));
            of.samples.push((*c, taken));
        }
        mini.threads.push(ThreadTrace {
            process: thread.process,
            id: thread.id,
            name: thread.name.clone(),
            spans: piece.spans.to_vec(),
            memory: Vec::new(),
            args: piece.args.to_vec(),
        });
        (mini, of)
    }

    /// Marks the events `of` names placed, but those `outside` (at their index in the
    /// piece's trace) names.
    fn placed(&mut self, of: &Of, outside: &[EventOf]) {
        let mut left = vec![false; of.instants.len()];
        let mut left_samples: Vec<Vec<bool>> = of
            .samples
            .iter()
            .map(|(_, s)| vec![false; s.len()])
            .collect();
        for &event in outside {
            match event {
                EventOf::Instant(i) => left[i as usize] = true,
                EventOf::Counter(c, s) => left_samples[c as usize][s as usize] = true,
            }
        }
        for (&i, left) in of.instants.iter().zip(left) {
            if !left {
                self.placed_instants[i as usize] = true;
            }
        }
        for ((c, samples), left) in of.samples.iter().zip(left_samples) {
            for (&s, left) in samples.iter().zip(left) {
                if !left {
                    self.placed_samples[*c as usize][s as usize] = true;
                }
            }
        }
    }

    /// A trace without spans holding the events placed on no span, in the whole trace's
    /// order.
    fn outside(&self, trace: &Trace) -> Trace {
        let mut mini = frame(trace);
        mini.instants = (trace.instants.iter().zip(&self.placed_instants))
            .filter(|(_, placed)| !**placed)
            .map(|(i, _)| i.clone())
            .collect();
        for (track, placed) in trace.counters.iter().zip(&self.placed_samples) {
            let left: Vec<u32> = (0..)
                .zip(placed)
                .filter(|(_, p)| !**p)
                .map(|(s, _)| s)
                .collect();
            if !left.is_empty() {
                mini.counters.push(subtrack(track, &left));
            }
        }
        mini
    }
}

/// A trace with the window and processes of `trace` and nothing else.
fn frame(trace: &Trace) -> Trace {
    let mut mini = Trace::empty();
    mini.start_ns = trace.start_ns;
    mini.end_ns = trace.end_ns;
    mini.processes = trace.processes.clone();
    mini
}

/// `track` with its samples at `samples` only.
fn subtrack(track: &CounterTrack, samples: &[u32]) -> CounterTrack {
    CounterTrack {
        name: track.name,
        process: track.process,
        samples: samples.iter().map(|&s| track.samples[s as usize]).collect(),
    }
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
