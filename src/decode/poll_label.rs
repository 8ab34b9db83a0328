//! The labels of poll slices and of async calls, by argument or by origin
//! ([`call_labels`](super::call_labels)).

use crate::record::hash::FxHashMap;

/// How poll slices are labelled.
pub(crate) enum PollLabels<'a> {
    /// Not at all.
    None,
    /// By the value of the first argument with this key (formatted).
    Arg(&'a str),
    /// By the name of the origin of a flow that the slice follows: per thread (index among
    /// the threads read), by slice index.
    Origin(&'a [FxHashMap<u32, &'static str>]),
}

/// The label of a poll slice, and of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CallLabel {
    /// The value of an argument, formatted.
    Arg(Box<str>),
    /// The name of the origin's callsite.
    Origin(&'static str),
}

/// A poll slice's label, with where the slice is: (start, thread index, slice index), the
/// order in which a later poll's label replaces an earlier one's.
pub(super) struct PollLabel {
    pub(super) at: (u64, usize, u32),
    pub(super) label: CallLabel,
}
