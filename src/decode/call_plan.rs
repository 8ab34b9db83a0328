//! Where each async call stands in the tree of spans, for exports that nest a call's polls
//! under it across threads (OTLP) while they read the threads piece by piece: the calls'
//! merge of every thread's marks ([`call_stream`](super::call_stream)) also notes, for each
//! call, the span around its first poll (its parent) and the outermost span above it (what
//! its trace is made of), and for each poll slice, the call it is of. What it holds: the
//! slices open that are polls of calls; what it leaves is written to a temporary file
//! ([`Spill`]), read back in order: the calls in the order they began, each thread's poll
//! slices in order.
//!
//! A call's parent is the span open around its first poll (the earliest), on that poll's
//! thread. What its trace is made of comes from the spans open there: the nearest enclosing
//! poll of a call (its call's trace), else the outermost open span, else the call itself
//! (a call with no parent is a root). Both are known when the first poll begins; a call's
//! polls then take its trace.
//!
//! Where this cannot be known as the marks come (a poll enclosed by a poll slice of no call,
//! two first polls at the same instant on two threads, spans that do not end within their
//! parents), there is no plan, and the captures are decoded whole.

use std::io;
use std::sync::Arc;

use crate::capture::CaptureThread;
use crate::record::callsite::Callsite;
use crate::record::hash::FxHashMap;
use crate::trace::AsyncSpan;

use super::call_order::{self, Extra, InOrder};
pub(crate) use super::call_planning::{NO_PARENT, Node, Root};
use super::call_planning::{Planning, SPAN};
use super::call_stream;
use super::pieces::Pieces;
use super::spill::{Reader, Spill};
use super::summary::PollBits;
use super::thread::Shared;
use crate::record::registry::Untracked;

impl CallPlan {
    /// What a [`Node`] is: `Ok(call)` (its index among the trace's calls), or
    /// `Err((thread, index))` of a span.
    pub(crate) fn node_of(&self, node: Node) -> Result<u64, (usize, u32)> {
        match node & SPAN {
            0 => Ok(self.holes.index(node)),
            _ => Err((((node & !SPAN) >> 32) as usize, node as u32)),
        }
    }

    /// The index among the trace's calls of the call of rank `rank`.
    pub(crate) fn call_index(&self, rank: u32) -> u64 {
        self.holes.index(u64::from(rank))
    }
}

/// The ranks that are no call, a bit each, with the count before each word.
#[derive(Default)]
struct Holes {
    bits: Vec<u64>,
    before: Vec<u64>,
}

impl Holes {
    fn set(&mut self, rank: u64) {
        let word = (rank / 64) as usize;
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << (rank % 64);
    }

    /// Counts the holes before each word (once every one is set).
    fn count(&mut self) {
        let mut before = 0;
        self.before = (self.bits.iter())
            .map(|w| {
                let at = before;
                before += u64::from(w.count_ones());
                at
            })
            .collect();
    }

    /// `rank` less the holes before it.
    fn index(&self, rank: u64) -> u64 {
        let (word, bit) = ((rank / 64) as usize, rank % 64);
        let holes = match self.bits.get(word) {
            Some(w) => self.before[word] + u64::from((w & ((1 << bit) - 1)).count_ones()),
            None => self.before.last().map_or(0, |&b| {
                b + u64::from(self.bits[self.bits.len() - 1].count_ones())
            }),
        };
        rank - holes
    }
}

/// Where each async call of one capture stands in the tree of spans, and the call of each of
/// its threads' poll slices ([`plan`]).
pub(crate) struct CallPlan {
    /// The calls in the order of the trace (88 bytes each: see `call_order`).
    calls: Spill,
    /// The start of the first call of each block of `calls` ([`Spill::per_block`] calls).
    block_starts: Vec<u64>,
    /// The block of `calls` read last by [`CallPlan::count_before`].
    block: std::sync::Mutex<(usize, Vec<u8>)>,
    /// Which ranks are no call (`tracing` spans found plain scopes): a call's index among
    /// the trace's calls is its rank less those before it.
    holes: Holes,
    callsites: Vec<&'static Callsite>,
    /// How many.
    pub(crate) count: u64,
    polls: Spill,
}

impl CallPlan {
    /// Hands each call to `f`, in the order of the trace, with its parent ([`NO_PARENT`]
    /// for none) and what its trace is made of, and stops at the first error of `f`.
    pub(crate) fn each_call(
        &self,
        f: &mut dyn FnMut(&AsyncSpan, Node, Root) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut reader = self.calls.reader(0);
        while let Some(slot) = reader.next()? {
            let (call, [parent, trace, start]) = call_order::decode_slot(slot, &self.callsites)
                .ok_or_else(|| io::Error::other("a temporary file was changed while in use"))?;
            f(&call, parent, (trace, start))?;
        }
        Ok(())
    }

    /// How many of the calls start before `ns` (with `ties`, at `ns` too).
    pub(crate) fn count_before(&self, ns: u64, ties: bool) -> io::Result<u64> {
        let before = |start: u64| start < ns || (ties && start == ns);
        // The last block whose first call is before: the first after is in it, or next.
        let block = self.block_starts.partition_point(|&s| before(s));
        let Some(block) = block.checked_sub(1) else {
            return Ok(0);
        };
        let mut cached = self.block.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 != block || cached.1.is_empty() {
            // (Named only once read whole.)
            cached.0 = usize::MAX;
            self.calls.read_block(0, block, &mut cached.1)?;
            cached.0 = block;
        }
        let size = call_order::SLOT as usize;
        let starts = cached.1.chunks_exact(size);
        let inside = starts
            .map(|slot| u64::from_le_bytes(slot[..8].try_into().unwrap()))
            .take_while(|&s| before(s))
            .count();
        Ok((block * self.calls.per_block() + inside) as u64)
    }

