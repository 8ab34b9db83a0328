//! Every thread's buffer, every running session, and the per-thread state of the hot path.
//!
//! The global lock is taken when a thread registers or exits, when a thread first sees a change
//! in the set of recording sessions, and at session start, stop and collection; filling a chunk
//! takes only the thread's own buffer lock. The hot path reads one global atomic
//! ([`GENERATION`]) and its own thread-locals.

use std::cell::{Cell, OnceCell};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::record::buffer::{SharedChunk, ThreadBuffer, Writer};
use crate::record::event::{RawEvent, RawKind};
use crate::record::sync::lock;
use crate::record::{clock, pool};

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

/// Events that could not be recorded because their thread was tearing down.
static DROPPED: AtomicU64 = AtomicU64::new(0);

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    threads: Vec::new(),
    sessions: Vec::new(),
    generation: 0,
    next_thread: 1,
});

/// Async span ids are handed to threads in blocks of [`SPAN_BLOCK`]; this counts blocks.
static SPAN_BLOCKS: AtomicU32 = AtomicU32::new(0);
const SPAN_BLOCK: u32 = 256;

/// A registered thread: identity, name and events.
#[derive(Debug)]
pub(crate) struct ThreadEntry {
    /// Process-unique, never reused, starting at 1.
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    pub(crate) buffer: ThreadBuffer,
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
    /// Records allocations too.
    memory: bool,
    /// Observer callbacks that panicked on the threads it records while it recorded.
    observer_panics: u64,
}

