//! Per-thread append-only chunked event buffers.
//!
//! One thread (the writer) appends [`RawEvent`]s to the tail chunk of its own [`ThreadBuffer`]
//! through a [`Writer`], as the words of [`word`](crate::record::word) (one for an entry or an
//! exit, two for another record); collectors read chunks concurrently. The protocol:
//!
//! - The writer stores an event's words into slots `n..` of its tail chunk, then publishes
//!   them with a `Release` store of the chunk's content length (which counts them). It never
//!   rewrites a published slot.
//! - A reader loads the length with `Acquire` and reads only the slots it covers.
//! - The chunk list (oldest to tail, linked through `Chunk::next`) changes only under the
//!   buffer's mutex: the writer takes it once per chunk, never per event.
//! - A chunk is shared by counting its holders: the list while the chunk is linked, and every
//!   [`SharedChunk`] (a capture's view of it). Only chunks that the writer no longer writes (not
//!   the tail, a full tail, or any chunk once the writer has retired and detached) are
//!   unlinked, under the mutex. (The writer of a full tail never touches it again: its cursor is
//!   at the end, and its next push links a new chunk, under the mutex, after a tail that may
//!   have gone.) The last holder to let go gets the chunk back as a [`ChunkBox`], to recycle or
//!   free.
//! - A writer attaches to one buffer at a time, and a buffer takes one writer at a time: the
//!   writer holds the buffer (an `Arc`) from [`Writer::switch_to`] to [`Writer::detach`], and
//!   the list records that it is attached, so that no other writer links into it meanwhile and
//!   its tail stays linked even if the buffer is retired early.
//!
//! This module is model-checked by loom (`tests/loom.rs`, `--cfg loom`).

use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64 as BufferIds;

pub use crate::record::chunk::{CHUNK_WORDS, ChunkBox, SharedChunk};
use crate::record::chunk::{Chunk, ChunkPtr, release};
use crate::record::event::RawEvent;
use crate::record::sync::{Arc, Mutex, MutexGuard, lock};
use crate::record::word;

#[derive(Default)]
struct ChunkList {
    head: Option<ChunkPtr>,
    tail: Option<ChunkPtr>,
    chunks: usize,
    /// The index of `head` among every chunk ever linked into this buffer (0 for the first):
    /// the count of chunks unlinked so far. A streaming session names chunks by index.
    first_index: u64,
    /// The writer has gone (its thread exited): once it is detached too, the tail may be
    /// unlinked.
    retired: bool,
    /// A [`Writer`] is attached: it fills the tail, and no other writer may link a chunk.
    attached: bool,
}

impl ChunkList {
    /// Whether `ptr`, with `len` words published, is the tail its writer may still fill: not
    /// full, and its writer attached or not retired yet.
    fn filling(&self, ptr: ChunkPtr, len: usize) -> bool {
        self.tail == Some(ptr) && len < CHUNK_WORDS && (self.attached || !self.retired)
    }
}

/// [`ThreadBuffer::evict_through`] was asked for the tail its writer still fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// A chunk that [`Writer::switch_to`] linked into a buffer, and its index there: a reader that
/// keeps it finds the chunk again without walking the list ([`ThreadBuffer::hold_complete`]).
/// It holds nothing: the buffer says whether the chunk is still linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkedChunk {
    ptr: ChunkPtr,
    index: u64,
    /// The id of the buffer it was linked into (see [`ThreadBuffer::hold_complete`]).
    buffer: u64,
}

// SAFETY: the pointer is followed only by `ThreadBuffer::hold_complete`, under its buffer's
// mutex, once the buffer's id and indexes show the chunk still linked there.
unsafe impl Send for LinkedChunk {}
// SAFETY: as for `Send`; a `LinkedChunk` is a copyable name, with nothing to mutate.
unsafe impl Sync for LinkedChunk {}

impl LinkedChunk {
    /// Its index among the chunks ever linked into its buffer.
    pub fn index(&self) -> u64 {
        self.index
    }
}

/// A chunk held for a streaming session's writer (see [`ThreadBuffer::share_from`]).
#[derive(Debug)]
pub struct StreamedChunk {
    /// Its index among the chunks ever linked into its buffer.
    pub index: u64,
    /// The writer no longer fills it: once written, the stream is done with it.
    pub complete: bool,
    /// The hold, with the records published when it was taken.
    pub chunk: SharedChunk,
}

