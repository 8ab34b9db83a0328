//! Counters, value distributions and instants: `counter!`, `value!` and `instant!`.
//!
//! Each call is one tick and one or two records on the thread's own buffer, like a scope's
//! entry: a counter or value sample is a [`RawKind::CounterSet`], [`RawKind::CounterAdd`] or
//! [`RawKind::Value`] record with the callsite id and the tick, and a payload with the number;
//! an instant is a [`RawKind::Instant`] (or [`RawKind::InstantProcess`]) record, followed by
//! its arguments' records when it has any. The macros test [`recording`] first, so while no
//! session records the thread a call costs one relaxed load and a branch and evaluates
//! nothing.

use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};
use crate::record::{clock, thread};

/// A number that a counter or a value distribution takes: an integer or a float.
///
/// Integers are recorded as `i64` (exact), floats as `f64`. A `u64`, `usize` or `u128` above
/// `i64::MAX`, or an `i128` outside `i64`'s range, is recorded as the nearest `f64`.
pub trait Numeric: Copy {
    /// The number's type tag and 64 bits, as a counter's payload record holds them
    /// ([`RawEvent::NUMBER_INT`] or [`RawEvent::NUMBER_FLOAT`]); used by the macros.
    #[doc(hidden)]
    fn to_raw(self) -> (u32, u64);
}

macro_rules! number_int {
    ($($t:ty),*) => {$(
        impl Numeric for $t {
            #[inline(always)]
            fn to_raw(self) -> (u32, u64) {
                (RawEvent::NUMBER_INT, i64::from(self) as u64)
            }
        }
    )*};
}
number_int!(i8, i16, i32, i64, u8, u16, u32);

macro_rules! number_wide {
    ($($t:ty),*) => {$(
        impl Numeric for $t {
            #[inline(always)]
            fn to_raw(self) -> (u32, u64) {
                match i64::try_from(self) {
                    Ok(v) => (RawEvent::NUMBER_INT, v as u64),
                    Err(_) => (RawEvent::NUMBER_FLOAT, (self as f64).to_bits()),
                }
            }
        }
    )*};
}
number_wide!(isize, u64, usize, i128, u128);

impl Numeric for f64 {
    #[inline(always)]
    fn to_raw(self) -> (u32, u64) {
        (RawEvent::NUMBER_FLOAT, self.to_bits())
    }
}

impl Numeric for f32 {
    #[inline(always)]
    fn to_raw(self) -> (u32, u64) {
        (RawEvent::NUMBER_FLOAT, f64::from(self).to_bits())
    }
}

/// True when a session records this thread: one relaxed load and a branch while none runs.
#[inline(always)]
pub(crate) fn recording() -> bool {
    thread::thread_wants()
}

/// Records a sample of `kind` ([`RawKind::CounterSet`], [`RawKind::CounterAdd`] or
/// [`RawKind::Value`]) of `callsite` with `value`, stamped now; the caller has checked
/// [`recording`].
#[inline(always)]
pub(crate) fn sample(callsite: &'static Callsite, kind: RawKind, value: impl Numeric) {
    let raw = value.to_raw();
    let id = callsite.id();
    thread::push_all(&RawEvent::sample(kind, id, clock::now(), raw));
}

/// Records an instant of `callsite` without arguments, stamped now: process-wide when
/// `process`, else on this thread; the caller has checked [`recording`].
#[inline(always)]
pub(crate) fn instant(callsite: &'static Callsite, process: bool) {
    let kind = instant_kind(process);
    let id = callsite.id();
    thread::push(RawEvent::new(kind, id, clock::now()));
}

/// The record kind of an instant, process-wide or thread-scoped.
#[inline(always)]
pub(crate) const fn instant_kind(process: bool) -> RawKind {
    if process {
        RawKind::InstantProcess
    } else {
        RawKind::Instant
    }
}
