//! Chunks: fixed blocks of 8-byte words holding records (see [`word`](crate::record::word)),
//! laid out as the event chunks of a capture, and the handles that own or share them.
//!
//! A chunk is laid out as the capture format's event chunk (IREE's instrumentation chunks are
//! the model): 16 bytes of bookkeeping, then a 16-byte [`ChunkHeader`] (magic, type, version,
//! content length), the thread id and 8 reserved bytes, and the words; from the header on,
//! the memory is the chunk as a capture file holds it (event chunk version 5).
//!
//! Ownership is explicit: a [`ChunkBox`] is a chunk's only owner (fresh, pooled, or given
//! back); once linked into a buffer, the chunk is shared by counting its holders (the
//! buffer's list while linked, and every [`SharedChunk`]); the last holder to let go gets it
//! back as a [`ChunkBox`].

use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr::NonNull;
use std::sync::atomic::AtomicUsize as LiveCount;

use crate::record::event::RawEvent;
use crate::record::sync::{AtomicU64, AtomicUsize, Ordering, UnsafeCell};
use crate::record::word;

/// Words per chunk: 4096 × 8 bytes = 32 KiB, 4096 entries and exits (2048 scopes) or 2048
/// two-word records, as many records as a chunk of 16-byte records held (3 under loom, to
/// reach chunk switches quickly).
pub const CHUNK_WORDS: usize = if cfg!(loom) { 3 } else { 4096 };
/// Bytes of a chunk's words.
#[cfg_attr(loom, allow(dead_code))] // read by captures and decoding, which loom builds leave out
pub const CHUNK_BYTES: usize = CHUNK_WORDS * WORD as usize;

/// The magic number that starts every chunk of a capture: `TSCP` in little-endian byte order.
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"TSCP");
/// Chunk type of a thread's event chunk.
pub const EVENT_CHUNK: u16 = 5;
/// Version of the event chunk layout: 2 added the record kinds of counters, values and
/// instants (17 to 21), 3 those of `tracing` spans (22 and 23), 4 `tracing`'s `follows_from`
/// between spans not entered on the calling thread (24), 5 8-byte words in place of 16-byte
/// records (an entry or exit in one word, any other record in two; the kinds of version 4:
/// docs/FORMAT.md); readers read versions 1 to 4 as well.
pub const EVENT_CHUNK_VERSION: u16 = WORDS_CHUNK_VERSION;
/// The first event chunk version of 8-byte words ([`WORD`]).
pub const WORDS_CHUNK_VERSION: u16 = 5;
/// The last event chunk version of 16-byte records ([`RECORD`]).
#[cfg_attr(loom, allow(dead_code))] // read by captures and decoding, which loom builds leave out
pub const RECORD_CHUNK_VERSION: u16 = 4;
/// Bytes of an event chunk's content before its records: the thread id and 8 reserved bytes.
pub const EVENT_PREFIX: u64 = 16;
/// Bytes per record of event chunk versions 1 to 4: tick (`u64`), id (`u32`), kind (`u32`).
#[cfg_attr(loom, allow(dead_code))] // read by captures and decoding, which loom builds leave out
pub const RECORD: u64 = std::mem::size_of::<RawEvent>() as u64;
pub use crate::record::word::WORD;

/// Chunks allocated and not yet freed, wherever they are (a buffer, a capture, the pool).
static LIVE: LiveCount = LiveCount::new(0);

/// Number of chunks allocated and not freed.
#[cfg_attr(loom, allow(dead_code))]
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
pub fn live_chunks() -> usize {
    LIVE.load(std::sync::atomic::Ordering::Relaxed)
}

/// The 16-byte header that starts every chunk, in memory and in capture files: magic, type,
/// version, and the length in bytes of the content that follows (little-endian on disk).
#[repr(C)]
pub struct ChunkHeader {
    magic: u32,
    kind: u16,
    version: u16,
    /// Content length in bytes: [`EVENT_PREFIX`] plus 8 per published word. Only the writer
    /// stores it (`Release`): this is the publication of the chunk's records.
    length: AtomicU64,
}

/// A fixed-capacity block of word slots, laid out as an event chunk of the capture format.
#[repr(C, align(16))]
pub struct Chunk {
    /// The next (newer) chunk of the same buffer; read and written only under its mutex.
    pub(crate) next: UnsafeCell<Option<ChunkPtr>>,
    /// Holders: 1 for the buffer's list while the chunk is linked, plus one per [`SharedChunk`].
    pub(crate) holders: AtomicUsize,
    header: ChunkHeader,
    /// The id of the thread whose events these are; set while the chunk has a single owner.
    thread: u64,
    reserved: u64,
    slots: [UnsafeCell<MaybeUninit<u64>>; CHUNK_WORDS],
}

