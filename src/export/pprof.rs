//! pprof profiles (the `profile.proto` of google/pprof), for `go tool pprof`, Grafana
//! Pyroscope and speedscope: one sample per distinct stack of scopes.
//!
//! Each sample's stack is the chain of enclosing scopes on its thread (the leaf first, as pprof
//! wants); each scope's callsite is a location with one line, its function named by the scope
//! and its file, the line where the scope was opened. Sample values:
//!
//! | sample type | unit | what a stack's sample sums |
//! | --- | --- | --- |
//! | `calls` | `count` | the calls of its leaf scope (an async call counts once, at one of its polls) |
//! | `wall` | `nanoseconds` | the self time of its leaf scope (the default sample type) |
//! | `alloc_space` | `bytes` | bytes its leaf scope allocated itself (with memory tracking) |
//! | `alloc_objects` | `count` | allocations its leaf scope made itself (with memory tracking) |
//!
//! Summed over the samples, calls and wall time are the table's calls and self times. The
//! profile's `time_nanos` is the window's start (Unix ns) and `duration_nanos` its length.
//! The encoder is our own, of the fields listed here only (protobuf's wire format is small).
//!
//! ```
//! use tickscope::export::pprof;
//!
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! {
//!     let _outer = tickscope::scope!("outer");
//!     let _inner = tickscope::scope!("inner");
//! }
//! prof.stop();
//! let mut profile = Vec::new();
//! pprof::write(&prof.trace(), &mut profile)?;
//! assert!(!profile.is_empty());
//! // prof.write_pprof("profile.pb.gz")? writes it to a file, gzipped as pprof files are.
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::HashMap;
use std::io::{self, Write};

use crate::record::hash::FxHashMap;

use super::Format;
use super::proto::{bytes_field, int_field, packed_field};
use crate::decode::summary::Summary;
use crate::record::callsite::Callsite;
use crate::trace::{SpanKind, Trace};

/// Options of pprof profiles: the [`Format`] to hand to
/// [`Profiler::write`](crate::Profiler::write) or [`write_file`](super::write_file) (use a
/// `.pb.gz` path: pprof files are gzipped).
#[must_use]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {}

impl Options {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Format for Options {
    fn write(&self, trace: &Trace, mut out: &mut dyn Write) -> io::Result<()> {
        write(trace, &mut out)
    }

    fn write_captures(
        &self,
        captures: &[&crate::capture::Capture],
        out: &mut dyn Write,
    ) -> Option<io::Result<()>> {
        // Of captures with async calls, each counted once: the calls matched again.
        let summary =
            Summary::stacks_of(captures).or_else(|| Summary::stacks_with_calls_of(captures))?;
        Some(out.write_all(&encode_summary(&summary)?))
    }
}

/// Writes `trace` as an (uncompressed) pprof `Profile` message.
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    out.write_all(&encode(trace))
}

/// What a stack's sample sums: calls, self ns, bytes and allocations made itself.
#[derive(Default, Clone, Copy)]
struct Values([u64; 4]);

/// A node of the tree of stacks: its parent's node and its leaf's location.
type Node = (Option<u32>, u32);

/// The profile of `trace`, encoded.
fn encode(trace: &Trace) -> Vec<u8> {
    let memory = trace.memory.is_some();
    // Locations by callsite (address), numbered from 1 in order of first use.
    let mut locations: FxHashMap<usize, u32> = FxHashMap::default();
    let mut location_order: Vec<&'static Callsite> = Vec::new();
    // Stacks as a tree: node -> index; each node's values.
    let mut nodes: HashMap<Node, u32> = HashMap::new();
    let mut node_list: Vec<Node> = Vec::new();
    let mut values: Vec<Values> = Vec::new();
    let mut counted_calls: Vec<bool> = vec![false; trace.async_spans.len()];
    for thread in &trace.threads {
        let mut span_nodes: Vec<u32> = Vec::with_capacity(thread.spans.len());
        for (i, span) in thread.spans.iter().enumerate() {
            let callsite = span.callsite;
            let address = std::ptr::from_ref(callsite) as usize;
            let next_id = locations.len() as u32 + 1;
            let location = *locations.entry(address).or_insert_with(|| {
                location_order.push(callsite);
                next_id
            });
            let parent = span.parent.map(|p| span_nodes[p as usize]);
            let key = (parent, location);
            let node = *nodes.entry(key).or_insert_with(|| {
                node_list.push(key);
                values.push(Values::default());
                node_list.len() as u32 - 1
            });
            span_nodes.push(node);
            let calls = match span.kind {
                SpanKind::Scope | SpanKind::Poll { async_span: None } => 1,
                SpanKind::Poll {
                    async_span: Some(task),
                } => {
                    let seen = counted_calls.get_mut(task as usize);
                    match seen {
                        Some(seen) if !*seen => {
                            *seen = true;
                            1
                        }
                        Some(_) => 0,
                        None => 1,
                    }
                }
            };
            let own = &mut values[node as usize].0;
            // Saturating: a forged capture file may hold any duration or size.
            own[0] = own[0].saturating_add(calls);
            own[1] = own[1].saturating_add(span.self_ns());
            if let Some(stats) = thread.memory.get(i) {
                own[2] = own[2].saturating_add(stats.self_alloc_bytes);
                own[3] = own[3].saturating_add(stats.self_allocs);
            }
        }
    }

    let tree = Tree {
        node_list,
        values,
        location_order,
    };
    encode_tree(&tree, memory, trace.start_ns, trace.wall_ns())
}

/// The stacks of a profile: each node's parent and location, each node's values, and the
/// locations' callsites, numbered from 1.
struct Tree {
    node_list: Vec<Node>,
    values: Vec<Values>,
    location_order: Vec<&'static Callsite>,
}

/// The profile of the trace `summary` stands for, as [`encode`] gives it, from its threads'
/// [`StackTree`](crate::decode::summary::StackTree)s (taken in thread order, each in the
/// order its nodes were made: the order of first use [`encode`] numbers by), with their
/// memory figures of a session that tracked memory; `None` when it has none.
fn encode_summary(summary: &Summary) -> Option<Vec<u8>> {
    let mut locations: FxHashMap<usize, u32> = FxHashMap::default();
    let mut location_order: Vec<&'static Callsite> = Vec::new();
    let mut nodes: HashMap<Node, u32> = HashMap::new();
    let mut node_list: Vec<Node> = Vec::new();
    let mut values: Vec<Values> = Vec::new();
    for sums in &summary.threads {
        let tree = sums.stacks.as_ref()?;
        let mut mapped: Vec<u32> = Vec::with_capacity(tree.nodes.len());
        for (&(parent, callsite), counted) in tree.nodes.iter().zip(&tree.values) {
            let address = std::ptr::from_ref(callsite) as usize;
            let next_id = locations.len() as u32 + 1;
            let location = *locations.entry(address).or_insert_with(|| {
                location_order.push(callsite);
                next_id
            });
            let key = (parent.map(|p| mapped[p as usize]), location);
            let node = *nodes.entry(key).or_insert_with(|| {
                node_list.push(key);
                values.push(Values::default());
                node_list.len() as u32 - 1
            });
            mapped.push(node);
            let own = &mut values[node as usize].0;
            for (own, &counted) in own.iter_mut().zip(counted) {
                *own = own.saturating_add(counted);
            }
        }
    }
    let tree = Tree {
        node_list,
        values,
        location_order,
    };
    let trace = &summary.trace;
    let memory = trace.memory.is_some();
    Some(encode_tree(&tree, memory, trace.start_ns, trace.wall_ns()))
}

/// The profile of `tree`, with memory values when `memory`, of the window from `start_ns`
/// lasting `wall_ns`.
fn encode_tree(tree: &Tree, memory: bool, start_ns: u64, wall_ns: u64) -> Vec<u8> {
    let Tree {
        node_list,
        values,
        location_order,
    } = tree;
    let mut strings = Strings::default();
    let mut profile = Vec::new();
    // 1: sample_type.
    let mut types = vec![("calls", "count"), ("wall", "nanoseconds")];
    if memory {
        types.extend([("alloc_space", "bytes"), ("alloc_objects", "count")]);
    }
    for (kind, unit) in &types {
        let mut value_type = Vec::new();
        int_field(&mut value_type, 1, strings.id(kind));
        int_field(&mut value_type, 2, strings.id(unit));
        bytes_field(&mut profile, 1, &value_type);
    }
    // 2: sample, one per stack with a value.
    let mut stack = Vec::new();
    for (node, value) in values.iter().enumerate() {
        if value.0.iter().all(|&v| v == 0) {
            continue;
        }
        stack.clear();
        let mut at = Some(node as u32);
        while let Some(n) = at {
            let (parent, location) = node_list[n as usize];
            stack.push(u64::from(location));
            at = parent;
        }
        let mut sample = Vec::new();
        packed_field(&mut sample, 1, stack.iter().copied());
        packed_field(&mut sample, 2, value.0.iter().take(types.len()).copied());
        bytes_field(&mut profile, 2, &sample);
    }
    // 4: location, 5: function: one each per callsite.
    let mut functions = Vec::new();
    for (index, callsite) in location_order.iter().enumerate() {
        let id = index as u64 + 1;
        let mut line = Vec::new();
        int_field(&mut line, 1, id);
        int_field(&mut line, 2, u64::from(callsite.line()));
        let mut location = Vec::new();
        int_field(&mut location, 1, id);
        bytes_field(&mut location, 4, &line);
        bytes_field(&mut profile, 4, &location);

        let mut function = Vec::new();
        int_field(&mut function, 1, id);
        let name = strings.id(callsite.name());
        int_field(&mut function, 2, name);
        int_field(&mut function, 3, name);
        int_field(&mut function, 4, strings.id(callsite.file()));
        int_field(&mut function, 5, u64::from(callsite.line()));
        functions.push(function);
    }
    for function in &functions {
        bytes_field(&mut profile, 5, function);
    }
    // 9, 10: time_nanos, duration_nanos; 11, 12: period_type and period (one ns of wall time);
    // 14: default_sample_type.
    int_field(&mut profile, 9, start_ns);
    int_field(&mut profile, 10, wall_ns);
    let mut period_type = Vec::new();
    int_field(&mut period_type, 1, strings.id("wall"));
    int_field(&mut period_type, 2, strings.id("nanoseconds"));
    bytes_field(&mut profile, 11, &period_type);
    int_field(&mut profile, 12, 1);
    int_field(&mut profile, 14, strings.id("wall"));
    // 6: string_table, last (every string is interned by now); "" first, as pprof requires.
    for string in &strings.list {
        bytes_field(&mut profile, 6, string.as_bytes());
    }
    profile
}

/// The profile's string table: "" at 0, each string once.
struct Strings {
    list: Vec<String>,
    ids: HashMap<String, u64>,
}

impl Default for Strings {
    fn default() -> Self {
        Self {
            list: vec![String::new()],
            ids: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Strings {
    fn id(&mut self, s: &str) -> u64 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.list.len() as u64;
        self.list.push(s.to_owned());
        self.ids.insert(s.to_owned(), id);
        id
    }
}
