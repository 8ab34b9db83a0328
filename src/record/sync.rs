//! Synchronisation primitives, swapped for loom's model-checked ones under `--cfg loom`.
//!
//! Only the modules that loom models (`event`, `buffer`) go through this shim; everything else
//! uses `std` directly.

#[cfg(loom)]
pub(crate) use loom::sync::{
    Mutex, MutexGuard,
    atomic::{AtomicUsize, Ordering},
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    Mutex, MutexGuard,
    atomic::{AtomicUsize, Ordering},
};

/// `UnsafeCell` with loom's closure-based access API, so one body of code serves both builds.
#[cfg(not(loom))]
#[derive(Debug)]
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
