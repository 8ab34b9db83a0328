//! What tracks and slices carry besides spans: counter values and units, instants, slice
//! links.

use crate::trace::Value;

/// A counter sample's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CounterValue {
    /// An integer (`counter_value`).
    Int(i64),
    /// A float (`double_counter_value`).
    Float(f64),
}

/// What a counter track counts (`CounterDescriptor.unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// No unit.
    Unspecified = 0,
    /// Bytes.
    Bytes = 3,
}

/// One instant event: its name, time (Unix ns) and arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Instant<'a> {
    pub(crate) name: &'a str,
    pub(crate) ns: u64,
    pub(crate) args: &'a [(&'a str, Value)],
}

/// What links put on a slice: flows (id, whether the flow ends there) and PyTorch's link
/// arguments (`Sequence number`, and `Fwd thread id` on a follower), as in the Chrome export.
#[derive(Default)]
pub(super) struct SliceLinks {
    pub(super) flows: Vec<(u64, bool)>,
    /// The sequence number, and the forward thread id of a follower.
    pub(super) args: Option<(u32, Option<u64>)>,
}
