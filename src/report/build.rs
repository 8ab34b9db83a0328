//! Building a [`Report`]: every span of a trace, or a summary of captures, summed into rows.

use std::collections::HashMap;

use crate::decode::parallel;
use crate::decode::quantiles::{Durations, Histogram, nearest_ranks};
use crate::decode::summary::Summary;
use crate::record::callsite::Callsite;
use crate::record::hash::FxHashMap;
use crate::record::pages::prefer_huge_pages_for;
use crate::trace::{MemoryStats, SpanKind, SpanRef, ThreadTrace, Trace};

use super::{
    CounterStats, Label, LiveAtStop, Report, ScopeStats, Split, ThreadKey, ValueStats,
    nearest_rank, percent_of,
};

impl Report {
    /// One row per name, all threads merged, sorted by total time (descending).
    #[must_use]
    pub fn new(trace: &Trace) -> Self {
        Self::build(trace, false, Split::None)
    }

    /// One row per (thread, name), sorted by thread then total time. In a trace of several
    /// processes a thread is one thread of one process ([`ScopeStats::process`]).
    #[must_use]
    pub fn by_thread(trace: &Trace) -> Self {
        Self::build(trace, true, Split::None)
    }

    /// One row per (name, originating scope): the calls of a scope that followed from a
    /// [`Link`](crate::Link) are split by the name of the scope the link was captured in
    /// ([`ScopeStats::caused_by`]); other calls keep one row per name.
    #[must_use]
    pub fn by_origin(trace: &Trace) -> Self {
        Self::build(trace, false, Split::Origin)
    }

    /// One row per (name, value of argument `key`), as PyTorch groups ops by input shape: the
    /// calls of a scope that recorded `key` (`scope!("name", key = value)`) are split by its
    /// value ([`ScopeStats::arg`], formatted); an async call (a `#[profile] async fn` call, a
    /// `tracing` span entered several times) by the value its latest poll that carries `key`
    /// has; other calls keep one row per name.
    #[must_use]
    pub fn by_arg(trace: &Trace, key: &str) -> Self {
        Self::build(trace, false, Split::Arg(key))
    }

    /// The rows of `trace` split by thread when `split_threads`, and by `split`.
    pub(crate) fn build(trace: &Trace, split_threads: bool, split: Split<'_>) -> Self {
        Self::build_with(trace, split_threads, split, parallel::PARALLEL_FROM)
    }

