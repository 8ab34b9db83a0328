//! A trace's scopes summed by callsite straight from the records, without keeping its spans:
//! what a flat table ([`Report`](crate::report::Report) by name or by thread) needs, at a
//! fraction of the memory of the full [`Trace`].

use crate::record::hash::FxHashMap;

use crate::decode::links::OriginSites;
use crate::decode::memory::LiveAtEnd;
use crate::decode::quantiles::Durations;
use crate::record::callsite::Callsite;
use crate::trace::{MemoryStats, Span, SpanKind, Trace};

/// Spans a thread being summed keeps at a time (more only while scopes nest deeper).
/// Small enough for the spans to be summed while they are still in the cache.
pub(crate) const WINDOW: usize = 1024;

/// Entries of [`ThreadSums::cache`].
const CACHE: usize = 64;

/// What the scopes of one callsite on one thread add up to.
#[derive(Debug)]
pub(crate) struct SiteSums {
    pub(crate) callsite: &'static Callsite,
    /// Each call's duration ([`Span::duration_ns`]), in no particular order, or their
    /// histogram.
    pub(crate) durations: Durations,
    /// The sum of their self times ([`Span::self_ns`]), saturating.
    pub(crate) self_ns: u64,
    /// Calls still open at stop.
    pub(crate) open: u64,
    /// Their memory figures, summed (of a session that tracked memory).
    pub(crate) memory: MemoryStats,
}

/// What the calls of one callsite begun on one thread add up to.
#[derive(Debug)]
pub(crate) struct CallSums {
    pub(crate) callsite: &'static Callsite,
    /// Each call's wall time (first poll to end), or their histogram.
    pub(crate) durations: Durations,
    /// The sum of their wall times, saturating.
    pub(crate) wall_ns: u64,
    /// The sums of their polls' durations and self times, saturating.
    pub(crate) busy_ns: u64,
    pub(crate) self_ns: u64,
    /// Calls, of them those still open at the stop, and those begun before a flight
    /// recorder's window.
    pub(crate) count: u64,
    pub(crate) open: u64,
    pub(crate) cut: u64,
    /// Their polls' memory figures, summed (of a session that tracked memory).
    pub(crate) memory: MemoryStats,
}

/// Of one thread, the slices (by index) of `tracing` enters that are polls of an async call
/// (the others are plain scopes), as the matching across threads found them: a bit a slice.
#[derive(Debug, Default, Clone)]
pub(crate) struct PollBits(Vec<u64>);

impl PollBits {
    /// Marks the slice at `index` a poll (`poll`) or not.
    pub(crate) fn set(&mut self, index: u32, poll: bool) {
        let (word, bit) = ((index / 64) as usize, index % 64);
        if word >= self.0.len() {
            if !poll {
                return;
            }
            self.0.resize(word + 1, 0);
        }
        if poll {
            self.0[word] |= 1 << bit;
        } else {
            self.0[word] &= !(1 << bit);
        }
    }

    /// True when the slice at `index` is a poll.
    pub(crate) fn get(&self, index: u32) -> bool {
        let (word, bit) = ((index / 64) as usize, index % 64);
        self.0.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }
}

