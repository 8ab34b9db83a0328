//! Recycled chunks: reclaimed chunks wait here, already touched, for the next thread that fills
//! one, so steady-state recording writes into warm memory and allocates nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

#[cfg(feature = "enabled")]
use crossbeam_queue::ArrayQueue;
#[cfg(not(feature = "enabled"))]
use queue::ArrayQueue;

use crate::record::chunk::{CHUNK_BYTES, Chunk, ChunkBox};
use crate::record::dry::Returns;
use crate::record::sync::{lock, recover};
use crate::record::untracked::Untracked;

#[cfg(not(feature = "enabled"))]
mod queue;
mod reserve;

use reserve::{MIN_CHUNKS_PER_WORKER, prepare_in_parallel, reservable_chunks};

/// Chunks kept for reuse: 2048 × 32 KiB = 64 MiB at most, and only as many as sessions have
/// used. Recording into fresh memory costs a page fault per 4 KiB (on a VM about 14 ns per
/// scope, 1.7 × the scope itself), so the chunks of the last sessions stay warm for the next
/// one. Chunks given back beyond this are freed; [`release`] frees the kept ones.
const RETAIN: usize = 2048;
/// Chunks prepared at session start so that the first chunk of each thread is warm.
const PREPARE: usize = 4;

static READY: OnceLock<ArrayQueue<ChunkBox>> = OnceLock::new();

fn ready() -> &'static ArrayQueue<ChunkBox> {
    READY.get_or_init(|| ArrayQueue::new(RETAIN))
}

/// A chunk to fill: a reserved one if any ([`Reservation`]), else a recycled or prepared one,
/// else a new one, made resident here in one call. Keeps the prefaulter ahead: once fewer
/// than half its target are ready, it prepares more in the background; a thread that found
/// none raises the target.
pub(crate) fn take() -> ChunkBox {
    if let Some(chunk) = take_reserved() {
        return chunk;
    }
    let chunk = ready().pop();
    if ready().len() < prefaulter::target() / 2 {
        prefaulter::wake();
    }
    chunk.unwrap_or_else(|| {
        prefaulter::missed();
        // One `madvise` for the chunk's pages rather than a fault per page as it fills.
        let mut chunk = ChunkBox::alloc();
        chunk.touch();
        chunk
    })
}

/// The prefaulter's first target: this many chunks ready (4 MiB, a few ms of recording on
/// every core at once).
const HIGH_WATER: usize = 64;
/// The most chunks the prefaulter keeps ready (16 MiB): its target doubles, up to this,
/// whenever a thread found none ready (threads take chunks faster than it prepares them);
/// they count among the recycling pool's [`RETAIN`], and [`release`] frees them.
const MAX_AHEAD: usize = 256;
/// Chunks the prefaulter prepares at once: allocated one after another, they mostly lie next
/// to each other, and one `madvise` makes a whole run resident (1 MiB).
const BATCH: usize = 16;

/// A background thread that keeps touched chunks ready while sessions record into memory.
///
/// A session that keeps its window in memory takes a fresh chunk every 4096 words, and
/// fresh memory costs a page fault per 4 KiB on first write: recorded on the hot thread, that
/// made a long session's scope about 1.7 × the warm one's. The prefaulter allocates and
/// touches chunks ahead of the recording threads, off their path, so they take resident
/// chunks: [`BATCH`] at a time, with one `madvise` per run of them that lies together in
/// memory (a 1 MiB run costs one kernel entry, not 256 faults). It runs only when woken by a
/// thread that finds fewer than half its target ready ([`take`]), stops at its target
/// ([`HIGH_WATER`], doubled up to [`MAX_AHEAD`] each time a thread found none ready), and
/// never holds more than the recycling pool's bound.
///
/// Where every core records, the prefaulter has no idle core, and a page costs CPU work
/// wherever it is made resident: the threads then pay for part of it (one `madvise` per
/// chunk, see [`take`]); reserving memory ([`Reservation`]) or streaming (recycled chunks)
/// avoids it.
mod prefaulter {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread::Thread;

    use super::{BATCH, HIGH_WATER, MAX_AHEAD, ready};
    use crate::record::chunk::ChunkBox;
    use crate::record::untracked::Untracked;

    static THREAD: OnceLock<Option<Thread>> = OnceLock::new();

