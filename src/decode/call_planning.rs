//! The planning part of the merge of marks ([`call_plan`](super::call_plan)): what each
//! call's first poll says of where it stands, and the call of each poll slice, written as the
//! marks are matched.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::Arc;

use crate::record::hash::FxHashMap;

use super::async_spans::{Chain, Mark, MarkKind};
use super::spill::Spill;
use super::summary::PollBits;

/// A call's parent or trace that is no span (of a call with no parent).
pub(crate) const NO_PARENT: u64 = u64::MAX;

/// The flag of a [`Node`] that is a span of a thread.
pub(super) const SPAN: u64 = 1 << 63;

/// A node of the tree as the plan names it: a call (its index among the trace's calls) or,
/// with [`SPAN`] set, a span of a thread (the thread's index among those planned, and the
/// span's index there).
pub(crate) type Node = u64;

/// What a trace is made of: its root [`Node`], and of a call, its start (what orders it
/// among the calls of other sessions of its process).
pub(crate) type Root = (Node, u64);

/// The span at `index` of thread `thread` (among those planned) as a [`Node`].
fn span_node(thread: usize, index: u32) -> Node {
    SPAN | (thread as u64) << 32 | u64::from(index)
}

/// What the plan found of a call at its first poll.
#[derive(Clone, Copy)]
pub(super) struct Planned {
    /// The span around its first poll ([`NO_PARENT`]: none).
    pub(super) parent: Node,
    /// What its trace is made of.
    pub(super) trace: Root,
    /// Its first poll's start and thread.
    first: (u64, usize),
}

/// Bytes of a poll slice's entry: its index, its call's rank and start, its call's trace
/// ([`Root`]).
pub(super) const POLL: usize = 32;

/// The planning part of the merge of marks ([`Matcher::plan`](super::call_match::Matcher)).
pub(super) struct Planning {
    /// Calls cut at a flight recorder's window start: they come first.
    pub(super) cut: u64,
    /// Per thread, which `tracing` enters' slices are polls.
    pub(super) bits: Vec<Arc<PollBits>>,
    /// Per thread, the trace of each poll slice (of a call, or of none) that a later mark of
    /// the thread may be inside.
    slices: Vec<FxHashMap<u32, Root>>,
    /// Per thread, the slices of `slices` final on their thread (read ahead of the marks
    /// matched), by their end: let go once a mark of the thread comes after it.
    finals: Vec<BinaryHeap<Reverse<(u64, u32)>>>,
    /// Per thread, the entries of the polls matched at the latest time, to be written in
    /// the order of their slices.
    pending: Vec<(u64, Vec<[u8; POLL]>)>,
    pub(super) polls: Spill,
    /// Something could not be planned as the marks came.
    pub(super) broken: bool,
    /// The first error writing.
    pub(super) failed: Option<io::Error>,
}

impl Planning {
    pub(super) fn new(bits: Vec<Arc<PollBits>>, cut: u64) -> Self {
        let threads = bits.len();
        Self {
            cut,
            bits,
            slices: vec![FxHashMap::default(); threads],
            finals: vec![BinaryHeap::new(); threads],
            pending: vec![(0, Vec::new()); threads],
            polls: Spill::new(threads, POLL),
            broken: false,
            failed: None,
        }
    }

