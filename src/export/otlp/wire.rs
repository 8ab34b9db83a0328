//! Our own protobuf encoder of the OTLP requests: the bytes that prost writes for the
//! messages of [`Otlp::requests`], written straight from the [`Trace`](crate::trace::Trace)
//! without building the messages (`tests/mock/otlp.rs` proves them equal, and `benches/otlp.rs`
//! measures both).
//!
//! Each span's body is written once into a scratch buffer, whose length is then its length
//! prefix; a key-value's and an `AnyValue`'s lengths are computed before they are written, so
//! nothing is measured twice. The attributes every span of a thread or of a callsite shares
//! (`thread.*`, `code.*`) are encoded once and copied. Nothing is allocated per span.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use super::attributes::{
    CODE_FILEPATH, CODE_FUNCTION, CODE_LINENO, CODE_NAMESPACE, HOST_NAME, PROCESS_EXECUTABLE_NAME,
    PROCESS_PID, SERVICE_NAME, TELEMETRY_SDK_LANGUAGE, TELEMETRY_SDK_NAME, TELEMETRY_SDK_VERSION,
    THREAD_ID, THREAD_NAME, TICKSCOPE_ALLOC_BYTES, TICKSCOPE_ALLOC_COUNT, TICKSCOPE_ASYNC_BUSY_NS,
    TICKSCOPE_ASYNC_POLLS, TICKSCOPE_COUNTER_AMOUNT, TICKSCOPE_COUNTER_OP, TICKSCOPE_COUNTER_VALUE,
    TICKSCOPE_EVENTS_OUTSIDE_SPANS, TICKSCOPE_FOLDED_COUNT, TICKSCOPE_FOLDED_NS,
    TICKSCOPE_FREE_BYTES, TICKSCOPE_FREE_COUNT, TICKSCOPE_INSTANT_SCOPE, TICKSCOPE_LINK_SEQ,
    TICKSCOPE_LINK_THREAD, TICKSCOPE_OPEN_AT_STOP, TICKSCOPE_OVERHEAD_NS, TICKSCOPE_PEAK_BYTES,
};
use super::fields::{
    Any, attribute, fix_length, fixed64, message_field, number, string_field, uint, value,
};
use super::map::{EVENTS_SPAN_NAME, EventOf, NONE, Of, Otlp};
use crate::export::proto::{varint, varint_len};
use crate::record::callsite::Callsite;
use crate::trace::{CounterOp, InstantScope, SpanKind};

// One-byte keys (field number << 3 | wire type) of the fields written.
/// `Span.attributes` (9), `Event.attributes` (3), `Link.attributes` (4),
/// `Resource.attributes` (1), `InstrumentationScope.name` (1): length-delimited.
const SPAN_ATTRIBUTE: u8 = 9 << 3 | 2;
const EVENT_ATTRIBUTE: u8 = 3 << 3 | 2;
const LINK_ATTRIBUTE: u8 = 4 << 3 | 2;
const RESOURCE_ATTRIBUTE: u8 = 1 << 3 | 2;
/// `Span.name` (5), `Event.name` (2).
const SPAN_NAME: u8 = 5 << 3 | 2;
const EVENT_NAME: u8 = 2 << 3 | 2;

/// A hasher of addresses: one multiplication (they are distinct, aligned, few).
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_usize(&mut self, address: usize) {
        // Fibonacci hashing, its high half folded into the low bits the table indexes with.
        let h = (address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 32);
    }
}

type BuildAddressHasher = BuildHasherDefault<AddressHasher>;

/// The encoder of one [`Otlp`]'s requests, with its caches and scratch buffers.
pub(super) struct Encoder<'o, 't> {
    otlp: &'o Otlp<'t>,
    /// Encoded attributes shared by many spans: `thread.*` and `code.*`.
    shared: Vec<u8>,
    /// Each thread's `thread.*` attributes in `shared` (by index in `Trace::threads`).
    threads: Vec<Option<Range<usize>>>,
    /// Each callsite's `code.*` attributes in `shared` (by address).
    callsites: HashMap<usize, Range<usize>, BuildAddressHasher>,
    /// Each process's `ResourceSpans.resource` field and `ScopeSpans.scope` field.
    resources: Vec<Option<(Vec<u8>, Vec<u8>)>>,
    /// One event's or link's body.
    part: Vec<u8>,
    /// The spans of one `ScopeSpans`, with their keys and lengths.
    spans: Vec<u8>,
}

impl<'o, 't> Encoder<'o, 't> {
    pub(super) fn new(otlp: &'o Otlp<'t>) -> Self {
        Self {
            otlp,
            shared: Vec::new(),
            threads: vec![None; otlp.trace.threads.len()],
            callsites: HashMap::default(),
            resources: vec![None; otlp.trace.processes.len()],
            part: Vec::with_capacity(128),
            spans: Vec::new(),
        }
    }

