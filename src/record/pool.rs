//! Recycled chunks: reclaimed chunks wait here, already touched, for the next thread that fills
//! one, so steady-state recording writes into warm memory and allocates nothing.

use std::sync::OnceLock;

use crossbeam_queue::ArrayQueue;

use crate::record::chunk::{Chunk, ChunkBox};

/// Chunks kept for reuse: 1024 × 64 KiB = 64 MiB at most, and only as many as sessions have
/// used. Recording into fresh memory costs a page fault per 4 KiB (on a VM about 14 ns per
/// scope, 1.7 × the scope itself), so the chunks of the last sessions stay warm for the next
/// one. Chunks given back beyond this are freed; [`release`] frees the kept ones.
const RETAIN: usize = 1024;
/// Chunks prepared at session start so that the first chunk of each thread is warm.
const PREPARE: usize = 4;

static READY: OnceLock<ArrayQueue<ChunkBox>> = OnceLock::new();

fn ready() -> &'static ArrayQueue<ChunkBox> {
    READY.get_or_init(|| ArrayQueue::new(RETAIN))
}

/// A chunk to fill: a recycled one if any, else a new one.
pub(crate) fn take() -> ChunkBox {
    ready().pop().unwrap_or_else(ChunkBox::alloc)
}

/// Takes back a chunk that nobody holds any more; it is freed when the pool is full.
pub(crate) fn give(mut chunk: ChunkBox) {
    chunk.reset();
    // A full pool hands the chunk back, and dropping it frees it.
    drop(ready().push(chunk));
}

/// Allocates and touches chunks until [`PREPARE`] are ready (called at session start).
pub(crate) fn prepare() {
    while ready().len() < PREPARE {
        let mut chunk = ChunkBox::alloc();
        chunk.touch();
        if ready().push(chunk).is_err() {
            break;
        }
    }
}

/// Frees every chunk waiting for reuse; returns how many bytes that gave back.
pub(crate) fn release() -> usize {
    let mut freed = 0;
    while let Some(chunk) = ready().pop() {
        drop(chunk);
        freed += std::mem::size_of::<Chunk>();
    }
    freed
}