/// The chunks of one thread's events, oldest first.
pub struct ThreadBuffer {
    list: Mutex<ChunkList>,
    /// Process-unique: the [`LinkedChunk`]s of this buffer carry it.
    id: u64,
}

/// The id of the next [`ThreadBuffer`].
static NEXT_BUFFER: BufferIds = BufferIds::new(0);

// SAFETY: the list's pointers are only followed under the mutex, and every chunk they point to
// is held by the list (see the module docs).
unsafe impl Send for ThreadBuffer {}
// SAFETY: as for `Send`.
unsafe impl Sync for ThreadBuffer {}

impl Default for ThreadBuffer {
    fn default() -> Self {
        Self::new()
    }
}

impl ThreadBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self {
            list: Mutex::new(ChunkList::default()),
            id: NEXT_BUFFER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ChunkList> {
        // Every update of the list is a few field stores with no call that can panic between
        // them, so a poisoned lock still guards a consistent list.
        lock(&self.list)
    }

    /// Links `fresh` as the new tail, held by the list, for the writer that is attached when
    /// `attached` (and attaches otherwise); returns the pointer the writer fills and the
    /// chunk's index among every chunk ever linked into this buffer, or `fresh` back when
    /// another writer is attached.
    fn link(&self, fresh: ChunkBox, thread: u64, attached: bool) -> Result<LinkedChunk, ChunkBox> {
        let mut list = self.lock();
        debug_assert!(
            list.attached || !attached,
            "a writer attached to a buffer that knows none"
        );
        if list.attached && !attached {
            return Err(fresh);
        }
        list.attached = true;
        let fresh = fresh.into_held(thread);
        match list.tail {
            // SAFETY: the list holds its tail; `next` is only accessed under the mutex.
            Some(tail) => unsafe { tail.get() }
                .next
                .with_mut(|n| unsafe { *n = Some(fresh) }),
            None => list.head = Some(fresh),
        }
        list.tail = Some(fresh);
        list.chunks += 1;
        Ok(LinkedChunk {
            ptr: fresh,
            index: list.first_index + list.chunks as u64 - 1,
            buffer: self.id,
        })
    }

    /// Marks the writer as gone; from now on every chunk can be unlinked (the tail once the
    /// writer is detached, if it still is attached).
    pub fn retire(&self) {
        self.lock().retired = true;
    }

    /// Holds every linked chunk that may have events at or after tick `from`, oldest first,
    /// with the records published so far.
    pub fn share(&self, from: u64) -> Vec<SharedChunk> {
        let list = self.lock();
        let mut shared = Vec::with_capacity(list.chunks);
        let mut cursor = list.head;
        while let Some(ptr) = cursor {
            // SAFETY: the list holds every linked chunk; we hold the mutex.
            let chunk = unsafe { ptr.get() };
            let len = chunk.published();
            let newer = chunk.last_tick().is_some_and(|t| t >= from);
            if len > 0 && newer {
                // SAFETY: the list holds the chunk, and `len` records are published.
                shared.push(unsafe { SharedChunk::new(ptr, len) });
            }
            // SAFETY: `next` is only accessed under the mutex, which we hold.
            cursor = chunk.next.with(|n| unsafe { *n });
        }
        shared
    }

    /// Holds the linked chunks from index `from_index` on (see [`ThreadBuffer::share`] for
    /// `from`), with their indexes and whether they are complete (the writer no longer fills
    /// them): every complete chunk, and the tail too when `tail` is true. A streaming session
    /// takes what it has not written yet this way.
    pub fn share_from(&self, from: u64, from_index: u64, tail: bool) -> Vec<StreamedChunk> {
        let list = self.lock();
        let mut shared = Vec::new();
        let mut cursor = list.head;
        let mut index = list.first_index;
        while let Some(ptr) = cursor {
            // SAFETY: the list holds every linked chunk; we hold the mutex.
            let chunk = unsafe { ptr.get() };
            let len = chunk.published();
            let filling = list.filling(ptr, len);
            if filling && !tail {
                break;
            }
            // (The index first: finding the last tick decodes the chunk.)
            if index >= from_index && len > 0 && chunk.last_tick().is_some_and(|t| t >= from) {
                shared.push(StreamedChunk {
                    index,
                    complete: !filling,
                    // SAFETY: the list holds the chunk, and `len` records are published.
                    chunk: unsafe { SharedChunk::new(ptr, len) },
                });
            }
            // SAFETY: `next` is only accessed under the mutex, which we hold.
            cursor = chunk.next.with(|n| unsafe { *n });
            index += 1;
        }
        shared
    }