// The layout a capture file shares: bookkeeping, then the header, the event prefix and the
// records, each where the format says.
#[cfg(not(loom))]
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<ChunkHeader>() == 16);
    assert!(offset_of!(Chunk, header) == 16);
    assert!(offset_of!(Chunk, thread) == 32);
    assert!(offset_of!(Chunk, slots) == 32 + EVENT_PREFIX as usize);
    assert!(size_of::<RawEvent>() == RECORD as usize);
    assert!(size_of::<u64>() == WORD as usize);
};

impl Chunk {
    /// Number of published words.
    pub(crate) fn published(&self) -> usize {
        let length = self.header.length.load(Ordering::Acquire);
        ((length.saturating_sub(EVENT_PREFIX)) / WORD) as usize
    }

    /// Writes the words of `events` into the slots from `pos` on, on a chunk whose base tick is
    /// `base` there, and publishes them together, so that a reader sees all of them or none;
    /// returns the position and the base tick after them.
    ///
    /// # Safety
    /// Only the chunk's single writer may call this, with `pos` equal to the number of
    /// published words, `base` the base tick after them, and room for the words of `events`
    /// (`pos` plus their [`word::size`]s at most [`CHUNK_WORDS`]).
    #[inline(always)]
    pub(crate) unsafe fn write_all(
        &self,
        mut pos: usize,
        events: &[RawEvent],
        mut base: u64,
    ) -> (usize, u64) {
        for &event in events {
            match word::narrow(event, base) {
                Some(w) => {
                    // SAFETY: the caller guarantees room for every word.
                    unsafe { self.put(pos, w) };
                    pos += 1;
                }
                None => {
                    let [first, second] = word::wide(event);
                    // SAFETY: as above.
                    unsafe {
                        self.put(pos, first);
                        self.put(pos + 1, second);
                    }
                    pos += 2;
                    base = word::base_after(event, base, false);
                }
            }
        }
        self.publish(pos);
        (pos, base)
    }

    /// Writes `w` into slot `pos`, unpublished.
    ///
    /// # Safety
    /// Only the chunk's single writer may call this, with `pos` at or past the number of
    /// published words and below [`CHUNK_WORDS`].
    #[inline(always)]
    unsafe fn put(&self, pos: usize, w: u64) {
        debug_assert!(pos < CHUNK_WORDS);
        // SAFETY: the caller guarantees `pos < CHUNK_WORDS`.
        let slot = unsafe { self.slots.get_unchecked(pos) };
        // SAFETY: the slot is unpublished, so no reader looks at it, and we are its only writer.
        slot.with_mut(|p| unsafe { p.write(MaybeUninit::new(w)) });
    }

    /// Writes the one word `w` into slot `pos` and publishes it.
    ///
    /// # Safety
    /// Only the chunk's single writer may call this, with `pos` equal to the number of
    /// published words and below [`CHUNK_WORDS`].
    #[inline(always)]
    pub(crate) unsafe fn write(&self, pos: usize, w: u64) {
        // SAFETY: as the caller guarantees.
        unsafe { self.put(pos, w) };
        self.publish(pos + 1);
    }

    /// Publishes the first `count` words: the content length covers them.
    #[inline(always)]
    fn publish(&self, count: usize) {
        let length = EVENT_PREFIX + count as u64 * WORD;
        self.header.length.store(length, Ordering::Release);
    }

    /// The first `len` words.
    ///
    /// # Safety
    /// `len` is at most the number of published words seen with `Acquire`, and the chunk stays
    /// allocated, unrecycled, while the slice is borrowed.
    pub(crate) unsafe fn words(&self, len: usize) -> &[u64] {
        #[cfg(not(loom))]
        {
            let slots = &self.slots[..len];
            // SAFETY: published slots were written before the `Release` store the caller
            // synchronised with and are never written again while a holder exists; the shim's
            // `UnsafeCell` and `MaybeUninit` are `repr(transparent)`, so a slot has the
            // layout of a `u64`.
            unsafe { &*(std::ptr::from_ref(slots) as *const [u64]) }
        }
        #[cfg(loom)]
        {
            // Under loom every slot access goes through the model; leak a copy per read (the
            // model's chunks are three slots).
            let copy: Vec<u64> = self.slots[..len]
                .iter()
                // SAFETY: as above.
                .map(|slot| slot.with(|p| unsafe { *(*p).assume_init_ref() }))
                .collect();
            Box::leak(copy.into_boxed_slice())
        }
    }

