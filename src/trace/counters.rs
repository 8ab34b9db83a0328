//! Counters, value distributions and instants of a trace (`counter!`, `value!`, `instant!`).

use crate::record::callsite::Callsite;
use crate::record::value::Value;

/// A number a counter or a value distribution took: integers stay exact.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(untagged))]
pub enum Number {
    /// An integer (any Rust integer type that fits `i64`).
    Int(i64),
    /// A float (or an integer outside `i64`'s range).
    Float(f64),
}

impl Number {
    /// The number as an `f64` (integers beyond 2⁵³ are rounded).
    pub fn as_f64(self) -> f64 {
        match self {
            Self::Int(v) => v as f64,
            Self::Float(v) => v,
        }
    }
}

/// `a + b`: exact for two integers (a float when the sum leaves `i64`'s range), a float sum
/// otherwise.
impl std::ops::Add for Number {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => match a.checked_add(b) {
                Some(sum) => Self::Int(sum),
                None => Self::Float(a as f64 + b as f64),
            },
            (a, b) => Self::Float(a.as_f64() + b.as_f64()),
        }
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(v) => v.fmt(f),
            Self::Float(v) => v.fmt(f),
        }
    }
}

/// What a counter sample did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterOp {
    /// `counter!("name", set = n)`: the counter became `n`.
    Set,
    /// `counter!("name", add = n)`: `n` was added to the counter.
    Add,
}

/// One sample of a counter, on the counter's process-wide timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CounterSample {
    /// When, ns since the Unix epoch.
    pub ns: u64,
    /// The thread that recorded it (a thread id of the track's process).
    pub thread: u64,
    /// Set or add.
    pub op: CounterOp,
    /// The number given to the macro: the new value of a `set`, the amount of an `add`.
    pub amount: Number,
    /// The counter's value after this sample: `amount` after a `set`; after an `add`, the
    /// value before it plus `amount` (the value before the first sample is 0).
    pub value: Number,
}

/// A process-wide counter: every thread's samples of one name, merged in time order.
///
/// Samples of equal times keep the order of their threads in [`Trace::threads`](super::Trace::threads)
/// and, on one thread, the order they were recorded in. The running value of `add`s is exact
/// for integers, whichever threads added (see [`Number`]'s `+`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CounterTrack {
    /// The counter's name.
    pub name: &'static str,
    /// The process it was recorded in: its index in [`Trace::processes`](super::Trace::processes).
    pub process: u32,
    /// Samples in time order.
    pub samples: Vec<CounterSample>,
}

impl CounterTrack {
    /// The counter's last sample (its value at the end of the window).
    pub fn last(&self) -> Option<&CounterSample> {
        self.samples.last()
    }

    /// The counter's values after each sample, in time order.
    pub fn values(&self) -> impl Iterator<Item = Number> + '_ {
        self.samples.iter().map(|s| s.value)
    }
}

/// One sample of a value distribution (`value!`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ValueSample {
    /// When, ns since the Unix epoch.
    pub ns: u64,
    /// The thread that recorded it.
    pub thread: u64,
    /// The value.
    pub value: Number,
}

/// Every sample of one value distribution's name in one process, in time order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ValueSeries {
    /// The distribution's name.
    pub name: &'static str,
    /// The process it was recorded in: its index in [`Trace::processes`](super::Trace::processes).
    pub process: u32,
    /// Samples in time order.
    pub samples: Vec<ValueSample>,
}

/// Where an instant shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstantScope {
    /// On the track of the thread that recorded it (`instant!("name")`).
    Thread,
    /// Across its process (`instant!("name", process)`).
    Process,
}

/// A zero-duration event (`instant!`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Instant {
    /// Where it was recorded; [`Instant::name`] is its name.
    pub callsite: &'static Callsite,
    /// When, ns since the Unix epoch.
    pub ns: u64,
    /// The process it was recorded in: its index in [`Trace::processes`](super::Trace::processes).
    pub process: u32,
    /// The thread that recorded it.
    pub thread: u64,
    /// Thread-scoped or process-wide.
    pub scope: InstantScope,
    /// Its arguments (`instant!("name", key = value)`), in the order given.
    pub args: Vec<(&'static str, Value)>,
}

impl Instant {
    /// The instant's name.
    pub fn name(&self) -> &'static str {
        self.callsite.name()
    }
}
