//! Per-thread append-only chunked event buffers.
//!
//! One thread (the writer) appends [`RawEvent`]s to the tail chunk of its own [`ThreadBuffer`]
//! through a [`Writer`]; collectors read every chunk concurrently. The protocol:
//!
//! - The writer stores an event into slot `len` of its tail chunk, then publishes it with a
//!   `Release` store of `len + 1`. It never rewrites a published slot.
//! - A collector loads `len` with `Acquire` and reads only slots below it.
//! - The chunk list (`head` .. `tail`, linked through `Chunk::next`) changes only under the
//!   buffer's mutex: the writer takes it once per chunk, never per event.
//! - Only chunks that the writer no longer writes (not the tail, or any chunk once the writer has
//!   retired) are unlinked and recycled, and only under the mutex.
//!
//! This module is model-checked by loom (`tests/loom.rs`, `--cfg loom`).

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::record::event::RawEvent;
use crate::record::sync::{AtomicUsize, Mutex, Ordering, UnsafeCell};

/// Events per chunk: 4096 × 16 bytes = 64 KiB (3 under loom, to reach chunk switches quickly).
pub const CHUNK_EVENTS: usize = if cfg!(loom) { 3 } else { 4096 };

/// A fixed-capacity block of event slots.
#[repr(C)]
pub struct Chunk {
    /// Number of published slots; only the writer stores it (`Release`).
    len: AtomicUsize,
    /// The next (newer) chunk of the same buffer; read and written only under its mutex.
    next: UnsafeCell<Option<ChunkPtr>>,
    slots: [UnsafeCell<MaybeUninit<RawEvent>>; CHUNK_EVENTS],
}

impl Chunk {
    /// Writes slot `pos` and publishes it.
    ///
    /// # Safety
    /// Only the chunk's single writer may call this, with `pos` equal to the published length
    /// and below [`CHUNK_EVENTS`].
    #[inline(always)]
    unsafe fn write(&self, pos: usize, event: RawEvent) {
        debug_assert!(pos < CHUNK_EVENTS);
        // SAFETY: the caller guarantees `pos < CHUNK_EVENTS`.
        let slot = unsafe { self.slots.get_unchecked(pos) };
        // SAFETY: slot `pos` is unpublished, so no reader looks at it, and we are its only writer.
        slot.with_mut(|p| unsafe { p.write(MaybeUninit::new(event)) });
        self.len.store(pos + 1, Ordering::Release);
    }

    /// Writes `events` into the slots from `pos` on and publishes them together, so that a
    /// collector sees all of them or none.
    ///
    /// # Safety
    /// As for [`Chunk::write`], with `pos + events.len() <= CHUNK_EVENTS`.
    #[inline(always)]
    unsafe fn write_all(&self, pos: usize, events: &[RawEvent]) {
        debug_assert!(pos + events.len() <= CHUNK_EVENTS);
        for (i, &event) in events.iter().enumerate() {
            // SAFETY: the caller guarantees `pos + i < CHUNK_EVENTS`.
            let slot = unsafe { self.slots.get_unchecked(pos + i) };
            // SAFETY: the slot is unpublished and we are its only writer.
            slot.with_mut(|p| unsafe { p.write(MaybeUninit::new(event)) });
        }
        self.len.store(pos + events.len(), Ordering::Release);
    }

    /// Calls `f` on each published event, in order.
    fn for_each(&self, mut f: impl FnMut(&RawEvent)) {
        let len = self.len.load(Ordering::Acquire);
        for slot in &self.slots[..len] {
            // SAFETY: slots below the published length were written before the `Release` store
            // we synchronised with, and are never written again while the chunk is linked.
            slot.with(|p| f(unsafe { (*p).assume_init_ref() }));
        }
    }

    /// Tick of the last published event, if any. Events that carry data in their tick field
    /// ([`RawKind::carries_data`]) are published together with the event before them, whose
    /// tick counts.
    fn last_tick(&self) -> Option<u64> {
        let len = self.len.load(Ordering::Acquire);
        self.slots[..len].iter().rev().find_map(|slot| {
            // SAFETY: as in `for_each`.
            let event = slot.with(|p| unsafe { *(*p).assume_init_ref() });
            (!event.kind.carries_data()).then_some(event.tick)
        })
    }
}

