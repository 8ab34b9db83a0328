//! Async calls: one logical span from first poll to completion, plus one slice per poll on the
//! thread that polled.
//!
//! Nothing thread-bound is held across `.await`: the [`AsyncSpanGuard`] only carries ids, and each
//! poll opens and closes an ordinary [`ScopeGuard`] on the polling thread.

use std::future::{Future, poll_fn};
use std::pin::pin;

use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::record::scope::ScopeGuard;
use crate::record::{clock, thread};

/// The logical span of one async call; ends (recording an end) when dropped, whether the call
/// completed or was cancelled.
#[derive(Debug)]
pub struct AsyncSpanGuard {
    callsite: &'static Callsite,
    /// 0 when the span's beginning was not recorded.
    span: u32,
}

impl AsyncSpanGuard {
    /// Begins a span now if a session wants this thread.
    #[inline]
    pub fn begin(callsite: &'static Callsite) -> Self {
        let span = if thread::thread_wants() {
            let span = thread::next_span_id();
            push_tagged(RawKind::AsyncBegin, callsite.id(), span);
            span
        } else {
            0
        };
        Self { callsite, span }
    }

    /// Opens the slice of one poll on this thread; it closes when the guard drops.
    #[inline]
    pub fn poll(&self) -> ScopeGuard {
        if thread::thread_wants() {
            let id = self.callsite.id();
            let tick = push_tagged(RawKind::PollBegin, id, self.span);
            ScopeGuard::opened(id, tick)
        } else {
            ScopeGuard::inactive()
        }
    }
}

impl Drop for AsyncSpanGuard {
    fn drop(&mut self) {
        if self.span != 0 && thread::thread_wants() {
            push_tagged(RawKind::AsyncEnd, self.callsite.id(), self.span);
        }
    }
}

/// Pushes `kind` for callsite `id` now, followed by `payload` (a [`RawKind::Payload`]);
/// returns the tick.
#[inline]
fn push_tagged(kind: RawKind, id: u32, payload: u32) -> u64 {
    let tick = clock::now();
    thread::push_all(&[RawEvent::new(kind, id, tick), RawEvent::payload(payload, 0)]);
    tick
}

/// Runs `fut` as one async call named by `callsite`: the code `#[profile] async fn` expands to.
pub async fn instrument<F: Future>(callsite: &'static Callsite, fut: F) -> F::Output {
    let span = AsyncSpanGuard::begin(callsite);
    let mut fut = pin!(fut);
    poll_fn(|cx| {
        let _poll = span.poll();
        fut.as_mut().poll(cx)
    })
    .await
}
