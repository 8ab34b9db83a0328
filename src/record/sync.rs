//! Synchronisation primitives, swapped for loom's model-checked ones under `--cfg loom`, and
//! the one way the crate takes a lock.
//!
//! The buffer protocol (`buffer`) goes through this shim; everything else uses `std`
//! directly, locking through [`lock`].

#[cfg(loom)]
pub(crate) use loom::sync::{
    Arc, Mutex, MutexGuard,
    atomic::{AtomicU64, AtomicUsize, Ordering},
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    Arc, Mutex, MutexGuard,
    atomic::{AtomicU64, AtomicUsize, Ordering},
};

/// Locks `mutex`, recovering it if a thread panicked while holding it. Every critical section
/// of the crate leaves its data consistent before anything that can panic, so a poisoned lock
/// still guards consistent data, and a profiler must not turn one panic into many.
#[inline]
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    recover(mutex.lock())
}

/// The guard of a lock taken with `std` (also a `RwLock`), recovered if it was poisoned; see
/// [`lock`].
#[inline]
pub(crate) fn recover<G>(result: std::sync::LockResult<G>) -> G {
    result.unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `UnsafeCell` with loom's closure-based access API, so one body of code serves both builds.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    #[inline(always)]
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