    /// How many chunks the prefaulter keeps ready: [`HIGH_WATER`] to [`MAX_AHEAD`].
    static TARGET: AtomicUsize = AtomicUsize::new(HIGH_WATER);

    /// How many chunks the prefaulter keeps ready now.
    #[inline]
    pub(super) fn target() -> usize {
        TARGET.load(Ordering::Relaxed)
    }

    /// A thread found no chunk ready: the prefaulter keeps twice as many ready from now on
    /// (up to [`MAX_AHEAD`]) and starts at once.
    pub(super) fn missed() {
        let target = target();
        if target < MAX_AHEAD {
            TARGET.store((target * 2).min(MAX_AHEAD), Ordering::Relaxed);
        }
        wake();
    }

    /// Back to the first target (the recycling pool was emptied).
    pub(super) fn reset() {
        TARGET.store(HIGH_WATER, Ordering::Relaxed);
    }

    /// Wakes the prefaulter (starting it the first time).
    pub(super) fn wake() {
        let thread = THREAD.get_or_init(|| {
            std::thread::Builder::new()
                .name("tickscope-prefault".into())
                .spawn(run)
                .ok()
                .map(|handle| handle.thread().clone())
        });
        if let Some(thread) = thread {
            thread.unpark();
        }
    }

    fn run() {
        // Its allocations are the profiler's, not the program's.
        let _untracked = Untracked::enter();
        loop {
            // Off the recording threads: a clock checkpoint, at most one a second.
            crate::record::clock::checkpoint();
            'fill: loop {
                let missing = target().saturating_sub(ready().len());
                if missing == 0 {
                    break;
                }
                let mut batch: Vec<ChunkBox> =
                    (0..missing.min(BATCH)).map(|_| ChunkBox::alloc()).collect();
                ChunkBox::touch_all(&mut batch);
                for chunk in batch {
                    // A full pool hands the chunk back; dropping it (and the rest) frees them.
                    if ready().push(chunk).is_err() {
                        break 'fill;
                    }
                }
            }
            std::thread::park();
        }
    }
}

/// Takes back a chunk that nobody holds any more; it is freed when the pool is full.
pub(crate) fn give(mut chunk: ChunkBox) {
    chunk.reset();
    // A running stream's pool first: its threads take from nowhere else.
    if let Some(stream) = stream() {
        match stream.give_back(chunk) {
            Ok(()) => return,
            Err(back) => chunk = back,
        }
    }
    // A full pool hands the chunk back, and dropping it frees it.
    drop(ready().push(chunk));
}

/// Allocates and touches chunks until [`PREPARE`] are ready (called at session start).
pub(crate) fn prepare() {
    let missing = PREPARE.saturating_sub(ready().len());
    let mut chunks: Vec<ChunkBox> = (0..missing).map(|_| ChunkBox::alloc()).collect();
    ChunkBox::touch_all(&mut chunks);
    for chunk in chunks {
        if ready().push(chunk).is_err() {
            break;
        }
    }
}

/// Frees every chunk waiting for reuse; returns how many bytes that gave back.
pub(crate) fn release() -> usize {
    prefaulter::reset();
    let mut freed = 0;
    while let Some(chunk) = ready().pop() {
        drop(chunk);
        freed += std::mem::size_of::<Chunk>();
    }
    freed
}

/// Chunks reserved by running sessions ([`Reservation`]), touched before their start returned.
/// Threads take from here before anything else.
static RESERVED: Mutex<Vec<ChunkBox>> = Mutex::new(Vec::new());
/// `RESERVED`'s length, read without the lock: the common case (no reservation) is one load.
static RESERVED_COUNT: AtomicUsize = AtomicUsize::new(0);

fn take_reserved() -> Option<ChunkBox> {
    if RESERVED_COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    let mut store = recover(RESERVED.lock());
    let chunk = store.pop();
    RESERVED_COUNT.store(store.len(), Ordering::Release);
    chunk
}

/// Chunks reserved and not taken yet, for all sessions together.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
pub(crate) fn reserved_chunks() -> usize {
    RESERVED_COUNT.load(Ordering::Acquire)
}

/// Bytes of records a chunk holds: what [`Reservation::new`] counts reservations in.
const CHUNK_RECORD_BYTES: usize = CHUNK_BYTES;

