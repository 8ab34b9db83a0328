//! The RAII guard that records a scope: the hot path.

use std::marker::PhantomData;
use std::num::NonZeroU32;

use crate::record::callsite::{self, Callsite};
use crate::record::event::RawEvent;
use crate::record::link::Link;
use crate::record::observe::Slot;
use crate::record::value::Value;
use crate::record::{observe, registry, thread};

/// Records a scope from its creation to its drop. Made by [`scope!`](crate::scope!).
///
/// When no session wants the current thread, creating and dropping a guard costs one relaxed
/// load and a branch each. The guard is `!Send`: a scope begins and ends on the same thread.
/// A panic that unwinds through the scope drops the guard, which closes the scope.
#[must_use = "the scope ends when the guard is dropped: bind it with `let _g = scope!(..);`"]
#[derive(Debug)]
pub struct ScopeGuard {
    /// What the drop closes. Without the `enabled` feature nothing is recorded nor observed,
    /// and the guard holds nothing.
    #[cfg(feature = "enabled")]
    inner: Inner,
    _not_send: PhantomData<*const ()>,
}

/// A guard's state: the entry it recorded and the observers' slot it holds, each if any
/// (12 bytes, the `NonZeroU32`s' niches standing for "none").
#[derive(Debug)]
struct Inner {
    entry: Option<Entry>,
    observed: Option<Slot>,
}

/// A recorded scope entry, which the guard's drop closes.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The callsite id of the recorded `Begin`: never 0, so that `Option<Entry>` takes 8 bytes.
    /// (Only `Debug` reads it.)
    #[allow(dead_code)]
    id: NonZeroU32,
    /// The entry's key ([`RawEvent::end_key`]), carried by the exit so that it closes this
    /// entry whatever order guards are dropped in.
    key: u32,
}

impl Inner {
    const NONE: Self = Self {
        entry: None,
        observed: None,
    };
}

impl ScopeGuard {
    /// Enters a scope for a static callsite.
    #[inline(always)]
    pub(crate) fn enter(callsite: &'static Callsite) -> Self {
        // The one load while no session records and no observer is registered.
        let generation = registry::generation();
        if generation == 0 {
            return Self::inactive();
        }
        let observed = Self::observe(callsite, None);
        let guard = if thread::thread_wants_at(generation) {
            Self::begin(callsite.id())
        } else {
            Self::inactive()
        };
        guard.with_observed(observed)
    }

    /// [`ScopeGuard::enter`] without telling observers: the probe a session's overhead
    /// calibration times (observers must not see its scopes).
    #[inline(always)]
    pub(crate) fn enter_unobserved(callsite: &'static Callsite) -> Self {
        let generation = registry::generation();
        if generation != 0 && thread::thread_wants_at(generation) {
            Self::begin(callsite.id())
        } else {
            Self::inactive()
        }
    }

    /// Tells observers, if any, that `callsite`'s scope is being entered; the slot for its
    /// exit, if one took it.
    #[inline(always)]
    pub(crate) fn observe(callsite: &'static Callsite, link: Option<Link>) -> Option<Slot> {
        Self::observe_with(callsite, link, Vec::new)
    }