    /// The request of the kept nodes `range`: with `limited`, only as many of them as the
    /// batch limits allow (at least one), as [`Otlp::requests`] batches. Returns the end of
    /// the nodes it holds and its bytes.
    pub(super) fn request(&mut self, range: Range<usize>, limited: bool) -> (usize, Vec<u8>) {
        let otlp = self.otlp;
        let (max_spans, max_bytes) = if limited {
            (otlp.options.batch_spans, otlp.options.max_batch_bytes)
        } else {
            (usize::MAX, usize::MAX)
        };
        let mut out = Vec::new();
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        let (mut bytes, mut count, mut at) = (0usize, 0usize, range.start);
        let mut current: Option<u32> = None;
        while at < range.end && count < max_spans {
            let i = otlp.kept[at];
            let process = otlp.nodes[i as usize].process;
            // The span is written in place after the spans of its resource, its key and a
            // two-byte length first (most spans are 128 bytes to 16 KiB long).
            let from = spans.len();
            spans.extend_from_slice(&[2 << 3 | 2, 0, 0]);
            self.span(i, &mut spans);
            let body = spans.len() - from - 3;
            // The sizes the reference batching counts: body + 8 per span, empty
            // `ResourceSpans` + 8 per resource.
            let len = body + 8;
            let new_resource = current != Some(process);
            let extra = if new_resource {
                self.resource_len(process) + 8
            } else {
                0
            };
            if count > 0 && bytes + len + extra > max_bytes {
                spans.truncate(from);
                break;
            }
            if new_resource && let Some(p) = current {
                // The span begins the next resource's spans.
                self.resource_spans(p, &spans[..from], &mut out);
                spans.drain(..from);
            }
            if new_resource {
                current = Some(process);
                bytes += extra;
            }
            let start = spans.len() - body - 3;
            fix_length(&mut spans, start + 1, body);
            bytes += len;
            count += 1;
            at += 1;
        }
        if let Some(p) = current {
            self.resource_spans(p, &spans, &mut out);
        }
        self.spans = spans;
        (at, out)
    }

    /// Process `p`'s `resource` and `scope` fields, made once.
    fn resource(&mut self, p: u32) -> &(Vec<u8>, Vec<u8>) {
        let otlp = self.otlp;
        self.resources[p as usize].get_or_insert_with(|| {
            let process = &otlp.trace.processes[p as usize];
            let mut body = Vec::new();
            let service = otlp.services[p as usize].as_str();
            attribute(
                &mut body,
                RESOURCE_ATTRIBUTE,
                SERVICE_NAME,
                Any::Str(service),
            );
            attribute(
                &mut body,
                RESOURCE_ATTRIBUTE,
                PROCESS_PID,
                Any::Int(i64::from(process.id)),
            );
            for (key, v) in [
                (TELEMETRY_SDK_NAME, "tickscope"),
                (TELEMETRY_SDK_LANGUAGE, "rust"),
                (TELEMETRY_SDK_VERSION, env!("CARGO_PKG_VERSION")),
            ] {
                attribute(&mut body, RESOURCE_ATTRIBUTE, key, Any::Str(v));
            }
            if !process.name.is_empty() {
                let name = Any::Str(&process.name);
                attribute(&mut body, RESOURCE_ATTRIBUTE, PROCESS_EXECUTABLE_NAME, name);
            }
            if !process.host.is_empty() {
                attribute(
                    &mut body,
                    RESOURCE_ATTRIBUTE,
                    HOST_NAME,
                    Any::Str(&process.host),
                );
            }
            let mut resource = Vec::new();
            message_field(&mut resource, 1 << 3 | 2, &body);
            body.clear();
            string_field(&mut body, 1 << 3 | 2, b"tickscope");
            string_field(&mut body, 2 << 3 | 2, env!("CARGO_PKG_VERSION").as_bytes());
            let mut scope = Vec::new();
            message_field(&mut scope, 1 << 3 | 2, &body);
            (resource, scope)
        })
    }

    /// The length of process `p`'s `ResourceSpans` without spans.
    fn resource_len(&mut self, p: u32) -> usize {
        let (resource, scope) = self.resource(p);
        resource.len() + 1 + varint_len(scope.len() as u64) + scope.len()
    }

    /// Process `p`'s `ResourceSpans` holding `spans` (encoded `ScopeSpans.spans` fields), as
    /// field 1 of the request.
    fn resource_spans(&mut self, p: u32, spans: &[u8], out: &mut Vec<u8>) {
        let (resource, scope) = self.resource(p);
        let scope_len = scope.len() + spans.len();
        let len = resource.len() + 1 + varint_len(scope_len as u64) + scope_len;
        out.reserve(len + 10);
        out.push(1 << 3 | 2);
        varint(out, len as u64);
        out.extend_from_slice(resource);
        out.push(2 << 3 | 2);
        varint(out, scope_len as u64);
        out.extend_from_slice(scope);
        out.extend_from_slice(spans);
    }

