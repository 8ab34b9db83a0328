//! Recycled chunks: reclaimed chunks wait here, already touched, for the next thread that fills
//! one, so steady-state recording writes into warm memory and allocates nothing.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_queue::ArrayQueue;

use crate::record::buffer::ChunkPtr;

/// Chunks kept for reuse: 1024 × 64 KiB = 64 MiB at most, and only as many as sessions have
/// used. Recording into fresh memory costs a page fault per 4 KiB (on a VM about 14 ns per
/// scope, 1.7 × the scope itself), so the chunks of the last sessions stay warm for the next
/// one. Chunks reclaimed beyond this are freed; [`release`] frees the kept ones.
const RETAIN: usize = 1024;
/// Chunks prepared at session start so that the first chunk of each thread is warm.
const PREPARE: usize = 4;

static READY: OnceLock<ArrayQueue<ChunkPtr>> = OnceLock::new();
/// Chunks allocated and not yet freed, wherever they are.
static LIVE: AtomicUsize = AtomicUsize::new(0);

fn ready() -> &'static ArrayQueue<ChunkPtr> {
    READY.get_or_init(|| ArrayQueue::new(RETAIN))
}

fn alloc() -> ChunkPtr {
    LIVE.fetch_add(1, Ordering::Relaxed);
    ChunkPtr::alloc()
}

/// A chunk to fill: a recycled one if any, else a new one.
pub(crate) fn take() -> ChunkPtr {
    ready().pop().unwrap_or_else(alloc)
}

/// Takes back a chunk that no buffer links any more.
pub(crate) fn give(chunk: ChunkPtr) {
    chunk.reset();
    if let Err(chunk) = ready().push(chunk) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the caller hands over ownership of an unlinked chunk.
        unsafe { chunk.free() };
    }
}

/// Allocates and touches chunks until [`PREPARE`] are ready (called at session start).
pub(crate) fn prepare() {
    while ready().len() < PREPARE {
        let chunk = alloc();
        chunk.touch();
        if let Err(chunk) = ready().push(chunk) {
            LIVE.fetch_sub(1, Ordering::Relaxed);
            // SAFETY: `chunk` was just allocated and is linked nowhere.
            unsafe { chunk.free() };
            break;
        }
    }
}

/// Frees every chunk waiting for reuse; returns how many bytes that gave back.
pub(crate) fn release() -> usize {
    let mut freed = 0;
    while let Some(chunk) = ready().pop() {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: a chunk in the ready queue is linked nowhere and owned by the pool.
        unsafe { chunk.free() };
        freed += std::mem::size_of::<crate::record::buffer::Chunk>();
    }
    freed
}

/// Number of chunks allocated and not freed (in buffers or ready for reuse).
pub(crate) fn live_chunks() -> usize {
    LIVE.load(Ordering::Relaxed)
}
