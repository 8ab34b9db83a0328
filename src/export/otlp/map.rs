//! The mapping of a [`Trace`] to OTLP spans, shared by the reference messages
//! ([`Otlp::requests`], in `requests.rs`) and our own encoder (`wire.rs`): the tree of spans,
//! what is folded and sampled out, where each span event goes, and the ids.

use std::fmt;

use super::carry::{Carried, end_order};
use super::options::{Options, Stats};
use crate::trace::{Flow, SpanKind, Trace};

pub(super) const NONE: u32 = u32::MAX;

/// What a node of the span tree stands for.
#[derive(Clone, Copy)]
pub(super) enum Of {
    /// An async call: its index in `Trace::async_spans`.
    Async(u32),
    /// A scope or a poll: its thread and its index in the thread's spans.
    Span(u32, u32),
    /// The span that holds the events of its process recorded outside every span.
    Events,
    /// A span of the whole trace that is not in the piece mapped, standing as the parent of
    /// some of its nodes ([`Carried::elsewhere`]): never sent.
    Elsewhere(u32),
}

/// What a span event stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EventOf {
    /// An instant: its index in `Trace::instants`.
    Instant(u32),
    /// A counter sample: its track in `Trace::counters` and its index there.
    Counter(u32, u32),
}

/// A span event on a kept node.
#[derive(Clone, Copy)]
pub(super) struct Event {
    /// The kept node it is an event of.
    pub(super) node: u32,
    pub(super) ns: u64,
    pub(super) of: EventOf,
}

/// The name of the span that holds a process's events recorded outside every span.
pub const EVENTS_SPAN_NAME: &str = "events outside spans";

/// A span of the OTLP tree.
pub(super) struct Node {
    pub(super) of: Of,
    pub(super) process: u32,
    pub(super) start: u64,
    pub(super) end: u64,
    /// The parent in the OTLP tree (`NONE` for a root).
    pub(super) parent: u32,
    /// The kept node it is sent as: itself, an ancestor it was folded into, `NONE` when its
    /// root was sampled out.
    pub(super) rep: u32,
    /// The low half of its `trace_id`: made of its root's index in the whole trace (or of its
    /// process, with one trace per process).
    pub(super) trace: u64,
    pub(super) depth: u32,
    pub(super) folded_count: u64,
    pub(super) folded_ns: u64,
}

/// The request builder: a [`Trace`] mapped to OTLP spans (see the [mapping](super#mapping)).
pub struct Otlp<'t> {
    pub(super) trace: &'t Trace,
    pub(super) options: Options,
    pub(super) nodes: Vec<Node>,
    /// Kept nodes, process by process, each thread's in the order its spans end (a piece
    /// sends the spans that end in it).
    pub(super) kept: Vec<u32>,
    /// Index in `nodes` of each thread's first span.
    pub(super) thread_base: Vec<u32>,
    /// Flows (indices in `flows`) by the kept node of their follower, sorted.
    pub(super) links: Vec<(u32, u32)>,
    /// The flows `links` names: the trace's; of a piece ([`Otlp::with_carried`]), the whole
    /// trace's.
    pub(super) flows: &'t [Flow],
    /// Of a piece: where the origin of each flow of `links` is sent, by flow (sorted), as
    /// decided in the piece where it began; `None`: as the trace's nodes decide.
    pub(super) targets: Option<Vec<(u32, Option<Target>)>>,
    /// Span events by node, in time order.
    pub(super) events: Vec<Event>,
    pub(super) seed: u64,
    pub(super) stats: Stats,
    pub(super) services: Vec<String>,
    /// Where the trace's nodes stand in a larger one written piece by piece.
    pub(super) start: Start,
    /// The roots met by the walk, with those before ([`Start::roots`]).
    pub(super) roots: u32,
    /// The events on no span of the trace, when [`Start::holders`] is off.
    pub(super) outside: Vec<EventOf>,
    /// What a piece carried from the last one ([`Otlp::with_carried`]).
    pub(super) carried: Carried,
}

