//! The requests as the `opentelemetry-proto` crate's messages ([`Otlp::requests`]), and
//! the protobuf our own encoder makes of them ([`Otlp::encode_requests`]).

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, span};
use prost::Message;

use super::attributes::{
    CODE_FILEPATH, CODE_FUNCTION, CODE_LINENO, CODE_NAMESPACE, HOST_NAME, PROCESS_EXECUTABLE_NAME,
    PROCESS_PID, SERVICE_NAME, TELEMETRY_SDK_LANGUAGE, TELEMETRY_SDK_NAME, TELEMETRY_SDK_VERSION,
    THREAD_ID, THREAD_NAME, TICKSCOPE_ALLOC_BYTES, TICKSCOPE_ALLOC_COUNT, TICKSCOPE_ASYNC_BUSY_NS,
    TICKSCOPE_ASYNC_POLLS, TICKSCOPE_COUNTER_AMOUNT, TICKSCOPE_COUNTER_OP, TICKSCOPE_COUNTER_VALUE,
    TICKSCOPE_EVENTS_OUTSIDE_SPANS, TICKSCOPE_FOLDED_COUNT, TICKSCOPE_FOLDED_NS,
    TICKSCOPE_FREE_BYTES, TICKSCOPE_FREE_COUNT, TICKSCOPE_INSTANT_SCOPE, TICKSCOPE_LINK_SEQ,
    TICKSCOPE_LINK_THREAD, TICKSCOPE_OPEN_AT_STOP, TICKSCOPE_OVERHEAD_NS, TICKSCOPE_PEAK_BYTES,
};
use super::map::{EVENTS_SPAN_NAME, EventOf, NONE, Of, Otlp};
use super::wire;
use crate::record::callsite::Callsite;
use crate::trace::{CounterOp, InstantScope, Number, SpanKind, Value};

impl<'t> Otlp<'t> {
    fn span_id(&self, i: u32) -> Vec<u8> {
        self.span_id_bytes(i).to_vec()
    }

    fn trace_id(&self, i: u32) -> Vec<u8> {
        self.trace_id_bytes(i).to_vec()
    }