    /// The index the next linked chunk gets, and whether the writer has retired: a streaming
    /// session that has written every chunk below this index of a retired buffer is done with
    /// it.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn next_index(&self) -> (u64, bool) {
        let list = self.lock();
        (list.first_index + list.chunks as u64, list.retired)
    }

    /// Holds `chunk` with all its records while it is still linked and complete (its writer
    /// has linked a newer chunk, filled it, or retired); `None` when it was unlinked, is the
    /// tail its writer still fills, or was linked into another buffer. (A flight recorder's
    /// scanner reads chunks this way, off the writer's path and without the buffer's mutex: a
    /// chunk recycled meanwhile goes to whoever lets go of it last.)
    pub fn hold_complete(&self, chunk: LinkedChunk) -> Option<SharedChunk> {
        if chunk.buffer != self.id {
            return None;
        }
        let list = self.lock();
        if list.chunks == 0 {
            return None;
        }
        let tail = list.first_index + list.chunks as u64 - 1;
        if chunk.index < list.first_index || chunk.index > tail {
            return None;
        }
        // SAFETY: only `link` makes a `LinkedChunk`, and this buffer's id (unique to it) says
        // that it linked `chunk` into this buffer as `chunk.index`; chunks are unlinked only
        // from the head, each advancing `first_index`, so the list still holds it; we hold the
        // mutex.
        let len = unsafe { chunk.ptr.get() }.published();
        if list.filling(chunk.ptr, len) {
            return None;
        }
        // SAFETY: the list holds the chunk, and `len` records are published (just loaded with
        // `Acquire`).
        Some(unsafe { SharedChunk::new(chunk.ptr, len) })
    }

    /// Unlinks the oldest chunks up to the one of index `index` (a flight recorder recycling its
    /// oldest chunk), unless that one is the tail the writer still fills: `seen` reads each
    /// unlinked chunk's records first. Returns the chunk of index `index` when no capture holds
    /// it (the older ones, linked before the recorder counted them, go to `spare`), `Ok(None)`
    /// when a capture holds it or it was already gone, and `Err(Busy)` when it is the
    /// writer's tail (then nothing is unlinked).
    pub fn evict_through(
        &self,
        index: u64,
        mut seen: impl FnMut(&[RawEvent]),
        mut spare: impl FnMut(ChunkBox),
    ) -> Result<Option<ChunkBox>, Busy> {
        let mut list = self.lock();
        let mut last = None;
        while list.first_index <= index {
            let Some(head) = list.head else {
                break;
            };
            // SAFETY: the list holds its chunks; we hold the mutex.
            let chunk = unsafe { head.get() };
            let len = chunk.published();
            if list.filling(head, len) {
                // Only the newest chunk can be the tail: `index` is it.
                return Err(Busy);
            }
            // SAFETY: `len` was just loaded with `Acquire`, and the list holds the chunk while
            // it is decoded.
            seen(&unsafe { chunk.records(len) });
            // SAFETY: `next` is only accessed under the mutex, which we hold.
            list.head = chunk.next.with(|n| unsafe { *n });
            if list.head.is_none() {
                list.tail = None;
            }
            list.chunks -= 1;
            let at = list.first_index;
            list.first_index += 1;
            // SAFETY: the list held `head` and has just unlinked it.
            let free = unsafe { release(head) };
            if at == index {
                last = free;
            } else if let Some(free) = free {
                spare(free);
            }
        }
        Ok(last)
    }

    /// Unlinks the oldest chunks whose events all have ticks below `horizon` (every chunk the
    /// writer no longer writes when `horizon` is `None`), and only those of an index below
    /// `keep` when it is given (a streaming session has written them), and hands those no
    /// capture holds to `sink`; the others go back when their last capture lets go.
    pub fn reclaim(&self, horizon: Option<u64>, keep: Option<u64>, mut sink: impl FnMut(ChunkBox)) {
        let mut list = self.lock();
        while let Some(head) = list.head {
            // SAFETY: the list holds its chunks; we hold the mutex.
            let len = unsafe { head.get() }.published();
            if list.filling(head, len) {
                break;
            }
            if keep.is_some_and(|keep| list.first_index >= keep) {
                break;
            }
            // SAFETY: the list holds its chunks; we hold the mutex.
            let chunk = unsafe { head.get() };
            if let (Some(h), Some(last)) = (horizon, chunk.last_tick())
                && last >= h
            {
                break;
            }
            // SAFETY: `next` is only accessed under the mutex, which we hold.
            list.head = chunk.next.with(|n| unsafe { *n });
            if list.head.is_none() {
                list.tail = None;
            }
            list.chunks -= 1;
            list.first_index += 1;
            // SAFETY: the list held `head` and has just unlinked it.
            if let Some(free) = unsafe { release(head) } {
                sink(free);
            }
        }
    }

    /// Number of linked chunks.
    pub fn chunks(&self) -> usize {
        self.lock().chunks
    }

    /// True when the writer has retired and every chunk has been unlinked.
    pub fn is_drained(&self) -> bool {
        let list = self.lock();
        list.retired && list.head.is_none()
    }
}