    /// [`Report::build`], on several cores when the trace holds `parallel_from` spans or more
    /// (the report is the same either way).
    pub(super) fn build_with(
        trace: &Trace,
        split_threads: bool,
        split: Split<'_>,
        parallel_from: usize,
    ) -> Self {
        let tracked = trace.memory.is_some();
        let none = MemoryStats::default();
        // The polls of each async call, summed.
        let mut calls_memory = vec![MemoryStats::default(); trace.async_spans.len()];
        if tracked {
            for thread in &trace.threads {
                for (span, memory) in thread.spans.iter().zip(&thread.memory) {
                    if let SpanKind::Poll {
                        async_span: Some(call),
                    } = span.kind
                    {
                        calls_memory[call as usize].add(memory);
                    }
                }
            }
        }
        // The originating scope's name of each span that followed from a link, when split.
        let origins: FxHashMap<SpanRef, &'static str> = if split == Split::Origin {
            trace
                .flows
                .iter()
                .filter_map(|l| Some((l.follower, trace.span(l.origin?).1.name())))
                .collect()
        } else {
            FxHashMap::default()
        };
        let label = |thread: &ThreadTrace, at: SpanRef| match split {
            Split::None => None,
            Split::Origin => origins.get(&at).map(|&name| Label::Origin(name)),
            Split::Arg(key) => thread
                .args_of(at.span)
                .iter()
                .find(|a| a.key == key)
                .map(|a| Label::Arg(a.value.to_string().into())),
        };
        // Each thread's rows apart (on several cores for a large trace), then merged in thread
        // order: what the rows add up does not depend on the order calls are added in.
        let thread_groups = |t: usize, thread: &ThreadTrace| {
            let mut groups = Groups::new(split_threads, tracked);
            for (i, span) in thread.spans.iter().enumerate() {
                // A poll is part of its async call, counted below.
                if span.kind == SpanKind::Scope {
                    let at = SpanRef {
                        thread: t as u32,
                        span: i as u32,
                    };
                    let group = match label(thread, at) {
                        None => groups.unlabelled((thread.process, thread.id), span.callsite),
                        label => groups.group((thread.process, thread.id), span.callsite, label),
                    };
                    groups.add(
                        group,
                        span.duration_ns(),
                        span.self_ns(),
                        span.open_at_stop,
                        thread.memory.get(i).unwrap_or(&none),
                    );
                }
            }
            groups
        };
        let mut groups = Groups::new(split_threads, tracked);
        for part in parallel::map(
            &trace.threads,
            parallel_from,
            |thread| thread.spans.len(),
            thread_groups,
        ) {
            groups.merge(part);
        }
        // An async call is split by its polls' labels (a `tracing` span's fields are the
        // arguments of each of its polls): the latest poll's that has one, so that a value
        // recorded later replaces the one the call was created with.
        let mut call_labels: Vec<Option<(u64, Label)>> = Vec::new();
        if split != Split::None && !trace.async_spans.is_empty() {
            call_labels.resize(trace.async_spans.len(), None);
            for (t, thread) in trace.threads.iter().enumerate() {
                for (i, span) in thread.spans.iter().enumerate() {
                    let SpanKind::Poll {
                        async_span: Some(call),
                    } = span.kind
                    else {
                        continue;
                    };
                    let at = SpanRef {
                        thread: t as u32,
                        span: i as u32,
                    };
                    let (Some(slot), Some(label)) =
                        (call_labels.get_mut(call as usize), label(thread, at))
                    else {
                        continue;
                    };
                    if slot.as_ref().is_none_or(|(ns, _)| span.start_ns >= *ns) {
                        *slot = Some((span.start_ns, label));
                    }
                }
            }
        }
        for (c, (call, memory)) in trace.async_spans.iter().zip(&calls_memory).enumerate() {
            let label = call_labels
                .get_mut(c)
                .and_then(Option::take)
                .map(|(_, l)| l);
            let group = groups.group((call.process, call.thread), call.callsite, label);
            groups.add(
                group,
                call.duration_ns(),
                call.self_ns,
                call.open_at_stop,
                memory,
            );
            groups.add_busy(group, call.busy_ns, call.duration_ns());
        }
        Self::finish(trace, groups, tracked)
    }

    /// The rows of a summary ([`Summary::of`]): what [`Report::build`] gives for the trace
    /// the summary stands for, split by thread when `split_threads` (by nothing else: that
    /// needs the spans).
    ///
    /// The sums hold every duration while the captures' scopes fit
    /// [`EXACT_BUDGET`](crate::decode::quantiles::EXACT_BUDGET); beyond, histograms, and the rows' p50 and p99 are then
    /// within [`RELATIVE_ERROR`](crate::decode::quantiles::RELATIVE_ERROR) of the exact values
    /// ([`Report::approximate_quantiles`]).
    pub(crate) fn from_summary<'s>(summary: &'s Summary, split_threads: bool) -> Self {
        let trace = &summary.trace;
        let tracked = trace.memory.is_some();
        let mut groups = Groups::new(split_threads, tracked);
        // Of each group, when the sums are histograms.
        let mut histograms: Vec<Histogram> = Vec::new();
        // Of each group, when the sums keep every duration: the lists of its threads.
        let mut lists: Vec<Vec<&[u64]>> = Vec::new();
        let mut add_durations = |group: usize, durations: &'s Durations| match durations {
            Durations::Exact(durations) => {
                if group >= lists.len() {
                    lists.resize_with(group + 1, Vec::new);
                }
                lists[group].push(durations);
            }
            Durations::Histogram(histogram) => {
                if group >= histograms.len() {
                    histograms.resize(group + 1, Histogram::default());
                }
                histograms[group].merge(histogram);
            }
        };
        for (thread, sums) in trace.threads.iter().zip(&summary.threads) {
            for site in &sums.sites {
                let group = groups.group((thread.process, thread.id), site.callsite, None);
                let acc = &mut groups.groups[group].1;
                add_durations(group, &site.durations);
                acc.self_ns = acc.self_ns.saturating_add(site.self_ns);
                acc.open += site.open;
                acc.memory.add(&site.memory);
            }
        }
        // The async calls, summed by the thread that began them: after every scope, as
        // [`Report::build`] adds them.
        for (thread, sums) in trace.threads.iter().zip(&summary.threads) {
            for site in &sums.calls {
                let group = groups.group((thread.process, thread.id), site.callsite, None);
                let acc = &mut groups.groups[group].1;
                add_durations(group, &site.durations);
                acc.self_ns = acc.self_ns.saturating_add(site.self_ns);
                acc.open += site.open;
                acc.memory.add(&site.memory);
                acc.busy_ns = Some(acc.busy_ns.unwrap_or(0).saturating_add(site.busy_ns));
                acc.async_ns = acc.async_ns.saturating_add(site.wall_ns);
            }
        }
        let histograms = (!summary.exact).then(|| {
            histograms.resize(groups.groups.len(), Histogram::default());
            histograms
        });
        let mut report = Self::finish_with(trace, groups, tracked, histograms, lists);
        report.approximate_quantiles = !summary.exact;
        if tracked {
            report.live_at_stop = LiveAtStop::sorted(summary.live_at_end.0.clone());
        }
        report
    }

    /// The report of `trace` from its rows' sums.
    pub(super) fn finish(trace: &Trace, groups: Groups, tracked: bool) -> Self {
        Self::finish_with(trace, groups, tracked, None, Vec::new())
    }

    /// [`Report::finish`], the durations of each group in `histograms` (by group) when given,
    /// and in the lists of `lists` (by group) besides its own.
    pub(super) fn finish_with(
        trace: &Trace,
        groups: Groups,
        tracked: bool,
        histograms: Option<Vec<Histogram>>,
        lists: Vec<Vec<&[u64]>>,
    ) -> Self {
        let wall = trace.covered_ns();
        let mut histograms = histograms.map(Vec::into_iter);
        let mut lists = lists.into_iter();
        // Each row with its time on threads: its calls' durations, an async call's polls in
        // place of its wall time.
        let rows: Vec<(ScopeStats, u64)> = groups
            .groups
            .into_iter()
            .map(|((thread, name, label), mut acc)| {
                let d = &mut acc.durations;
                let histogram = histograms.as_mut().and_then(Iterator::next);
                let mut parts = lists.next().unwrap_or_default();
                let (calls, total, min, max, p50, p99) = match &histogram {
                    // (A row of a few calls may keep them each: [`Groups::add_sparse`].)
                    Some(h) if h.count() > 0 || d.is_empty() => (
                        h.count(),
                        h.total(),
                        h.min(),
                        h.max(),
                        h.quantile(50),
                        h.quantile(99),
                    ),
                    // Lists of the summed threads: their percentiles without a copy of them
                    // all (millions of durations each, often).
                    _ if !parts.is_empty() => {
                        parts.push(d);
                        // (Loops over each list: a flattening iterator makes each value a step
                        // of its own.)
                        let (mut total, mut min, mut max) = (0u64, u64::MAX, 0);
                        for part in &parts {
                            total = part.iter().fold(total, |sum, &x| sum.saturating_add(x));
                            (min, max) = (part.iter())
                                .fold((min, max), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                        }
                        let [p50, p99] = nearest_ranks(&parts, [50, 99]);
                        let calls = parts.iter().map(|p| p.len() as u64).sum();
                        (calls, total, min, max, p50, p99)
                    }
                    _ => {
                        let total = d.iter().fold(0u64, |sum, &x| sum.saturating_add(x));
                        let (min, max) = d
                            .iter()
                            .fold((u64::MAX, 0), |(lo, hi), &x| (lo.min(x), hi.max(x)));
                        let (p50, p99) = (nearest_rank(d, 50), nearest_rank(d, 99));
                        (d.len() as u64, total, min, max, p50, p99)
                    }
                };
                let on_threads =
                    (total.saturating_sub(acc.async_ns)).saturating_add(acc.busy_ns.unwrap_or(0));
                let (caused_by, arg) = match label {
                    None => (None, None),
                    Some(Label::Origin(name)) => (Some(name), None),
                    Some(Label::Arg(value)) => (None, Some(value.into())),
                };
                let row = ScopeStats {
                    name,
                    thread: thread.map(|(_, id)| id),
                    process: thread.map(|(process, _)| process),
                    caused_by,
                    arg,
                    calls,
                    total_ns: total,
                    self_ns: acc.self_ns,
                    min_ns: min,
                    max_ns: max,
                    p50_ns: p50,
                    p99_ns: p99,
                    open_at_stop: acc.open,
                    busy_ns: acc.busy_ns,
                    total_percent: 0.0,
                    self_percent: 0.0,
                    memory: tracked.then_some(acc.memory),
                };
                (row, on_threads)
            })
            .collect();
        let scope_ns = (rows.iter()).fold(0u64, |sum, (r, _)| sum.saturating_add(r.self_ns));
        let mut rows: Vec<ScopeStats> = rows
            .into_iter()
            .map(|(mut row, on_threads)| {
                row.total_percent = percent_of(on_threads, scope_ns);
                row.self_percent = percent_of(row.self_ns, scope_ns);
                row
            })
            .collect();
        rows.sort_by(|a, b| a.cmp_by(b, |row| row.total_ns));
        Self {
            rows,
            wall_ns: wall,
            scope_ns,
            threads: trace.thread_count(),
            dropped_events: trace.dropped_events,
            observer_panics: 0,
            stream_failure: None,
            live_at_stop: LiveAtStop::of(trace),
            counters: CounterStats::of(trace),
            values: ValueStats::of(trace),
            approximate_quantiles: false,
        }
    }
}