    /// The requests of [`Otlp::requests`], encoded as protobuf (what [`Otlp::push`] sends,
    /// before gzip), by our own encoder: the bytes prost writes for those messages, without
    /// building them, several times faster.
    pub fn encode_requests(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        let mut encoder = wire::Encoder::new(self);
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= self.kept.len() {
                return None;
            }
            let (end, bytes) = encoder.request(at..self.kept.len(), true);
            at = end;
            Some(bytes)
        })
    }

    /// The requests, in batches of at most
    /// [`Options::batch_spans`](super::Options::batch_spans) spans and
    /// [`Options::max_batch_bytes`](super::Options::max_batch_bytes) bytes, processes in
    /// order.
    pub fn requests(&self) -> impl Iterator<Item = ExportTraceServiceRequest> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= self.kept.len() {
                return None;
            }
            let mut request = ExportTraceServiceRequest::default();
            let mut bytes = 0usize;
            let mut count = 0usize;
            let mut last_process = None;
            while at < self.kept.len() && count < self.options.batch_spans {
                let i = self.kept[at];
                let process = self.nodes[i as usize].process;
                let span = self.span(i);
                let len = span.encoded_len() + 8;
                let new_resource = last_process != Some(process);
                let resource = new_resource.then(|| self.resource_spans(process));
                let extra = resource.as_ref().map_or(0, |r| r.encoded_len() + 8);
                if count > 0 && bytes + len + extra > self.options.max_batch_bytes {
                    break;
                }
                if let Some(resource) = resource {
                    request.resource_spans.push(resource);
                    bytes += extra;
                    last_process = Some(process);
                }
                let last = request.resource_spans.last_mut().expect("pushed above");
                last.scope_spans[0].spans.push(span);
                bytes += len;
                count += 1;
                at += 1;
            }
            Some(request)
        })
    }

    /// An empty `ResourceSpans` of process `process`.
    pub(super) fn resource_spans(&self, process: u32) -> ResourceSpans {
        let p = &self.trace.processes[process as usize];
        let mut attributes = vec![
            kv(SERVICE_NAME, string(&self.services[process as usize])),
            kv(PROCESS_PID, int(i64::from(p.id))),
            kv(TELEMETRY_SDK_NAME, string("tickscope")),
            kv(TELEMETRY_SDK_LANGUAGE, string("rust")),
            kv(TELEMETRY_SDK_VERSION, string(env!("CARGO_PKG_VERSION"))),
        ];
        if !p.name.is_empty() {
            attributes.push(kv(PROCESS_EXECUTABLE_NAME, string(&p.name)));
        }
        if !p.host.is_empty() {
            attributes.push(kv(HOST_NAME, string(&p.host)));
        }
        ResourceSpans {
            resource: Some(Resource {
                attributes,
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "tickscope".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..Default::default()
                }),
                spans: Vec::new(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }
    }

    /// The OTLP span of kept node `i`.
    pub(super) fn span(&self, i: u32) -> opentelemetry_proto::tonic::trace::v1::Span {
        let node = &self.nodes[i as usize];
        let trace = self.trace;
        let mut attributes = Vec::with_capacity(8);
        let (name, callsite, open_at_stop) = match node.of {
            // (A span elsewhere is never sent.)
            Of::Events | Of::Elsewhere(_) => {
                attributes.push(kv(TICKSCOPE_EVENTS_OUTSIDE_SPANS, bool_value(true)));
                (EVENTS_SPAN_NAME.to_owned(), None, false)
            }
            Of::Async(a) => {
                let call = &trace.async_spans[a as usize];
                attributes.push(kv(THREAD_ID, uint(call.thread)));
                attributes.push(kv(TICKSCOPE_ASYNC_POLLS, int(i64::from(call.polls))));
                attributes.push(kv(TICKSCOPE_ASYNC_BUSY_NS, uint(call.busy_ns)));
                (
                    call.name().to_owned(),
                    Some(call.callsite),
                    call.open_at_stop,
                )
            }
            Of::Span(t, s) => {
                let thread = &trace.threads[t as usize];
                let span = &thread.spans[s as usize];
                attributes.push(kv(THREAD_ID, uint(thread.id)));
                if let Some(name) = &thread.name {
                    attributes.push(kv(THREAD_NAME, string(name)));
                }
                for arg in thread.args_of(s) {
                    attributes.push(kv(arg.key, value(&arg.value)));
                }
                if let Some(m) = thread.memory.get(s as usize) {
                    attributes.push(kv(TICKSCOPE_ALLOC_BYTES, uint(m.alloc_bytes)));
                    attributes.push(kv(TICKSCOPE_ALLOC_COUNT, uint(m.allocs)));
                    attributes.push(kv(TICKSCOPE_FREE_BYTES, uint(m.freed_bytes)));
                    attributes.push(kv(TICKSCOPE_FREE_COUNT, uint(m.frees)));
                    attributes.push(kv(TICKSCOPE_PEAK_BYTES, uint(m.peak_bytes)));
                }
                if span.overhead_ns > 0 {
                    attributes.push(kv(TICKSCOPE_OVERHEAD_NS, uint(span.overhead_ns)));
                }
                let name = match span.kind {
                    SpanKind::Poll { .. } => format!("{} poll", span.name()),
                    SpanKind::Scope => span.name().to_owned(),
                };
                (name, Some(span.callsite), span.open_at_stop)
            }
        };
        if let Some(callsite) = callsite {
            code_attributes(&mut attributes, callsite);
        }
        if open_at_stop {
            attributes.push(kv(TICKSCOPE_OPEN_AT_STOP, bool_value(true)));
        }
        if node.folded_count > 0 {
            attributes.push(kv(TICKSCOPE_FOLDED_COUNT, uint(node.folded_count)));
            attributes.push(kv(TICKSCOPE_FOLDED_NS, uint(node.folded_ns)));
        }
        let mut links = Vec::new();
        let from = self.links.partition_point(|&(rep, _)| rep < i);
        for &(_, f) in self.links[from..].iter().take_while(|&&(rep, _)| rep == i) {
            let flow = &self.flows[f as usize];
            let link_attributes = vec![
                kv(TICKSCOPE_LINK_SEQ, int(i64::from(flow.seq))),
                kv(TICKSCOPE_LINK_THREAD, uint(flow.origin_thread)),
            ];
            match self.link_ids(f) {
                Some((trace_id, span_id)) => links.push(span::Link {
                    trace_id: trace_id.to_vec(),
                    span_id: span_id.to_vec(),
                    attributes: link_attributes,
                    ..Default::default()
                }),
                None => attributes.extend(link_attributes),
            }
        }
        opentelemetry_proto::tonic::trace::v1::Span {
            trace_id: self.trace_id(i),
            span_id: self.span_id(i),
            parent_span_id: if node.parent == NONE {
                Vec::new()
            } else {
                self.span_id(node.parent)
            },
            name,
            kind: span::SpanKind::Internal as i32,
            start_time_unix_nano: node.start,
            end_time_unix_nano: node.end,
            attributes,
            events: self.span_events(i),
            links,
            ..Default::default()
        }
    }

    /// The span events of kept node `i`.
    fn span_events(&self, i: u32) -> Vec<span::Event> {
        let holder = matches!(self.nodes[i as usize].of, Of::Events);
        self.events_of(i)
            .iter()
            .map(|e| {
                let mut attributes = Vec::new();
                let name = match e.of {
                    EventOf::Instant(x) => {
                        let instant = &self.trace.instants[x as usize];
                        if holder {
                            attributes.push(kv(THREAD_ID, uint(instant.thread)));
                        }
                        for (key, v) in &instant.args {
                            attributes.push(kv(key, value(v)));
                        }
                        if instant.scope == InstantScope::Process {
                            attributes.push(kv(TICKSCOPE_INSTANT_SCOPE, string("process")));
                        }
                        instant.name()
                    }
                    EventOf::Counter(c, s) => {
                        let track = &self.trace.counters[c as usize];
                        let sample = &track.samples[s as usize];
                        if holder {
                            attributes.push(kv(THREAD_ID, uint(sample.thread)));
                        }
                        attributes.push(kv(TICKSCOPE_COUNTER_VALUE, number(sample.value)));
                        let op = match sample.op {
                            CounterOp::Set => "set",
                            CounterOp::Add => "add",
                        };
                        attributes.push(kv(TICKSCOPE_COUNTER_OP, string(op)));
                        attributes.push(kv(TICKSCOPE_COUNTER_AMOUNT, number(sample.amount)));
                        track.name
                    }
                };
                span::Event {
                    time_unix_nano: e.ns,
                    name: name.to_owned(),
                    attributes,
                    dropped_attributes_count: 0,
                }
            })
            .collect()
    }
}