/// The scopes of one thread, summed by callsite.
#[derive(Debug)]
pub(crate) struct ThreadSums {
    /// One entry per callsite, in order of first call (none when only counted,
    /// [`ThreadSums::counting`]).
    pub(crate) sites: Vec<SiteSums>,
    /// The thread's spans (scopes and polls), as `ThreadTrace::spans.len()` would count them.
    pub(crate) spans: usize,
    /// Of them, the poll slices.
    pub(crate) polls: usize,
    /// The async calls begun on the thread, summed by callsite ([`Sum::calls`]).
    pub(crate) calls: Vec<CallSums>,
    /// Of a thread with `tracing` enters matched across threads, when its calls were summed:
    /// which enters' slices are polls ([`Pieces`](crate::decode::pieces::Pieces) read them so).
    pub(crate) enter_polls: Option<std::sync::Arc<PollBits>>,
    /// Its scopes begun before a flight recorder's window ([`Span::cut_at_start`]).
    pub(crate) cut_at_start: usize,
    /// The entry of each callsite in `sites`, by address.
    index: FxHashMap<usize, usize>,
    /// (callsite address, entry) at a slot given by the address: most spans find their entry
    /// here without a hash map (address 0: an empty slot).
    cache: [(usize, usize); CACHE],
    /// Durations are kept each (else in histograms).
    exact: bool,
    /// The scopes are summed by callsite (else `sites` stays empty: [`Sum::sites`]).
    sites_summed: bool,
    /// The spans summed by stack, when asked for ([`Summary::stacks_of`]).
    pub(crate) stacks: Option<StackTree>,
    /// The thread holds a scope that follows from a link, or a `tracing` span's
    /// `follows_from`: the trace it decodes to may have flows, which the sums leave out.
    pub(crate) follows: bool,
    /// Some span of the thread did not end within its parent (guards dropped out of order),
    /// or got an argument after a span began inside it: its pieces are whole trees only
    /// ([`Pieces`](crate::decode::pieces::Pieces)).
    pub(crate) tangled: bool,
    /// The spans (indices in the thread) still open at its end, in order.
    pub(crate) open_at_end: Vec<u32>,
    /// Of a session that kept a memory timeline: the thread's allocations and frees, and
    /// whether each came at or after the one before (in time, then tick): then they can be
    /// merged with the other threads' as they are read again.
    pub(crate) memory_events: u64,
    pub(crate) memory_in_order: bool,
    /// The thread was read on the short path of plain scopes ([`plain`](super::plain)):
    /// its pieces are too ([`plain_pieces`](super::plain_pieces)).
    pub(crate) plain: bool,
}

/// How a decoding sums each thread's spans.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sum {
    /// Durations are kept each (else in histograms).
    pub(crate) exact: bool,
    /// The spans are summed by stack too ([`StackTree`]).
    pub(crate) stacks: bool,
    /// What is done with async calls ([`Calls`]).
    pub(crate) calls: Calls,
    /// The scopes are summed by callsite ([`ThreadSums::sites`]); else only counted, for
    /// what needs the counts but not the sums ([`Pieces`](crate::decode::pieces::Pieces)).
    pub(crate) sites: bool,
}

/// What a summing pass does with the async calls of captures that hold some.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Calls {
    /// Such captures are not summed (their summary is `None`).
    Decline,
    /// Captures whose async marks can be merged as the threads are read again
    /// ([`call_stream`](super::call_stream)) are summed, but not their calls
    /// ([`Summary::streamed_calls`]): for exports that read them again as they write them.
    Check,
    /// Those captures are summed with their calls ([`ThreadSums::calls`]).
    Sum,
}

impl ThreadSums {
    /// No span yet; durations kept each when `exact`, else in histograms.
    pub(crate) fn new(exact: bool) -> Self {
        Self {
            sites: Vec::new(),
            spans: 0,
            polls: 0,
            calls: Vec::new(),
            enter_polls: None,
            cut_at_start: 0,
            index: FxHashMap::default(),
            cache: [(0, 0); CACHE],
            exact,
            sites_summed: true,
            stacks: None,
            follows: false,
            tangled: false,
            open_at_end: Vec::new(),
            memory_events: 0,
            memory_in_order: true,
            plain: false,
        }
    }

    /// No span yet, counted but not summed by callsite (see [`Sum::sites`]).
    pub(crate) fn counting() -> Self {
        Self {
            sites_summed: false,
            ..Self::new(false)
        }
    }

    /// Counts `span`; a scope is added to its callsite's sums (a poll is part of an async
    /// call, which the report counts from the trace's async calls).
    #[inline]
    pub(super) fn add(&mut self, span: &Span, memory: Option<&MemoryStats>) {
        self.spans += 1;
        if span.kind != SpanKind::Scope {
            self.polls += 1;
            return;
        }
        self.cut_at_start += usize::from(span.cut_at_start);
        if self.sites_summed {
            let figures = (span.duration_ns(), span.self_ns(), span.open_at_stop);
            self.add_to_site(span.callsite, figures, memory);
        }
    }

    /// Counts a scope of `callsite` and adds it to its callsite's sums (what
    /// [`ThreadSums::add`] does with a [`SpanKind::Scope`] span not cut at the start), from
    /// its figures: duration, self time, open at the stop.
    #[inline]
    pub(super) fn add_scope(&mut self, callsite: &'static Callsite, figures: (u64, u64, bool)) {
        self.spans += 1;
        if self.sites_summed {
            self.add_to_site(callsite, figures, None);
        }
    }