    /// The poll slices of thread `thread` (among those planned) with their calls, in order.
    pub(crate) fn polls(&self, thread: usize) -> Polls<'_> {
        Polls {
            reader: self.polls.reader(thread),
            next: None,
        }
    }
}

/// One thread's poll slices with their calls ([`CallPlan::polls`]), looked up in order.
pub(crate) struct Polls<'p> {
    reader: Reader<'p>,
    /// The entry read and not yet looked up.
    next: Option<(u32, (u32, u64), Root)>,
}

impl Polls<'_> {
    /// The call (its rank and start) and what its trace is made of of the slice at
    /// `index`, if it is a poll of one; slices are looked up in increasing order.
    pub(crate) fn find(&mut self, index: u32) -> io::Result<Option<((u32, u64), Root)>> {
        loop {
            if let Some((at, call, trace)) = self.next {
                if at > index {
                    return Ok(None);
                }
                self.next = None;
                if at == index {
                    return Ok(Some((call, trace)));
                }
            }
            let Some(entry) = self.reader.next()? else {
                return Ok(None);
            };
            let int = |at: usize| u32::from_le_bytes(entry[at..at + 4].try_into().unwrap());
            let word = |at: usize| u64::from_le_bytes(entry[at..at + 8].try_into().unwrap());
            self.next = Some((int(0), (int(4), word(8)), (word(16), word(24))));
        }
    }
}

/// The plan of the async calls of `threads` (a capture's threads with records, in the trace's
/// order, of process `process` in the trace; which of their `tracing` enters' slices are
/// polls: `bits`), each thread's remaining scopes closing at `ends`, `cut` of its calls cut
/// at a flight recorder's window start. `None` where it cannot be made as the marks come (see
/// the module's docs).
pub(super) fn plan(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    ends: &[u64],
    bits: Vec<Arc<PollBits>>,
    (process, cut): (u32, u64),
) -> io::Result<Option<CallPlan>> {
    let mut planning = Planning::new(bits, cut);
    let mut calls = Spill::new(1, call_order::SLOT as usize);
    let mut callsites: Vec<&'static Callsite> = Vec::new();
    let mut sites: FxHashMap<usize, u32> = FxHashMap::default();
    let mut count = 0u64;
    let (mut last_start, mut unsorted) = (0, false);
    let mut block_starts = Vec::new();
    let per_block = calls.per_block() as u64;
    let mut holes = Holes::default();
    let mut hand = |call: &AsyncSpan, extra: Extra| {
        let address = std::ptr::from_ref(call.callsite) as usize;
        let site = *sites.entry(address).or_insert_with(|| {
            callsites.push(call.callsite);
            callsites.len() as u32 - 1
        });
        if count.is_multiple_of(per_block) {
            block_starts.push(call.start_ns);
        }
        // Merged and counted by start: in order of it (else no plan).
        unsorted |= call.start_ns < last_start;
        last_start = call.start_ns;
        count += 1;
        calls.push(0, &call_order::encode(call, extra, site))
    };
    let mut order = InOrder::new(&mut hand);
    let matched = call_stream::each_call_labelled(
        shared,
        threads,
        ends,
        (false, Some(&mut planning)),
        &super::poll_label::PollLabels::None,
        &mut |call| {
            let rank = call.trace_rank(cut);
            if !call.is_call() {
                order.skip(rank);
                holes.set(rank);
                return;
            }
            // A call never polled is a root.
            let planned = (call.planned).map_or([NO_PARENT, rank, call.start_ns], |p| {
                [p.parent, p.trace.0, p.trace.1]
            });
            order.give(
                rank,
                call_stream::async_span(call, threads, process),
                planned,
            );
        },
        &mut |_, _, _, _| {},
    );
    order.finish()?;
    for thread in 0..threads.len() {
        planning.write(thread);
    }
    if let Some(e) = planning.failed.take() {
        return Err(e);
    }
    if matched.is_none() || planning.broken || unsorted {
        return Ok(None);
    }
    calls.finish()?;
    planning.polls.finish()?;
    holes.count();
    Ok(Some(CallPlan {
        calls,
        block_starts,
        block: Default::default(),
        holes,
        callsites,
        count,
        polls: planning.polls,
    }))
}

impl Pieces<'_> {
    /// The captures (indices) whose async calls are read apart from the pieces, in order.
    pub(crate) fn call_captures(&self) -> &[usize] {
        &self.calls
    }

    /// The plan of capture `capture`'s async calls ([`call_plan`](super::call_plan)), with
    /// the index in the trace of each thread it names; `None` where it cannot be made.
    pub(crate) fn plan_calls(&self, capture: usize) -> io::Result<Option<(CallPlan, Vec<usize>)>> {
        let in_capture: Vec<usize> = (0..self.sources.len())
            .filter(|&t| self.sources[t].1 == capture)
            .collect();
        let Some((shared, threads, ends, at)) = self.capture_threads(capture) else {
            return Ok(None);
        };
        let bits = (in_capture.iter())
            .map(|&t| self.enter_polls[t].clone().unwrap_or_default())
            .collect();
        let _untracked = Untracked::enter();
        let plan = plan(&shared, &threads, &ends, bits, at)?;
        Ok(plan.map(|plan| (plan, in_capture)))
    }
}
