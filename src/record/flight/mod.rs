//! The flight recorder: a session that keeps only its most recent chunks, across all threads,
//! so that a program that runs forever holds a fixed amount of memory and can dump the last
//! moments at any time ([`ProfilerBuilder::flight_recorder`](crate::ProfilerBuilder::flight_recorder)).
//!
//! The recorder owns a fixed number of chunks, touched at start. Threads fill them as in any
//! session; when a thread's chunk fills up and none is free, the oldest chunk linked since the
//! recorder started (whichever thread filled it) is unlinked from its buffer and handed to the
//! thread, reset: the threads' lists stay contiguous, newest last, and each thread's retained
//! records are exactly those after its last recycled chunk. A chunk a capture still holds is
//! left to the capture (the thread then takes one from the pool), and a tail its writer still
//! fills is skipped.
//!
//! Each thread's scopes that were open at the end of an unlinked chunk (entered in the
//! overwritten part, not yet exited) are kept: a capture then opens them before the thread's
//! first record, named and timed as recorded, and decoding marks them
//! [`cut_at_start`](crate::trace::Span::cut_at_start) rather than pairing an exit with
//! anything else. The records recycled are counted
//! ([`Trace::overwritten_events`](crate::trace::Trace::overwritten_events)).
//!
//! Each thread's retained records start at its own oldest chunk, so before the latest record
//! overwritten some thread's records are gone: an async call polled there on several threads
//! cannot be told whole (its end may have been overwritten on one thread while its begin is
//! kept on another). A snapshot or stop hands over the window start common to every thread
//! ([`Retained::cut_start`]): just past the latest record overwritten, of any thread (one
//! gone since too), from where every thread's records are whole.
//! Decoding builds async calls only from the records from there on
//! ([`Trace::cut_start_ns`](crate::trace::Trace::cut_start_ns)); the threads' scopes and poll
//! slices stay as retained.
//!
//! Finding those scopes means reading every record, which cost the recording thread about
//! 4.5 ns per scope (a fifth of the scope) when it read each chunk it completed. A scanner
//! thread (`tickscope-flight`, at the lowest priority: it takes the cores the program leaves
//! idle) reads them instead: a thread that completes a chunk queues it (under the ring's
//! lock, which it takes at each chunk switch anyway) and wakes the scanner every
//! [`WAKE_AT`] chunks; the scanner holds each queued chunk (as a capture does: recycled
//! meanwhile, it goes to the pool when the scanner lets go), reads it without any lock and
//! notes the scopes open at its end. Recycling a chunk read ahead
//! only unlinks it; a chunk the scanner has not reached yet (it is behind: a busy machine,
//! or a ring of few chunks; or it has no thread) is read then, by the recycling thread, and
//! the scanner goes on after it. Which chunks are recycled does not depend on the scanner:
//! only who reads them does. The queue holds at most the ring's number of chunks.
//!
//! Recycling happens only while flight recorders are the only sessions recording: a session
//! that keeps its whole window beside it needs every chunk, so threads then take fresh ones,
//! and the recorder gives the extra ones back once it recycles alone again.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::Thread;
use std::time::Duration;

use crate::record::buffer::{Busy, LinkedChunk};
use crate::record::chunk::ChunkBox;
use crate::record::pool;
use crate::record::registry::{self, ThreadChunks, ThreadEntry};
use crate::record::sync::lock;

mod cut;

pub(crate) use cut::CutScope;
use cut::scan;

/// A flight recorder is installed.
static ON: AtomicBool = AtomicBool::new(false);

static RING: Mutex<Option<Ring>> = Mutex::new(None);

/// Bytes of records in one chunk: 32 KiB.
pub(crate) const CHUNK_BYTES: usize = crate::record::chunk::CHUNK_BYTES;

/// A chunk linked since the recorder started.
#[derive(Debug)]
struct Linked {
    thread: Weak<ThreadEntry>,
    /// Its index in the thread's buffer.
    index: u64,
    /// Once read (by the scanner): the thread's scopes open at its end.
    after: Option<Vec<CutScope>>,
}

/// How far the chunks of one thread have been read.
#[derive(Debug, Default)]
struct Scan {
    /// The index of the next chunk to read; `open` holds the scopes open at its start.
    next: u64,
    open: Vec<CutScope>,
    /// Bumped when a recycle reads a chunk the scanner had not: a read begun before is
    /// dropped.
    generation: u64,
    /// The thread's newest chunk (its writer fills it): complete once a newer one is linked.
    newest: Option<LinkedChunk>,
}