impl SessionEntry {
    /// The tick from which this session wants `thread`'s events, if it wants them at all.
    fn window_start(&self, thread: u64) -> Option<u64> {
        match &self.members {
            Members::All => Some(self.start_tick),
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
        let memory = self.sessions.iter().any(|s| !s.collecting && s.memory);
        let generation = |on: bool| if on { self.generation } else { 0 };
        let active = recording || observers_exist();
        GENERATION.store(generation(active), Ordering::Release);
        MEMORY.store(generation(memory), Ordering::Release);
    }

    /// Whether a recording session wants `thread`'s scopes, and its allocations.
    fn wants(&self, thread: u64) -> (bool, bool) {
        let mut wanted = self
            .sessions
            .iter()
            .filter(|s| !s.collecting && s.window_start(thread).is_some());
        let scopes = wanted.clone().next().is_some();
        (scopes, wanted.any(|s| s.memory))
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

/// While alive, allocations of this thread are not recorded. The profiler holds one wherever
/// it takes a lock that recording an allocation may need (so that an allocation there cannot
/// deadlock or recurse) and while it post-processes (so that its own work is not reported).
#[must_use]
pub(crate) struct Untracked(());

impl Untracked {
    pub(crate) fn enter() -> Self {
        let _ = HOT.try_with(|hot| hot.untracked.set(hot.untracked.get() + 1));
        Self(())
    }
}

impl Drop for Untracked {
    fn drop(&mut self) {
        let _ = HOT.try_with(|hot| hot.untracked.set(hot.untracked.get() - 1));
    }
}

/// The hot path's per-thread state. `const`-initialised and without `Drop`, so reaching it is a
/// plain thread-pointer-relative access with no lazy-init check.
struct HotState {
    /// Equal to [`GENERATION`] while this thread records.
    scopes_at: Cell<u64>,
    /// Equal to [`MEMORY`] while this thread records allocations.
    memory_at: Cell<u64>,
    /// The generation for which `wanted` and `memory` were last computed.
    checked_at: Cell<u64>,
    /// Nesting depth of [`Untracked`] guards; allocations are recorded only at 0.
    untracked: Cell<u32>,
    /// This thread's registry id, once it has been looked up.
    thread_id: Cell<u64>,
    /// The last link sequence number handed out on this thread.
    last_seq: Cell<u32>,
    writer: Writer,
    /// The next async span id of this thread's block; a multiple of [`SPAN_BLOCK`] when the
    /// block is used up.
    next_span: Cell<u32>,
}

/// The per-thread state that needs a destructor: the thread's registry entry.
struct Registration {
    entry: OnceCell<Arc<ThreadEntry>>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = HOT.try_with(|hot| {
            hot.writer.detach();
            hot.scopes_at.set(0);
            hot.memory_at.set(0);
            hot.checked_at.set(u64::MAX);
        });
        if let Some(entry) = self.entry.get() {
            entry.buffer.retire();
            release_exited(entry);
        }
    }
}

/// Gives back the chunks of an exited thread that no session needs and forgets the thread if
/// none are left, without waiting for a session to stop: threads that only observers needed
/// (or that no session records) leave nothing behind. A session that still needs some of its
/// events keeps it until [`finish_session`].
fn release_exited(entry: &Arc<ThreadEntry>) {
    let mut reg = registry();
    reclaim_thread(&reg.sessions, entry);
    if entry.buffer.is_drained() {
        reg.threads.retain(|t| !Arc::ptr_eq(t, entry));
    }
}

thread_local! {
    static HOT: HotState = const {
        HotState {
            scopes_at: Cell::new(0),
            memory_at: Cell::new(0),
            checked_at: Cell::new(0),
            untracked: Cell::new(0),
            thread_id: Cell::new(0),
            last_seq: Cell::new(0),
            writer: Writer::new(),
            next_span: Cell::new(0),
        }
    };
    static REGISTRATION: Registration = const { Registration { entry: OnceCell::new() } };
}

/// True when a running session wants this thread's events. One relaxed load and a branch when
/// no session runs and no observer is registered.
#[inline(always)]
pub(crate) fn thread_wants() -> bool {
    let generation = generation();
    generation != 0 && thread_wants_at(generation)
}

/// The current generation: 0 while no session records and no observer is registered.
#[inline(always)]
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// [`thread_wants`] for a non-zero `generation` just read with [`generation`].
#[inline(always)]
pub(crate) fn thread_wants_at(generation: u64) -> bool {
    // Without the `enabled` feature sessions see no events, whoever calls the guards.
    if !cfg!(feature = "enabled") {
        return false;
    }
    HOT.try_with(|hot| hot.scopes_at.get() == generation || recheck(hot, generation))
        .unwrap_or(false)
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

#[cold]
#[inline(never)]
fn recheck(hot: &HotState, generation: u64) -> bool {
    if hot.checked_at.get() == generation {
        return false;
    }
    if !refresh(hot) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    hot.scopes_at.get() != 0
}

/// Recomputes whether this thread records scopes and allocations; `false` during teardown.
fn refresh(hot: &HotState) -> bool {
    let _untracked = Untracked::enter();
    let Some(entry) = current_entry() else {
        return false;
    };
    hot.thread_id.set(entry.id);
    let reg = registry();
    let now = GENERATION.load(Ordering::Relaxed);
    let (scopes, memory) = if now == 0 {
        (false, false)
    } else {
        reg.wants(entry.id)
    };
    hot.checked_at.set(now);
    hot.scopes_at.set(if scopes { now } else { 0 });
    hot.memory_at.set(if memory { now } else { 0 });
    true
}

/// True while some session records allocations: one relaxed load.
#[inline(always)]
pub(crate) fn memory_on() -> bool {
    MEMORY.load(Ordering::Relaxed) != 0
}

/// Records an allocation or a free (`kind` [`RawKind::Alloc`] or [`RawKind::Free`]) of `size`
/// bytes at `address` into this thread's buffer, if a session records this thread's
/// allocations. Allocates nothing itself: the rare steps that may allocate (registering the
/// thread, linking a fresh chunk) run [`Untracked`], so they are not recorded in turn.
#[inline(never)]
pub(crate) fn record_memory(kind: RawKind, size: usize, address: usize) {
    if_memory_recorded(|hot| {
        push_all_on(
            hot,
            &RawEvent::memory(kind, size as u64, address as u64, clock::now()),
        );
    });
}

/// Records a `realloc` that succeeded, like [`record_memory`]: the free of the `old_size`
/// bytes at `old`, stamped `freed_at` (read before the allocator got the block back), and the
/// allocation of the `new_size` bytes at `new`, stamped now, published together. A failed
/// `realloc` is not recorded at all.
#[inline(never)]
pub(crate) fn record_realloc(
    old_size: usize,
    old: usize,
    freed_at: u64,
    new_size: usize,
    new: usize,
) {
    if_memory_recorded(|hot| {
        let [free, free_at] =
            RawEvent::memory(RawKind::Free, old_size as u64, old as u64, freed_at);
        let [alloc, alloc_at] =
            RawEvent::memory(RawKind::Alloc, new_size as u64, new as u64, clock::now());
        push_all_on(hot, &[free, free_at, alloc, alloc_at]);
    });
}

/// Runs `record` with this thread's state if a session records this thread's allocations and
/// the allocation being recorded is not the profiler's own.
#[inline(always)]
fn if_memory_recorded(record: impl FnOnce(&HotState)) {
    let generation = MEMORY.load(Ordering::Relaxed);
    if generation == 0 {
        return;
    }
    let _ = HOT.try_with(|hot| {
        if hot.untracked.get() != 0 {
            return;
        }
        if hot.memory_at.get() != generation {
            let stale = hot.checked_at.get() != GENERATION.load(Ordering::Relaxed);
            if !stale || !refresh(hot) || hot.memory_at.get() == 0 {
                return;
            }
        }
        record(hot);
    });
}

/// A fresh id for an async span: never 0, unique until 2³² spans later (post-processing
/// matches an end to the latest open span with its id and callsite, so reuse that far apart is
/// harmless). One shared atomic add per 256 ids. 0 during thread teardown.
pub(crate) fn next_span_id() -> u32 {
    HOT.try_with(|hot| {
        let mut next = hot.next_span.get();
        if next % SPAN_BLOCK == 0 {
            next = SPAN_BLOCKS
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(SPAN_BLOCK)
                .max(1);
        }
        hot.next_span.set(next.wrapping_add(1));
        next
    })
    .unwrap_or(0)
}

/// Records a link captured inside the innermost open scope: returns its sequence number
/// (from this thread's counter, never 0) and this thread's id; `None` when this thread is not
/// recorded.
pub(crate) fn capture_link() -> Option<(u32, u64)> {
    if !thread_wants() {
        return None;
    }
    let (seq, thread) = next_seq();
    push(RawEvent::new(RawKind::Link, seq, clock::now()));
    Some((seq, thread))
}

/// tickscope's id of the calling thread, registering it if needed (0 during teardown).
pub(crate) fn thread_id() -> u64 {
    let cached = HOT.try_with(|hot| hot.thread_id.get()).unwrap_or(0);
    if cached != 0 {
        return cached;
    }
    let _untracked = Untracked::enter();
    let id = current_entry().map_or(0, |entry| entry.id);
    let _ = HOT.try_with(|hot| hot.thread_id.set(id));
    id
}

/// The next sequence number of this thread (never 0) and the thread's id, for a thread that
/// records.
pub(crate) fn next_seq() -> (u32, u64) {
    HOT.try_with(|hot| {
        let seq = hot.last_seq.get().wrapping_add(1).max(1);
        hot.last_seq.set(seq);
        (seq, hot.thread_id.get())
    })
    .unwrap_or((0, 0))
}

/// Appends `events` to this thread's buffer, published together.
#[inline]
pub(crate) fn push_all(events: &[RawEvent]) {
    if HOT.try_with(|hot| push_all_on(hot, events)).is_err() {
        DROPPED.fetch_add(events.len() as u64, Ordering::Relaxed);
    }
}

/// [`push_all`] with this thread's state in hand; counts the events as lost if they cannot be
/// recorded.
#[inline(always)]
fn push_all_on(hot: &HotState, events: &[RawEvent]) {
    if !hot.writer.try_push_all(events) && !push_all_slow(hot, events) {
        DROPPED.fetch_add(events.len() as u64, Ordering::Relaxed);
    }
}

/// Appends `event` to this thread's buffer.
#[inline(always)]
pub(crate) fn push(event: RawEvent) {
    let pushed = HOT.try_with(|hot| hot.writer.try_push(event) || push_slow(hot, event));
    if pushed != Ok(true) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Appends the entry of callsite `id`'s scope, stamped now (the tick is taken last, so the
/// caller's work is not billed to the scope); returns the tick it was stamped with.
#[inline(always)]
pub(crate) fn push_begin(id: u32) -> u64 {
    let tick = clock::now();
    let pushed = HOT.try_with(|hot| {
        if hot.writer.try_push(RawEvent::begin(id, tick)) {
            Some(tick)
        } else {
            push_begin_slow(hot, id)
        }
    });
    match pushed {
        Ok(Some(tick)) => tick,
        _ => {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            tick
        }
    }
}

/// The current chunk is full (or there is none yet): link a fresh one and push again. The
/// event keeps its tick: a [`RawKind::Data`] event that follows must repeat it.
#[cold]
#[inline(never)]
fn push_slow(hot: &HotState, event: RawEvent) -> bool {
    next_chunk(hot) && hot.writer.try_push(event)
}

/// [`push_begin`] after its chunk filled up: the entry is stamped again after the switch so
/// that the scope is not billed for it.
#[cold]
#[inline(never)]
fn push_begin_slow(hot: &HotState, id: u32) -> Option<u64> {
    if !next_chunk(hot) {
        return None;
    }
    let tick = clock::now();
    hot.writer
        .try_push(RawEvent::begin(id, tick))
        .then_some(tick)
}

/// [`push_slow`] for records that go in together.
#[cold]
#[inline(never)]
fn push_all_slow(hot: &HotState, events: &[RawEvent]) -> bool {
    next_chunk(hot) && hot.writer.try_push_all(events)
}

/// Links a fresh chunk as this thread's tail; `false` if the thread is not registered or is
/// tearing down.
fn next_chunk(hot: &HotState) -> bool {
    let _untracked = Untracked::enter();
    REGISTRATION
        .try_with(|local| {
            let Some(entry) = local.entry.get() else {
                return false;
            };
            // SAFETY: this thread's writer is the only one that fills its own buffer, and the
            // buffer (held by `REGISTRATION`) is retired only in `Registration::drop`, which
            // detaches the writer first.
            unsafe { hot.writer.switch_to(&entry.buffer, pool::take(), entry.id) };
            true
        })
        .unwrap_or(false)
}

/// This thread's registry entry, registering the thread on first use. `None` during teardown.
pub(crate) fn current_entry() -> Option<Arc<ThreadEntry>> {
    REGISTRATION
        .try_with(|local| local.entry.get_or_init(register).clone())
        .ok()
}

#[cold]
fn register() -> Arc<ThreadEntry> {
    let name = std::thread::current().name().map(str::to_owned);
    let mut reg = registry();
    let entry = Arc::new(ThreadEntry {
        id: reg.next_thread,
        name,
        buffer: ThreadBuffer::new(),
    });
    reg.next_thread += 1;
    reg.threads.push(entry.clone());
    entry
}

/// Events lost so far to thread teardown (monotonic).
pub(crate) fn dropped_events() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Registers a running session.
pub(crate) fn add_session(id: u64, start_tick: u64, members: Members, memory: bool) {
    let mut reg = registry();
    reg.sessions.retain(|s| s.id != id);
    reg.sessions.push(SessionEntry {
        id,
        start_tick,
        members,
        collecting: false,
        memory,
        observer_panics: 0,
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

/// Holds the chunks of every thread session `id` records, with what is published so far: no
/// copy, no decoding. Works while the session records (a snapshot) and after
/// `stop_recording`; the chunks stay allocated until the returned holds let go.
pub(crate) fn take_chunks(id: u64) -> Vec<ThreadChunks> {
    let threads: Vec<(Arc<ThreadEntry>, u64)> = {
        let reg = registry();
        let Some(session) = reg.sessions.iter().find(|s| s.id == id) else {
            return Vec::new();
        };
        reg.threads
            .iter()
            .filter_map(|t| Some((t.clone(), session.window_start(t.id)?)))
            .collect()
    };
    threads
        .into_iter()
        .map(|(thread, from_tick)| ThreadChunks {
            id: thread.id,
            name: thread.name.clone(),
            from_tick,
            chunks: thread.buffer.share(from_tick),
        })
        .collect()
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
    threads.retain(|t| !t.buffer.is_drained());
}

/// Gives back the chunks of `thread` older than every window of `sessions` that wants it (all
/// the chunks its writer no longer fills when none does). Called with the registry locked.
fn reclaim_thread(sessions: &[SessionEntry], thread: &ThreadEntry) {
    let horizon = sessions
        .iter()
        .filter_map(|s| s.window_start(thread.id))
        .min();
    thread.buffer.reclaim(horizon, pool::give);
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
pub(crate) fn thread_count() -> usize {
    registry().threads.len()
}