/// An owning pointer to a heap [`Chunk`], passed between threads by hand.
///
/// Whoever holds a `ChunkPtr` outside a buffer's list (a pool, a fresh allocation) owns it;
/// once linked into a [`ThreadBuffer`] the buffer owns it until it is unlinked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPtr(NonNull<Chunk>);

// SAFETY: a chunk is plain memory plus atomics; the ownership rules above make sure that only one
// thread writes its slots, and that it is freed only after being unlinked under the mutex.
unsafe impl Send for ChunkPtr {}

impl ChunkPtr {
    /// Allocates an empty chunk. Its slot memory is not touched.
    pub fn alloc() -> Self {
        #[cfg(not(loom))]
        let boxed = {
            let mut boxed = Box::<Chunk>::new_uninit();
            let p = boxed.as_mut_ptr();
            // SAFETY: `p` points to an allocation for a `Chunk`; we initialise the two fields that
            // need it. `slots` holds `MaybeUninit`s, for which uninitialised memory is valid.
            unsafe {
                std::ptr::addr_of_mut!((*p).len).write(AtomicUsize::new(0));
                std::ptr::addr_of_mut!((*p).next).write(UnsafeCell::new(None));
                boxed.assume_init()
            }
        };
        #[cfg(loom)]
        let boxed = Box::new(Chunk {
            len: AtomicUsize::new(0),
            next: UnsafeCell::new(None),
            slots: std::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
        });
        Self(NonNull::from(Box::leak(boxed)))
    }

    /// Writes one byte in every page of the slot memory so that the writer does not pay the
    /// page faults.
    #[cfg(not(loom))]
    pub fn touch(self) {
        const PAGE: usize = 4096;
        const SLOT_BYTES: usize = CHUNK_EVENTS * std::mem::size_of::<RawEvent>();
        // SAFETY: in bounds of the allocation; no reference is created.
        let slots = unsafe { std::ptr::addr_of_mut!((*self.0.as_ptr()).slots) }.cast::<u8>();
        for offset in (0..SLOT_BYTES).step_by(PAGE) {
            // SAFETY: `offset` is inside the slot array. The caller owns the chunk (it is in no
            // list), and slot bytes are `MaybeUninit`, so any value is valid there.
            unsafe { slots.add(offset).write_volatile(0) };
        }
    }

    /// Empties the chunk so it can be reused.
    pub fn reset(self) {
        self.get().len.store(0, Ordering::Relaxed);
        // SAFETY: the caller owns the chunk (it is in no list), so no one else touches `next`.
        self.get().next.with_mut(|n| unsafe { *n = None });
    }

