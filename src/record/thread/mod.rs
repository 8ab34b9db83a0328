//! The per-thread state of the hot path: whether this thread records, its writer into its own
//! chunk, and the pushes that stamp records.
//!
//! A scope reads one global atomic ([`registry::generation`]) and this thread's locals; the
//! registry's lock is taken only when the set of recording sessions changed since this thread
//! last looked, and when a chunk fills up.

use std::cell::{Cell, OnceCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::record::buffer::Writer;
use crate::record::dry::DrySpell;
use crate::record::event::{RawEvent, RawKind};
use crate::record::memory::MemoryMode;
use crate::record::registry::{self, ThreadEntry, Untracked};
use crate::record::{clock, flight, pool, untracked};

mod counted;

use counted::Counted;

/// Async span ids are handed to threads in blocks of [`SPAN_BLOCK`]; this counts blocks.
static SPAN_BLOCKS: AtomicU32 = AtomicU32::new(0);

const SPAN_BLOCK: u32 = 256;

/// The hot path's per-thread state. `const`-initialised and without `Drop`, so reaching it is a
/// plain thread-pointer-relative access with no lazy-init check.
struct HotState {
    /// Equal to the [generation](registry::generation) while this thread records scopes.
    scopes_at: Cell<u64>,
    /// Equal to the [memory generation](registry::memory_generation) while this thread
    /// records allocations.
    memory_at: Cell<u64>,
    /// While `memory_at` is set: allocations are only counted ([`MemoryMode::Counts`]), into
    /// `counted`, no tick and no record each.
    memory_counts: Cell<bool>,
    /// Allocations and frees counted since this thread's last record (see [`Counted`]).
    counted: Counted,
    /// The generation for which `scopes_at` and `memory_at` were last computed.
    checked_at: Cell<u64>,
    /// This thread's registry id, once it has been looked up.
    thread_id: Cell<u64>,
    /// The last link sequence number handed out on this thread.
    last_seq: Cell<u32>,
    writer: Writer,
    /// The next async span id of this thread's block; a multiple of [`SPAN_BLOCK`] when the
    /// block is used up.
    next_span: Cell<u32>,
    /// A streaming session's pool refused this thread a chunk ([`pool::SlowWriter::Drop`]):
    /// its events are refused on this thread's own state until chunks come back.
    dry: DrySpell,
}

/// The per-thread state that needs a destructor: the thread's registry entry.
struct Registration {
    entry: OnceCell<Arc<ThreadEntry>>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = HOT.try_with(|hot| {
            hot.writer.detach();
            hot.counted.take();
            hot.scopes_at.set(0);
            hot.memory_at.set(0);
            hot.checked_at.set(u64::MAX);
        });
        untracked::set_counting(0);
        if let Some(entry) = self.entry.get() {
            entry.buffer.retire();
            registry::release_exited(entry);
        }
    }
}

thread_local! {
    static HOT: HotState = const {
        HotState {
            scopes_at: Cell::new(0),
            memory_at: Cell::new(0),
            memory_counts: Cell::new(false),
            counted: Counted::new(),
            checked_at: Cell::new(0),
            thread_id: Cell::new(0),
            last_seq: Cell::new(0),
            writer: Writer::new(),
            next_span: Cell::new(0),
            dry: DrySpell::new(),
        }
    };
    static REGISTRATION: Registration = const { Registration { entry: OnceCell::new() } };
}

/// True when a running session wants this thread's events. One relaxed load and a branch when
/// no session runs and no observer is registered.
#[inline(always)]
pub(crate) fn thread_wants() -> bool {
    let generation = registry::generation();
    generation != 0 && thread_wants_at(generation)
}

/// [`thread_wants`] for a non-zero `generation` just read with [`registry::generation`].
#[inline(always)]
pub(crate) fn thread_wants_at(generation: u64) -> bool {
    // Without the `enabled` feature sessions see no events, whoever calls the guards.
    if !cfg!(feature = "enabled") {
        return false;
    }
    HOT.try_with(|hot| hot.scopes_at.get() == generation || recheck(hot, generation))
        .unwrap_or(false)
}