    /// The records of the first `len` words.
    ///
    /// # Safety
    /// As for [`words`](Chunk::words).
    pub(crate) unsafe fn records(&self, len: usize) -> Vec<RawEvent> {
        // SAFETY: as the caller guarantees.
        word::decode(unsafe { self.words(len) })
    }

    /// Tick of the last published event, if any. Events that carry data in their tick field
    /// ([`RawKind::carries_data`](crate::record::event::RawKind::carries_data)) are published
    /// together with the event before them, whose tick counts.
    pub(crate) fn last_tick(&self) -> Option<u64> {
        let len = self.published();
        // SAFETY: `len` was just loaded with `Acquire`; the caller holds the chunk.
        word::last_tick(unsafe { self.words(len) })
    }
}

/// A pointer to a chunk in a buffer's list: it owns nothing by itself (the holder count says
/// who keeps the chunk alive), and only the buffer follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkPtr(pub(crate) NonNull<Chunk>);

impl ChunkPtr {
    /// The chunk, borrowed for as long as this pointer is: a copy of the pointer taken from
    /// its holder (the list, or a [`SharedChunk`]) lends the chunk no longer than the copy
    /// lives.
    ///
    /// # Safety
    /// The chunk is held by someone (the list, or a [`SharedChunk`]) for as long as the
    /// returned reference is used.
    #[inline(always)]
    pub(crate) unsafe fn get(&self) -> &Chunk {
        // SAFETY: the caller guarantees the chunk is alive while the borrow lasts.
        unsafe { self.0.as_ref() }
    }
}

/// The only owner of a chunk that is in no list and held by nobody else: fresh from the
/// allocator, waiting in the pool, or given back by its last holder. Dropping it frees the
/// chunk.
#[derive(Debug)]
pub struct ChunkBox(NonNull<Chunk>);

// SAFETY: a `ChunkBox` is the chunk's only handle; moving it to another thread moves that
// ownership, and a chunk is plain memory plus atomics.
unsafe impl Send for ChunkBox {}

impl ChunkBox {
    /// Allocates an empty chunk. Its slot memory is not touched.
    pub fn alloc() -> Self {
        let header = || ChunkHeader {
            magic: CHUNK_MAGIC,
            kind: EVENT_CHUNK,
            version: EVENT_CHUNK_VERSION,
            length: AtomicU64::new(EVENT_PREFIX),
        };
        #[cfg(not(loom))]
        let boxed = {
            let mut boxed = Box::<Chunk>::new_uninit();
            let p = boxed.as_mut_ptr();
            // SAFETY: `p` points to an allocation for a `Chunk`; we initialise every field
            // but `slots`, which holds `MaybeUninit`s, for which uninitialised memory is valid.
            unsafe {
                std::ptr::addr_of_mut!((*p).next).write(UnsafeCell::new(None));
                std::ptr::addr_of_mut!((*p).holders).write(AtomicUsize::new(0));
                std::ptr::addr_of_mut!((*p).header).write(header());
                std::ptr::addr_of_mut!((*p).thread).write(0);
                std::ptr::addr_of_mut!((*p).reserved).write(0);
                boxed.assume_init()
            }
        };
        #[cfg(loom)]
        let boxed = Box::new(Chunk {
            next: UnsafeCell::new(None),
            holders: AtomicUsize::new(0),
            header: header(),
            thread: 0,
            reserved: 0,
            slots: std::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
        });
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(NonNull::from(Box::leak(boxed)))
    }

    /// Makes every page of the slot memory resident so that the writer does not pay the page
    /// faults: on Linux, one `madvise(MADV_POPULATE_WRITE)` for the whole pages (one kernel
    /// entry for the chunk instead of a fault per page: about 1.7 µs per 4 KiB page instead
    /// of 2.1 on a 2-vCPU VM); a write of one byte in each page it did not cover (the partial
    /// pages at both ends, or all of them where the call is not supported).
    #[cfg(not(loom))]
    pub fn touch(&mut self) {
        let (slots, len) = self.slot_bytes();
        self.touch_outside(populate(slots, len));
    }

