//! Every thread's buffer and every running session: who records what.
//!
//! The global lock is taken when a thread registers or exits, when a thread first sees a change
//! in the set of recording sessions, and at session start, stop and collection; filling a chunk
//! takes only the thread's own buffer lock. The hot path reads one global atomic
//! ([`GENERATION`]) and its own thread-locals.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::record::buffer::{StreamedChunk, ThreadBuffer};
use crate::record::chunk::SharedChunk;
use crate::record::memory::MemoryMode;
use crate::record::pool;
use crate::record::sync::lock;

/// 0 while no session records and no observer is registered; otherwise a number that changes
/// whenever the set of recording sessions, their members or the presence of observers
/// changes, so each thread re-checks whether it is wanted. A scope reads only this while both
/// are absent.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Equal to [`GENERATION`] while a recording session records memory (see
/// [`TrackingAlloc`](crate::TrackingAlloc)), 0 otherwise: the allocator's only check when off.
static MEMORY: AtomicU64 = AtomicU64::new(0);

/// Registered observers (see `observe`).
static OBSERVERS: AtomicUsize = AtomicUsize::new(0);

/// The id of the profiler's own thread that sessions of all threads leave out (the one that
/// calibrates the probe overhead: its scopes are the profiler's, not the program's); 0 for
/// none.
static PRIVATE: AtomicU64 = AtomicU64::new(0);

/// Makes the calling thread the profiler's own ([`PRIVATE`]): sessions of all threads leave
/// it out from now on; a session of selected threads that it joins still records it. Called
/// before the thread records anything.
pub(crate) fn make_private(thread: u64) {
    let mut reg = registry();
    PRIVATE.store(thread, Ordering::Relaxed);
    reg.bump();
}

/// Events that could not be recorded because their thread was tearing down.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Events refused by streaming sessions' pools on threads that the registry forgot since
/// (their [`ThreadEntry::count_refused`] counts, added when they go).
static REFUSED_GONE: AtomicU64 = AtomicU64::new(0);

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    threads: Vec::new(),
    sessions: Vec::new(),
    generation: 0,
    next_thread: 1,
});

/// A registered thread: identity, name and events.
#[derive(Debug)]
pub(crate) struct ThreadEntry {
    /// Process-unique, never reused, starting at 1.
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    /// Held by the registry, and by the thread's writer while it is attached.
    pub(crate) buffer: Arc<ThreadBuffer>,
    /// Events of this thread that a streaming session's pool refused ([`SlowWriter::Drop`]),
    /// ever: written by the thread alone, read by anyone ([`refused_events`]).
    ///
    /// [`SlowWriter::Drop`]: crate::SlowWriter::Drop
    refused: AtomicU64,
}

impl ThreadEntry {
    /// Counts `events` of this thread refused by a streaming session's pool. Only the thread
    /// itself calls this, so a load and a store on its own entry do (no shared write).
    #[inline]
    pub(crate) fn count_refused(&self, events: u64) {
        let before = self.refused.load(Ordering::Relaxed);
        self.refused.store(before + events, Ordering::Relaxed);
    }
}

/// Which threads a session records.
#[derive(Debug, Clone)]
pub(crate) enum Members {
    All,
    /// `(thread id, tick from which it belongs to the session)`.
    Threads(Vec<(u64, u64)>),
}

#[derive(Debug)]
struct SessionEntry {
    id: u64,
    start_tick: u64,
    members: Members,
    /// Stopped, but its events are still being collected: it wants no new events, and its
    /// window must not be reclaimed yet.
    collecting: bool,
    /// What it records of allocations.
    memory: MemoryMode,
    /// Observer callbacks that panicked on the threads it records while it recorded.
    observer_panics: u64,
    /// A streaming session: per thread, the index of its first chunk the session's writer has
    /// not finished writing (chunks below it are written and need not be kept for it).
    streamed: Option<Vec<(u64, u64)>>,
    /// A flight recorder: it keeps only its most recent chunks (see `flight`).
    flight: bool,
}

impl SessionEntry {
    /// The tick from which this session wants `thread`'s events, if it wants them at all.
    fn window_start(&self, thread: u64) -> Option<u64> {
        match &self.members {
            Members::All => (PRIVATE.load(Ordering::Relaxed) != thread).then_some(self.start_tick),
            Members::Threads(list) => list
                .iter()
                .find(|(id, _)| *id == thread)
                .map(|&(_, from)| from.max(self.start_tick)),
        }
    }
}

struct Registry {
    threads: Vec<Arc<ThreadEntry>>,
    sessions: Vec<SessionEntry>,
    generation: u64,
    next_thread: u64,
}

