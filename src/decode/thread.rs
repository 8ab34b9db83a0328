//! One thread of a capture decoded on its own: what decoding every thread reads, and what
//! one thread's decoding hands over.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::capture::compress::{Cursor, Step};
use crate::capture::{Capture, CaptureThread};
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::record::hash::{FxHashMap, FxHashSet};
use crate::record::registry::Untracked;
use crate::trace::{SpanKind, ThreadTrace};

use super::async_spans::{Mark, MarksSeen};
use super::convert::Converter;
use super::links::{Keep, Links, Origin};
use super::memory::{Keeps, RawMemory};
use super::pair::{Extras, Pairing, Probe};
use super::summary::{Sum, ThreadSums};
use crate::record::memory::MemoryMode;

/// Records this process has taken through decoding so far, summed over every decoding (for a
/// progress display: [`decoded_records`](super::decoded_records)).
pub(super) static DECODED: AtomicU64 = AtomicU64::new(0);

/// True when every record of `records` is in `window`: it starts with a record that is not a
/// payload, and its first and last ticks are in the window (a thread's ticks only grow).
fn within(records: &[RawEvent], window: &RangeInclusive<u64>) -> bool {
    let first = records.first();
    let last = records.iter().rev().find(|r| !r.kind.carries_data());
    match (first, last) {
        (Some(first), Some(last)) => {
            !first.kind.carries_data()
                && window.contains(&first.tick)
                && window.contains(&last.tick)
        }
        _ => false,
    }
}

/// A run of records that [`Shared::for_each_run_or_columns_of`] hands over: records where
/// they lie, or those of a packed chunk's columns kept from its check, made one at a time (the columns
/// were checked: they make every record; were they not whole, the run would end at the first
/// damage).
pub(super) enum Run<'a> {
    Records(std::iter::Copied<std::slice::Iter<'a, RawEvent>>),
    Columns(Cursor<'a>),
}

impl Iterator for Run<'_> {
    type Item = RawEvent;

    #[inline(always)]
    fn next(&mut self) -> Option<RawEvent> {
        match self {
            Self::Records(records) => records.next(),
            Self::Columns(cursor) => cursor.next(),
        }
    }
}

/// What takes the records of a thread of plain scopes one at a time
/// ([`Shared::for_each_step_of`]): its `step` is inlined where each record is read.
pub(super) trait Steps {
    type Error;
    /// Takes a record.
    fn step(&mut self, step: Step) -> Result<(), Self::Error>;
    /// The error for a record this path does not take.
    fn other() -> Self::Error;
}

/// What decoding any thread of a capture reads: its callsites, clock and window.
pub(super) struct Shared<'c> {
    pub(super) capture: &'c Capture,
    pub(super) callsites: &'c [&'static Callsite],
    pub(super) converter: Converter,
    /// The probe overhead subtracted from every span.
    pub(super) probe: Probe,
    /// The window's end: scopes still open there are closed at it.
    pub(super) end_ns: u64,
    pub(super) end_tick: u64,
    /// Allocations and frees are kept (they are skipped otherwise).
    pub(super) memory: bool,
    /// The capture is a session salvaged without its footer: what is still open on a thread
    /// closes at the thread's last record, not at the window's end (the rest was lost).
    pub(super) salvaged: bool,
    /// The enters and closes of `tracing` spans are kept for [`Links`] (see
    /// [`has_span_follows`]).
    pub(super) tracing_uses: bool,
}

impl<'c> Shared<'c> {
    /// What decoding any thread of `capture` reads: its clock's converter, the probe overhead,
    /// the window's end; allocations kept with `memory`, `tracing` span uses with
    /// `tracing_uses`.
    pub(super) fn new(capture: &'c Capture, memory: bool, tracing_uses: bool) -> Self {
        let clock = &capture.clock;
        let converter = Converter::new(
            &clock.start,
            &clock.stop,
            clock.ns_per_tick,
            &clock.checkpoints,
        );
        let (inner, outer) = clock.compensation.ticks();
        Shared {
            capture,
            callsites: &capture.callsites,
            end_ns: converter.to_unix_ns(capture.end_tick),
            converter,
            probe: Probe { inner, outer },
            end_tick: capture.end_tick,
            memory,
            salvaged: capture.salvaged.is_some(),
            tracing_uses,
        }
    }
}

/// True when `capture` holds a [`RawKind::SpanFollows`] record: only then does decoding keep
/// where each `tracing` span id was entered and closed (a pass over the records, instead of
/// 40 bytes per `tracing` span for every capture).
pub(super) fn has_span_follows(capture: &Capture) -> bool {
    capture
        .threads
        .iter()
        .any(|thread| (thread.chunks.iter()).any(|chunk| chunk.holds_kind(RawKind::SpanFollows)))
}

