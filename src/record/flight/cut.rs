//! The scopes a recycled chunk leaves open: [`CutScope`], and the scan that follows them
//! through a thread's records.

use crate::record::event::{RawEvent, RawKind};

/// A scope entered in a recycled chunk and not exited by the end of it: open at the start of
/// its thread's retained window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CutScope {
    /// Its callsite id.
    pub(crate) id: u32,
    /// The tick of its entry.
    pub(crate) tick: u64,
    /// A poll of an async call rather than a scope.
    pub(crate) poll: bool,
    /// The key its exit carries.
    pub(super) key: u32,
}

impl CutScope {
    /// The scope `record` (an entry) enters.
    #[inline]
    pub(super) fn entered(record: &RawEvent, poll: bool) -> Self {
        Self {
            id: record.id,
            tick: record.tick,
            poll,
            key: RawEvent::end_key(record.id, record.tick),
        }
    }

    /// The cut scope `record` enters: `None` for a record that enters none.
    pub(crate) fn from_record(record: &RawEvent) -> Option<Self> {
        let poll = match record.kind {
            RawKind::Begin => false,
            RawKind::PollBegin => true,
            _ => return None,
        };
        Some(Self {
            id: record.id,
            tick: record.tick,
            poll,
            key: RawEvent::end_key(record.id, record.tick),
        })
    }

    /// Its entry record.
    pub(crate) fn record(&self) -> RawEvent {
        let kind = if self.poll {
            RawKind::PollBegin
        } else {
            RawKind::Begin
        };
        RawEvent::new(kind, self.id, self.tick)
    }
}

/// Follows the scopes entered and exited in `records` (a chunk of one thread) on the stack
/// of scopes `open`.
pub(super) fn scan(open: &mut Vec<CutScope>, records: &[RawEvent]) {
    let mut rest = records;
    while let Some((record, tail)) = rest.split_first() {
        rest = tail;
        let kind = record.kind;
        if kind == RawKind::Begin {
            let entered = CutScope::entered(record, false);
            // A scope exited right away (a leaf, the most common record pair) leaves the stack
            // as it was: the same as pushing it and popping it.
            if let Some((next, tail)) = rest.split_first()
                && next.kind == RawKind::End
                && next.id == entered.key
            {
                rest = tail;
                continue;
            }
            open.push(entered);
        } else if kind == RawKind::End {
            if open.last().is_some_and(|s| s.key == record.id) {
                open.pop();
            } else if let Some(at) = open.iter().rposition(|s| s.key == record.id) {
                open.remove(at);
            }
        } else if kind == RawKind::BeginFollows || kind == RawKind::SpanEnter {
            open.push(CutScope::entered(record, false));
        } else if kind == RawKind::PollBegin {
            open.push(CutScope::entered(record, true));
        }
    }
}