    /// The `thread.*` attributes of thread `t` (an index in `Trace::threads`).
    fn thread(&mut self, t: u32) -> Range<usize> {
        if let Some(range) = &self.threads[t as usize] {
            return range.clone();
        }
        let thread = &self.otlp.trace.threads[t as usize];
        let from = self.shared.len();
        attribute(&mut self.shared, SPAN_ATTRIBUTE, THREAD_ID, uint(thread.id));
        if let Some(name) = &thread.name {
            attribute(
                &mut self.shared,
                SPAN_ATTRIBUTE,
                THREAD_NAME,
                Any::Str(name),
            );
        }
        let range = from..self.shared.len();
        self.threads[t as usize] = Some(range.clone());
        range
    }

    /// The `code.*` attributes of `callsite`.
    fn code(&mut self, callsite: &'static Callsite) -> Range<usize> {
        let shared = &mut self.shared;
        self.callsites
            .entry(std::ptr::from_ref(callsite) as usize)
            .or_insert_with(|| {
                let from = shared.len();
                for (key, v) in [
                    (CODE_FUNCTION, callsite.name()),
                    (CODE_NAMESPACE, callsite.module_path()),
                    (CODE_FILEPATH, callsite.file()),
                ] {
                    attribute(shared, SPAN_ATTRIBUTE, key, Any::Str(v));
                }
                let line = Any::Int(i64::from(callsite.line()));
                attribute(shared, SPAN_ATTRIBUTE, CODE_LINENO, line);
                from..shared.len()
            })
            .clone()
    }