    /// Frees the chunk.
    ///
    /// # Safety
    /// The caller owns the chunk: it is in no list and no writer holds it.
    pub unsafe fn free(self) {
        // SAFETY: the pointer came from `Box::leak` in `alloc`, and the caller owns it.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }

    #[inline(always)]
    fn get(&self) -> &Chunk {
        // SAFETY: chunks are freed only by their owner through `free`; every holder of a
        // `ChunkPtr` that may dereference it is a current owner or reader under the list mutex.
        unsafe { self.0.as_ref() }
    }
}

#[derive(Default)]
struct ChunkList {
    head: Option<ChunkPtr>,
    tail: Option<ChunkPtr>,
    chunks: usize,
    /// The writer has gone (its thread exited): the tail may be recycled too.
    retired: bool,
}

/// The chunks of one thread's events, oldest first.
pub struct ThreadBuffer {
    list: Mutex<ChunkList>,
}

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
        }
    }

    fn lock(&self) -> crate::record::sync::MutexGuard<'_, ChunkList> {
        // A panic while the list is locked cannot leave it inconsistent: every update is a few
        // field stores with no call that can panic in between.
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Links `fresh` (owned by the caller) as the new tail.
    fn link(&self, fresh: ChunkPtr) {
        let mut list = self.lock();
        match list.tail {
            // SAFETY: `next` is only accessed under the mutex, which we hold.
            Some(tail) => tail.get().next.with_mut(|n| unsafe { *n = Some(fresh) }),
            None => list.head = Some(fresh),
        }
        list.tail = Some(fresh);
        list.chunks += 1;
    }

    /// Marks the writer as gone; from now on every chunk can be recycled.
    pub fn retire(&self) {
        self.lock().retired = true;
    }

    /// Calls `f` on every published event, oldest first.
    pub fn for_each(&self, mut f: impl FnMut(&RawEvent)) {
        let list = self.lock();
        let mut cursor = list.head;
        while let Some(chunk) = cursor {
            chunk.get().for_each(&mut f);
            // SAFETY: `next` is only accessed under the mutex, which we hold.
            cursor = chunk.get().next.with(|n| unsafe { *n });
        }
    }

    /// Unlinks the oldest chunks whose events all have ticks below `horizon` (every chunk the
    /// writer no longer writes when `horizon` is `None`) and hands them to `sink`.
    pub fn reclaim(&self, horizon: Option<u64>, mut sink: impl FnMut(ChunkPtr)) {
        let mut list = self.lock();
        while let Some(head) = list.head {
            if list.tail == Some(head) && !list.retired {
                break;
            }
            if let (Some(h), Some(last)) = (horizon, head.get().last_tick()) {
                if last >= h {
                    break;
                }
            }
            // SAFETY: `next` is only accessed under the mutex, which we hold.
            list.head = head.get().next.with(|n| unsafe { *n });
            if list.head.is_none() {
                list.tail = None;
            }
            list.chunks -= 1;
            sink(head);
        }
    }

    /// Number of linked chunks.
    pub fn chunks(&self) -> usize {
        self.lock().chunks
    }

    /// True when the writer has retired and every chunk has been reclaimed.
    pub fn is_drained(&self) -> bool {
        let list = self.lock();
        list.retired && list.head.is_none()
    }
}

impl Drop for ThreadBuffer {
    fn drop(&mut self) {
        let list = self.lock();
        let mut cursor = list.head;
        while let Some(chunk) = cursor {
            // SAFETY: `next` is only accessed under the mutex, which we hold.
            cursor = chunk.get().next.with(|n| unsafe { *n });
            // SAFETY: a buffer is dropped only after its writer retired (the registry holds it
            // until then), so we own every chunk in the list.
            unsafe { chunk.free() };
        }
    }
}

/// The writer's cursor into the tail chunk of its buffer; lives in a thread-local.
///
/// `pos == CHUNK_EVENTS` doubles as "no chunk": the first push then takes the slow path.
pub struct Writer {
    chunk: Cell<*const Chunk>,
    pos: Cell<usize>,
}

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
            pos: Cell::new(CHUNK_EVENTS),
        }
    }

    /// Appends `event`, or returns `false` when the current chunk is full or absent.
    #[inline(always)]
    pub fn try_push(&self, event: RawEvent) -> bool {
        let pos = self.pos.get();
        if pos < CHUNK_EVENTS {
            // SAFETY: `pos < CHUNK_EVENTS` implies `chunk` was set by `switch_to` to a live chunk
            // that this writer alone writes (see the module docs), and `pos` is its length.
            unsafe { (*self.chunk.get()).write(pos, event) };
            self.pos.set(pos + 1);
            true
        } else {
            false
        }
    }

    /// Appends all of `events`, published at once, or returns `false` (writing nothing) when
    /// the current chunk lacks room for them or is absent.
    #[inline(always)]
    pub fn try_push_all(&self, events: &[RawEvent]) -> bool {
        let pos = self.pos.get();
        if pos < CHUNK_EVENTS && pos + events.len() <= CHUNK_EVENTS {
            // SAFETY: as in `try_push`; `pos + len <= CHUNK_EVENTS` was just checked.
            unsafe { (*self.chunk.get()).write_all(pos, events) };
            self.pos.set(pos + events.len());
            true
        } else {
            false
        }
    }

    /// Links `fresh` into `buffer` and makes it the chunk this writer fills.
    pub fn switch_to(&self, buffer: &ThreadBuffer, fresh: ChunkPtr) {
        buffer.link(fresh);
        self.chunk.set(fresh.0.as_ptr());
        self.pos.set(0);
    }

    /// Forgets the current chunk; the next push takes the slow path.
    pub fn detach(&self) {
        self.chunk.set(std::ptr::null());
        self.pos.set(CHUNK_EVENTS);
    }
}
