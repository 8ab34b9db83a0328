//! Allocations and frees: per-span figures while a thread is paired, and frees matched to the
//! allocations they release across threads.

use crate::record::hash::FxHashMap;

use crate::record::callsite::Callsite;
use crate::record::memory::MemoryMode;
use crate::trace::{MemoryEvent, MemoryKind, MemoryStats, MemoryTrace};

/// An allocation or free as paired, before the threads are merged.
pub(super) struct RawMemory {
    pub(super) tick: u64,
    pub(super) event: MemoryEvent,
}

/// Allocations and frees counted together: how many and how many bytes of each, and the most
/// that bytes allocated minus bytes freed rose above where they started meanwhile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) allocs: u64,
    pub(super) alloc_bytes: u64,
    pub(super) frees: u64,
    pub(super) freed_bytes: u64,
    pub(super) rise: u64,
}

/// A thread's allocation bookkeeping while it is paired.
pub(super) struct MemoryPairing<'a> {
    /// Every allocation and free of the trace so far.
    events: &'a mut Vec<RawMemory>,
    /// Per span from index `base` on (as the pairing's spans): statistics, the thread's net
    /// bytes at entry and the highest net bytes seen while it was open.
    spans: Vec<Figures>,
    /// The index (in the thread) of `spans[0]`.
    base: u32,
    /// The figures of spans before `base` still kept, with their index, in index order (as
    /// the pairing's pinned spans).
    pinned: Vec<(u32, Figures)>,
    /// Bytes allocated minus bytes freed on this thread so far.
    net: i64,
    /// What it keeps ([`MemoryPairing::only`]).
    keeps: Keeps,
    /// The `(ns, tick)` of the last allocation or free, and whether one came before an
    /// earlier one in either.
    last: (u64, u64),
    out_of_order: bool,
    /// Allocations and frees seen.
    seen: u64,
}

/// A span's memory figures while it is paired: its statistics, the thread's net bytes at
/// its entry and the highest net bytes seen while it was open.
type Figures = (MemoryStats, i64, i64);

/// What a [`MemoryPairing`] keeps. Allocations and frees are counted, and their order
/// checked, whatever it keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Keeps {
    /// Per-span figures and every allocation and free (decoding whole).
    All,
    /// Allocations and frees, without per-span figures (a timeline read as it is written).
    Events,
    /// Per-span figures, without the allocations and frees (sums, pieces).
    Figures,
}

impl Keeps {
    fn figures(self) -> bool {
        matches!(self, Self::All | Self::Figures)
    }

    fn events(self) -> bool {
        matches!(self, Self::All | Self::Events)
    }
}

/// One allocation or free of a thread, as its records say.
pub(super) struct Block {
    pub(super) tick: u64,
    pub(super) ns: u64,
    pub(super) thread: u64,
    pub(super) kind: MemoryKind,
    pub(super) size: u64,
    pub(super) address: u64,
}

impl<'a> MemoryPairing<'a> {
    pub(super) fn new(events: &'a mut Vec<RawMemory>) -> Self {
        Self {
            events,
            spans: Vec::new(),
            base: 0,
            pinned: Vec::new(),
            net: 0,
            keeps: Keeps::All,
            last: (0, 0),
            out_of_order: false,
            seen: 0,
        }
    }

    /// Keeps only what `keeps` says.
    pub(super) fn only(&mut self, keeps: Keeps) {
        self.keeps = keeps;
    }

    /// Moves the allocations and frees kept so far to the end of `to`.
    pub(super) fn take_events(&mut self, to: &mut std::collections::VecDeque<RawMemory>) {
        to.extend(self.events.drain(..));
    }

    /// How many allocations and frees were seen, and whether each came at or after the one
    /// before, in time and in ticks (what merging threads as they are read needs).
    pub(super) fn seen(&self) -> (u64, bool) {
        (self.seen, !self.out_of_order)
    }