impl Registry {
    /// Publishes a change in who records.
    fn bump(&mut self) {
        self.generation += 1;
        let recording = self.sessions.iter().any(|s| !s.collecting);
        let memory = self
            .sessions
            .iter()
            .any(|s| !s.collecting && s.memory.is_on());
        let generation = |on: bool| if on { self.generation } else { 0 };
        let active = recording || observers_exist();
        let streaming_only = recording
            && self
                .sessions
                .iter()
                .all(|s| s.collecting || s.streamed.is_some());
        pool::set_streaming_only(streaming_only);
        let flight_only = recording && self.sessions.iter().all(|s| s.collecting || s.flight);
        pool::set_flight_only(flight_only);
        // Before the store that publishes it: spans were created unseen while nothing
        // recorded, so the `tracing` bridge's per-thread caches of span ids may name spans
        // that are gone.
        if active && GENERATION.load(Ordering::Relaxed) == 0 {
            RESUMED.fetch_add(1, Ordering::Relaxed);
        }
        GENERATION.store(generation(active), Ordering::Release);
        MEMORY.store(generation(memory), Ordering::Release);
    }

    /// Whether a recording session wants `thread`'s scopes, and what of its allocations: the
    /// most any of them records (a timeline serves a session that counts too).
    fn wants(&self, thread: u64) -> (bool, MemoryMode) {
        let wanted = self
            .sessions
            .iter()
            .filter(|s| !s.collecting && s.window_start(thread).is_some());
        let scopes = wanted.clone().next().is_some();
        let memory = wanted.map(|s| s.memory).max().unwrap_or_default();
        (scopes, memory)
    }
}

/// The locked registry. While it is held, allocations of this thread are not recorded: the
/// recording path may need the registry itself.
struct Locked {
    guard: MutexGuard<'static, Registry>,
    _untracked: Untracked,
}

impl std::ops::Deref for Locked {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.guard
    }
}

impl std::ops::DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut Registry {
        &mut self.guard
    }
}

fn registry() -> Locked {
    let untracked = Untracked::enter();
    // Every critical section leaves the registry consistent before anything that can panic.
    Locked {
        guard: lock(&REGISTRY),
        _untracked: untracked,
    }
}

pub(crate) use super::untracked::Untracked;

/// Registers the calling thread, named `name`: a new entry with a process-unique id.
#[cold]
pub(crate) fn register_thread(name: Option<String>) -> Arc<ThreadEntry> {
    let mut reg = registry();
    let entry = Arc::new(ThreadEntry {
        id: reg.next_thread,
        name,
        buffer: Arc::new(ThreadBuffer::new()),
        refused: AtomicU64::new(0),
    });
    reg.next_thread += 1;
    reg.threads.push(entry.clone());
    entry
}

/// Whether a recording session wants thread `thread`'s scopes, and its allocations, as of the
/// returned generation.
pub(crate) fn wants(thread: u64) -> (u64, bool, MemoryMode) {
    let reg = registry();
    let now = GENERATION.load(Ordering::Relaxed);
    if now == 0 {
        return (now, false, MemoryMode::Off);
    }
    let (scopes, memory) = reg.wants(thread);
    (now, scopes, memory)
}

/// The generation of allocation recording: equal to [`generation`] while a session records
/// memory, 0 otherwise.
#[inline(always)]
pub(crate) fn memory_generation() -> u64 {
    MEMORY.load(Ordering::Relaxed)
}

/// Counts `n` events that could not be recorded.
#[cold]
pub(crate) fn count_dropped(n: u64) {
    DROPPED.fetch_add(n, Ordering::Relaxed);
}

/// Gives back the chunks of an exited thread that no session needs and forgets the thread if
/// none are left, without waiting for a session to stop: threads that only observers needed
/// (or that no session records) leave nothing behind. A session that still needs some of its
/// events keeps it until [`finish_session`].
pub(crate) fn release_exited(entry: &Arc<ThreadEntry>) {
    let mut reg = registry();
    reclaim_thread(&reg.sessions, entry);
    if entry.buffer.is_drained() {
        forget_refused(entry);
        reg.threads.retain(|t| !Arc::ptr_eq(t, entry));
    }
}

/// How many times recording resumed after no session recorded: caches of what was seen
/// while recording (the `tracing` bridge's span ids) are stale once it changes.
static RESUMED: AtomicU32 = AtomicU32::new(0);

/// [`RESUMED`]: one relaxed load.
#[cfg(feature = "tracing")]
#[inline(always)]
pub(crate) fn resumed() -> u32 {
    RESUMED.load(Ordering::Relaxed)
}