/// A session's reserved memory ([`ProfilerBuilder::reserve_memory`](crate::ProfilerBuilder::reserve_memory)):
/// chunks allocated and touched before the session starts recording, so that its threads
/// take resident chunks and never pay a page fault on the hot path while the reservation
/// lasts, even when every core is busy recording (a prefaulter then has no idle core, and
/// each page costs CPU time, not only latency).
///
/// Reserved chunks go into one store that every recording thread takes from first; a
/// reservation is a claim on that many of them. Dropping it (at stop) takes back as many of
/// the chunks still in the store as it claimed, and gives them to the recycling pool, which
/// keeps up to its bound and frees the rest: chunks of the store never outlive the claims,
/// whatever the order in which sessions stop.
#[derive(Debug)]
pub(crate) struct Reservation {
    chunks: usize,
}

impl Reservation {
    /// Reserves chunks for `bytes` of records (rounded up to whole chunks), at most
    /// [`reservable_chunks`]: the recycled ones first (already touched), then new ones,
    /// prepared on as many threads as the machine has cores.
    pub(crate) fn new(bytes: usize) -> Self {
        let _untracked = Untracked::enter();
        let chunks = bytes.div_ceil(CHUNK_RECORD_BYTES).min(reservable_chunks());
        let mut recycled = Vec::new();
        while recycled.len() < chunks
            && let Some(chunk) = ready().pop()
        {
            recycled.push(chunk);
        }
        let missing = chunks - recycled.len();
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(missing.div_ceil(MIN_CHUNKS_PER_WORKER))
            .max(1);
        let prepared = prepare_in_parallel(missing, workers);
        let mut store = recover(RESERVED.lock());
        store.extend(recycled);
        store.extend(prepared);
        RESERVED_COUNT.store(store.len(), Ordering::Release);
        Self { chunks }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let _untracked = Untracked::enter();
        let mut store = recover(RESERVED.lock());
        for _ in 0..self.chunks {
            let Some(chunk) = store.pop() else { break };
            give(chunk);
        }
        RESERVED_COUNT.store(store.len(), Ordering::Release);
    }
}

/// The chunks a streaming session lends its threads: a fixed number, prepared (touched) when
/// the session starts and given back by its writer once written, so that a session that never
/// stops holds a bounded amount of memory, all of it warm.
///
/// Threads take from it only while every recording session streams ([`set_streaming_only`]):
/// a session that keeps its window in memory keeps chunks that the writer cannot give back.
/// When the pool is empty (the writer is behind), a thread either waits for the writer
/// ([`SlowWriter::Block`]) or records nothing until a chunk comes back, counting each event it
/// could not record ([`SlowWriter::Drop`]).
#[derive(Debug)]
pub(crate) struct StreamPool {
    /// The free chunks, a stack: the chunk written out last (still in cache) is the next
    /// one taken, so a writer that keeps up keeps the threads on a few warm chunks.
    chunks: Mutex<Vec<ChunkBox>>,
    capacity: usize,
    policy: SlowWriter,
    /// The process's refused events (the registry's count, which its caller passes) when the
    /// pool was installed, and when it was taken out of service: the pool's own are the
    /// difference (only an installed pool refuses, and only one is installed at a time).
    /// `None` for a detached pool.
    refused_span: Mutex<Option<(u64, Option<u64>)>>,
    /// Times a thread waited for a chunk, and nanoseconds waited ([`SlowWriter::Block`]).
    waits: AtomicU64,
    waited_ns: AtomicU64,
    /// Chunks allocated beyond the pool after a thread waited [`MAX_WAIT`] in vain.
    overflow: AtomicU64,
    /// Chunks given back so far: a waiting thread gives up only when this stands still.
    progress: AtomicU64,
    closed: AtomicBool,
    /// Threads waiting for a chunk wait here; the writer's giving back wakes them.
    gate: Mutex<()>,
    returned: Condvar,
    /// The writer waits here for work; a thread that runs out of chunks wakes it.
    work: Mutex<bool>,
    /// A wake-up is asked for and not yet seen by the writer: threads that run out of chunks
    /// one after the other take the writer's lock once.
    wake_pending: AtomicBool,
    wake: Condvar,
}

/// What a thread does when a streaming session's writer is behind and no chunk is free.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlowWriter {
    /// Wait until the writer gives a chunk back (the default): nothing is lost, the program
    /// is slowed down to the speed of the disk.
    #[default]
    Block,
    /// Record nothing until a chunk is free, and count every event not recorded (the
    /// session's [`dropped_events`](crate::Capture::dropped_events) and the table's footer
    /// show them): the program runs at full speed, the file has gaps.
    Drop,
}

