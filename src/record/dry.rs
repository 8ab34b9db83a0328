//! Dry spells: a thread that a streaming session's pool refused a chunk
//! ([`SlowWriter::Drop`](crate::SlowWriter::Drop)) drops its next events on its own state,
//! without touching anything shared, until chunks come back.
//!
//! Whoever makes chunks available to the threads (a stream's writer giving one back, a pool
//! installed or taken out of service) first puts them where threads take from, then
//! [`announce`](Returns::announce)s it. A thread reads [`Returns::seen`] *before* it looks for
//! a chunk; when it finds none it starts a [`DrySpell`] at that value. From then on each event
//! costs one load of a line that only announcements write: while it reads the same value,
//! nothing came back since the thread looked, and the event is refused at once. The first
//! read that differs ends the spell, and the thread looks again. An announcement that lands
//! between the thread's read and its look is not missed either: the look then finds the chunk,
//! or the value read afterwards differs.
//!
//! This module is model-checked by loom (`tests/loom.rs`, `--cfg loom`).

use std::cell::Cell;

use crate::record::sync::{AtomicU64, Ordering};

/// How many times chunks were made available to threads that found none.
#[derive(Debug)]
pub struct Returns {
    count: AtomicU64,
}

impl Default for Returns {
    fn default() -> Self {
        Self::new()
    }
}

impl Returns {
    /// No announcement yet.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            count: AtomicU64::new(0),
        }
    }

    /// No announcement yet.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            count: AtomicU64::new(0),
        }
    }

    /// The announcements so far: read before looking for a chunk.
    #[inline(always)]
    pub fn seen(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// Chunks were just made available (put where threads take from): threads in a dry spell
    /// look again at their next event.
    pub fn announce(&self) {
        self.count.fetch_add(1, Ordering::Release);
    }
}

/// One thread's dry spell, if it is in one: the announcements it had seen before it looked for
/// a chunk in vain. Lives in a thread-local; nobody else reads it.
#[derive(Debug, Default)]
pub struct DrySpell {
    since: Cell<Option<u64>>,
}

impl DrySpell {
    /// Not in a dry spell.
    pub const fn new() -> Self {
        Self {
            since: Cell::new(None),
        }
    }

    /// Starts a dry spell: the look for a chunk that found none came after reading `seen`
    /// from [`Returns::seen`].
    pub fn begin(&self, seen: u64) {
        self.since.set(Some(seen));
    }

    /// True while in a dry spell and nothing was announced since it began: the caller refuses
    /// its event without looking for a chunk. Ends the spell otherwise (the caller looks again).
    #[inline(always)]
    pub fn holds(&self, returns: &Returns) -> bool {
        match self.since.get() {
            None => false,
            Some(seen) if returns.seen() == seen => true,
            Some(_) => {
                self.since.set(None);
                false
            }
        }
    }

    /// Ends the spell (the thread got a chunk).
    pub fn end(&self) {
        self.since.set(None);
    }
}
