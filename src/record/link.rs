//! Links between a scope and the scopes that follow from it on other threads (PyTorch's
//! sequence number plus forward thread id, generalised to any hand-off of work).

use crate::record::thread;

/// Where a piece of work was created: a sequence number from its thread's counter and that
/// thread's id. Capture it with [`link()`] (or take a sequenced scope's own, [`SeqGuard::link`](crate::SeqGuard::link)),
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
/// let found = trace.flows.iter().find(|l| trace.span(l.follower).1.name() == "work");
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

    /// The link with sequence number `seq` on thread `thread`.
    pub(crate) const fn new(seq: u32, thread: u64) -> Self {
        Self { seq, thread }
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
    match thread::capture_link() {
        Some((seq, thread)) => Link::new(seq, thread),
        None => Link::NONE,
    }
}