/// How long a thread waits for a chunk while the writer gives none back before it takes one
/// beyond the pool: the writer is then stuck (a pool smaller than the threads' tails, or a
/// file that does not take writes), and a profiler must not hang the program.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// While only streaming sessions record, threads take their chunks from the stream's pool.
static STREAMING_ONLY: AtomicBool = AtomicBool::new(false);

/// Announced whenever a thread that a stream's pool refused may find a chunk again: the
/// writer gave one back, a pool was installed or taken out of service, or the set of
/// recording sessions changed (see [`dry`](crate::record::dry)).
static RETURNS: Returns = Returns::new();

/// [`RETURNS`]: a refused thread reads it before it looks for a chunk, and once per event
/// while in its dry spell.
#[inline(always)]
pub(crate) fn returns() -> &'static Returns {
    &RETURNS
}

static STREAM: RwLock<Option<Arc<StreamPool>>> = RwLock::new(None);

/// While only flight recorders record, a flight recorder recycles its chunks (see `flight`).
static FLIGHT_ONLY: AtomicBool = AtomicBool::new(false);

/// Called by the registry whenever the set of recording sessions changes: whether flight
/// recorders are the only sessions recording.
pub(crate) fn set_flight_only(on: bool) {
    FLIGHT_ONLY.store(on, Ordering::Release);
}

/// True while flight recorders are the only sessions recording.
pub(crate) fn flight_only() -> bool {
    FLIGHT_ONLY.load(Ordering::Acquire)
}

/// Called by the registry whenever the set of recording sessions changes.
pub(crate) fn set_streaming_only(on: bool) {
    STREAMING_ONLY.store(on, Ordering::Release);
    RETURNS.announce();
}

fn stream() -> Option<Arc<StreamPool>> {
    recover(STREAM.read()).clone()
}

/// A chunk for a thread whose tail filled up: the stream's while only streaming sessions
/// record, else a recycled or new one. `None` when the stream's pool is empty and its policy
/// is [`SlowWriter::Drop`].
pub(crate) fn take_for_thread() -> Option<ChunkBox> {
    if STREAMING_ONLY.load(Ordering::Acquire)
        && let Some(stream) = stream()
    {
        return stream.take();
    }
    Some(take())
}

impl StreamPool {
    /// Installs a pool of `chunks` prepared chunks for the streaming session about to start,
    /// when the process has refused `refused` events so far (the registry's count); `None`
    /// when another streaming session already has one.
    pub(crate) fn install(chunks: usize, policy: SlowWriter, refused: u64) -> Option<Arc<Self>> {
        let mut slot = recover(STREAM.write());
        if slot.is_some() {
            return None;
        }
        let chunks = chunks.max(1);
        let mut free = Vec::with_capacity(chunks);
        for _ in 0..chunks {
            let chunk = ready().pop().unwrap_or_else(|| {
                let mut chunk = ChunkBox::alloc();
                chunk.touch();
                chunk
            });
            free.push(chunk);
        }
        let pool = Self::new(free, chunks, policy);
        *recover(pool.refused_span.lock()) = Some((refused, None));
        *slot = Some(pool.clone());
        drop(slot);
        RETURNS.announce();
        Some(pool)
    }

    /// A pool of no chunks that threads never take from: the writer of a stream that has no
    /// file (it gives back and counts what is recorded) waits on it for work.
    pub(crate) fn detached(policy: SlowWriter) -> Arc<Self> {
        Self::new(Vec::new(), 0, policy)
    }

    fn new(free: Vec<ChunkBox>, capacity: usize, policy: SlowWriter) -> Arc<Self> {
        Arc::new(Self {
            chunks: Mutex::new(free),
            capacity,
            policy,
            refused_span: Mutex::new(None),
            waits: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
            overflow: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            gate: Mutex::new(()),
            returned: Condvar::new(),
            work: Mutex::new(false),
            wake_pending: AtomicBool::new(false),
            wake: Condvar::new(),
        })
    }