/// `code.*` attributes of `callsite`.
fn code_attributes(attributes: &mut Vec<KeyValue>, callsite: &'static Callsite) {
    attributes.push(kv(CODE_FUNCTION, string(callsite.name())));
    attributes.push(kv(CODE_NAMESPACE, string(callsite.module_path())));
    attributes.push(kv(CODE_FILEPATH, string(callsite.file())));
    attributes.push(kv(CODE_LINENO, int(i64::from(callsite.line()))));
}

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn string(s: &str) -> any_value::Value {
    any_value::Value::StringValue(s.to_owned())
}

fn int(v: i64) -> any_value::Value {
    any_value::Value::IntValue(v)
}

/// An int, or the decimal string of a value above `i64::MAX`.
fn uint(v: u64) -> any_value::Value {
    i64::try_from(v).map_or_else(|_| any_value::Value::StringValue(v.to_string()), int)
}

fn bool_value(v: bool) -> any_value::Value {
    any_value::Value::BoolValue(v)
}

fn number(n: Number) -> any_value::Value {
    match n {
        Number::Int(v) => int(v),
        Number::Float(v) => any_value::Value::DoubleValue(v),
    }
}

pub(super) fn value(v: &Value) -> any_value::Value {
    match v {
        Value::I64(v) => int(*v),
        Value::U64(v) => uint(*v),
        Value::F64(v) => any_value::Value::DoubleValue(*v),
        Value::Bool(v) => bool_value(*v),
        Value::Str(v) => string(v),
    }
}
