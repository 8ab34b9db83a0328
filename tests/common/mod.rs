//! Helpers shared by the integration tests that drive futures by hand.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Pending on its first poll, ready on the second.
#[derive(Default)]
pub struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Polls `fut` once with a waker that does nothing.
pub fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}