    /// The body of the `Span` of kept node `i`, as [`Otlp::span`](super::Otlp) makes it.
    fn span(&mut self, i: u32, out: &mut Vec<u8>) {
        let otlp = self.otlp;
        let trace = otlp.trace;
        let node = &otlp.nodes[i as usize];
        string_field(out, 1 << 3 | 2, &otlp.trace_id_bytes(i));
        string_field(out, 2 << 3 | 2, &otlp.span_id_bytes(i));
        if node.parent != NONE {
            string_field(out, 4 << 3 | 2, &otlp.span_id_bytes(node.parent));
        }
        // The name (left out when empty), then the attributes before the code ones.
        let (callsite, open_at_stop) = match node.of {
            // (A span elsewhere is never sent.)
            Of::Events | Of::Elsewhere(_) => {
                string_field(out, SPAN_NAME, EVENTS_SPAN_NAME.as_bytes());
                out.extend_from_slice(&[6 << 3, 1]);
                times(out, node.start, node.end);
                let key = TICKSCOPE_EVENTS_OUTSIDE_SPANS;
                attribute(out, SPAN_ATTRIBUTE, key, Any::Bool(true));
                (None, false)
            }
            Of::Async(a) => {
                let call = &trace.async_spans[a as usize];
                name(out, SPAN_NAME, call.name(), "");
                out.extend_from_slice(&[6 << 3, 1]);
                times(out, node.start, node.end);
                attribute(out, SPAN_ATTRIBUTE, THREAD_ID, uint(call.thread));
                let polls = Any::Int(i64::from(call.polls));
                attribute(out, SPAN_ATTRIBUTE, TICKSCOPE_ASYNC_POLLS, polls);
                let busy = uint(call.busy_ns);
                attribute(out, SPAN_ATTRIBUTE, TICKSCOPE_ASYNC_BUSY_NS, busy);
                (Some(call.callsite), call.open_at_stop)
            }
            Of::Span(t, s) => {
                let thread = &trace.threads[t as usize];
                let span = &thread.spans[s as usize];
                let suffix = match span.kind {
                    SpanKind::Poll { .. } => " poll",
                    SpanKind::Scope => "",
                };
                name(out, SPAN_NAME, span.name(), suffix);
                out.extend_from_slice(&[6 << 3, 1]);
                times(out, node.start, node.end);
                let shared = self.thread(t);
                out.extend_from_slice(&self.shared[shared]);
                for arg in thread.args_of(s) {
                    attribute(out, SPAN_ATTRIBUTE, arg.key, value(&arg.value));
                }
                if let Some(m) = thread.memory.get(s as usize) {
                    for (key, v) in [
                        (TICKSCOPE_ALLOC_BYTES, m.alloc_bytes),
                        (TICKSCOPE_ALLOC_COUNT, m.allocs),
                        (TICKSCOPE_FREE_BYTES, m.freed_bytes),
                        (TICKSCOPE_FREE_COUNT, m.frees),
                        (TICKSCOPE_PEAK_BYTES, m.peak_bytes),
                    ] {
                        attribute(out, SPAN_ATTRIBUTE, key, uint(v));
                    }
                }
                if span.overhead_ns > 0 {
                    let overhead = uint(span.overhead_ns);
                    attribute(out, SPAN_ATTRIBUTE, TICKSCOPE_OVERHEAD_NS, overhead);
                }
                (Some(span.callsite), span.open_at_stop)
            }
        };
        if let Some(callsite) = callsite {
            let shared = self.code(callsite);
            out.extend_from_slice(&self.shared[shared]);
        }
        if open_at_stop {
            attribute(out, SPAN_ATTRIBUTE, TICKSCOPE_OPEN_AT_STOP, Any::Bool(true));
        }
        if node.folded_count > 0 {
            let count = uint(node.folded_count);
            attribute(out, SPAN_ATTRIBUTE, TICKSCOPE_FOLDED_COUNT, count);
            attribute(
                out,
                SPAN_ATTRIBUTE,
                TICKSCOPE_FOLDED_NS,
                uint(node.folded_ns),
            );
        }
        let from = otlp.links.partition_point(|&(rep, _)| rep < i);
        let links = &otlp.links[from..];
        let links = &links[..links.partition_point(|&(rep, _)| rep == i)];
        // Links whose origin has no span: attributes of the span, before its events.
        for &(_, f) in links {
            let flow = &otlp.flows[f as usize];
            if otlp.link_ids(f).is_none() {
                link_attributes(out, SPAN_ATTRIBUTE, flow.seq, flow.origin_thread);
            }
        }
        let holder = matches!(node.of, Of::Events);
        for event in otlp.events_of(i) {
            let part = &mut self.part;
            part.clear();
            fixed64(part, 1 << 3 | 1, event.ns);
            match event.of {
                EventOf::Instant(x) => {
                    let instant = &trace.instants[x as usize];
                    name(part, EVENT_NAME, instant.name(), "");
                    if holder {
                        attribute(part, EVENT_ATTRIBUTE, THREAD_ID, uint(instant.thread));
                    }
                    for (key, v) in &instant.args {
                        attribute(part, EVENT_ATTRIBUTE, key, value(v));
                    }
                    if instant.scope == InstantScope::Process {
                        let scope = Any::Str("process");
                        attribute(part, EVENT_ATTRIBUTE, TICKSCOPE_INSTANT_SCOPE, scope);
                    }
                }
                EventOf::Counter(c, s) => {
                    let track = &trace.counters[c as usize];
                    let sample = &track.samples[s as usize];
                    name(part, EVENT_NAME, track.name, "");
                    if holder {
                        attribute(part, EVENT_ATTRIBUTE, THREAD_ID, uint(sample.thread));
                    }
                    let v = number(sample.value);
                    attribute(part, EVENT_ATTRIBUTE, TICKSCOPE_COUNTER_VALUE, v);
                    let op = Any::Str(match sample.op {
                        CounterOp::Set => "set",
                        CounterOp::Add => "add",
                    });
                    attribute(part, EVENT_ATTRIBUTE, TICKSCOPE_COUNTER_OP, op);
                    let amount = number(sample.amount);
                    attribute(part, EVENT_ATTRIBUTE, TICKSCOPE_COUNTER_AMOUNT, amount);
                }
            }
            message_field(out, 11 << 3 | 2, part);
        }
        for &(_, f) in links {
            let flow = &otlp.flows[f as usize];
            if let Some((trace_id, span_id)) = otlp.link_ids(f) {
                let part = &mut self.part;
                part.clear();
                string_field(part, 1 << 3 | 2, &trace_id);
                string_field(part, 2 << 3 | 2, &span_id);
                link_attributes(part, LINK_ATTRIBUTE, flow.seq, flow.origin_thread);
                message_field(out, 13 << 3 | 2, part);
            }
        }
    }
}

/// `name` and `suffix` as the name field of one-byte key `key`, left out when empty (as
/// prost leaves out an empty string).
fn name(out: &mut Vec<u8>, key: u8, name: &str, suffix: &str) {
    let len = name.len() + suffix.len();
    if len > 0 {
        out.push(key);
        varint(out, len as u64);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(suffix.as_bytes());
    }
}

/// A span's start and end, left out when zero.
fn times(out: &mut Vec<u8>, start: u64, end: u64) {
    fixed64(out, 7 << 3 | 1, start);
    fixed64(out, 8 << 3 | 1, end);
}

/// `tickscope.link.seq` and `tickscope.link.thread` as fields of key `field`.
fn link_attributes(out: &mut Vec<u8>, field: u8, seq: u32, thread: u64) {
    attribute(out, field, TICKSCOPE_LINK_SEQ, Any::Int(i64::from(seq)));
    attribute(out, field, TICKSCOPE_LINK_THREAD, uint(thread));
}