    /// Takes the pool out of service, when the process has refused `refused` events so far
    /// (the registry's count): threads take chunks as without a stream again, and the pool's
    /// chunks go to the recycling pool.
    pub(crate) fn uninstall(&self, refused: u64) {
        self.closed.store(true, Ordering::Release);
        {
            let mut slot = recover(STREAM.write());
            if slot.as_ref().is_some_and(|s| std::ptr::eq(&**s, self)) {
                *slot = None;
            }
        }
        RETURNS.announce();
        if let Some((_, until)) = &mut *recover(self.refused_span.lock())
            && until.is_none()
        {
            *until = Some(refused);
        }
        drop(lock(&self.gate));
        self.returned.notify_all();
        let free = std::mem::take(&mut *lock(&self.chunks));
        for chunk in free {
            give(chunk);
        }
    }

    /// A chunk for a thread, waiting for the writer when the policy says so.
    fn take(&self) -> Option<ChunkBox> {
        if let Some(chunk) = self.pop() {
            return Some(chunk);
        }
        if self.policy == SlowWriter::Drop {
            // The thread drops its next events on its own (a dry spell, see `dry`) until
            // chunks come back: this is once per spell, not per event.
            self.wake_writer();
            return None;
        }
        let started = Instant::now();
        self.waits.fetch_add(1, Ordering::Relaxed);
        let mut progress = self.progress.load(Ordering::Acquire);
        let mut since = started;
        let mut gate = lock(&self.gate);
        let chunk = loop {
            if let Some(chunk) = self.pop() {
                break chunk;
            }
            if self.closed.load(Ordering::Acquire) || !STREAMING_ONLY.load(Ordering::Acquire) {
                break take();
            }
            let now = self.progress.load(Ordering::Acquire);
            if now != progress {
                // The writer gave chunks back (to other threads): it is not stuck.
                (progress, since) = (now, Instant::now());
            }
            if since.elapsed() >= MAX_WAIT {
                self.overflow.fetch_add(1, Ordering::Relaxed);
                break take();
            }
            self.wake_writer();
            gate = recover(self.returned.wait_timeout(gate, Duration::from_millis(1))).0;
        };
        drop(gate);
        let waited = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waited_ns.fetch_add(waited, Ordering::Relaxed);
        Some(chunk)
    }

    /// The chunk given back last, if any; wakes the writer when half the pool is in use, so
    /// that it writes out what is complete before the threads run out.
    fn pop(&self) -> Option<ChunkBox> {
        let (chunk, left) = {
            let mut free = lock(&self.chunks);
            (free.pop(), free.len())
        };
        if left < self.capacity / 2 {
            self.wake_writer();
        }
        chunk
    }

    /// Takes back a chunk the writer is done with; `Err` gives it back when the pool is full.
    fn give_back(&self, chunk: ChunkBox) -> Result<(), ChunkBox> {
        if self.closed.load(Ordering::Acquire) {
            return Err(chunk);
        }
        {
            let mut free = lock(&self.chunks);
            if free.len() >= self.capacity {
                return Err(chunk);
            }
            free.push(chunk);
        }
        self.progress.fetch_add(1, Ordering::Release);
        RETURNS.announce();
        if self.policy == SlowWriter::Block {
            drop(lock(&self.gate));
            self.returned.notify_all();
        }
        Ok(())
    }

    /// Asks the writer to run now.
    pub(crate) fn wake_writer(&self) {
        if self.wake_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        *lock(&self.work) = true;
        self.wake.notify_one();
    }

    /// The writer's wait for work: returns when woken or after `timeout`.
    pub(crate) fn wait_for_work(&self, timeout: Duration) {
        let mut work = lock(&self.work);
        if !*work {
            work = recover(self.wake.wait_timeout(work, timeout)).0;
        }
        *work = false;
        self.wake_pending.store(false, Ordering::Release);
    }

    /// The pool's size in chunks.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Events refused so far ([`SlowWriter::Drop`]), on every thread, when the process has
    /// refused `refused` so far (the registry's count: each thread counts its own).
    pub(crate) fn refused_events(&self, refused: u64) -> u64 {
        let span = *recover(self.refused_span.lock());
        span.map_or(0, |(from, until)| until.unwrap_or(refused) - from)
    }

    /// Times a thread waited for a chunk, and the nanoseconds waited ([`SlowWriter::Block`]).
    pub(crate) fn waits(&self) -> (u64, u64) {
        (
            self.waits.load(Ordering::Relaxed),
            self.waited_ns.load(Ordering::Relaxed),
        )
    }

    /// Chunks taken beyond the pool after a wait of [`MAX_WAIT`].
    pub(crate) fn overflow_chunks(&self) -> u64 {
        self.overflow.load(Ordering::Relaxed)
    }
}