impl std::fmt::Debug for ThreadBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadBuffer")
            .field("chunks", &self.chunks())
            .finish()
    }
}

impl Drop for ThreadBuffer {
    fn drop(&mut self) {
        let list = self.lock();
        let mut cursor = list.head;
        while let Some(ptr) = cursor {
            // SAFETY: the list holds its chunks; `next` is only accessed under the mutex.
            cursor = unsafe { ptr.get() }.next.with(|n| unsafe { *n });
            // SAFETY: no writer fills the buffer any more (an attached writer holds it, so it
            // is dropped only once its writer detached), and the list lets go of each of its
            // holds once. A chunk a capture still holds is freed by the capture.
            drop(unsafe { release(ptr) });
        }
    }
}

/// The writer's cursor into the tail chunk of its buffer; lives in a thread-local.
///
/// `pos == CHUNK_WORDS` doubles as "no chunk": the first push then takes the slow path (one
/// compare per push, which the hot path needs anyway).
///
/// From [`switch_to`](Writer::switch_to) to [`detach`](Writer::detach) the writer is
/// attached to its buffer: it holds it (a strong count of the buffer's `Arc`), and the buffer
/// takes no other writer. A writer dropped while attached (it has no `Drop`, so that a
/// thread-local one costs no destructor check) keeps its buffer alive and attached: detach it.
pub struct Writer {
    chunk: Cell<*const Chunk>,
    pos: Cell<usize>,
    /// The chunk's base tick after the words written so far (see [`word`]).
    base: Cell<u64>,
    /// The real `pos` while [`park`](Writer::park)ed (`pos` then reads full, so the next push
    /// takes the slow path); [`NOT_PARKED`] otherwise.
    parked: Cell<usize>,
    /// The buffer this writer is attached to: an `Arc` given up to a raw pointer by
    /// `switch_to`, taken back by `detach`.
    buffer: Cell<Option<NonNull<ThreadBuffer>>>,
}

