//! A memory timeline read as it is written: the allocations and frees of every thread of some
//! captures, merged in time order as each thread is read again a chunk at a time, each with
//! the live bytes of its process after it. What [`MemoryTrace::events`] and
//! [`MemoryTrace::live_bytes`] give for the captures' decoded trace, in memory bounded by the
//! threads (a chunk's events and a pairing window each) and the allocations live at once.
//!
//! [`MemoryTrace::events`]: crate::trace::MemoryTrace::events
//! [`MemoryTrace::live_bytes`]: crate::trace::MemoryTrace::live_bytes

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;

use crate::capture::{Capture, CaptureThread};
use crate::record::hash::FxHashMap;
use crate::record::memory::MemoryMode;
use crate::record::registry::Untracked;
use crate::trace::{MemoryEvent, MemoryKind};

use super::async_spans::Mark;
use super::links::Links;
use super::memory::{Keeps, LiveAtEnd, RawMemory};
use super::pair::Pairing;
use super::summary;
use super::thread::Shared;

/// One thread of the captures (a thread of [`Pieces`](super::pieces::Pieces)), as the
/// timeline reads it: the index of its capture in the captures and of its process in the
/// trace.
pub(super) struct TimelineThread<'c> {
    pub(super) capture: usize,
    pub(super) process: u32,
    pub(super) source: &'c CaptureThread,
}

/// Hands each allocation and free of `threads` (of `captures`, in the trace's thread order)
/// to `f` in the decoded trace's order, with its process's live bytes after it, as
/// [`MemoryTrace::live_bytes`](crate::trace::MemoryTrace::live_bytes) counts them; only those
/// of `process` when given (the live bytes are the same). Stops at the first error of `f`.
///
/// The decoded trace sorts each capture's events by tick (ties in thread order, then
/// recorded order), then, of several captures, all of them by time (ties in capture order):
/// the order of the key `(ns, capture, tick, thread, n-th)` (of one capture, without `ns`),
/// which a merge of the threads gives when each thread's events come in time and tick order
/// ([`Summary::with_memory_timeline`] checks that they do).
///
/// [`Summary::with_memory_timeline`]: super::summary::Summary::with_memory_timeline
pub(super) fn each_event(
    captures: &[&Capture],
    threads: &[TimelineThread<'_>],
    process: Option<u32>,
    f: &mut dyn FnMut(&MemoryEvent, u64) -> io::Result<()>,
) -> io::Result<LiveAtEnd> {
    let _untracked = Untracked::enter();
    // Only a timeline has events (a session that counted keeps none, even where a thread it
    // shared with a timeline session recorded some).
    let shared: Vec<Option<Shared<'_>>> = captures
        .iter()
        .map(|&c| (c.memory == MemoryMode::Timeline).then(|| Shared::new(c, true, false)))
        .collect();
    let read: Vec<(usize, &TimelineThread<'_>, &Shared<'_>)> = (threads.iter().enumerate())
        .filter_map(|(t, thread)| Some((t, thread, shared[thread.capture].as_ref()?)))
        .collect();
    let mut stores: Vec<(Vec<Mark>, Links, Vec<RawMemory>)> = read
        .iter()
        .map(|_| (Vec::new(), Links::default(), Vec::new()))
        .collect();
    let mut feeds: Vec<Feed<'_, '_>> = read
        .iter()
        .zip(&mut stores)
        .map(|(&(t, thread, shared), (marks, links, events))| {
            let mut pairing = Pairing::new(
                shared.callsites,
                (&shared.converter, shared.probe),
                (t, thread.source.id),
                marks,
                links,
                Some(events),
                0,
            );
            pairing.memory_keeps(Keeps::Events);
            pairing.drain_every(summary::WINDOW);
            shared.start(&mut pairing, thread.source);
            Feed {
                by_time: captures.len() > 1,
                shared,
                thread,
                pairing,
                chunk: 0,
                keep: false,
                queue: VecDeque::new(),
                seq: 0,
            }
        })
        .collect();
    // Each thread's next event, by its key.
    let mut heads: BinaryHeap<Reverse<(Key, usize)>> = BinaryHeap::new();
    for (at, feed) in feeds.iter_mut().enumerate() {
        if let Some(key) = feed.next_key(at) {
            heads.push(Reverse((key, at)));
        }
    }
    // Per capture, the live allocations by address, with their size and scope (frees match
    // within their capture); per process, the bytes live; the allocations that lost their
    // free (another was made at their address), live at the end whatever comes.
    let mut live: Vec<FxHashMap<u64, (u64, Option<&'static str>)>> =
        vec![FxHashMap::default(); captures.len()];
    let mut bytes: Vec<u64> = Vec::new();
    let mut at_end = LiveAtEnd::default();
    while let Some(Reverse((_, at))) = heads.pop() {
        let feed = &mut feeds[at];
        let Some(raw) = feed.queue.pop_front() else {
            continue;
        };
        let mut event = raw.event;
        event.process = feed.thread.process;
        let p = event.process as usize;
        if p >= bytes.len() {
            bytes.resize(p + 1, 0);
        }
        let live = &mut live[feed.thread.capture];
        match event.kind {
            // A still-live allocation at the same address lost its free: it stays live.
            MemoryKind::Alloc => {
                let lost = live.insert(event.address, (event.size, event.scope_name()));
                if let Some((size, scope)) = lost {
                    at_end.add(scope, size);
                }
                bytes[p] = bytes[p].saturating_add(event.size);
            }
            MemoryKind::Free => {
                if let Some((size, _)) = live.remove(&event.address) {
                    bytes[p] = bytes[p].saturating_sub(size);
                }
            }
        }
        if process.is_none_or(|process| process == event.process) {
            f(&event, bytes[p])?;
        }
        if let Some(key) = feed.next_key(at) {
            heads.push(Reverse((key, at)));
        }
    }
    for (size, scope) in live.into_iter().flat_map(FxHashMap::into_values) {
        at_end.add(scope, size);
    }
    Ok(at_end)
}

/// The order of the decoded trace's events: time, capture, tick, thread, n-th of the thread.
type Key = (u64, usize, u64, usize, u64);

/// A thread read again a chunk at a time for its allocations and frees.
struct Feed<'s, 'c> {
    /// The key starts with the event's time (else 0): several captures.
    by_time: bool,
    shared: &'s Shared<'c>,
    thread: &'s TimelineThread<'c>,
    pairing: Pairing<'s>,
    /// The next chunk to read.
    chunk: usize,
    /// Whether the last record read counted ([`Shared::for_each_run_of`]).
    keep: bool,
    /// Its events read and not yet merged.
    queue: VecDeque<RawMemory>,
    /// Events of the thread taken from `queue` so far.
    seq: u64,
}

impl Feed<'_, '_> {
    /// The key of the thread's next event (it is at `at` among the threads read), reading
    /// chunks until one comes; `None` when the thread has no more.
    fn next_key(&mut self, at: usize) -> Option<Key> {
        while self.queue.is_empty() && self.chunk < self.thread.source.chunks.len() {
            let pairing = &mut self.pairing;
            self.shared.for_each_run_of(
                self.thread.source,
                self.chunk,
                &mut self.keep,
                |records| records.iter().for_each(|&record| pairing.push(record)),
            );
            self.chunk += 1;
            if pairing.window_full() {
                pairing.drain_final(|_, _, _| {});
            }
            pairing.take_memory(&mut self.queue);
        }
        let raw = self.queue.front()?;
        let ns = if self.by_time { raw.event.ns } else { 0 };
        let key = (ns, self.thread.capture, raw.tick, at, self.seq);
        self.seq += 1;
        Some(key)
    }
}