/// A kept node as a link's target: its index in the whole trace (what its `span_id` is made
/// of) and the low half of its `trace_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) span: u64,
    pub(super) trace: u64,
}

/// Where a trace mapped as a piece of a larger one stands in it
/// ([`Otlp::with`]; `Start::default()` for a trace of its own).
#[derive(Clone, Copy, Debug)]
pub(super) struct Start {
    /// The index in the larger trace of this one's first node (what the ids count from).
    pub(super) node: u32,
    /// The roots before this trace's (what sampling counts from).
    pub(super) roots: u32,
    /// Events on no span go to an `events outside spans` node of their process (else they
    /// are left in [`Otlp::outside`]).
    pub(super) holders: bool,
}

impl Default for Start {
    fn default() -> Self {
        Self {
            node: 0,
            roots: 0,
            holders: true,
        }
    }
}

impl fmt::Debug for Otlp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Otlp")
            .field("options", &self.options)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A bijective mix of 64 bits (splitmix64's finalizer).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl<'t> Otlp<'t> {
    /// Maps `trace` with `options`: the tree of spans, what is folded and sampled out, and
    /// the ids. The requests themselves are made by [`Otlp::requests`].
    pub fn new(trace: &'t Trace, options: &Options) -> Self {
        Self::with(trace, options, Start::default())
    }

    /// [`Otlp::new`], for a trace that is a piece of a larger one: whose nodes are numbered
    /// from `start.node`, whose roots are sampled after `start.roots` others, and whose events
    /// on no span are left in [`Otlp::outside`] unless `start.holders`.
    pub(super) fn with(trace: &'t Trace, options: &Options, start: Start) -> Self {
        Self::with_carried(trace, options, start, Carried::default())
    }

    /// [`Otlp::with`] for a piece of a thread that carries open spans: its first nodes were
    /// walked in an earlier piece (`carried.seeds`), its open nodes end in a later one (they
    /// are not kept here), its nodes are numbered by `carried.global`.
    pub(super) fn with_carried(
        trace: &'t Trace,
        options: &Options,
        start: Start,
        carried: Carried,
    ) -> Self {
        let asyncs = trace.async_spans.len();
        let mut thread_base = Vec::with_capacity(trace.threads.len());
        let mut nodes: Vec<Node> = Vec::with_capacity(asyncs + trace.spans().count());
        let node = |of, process, start, end, parent| Node {
            of,
            process,
            start,
            end,
            parent,
            rep: NONE,
            trace: u64::MAX,
            depth: 0,
            folded_count: 0,
            folded_ns: 0,
        };
        // Calls numbered process by process, each process's in the trace's order (as the
        // calls of several sessions written piece by piece are).
        let mut by_process: Vec<u32> = (0..asyncs as u32).collect();
        by_process.sort_by_key(|&i| trace.async_spans[i as usize].process);
        let mut node_of_call = vec![0u32; asyncs];
        for (at, &i) in (0..).zip(&by_process) {
            let a = &trace.async_spans[i as usize];
            node_of_call[i as usize] = at;
            nodes.push(node(Of::Async(i), a.process, a.start_ns, a.end_ns, NONE));
        }
        // The first poll of each async call: its thread parent becomes the call's parent.
        let mut first_poll: Vec<Option<(u64, u32)>> = vec![None; asyncs];
        for (t, thread) in trace.threads.iter().enumerate() {
            let base = nodes.len() as u32;
            thread_base.push(base);
            let len = thread.spans.len() as u32;
            for (s, span) in thread.spans.iter().enumerate() {
                let thread_parent = match span.parent {
                    Some(p) if p < len && (p as usize) < s => base + p,
                    _ => NONE,
                };
                let parent = match span.kind {
                    SpanKind::Poll {
                        async_span: Some(task),
                    } if (task as usize) < asyncs => {
                        let first = &mut first_poll[task as usize];
                        if first.is_none_or(|(start, _)| span.start_ns < start) {
                            *first = Some((span.start_ns, thread_parent));
                        }
                        node_of_call[task as usize]
                    }
                    _ => thread_parent,
                };
                nodes.push(node(
                    Of::Span(t as u32, s as u32),
                    thread.process,
                    span.start_ns,
                    span.end_ns,
                    parent,
                ));
            }
        }
        for (task, first) in first_poll.iter().enumerate() {
            if let Some((_, parent)) = *first {
                nodes[node_of_call[task] as usize].parent = parent;
            }
        }
        // Spans elsewhere, and the nodes they are the parents of.
        let elsewhere = nodes.len() as u32;
        for (k, other) in (0..).zip(&carried.elsewhere) {
            let mut stand = node(Of::Elsewhere(k), 0, 0, 0, NONE);
            (stand.rep, stand.trace) = (elsewhere + k, other.trace);
            nodes.push(stand);
        }
        for &(child, k) in &carried.parents {
            if let Some(child) = nodes.get_mut(child as usize) {
                child.parent = elsewhere + k;
            }
        }
        let mut this = Self {
            trace,
            options: options.clone(),
            nodes,
            kept: Vec::new(),
            thread_base,
            links: Vec::new(),
            flows: &trace.flows,
            targets: None,
            events: Vec::new(),
            seed: 0,
            stats: Stats::default(),
            services: Vec::new(),
            start,
            roots: start.roots,
            outside: Vec::new(),
            carried,
        };
        this.walk();
        this.finish();
        this
    }

    /// Visits the tree from its roots, parents first: what is kept, folded, sampled out.
    fn walk(&mut self) {
        let n = self.nodes.len();
        // Children lists (CSR), in node order.
        let mut offsets = vec![0u32; n + 1];
        for node in &self.nodes {
            if node.parent != NONE {
                offsets[node.parent as usize + 1] += 1;
            }
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut children = vec![0u32; offsets[n] as usize];
        for (i, node) in self.nodes.iter().enumerate() {
            if node.parent != NONE {
                let at = &mut fill[node.parent as usize];
                children[*at as usize] = i as u32;
                *at += 1;
            }
        }
        let mut visited = vec![false; n];
        let mut roots = self.start.roots;
        let mut stack: Vec<u32> = Vec::new();
        // Roots in node order; then whatever a forged cycle left unreached, as roots.
        for pass in 0..2 {
            for start in 0..n {
                if visited[start] || (pass == 0 && self.nodes[start].parent != NONE) {
                    continue;
                }
                self.nodes[start].parent = NONE;
                stack.push(start as u32);
                while let Some(i) = stack.pop() {
                    let i = i as usize;
                    visited[i] = true;
                    self.place(i, &mut roots);
                    let (from, to) = (offsets[i] as usize, offsets[i + 1] as usize);
                    // Reversed: the first child is visited first.
                    for &c in children[from..to].iter().rev() {
                        if !visited[c as usize] {
                            stack.push(c);
                        }
                    }
                }
            }
        }
        self.roots = roots;
    }

    /// Decides node `i`, whose parent (if any) is decided.
    fn place(&mut self, i: usize, roots: &mut u32) {
        if matches!(self.nodes[i].of, Of::Elsewhere(_)) {
            // Decided in the piece where it is.
            return;
        }
        let parent = self.nodes[i].parent;
        let duration = self.nodes[i].end.saturating_sub(self.nodes[i].start);
        if let Some(&seed) = self.carried.seeds.get(i) {
            // Walked in the piece where it began; folded into its parent, its time counts
            // now that it ends.
            let node = &mut self.nodes[i];
            node.rep = seed.rep;
            node.trace = seed.trace;
            node.depth = seed.depth;
            node.folded_count = seed.folded_count;
            node.folded_ns = seed.folded_ns;
            if seed.rep != NONE && seed.rep == parent && !self.is_open(i as u32) {
                let rep = &mut self.nodes[seed.rep as usize];
                rep.folded_ns = rep.folded_ns.saturating_add(duration);
            }
            return;
        }
        if parent == NONE {
            let keep = roots.is_multiple_of(self.options.sample_roots);
            *roots = roots.wrapping_add(1);
            let trace = self.trace_low(i as u32);
            let node = &mut self.nodes[i];
            node.trace = trace;
            if keep {
                node.rep = i as u32;
                self.stats.sent += 1;
            } else {
                self.stats.sampled_out += 1;
            }
            return;
        }
        let p = parent as usize;
        let (prep, ptrace, pdepth) = {
            let pn = &self.nodes[p];
            (pn.rep, pn.trace, pn.depth)
        };
        self.nodes[i].trace = ptrace;
        if prep == NONE {
            self.stats.sampled_out += 1;
            return;
        }
        let depth = pdepth + 1;
        let folds = prep != parent
            || duration < self.options.min_duration_ns
            || self.options.max_depth.is_some_and(|max| depth > max);
        if folds {
            self.nodes[i].rep = prep;
            self.stats.folded += 1;
            let ends = !self.is_open(i as u32);
            let rep = &mut self.nodes[prep as usize];
            rep.folded_count += 1;
            if prep == parent && ends {
                rep.folded_ns = rep.folded_ns.saturating_add(duration);
            }
        } else {
            let node = &mut self.nodes[i];
            node.rep = i as u32;
            node.depth = depth;
            self.stats.sent += 1;
        }
    }

    /// The kept nodes by process, the links, the seed of the ids and the service names.
    fn finish(&mut self) {
        let trace = self.trace;
        self.place_events();
        // In the order spans end (a piece sends those that end in it), by process.
        let mut kept: Vec<u32> = self
            .end_order()
            .into_iter()
            .filter(|&i| self.nodes[i as usize].rep == i && !self.is_open(i))
            .collect();
        kept.sort_by_key(|&i| self.nodes[i as usize].process);
        self.kept = kept;
        for (f, flow) in trace.flows.iter().enumerate() {
            if let Some(node) = self.node_of(flow.follower.thread, flow.follower.span) {
                let rep = self.nodes[node as usize].rep;
                if rep != NONE {
                    self.links.push((rep, f as u32));
                    let origin = flow
                        .origin
                        .and_then(|o| self.node_of(o.thread, o.span))
                        .map(|o| self.nodes[o as usize].rep);
                    if origin.is_some_and(|o| o != NONE) {
                        self.stats.links += 1;
                    }
                }
            }
        }
        self.links.sort_unstable();
        let mut seed = mix(trace.start_ns ^ 0x7469_636b_7363_6f70);
        for p in &trace.processes {
            seed = mix(seed ^ u64::from(p.id));
            for b in p.host.bytes() {
                seed = mix(seed ^ u64::from(b));
            }
        }
        self.seed = seed;
        let env = std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|s| !s.is_empty());
        self.services = trace
            .processes
            .iter()
            .map(|p| {
                self.options
                    .service_name
                    .clone()
                    .or_else(|| env.clone())
                    .unwrap_or_else(|| {
                        if p.name.is_empty() {
                            "unknown_service".to_owned()
                        } else {
                            p.name.clone()
                        }
                    })
            })
            .collect();
    }

    /// True when node `i` is still open at the end of the piece mapped.
    pub(super) fn is_open(&self, i: u32) -> bool {
        !self.carried.open.is_empty() && self.carried.open.binary_search(&i).is_ok()
    }

    /// Every node in the order they are sent: async calls, then each thread's spans in the
    /// order they end, then the holders of events outside spans.
    fn end_order(&self) -> Vec<u32> {
        let n = self.nodes.len() as u32;
        let mut order: Vec<u32> = (0..n)
            .filter(|&i| matches!(self.nodes[i as usize].of, Of::Async(_)))
            .collect();
        for (thread, &base) in self.trace.threads.iter().zip(&self.thread_base) {
            order.extend(end_order(&thread.spans).into_iter().map(|s| base + s));
        }
        order.extend((0..n).filter(|&i| matches!(self.nodes[i as usize].of, Of::Events)));
        order
    }

    /// The index in the whole trace of node `i`.
    pub(super) fn global(&self, i: u32) -> u64 {
        if let Some(Node {
            of: Of::Elsewhere(k),
            ..
        }) = self.nodes.get(i as usize)
        {
            return self.carried.elsewhere[*k as usize].global;
        }
        match self.carried.global.get(i as usize) {
            Some(&g) => u64::from(g),
            None => u64::from(i) + u64::from(self.start.node),
        }
    }

    /// Puts each instant and counter sample on the kept node of the innermost span open on
    /// its thread at its time, else on its process's `events outside spans` node (made
    /// here), or counts it sampled out with its root call.
    fn place_events(&mut self) {
        let trace = self.trace;
        let mut threads: Vec<(u32, u64, u32)> = trace
            .threads
            .iter()
            .enumerate()
            .map(|(i, t)| (t.process, t.id, i as u32))
            .collect();
        threads.sort_unstable();
        let mut found = Vec::new();
        for (i, instant) in trace.instants.iter().enumerate() {
            let at = self.open_at(&threads, instant.process, instant.thread, instant.ns);
            found.push((at, instant.process, instant.ns, EventOf::Instant(i as u32)));
        }
        for (c, track) in trace.counters.iter().enumerate() {
            for (s, sample) in track.samples.iter().enumerate() {
                let at = self.open_at(&threads, track.process, sample.thread, sample.ns);
                let of = EventOf::Counter(c as u32, s as u32);
                found.push((at, track.process, sample.ns, of));
            }
        }
        let mut holders: Vec<(u32, u32)> = Vec::new();
        for (at, process, ns, of) in found {
            let node = match at {
                Some(node) => match self.nodes[node as usize].rep {
                    NONE => {
                        self.stats.events_sampled_out += 1;
                        continue;
                    }
                    rep => rep,
                },
                None if !self.start.holders => {
                    self.outside.push(of);
                    continue;
                }
                None => match holders.iter().find(|&&(p, _)| p == process) {
                    Some(&(_, node)) => node,
                    None => {
                        let node = self.nodes.len() as u32;
                        self.nodes.push(Node {
                            of: Of::Events,
                            process,
                            start: trace.start_ns,
                            end: trace.end_ns,
                            parent: NONE,
                            rep: node,
                            trace: self.trace_low_of(node, process),
                            depth: 0,
                            folded_count: 0,
                            folded_ns: 0,
                        });
                        holders.push((process, node));
                        self.stats.event_spans += 1;
                        node
                    }
                },
            };
            self.stats.events += 1;
            self.events.push(Event { node, ns, of });
        }
        // Stable: equal times keep instants before counter samples, each in trace order.
        self.events.sort_by_key(|e| (e.node, e.ns));
    }

    /// The node of the innermost span open at `ns` on thread `thread` of process `process`
    /// (`threads`: `(process, id, index)` sorted), if any. A span is open from its start up
    /// to, not including, its end; one cut at stop up to its end included.
    fn open_at(
        &self,
        threads: &[(u32, u64, u32)],
        process: u32,
        thread: u64,
        ns: u64,
    ) -> Option<u32> {
        let from = threads.partition_point(|&(p, id, _)| (p, id) < (process, thread));
        let mut best: Option<(u32, u32)> = None;
        for &(_, _, t) in threads[from..]
            .iter()
            .take_while(|&&(p, id, _)| (p, id) == (process, thread))
        {
            let spans = &self.trace.threads[t as usize].spans;
            let mut at = spans.partition_point(|s| s.start_ns <= ns);
            while at > 0 {
                let i = at - 1;
                let span = &spans[i];
                if ns < span.end_ns || (span.open_at_stop && ns == span.end_ns) {
                    if best.is_none_or(|(_, depth)| span.depth >= depth) {
                        best = self.node_of(t, i as u32).map(|n| (n, span.depth));
                    }
                    break;
                }
                // Its parent comes before it (a forged one that does not ends the walk).
                match span.parent {
                    Some(p) if (p as usize) < i => at = p as usize + 1,
                    _ => break,
                }
            }
        }
        best.map(|(node, _)| node)
    }
}

#[cfg(test)]
mod tests {
    use super::mix;

    #[test]
    fn mix_is_not_identity() {
        assert_ne!(mix(1), 1);
        assert_ne!(mix(1), mix(2));
    }
}