    /// [`touch`](ChunkBox::touch) for many chunks at once, sorted by address on return: one
    /// `madvise` for each run of chunks that lie next to each other in memory (chunks
    /// allocated one after another usually do, a few bytes of the allocator's apart; the call
    /// leaves those bytes as they are), instead of one per chunk.
    #[cfg(not(loom))]
    pub fn touch_all(chunks: &mut [ChunkBox]) {
        const PAGE: usize = 4096;
        let size = std::mem::size_of::<Chunk>();
        chunks.sort_unstable_by_key(|c| c.0.as_ptr() as usize);
        let mut start = 0;
        while start < chunks.len() {
            let mut end = start + 1;
            while end < chunks.len() {
                let (prev, next) = (
                    chunks[end - 1].0.as_ptr() as usize,
                    chunks[end].0.as_ptr() as usize,
                );
                // Less than a page apart: nothing unmapped can lie between them.
                if next < prev + size || next - (prev + size) >= PAGE {
                    break;
                }
                end += 1;
            }
            let (first, _) = chunks[start].slot_bytes();
            let (last, len) = chunks[end - 1].slot_bytes();
            let populated = populate(first, last + len - first);
            for chunk in &mut chunks[start..end] {
                chunk.touch_outside(populated.clone());
            }
            start = end;
        }
    }

    /// The address and length of the slot memory.
    #[cfg(not(loom))]
    fn slot_bytes(&mut self) -> (usize, usize) {
        // SAFETY: in bounds of the allocation; no reference is created.
        let slots = unsafe { std::ptr::addr_of_mut!((*self.0.as_ptr()).slots) };
        (slots as usize, CHUNK_BYTES)
    }

    /// Writes one byte in each page of the slot memory whose start is not in `populated`
    /// (whole pages made resident already), the partial pages at both ends included.
    #[cfg(not(loom))]
    fn touch_outside(&mut self, populated: std::ops::Range<usize>) {
        const PAGE: usize = 4096;
        let (slots, len) = self.slot_bytes();
        let mut page = slots & !(PAGE - 1);
        while page < slots + len {
            if !populated.contains(&page) {
                let at = page.max(slots);
                // SAFETY: `at` is inside the slot array, we own the chunk, and slot bytes are
                // `MaybeUninit`, so any value is valid there.
                unsafe { (at as *mut u8).write_volatile(0) };
            }
            page += PAGE;
        }
    }

    /// Empties the chunk so it can be reused.
    pub fn reset(&mut self) {
        let chunk = self.get_mut();
        chunk.header.length.store(EVENT_PREFIX, Ordering::Relaxed);
        chunk.holders.store(0, Ordering::Relaxed);
        // SAFETY: we are the only owner, so no one else touches `next`.
        chunk.next.with_mut(|n| unsafe { *n = None });
        chunk.thread = 0;
    }

    fn get_mut(&mut self) -> &mut Chunk {
        // SAFETY: a `ChunkBox` is the chunk's only handle, so this is the only reference.
        unsafe { self.0.as_mut() }
    }

    /// Gives up ownership to the holders' count, as the chunk of thread `thread` held once by
    /// the returned pointer's keeper (a buffer's list).
    pub(crate) fn into_held(mut self, thread: u64) -> ChunkPtr {
        let chunk = self.get_mut();
        chunk.thread = thread;
        chunk.holders.store(1, Ordering::Relaxed);
        ChunkPtr(ManuallyDrop::new(self).0)
    }
}