    /// `mark`, of the slice at `index` of its thread, is a poll (or an enter) of the call of
    /// rank `rank` (among the trace's calls, holes included), whose plan so far is `planned`.
    pub(super) fn polled(
        &mut self,
        planned: &mut Option<Planned>,
        (rank, start): (u64, u64),
        mark: &Mark,
        index: u32,
    ) {
        let thread = mark.thread;
        self.forget(thread, mark.ns);
        self.broken |= mark.chain.broken;
        let planned = match *planned {
            Some(planned) => {
                // The first poll must come first (at one instant, of the first thread).
                self.broken |= (mark.ns, thread) < planned.first;
                planned
            }
            None => {
                let first = self.first_poll((rank, start), mark);
                *planned = Some(first);
                first
            }
        };
        let is_poll = match mark.what {
            MarkKind::Enter(_) => self.bits[thread].get(index),
            _ => true,
        };
        if is_poll {
            self.slices[thread].insert(index, planned.trace);
        }
        let mut entry = [0u8; POLL];
        entry[..4].copy_from_slice(&index.to_le_bytes());
        entry[4..8].copy_from_slice(&(rank as u32).to_le_bytes());
        entry[8..16].copy_from_slice(&start.to_le_bytes());
        entry[16..24].copy_from_slice(&planned.trace.0.to_le_bytes());
        entry[24..].copy_from_slice(&planned.trace.1.to_le_bytes());
        if self.pending[thread].0 != mark.ns {
            self.write(thread);
            self.pending[thread].0 = mark.ns;
        }
        self.pending[thread].1.push(entry);
    }

    /// What the first poll of `call`, `mark`, says of it.
    fn first_poll(&mut self, (rank, start): (u64, u64), mark: &Mark) -> Planned {
        let thread = mark.thread;
        let Chain {
            parent, up, root, ..
        } = mark.chain;
        let first = (mark.ns, thread);
        if parent == Chain::NONE {
            let trace = (rank, start);
            return Planned {
                parent: NO_PARENT,
                trace,
                first,
            };
        }
        let trace = match (up, root) {
            (Chain::NONE, Chain::NONE) => None,
            (Chain::NONE, root) => Some((span_node(thread, root), 0)),
            (up, _) => self.slices[thread].get(&up).copied(),
        };
        self.broken |= trace.is_none();
        Planned {
            parent: span_node(thread, parent),
            trace: trace.unwrap_or((NO_PARENT, 0)),
            first,
        }
    }

    /// `mark`, a poll of the slice at `index` of its thread, is of no call: its slice is a
    /// span of its thread (in the trace of the spans around it, or a root), which a poll
    /// inside it may be enclosed by.
    pub(super) fn unmatched(&mut self, mark: &Mark, index: u32) {
        let thread = mark.thread;
        self.forget(thread, mark.ns);
        self.broken |= mark.chain.broken;
        let Chain {
            parent, up, root, ..
        } = mark.chain;
        let trace = match (parent, up) {
            (Chain::NONE, _) => Some((span_node(thread, index), 0)),
            (_, Chain::NONE) => Some((span_node(thread, root), 0)),
            (_, up) => self.slices[thread].get(&up).copied(),
        };
        match trace {
            Some(trace) => {
                self.slices[thread].insert(index, trace);
            }
            None => self.broken = true,
        }
    }

    /// The slice at `index` of thread `thread` is final, ending at `end_ns`: no mark of the
    /// thread after then is inside it.
    pub(super) fn slice_final(&mut self, thread: usize, index: u32, end_ns: u64) {
        // (Only those a mark may be inside: the heap holds no slice of no mark.)
        if self.slices[thread].contains_key(&index) {
            self.finals[thread].push(Reverse((end_ns, index)));
        }
    }

    /// A mark of thread `thread` at `ns` comes: the slices ended before are let go.
    fn forget(&mut self, thread: usize, ns: u64) {
        while let Some(&Reverse((end, index))) = self.finals[thread].peek() {
            if end >= ns {
                break;
            }
            self.finals[thread].pop();
            self.slices[thread].remove(&index);
        }
    }

    /// Writes thread `thread`'s pending entries, in the order of their slices.
    pub(super) fn write(&mut self, thread: usize) {
        let mut pending = std::mem::take(&mut self.pending[thread].1);
        pending.sort_unstable_by_key(|e| u32::from_le_bytes([e[0], e[1], e[2], e[3]]));
        for entry in &pending {
            if let Err(e) = self.polls.push(thread, entry) {
                self.failed.get_or_insert(e);
            }
        }
        pending.clear();
        self.pending[thread].1 = pending;
    }
}