/// The current generation: 0 while no session records and no observer is registered.
#[inline(always)]
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// True when any observer is registered: one relaxed load.
#[inline(always)]
pub(crate) fn observers_exist() -> bool {
    OBSERVERS.load(Ordering::Relaxed) != 0
}

/// Counts an observer that went away; publishes it when it was the last (see
/// [`GENERATION`]).
pub(crate) fn observer_removed() {
    if OBSERVERS.fetch_sub(1, Ordering::AcqRel) == 1 {
        registry().bump();
    }
}

/// Counts a new observer and publishes that one exists, unless [`GENERATION`] already says so.
/// Bumps run under the lock and read the observer count there, so once this returns no
/// earlier bump (that read the count before this increment) can store a stale 0.
pub(crate) fn observer_added() {
    OBSERVERS.fetch_add(1, Ordering::AcqRel);
    let mut reg = registry();
    if GENERATION.load(Ordering::Relaxed) == 0 {
        reg.bump();
    }
}

/// Events lost so far (monotonic): to thread teardown, and refused by streaming sessions'
/// pools ([`refused_events`]).
pub(crate) fn dropped_events() -> u64 {
    DROPPED.load(Ordering::Relaxed) + refused_events()
}

/// Keeps the refused events of `thread`, which the registry is about to forget (with the
/// registry locked, so that [`refused_events`] never sees them twice or not at all).
fn forget_refused(thread: &ThreadEntry) {
    REFUSED_GONE.fetch_add(thread.refused.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// Events that streaming sessions' pools refused so far, on every thread (monotonic): the
/// threads count them on their own entries (see [`ThreadEntry::count_refused`]), and the
/// counts of the threads forgotten since are kept here.
pub(crate) fn refused_events() -> u64 {
    let reg = registry();
    REFUSED_GONE.load(Ordering::Relaxed)
        + reg
            .threads
            .iter()
            .map(|t| t.refused.load(Ordering::Relaxed))
            .sum::<u64>()
}

/// True when a session records (one that is not collecting its window).
pub(crate) fn any_recording() -> bool {
    registry().sessions.iter().any(|s| !s.collecting)
}

/// Registers a running session; a `streaming` one keeps only what its writer has not written
/// (see [`stream_share`] and [`streamed`]), a `flight` recorder only its latest chunks.
pub(crate) fn add_session(
    id: u64,
    start_tick: u64,
    members: Members,
    memory: MemoryMode,
    (streaming, flight): (bool, bool),
) {
    let mut reg = registry();
    reg.sessions.retain(|s| s.id != id);
    reg.sessions.push(SessionEntry {
        id,
        start_tick,
        members,
        collecting: false,
        memory,
        observer_panics: 0,
        streamed: streaming.then(Vec::new),
        flight,
    });
    reg.bump();
}

/// Adds a thread to a running session that records selected threads.
pub(crate) fn join_session(id: u64, thread: u64, from_tick: u64) {
    let mut reg = registry();
    let Some(session) = reg
        .sessions
        .iter_mut()
        .find(|s| s.id == id && !s.collecting)
    else {
        return;
    };
    if let Members::Threads(list) = &mut session.members {
        if !list.iter().any(|(t, _)| *t == thread) {
            list.push((thread, from_tick));
        }
        reg.bump();
    }
}

/// Stops a session from recording; its window stays protected until [`finish_session`].
pub(crate) fn stop_recording(id: u64) {
    let mut reg = registry();
    if let Some(s) = reg.sessions.iter_mut().find(|s| s.id == id) {
        s.collecting = true;
    }
    reg.bump();
}

/// One thread's chunks as a session's capture takes them over.
pub(crate) struct ThreadChunks {
    /// tickscope's id of the thread.
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    /// The tick from which the session wants the thread's records.
    pub(crate) from_tick: u64,
    /// Every chunk that may hold records of the window, oldest first.
    pub(crate) chunks: Vec<SharedChunk>,
}

/// Every thread session `id` records, with the tick from which it wants its records.
fn members(id: u64) -> Vec<(Arc<ThreadEntry>, u64)> {
    let reg = registry();
    let Some(session) = reg.sessions.iter().find(|s| s.id == id) else {
        return Vec::new();
    };
    reg.threads
        .iter()
        .filter_map(|t| Some((t.clone(), session.window_start(t.id)?)))
        .collect()
}

/// Holds the chunks of every thread session `id` records, with what is published so far: no
/// copy, no decoding. Works while the session records (a snapshot) and after
/// `stop_recording`; the chunks stay allocated until the returned holds let go.
pub(crate) fn take_chunks(id: u64) -> Vec<ThreadChunks> {
    members(id)
        .into_iter()
        .map(|(thread, from_tick)| ThreadChunks {
            id: thread.id,
            name: thread.name.clone(),
            from_tick,
            chunks: thread.buffer.share(from_tick),
        })
        .collect()
}

/// One thread's chunks that a streaming session's writer has not written yet.
pub(crate) struct StreamThread {
    /// tickscope's id of the thread.
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    /// The tick from which the session wants the thread's records.
    pub(crate) from_tick: u64,
    /// Its chunks from the writer's cursor on, oldest first.
    pub(crate) chunks: Vec<StreamedChunk>,
}

/// Holds, for every thread streaming session `id` records, its chunks from index
/// `cursor(thread)` on: the complete ones, and the tails too when `tails` is true.
pub(crate) fn stream_share(id: u64, tails: bool, cursor: impl Fn(u64) -> u64) -> Vec<StreamThread> {
    members(id)
        .into_iter()
        .map(|(thread, from_tick)| StreamThread {
            id: thread.id,
            name: thread.name.clone(),
            from_tick,
            chunks: thread
                .buffer
                .share_from(from_tick, cursor(thread.id), tails),
        })
        .collect()
}

/// Streaming session `id` has written every chunk of thread `thread` below index `keep`:
/// gives back those no other session needs, and forgets the thread once it has exited and
/// nothing of it is left.
pub(crate) fn streamed(id: u64, thread: u64, keep: u64) {
    let mut reg = registry();
    let Some(session) = reg.sessions.iter_mut().find(|s| s.id == id) else {
        return;
    };
    if let Some(streamed) = &mut session.streamed {
        match streamed.iter_mut().find(|(t, _)| *t == thread) {
            Some((_, at)) => *at = keep,
            None => streamed.push((thread, keep)),
        }
    }
    let Registry {
        threads, sessions, ..
    } = &mut *reg;
    if let Some(at) = threads.iter().position(|t| t.id == thread) {
        reclaim_thread(sessions, &threads[at]);
        if threads[at].buffer.is_drained() {
            forget_refused(&threads.remove(at));
        }
    }
}

/// Forgets session `id`, gives back every chunk no remaining session needs, and returns the
/// session's members.
pub(crate) fn finish_session(id: u64) -> Option<Members> {
    let mut reg = registry();
    let position = reg.sessions.iter().position(|s| s.id == id);
    let members = position.map(|p| reg.sessions.remove(p).members);
    if members.is_some() {
        reg.bump();
    }
    reclaim(&mut reg);
    members
}

fn reclaim(reg: &mut Registry) {
    let Registry {
        threads, sessions, ..
    } = reg;
    for thread in threads.iter() {
        reclaim_thread(sessions, thread);
    }
    threads.retain(|t| {
        let drained = t.buffer.is_drained();
        if drained {
            forget_refused(t);
        }
        !drained
    });
}

/// Gives back the chunks of `thread` older than every window of `sessions` that wants it (all
/// the chunks its writer no longer fills when none does), and that every streaming session
/// that wants it has written. Called with the registry locked.
fn reclaim_thread(sessions: &[SessionEntry], thread: &ThreadEntry) {
    let mut horizon = None::<u64>;
    let mut keep = None::<u64>;
    for session in sessions {
        let Some(start) = session.window_start(thread.id) else {
            continue;
        };
        match &session.streamed {
            Some(streamed) => {
                let written = streamed
                    .iter()
                    .find(|(t, _)| *t == thread.id)
                    .map_or(0, |&(_, at)| at);
                keep = Some(keep.map_or(written, |k| k.min(written)));
            }
            None => horizon = Some(horizon.map_or(start, |h| h.min(start))),
        }
    }
    thread.buffer.reclaim(horizon, keep, pool::give);
}

/// Counts an observer callback that panicked on thread `thread` for every recording session
/// that records that thread.
pub(crate) fn observer_panicked(thread: u64) {
    if thread == 0 {
        return;
    }
    let mut reg = registry();
    let recording = reg
        .sessions
        .iter_mut()
        .filter(|s| !s.collecting && s.window_start(thread).is_some());
    for session in recording {
        session.observer_panics += 1;
    }
}

/// Observer callbacks that panicked on the threads session `id` records, so far in its window.
pub(crate) fn observer_panics(id: u64) -> u64 {
    registry()
        .sessions
        .iter()
        .find(|s| s.id == id)
        .map_or(0, |s| s.observer_panics)
}

/// Registered threads (live, or exited with events still needed).
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
pub(crate) fn thread_count() -> usize {
    registry().threads.len()
}
