//! The flight recorder: a session that keeps only its most recent chunks, across all threads,
//! so that a program that runs forever holds a fixed amount of memory and can dump the last
//! moments at any time ([`Config::flight_recorder`](crate::Config::flight_recorder)).
//!
//! The recorder owns a fixed number of chunks, touched at start. Threads fill them as in any
//! session; when a thread's chunk fills up and none is free, the oldest chunk linked since the
//! recorder started (whichever thread filled it) is unlinked from its buffer and handed to the
//! thread, reset: the threads' lists stay contiguous, newest last, and each thread's retained
//! records are exactly those after its last recycled chunk. A chunk a capture still holds is
//! left to the capture (the thread then takes one from the pool), and a tail its writer still
//! fills is skipped.
//!
//! Recycling reads each unlinked chunk's records first, to keep every thread's scopes that
//! were open at the end of it (entered in the overwritten part, not yet exited): a capture
//! then opens them before the thread's first record, named and timed as recorded, and decoding
//! marks them [`cut_at_start`](crate::trace::Span::cut_at_start) rather than pairing an exit
//! with anything else. The records recycled are counted
//! ([`Trace::overwritten_events`](crate::trace::Trace::overwritten_events)).
//!
//! Recycling happens only while flight recorders are the only sessions recording: a session
//! that keeps its whole window beside it needs every chunk, so threads then take fresh ones,
//! and the recorder gives the extra ones back once it recycles alone again.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::record::buffer::Busy;
use crate::record::chunk::{CHUNK_EVENTS, ChunkBox, RECORD};
use crate::record::event::{RawEvent, RawKind};
use crate::record::pool;
use crate::record::registry::{self, ThreadEntry, ThreadChunks};
use crate::record::sync::lock;

/// A flight recorder is installed.
static ON: AtomicBool = AtomicBool::new(false);

static RING: Mutex<Option<Ring>> = Mutex::new(None);

/// Bytes of records in one chunk: 64 KiB.
pub(crate) const CHUNK_BYTES: usize = CHUNK_EVENTS * RECORD as usize;

/// A scope entered in a recycled chunk and not exited by the end of it: open at the start of
/// its thread's retained window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CutScope {
    /// Its callsite id.
    pub(crate) id: u32,
    /// The tick of its entry.
    pub(crate) tick: u64,
    /// A poll of an async call rather than a scope.
    pub(crate) poll: bool,
    /// The key its exit carries.
    key: u32,
}

impl CutScope {
    /// The scope `record` (an entry) enters.
    #[inline]
    fn entered(record: &RawEvent, poll: bool) -> Self {
        Self {
            id: record.id,
            tick: record.tick,
            poll,
            key: RawEvent::end_key(record.id, record.tick),
        }
    }

    /// The cut scope `record` enters: `None` for a record that enters none.
    pub(crate) fn from_record(record: &RawEvent) -> Option<Self> {
        let poll = match record.kind {
            RawKind::Begin => false,
            RawKind::PollBegin => true,
            _ => return None,
        };
        Some(Self {
            id: record.id,
            tick: record.tick,
            poll,
            key: RawEvent::end_key(record.id, record.tick),
        })
    }

    /// Its entry record.
    pub(crate) fn record(&self) -> RawEvent {
        let kind = if self.poll {
            RawKind::PollBegin
        } else {
            RawKind::Begin
        };
        RawEvent::new(kind, self.id, self.tick)
    }
}

#[derive(Debug)]
struct Ring {
    session: u64,
    capacity: usize,
    /// Chunks prepared at start and not taken yet.
    free: Vec<ChunkBox>,
    /// The chunks linked since the recorder started, oldest first: their thread, their index
    /// in its buffer, and once the thread completed it, the thread's scopes open at its end.
    linked: VecDeque<(Weak<ThreadEntry>, u64, Option<Vec<CutScope>>)>,
    /// Per thread: its scopes open at the end of the last chunk it completed.
    running: HashMap<u64, Vec<CutScope>>,
    /// Per thread: its scopes open at the start of its retained window, outermost first.
    cut: HashMap<u64, Vec<CutScope>>,
    overwritten: u64,
}

