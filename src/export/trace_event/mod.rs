//! The Trace Event JSON writer shared by the [Chrome](super::chrome) and
//! [Kineto](super::kineto) dialects. A [`Dialect`] says what sets one apart (header, time base,
//! categories, extra events); [`write()`] streams everything else: process and thread metadata,
//! one track per [lane](super::lanes) of each thread, one slice per span, flow arrows for
//! links, and the `otherData` trailer.
//!
//! Events are formatted by hand into a buffer flushed in 64 KiB blocks, so memory use does not
//! depend on the trace size, except for a few words per span of one thread at a time where the
//! dialect moves times ([`Dialect::times`]) or the thread's scopes were dropped out of order.
//!
//! A trace of several processes ([`Trace::from_captures`]) is written process by process under
//! one `pid` each ([`pids`]), with its own `process_name`, its threads (a thread is known by
//! its process and id: two processes may both have thread 1), flows, async calls and memory
//! counter; every time counts from the one origin, so the processes line up.

mod dialect;
mod events;
mod threads;
mod writer;

pub(crate) use dialect::{Dialect, Placed, Times};
pub(crate) use writer::{nearest_micros, pids, write, write_captures};
