//! OTLP/JSON written from captures as they are decoded, piece by piece
//! ([`Pieces`](crate::decode::pieces::Pieces)): each piece of a thread (whole trees of spans)
//! is mapped as a trace of its own ([`Otlp::with`]) whose nodes are numbered where they stand
//! in the whole trace, so that ids, sampling and folding are the whole trace's; the events in
//! its time go with it, and the events on no span go to the `events outside spans` spans
//! after every thread. The requests are batched as [`Otlp::requests`] batches them.
//!
//! What it holds at a time: one piece and its mapping, the trace's counters and instants
//! (which the first pass keeps), and one request.

use std::io::{self, Write};

use prost::Message;

use crate::decode::pieces::{Piece, SpanSource};
use crate::record::hash::FxHashMap;
use crate::trace::{CounterTrack, ThreadTrace, Trace};

use super::map::{EventOf, Otlp, Start};
use super::options::{Options, Stats};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// Writes the trace of `source` as OTLP/JSON lines into `out`, as
/// [`Otlp::write_json_to`] writes the whole trace; returns what was sent.
pub(super) fn write_json(
    source: &dyn SpanSource,
    options: &Options,
    out: &mut dyn Write,
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
    let mut batch = Batch::new(options, out);
    let mut stats = Stats::default();
    let mut roots = 0;
    for thread in order {
        // Each piece is mapped as a trace of its own: whole trees.
        source.each_piece(thread, true, &mut |piece| {
            let (mini, of) = events.piece(trace, &trace.threads[thread], piece);
            let start = Start {
                node: bases[thread] + piece.base,
                roots,
                holders: false,
            };
            let otlp = Otlp::with(&mini, options, start);
            roots = otlp.roots;
            events.placed(&of, &otlp.outside);
            add(&mut stats, otlp.stats());
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
    /// not placed yet, and which they are.
    fn piece(&self, trace: &Trace, thread: &ThreadTrace, piece: Piece<'_>) -> (Trace, Of) {
        let mut mini = frame(trace);
        let lo = piece.spans.first().map_or(0, |s| s.start_ns);
        let hi = piece.spans.iter().map(|s| s.end_ns).max().unwrap_or(0);
        let key = (thread.process, thread.id);
        let mut of = Of {
            instants: Vec::new(),
            samples: Vec::new(),
        };
        if let Some(list) = self.instants.get(&key) {
            let from = list.partition_point(|&i| trace.instants[i as usize].ns < lo);
            for &i in &list[from..] {
                let instant = &trace.instants[i as usize];
                if instant.ns > hi {
                    break;
                }
                if !self.placed_instants[i as usize] {
                    of.instants.push(i);
                }
            }
            // In the whole trace's order.
            of.instants.sort_unstable();
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
                .take_while(|&&(_, ns)| ns <= hi)
                .filter(|&&(s, _)| !self.placed_samples[*c as usize][s as usize])
                .map(|&(s, _)| s)
                .collect();
            if taken.is_empty() {
                continue;
            }
            taken.sort_unstable();
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
    out: &'a mut dyn Write,
    batch_spans: usize,
    max_bytes: usize,
    request: ExportTraceServiceRequest,
    bytes: usize,
    count: usize,
    last_process: Option<u32>,
}

impl<'a> Batch<'a> {
    fn new(options: &Options, out: &'a mut dyn Write) -> Self {
        Self {
            out,
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

    /// Writes the request as a line, if it holds a span, and starts the next.
    fn flush(&mut self) -> io::Result<()> {
        if self.count > 0 {
            let request = std::mem::take(&mut self.request);
            serde_json::to_writer(&mut *self.out, &request).map_err(io::Error::other)?;
            self.out.write_all(b"\n")?;
        }
        self.bytes = 0;
        self.count = 0;
        self.last_process = None;
        Ok(())
    }
}