/// What a row adds up while a report is built.
#[derive(Default)]
pub(super) struct Acc {
    durations: Vec<u64>,
    pub(super) self_ns: u64,
    pub(super) open: u64,
    pub(super) memory: MemoryStats,
    /// Of async calls: the time their polls ran.
    busy_ns: Option<u64>,
    /// Of async calls: their wall time, first poll to completion (part of `durations`).
    async_ns: u64,
}

/// Rows by what they group: (thread when split by thread, name, label).
pub(super) type Key = (Option<ThreadKey>, &'static str, Option<Label>);
/// Calls by where they come from: (thread when split by thread, callsite address, label).
type Site = (Option<ThreadKey>, usize, Option<Label>);

/// Entries of [`Groups::cache`].
const CACHE: usize = 64;

/// Calls a row keeps each before it takes a histogram ([`Groups::add_sparse`]).
const SPARSE: usize = 16;

/// The rows of a report being built. Rows are per name, spans carry callsites: each (thread,
/// callsite, label) is looked up by address and resolved to its row by name once.
pub(super) struct Groups {
    split_threads: bool,
    tracked: bool,
    pub(super) groups: Vec<(Key, Acc)>,
    by_name: HashMap<Key, usize>,
    by_site: FxHashMap<Site, usize>,
    /// The last site looked up and its row: consecutive spans often share a callsite.
    last: Option<(Site, usize)>,
    /// (callsite address, row) of unlabelled rows of the current thread (or of any thread,
    /// when not split by thread), at a slot given by the address: most spans find their row
    /// here without a hash map (0: an empty slot).
    cache: [(usize, usize); CACHE],
}

impl Groups {
    pub(super) fn new(split_threads: bool, tracked: bool) -> Self {
        Self {
            split_threads,
            tracked,
            groups: Vec::new(),
            by_name: HashMap::new(),
            by_site: FxHashMap::default(),
            last: None,
            cache: [(0, 0); CACHE],
        }
    }

    /// The row of an unlabelled call of `callsite` on `thread`, whose rows the cache holds.
    #[inline]
    pub(super) fn unlabelled(&mut self, thread: ThreadKey, callsite: &'static Callsite) -> usize {
        let address = std::ptr::from_ref(callsite) as usize;
        let slot = ((address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % CACHE;
        match self.cache[slot] {
            (cached, group) if cached == address => group,
            _ => {
                let group = self.group(thread, callsite, None);
                self.cache[slot] = (address, group);
                group
            }
        }
    }

    /// The row of a call of `callsite` on `thread` with `label`, added when new.
    pub(super) fn group(
        &mut self,
        thread: ThreadKey,
        callsite: &'static Callsite,
        label: Option<Label>,
    ) -> usize {
        let thread = self.split_threads.then_some(thread);
        let site = (thread, std::ptr::from_ref(callsite) as usize, label);
        if let Some((last, group)) = &self.last
            && *last == site
        {
            return *group;
        }
        let (groups, by_name) = (&mut self.groups, &mut self.by_name);
        let group = *self.by_site.entry(site.clone()).or_insert_with(|| {
            let key = (thread, callsite.name(), site.2.clone());
            *by_name.entry(key.clone()).or_insert_with(|| {
                groups.push((key, Acc::default()));
                groups.len() - 1
            })
        });
        self.last = Some((site, group));
        group
    }

    /// Adds a call to row `group` as [`Groups::add`] does, its duration to the row's
    /// histogram in `histograms` (by row) once the row has more than [`SPARSE`] calls: a
    /// row of fewer keeps each (exact quantiles, in less memory than a histogram).
    pub(super) fn add_sparse(
        &mut self,
        histograms: &mut Vec<Histogram>,
        group: usize,
        (duration, self_ns, open): (u64, u64, bool),
        memory: &MemoryStats,
    ) {
        if group >= histograms.len() {
            histograms.resize(group + 1, Histogram::default());
        }
        let (acc, histogram) = (&mut self.groups[group].1, &mut histograms[group]);
        if histogram.count() == 0 && acc.durations.len() < SPARSE {
            acc.durations.push(duration);
        } else {
            for d in std::mem::take(&mut acc.durations) {
                histogram.add(d);
            }
            histogram.add(duration);
        }
        acc.self_ns = acc.self_ns.saturating_add(self_ns);
        acc.open += u64::from(open);
        acc.memory.add(memory);
    }

    /// Adds an async call's busy time (its polls' durations) and wall time to row `group`
    /// (its wall time counted with its durations apart).
    pub(super) fn add_busy(&mut self, group: usize, busy_ns: u64, wall_ns: u64) {
        let acc = &mut self.groups[group].1;
        acc.busy_ns = Some(acc.busy_ns.unwrap_or(0).saturating_add(busy_ns));
        acc.async_ns = acc.async_ns.saturating_add(wall_ns);
    }

    /// Adds the rows of `other` (built over other threads) to these.
    fn merge(&mut self, other: Self) {
        for (key, acc) in other.groups {
            let (groups, by_name) = (&mut self.groups, &mut self.by_name);
            let group = *by_name.entry(key).or_insert_with_key(|key| {
                groups.push((key.clone(), Acc::default()));
                groups.len() - 1
            });
            let mine = &mut groups[group].1;
            if mine.durations.is_empty() {
                mine.durations = acc.durations;
            } else {
                mine.durations.extend(acc.durations);
            }
            mine.self_ns = mine.self_ns.saturating_add(acc.self_ns);
            mine.open += acc.open;
            mine.memory.add(&acc.memory);
            if let Some(busy) = acc.busy_ns {
                mine.busy_ns = Some(mine.busy_ns.unwrap_or(0).saturating_add(busy));
            }
            mine.async_ns = mine.async_ns.saturating_add(acc.async_ns);
        }
    }

    /// Adds a call to row `group`.
    #[inline]
    pub(super) fn add(
        &mut self,
        group: usize,
        duration: u64,
        self_ns: u64,
        open: bool,
        memory: &MemoryStats,
    ) {
        let acc = &mut self.groups[group].1;
        let full = acc.durations.len() == acc.durations.capacity();
        acc.durations.push(duration);
        if full {
            // Grown: a large list of durations is fresh memory, best in large pages.
            prefer_huge_pages_for(&acc.durations);
        }
        // Saturating, as every sum here: a forged capture file may hold any duration.
        acc.self_ns = acc.self_ns.saturating_add(self_ns);
        acc.open += u64::from(open);
        if self.tracked {
            acc.memory.add(memory);
        }
    }
}