/// One thread decoded on its own, with what it saw of the others: async records, links and
/// allocations, matched across threads once every thread is in.
pub(super) struct Decoded {
    pub(super) thread: ThreadTrace,
    pub(super) events: u64,
    pub(super) marks: Vec<Mark>,
    /// Summed, what its marks were like (`marks` is then empty: they were let go as made).
    pub(super) marks_seen: MarksSeen,
    pub(super) links: Links,
    pub(super) memory: Option<Vec<RawMemory>>,
    /// Counter and value samples, and instants.
    pub(super) extras: Extras,
    /// Where what is still open on the thread closes: the window's end, or for a salvaged
    /// session the thread's last record.
    pub(super) end_ns: u64,
    /// Of a salvaged session, the scopes cut open (spans that are scopes, open at the end).
    pub(super) open_scopes: u64,
}

/// The link captures a thread being summed keeps (each a few words, found by a hash): past
/// them, the thread is read again for those followed.
pub(super) const ORIGINS_KEPT: usize = 4096;

impl Shared<'_> {
    /// The captures of `thread` (at `index` in the trace) of the links `wanted` (thread id,
    /// sequence number): the thread read again, its spans let go as they are paired, for a
    /// summed thread whose captures were too many to keep ([`Links::overflowed`]).
    pub(super) fn origins(
        &self,
        index: usize,
        thread: &CaptureThread,
        wanted: Arc<FxHashSet<(u64, u32)>>,
    ) -> FxHashMap<(u64, u32), Origin> {
        let _untracked = Untracked::enter();
        let mut marks = Vec::new();
        let mut links = Links::keeping(Keep::Only(wanted));
        let mut pairing = Pairing::new(
            self.callsites,
            (&self.converter, self.probe),
            (index, thread.id),
            &mut marks,
            &mut links,
            None,
            super::summary::WINDOW,
        );
        self.start(&mut pairing, thread);
        pairing.drain_every(super::summary::WINDOW);
        self.for_each_run(thread, |records| {
            for &record in records {
                pairing.push(record);
                if pairing.window_full() {
                    pairing.drain_final(|_, _, _| {});
                }
            }
        });
        drop(pairing);
        links.origins
    }

    /// The records of `thread` that count: from the tick its window starts at to the
    /// capture's end, handed to `f` a run at a time (a chunk's, usually whole). A record that
    /// carries data goes with the record before it.
    ///
    /// Runs, not records: each caller's loop over a run has the pairing's per-record code
    /// inlined in it. A call of `f` per record was not inlined (its body is the pairing):
    /// every record paid a call's entry and exit (`tickscope` on one core, 10 M events:
    /// `table` 6 %, a Chrome JSON convert 12 % and a `.pftrace` one 17 % slower than now).
    pub(super) fn for_each_run(&self, thread: &CaptureThread, mut f: impl FnMut(&[RawEvent])) {
        let mut keep = false;
        for chunk in 0..thread.chunks.len() {
            self.for_each_run_of(thread, chunk, &mut keep, &mut f);
        }
    }

    /// [`Shared::for_each_run`] of the chunk at `chunk` of `thread` only, after the chunks
    /// before it: `keep` says whether the last record before it counted, and is updated.
    pub(super) fn for_each_run_of(
        &self,
        thread: &CaptureThread,
        chunk: usize,
        keep: &mut bool,
        mut f: impl FnMut(&[RawEvent]),
    ) {
        let window = thread.from_tick..=self.end_tick;
        let records = thread.chunks[chunk].records();
        // One add per chunk (up to 4096 records): a progress display's count.
        DECODED.fetch_add(records.len() as u64, Ordering::Relaxed);
        if within(&records, &window) {
            // The usual case: the whole chunk is in the window.
            f(&records);
            *keep = true;
            return;
        }
        // The runs of records that count, each given whole: `from` is where the current one
        // starts.
        let mut from = None;
        for (at, record) in records.iter().enumerate() {
            if !record.kind.carries_data() {
                *keep = window.contains(&record.tick);
            }
            match (*keep, from) {
                (true, None) => from = Some(at),
                (false, Some(start)) => {
                    f(&records[start..at]);
                    from = None;
                }
                _ => {}
            }
        }
        if let Some(start) = from {
            f(&records[start..]);
        }
    }

    /// [`Shared::for_each_run_of`], but a chunk whose columns were kept from its check
    /// ([`Chunk::kept`](crate::capture::Chunk::kept)) and lies in the window whole is handed
    /// over as its columns, its records made as they are taken ([`Run::Columns`]), without a
    /// vector of them: for a loop small enough that their making inlined in it pays (the
    /// summing of plain scopes). The general pairing's loops take vectors: made apart, its
    /// records cost less there.
    pub(super) fn for_each_run_or_columns_of(
        &self,
        thread: &CaptureThread,
        chunk: usize,
        keep: &mut bool,
        mut f: impl FnMut(&mut Run<'_>),
    ) {
        let window = thread.from_tick..=self.end_tick;
        if let Some(kept) = thread.chunks[chunk].kept()
            && (kept.ends()).is_some_and(|(a, b)| window.contains(&a) && window.contains(&b))
        {
            DECODED.fetch_add(kept.len() as u64, Ordering::Relaxed);
            let mut open = Vec::new();
            f(&mut Run::Columns(kept.cursor(&mut open)));
            *keep = true;
            return;
        }
        self.for_each_run_of(thread, chunk, keep, |records| {
            f(&mut Run::Records(records.iter().copied()));
        });
    }

    /// [`Shared::for_each_run_or_columns_of`] for the short paths of plain scopes: hands each
    /// record of chunk `chunk` of `thread` to `taker` as a [`Step`] (a plain chunk's kept
    /// columns walked without making records: [`Cursor::walk`](crate::capture::compress::Cursor::walk)),
    /// and stops at the first error it returns, or [`Steps::other`] for a record of another
    /// kind (or damaged columns); returns the records handed over.
    #[inline(always)]
    pub(super) fn for_each_step_of<T: Steps>(
        &self,
        thread: &CaptureThread,
        chunk: usize,
        keep: &mut bool,
        taker: &mut T,
    ) -> Result<u64, T::Error> {
        let (mut result, mut records) = (Ok(()), 0u64);
        self.for_each_run_or_columns_of(thread, chunk, keep, |run| {
            if result.is_err() {
                return;
            }
            if let Run::Columns(cursor) = run
                && cursor.plain()
            {
                records += cursor.len() as u64;
                result = (cursor.walk(|step| taker.step(step)))
                    .map_err(|error| error.unwrap_or_else(T::other));
                return;
            }
            for record in run {
                records += 1;
                let (id, tick) = (record.id, record.tick);
                result = match record.kind {
                    RawKind::Begin => taker.step(Step::Begin {
                        id,
                        tick,
                        key: RawEvent::end_key(id, tick),
                    }),
                    RawKind::End => taker.step(Step::End { key: id, tick }),
                    _ => Err(T::other()),
                };
                if result.is_err() {
                    return;
                }
            }
        });
        result.map(|()| records)
    }

    /// Starts `pairing` of `thread` (once it is set up: what it keeps decides what the cut
    /// scopes open with) as decoding starts every thread: with the scopes open at a flight
    /// recorder's window start, and async calls built only from that start on.
    pub(super) fn start(&self, pairing: &mut Pairing<'_>, thread: &CaptureThread) {
        for cut in self.capture.cut_of(thread.id) {
            pairing.open_cut(cut.record());
        }
        if let Some(tick) = self.capture.cut_start {
            pairing.calls_from(tick);
        }
    }

    /// The tick of the last record of `thread` that [`Shared::for_each_run`] gives and is
    /// not a payload.
    pub(super) fn last_tick(&self, thread: &CaptureThread) -> Option<u64> {
        let window = thread.from_tick..=self.end_tick;
        thread.chunks.iter().rev().find_map(|chunk| {
            chunk
                .records()
                .iter()
                .rev()
                .find(|r| !r.kind.carries_data() && window.contains(&r.tick))
                .map(|r| r.tick)
        })
    }

    /// Where what is still open on `thread` closes: the window's end; of a salvaged session,
    /// which lost what its threads recorded after their last salvaged record, the thread's
    /// last record (not the end of the thread that recorded longest).
    pub(super) fn end_of(&self, thread: &CaptureThread) -> u64 {
        match self.salvaged {
            true => self.last_tick(thread).map_or(self.end_ns, |tick| {
                self.converter.to_unix_ns(tick).min(self.end_ns)
            }),
            false => self.end_ns,
        }
    }

    /// True when [`Shared::for_each_run`] gives `thread` at least one record: when one
    /// record that is not a payload is in the window (ticks only grow, so it is usually the
    /// first).
    pub(super) fn has_records(&self, thread: &CaptureThread) -> bool {
        let window = thread.from_tick..=self.end_tick;
        thread.chunks.iter().any(|chunk| {
            chunk
                .records()
                .iter()
                .any(|r| !r.kind.carries_data() && window.contains(&r.tick))
        })
    }

    /// Pairs the records of `thread`, at `index` in the trace; when `sum`, sums the spans as
    /// they are paired instead of keeping them (nor their arguments and links).
    pub(super) fn thread(
        &self,
        index: usize,
        thread: &CaptureThread,
        exact: Option<Sum>,
    ) -> (Decoded, Option<ThreadSums>) {
        // Most threads are plain scopes only: summed on a short path.
        if let Some(how) = exact
            && let Some(done) = self.plain(thread, how)
        {
            return done;
        }
        self.general(index, thread, exact)
    }

    /// [`Shared::thread`] by the general pairing, whatever the thread's records.
    pub(super) fn general(
        &self,
        index: usize,
        thread: &CaptureThread,
        exact: Option<Sum>,
    ) -> (Decoded, Option<ThreadSums>) {
        let sum = exact.is_some();
        // Decoding allocates, on whichever thread it runs.
        let _untracked = Untracked::enter();
        let mut marks = Vec::new();
        let mut links = Links {
            tracing_uses: self.tracing_uses,
            // Summed, a thread's link captures are kept up to a bound, past which those
            // followed are read again ([`Shared::origins`]).
            keep: match sum {
                true => Keep::Upto(ORIGINS_KEPT),
                false => Keep::All,
            },
            ..Links::default()
        };
        let mut memory = self.memory.then(Vec::new);
        let mut pairing = Pairing::new(
            self.callsites,
            (&self.converter, self.probe),
            (index, thread.id),
            &mut marks,
            &mut links,
            memory.as_mut(),
            if sum {
                super::summary::WINDOW
            } else {
                thread.record_bound()
            },
        );
        let mut sums = exact.map(|s| match s.sites {
            true => ThreadSums::new(s.exact),
            false => ThreadSums::counting(),
        });
        let mut marks_seen = MarksSeen::default();
        // Before the scopes cut at a flight recorder's start are opened: they are stacks too.
        if exact.is_some_and(|s| s.stacks) {
            pairing.keep_stacks();
        }
        self.start(&mut pairing, thread);
        if let Some(sums) = &mut sums {
            // Per-span memory figures, summed as the spans are; allocations and frees are
            // only counted, and their order checked.
            pairing.memory_keeps(Keeps::Figures);
            pairing.drain_every(super::summary::WINDOW);
            // A `tracing` enter's slice is a scope or a poll once its enter is resolved.
            pairing.defer_enters();
            self.for_each_run(thread, |records| {
                for &record in records {
                    pairing.push(record);
                    if pairing.window_full() {
                        pairing.drain_final(|_, span, memory| sums.add(span, memory));
                        // Summed, the async marks are only looked at: calls are summed by
                        // another reading ([`call_stream`](super::call_stream)), or decoded
                        // whole.
                        marks_seen.note(pairing.marks_mut());
                    }
                }
            });
        } else {
            self.for_each_run(thread, |records| {
                records.iter().for_each(|&record| pairing.push(record));
            });
        }
        let end_ns = self.end_of(thread);
        let open_at_end = pairing.close_rest(end_ns);
        if let Some(sums) = &mut sums {
            pairing.drain_ready(&mut |_, span, memory| sums.add(span, memory));
        }
        if sum {
            marks_seen.note(pairing.marks_mut());
        }
        let tangled = pairing.tangled();
        let (memory_events, memory_in_order) = pairing.memory_seen();
        let (events, mut spans, stats, mut args, mut extras) = pairing.finish(end_ns);
        if let Some(sums) = &mut sums {
            sums.stacks = extras.stacks.take();
        }
        let open_scopes = if self.salvaged {
            spans
                .iter()
                .filter(|s| s.open_at_stop && s.kind == SpanKind::Scope)
                .count() as u64
        } else {
            0
        };
        if let Some(sums) = &mut sums {
            for (i, span) in spans.iter().enumerate() {
                sums.add(span, stats.get(i));
            }
            sums.follows = !links.followers.is_empty() || !links.tracing_follows.is_empty();
            sums.tangled = tangled;
            sums.open_at_end = open_at_end;
            // Only a timeline has allocations and frees (of a session that counted, a thread
            // it shared with a timeline session may hold some: they are not the trace's).
            if self.capture.memory == MemoryMode::Timeline {
                (sums.memory_events, sums.memory_in_order) = (memory_events, memory_in_order);
            }
            // The links stay (their spans are known by index), and so do the `follows_from`s
            // of `tracing` spans (resolved by a second reading of the threads,
            // `Shared::tracing_uses_of`): the summed trace has their flows.
            (spans, args) = (Vec::new(), Vec::new());
        }
        let decoded = Decoded {
            thread: ThreadTrace {
                process: 0,
                id: thread.id,
                name: thread.name.clone(),
                spans,
                memory: stats,
                args,
            },
            events,
            marks,
            marks_seen,
            links,
            memory,
            extras,
            end_ns,
            open_scopes,
        };
        (decoded, sums)
    }
}
