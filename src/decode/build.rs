//! The [`Trace`] assembled from its threads, decoded apart and added in order.

use crate::record::hash::FxHashMap;
use crate::trace::{Instant, Process, Salvage, SpanKind, ThreadTrace, Trace};

use super::async_spans::Mark;
use super::convert::Converter;
use super::counters::RawSample;
use super::follows::Uses;
use super::links::{Ends, Links, OriginSites};
use super::memory::RawMemory;
use crate::record::memory::MemoryMode;

use super::thread::Decoded;

/// Builds a [`Trace`] from its threads, decoded apart and added in order.
pub(super) struct Builder {
    end_ns: u64,
    /// A flight recorder's window start common to every thread: async calls begun before it
    /// are cut there.
    pub(super) cut_start_ns: Option<u64>,
    event_count: u64,
    marks: Vec<Mark>,
    /// `Some` when memory is tracked: every allocation and free, thread by thread.
    memory: Option<Vec<RawMemory>>,
    memory_mode: MemoryMode,
    links: Links,
    /// The end of each slice entered under a `tracing` span id that a `follows_from` names,
    /// by (thread, span), when the threads' spans are summed ([`Builder::tracing_uses`]).
    tracing_ends: Option<Ends>,
    threads: Vec<ThreadTrace>,
    samples: Vec<RawSample>,
    instants: Vec<Instant>,
    /// Per thread, where what is still open on it closes ([`Decoded::end_ns`]).
    ends: Vec<u64>,
    /// Scopes cut open, as the threads counted them ([`Decoded::open_scopes`]).
    open_scopes: u64,
    /// The session was salvaged without its footer.
    salvaged: bool,
    /// The threads' spans are summed, not kept.
    sum: bool,
}

impl Builder {
    /// A builder for a window that ends at `end_ns`; `memory` keeps allocations and frees;
    /// `salvaged`: of a session salvaged without its footer; `sum`: the threads' spans are
    /// summed, not kept.
    pub(super) fn new(end_ns: u64, memory: MemoryMode, salvaged: bool, sum: bool) -> Self {
        Self {
            end_ns,
            cut_start_ns: None,
            event_count: 0,
            marks: Vec::new(),
            memory: memory.is_on().then(Vec::new),
            memory_mode: memory,
            links: Links::default(),
            tracing_ends: None,
            threads: Vec::new(),
            samples: Vec::new(),
            instants: Vec::new(),
            ends: Vec::new(),
            open_scopes: 0,
            salvaged,
            sum,
        }
    }

    /// Adds the next thread: what it gives is what pairing the threads one after the other,
    /// in this order, would have given.
    pub(super) fn add(&mut self, decoded: Decoded) {
        let Decoded {
            thread,
            events,
            marks,
            marks_seen: _,
            links,
            memory,
            extras,
            end_ns,
            open_scopes,
        } = decoded;
        self.ends.push(end_ns);
        self.open_scopes += open_scopes;
        self.samples.extend(extras.samples);
        self.instants.extend(extras.instants);
        debug_assert!(events > 0, "a thread with records in the window");
        self.event_count += events;
        self.marks.extend(marks);
        self.links.extend(links);
        if let (Some(all), Some(memory)) = (self.memory.as_mut(), memory) {
            all.extend(memory);
        }
        self.threads.push(thread);
    }

    /// The uses of the `tracing` span ids that the threads' `follows_from`s name, thread by
    /// thread, when the threads' spans are summed: their flows are matched with them.
    pub(super) fn tracing_uses(&mut self, uses: Vec<Uses>) {
        let mut all = FxHashMap::default();
        for Uses {
            enters,
            closes,
            ends,
        } in uses
        {
            self.links.tracing_enters.extend(enters);
            self.links.tracing_closes.extend(closes);
            all.extend(ends);
        }
        self.tracing_ends = Some(all);
    }

    /// The trace of the window that starts at `start_tick`, and the callsite of each of its
    /// flows' origins.
    pub(super) fn finish(
        mut self,
        converter: &Converter,
        start_tick: u64,
        dropped_events: u64,
        process: Process,
    ) -> (Trace, OriginSites) {
        let end_ns = self.end_ns;
        let async_spans = super::async_spans::match_async(
            self.marks,
            &mut self.threads,
            &self.ends,
            self.salvaged,
            self.cut_start_ns,
        );
        let mut open_scopes = self.open_scopes;
        // Summed, the threads counted their scopes cut open (and no span is a poll: summing
        // is for sessions without async calls); kept, they are counted now, as a `tracing`
        // span's slice may have become a poll of an async call, counted with it.
        if self.salvaged && !self.sum {
            let scopes = self.threads.iter().flat_map(|t| &t.spans);
            open_scopes = scopes
                .filter(|s| s.open_at_stop && s.kind == SpanKind::Scope)
                .count() as u64;
            open_scopes += async_spans.iter().filter(|a| a.open_at_stop).count() as u64;
        }
        let (links, sites) = self
            .links
            .matched(&self.threads, self.tracing_ends.as_ref());
        let (counters, values) = super::counters::merge(self.samples, 0);
        // Each thread's instants are in time order: a stable sort keeps ties in thread order.
        self.instants.sort_by_key(|i| i.ns);
        let trace = Trace {
            start_ns: converter.to_unix_ns(start_tick),
            end_ns,
            threads: self.threads,
            async_spans,
            dropped_events,
            overwritten_events: 0,
            cut_start_ns: None,
            event_count: self.event_count,
            memory: self
                .memory
                .map(|raw| super::memory::match_memory(raw, self.memory_mode)),
            flows: links,
            processes: vec![process],
            compensation: None,
            clock_source: None,
            counters,
            values,
            instants: self.instants,
            salvage: Salvage {
                open_scopes,
                ..Salvage::default()
            },
        };
        (trace, sites)
    }
}
