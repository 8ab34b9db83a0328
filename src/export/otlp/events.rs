//! The instants and counter samples of a trace mapped piece by piece
//! ([`walk`](super::pieces::walk)): which a piece's time holds, which are placed on a span,
//! and those on no span, process by process.

use crate::decode::pieces::Piece;
use crate::record::hash::FxHashMap;
use crate::trace::{CounterTrack, ThreadTrace, Trace};

use super::map::EventOf;

/// The time of a piece's events: from `lo` up to `hi`, included unless `open` (the piece
/// is cut at `hi` with spans open).
#[derive(Clone, Copy)]
pub(super) struct Range {
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) open: bool,
}

impl Range {
    /// True when `ns` comes after the range.
    fn after(&self, ns: u64) -> bool {
        ns > self.hi || (self.open && ns == self.hi)
    }
}

/// A thread's counter samples: per track, (sample index, time), in time order.
type ThreadSamples = Vec<(u32, Vec<(u32, u64)>)>;

/// The instants and counter samples of a trace, by thread, and which are placed on a span.
pub(super) struct Events {
    /// Instants by (process, thread id): their indices, in time order.
    instants: FxHashMap<(u32, u64), Vec<u32>>,
    /// Counter samples by (process, thread id): per track, (sample index, time), in time order.
    samples: FxHashMap<(u32, u64), ThreadSamples>,
    placed_instants: Vec<bool>,
    placed_samples: Vec<Vec<bool>>,
}

/// Which instants and samples of the whole trace a piece's trace holds, at their index there.
pub(super) struct Of {
    pub(super) instants: Vec<u32>,
    /// Per track of the piece's trace: its track in the whole trace, and its samples' indices.
    pub(super) samples: Vec<(u32, Vec<u32>)>,
}

impl Events {
    pub(super) fn new(trace: &Trace) -> Self {
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
    pub(super) fn piece(
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
            memory: piece.memory.to_vec(),
            args: piece.args.to_vec(),
        });
        (mini, of)
    }

    /// Marks the events `of` names placed, but those `outside` (at their index in the
    /// piece's trace) names.
    pub(super) fn placed(&mut self, of: &Of, outside: &[EventOf]) {
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

    /// A trace without spans holding the events of process `process` placed on no span, in
    /// the whole trace's order.
    pub(super) fn outside(&self, trace: &Trace, process: u32) -> Trace {
        let mut mini = frame(trace);
        mini.instants = (trace.instants.iter().zip(&self.placed_instants))
            .filter(|(i, placed)| !**placed && i.process == process)
            .map(|(i, _)| i.clone())
            .collect();
        for (track, placed) in trace.counters.iter().zip(&self.placed_samples) {
            if track.process != process {
                continue;
            }
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

    /// The processes with events placed on no span, in the order the whole trace makes
    /// their `events outside spans` spans (the order of their first such event: instants
    /// in the trace's order, then counter samples track by track).
    pub(super) fn holders(&self, trace: &Trace) -> Vec<u32> {
        let instants = (trace.instants.iter().zip(&self.placed_instants))
            .filter(|(_, placed)| !**placed)
            .map(|(i, _)| i.process);
        let samples = (trace.counters.iter().zip(&self.placed_samples))
            .filter(|(_, placed)| placed.iter().any(|p| !*p))
            .map(|(track, _)| track.process);
        let mut holders = Vec::new();
        for process in instants.chain(samples) {
            if !holders.contains(&process) {
                holders.push(process);
            }
        }
        holders
    }

    /// True when thread `thread` has instants or counter samples.
    pub(super) fn has_events(&self, thread: &ThreadTrace) -> bool {
        let key = (thread.process, thread.id);
        self.instants.contains_key(&key) || self.samples.contains_key(&key)
    }
}

/// The processes with instants or counter samples, in the trace's order of processes.
pub(super) fn with_events(trace: &Trace) -> Vec<u32> {
    let mut processes: Vec<u32> = (trace.instants.iter().map(|i| i.process))
        .chain(
            (trace.counters.iter())
                .filter(|c| !c.samples.is_empty())
                .map(|c| c.process),
        )
        .collect();
    processes.sort_unstable();
    processes.dedup();
    processes
}

/// True when an instant or a counter sample was recorded on a thread id that two threads of
/// its process share (sessions of one process that recorded one thread): the whole trace
/// places it on the innermost span open at its time across them, which a thread's pieces do
/// not know.
pub(super) fn on_shared_threads(trace: &Trace) -> bool {
    let mut threads: FxHashMap<(u32, u64), u32> = FxHashMap::default();
    for thread in &trace.threads {
        *threads.entry((thread.process, thread.id)).or_default() += 1;
    }
    let shared = |key| threads.get(&key).is_some_and(|&n| n > 1);
    if threads.len() == trace.threads.len() {
        return false;
    }
    (trace.instants.iter()).any(|i| shared((i.process, i.thread)))
        || (trace.counters.iter())
            .any(|c| (c.samples.iter()).any(|s| shared((c.process, s.thread))))
}

/// A trace with the window and processes of `trace` and nothing else.
pub(super) fn frame(trace: &Trace) -> Trace {
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