#[derive(Debug)]
struct Ring {
    session: u64,
    capacity: usize,
    /// Chunks prepared at start and not taken yet.
    free: Vec<ChunkBox>,
    /// The chunks linked since the recorder started, oldest first.
    linked: VecDeque<Linked>,
    /// Per thread: how far its chunks have been read.
    scans: HashMap<u64, Scan>,
    /// Complete chunks not read yet, in the order they were completed.
    pending: VecDeque<(Weak<ThreadEntry>, LinkedChunk)>,
    /// The scanner thread, woken when [`Ring::wake_at`] chunks are pending.
    scanner: Option<Thread>,
    wake_at: usize,
    /// Per thread: its scopes open at the start of its retained window, outermost first.
    cut: HashMap<u64, Vec<CutScope>>,
    overwritten: u64,
    /// The latest tick of a record overwritten (`None` while none was).
    lost_until: Option<u64>,
    /// Chunks read ahead (by the scanner), and when recycled (the scanner was behind).
    read_ahead: u64,
    read_late: u64,
}

/// Why a flight recorder could not start.
pub(crate) enum StartError {
    /// Another flight recorder runs.
    Running,
}

/// Installs the flight recorder of session `session`, of `bytes` of records (at least one
/// chunk), its chunks prepared (touched) now, and starts its scanner.
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
    // Without a scanner (no thread could be started) every chunk is read when recycled.
    let scanner = std::thread::Builder::new()
        .name("tickscope-flight".into())
        .spawn(move || run_scanner(session))
        .ok()
        .map(|handle| handle.thread().clone());
    *ring = Some(Ring {
        session,
        capacity,
        free,
        linked: VecDeque::with_capacity(capacity + 1),
        scans: HashMap::new(),
        pending: VecDeque::new(),
        scanner,
        wake_at: (capacity / 4).clamp(1, WAKE_AT),
        cut: HashMap::new(),
        overwritten: 0,
        lost_until: None,
        read_ahead: 0,
        read_late: 0,
    });
    ON.store(true, Ordering::Release);
    Ok(())
}

/// Takes the flight recorder of `session` out of service (its unused chunks go to the pool,
/// its scanner ends); returns the events it overwrote.
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
    if let Some(scanner) = &ring.scanner {
        // It finds no recorder of its session and returns.
        scanner.unpark();
    }
    for chunk in ring.free {
        pool::give(chunk);
    }
    ring.overwritten
}

/// The events the flight recorder of `session` overwrote so far; `None` when it has none.
pub(crate) fn overwritten(session: u64) -> Option<u64> {
    let slot = lock(&RING);
    slot.as_ref()
        .filter(|r| r.session == session)
        .map(|r| r.overwritten)
}

/// True while a flight recorder is installed: one relaxed load.
#[inline]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The scanner is woken once this many complete chunks wait to be read (fewer in a ring of
/// fewer than `4 × WAKE_AT` chunks): one wake-up per 8 chunks, 16 Ki scopes.
const WAKE_AT: usize = 8;
/// The scanner also looks for chunks this often without being woken.
const IDLE: Duration = Duration::from_millis(10);

/// The scanner only reads when asked to ([`drain`]): a test's way to make every recycle read
/// its chunk, or to choose the moment chunks are read ahead.
static PAUSED: AtomicBool = AtomicBool::new(false);

