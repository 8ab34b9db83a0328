//! Recycled chunks: reclaimed chunks wait here, already touched, for the next thread that fills
//! one, so steady-state recording writes into warm memory and allocates nothing.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_queue::ArrayQueue;

use crate::buffer::ChunkPtr;

/// Chunks kept for reuse: 64 × 64 KiB = 4 MiB. Chunks reclaimed beyond this are freed.
const RETAIN: usize = 64;
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

/// Number of chunks allocated and not freed (in buffers or ready for reuse).
pub(crate) fn live_chunks() -> usize {
    LIVE.load(Ordering::Relaxed)
}
