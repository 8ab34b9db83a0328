//! The RAII guard that records a scope: the hot path.

use std::marker::PhantomData;

use crate::record::callsite::{self, Callsite};
#[cfg(feature = "enabled")]
use crate::record::event::RawEvent;
use crate::record::link::Link;
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
    /// Callsite id of the recorded `Begin`, or 0 when nothing was recorded.
    id: u32,
    /// The entry's key ([`RawEvent::end_key`]), carried by the exit so that it closes this
    /// entry whatever order guards are dropped in. (Without the `enabled` feature nothing is
    /// recorded and the guard holds only `id`.)
    #[cfg(feature = "enabled")]
    key: u32,
    /// The observers' slot for this scope's exit, or 0 when no observer took its entry.
    #[cfg(feature = "enabled")]
    observed: u32,
    _not_send: PhantomData<*const ()>,
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
    /// exit.
    #[inline(always)]
    pub(crate) fn observe(callsite: &'static Callsite, link: Option<Link>) -> u32 {
        Self::observe_with(callsite, link, Vec::new)
    }

    /// [`ScopeGuard::observe`] for a scope whose arguments `args` makes, only if an observer
    /// will read them.
    #[inline(always)]
    pub(crate) fn observe_with(
        callsite: &'static Callsite,
        link: Option<Link>,
        args: impl FnOnce() -> Vec<(&'static str, Value)>,
    ) -> u32 {
        if cfg!(feature = "enabled") && observe::any() {
            observe::enter(callsite, link, args())
        } else {
            0
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
            callsite::by_id(id).map_or(0, |c| Self::observe(c, None))
        } else {
            0
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
        Self {
            id: 0,
            #[cfg(feature = "enabled")]
            key: 0,
            #[cfg(feature = "enabled")]
            observed: 0,
            _not_send: PhantomData,
        }
    }

    /// A guard that records nothing but tells observers of its exit (slot `observed`).
    #[inline(always)]
    pub(crate) fn observed_only(observed: u32) -> Self {
        Self::inactive().with_observed(observed)
    }

    /// This guard, telling observers of its exit through slot `observed` (0: none).
    #[inline(always)]
    #[cfg_attr(not(feature = "enabled"), allow(unused_mut))]
    pub(crate) fn with_observed(mut self, observed: u32) -> Self {
        #[cfg(feature = "enabled")]
        {
            self.observed = observed;
        }
        let _ = observed;
        self
    }

    /// True when this guard recorded its scope's entry (and so will record its exit).
    pub fn is_recording(&self) -> bool {
        self.id != 0
    }

    #[inline(always)]
    fn begin(id: u32) -> Self {
        let tick = thread::push_begin(id);
        Self::opened(id, tick)
    }

    /// A guard for a scope whose entry the caller has just recorded, stamped `tick`.
    #[inline(always)]
    pub(crate) fn opened(id: u32, tick: u64) -> Self {
        // Without the `enabled` feature no thread records (see `thread::thread_wants_at`),
        // so this is never reached with an entry to close.
        #[cfg(not(feature = "enabled"))]
        let _ = tick;
        Self {
            id,
            #[cfg(feature = "enabled")]
            key: RawEvent::end_key(id, tick),
            #[cfg(feature = "enabled")]
            observed: 0,
            _not_send: PhantomData,
        }
    }
}

impl Drop for ScopeGuard {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(feature = "enabled")]
        if self.id != 0 {
            thread::push(RawEvent::end(self.key, crate::record::clock::now()));
        }
        #[cfg(feature = "enabled")]
        if self.observed != 0 {
            observe::exit(self.observed);
        }
    }
}
