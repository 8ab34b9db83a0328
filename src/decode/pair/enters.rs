//! The enters of `tracing` spans on one thread, waiting for their span's close: resolved on
//! the thread when every enter was there (one enter is a plain scope, several an async
//! call), else handed to the marks matched across threads.
//!
//! A reading that sums spans as they become final ([`Pairing::defer_enters`](super::Pairing::defer_enters)) holds the
//! slice of an enter back until it is resolved: a plain scope is handed over as one, a slice
//! that made a mark as a poll without its call ([`SpanKind::Poll`] of no call), which the
//! matching of marks across threads makes a scope or a poll
//! ([`call_stream`](crate::decode::call_stream)). That matching reads the threads again
//! with [`Pairing::eager_enters`](super::Pairing::eager_enters): each enter is marked as it comes, in time order with the
//! thread's other marks, and one found plain later is taken back ([`Pairing::take_retracted`](super::Pairing::take_retracted)).

use crate::record::hash::FxHashSet;

use crate::record::callsite::Callsite;
use crate::trace::{MemoryStats, Span};

/// A final slice held back until its enter is resolved, with its memory figures.
pub(super) type Held = (u32, Span, Option<MemoryStats>);

/// The enters of `tracing` spans on one thread ([`RawKind::SpanEnter`](crate::record::event::RawKind::SpanEnter)) whose close has not
/// come yet. A close that says every enter of its span was on its own thread resolves them
/// here: one enter is a plain scope (no mark), several an async call (marks). Any other close,
/// and the enters left at the end, go to the marks matched across threads.
#[derive(Default)]
pub(super) struct Entered {
    /// Per enter, in the order of their slices: the span id, the slice's index in the
    /// thread, its start and callsite.
    pub(super) enters: Vec<(u64, u32, u64, &'static Callsite)>,
    /// Span ids whose enters were moved to the marks early (too many waiting): their close
    /// here is marked too, whatever it says.
    pub(super) moved: FxHashSet<u64>,
    /// More than [`MOVED_MAX`] spans were moved: every close here is marked. (The ids of
    /// spans moved here and closed on other threads would otherwise pile up. A close marked
    /// though its span was plain here gives the same scope: the matching across threads
    /// finds it entered once.)
    pub(super) moved_all: bool,
    /// Final slices are held back while their enter waits ([`Pairing::defer_enters`](super::Pairing::defer_enters)).
    pub(super) defer: bool,
    /// Enters are marked as they come ([`Pairing::eager_enters`](super::Pairing::eager_enters)).
    pub(super) eager: bool,
    /// The final slices of enters still waiting.
    pub(super) held: Vec<Held>,
    /// Slices held back whose enter was resolved since: handed over at the next drain.
    pub(super) ready: Vec<Held>,
    /// Of eager marks: the slices (indices) whose enter was marked and then found plain.
    pub(super) retracted: Vec<u32>,
}

/// Enters a thread keeps waiting for their close before the oldest half go to the marks:
/// few, so that each close looks through few (the spans entered and not yet closed here are
/// those nested at the moment, unless their closes come on other threads: those go to the
/// marks anyway).
pub(super) const ENTERED_MAX: usize = 64;

/// Span ids a thread remembers as moved to the marks ([`Entered::moved`]), at most.
pub(super) const MOVED_MAX: usize = 1 << 14;

impl Entered {
    /// True when the slice at `index` is an enter still waiting.
    #[inline]
    pub(super) fn waits(&self, index: u32) -> bool {
        self.defer
            && !self.enters.is_empty()
            && self.enters.binary_search_by_key(&index, |e| e.1).is_ok()
    }

    /// Holds back the final slice at `index` (see [`Entered::waits`]).
    pub(super) fn hold(&mut self, index: u32, span: &Span, memory: Option<&MemoryStats>) {
        self.held.push((index, span.clone(), memory.copied()));
    }
}