    /// A span was opened (spans are opened in index order).
    pub(super) fn open(&mut self) {
        if !self.keeps.figures() {
            return;
        }
        self.spans
            .push((MemoryStats::default(), self.net, self.net));
    }

    /// Counts `block` for the innermost open span, if any (its index and callsite).
    pub(super) fn block(&mut self, block: Block, innermost: Option<(u32, &'static Callsite)>) {
        self.seen += 1;
        let at = (block.ns, block.tick);
        self.out_of_order |= at.0 < self.last.0 || at.1 < self.last.1;
        self.last = at;
        if self.keeps.figures() {
            self.count(block.kind, block.size, innermost.map(|(index, _)| index));
        }
        if !self.keeps.events() {
            return;
        }
        self.events.push(RawMemory {
            tick: block.tick,
            event: MemoryEvent {
                ns: block.ns,
                process: 0,
                thread: block.thread,
                span: innermost,
                kind: block.kind,
                size: block.size,
                address: block.address,
                matched: None,
            },
        });
    }

    /// Counts an allocation or free of `size` bytes for the innermost open span `innermost`,
    /// if any, without an event of its own.
    fn count(&mut self, kind: MemoryKind, size: u64, innermost: Option<u32>) {
        let counts = match kind {
            MemoryKind::Alloc => Counts {
                allocs: 1,
                alloc_bytes: size,
                rise: size,
                ..Counts::default()
            },
            MemoryKind::Free => Counts {
                frees: 1,
                freed_bytes: size,
                ..Counts::default()
            },
        };
        self.counted(counts, innermost);
    }

    /// Counts allocations and frees that happened while `innermost` (if any) was the innermost
    /// open span ([`MemoryMode::Counts`] records them so).
    pub(super) fn counted(&mut self, counts: Counts, innermost: Option<u32>) {
        if !self.keeps.figures() {
            return;
        }
        let delta = |bytes: u64| i64::try_from(bytes).unwrap_or(i64::MAX);
        let net = self.net;
        if let Some(index) = innermost {
            let (stats, _, peak) = self.figures(index);
            // Saturating: a forged capture file may hold any size.
            stats.self_allocs = stats.self_allocs.saturating_add(counts.allocs);
            stats.self_alloc_bytes = stats.self_alloc_bytes.saturating_add(counts.alloc_bytes);
            stats.self_frees = stats.self_frees.saturating_add(counts.frees);
            stats.self_freed_bytes = stats.self_freed_bytes.saturating_add(counts.freed_bytes);
            *peak = (*peak).max(net.saturating_add(delta(counts.rise)));
        }
        self.net = self
            .net
            .saturating_add(delta(counts.alloc_bytes))
            .saturating_sub(delta(counts.freed_bytes));
    }

    /// Span `index` closed: its totals take its own figures, and its parent's take its totals.
    pub(super) fn close(&mut self, index: u32, parent: Option<u32>) {
        if !self.keeps.figures() {
            return;
        }
        // Totals so far hold the children's totals: add the span's own figures.
        let (stats, base, peak) = self.figures(index);
        let own = stats.own();
        stats.add_totals(own);
        stats.peak_bytes = u64::try_from(peak.saturating_sub(*base)).unwrap_or(0);
        let (child, child_peak) = (stats.totals(), *peak);
        if let Some(parent) = parent {
            let (stats, _, peak) = self.figures(parent);
            stats.add_totals(child);
            *peak = (*peak).max(child_peak);
        }
    }

    /// The figures kept of the span at `index` (in the thread).
    fn figures(&mut self, index: u32) -> &mut Figures {
        super::piece::kept_at(&mut self.spans, &mut self.pinned, self.base, index)
    }

    /// As the pairing lets go of its spans but those at `keep` (indices in the thread, in
    /// order), which it sets aside, with `next` the index of the next span: the statistics of
    /// the spans let go, in the order the pairing hands them over (those set aside before,
    /// then the newer ones); empty when it keeps no figures.
    pub(super) fn drain(&mut self, keep: &[u32], next: u32) -> Vec<MemoryStats> {
        if !self.keeps.figures() {
            return Vec::new();
        }
        let mut kept = keep.iter().peekable();
        let mut handed = Vec::with_capacity(self.spans.len() + self.pinned.len());
        self.pinned.retain(|(index, figures)| {
            let pinned = kept.next_if(|&&k| k == *index).is_some();
            if !pinned {
                handed.push(figures.0);
            }
            pinned
        });
        for (index, figures) in (self.base..).zip(self.spans.drain(..)) {
            if kept.next_if(|&&k| k == index).is_some() {
                self.pinned.push((index, figures));
            } else {
                handed.push(figures.0);
            }
        }
        self.base = next;
        handed
    }

    /// As the pairing hands a piece over: the statistics of its spans (those set aside, then
    /// the newer ones), of which the spans at `open` (indices in the thread, in order) are
    /// set aside for the next piece, with `next` the index of the next span; empty when it
    /// keeps no figures.
    pub(super) fn piece(&mut self, open: &[u32], next: u32) -> Vec<MemoryStats> {
        if !self.keeps.figures() {
            return Vec::new();
        }
        let all: Vec<(u32, Figures)> = std::mem::take(&mut self.pinned)
            .into_iter()
            .chain((self.base..).zip(self.spans.drain(..)))
            .collect();
        let stats = all.iter().map(|(_, figures)| figures.0).collect();
        self.pinned = all
            .into_iter()
            .filter(|(index, _)| open.binary_search(index).is_ok())
            .collect();
        self.base = next;
        stats
    }

    /// The figures of every span kept (those set aside, then the newer ones), in span order.
    pub(super) fn finish(self) -> Vec<MemoryStats> {
        (self.pinned.into_iter())
            .chain(self.spans.iter().map(|f| (0, *f)))
            .map(|(_, (stats, ..))| stats)
            .collect()
    }
}

/// Puts the allocations and frees of all threads in time order and matches each free to the
/// allocation it released, by address (none for a session that only counted them). Ties keep thread order, and within a thread the
/// recorded order.
pub(super) fn match_memory(mut raw: Vec<RawMemory>, mode: MemoryMode) -> MemoryTrace {
    if mode == MemoryMode::Counts {
        // A session that counts keeps no timeline, even where a thread it shared with a
        // timeline session recorded one.
        return MemoryTrace {
            events: Vec::new(),
            mode,
        };
    }
    raw.sort_by_key(|m| m.tick);
    let mut events: Vec<MemoryEvent> = raw.into_iter().map(|m| m.event).collect();
    let mut live: FxHashMap<u64, u32> = FxHashMap::default();
    for i in 0..events.len() {
        let (kind, address) = (events[i].kind, events[i].address);
        let index = i as u32;
        match kind {
            // A still-live allocation at the same address lost its free (a thread the session
            // does not record): it stays unmatched.
            MemoryKind::Alloc => {
                live.insert(address, index);
            }
            MemoryKind::Free => {
                if let Some(alloc) = live.remove(&address) {
                    events[alloc as usize].matched = Some(index);
                    events[i].matched = Some(alloc);
                }
            }
        }
    }
    MemoryTrace { events, mode }
}

/// The allocations live at the end of a memory timeline (never freed in it), by the innermost
/// scope open when they were made: per scope name (`None`: outside every scope), how many and
/// their bytes.
#[derive(Debug, Default)]
pub(crate) struct LiveAtEnd(pub(crate) FxHashMap<Option<&'static str>, (u64, u64)>);

impl LiveAtEnd {
    pub(super) fn add(&mut self, scope: Option<&'static str>, size: u64) {
        let (allocs, bytes) = self.0.entry(scope).or_default();
        *allocs += 1;
        // Saturating: a forged capture file may hold any size.
        *bytes = bytes.saturating_add(size);
    }
}