/// Why a flight recorder could not start.
pub(crate) enum StartError {
    /// Another flight recorder runs.
    Running,
}

/// Installs the flight recorder of session `session`, of `bytes` of records (at least one
/// chunk), its chunks prepared (touched) now.
pub(crate) fn install(session: u64, bytes: usize) -> Result<(), StartError> {
    let _untracked = registry::Untracked::enter();
    let mut ring = lock(&RING);
    if ring.is_some() {
        return Err(StartError::Running);
    }
    let capacity = (bytes / CHUNK_BYTES).max(1);
    let free = (0..capacity)
        .map(|_| {
            let mut chunk = ChunkBox::alloc();
            chunk.touch();
            chunk
        })
        .collect();
    *ring = Some(Ring {
        session,
        capacity,
        free,
        linked: VecDeque::with_capacity(capacity + 1),
        cut: HashMap::new(),
        running: HashMap::new(),
        overwritten: 0,
    });
    ON.store(true, Ordering::Release);
    Ok(())
}

/// Takes the flight recorder of `session` out of service (its unused chunks go to the pool);
/// returns the events it overwrote.
pub(crate) fn uninstall(session: u64) -> u64 {
    let _untracked = registry::Untracked::enter();
    let ring = {
        let mut slot = lock(&RING);
        if slot.as_ref().is_none_or(|r| r.session != session) {
            return 0;
        }
        ON.store(false, Ordering::Release);
        slot.take()
    };
    let Some(ring) = ring else { return 0 };
    for chunk in ring.free {
        pool::give(chunk);
    }
    ring.overwritten
}

/// True while a flight recorder is installed: one relaxed load.
#[inline]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A chunk for `thread`, whose tail is complete (full, or without room for what comes next):
/// one of the recorder's own, free or recycled (the oldest linked); `None` when the recorder
/// is not the only session recording or has none to give (the thread then takes one from the
/// pool).
///
/// The completed tail is read first, while still in cache, to follow the thread's open
/// scopes: recycling a chunk later then knows which scopes were open at its end without
/// reading it again from memory.
pub(crate) fn take(thread: &ThreadEntry) -> Option<ChunkBox> {
    let mut slot = lock(&RING);
    let ring = slot.as_mut()?;
    {
        let Ring {
            running, linked, ..
        } = &mut *ring;
        let open = running.entry(thread.id).or_default();
        thread.buffer.with_tail(|index, records| {
            scan(open, records);
            let own = |e: &&mut (Weak<ThreadEntry>, u64, Option<Vec<CutScope>>)| {
                e.1 == index && std::ptr::eq(e.0.as_ptr(), thread)
            };
            if let Some(entry) = linked.iter_mut().rev().find(own) {
                entry.2 = Some(open.clone());
            }
        });
    }
    if !pool::flight_only() {
        return None;
    }
    if let Some(chunk) = ring.free.pop() {
        return Some(chunk);
    }
    let mut taken = None;
    // Down to one chunk below the bound, this thread's new one making it up again (more
    // than one after chunks taken from the pool while another session recorded), skipping
    // tails still being filled.
    let mut skipped = 0;
    while ring.linked.len() >= ring.capacity && skipped < ring.linked.len() {
        let Some((thread, index, after)) = ring.linked.get(skipped) else {
            break;
        };
        let (thread, index, after) = (thread.clone(), *index, after.clone());
        let Some(thread) = thread.upgrade() else {
            // Its chunks went with the thread's entry (no session needed them).
            ring.linked.remove(skipped);
            continue;
        };
        let Ring {
            cut, overwritten, ..
        } = ring;
        let open = cut.entry(thread.id).or_default();
        let evicted = thread.buffer.evict_through(
            index,
            |records| {
                *overwritten += records.len() as u64;
                // A chunk the thread completed was read then; others (an exited thread's
                // last, one linked before the recorder) are read now.
                if after.is_none() {
                    scan(open, records);
                }
            },
            pool::give,
        );
        if let (Ok(_), Some(after)) = (&evicted, after) {
            *open = after;
        }
        match evicted {
            Err(Busy) => skipped += 1,
            Ok(chunk) => {
                ring.linked.remove(skipped);
                match (taken.is_none(), chunk) {
                    (true, Some(mut chunk)) => {
                        chunk.reset();
                        taken = Some(chunk);
                    }
                    (false, Some(chunk)) => pool::give(chunk),
                    // A capture holds it, or it was already gone.
                    (_, None) => {}
                }
                if thread.buffer.is_drained() {
                    // An exited thread whose last chunk went: the registry forgets it.
                    ring.cut.remove(&thread.id);
                    ring.running.remove(&thread.id);
                    registry::release_exited(&thread);
                }
            }
        }
    }
    taken
}

