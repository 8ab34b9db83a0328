//! The RAII guard that records a scope: the hot path.

use std::marker::PhantomData;

use crate::callsite::{self, Callsite};
use crate::event::RawEvent;
use crate::{clock, registry};

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
    _not_send: PhantomData<*const ()>,
}

impl ScopeGuard {
    /// Enters a scope for a static callsite.
    #[inline(always)]
    pub fn enter(callsite: &'static Callsite) -> Self {
        if registry::thread_wants() {
            Self::begin(callsite.id())
        } else {
            Self::inactive()
        }
    }

    /// Enters a scope with a name known only at run time; see [`scope!`](crate::scope!).
    ///
    /// Slower than a static name: the first use of each distinct name on a thread interns it
    /// (a lock and, once per process, a leaked copy), later uses cost a hash lookup.
    #[inline]
    pub fn enter_dynamic(name: &str) -> Self {
        if registry::thread_wants() {
            Self::begin(callsite::intern(name))
        } else {
            Self::inactive()
        }
    }

    /// A guard that records nothing.
    #[inline(always)]
    pub const fn inactive() -> Self {
        Self {
            id: 0,
            _not_send: PhantomData,
        }
    }

    /// True when this guard recorded its scope's entry (and so will record its exit).
    pub fn is_recording(&self) -> bool {
        self.id != 0
    }

    #[inline(always)]
    fn begin(id: u32) -> Self {
        // The tick is taken last so that the work above is not billed to the scope.
        registry::push(RawEvent::begin(id, clock::now()));
        Self::opened(id)
    }

    /// A guard for a scope whose entry the caller has just recorded.
    #[inline(always)]
    pub(crate) fn opened(id: u32) -> Self {
        Self {
            id,
            _not_send: PhantomData,
        }
    }
}

impl Drop for ScopeGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.id != 0 {
            registry::push(RawEvent::end(self.id, clock::now()));
        }
    }
}
