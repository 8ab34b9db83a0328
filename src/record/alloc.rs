//! [`TrackingAlloc`]: a global allocator wrapper that records allocations into the profiler.

use std::alloc::{GlobalAlloc, Layout, System};

use crate::record::event::RawKind;
#[cfg(doc)]
use crate::record::memory::MemoryMode;
use crate::record::{clock, registry, thread};

/// Wraps a [`GlobalAlloc`] (by default [`System`]) and records every allocation and free
/// while a session that tracks memory ([`ProfilerBuilder::track_memory`](crate::ProfilerBuilder::track_memory))
/// records the calling thread.
///
/// ```
/// use tickscope::TrackingAlloc;
///
/// #[global_allocator]
/// static ALLOC: TrackingAlloc = TrackingAlloc::new(std::alloc::System);
///
/// let prof = tickscope::Profiler::builder().current_thread().track_memory(true).start();
/// {
///     let _g = tickscope::scope!("fill");
///     let v: Vec<u8> = Vec::with_capacity(1000);
///     drop(v);
/// }
/// prof.stop();
/// let fill = prof.report().get("fill").unwrap().memory.unwrap();
/// assert_eq!((fill.allocs, fill.alloc_bytes), (1, 1000));
/// assert_eq!((fill.frees, fill.freed_bytes), (1, 1000));
/// ```
///
/// While no session tracks memory, each call costs one relaxed atomic load and a branch on top of
/// the wrapped allocator. While one counts memory ([`MemoryMode::Counts`]), each allocation and
/// each free adds to a few counters of the thread, inline, after one compare of a thread-local
/// word with that load; no clock read and no record (the counts go into the thread's buffer at
/// its next record). While one records the
/// timeline ([`MemoryMode::Timeline`]), each allocation and each free writes two 16-byte records,
/// published together (the size, the address and a raw clock tick), into the thread's buffer, like
/// a scope: no lock and no allocation. A free is stamped before the memory goes back to the
/// allocator and an allocation after it returns, so that when one thread frees an address and
/// another gets it again, the ticks order the two correctly; post-processing then matches each free
/// to its allocation by address, whichever threads they ran on. A `realloc` that succeeds is
/// recorded as the free of the old block (stamped before the allocator gets it back) and the
/// allocation of the new one, with the sizes the allocator saw, published together once it has
/// returned; one that fails records nothing, since the old block is still allocated.
///
/// The profiler's own allocations (thread registration, buffers, post-processing) are not
/// recorded.
#[derive(Debug, Default, Clone, Copy)]
pub struct TrackingAlloc<A = System> {
    inner: A,
}

impl<A> TrackingAlloc<A> {
    /// Wraps `inner`.
    pub const fn new(inner: A) -> Self {
        Self { inner }
    }

    /// The wrapped allocator.
    pub const fn inner(&self) -> &A {
        &self.inner
    }
}

/// Records the allocation of `size` bytes at `ptr`, if it succeeded and memory is tracked.
#[inline(always)]
fn allocated(ptr: *mut u8, size: usize) {
    let generation = registry::memory_generation();
    if generation != 0 && !ptr.is_null() {
        thread::memory_event(generation, RawKind::Alloc, size, ptr as usize);
    }
}

// SAFETY: every method forwards to `inner` with the caller's arguments and returns its result
// unchanged; recording only reads the pointer's address and never touches the memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for TrackingAlloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees on `layout`.
        let ptr = unsafe { self.inner.alloc(layout) };
        allocated(ptr, layout.size());
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees on `layout`.
        let ptr = unsafe { self.inner.alloc_zeroed(layout) };
        allocated(ptr, layout.size());
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let generation = registry::memory_generation();
        if generation != 0 {
            thread::memory_event(generation, RawKind::Free, layout.size(), ptr as usize);
        }
        // SAFETY: forwarded with the caller's guarantees on `ptr` and `layout`.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let generation = registry::memory_generation();
        if generation == 0 {
            // SAFETY: forwarded with the caller's guarantees on `ptr`, `layout` and `new_size`.
            return unsafe { self.inner.realloc(ptr, layout, new_size) };
        }
        // The free's tick is read before the old block can go back to the allocator (so that
        // another thread that gets its address again sorts after it), but the free is
        // recorded only once the realloc has succeeded: a failed one leaves the old block
        // allocated, and records nothing. Counting needs no tick.
        let freed_at = if thread::counting(generation) {
            0
        } else {
            clock::now()
        };
        // SAFETY: forwarded with the caller's guarantees on `ptr`, `layout` and `new_size`.
        let new = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            thread::realloc_event(
                generation,
                layout.size(),
                ptr as usize,
                freed_at,
                new_size,
                new as usize,
            );
        }
        new
    }
}
