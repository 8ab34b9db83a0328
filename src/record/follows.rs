//! Scopes that take part in links: a scope that follows from a [`Link`], and a scope with a
//! sequence number of its own ([`SeqGuard`]).

use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::record::link::Link;
use crate::record::scope::ScopeGuard;
use crate::record::{clock, thread};

impl ScopeGuard {
    /// Enters a scope for a static callsite that follows from `link`; made by
    /// `scope!("name", follows = link)`.
    #[inline]
    pub(crate) fn enter_following(callsite: &'static Callsite, link: &Link) -> Self {
        if !link.is_recorded() {
            return Self::enter(callsite);
        }
        let observed = Self::observe(callsite, Some(*link));
        if !thread::thread_wants() {
            return Self::observed_only(observed);
        }
        let id = callsite.id();
        let tick = clock::now();
        thread::push_all(&RawEvent::begin_follows(
            id,
            tick,
            link.thread(),
            link.seq(),
        ));
        Self::opened(id, tick).with_observed(observed)
    }
}

/// A scope with a sequence number of its own: made by `scope!("name", seq)`. Its
/// [`link`](SeqGuard::link) is the (sequence number, thread) pair of the scope, for the work it
/// hands to other threads.
#[must_use = "the scope ends when the guard is dropped: bind it with `let g = scope!(..);`"]
#[derive(Debug)]
pub struct SeqGuard {
    guard: ScopeGuard,
    link: Link,
}

impl SeqGuard {
    /// Enters a scope for a static callsite and numbers it.
    #[inline]
    pub(crate) fn enter(callsite: &'static Callsite) -> Self {
        if !thread::thread_wants() {
            let observed = ScopeGuard::observe(callsite, None);
            return Self {
                guard: ScopeGuard::observed_only(observed),
                link: Link::NONE,
            };
        }
        let id = callsite.id();
        let (seq, thread) = thread::next_seq();
        let link = Link::new(seq, thread);
        // Observers hear of the entry before it is recorded, with the scope's own link.
        let observed = ScopeGuard::observe(callsite, Some(link));
        let tick = clock::now();
        thread::push_all(&[
            RawEvent::begin(id, tick),
            RawEvent::new(RawKind::Link, seq, tick),
        ]);
        Self {
            guard: ScopeGuard::opened(id, tick).with_observed(observed),
            link,
        }
    }

    /// A guard that records nothing.
    pub const fn inactive() -> Self {
        Self {
            guard: ScopeGuard::inactive(),
            link: Link::NONE,
        }
    }

    /// The scope's link: its sequence number and thread.
    pub fn link(&self) -> Link {
        self.link
    }

    /// True when this guard recorded its scope's entry.
    pub fn is_recording(&self) -> bool {
        self.guard.is_recording()
    }
}