/// A chunk for a thread whose tail is complete (full, or without room for what comes next):
/// one of the recorder's own, free or recycled (the oldest linked); `None` when the recorder
/// is not the only session recording or has none to give (the thread then takes one from the
/// pool).
///
/// A recycled chunk's records were usually read already, by the scanner: the thread then
/// unlinks it and takes the scopes open at its end as they were found. It reads the chunk
/// itself only when the scanner is behind.
pub(crate) fn take() -> Option<ChunkBox> {
    if !pool::flight_only() {
        return None;
    }
    let mut slot = lock(&RING);
    let ring = slot.as_mut()?;
    if let Some(chunk) = ring.free.pop() {
        return Some(chunk);
    }
    let mut taken = None;
    // Down to one chunk below the bound, this thread's new one making it up again (more
    // than one after chunks taken from the pool while another session recorded), skipping
    // tails still being filled.
    let mut skipped = 0;
    while ring.linked.len() >= ring.capacity && skipped < ring.linked.len() {
        let Some(oldest) = ring.linked.get_mut(skipped) else {
            break;
        };
        let (index, after) = (oldest.index, oldest.after.take());
        let Some(thread) = oldest.thread.upgrade() else {
            // Its chunks went with the thread's entry (no session needed them).
            ring.linked.remove(skipped);
            continue;
        };
        let Ring {
            cut,
            overwritten,
            lost_until,
            scans,
            read_late,
            ..
        } = ring;
        let open = cut.entry(thread.id).or_default();
        let unread = after.is_none();
        let evicted = thread.buffer.evict_through(
            index,
            |records| {
                *overwritten += records.len() as u64;
                // Ticks only grow on a thread: its last record that is not data is its latest.
                if let Some(last) = records.iter().rev().find(|r| !r.kind.carries_data()) {
                    *lost_until = Some(lost_until.map_or(last.tick, |t| t.max(last.tick)));
                }
                // A chunk the scanner has not read yet (it is behind, or the chunk was an
                // exited thread's last or linked before the recorder) is read now.
                if unread {
                    scan(open, records);
                }
            },
            pool::give,
        );
        match evicted {
            Err(Busy) => {
                if let Some(oldest) = ring.linked.get_mut(skipped) {
                    oldest.after = after;
                }
                skipped += 1;
            }
            Ok(chunk) => {
                match after {
                    Some(after) => *open = after,
                    None => {
                        *read_late += 1;
                        // The scanner goes on after it.
                        if let Some(scan) = scans.get_mut(&thread.id)
                            && scan.next <= index
                        {
                            scan.next = index + 1;
                            scan.open.clone_from(open);
                            scan.generation += 1;
                        }
                    }
                }
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
                    ring.scans.remove(&thread.id);
                    registry::release_exited(&thread);
                }
            }
        }
    }
    taken
}

/// Counts `chunk`, just linked into `thread`'s buffer; the thread's chunk before it is
/// complete now, and waits for the scanner.
pub(crate) fn linked(thread: &Arc<ThreadEntry>, chunk: LinkedChunk) {
    let mut slot = lock(&RING);
    let Some(ring) = slot.as_mut() else { return };
    let weak = Arc::downgrade(thread);
    ring.linked.push_back(Linked {
        thread: weak.clone(),
        index: chunk.index(),
        after: None,
    });
    let scan = ring.scans.entry(thread.id).or_insert_with(|| Scan {
        next: chunk.index(),
        ..Scan::default()
    });
    let complete = scan.newest.replace(chunk);
    if let (Some(complete), Some(scanner)) = (complete, &ring.scanner) {
        ring.pending.push_back((weak, complete));
        if ring.pending.len() > ring.capacity {
            // The scanner is that far behind (or paused): the oldest is recycled already or
            // about to be, and read then; the queue stays within the ring's size.
            ring.pending.pop_front();
        }
        if ring.pending.len() == ring.wake_at {
            scanner.unpark();
        }
    }
}

impl Ring {
    /// The next pending chunk to read, with its thread, the generation of the thread's
    /// [`Scan`] and the scopes open at its start (taken out of the `Scan` until the read is
    /// done); `None` when none is pending.
    fn next_read(&mut self) -> Option<(Arc<ThreadEntry>, LinkedChunk, u64, Vec<CutScope>)> {
        while let Some((thread, chunk)) = self.pending.pop_front() {
            let Some(thread) = thread.upgrade() else {
                continue;
            };
            let Some(scan) = self.scans.get_mut(&thread.id) else {
                continue;
            };
            // Read already (when it was recycled), or after a chunk that could not be read.
            if scan.next != chunk.index() {
                continue;
            }
            let open = std::mem::take(&mut scan.open);
            return Some((thread, chunk, scan.generation, open));
        }
        None
    }

    /// Ends a read begun with [`Ring::next_read`]: `open` holds the scopes open at the end of
    /// the chunk of index `index` when `done`, else (the chunk could not be read) those at
    /// its start as they were taken.
    fn read(
        &mut self,
        thread: &ThreadEntry,
        index: u64,
        generation: u64,
        open: Vec<CutScope>,
        done: bool,
    ) {
        let Some(scan) = self.scans.get_mut(&thread.id) else {
            return;
        };
        if scan.generation != generation || scan.next != index {
            // A recycle read the chunk meanwhile and set the scan after it.
            return;
        }
        if done {
            let own = |e: &&mut Linked| e.index == index && std::ptr::eq(e.thread.as_ptr(), thread);
            if let Some(entry) = self.linked.iter_mut().rev().find(own) {
                entry.after = Some(open.clone());
            }
            scan.next = index + 1;
            self.read_ahead += 1;
        }
        scan.open = open;
    }
}