/// Counts the chunk of index `index` just linked into `thread`'s buffer.
pub(crate) fn linked(thread: &Arc<ThreadEntry>, index: u64) {
    if let Some(ring) = lock(&RING).as_mut() {
        ring.linked.push_back((Arc::downgrade(thread), index, None));
    }
}

/// Follows the scopes entered and exited in `records` (a recycled chunk of one thread) on
/// the stack of scopes `open`.
fn scan(open: &mut Vec<CutScope>, records: &[RawEvent]) {
    // Conditional branches rather than a `match` (a jump table): entries and exits alternate,
    // which the branch predictor follows, and an exit usually closes the innermost scope.
    for record in records {
        let kind = record.kind;
        if kind == RawKind::End {
            if open.last().is_some_and(|s| s.key == record.id) {
                open.pop();
            } else if let Some(at) = open.iter().rposition(|s| s.key == record.id) {
                open.remove(at);
            }
        } else if kind == RawKind::Begin
            || kind == RawKind::BeginFollows
            || kind == RawKind::SpanEnter
        {
            open.push(CutScope::entered(record, false));
        } else if kind == RawKind::PollBegin {
            open.push(CutScope::entered(record, true));
        }
    }
}

/// What a flight recorder retains: every thread's chunks, its scopes cut at the start of its
/// window, and the events overwritten so far.
pub(crate) struct Retained {
    pub(crate) threads: Vec<(ThreadChunks, Vec<CutScope>)>,
    pub(crate) overwritten: u64,
}

/// The retained window of session `session`'s flight recorder, taken with `take_chunks`
/// while no chunk is recycled; `None` when it has none.
pub(crate) fn retained(
    session: u64,
    take_chunks: impl FnOnce() -> Vec<ThreadChunks>,
) -> Option<Retained> {
    let _untracked = registry::Untracked::enter();
    let slot = lock(&RING);
    let ring = slot.as_ref().filter(|r| r.session == session)?;
    let threads = take_chunks()
        .into_iter()
        .map(|t| {
            let from = t.from_tick;
            let cut = ring.cut.get(&t.id).map_or_else(Vec::new, |open| {
                // Scopes entered before the thread joined the window are not its.
                open.iter().filter(|s| s.tick >= from).copied().collect()
            });
            (t, cut)
        })
        .collect();
    Some(Retained {
        threads,
        overwritten: ring.overwritten,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_keeps_what_is_open_at_the_end() {
        let mut open = Vec::new();
        let a = RawEvent::begin(1, 10);
        let b = RawEvent::begin(2, 11);
        let c = RawEvent::begin(3, 12);
        scan(
            &mut open,
            &[
                a,
                b,
                c,
                RawEvent::end(RawEvent::end_key(3, 12), 13),
                RawEvent::new(RawKind::PollBegin, 4, 14),
                RawEvent::new(RawKind::Payload, 9, 0),
            ],
        );
        let names: Vec<(u32, u64, bool)> = open.iter().map(|s| (s.id, s.tick, s.poll)).collect();
        assert_eq!(names, [(1, 10, false), (2, 11, false), (4, 14, true)]);
        // Exits in the next chunk close them, out of order too; an unknown exit closes none.
        scan(
            &mut open,
            &[
                RawEvent::end(RawEvent::end_key(2, 11), 15),
                RawEvent::end(RawEvent::end_key(7, 1), 16),
            ],
        );
        let names: Vec<u32> = open.iter().map(|s| s.id).collect();
        assert_eq!(names, [1, 4]);
        assert_eq!(open[1].record(), RawEvent::new(RawKind::PollBegin, 4, 14));
    }
}