/// [`Writer::parked`] when the writer is not parked.
const NOT_PARKED: usize = usize::MAX;

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl Writer {
    /// A writer with no chunk yet.
    pub const fn new() -> Self {
        Self {
            chunk: Cell::new(std::ptr::null()),
            pos: Cell::new(CHUNK_WORDS),
            base: Cell::new(0),
            parked: Cell::new(NOT_PARKED),
            buffer: Cell::new(None),
        }
    }

    /// Makes the next push take the slow path without losing the chunk's room: the caller
    /// has records to put before whatever comes next (counted allocations), and puts them
    /// there after [`unpark`](Writer::unpark). Nothing to do when the chunk is full or absent
    /// (the next push takes the slow path anyway) or when already parked.
    #[inline(always)]
    pub fn park(&self) {
        let pos = self.pos.get();
        if pos < CHUNK_WORDS {
            self.parked.set(pos);
            self.pos.set(CHUNK_WORDS);
        }
    }

    /// Undoes [`park`](Writer::park): pushes go to the current chunk's room again.
    pub fn unpark(&self) {
        let parked = self.parked.replace(NOT_PARKED);
        if parked != NOT_PARKED {
            self.pos.set(parked);
        }
    }

    /// Appends `event`, or returns `false` when the current chunk lacks room for it or is
    /// absent.
    #[inline(always)]
    pub fn try_push(&self, event: RawEvent) -> bool {
        let pos = self.pos.get();
        match word::narrow(event, self.base.get()) {
            Some(w) if pos < CHUNK_WORDS => {
                // SAFETY: as in `try_push_all`, with one word at `pos < CHUNK_WORDS`.
                unsafe { (*self.chunk.get()).write(pos, w) };
                self.pos.set(pos + 1);
                true
            }
            Some(_) => false,
            None => self.try_push_wide(event),
        }
    }

    /// [`try_push`](Writer::try_push) of an event that takes two words.
    #[inline]
    fn try_push_wide(&self, event: RawEvent) -> bool {
        self.try_push_all(std::slice::from_ref(&event))
    }

    /// Appends all of `events`, published at once, or returns `false` (writing nothing) when
    /// the current chunk lacks room for them or is absent.
    #[inline(always)]
    pub fn try_push_all(&self, events: &[RawEvent]) -> bool {
        let pos = self.pos.get();
        let mut need = 0;
        let mut base = self.base.get();
        for &event in events {
            let (words, next) = word::size(event, base);
            need += words;
            base = next;
        }
        if pos < CHUNK_WORDS && pos + need <= CHUNK_WORDS {
            // SAFETY: `pos < CHUNK_WORDS` means `switch_to` set `chunk` to the tail of the
            // buffer this writer is attached to: the writer holds the buffer, which links no
            // other writer's chunks and does not unlink a tail that is not full while its writer
            // is attached (`ChunkList::filling`), so this writer alone writes the chunk and it
            // stays linked until `switch_to` or `detach` moves on; `pos` is its published
            // length, `base` its base tick there, and the words of `events` fit (`need`, just
            // counted).
            let (pos, base) =
                unsafe { (*self.chunk.get()).write_all(pos, events, self.base.get()) };
            self.pos.set(pos);
            self.base.set(base);
            true
        } else {
            false
        }
    }

    /// Links `fresh` into `buffer` as the chunk of thread `thread`, and makes it the chunk this
    /// writer fills, attaching the writer to `buffer` (and detaching it from any other buffer
    /// first); returns it with its index among the chunks ever linked into `buffer`. Gives
    /// `fresh` back, and leaves the writer detached, when another writer is attached to
    /// `buffer`.
    pub fn switch_to(
        &self,
        buffer: &Arc<ThreadBuffer>,
        fresh: ChunkBox,
        thread: u64,
    ) -> Result<LinkedChunk, ChunkBox> {
        let attached = self
            .buffer
            .get()
            .is_some_and(|held| std::ptr::eq(held.as_ptr(), Arc::as_ptr(buffer)));
        if !attached {
            self.detach();
        }
        let linked = buffer.link(fresh, thread, attached)?;
        if !attached {
            self.buffer
                .set(NonNull::new(Arc::into_raw(Arc::clone(buffer)).cast_mut()));
        }
        self.chunk.set(linked.ptr.0.as_ptr());
        self.pos.set(0);
        self.base.set(0);
        self.parked.set(NOT_PARKED);
        Ok(linked)
    }

    /// Forgets the current chunk and lets go of the buffer (which may then unlink it once
    /// retired, and take another writer); the next push takes the slow path.
    pub fn detach(&self) {
        self.chunk.set(std::ptr::null());
        self.pos.set(CHUNK_WORDS);
        self.parked.set(NOT_PARKED);
        if let Some(buffer) = self.buffer.take() {
            // SAFETY: `switch_to` stored this pointer from `Arc::into_raw`, once per
            // attachment, and `take` hands it back once.
            let buffer = unsafe { Arc::from_raw(buffer.as_ptr().cast_const()) };
            buffer.lock().attached = false;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
