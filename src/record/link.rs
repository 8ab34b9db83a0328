//! Links between a scope and the scopes that follow from it on other threads (PyTorch's
//! sequence number plus forward thread id, generalised to any hand-off of work).

use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::record::scope::ScopeGuard;
use crate::record::{clock, registry};

/// Where a piece of work was created: a sequence number from its thread's counter and that
/// thread's id. Capture it with [`link()`] (or take a sequenced scope's own, [`SeqGuard::link`]),
/// move it with the work to another thread, and open the scope that does the work with
/// `scope!("name", follows = link)`. Post-processing matches the two by (sequence number,
/// thread id), also after the creating thread has exited; the report can split a scope's
/// statistics by the scope that caused it ([`Report::by_origin`](crate::report::Report::by_origin))
/// and the Chrome export draws a flow arrow from one to the other.
///
/// A link captured while the thread is not recorded is [`Link::NONE`], and a scope that
/// follows from it is a plain scope.
///
/// ```
/// use tickscope::{Profiler, scope};
///
/// let prof = Profiler::start();
/// let (job, link) = {
///     let _g = scope!("enqueue");
///     (21, tickscope::link())
/// };
/// let worker = std::thread::spawn(move || {
///     let _g = scope!("work", follows = link);
///     job * 2
/// });
/// assert_eq!(worker.join().unwrap(), 42);
/// prof.stop();
/// let trace = prof.trace();
/// let found = trace.links.iter().find(|l| trace.span(l.follower).1.name() == "work");
/// let origin = found.unwrap().origin.unwrap();
/// assert_eq!(trace.span(origin).1.name(), "enqueue");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Link {
    seq: u32,
    thread: u64,
}

impl Link {
    /// A link to nothing: what [`link()`] returns while the thread is not recorded.
    pub const NONE: Self = Self { seq: 0, thread: 0 };

    /// The sequence number on the creating thread (from 1; 0 for [`Link::NONE`]).
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// tickscope's id of the creating thread (0 for [`Link::NONE`]).
    pub fn thread(&self) -> u64 {
        self.thread
    }

    /// True when the link was recorded (is not [`Link::NONE`]).
    pub fn is_recorded(&self) -> bool {
        self.seq != 0
    }
}

/// Captures a link inside the innermost open scope of this thread: the next number of the
/// thread's sequence counter, recorded with a tick. Costs one relaxed load and a branch when
/// no session records the thread, and nothing without the `enabled` feature.
#[inline]
pub fn link() -> Link {
    if !cfg!(feature = "enabled") {
        return Link::NONE;
    }
    match registry::capture_link() {
        Some((seq, thread)) => Link { seq, thread },
        None => Link::NONE,
    }
}

impl ScopeGuard {
    /// Enters a scope for a static callsite that follows from `link`; made by
    /// `scope!("name", follows = link)`.
    #[inline]
    pub fn enter_following(callsite: &'static Callsite, link: &Link) -> Self {
        if !link.is_recorded() {
            return Self::enter(callsite);
        }
        let observed = Self::observe(callsite, Some(*link));
        if !registry::thread_wants() {
            return Self::observed_only(observed);
        }
        let id = callsite.id();
        let tick = clock::now();
        registry::push_all(&RawEvent::begin_follows(id, tick, link.thread, link.seq));
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
    pub fn enter(callsite: &'static Callsite) -> Self {
        if !registry::thread_wants() {
            let observed = ScopeGuard::observe(callsite, None);
            return Self {
                guard: ScopeGuard::observed_only(observed),
                link: Link::NONE,
            };
        }
        let id = callsite.id();
        let (seq, thread) = registry::next_seq();
        let link = Link { seq, thread };
        // Observers hear of the entry before it is recorded, with the scope's own link.
        let observed = ScopeGuard::observe(callsite, Some(link));
        let tick = clock::now();
        registry::push_all(&[
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