impl Drop for ChunkBox {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::leak` in `alloc`, and we are its only owner.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Asks Linux to make the whole pages of the `len` bytes from `address` resident and
/// writable (`MADV_POPULATE_WRITE`, Linux 5.14); returns the addresses it covered, empty when
/// it could not.
#[cfg(all(target_os = "linux", feature = "enabled", not(loom)))]
fn populate(address: usize, len: usize) -> std::ops::Range<usize> {
    const PAGE: usize = 4096;
    let start = address.next_multiple_of(PAGE);
    let end = (address + len) & !(PAGE - 1);
    if end <= start {
        return 0..0;
    }
    // SAFETY: the range is whole pages inside memory the caller owns (a chunk's slots,
    // rounded inwards). `MADV_POPULATE_WRITE` faults the pages in as a write would, but
    // writes nothing: pages already resident keep their content, new ones read as zero as
    // they would after a fault. On failure (an older kernel: `EINVAL`) the pages are as they
    // were, and the caller writes to them instead.
    let done = unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            end - start,
            libc::MADV_POPULATE_WRITE,
        )
    };
    if done == 0 { start..end } else { 0..0 }
}

/// Off Linux (or without `enabled`, which brings libc): nothing populated, every page is
/// written.
#[cfg(all(not(all(target_os = "linux", feature = "enabled")), not(loom)))]
fn populate(_address: usize, _len: usize) -> std::ops::Range<usize> {
    0..0
}

/// Lets go of one hold on `chunk`; the last holder gets it back as a [`ChunkBox`].
///
/// # Safety
/// The caller holds `chunk` (counted in `holders`) and does not use that hold again.
pub(crate) unsafe fn release(chunk: ChunkPtr) -> Option<ChunkBox> {
    // SAFETY: the caller's hold keeps the chunk alive until the decrement.
    let holders = unsafe { chunk.get() }
        .holders
        .fetch_sub(1, Ordering::AcqRel);
    // (Not `then_some`: building a `ChunkBox` that is then dropped would free the chunk.)
    if holders == 1 {
        Some(ChunkBox(chunk.0))
    } else {
        None
    }
}

/// A capture's hold on a chunk: the first `len` words as they were when it was taken. The
/// writer may go on filling later slots; the chunk is not recycled until every holder lets go.
pub struct SharedChunk {
    chunk: ChunkPtr,
    len: usize,
}

// SAFETY: a `SharedChunk` only reads published slots, which are never written again while it
// holds the chunk, and lets go through an atomic count.
unsafe impl Send for SharedChunk {}
// SAFETY: as for `Send`: every access through `&SharedChunk` is a read of immutable slots.
unsafe impl Sync for SharedChunk {}

impl SharedChunk {
    /// A new hold on `ptr`'s first `len` words.
    ///
    /// # Safety
    /// The caller holds `ptr` (the chunk is alive) and `len` words are published.
    pub(crate) unsafe fn new(ptr: ChunkPtr, len: usize) -> Self {
        // SAFETY: the caller's hold keeps the chunk alive.
        unsafe { ptr.get() }.holders.fetch_add(1, Ordering::Relaxed);
        Self { chunk: ptr, len }
    }

    fn chunk(&self) -> &Chunk {
        // SAFETY: this handle's hold keeps the chunk alive.
        unsafe { self.chunk.get() }
    }

    /// The words held, oldest first.
    pub fn words(&self) -> &[u64] {
        // SAFETY: `len` was published (seen with `Acquire`) when the hold was taken, and the
        // hold keeps the chunk alive and unrecycled.
        unsafe { self.chunk().words(self.len) }
    }

    /// The records held, oldest first, decoded from the words.
    pub fn records(&self) -> Vec<RawEvent> {
        word::decode(self.words())
    }

    /// Number of records held.
    pub fn count(&self) -> usize {
        word::count(self.words())
    }

    /// The held part of the chunk as a capture file's event chunk of version 5 holds it after
    /// its header: the thread id, 8 reserved bytes and the held words, [`EVENT_PREFIX`] + 8
    /// bytes per word, in this machine's byte order (the file's, little-endian, on
    /// little-endian machines).
    ///
    /// The header itself is not included: its length is the writer's, which may have grown
    /// past this hold (a thread still recording for another session), and reading it here
    /// would race with the writer's store.
    #[cfg(not(loom))]
    #[cfg_attr(target_endian = "big", allow(dead_code))] // written word by word there
    pub(crate) fn content_bytes(&self) -> &[u8] {
        let len = EVENT_PREFIX as usize + self.len * WORD as usize;
        debug_assert!(self.len <= CHUNK_WORDS);
        let chunk: *const Chunk = self.chunk();
        // SAFETY: the pointer comes from a reference to the whole chunk, and the bytes from
        // `thread` on are `thread`, `reserved` and the slots, contiguous (the layout is
        // asserted above) and inside the chunk (`self.len <= CHUNK_WORDS`). `thread` and
        // `reserved` are only written while the chunk has a single owner, so not while this
        // hold exists; the first `self.len` slots were published (seen with `Acquire`) when
        // the hold was taken and are never written again while it exists. Every byte of them
        // is initialised: each is a `u64`. The slice lives as long as `&self`, which keeps the chunk alive and
        // unrecycled.
        unsafe {
            let start = chunk.cast::<u8>().add(std::mem::offset_of!(Chunk, thread));
            std::slice::from_raw_parts(start, len)
        }
    }

    /// The id of the thread that wrote the chunk.
    pub fn thread(&self) -> u64 {
        self.chunk().thread
    }

    /// Lets go of the chunk; returns it when this was the last hold, to recycle.
    pub fn release(self) -> Option<ChunkBox> {
        let this = ManuallyDrop::new(self);
        // SAFETY: this handle holds the chunk and is consumed.
        unsafe { release(this.chunk) }
    }
}

impl Drop for SharedChunk {
    fn drop(&mut self) {
        // SAFETY: this handle holds the chunk and is going away. The last hold frees it.
        drop(unsafe { release(self.chunk) });
    }
}

impl std::fmt::Debug for SharedChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedChunk")
            .field("thread", &self.thread())
            .field("words", &self.len)
            .finish()
    }
}

#[cfg(all(test, target_os = "linux", feature = "enabled", not(loom)))]
mod tests;