    /// [`ScopeGuard::observe`] for a scope whose arguments `args` makes, only if an observer
    /// will read them.
    #[inline(always)]
    pub(crate) fn observe_with(
        callsite: &'static Callsite,
        link: Option<Link>,
        args: impl FnOnce() -> Vec<(&'static str, Value)>,
    ) -> Option<Slot> {
        if cfg!(feature = "enabled") && observe::any() {
            observe::enter(callsite, link, args())
        } else {
            None
        }
    }

    /// Enters a scope with a name known only at run time; see [`scope!`](crate::scope!).
    ///
    /// Slower than a static name: the first use of each distinct name on a thread interns it
    /// (a lock and, once per process, a leaked copy), later uses cost a hash lookup.
    #[inline]
    pub(crate) fn enter_dynamic(name: &str) -> Self {
        let id = callsite::intern(name);
        let observed = if observe::any() {
            callsite::by_id(id).and_then(|c| Self::observe(c, None))
        } else {
            None
        };
        let guard = if thread::thread_wants() {
            Self::begin(id)
        } else {
            Self::inactive()
        };
        guard.with_observed(observed)
    }

    /// A guard that records nothing.
    #[inline(always)]
    pub const fn inactive() -> Self {
        Self::from_inner(Inner::NONE)
    }

    /// A guard that records nothing but tells observers of its exit (through `observed`).
    #[inline(always)]
    pub(crate) fn observed_only(observed: Option<Slot>) -> Self {
        Self::inactive().with_observed(observed)
    }

    /// This guard, telling observers of its exit through `observed`.
    #[inline(always)]
    pub(crate) fn with_observed(mut self, observed: Option<Slot>) -> Self {
        if let Some(inner) = self.inner_mut() {
            inner.observed = observed;
        }
        self
    }

    /// True when this guard recorded its scope's entry (and so will record its exit).
    pub fn is_recording(&self) -> bool {
        self.inner().is_some_and(|inner| inner.entry.is_some())
    }

    #[inline(always)]
    fn begin(id: u32) -> Self {
        let tick = thread::push_begin(id);
        Self::opened(id, tick)
    }

    /// A guard for a scope whose entry the caller has just recorded, stamped `tick`, with
    /// callsite id `id` (never 0: a guard of id 0 records no exit).
    #[inline(always)]
    pub(crate) fn opened(id: u32, tick: u64) -> Self {
        let entry = NonZeroU32::new(id).map(|id| Entry {
            id,
            key: RawEvent::end_key(id.get(), tick),
        });
        Self::from_inner(Inner {
            entry,
            observed: None,
        })
    }

    /// A guard holding `inner`; without the `enabled` feature, a guard that holds nothing (no
    /// thread records then, see `thread::thread_wants_at`, and no observer is told).
    #[inline(always)]
    const fn from_inner(inner: Inner) -> Self {
        #[cfg(not(feature = "enabled"))]
        let _ = inner;
        Self {
            #[cfg(feature = "enabled")]
            inner,
            _not_send: PhantomData,
        }
    }

    #[cfg(feature = "enabled")]
    #[inline(always)]
    fn inner(&self) -> Option<&Inner> {
        Some(&self.inner)
    }

    #[cfg(not(feature = "enabled"))]
    #[inline(always)]
    fn inner(&self) -> Option<&Inner> {
        None
    }

    #[cfg(feature = "enabled")]
    #[inline(always)]
    fn inner_mut(&mut self) -> Option<&mut Inner> {
        Some(&mut self.inner)
    }

    #[cfg(not(feature = "enabled"))]
    #[inline(always)]
    fn inner_mut(&mut self) -> Option<&mut Inner> {
        None
    }
}

impl Drop for ScopeGuard {
    #[inline(always)]
    fn drop(&mut self) {
        let Some(inner) = self.inner_mut() else {
            return;
        };
        if let Some(entry) = inner.entry {
            thread::push(RawEvent::end(entry.key, crate::record::clock::now()));
        }
        if let Some(slot) = inner.observed.take() {
            observe::exit(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard's state costs no more than its three `u32`s (entry id, key, observers' slot)
    /// with the `enabled` feature, and nothing without it.
    #[test]
    fn a_guard_is_no_bigger_than_its_words() {
        let expected = if cfg!(feature = "enabled") { 12 } else { 0 };
        assert_eq!(std::mem::size_of::<ScopeGuard>(), expected);
        assert_eq!(std::mem::size_of::<Option<Entry>>(), 8);
        assert_eq!(std::mem::size_of::<Option<Slot>>(), 4);
    }

    #[test]
    fn an_inactive_guard_records_nothing() {
        assert!(!ScopeGuard::inactive().is_recording());
        assert!(!ScopeGuard::opened(0, 5).is_recording());
    }
}