    /// A slice counted as a poll ([`ThreadSums::add`]: a `tracing` enter matched across
    /// threads) that the matching found a plain scope: summed as one.
    /// Its figures: duration, self time, open at the stop; and its memory figures.
    pub(super) fn poll_was_scope(
        &mut self,
        callsite: &'static Callsite,
        figures: (u64, u64, bool),
        memory: &MemoryStats,
    ) {
        self.polls -= 1;
        if self.sites_summed {
            self.add_to_site(callsite, figures, Some(memory));
        }
    }

    /// Adds a scope of `callsite` to its sums: its duration, self time, whether it was open
    /// at the stop, and its memory figures.
    #[inline]
    fn add_to_site(
        &mut self,
        callsite: &'static Callsite,
        (duration_ns, self_ns, open): (u64, u64, bool),
        memory: Option<&MemoryStats>,
    ) {
        let address = std::ptr::from_ref(callsite) as usize;
        let slot = ((address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % CACHE;
        let at = match self.cache[slot] {
            (cached, at) if cached == address => at,
            _ => {
                let sites = &mut self.sites;
                let exact = self.exact;
                let at = *self.index.entry(address).or_insert_with(|| {
                    sites.push(SiteSums {
                        callsite,
                        durations: Durations::new(exact),
                        self_ns: 0,
                        open: 0,
                        memory: MemoryStats::default(),
                    });
                    sites.len() - 1
                });
                self.cache[slot] = (address, at);
                at
            }
        };
        let site = &mut self.sites[at];
        site.durations.push(duration_ns);
        site.self_ns = site.self_ns.saturating_add(self_ns);
        site.open += u64::from(open);
        if let Some(memory) = memory {
            site.memory.add(memory);
        }
    }
}

/// The trace of some captures without its spans, and their sums.
#[derive(Debug)]
pub(crate) struct Summary {
    /// What [`Trace::from_captures`] gives, but with no spans or span arguments in its
    /// threads: their window, processes, threads, counters, values, instants, and the flows
    /// of links and of `tracing` spans' `follows_from`s (by the index of their spans).
    pub(crate) trace: Trace,
    /// The sums of each thread of `trace`, at the same index.
    pub(crate) threads: Vec<ThreadSums>,
    /// The sums keep every duration (else histograms: the captures may hold more scopes than
    /// [`EXACT_BUDGET`](crate::decode::quantiles::EXACT_BUDGET)).
    pub(crate) exact: bool,
    /// Of a memory timeline ([`Summary::of`]): the allocations live at its end, by
    /// scope (what `trace.memory`, which holds no events, would list).
    pub(crate) live_at_end: LiveAtEnd,
    /// The callsite of the origin of each flow of `trace` (at the same index), which the
    /// trace's spans would give: what a table split by origin names a follower's row after.
    pub(crate) origin_sites: OriginSites,
    /// The captures hold async marks, and their calls are summed ([`ThreadSums::calls`]):
    /// the sums stand for a flat table's rows, but most exports of pieces cannot be made of
    /// them (the trace's polls would need their calls).
    pub(crate) streamed_calls: bool,
    /// The captures (indices) whose calls were summed so.
    pub(crate) call_captures: Vec<usize>,
    /// Some capture has `tracing` spans entered several times, on several threads, or closed
    /// on a thread other than the one that entered them, and its calls were not matched:
    /// whether each of their slices is a poll or a scope is not known
    /// ([`ThreadSums::enter_polls`]), and no piece can be made of the captures.
    pub(crate) tracing_unresolved: bool,
    /// Some capture's calls cannot be read again in the order the decoded trace holds them
    /// (a flight recorder's window with calls cut at its start and `tracing` spans, which
    /// may start before it): exports that write calls decode such captures whole.
    pub(crate) calls_unordered: bool,
}

impl Summary {
    /// True when a thread holds a scope that follows from a link or a `tracing` span's
    /// `follows_from` ([`ThreadSums::follows`]): the trace has flows, whose spans the sums
    /// leave out.
    pub(crate) fn follows(&self) -> bool {
        self.threads.iter().any(|t| t.follows)
    }

    /// The spans of the trace, as `trace.threads[..].spans.len()` would sum them.
    pub(crate) fn spans(&self) -> usize {
        self.threads.iter().map(|t| t.spans).sum()
    }

    /// The async calls, as `trace.async_spans.len()` would count them.
    pub(crate) fn calls(&self) -> u64 {
        let sites = self.threads.iter().flat_map(|t| &t.calls);
        sites.map(|c| c.count).sum()
    }

    /// The poll slices among [`Summary::spans`].
    pub(crate) fn polls(&self) -> usize {
        self.threads.iter().map(|t| t.polls).sum()
    }

    /// The scopes and async calls begun before a flight recorder's window, as the trace's
    /// spans and calls would count them.
    pub(crate) fn cut_at_start(&self) -> usize {
        let calls = self.threads.iter().flat_map(|t| &t.calls);
        let calls: u64 = calls.map(|c| c.cut).sum();
        self.threads.iter().map(|t| t.cut_at_start).sum::<usize>() + calls as usize
    }
}

/// A thread's spans summed by stack (the chain of enclosing scopes, outermost first), for
/// folded stacks and pprof profiles written without keeping the spans: each distinct stack
/// is a node, numbered in the order its first span opened (as the exports number them
/// walking the thread's spans), with its calls and the self time of its spans.
#[derive(Debug, Default)]
pub(crate) struct StackTree {
    /// Nodes in order of creation: (parent node, leaf's callsite).
    pub(crate) nodes: Vec<(Option<u32>, &'static Callsite)>,
    /// Per node: spans, the sum of their self times, and of the bytes and allocations they
    /// made themselves (of a session that tracked memory), all saturating.
    pub(crate) values: Vec<[u64; 4]>,
    /// Node by (parent node, callsite address).
    index: FxHashMap<(Option<u32>, usize), u32>,
    /// The node of each span opened and not summed yet, by the span's index in its thread:
    /// as many as the spans the pairing keeps.
    node_of: FxHashMap<u32, u32>,
    /// When kept ([`StackTree::note_polls`]): the polls summed since they were last taken,
    /// each (index in the thread, node).
    poll_nodes: Option<Vec<(u32, u32)>>,
}

impl StackTree {
    /// The span at `index` of the thread opened under the span at `parent`.
    pub(crate) fn open(&mut self, index: u32, parent: Option<u32>, callsite: &'static Callsite) {
        let parent = parent.and_then(|p| self.node_of.get(&p).copied());
        let key = (parent, std::ptr::from_ref(callsite) as usize);
        let (nodes, values) = (&mut self.nodes, &mut self.values);
        let node = *self.index.entry(key).or_insert_with(|| {
            nodes.push((parent, callsite));
            values.push([0; 4]);
            nodes.len() as u32 - 1
        });
        self.node_of.insert(index, node);
    }

    /// Keeps the node of each poll summed, for [`StackTree::take_poll_nodes`].
    pub(crate) fn note_polls(&mut self) {
        self.poll_nodes = Some(Vec::new());
    }

    /// The polls summed since the last call, each (index in the thread, node).
    pub(crate) fn take_poll_nodes(&mut self) -> Vec<(u32, u32)> {
        self.poll_nodes
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Takes `calls` calls off `node`'s: polls of an async call counted elsewhere (a call
    /// counts once).
    pub(crate) fn uncount(&mut self, node: u32, calls: u64) {
        if let Some(values) = self.values.get_mut(node as usize) {
            values[0] = values[0].saturating_sub(calls);
        }
    }

    /// The span at `index`, final, with its memory figures: counted in its stack's node.
    pub(crate) fn close(&mut self, index: u32, span: &Span, memory: Option<&MemoryStats>) {
        if let Some(node) = self.node_of.remove(&index) {
            if let Some(polls) = &mut self.poll_nodes
                && span.kind != SpanKind::Scope
            {
                polls.push((index, node));
            }
            let values = &mut self.values[node as usize];
            values[0] = values[0].saturating_add(1);
            values[1] = values[1].saturating_add(span.self_ns());
            if let Some(memory) = memory {
                values[2] = values[2].saturating_add(memory.self_alloc_bytes);
                values[3] = values[3].saturating_add(memory.self_allocs);
            }
        }
    }
}