#[cold]
#[inline(never)]
fn recheck(hot: &HotState, generation: u64) -> bool {
    if hot.checked_at.get() == generation {
        return false;
    }
    if !refresh(hot) {
        registry::count_dropped(1);
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
    let (now, scopes, memory) = registry::wants(entry.id);
    hot.checked_at.set(now);
    hot.scopes_at.set(if scopes { now } else { 0 });
    hot.memory_at.set(if memory.is_on() { now } else { 0 });
    hot.memory_counts.set(memory == MemoryMode::Counts);
    // Armed once the `Untracked` above ends.
    untracked::set_counting(if memory == MemoryMode::Counts { now } else { 0 });
    true
}

/// Records an allocation or a free (`kind` [`RawKind::Alloc`] or [`RawKind::Free`]) of `size`
/// bytes at `address`, for a non-zero memory `generation` just read with
/// [`registry::memory_generation`]. The counting fast path inline: one thread-local compare
/// and three or four adds; everything else (a timeline, a thread that must look again whether
/// it is recorded, an allocation of the profiler's own) out of line in [`record_memory`].
#[inline(always)]
pub(crate) fn memory_event(generation: u64, kind: RawKind, size: usize, address: usize) {
    if untracked::armed() != generation {
        record_memory(kind, size, address);
        return;
    }
    // (`HOT` has no destructor: it is never refused.)
    let _ = HOT.try_with(|hot| {
        hot.counted.add(kind == RawKind::Alloc, size as u64);
        if !hot.counted.any.get() {
            first_counted(hot);
        }
    });
}

/// The first allocation or free counted since the thread's last record: park the writer so
/// that its next record puts the counts in first (see [`Counted`]).
#[cold]
#[inline(never)]
fn first_counted(hot: &HotState) {
    hot.counted.any.set(true);
    hot.writer.park();
}

/// Records an allocation or a free (`kind` [`RawKind::Alloc`] or [`RawKind::Free`]) of `size`
/// bytes at `address` into this thread's buffer, if a session records this thread's
/// allocations: the slow path of [`memory_event`]. Allocates nothing itself: the rare steps
/// that may allocate (registering the thread, linking a fresh chunk) run [`Untracked`], so
/// they are not recorded in turn.
#[cold]
#[inline(never)]
fn record_memory(kind: RawKind, size: usize, address: usize) {
    if_memory_recorded(|hot| {
        if hot.memory_counts.get() {
            count_on(hot, kind == RawKind::Alloc, size as u64);
        } else {
            push_all_on(
                hot,
                &RawEvent::memory(kind, size as u64, address as u64, clock::now()),
            );
        }
    });
}

/// Counts an allocation (or a free) of `size` bytes on this thread, parking its writer for the
/// first since its last record.
fn count_on(hot: &HotState, alloc: bool, size: u64) {
    hot.counted.add(alloc, size);
    if !hot.counted.any.get() {
        first_counted(hot);
    }
}

/// Puts what the thread counted into its buffer, before the record about to be pushed (see
/// [`Counted`]); unparks the writer.
#[cold]
fn flush_counted(hot: &HotState) {
    hot.writer.unpark();
    if let Some(records) = hot.counted.take()
        && !hot.writer.try_push_all(&records)
        && !push_all_next(hot, &records)
    {
        registry::count_dropped(records.len() as u64);
    }
}

/// Puts what this thread counted into its buffer now (a session stops or takes a snapshot on
/// it): other threads' counts go in at their next record.
pub(crate) fn flush_counted_here() {
    let _ = HOT.try_with(|hot| {
        if hot.counted.any.get() {
            flush_counted(hot);
        }
    });
}

/// True when this thread counts its allocations for the non-zero memory `generation` (its fast
/// path is armed): a `realloc` then needs no tick for its free.
#[inline(always)]
pub(crate) fn counting(generation: u64) -> bool {
    untracked::armed() == generation
}

/// Records a `realloc` that succeeded, for a non-zero memory `generation` just read with
/// [`registry::memory_generation`]: the free of the `old_size` bytes at `old`, stamped
/// `freed_at` (read before the allocator got the block back; 0 when the thread was
/// [`counting`] then), and the allocation of the `new_size` bytes at `new`, stamped now,
/// published together. A failed `realloc` is not recorded at all. Counting, inline like
/// [`memory_event`].
#[inline(always)]
pub(crate) fn realloc_event(
    generation: u64,
    old_size: usize,
    old: usize,
    freed_at: u64,
    new_size: usize,
    new: usize,
) {
    if untracked::armed() != generation {
        record_realloc(old_size, old, freed_at, new_size, new);
        return;
    }
    let _ = HOT.try_with(|hot| {
        hot.counted.add(false, old_size as u64);
        hot.counted.add(true, new_size as u64);
        if !hot.counted.any.get() {
            first_counted(hot);
        }
    });
}

/// [`realloc_event`]'s slow path.
#[cold]
#[inline(never)]
fn record_realloc(old_size: usize, old: usize, freed_at: u64, new_size: usize, new: usize) {
    if_memory_recorded(|hot| {
        if hot.memory_counts.get() {
            count_on(hot, false, old_size as u64);
            count_on(hot, true, new_size as u64);
            return;
        }
        // (0 when the thread counted allocations as the realloc began: stamp it now.)
        let freed_at = if freed_at == 0 {
            clock::now()
        } else {
            freed_at
        };
        let [free, free_at] =
            RawEvent::memory(RawKind::Free, old_size as u64, old as u64, freed_at);
        let [alloc, alloc_at] =
            RawEvent::memory(RawKind::Alloc, new_size as u64, new as u64, clock::now());
        push_all_on(hot, &[free, free_at, alloc, alloc_at]);
    });
}

/// Runs `record` with this thread's state if a session records this thread's allocations and
/// the allocation being recorded is not the profiler's own; looks again whether the thread is
/// recorded when the set of sessions changed since it last did.
#[inline(always)]
fn if_memory_recorded(record: impl FnOnce(&HotState)) {
    let generation = registry::memory_generation();
    if generation == 0 || Untracked::active() {
        return;
    }
    let _ = HOT.try_with(|hot| {
        if hot.memory_at.get() != generation {
            let stale = hot.checked_at.get() != registry::generation();
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
        registry::count_dropped(events.len() as u64);
    }
}

/// [`push_all`] with this thread's state in hand; counts the events as dropped if they cannot be
/// recorded.
#[inline(always)]
fn push_all_on(hot: &HotState, events: &[RawEvent]) {
    if !hot.writer.try_push_all(events) && !push_all_slow(hot, events) {
        registry::count_dropped(events.len() as u64);
    }
}

/// [`push_all`] of two records (a record and its payload), inlined whole.
#[cfg(feature = "tracing")]
#[inline(always)]
pub(crate) fn push_pair(events: [RawEvent; 2]) {
    if HOT.try_with(|hot| push_all_on(hot, &events)).is_err() {
        registry::count_dropped(2);
    }
}

/// Appends `event` to this thread's buffer.
#[inline(always)]
pub(crate) fn push(event: RawEvent) {
    let pushed = HOT.try_with(|hot| hot.writer.try_push(event) || push_slow(hot, event));
    if pushed != Ok(true) {
        registry::count_dropped(1);
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
            push_begin_slow(hot, id, tick)
        }
    });
    match pushed {
        Ok(Some(tick)) => tick,
        _ => {
            registry::count_dropped(1);
            tick
        }
    }
}

/// The current chunk is full (or there is none yet): link a fresh one and push again. The
/// event keeps its tick (an exit is stamped before the switch, so its scope pays for it; an
/// entry is stamped again, see [`push_begin_slow`]). `false` when the event is lost and not
/// counted yet (the caller counts it dropped); an event refused by a streaming session's pool
/// is counted as refused, and `true`.
#[cold]
#[inline(never)]
fn push_slow(hot: &HotState, event: RawEvent) -> bool {
    if refused_while_dry(hot, 1) {
        return true;
    }
    flush_counted(hot);
    hot.writer.try_push(event) || push_all_next(hot, &[event])
}

/// [`push_begin`] after its chunk filled up: the entry is stamped again after the switch so
/// that the scope is not billed for it. `None` when the entry is lost and not counted yet;
/// `tick` (the entry's first stamp) when it was refused, and counted so, by a streaming
/// session's pool.
#[cold]
#[inline(never)]
fn push_begin_slow(hot: &HotState, id: u32, tick: u64) -> Option<u64> {
    if refused_while_dry(hot, 1) {
        return Some(tick);
    }
    flush_counted(hot);
    let tick = clock::now();
    if hot.writer.try_push(RawEvent::begin(id, tick)) {
        return Some(tick);
    }
    match next_chunk(hot, 1) {
        NextChunk::Linked => {
            let tick = clock::now();
            hot.writer
                .try_push(RawEvent::begin(id, tick))
                .then_some(tick)
        }
        NextChunk::Refused => Some(tick),
        NextChunk::Lost => None,
    }
}

/// [`push_slow`] for records that go in together.
#[cold]
#[inline(never)]
fn push_all_slow(hot: &HotState, events: &[RawEvent]) -> bool {
    if refused_while_dry(hot, events.len() as u64) {
        return true;
    }
    flush_counted(hot);
    hot.writer.try_push_all(events) || push_all_next(hot, events)
}

/// Links a fresh chunk and pushes `events` into it: `true` when they are recorded, or
/// refused by a streaming session's pool (and counted so).
fn push_all_next(hot: &HotState, events: &[RawEvent]) -> bool {
    match next_chunk(hot, events.len() as u64) {
        NextChunk::Linked => hot.writer.try_push_all(events),
        NextChunk::Refused => true,
        NextChunk::Lost => false,
    }
}

/// While this thread is in a dry spell (a streaming session's pool refused it a chunk, and
/// none came back since; see [`dry`](crate::record::dry)): counts `events` as refused on the
/// thread's own entry and returns `true`, touching nothing shared but one load. Counted
/// records waiting to go in first take the ordinary path.
#[inline(always)]
fn refused_while_dry(hot: &HotState, events: u64) -> bool {
    !hot.counted.any.get() && hot.dry.holds(pool::returns()) && count_refused(events)
}

/// Counts `events` refused by a streaming session's pool on this thread's entry; `false` when
/// the thread has none (it is tearing down).
fn count_refused(events: u64) -> bool {
    REGISTRATION
        .try_with(|local| {
            local
                .entry
                .get()
                .map(|entry| entry.count_refused(events))
                .is_some()
        })
        .unwrap_or(false)
}

/// What [`next_chunk`] did.
enum NextChunk {
    /// A fresh chunk is the thread's tail.
    Linked,
    /// A streaming session's pool had no chunk ([`pool::SlowWriter::Drop`]): the events are
    /// counted as refused, and the thread is in a dry spell.
    Refused,
    /// The thread is not registered or is tearing down: the events are not counted yet.
    Lost,
}

/// Links a fresh chunk as this thread's tail, unless a streaming session's pool has no chunk
/// for the `events` about to be pushed (they are counted as refused by this thread, which
/// starts a dry spell) or the thread is not registered or is tearing down.
fn next_chunk(hot: &HotState, events: u64) -> NextChunk {
    let _untracked = Untracked::enter();
    REGISTRATION
        .try_with(|local| {
            let Some(entry) = local.entry.get() else {
                return NextChunk::Lost;
            };
            if hot.dry.holds(pool::returns()) {
                entry.count_refused(events);
                return NextChunk::Refused;
            }
            // Read before looking: chunks announced from here on end the spell.
            let seen = pool::returns().seen();
            let recycled = if flight::on() { flight::take() } else { None };
            let Some(fresh) = recycled.or_else(pool::take_for_thread) else {
                hot.dry.begin(seen);
                entry.count_refused(events);
                return NextChunk::Refused;
            };
            hot.dry.end();
            // Only this thread's writer attaches to its buffer, so none other is attached.
            let linked = match hot.writer.switch_to(&entry.buffer, fresh, entry.id) {
                Ok(linked) => linked,
                Err(fresh) => {
                    pool::give(fresh);
                    return NextChunk::Lost;
                }
            };
            if flight::on() {
                flight::linked(entry, linked);
            }
            NextChunk::Linked
        })
        .unwrap_or(NextChunk::Lost)
}

/// This thread's registry entry, registering the thread on first use. `None` during teardown.
pub(crate) fn current_entry() -> Option<Arc<ThreadEntry>> {
    REGISTRATION
        .try_with(|local| local.entry.get_or_init(register).clone())
        .ok()
}

#[cold]
fn register() -> Arc<ThreadEntry> {
    registry::register_thread(std::thread::current().name().map(str::to_owned))
}