/// Reads every pending chunk of session `session`'s recorder, unless `paused` and the scanner
/// is paused; returns the chunks read, or `None` when the recorder has gone.
fn drain(session: u64, paused: bool) -> Option<usize> {
    let mut count = 0;
    loop {
        if paused && PAUSED.load(Ordering::Acquire) {
            return Some(count);
        }
        let next = {
            let mut slot = lock(&RING);
            let ring = slot.as_mut().filter(|r| r.session == session)?;
            ring.next_read()
        };
        let Some((thread, chunk, generation, mut open)) = next else {
            return Some(count);
        };
        let held = thread.buffer.hold_complete(chunk);
        let done = held.is_some();
        if let Some(held) = held {
            // Read without the buffer's lock: the thread links its next chunks meanwhile.
            scan(&mut open, &held.records());
            // Recycled meanwhile (the recycling thread read it and took a chunk from the
            // pool): the last hold hands it back.
            if let Some(chunk) = held.release() {
                pool::give(chunk);
            }
        }
        let mut slot = lock(&RING);
        let ring = slot.as_mut().filter(|r| r.session == session)?;
        ring.read(&thread, chunk.index(), generation, open, done);
        count += usize::from(done);
    }
}

/// The scanner thread of session `session`'s recorder: reads the complete chunks off the
/// recording threads, while they are still recent, so that recycling one costs a thread no
/// more than unlinking it; returns once the recorder has gone.
fn run_scanner(session: u64) {
    // Its allocations (the lists of open scopes) are the profiler's, not the program's.
    let _untracked = registry::Untracked::enter();
    background_priority();
    while drain(session, true).is_some() {
        std::thread::park_timeout(IDLE);
    }
}

/// Lowers the calling thread (the scanner) to the lowest priority (Linux: nice 19), so that
/// waking it never takes the core of a recording thread while another has less to do. (Not
/// `SCHED_IDLE`: on a busy machine that scanner never runs, and every chunk is read by the
/// recording threads.) Elsewhere the scanner keeps its priority.
fn background_priority() {
    #[cfg(all(target_os = "linux", feature = "enabled"))]
    {
        // SAFETY: `gettid` has no preconditions; `setpriority` on the calling thread's id
        // changes only its own nice value (Linux's per-thread priorities), and lowering it
        // needs no privilege. A failure leaves the priority as it was.
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
        }
    }
}

/// What the running flight recorder's chunks cost to read so far: `(ahead, late)`, the
/// chunks its scanner read and those read when recycled (the scanner was behind); `None`
/// without a flight recorder.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
pub(crate) fn reads() -> Option<(u64, u64)> {
    lock(&RING).as_ref().map(|r| (r.read_ahead, r.read_late))
}

/// Pauses (or resumes) the scanner: while paused, chunks are read only by [`read_pending`]
/// or when recycled.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
pub(crate) fn pause_scanner(paused: bool) {
    PAUSED.store(paused, Ordering::Release);
    if !paused && let Some(Some(scanner)) = lock(&RING).as_ref().map(|r| r.scanner.clone()) {
        scanner.unpark();
    }
}

/// Reads every pending chunk of the running flight recorder on the calling thread, as its
/// scanner does; returns how many.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
pub(crate) fn read_pending() -> usize {
    let _untracked = registry::Untracked::enter();
    let session = lock(&RING).as_ref().map(|r| r.session);
    session.and_then(|s| drain(s, false)).unwrap_or(0)
}

/// What a flight recorder retains: every thread's chunks, its scopes cut at the start of its
/// window, the events overwritten so far, and the window's start common to every thread.
pub(crate) struct Retained {
    pub(crate) threads: Vec<(ThreadChunks, Vec<CutScope>)>,
    pub(crate) overwritten: u64,
    /// The tick from which every thread's records are all retained ([`Retained::cut_start`]);
    /// `None` while nothing was overwritten.
    pub(crate) cut_start: Option<u64>,
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
    let threads: Vec<(ThreadChunks, Vec<CutScope>)> = take_chunks()
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
    let cut_start = cut_start(ring);
    Some(Retained {
        threads,
        overwritten: ring.overwritten,
        cut_start,
    })
}

/// The start of the window common to every thread: just past the latest record overwritten
/// (of any thread, one gone since too). Recycling takes whole chunks, a thread's in order, so
/// every record after that one is retained on every thread: from there on the threads' records
/// are whole, and an async call whose polls moved between threads can be told whole. (A
/// thread's oldest retained record may come later, when it recorded nothing in between: that
/// idle time lost nothing, so it does not delay the window.) `None` while nothing was
/// overwritten.
fn cut_start(ring: &Ring) -> Option<u64> {
    Some(ring.lost_until?.saturating_add(1))
}

#[cfg(test)]
mod tests;
