//! OpenTelemetry traces (OTLP), for the backends teams already run: an OpenTelemetry
//! Collector, Jaeger, Grafana Tempo, Arize Phoenix, Honeycomb. Cargo feature `otlp`.
//!
//! [`Otlp`] builds `ExportTraceServiceRequest`s (the OpenTelemetry project's own message
//! types, from the `opentelemetry-proto` crate, re-exported as [`opentelemetry_proto`]) from a [`Trace`](crate::trace::Trace);
//! [`Otlp::write_json`] writes them as an OTLP/JSON file (`.otlp.json`: one request per line,
//! as the Collector's `otlpjsonfile` receiver reads it) and [`Otlp::push`] sends them over
//! OTLP/HTTP (protobuf, gzipped, `POST {endpoint}/v1/traces`).
//!
//! # Mapping
//!
//! | tickscope | OTLP |
//! | --- | --- |
//! | a process of the trace | a `ResourceSpans` whose `Resource` has `service.name` ([`Options::service_name`], else `OTEL_SERVICE_NAME`, else the executable's name), `process.pid`, `process.executable.name`, `host.name`, `telemetry.sdk.name` = `tickscope`, `telemetry.sdk.language` = `rust`, `telemetry.sdk.version`; one `ScopeSpans` with instrumentation scope `tickscope` and the crate's version |
//! | a scope | a span (kind `INTERNAL`): name, `start_time_unix_nano` and `end_time_unix_nano` exactly the trace's Unix ns, a unique `span_id` |
//! | nesting on a thread | `parent_span_id` |
//! | a root scope (no parent) | a `trace_id` of its own, shared by everything under it; [`Options::trace_per_process`] gives each process one |
//! | scope arguments | attributes of their type: int, double, bool, string (a `u64` above `i64::MAX` as its decimal string) |
//! | its thread | `thread.id` (tickscope's id), `thread.name` when it has one |
//! | its callsite | `code.function` (the scope's name), `code.namespace` (module path), `code.filepath`, `code.lineno` |
//! | memory tracking | `tickscope.alloc.bytes`, `tickscope.alloc.count`, `tickscope.free.bytes`, `tickscope.free.count`, `tickscope.peak.bytes` (child scopes included) |
//! | still open at stop | `tickscope.open_at_stop` = `true` (its end is the session's stop) |
//! | overhead compensation | `tickscope.overhead_ns` when the span's probes were subtracted from its duration in the table |
//! | a `#[profile] async fn` call | one span over the whole call (first poll to completion), `tickscope.async.polls`, `tickscope.async.busy_ns`; its parent is the scope around its first poll |
//! | each poll of it | a child span of the call's span, named `<fn> poll`, on the polling thread; scopes inside the poll are its children |
//! | `follows = link` | a span link to the scope where the link was captured (when it was recorded), attributes `tickscope.link.seq` and `tickscope.link.thread` |
//! | folded scopes ([`Options::min_duration`], [`Options::max_depth`]) | on the span they fold into: `tickscope.folded.count` (scopes folded in, at any depth) and `tickscope.folded.ns` (the wall time of its folded direct children) |
//!
//! | an instant (`instant!`) | a span event on the innermost span open on its thread at its time (a span is open from its start tick up to, not including, its end; one cut at stop up to its end): its name, `time_unix_nano` exactly the trace's Unix ns, its arguments as attributes, `tickscope.instant.scope` = `process` for a process-wide one |
//! | a counter sample (`counter!`) | a span event as an instant is, named after the counter: `tickscope.counter.value` (the value after it: int, or double), `tickscope.counter.op` (`set` or `add`), `tickscope.counter.amount` |
//! | events outside every span | a span of their process, [`EVENTS_SPAN_NAME`] (a root over the trace's window, `tickscope.events_outside_spans` = `true`); each event there has `thread.id` |
//! | events of a folded span | on the span it folds into; of a sampled-out root call: counted in [`Stats::events_sampled_out`] |
//!
//! A span's events are in time order; at equal times instants come before counter samples.
//!
//! # Encoding
//!
//! [`Otlp::requests`] builds the `opentelemetry-proto` messages (the reference, and the
//! OTLP/JSON form); [`Otlp::encode_requests`] and [`Otlp::push`] write the same protobuf
//! bytes with our own encoder, straight from the trace, several times faster (see
//! `benches/otlp.rs`).
//!
//! # Volume
//!
//! A session may record millions of scopes; [`Options::min_duration`] folds short scopes into
//! their parent, [`Options::max_depth`] folds deep ones, and [`Options::sample_roots`] keeps one
//! root call in `n` (with everything under it). A root is never folded (there is nothing to
//! fold it into). [`Stats`] counts every span: sent, folded, sampled out.
//!
//! ```
//! use tickscope::export::otlp::{Options, Otlp};
//!
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! {
//!     let _outer = tickscope::scope!("outer");
//!     let _inner = tickscope::scope!("inner", rows = 3);
//! }
//! prof.stop();
//! let trace = prof.trace();
//! let otlp = Otlp::new(&trace, &Options::new().service_name("demo"));
//! assert_eq!(otlp.stats().sent, 2);
//! let request = otlp.requests().next().unwrap();
//! assert_eq!(request.resource_spans[0].scope_spans[0].spans.len(), 2);
//! // otlp.write_json("trace.otlp.json")?; otlp.push(Endpoint::from_env(), &PushOptions::from_env()?)?;
//! ```

use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, span};
use prost::Message;

use crate::record::callsite::Callsite;
use crate::trace::{CounterOp, InstantScope, Number, SpanKind, Value};

mod map;
mod pieces;
mod wire;

pub use map::{
    DEFAULT_BATCH_SPANS, DEFAULT_MAX_BATCH_BYTES, EVENTS_SPAN_NAME, Options, Otlp, Stats,
};
use map::{EventOf, NONE, Of};

/// The request [`Otlp::requests`] gives, the OpenTelemetry project's own message type (from
/// the `opentelemetry-proto` crate, version 0.33, whose other types its fields have: depend on
/// that crate to read them).
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

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

    /// The requests, in batches of at most [`Options::batch_spans`] spans and
    /// [`Options::max_batch_bytes`] bytes, processes in order.
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
    fn resource_spans(&self, process: u32) -> ResourceSpans {
        let p = &self.trace.processes[process as usize];
        let mut attributes = vec![
            kv("service.name", string(&self.services[process as usize])),
            kv("process.pid", int(i64::from(p.id))),
            kv("telemetry.sdk.name", string("tickscope")),
            kv("telemetry.sdk.language", string("rust")),
            kv("telemetry.sdk.version", string(env!("CARGO_PKG_VERSION"))),
        ];
        if !p.name.is_empty() {
            attributes.push(kv("process.executable.name", string(&p.name)));
        }
        if !p.host.is_empty() {
            attributes.push(kv("host.name", string(&p.host)));
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
    fn span(&self, i: u32) -> opentelemetry_proto::tonic::trace::v1::Span {
        let node = &self.nodes[i as usize];
        let trace = self.trace;
        let mut attributes = Vec::with_capacity(8);
        let (name, callsite, open_at_stop) = match node.of {
            Of::Events => {
                attributes.push(kv("tickscope.events_outside_spans", bool_value(true)));
                (EVENTS_SPAN_NAME.to_owned(), None, false)
            }
            Of::Async(a) => {
                let call = &trace.async_spans[a as usize];
                attributes.push(kv("thread.id", uint(call.thread)));
                attributes.push(kv("tickscope.async.polls", int(i64::from(call.polls))));
                attributes.push(kv("tickscope.async.busy_ns", uint(call.busy_ns)));
                (
                    call.name().to_owned(),
                    Some(call.callsite),
                    call.open_at_stop,
                )
            }
            Of::Span(t, s) => {
                let thread = &trace.threads[t as usize];
                let span = &thread.spans[s as usize];
                attributes.push(kv("thread.id", uint(thread.id)));
                if let Some(name) = &thread.name {
                    attributes.push(kv("thread.name", string(name)));
                }
                for arg in thread.args_of(s) {
                    attributes.push(kv(arg.key, value(&arg.value)));
                }
                if let Some(m) = thread.memory.get(s as usize) {
                    attributes.push(kv("tickscope.alloc.bytes", uint(m.alloc_bytes)));
                    attributes.push(kv("tickscope.alloc.count", uint(m.allocs)));
                    attributes.push(kv("tickscope.free.bytes", uint(m.freed_bytes)));
                    attributes.push(kv("tickscope.free.count", uint(m.frees)));
                    attributes.push(kv("tickscope.peak.bytes", uint(m.peak_bytes)));
                }
                if span.overhead_ns > 0 {
                    attributes.push(kv("tickscope.overhead_ns", uint(span.overhead_ns)));
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
            attributes.push(kv("tickscope.open_at_stop", bool_value(true)));
        }
        if node.folded_count > 0 {
            attributes.push(kv("tickscope.folded.count", uint(node.folded_count)));
            attributes.push(kv("tickscope.folded.ns", uint(node.folded_ns)));
        }
        let mut links = Vec::new();
        let from = self.links.partition_point(|&(rep, _)| rep < i);
        for &(_, f) in self.links[from..].iter().take_while(|&&(rep, _)| rep == i) {
            let flow = &trace.flows[f as usize];
            let link_attributes = vec![
                kv("tickscope.link.seq", int(i64::from(flow.seq))),
                kv("tickscope.link.thread", uint(flow.origin_thread)),
            ];
            match self.link_origin(flow) {
                Some(o) => links.push(span::Link {
                    trace_id: self.trace_id(o),
                    span_id: self.span_id(o),
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
                            attributes.push(kv("thread.id", uint(instant.thread)));
                        }
                        for (key, v) in &instant.args {
                            attributes.push(kv(key, value(v)));
                        }
                        if instant.scope == InstantScope::Process {
                            attributes.push(kv("tickscope.instant.scope", string("process")));
                        }
                        instant.name()
                    }
                    EventOf::Counter(c, s) => {
                        let track = &self.trace.counters[c as usize];
                        let sample = &track.samples[s as usize];
                        if holder {
                            attributes.push(kv("thread.id", uint(sample.thread)));
                        }
                        attributes.push(kv("tickscope.counter.value", number(sample.value)));
                        let op = match sample.op {
                            CounterOp::Set => "set",
                            CounterOp::Add => "add",
                        };
                        attributes.push(kv("tickscope.counter.op", string(op)));
                        attributes.push(kv("tickscope.counter.amount", number(sample.amount)));
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

    /// Writes the requests as OTLP/JSON, one `ExportTraceServiceRequest` per line (the
    /// Collector's `otlpjsonfile` receiver reads it), to the file at `path` (gzipped when it
    /// ends in `.gz`; put in place atomically as [`write_file`](super::write_file) does).
    pub fn write_json(&self, path: impl AsRef<Path>) -> io::Result<Stats> {
        crate::capture::output::atomic_write(path.as_ref(), |out| self.write_json_to(out))?;
        Ok(self.stats)
    }

    /// Writes the requests as OTLP/JSON lines into `out`.
    pub fn write_json_to(&self, out: &mut dyn Write) -> io::Result<()> {
        for request in self.requests() {
            serde_json::to_writer(&mut *out, &request).map_err(io::Error::other)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// Writes what `captures` decode to ([`Trace::from_captures`](crate::trace::Trace::from_captures))
    /// as OTLP/JSON lines into `out`, as `Otlp::new(&trace, options).write_json_to(out)`
    /// does, and returns its [`Stats`]; but without decoding the trace whole when it can: what
    /// `tickscope convert -o x.otlp.json` does.
    ///
    /// Captures that did not track memory and hold no async call or link are decoded thread
    /// by thread, a few thousand spans at a time (whole top-level scopes), each mapped and
    /// written as it comes: the memory taken is then bounded by the scopes open at once, not
    /// by the captures' size (plus their instants and counter samples). The spans, their ids,
    /// attributes, events and batches are the whole trace's; only with several processes may
    /// the spans that hold events outside every span come later, after every process's spans.
    /// Other captures (and several processes whose threads interleave, with
    /// [`Options::sample_roots`]) are decoded whole.
    ///
    /// ```
    /// use tickscope::export::otlp::{Options, Otlp};
    ///
    /// let prof = tickscope::Profiler::builder().current_thread().start();
    /// for _ in 0..3 {
    ///     let _outer = tickscope::scope!("outer");
    ///     let _inner = tickscope::scope!("inner");
    /// }
    /// prof.stop();
    /// let options = Options::new().service_name("demo");
    /// let (mut whole, mut pieces) = (Vec::new(), Vec::new());
    /// Otlp::new(&prof.trace(), &options).write_json_to(&mut whole)?;
    /// let stats = Otlp::write_json_from_captures(&[&*prof.capture()], &options, &mut pieces)?;
    /// assert_eq!(whole, pieces);
    /// assert_eq!(stats.sent, 6);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_json_from_captures(
        captures: &[&crate::Capture],
        options: &Options,
        out: &mut dyn Write,
    ) -> io::Result<Stats> {
        if let Some(pieces) = crate::decode::pieces::Pieces::new(captures) {
            let threads = &crate::decode::pieces::SpanSource::trace(&pieces).threads;
            let in_order = threads.is_sorted_by_key(|t| t.process);
            if in_order || options.sample_roots == 1 {
                return pieces::write_json(&pieces, options, out);
            }
        }
        let trace = crate::trace::Trace::from_captures(captures.iter().copied());
        let otlp = Otlp::new(&trace, options);
        otlp.write_json_to(out)?;
        Ok(otlp.stats())
    }

    /// Sends the requests to `endpoint` over OTLP/HTTP: protobuf, gzipped, one `POST` per
    /// request, retried as [`PushOptions`] says. Stops at the first request that fails; the
    /// error says how many spans had been accepted before it.
    pub fn push(
        &self,
        endpoint: impl Into<Endpoint>,
        options: &PushOptions,
    ) -> Result<PushReport, PushError> {
        self.push_with_progress(endpoint, options, |_| {})
    }

    /// [`Otlp::push`], calling `progress` with the report so far after each request.
    pub fn push_with_progress(
        &self,
        endpoint: impl Into<Endpoint>,
        options: &PushOptions,
        mut progress: impl FnMut(&PushReport),
    ) -> Result<PushReport, PushError> {
        let endpoint = endpoint.into();
        let client = Client::new(&endpoint, options)?;
        let mut report = PushReport {
            stats: self.stats,
            ..PushReport::default()
        };
        let mut encoder = wire::Encoder::new(self);
        let mut at = 0;
        while at < self.kept.len() {
            let (end, bytes) = encoder.request(at..self.kept.len(), true);
            client.send(&mut encoder, at..end, bytes, &mut report)?;
            at = end;
            progress(&report);
        }
        Ok(report)
    }
}

/// `code.*` attributes of `callsite`.
fn code_attributes(attributes: &mut Vec<KeyValue>, callsite: &'static Callsite) {
    attributes.push(kv("code.function", string(callsite.name())));
    attributes.push(kv("code.namespace", string(callsite.module_path())));
    attributes.push(kv("code.filepath", string(callsite.file())));
    attributes.push(kv("code.lineno", int(i64::from(callsite.line()))));
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

fn value(v: &Value) -> any_value::Value {
    match v {
        Value::I64(v) => int(*v),
        Value::U64(v) => uint(*v),
        Value::F64(v) => any_value::Value::DoubleValue(*v),
        Value::Bool(v) => bool_value(*v),
        Value::Str(v) => string(v),
    }
}

/// Where [`Otlp::push`] sends: the full URL of the traces resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    url: String,
}

impl Endpoint {
    /// A base endpoint (`http://collector:4318`): requests go to `{base}/v1/traces`.
    pub fn base(base: &str) -> Self {
        Self {
            url: format!("{}/v1/traces", base.trim_end_matches('/')),
        }
    }

    /// The full URL of the traces resource, used as it is.
    pub fn traces(url: &str) -> Self {
        Self {
            url: url.to_owned(),
        }
    }

    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT` as a
    /// base, else `http://localhost:4318` as a base (the Collector's OTLP/HTTP port).
    pub fn from_env() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        if let Some(url) = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Self::traces(&url)
        } else {
            Self::base(
                var("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .as_deref()
                    .unwrap_or("http://localhost:4318"),
            )
        }
    }

    /// The URL requests are posted to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl From<&str> for Endpoint {
    /// [`Endpoint::base`].
    fn from(base: &str) -> Self {
        Self::base(base)
    }
}

/// How [`Otlp::push`] sends.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushOptions {
    timeout: Duration,
    retries: u32,
    backoff: Duration,
    max_backoff: Duration,
    headers: Vec<(String, String)>,
}

impl Default for PushOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            retries: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            headers: Vec::new(),
        }
    }
}

impl PushOptions {
    /// The defaults: a 10 s timeout per request, 5 retries from 1 s backoff (doubling, at
    /// most 30 s), no extra headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The defaults with the headers of `OTEL_EXPORTER_OTLP_HEADERS`
    /// (`key1=value1,key2=value2`, values percent-decoded).
    pub fn from_env() -> Result<Self, PushError> {
        let mut options = Self::new();
        if let Ok(headers) = std::env::var("OTEL_EXPORTER_OTLP_HEADERS") {
            options.headers = parse_headers(&headers).map_err(|message| PushError {
                endpoint: String::new(),
                kind: PushErrorKind::Config(format!("OTEL_EXPORTER_OTLP_HEADERS: {message}")),
                accepted_spans: 0,
            })?;
        }
        Ok(options)
    }

    /// The most time one request may take, connecting included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How often a request answered 429, 500, 502, 503 or 504 is tried again (default 5).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The wait before the first retry, doubled for each next one up to `max`; a
    /// `Retry-After` of the server (in seconds) replaces it, capped at `max` as well.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = first;
        self.max_backoff = max;
        self
    }

    /// Adds a header to every request (`authorization`, `x-honeycomb-team`, …).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The extra headers.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }
}

/// `key1=value1,key2=value2`, values percent-decoded.
fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    for pair in s.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("`{}` is not key=value", pair.trim()));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("`{}` has no key", pair.trim()));
        }
        headers.push((key.to_owned(), percent_decode(value.trim())?));
    }
    Ok(headers)
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return Err(format!("bad percent escape in `{s}`"));
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` is not UTF-8 once decoded"))
}

/// What [`Otlp::push`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushReport {
    /// The spans of the trace: sent, folded, sampled out.
    pub stats: Stats,
    /// Spans the endpoint accepted so far.
    pub accepted_spans: u64,
    /// Requests the endpoint accepted (a request split after a 413 counts as its parts).
    pub requests: u64,
    /// Requests tried again (after 429, 500, 502, 503, 504).
    pub retries: u64,
    /// Requests split in two after a 413.
    pub splits: u64,
    /// Bytes of the accepted requests on the wire (gzipped protobuf).
    pub wire_bytes: u64,
    /// Time spent waiting before retries (backoff, or the server's `Retry-After`).
    pub waited: Duration,
}

/// Why [`Otlp::push`] failed.
#[derive(Debug)]
pub struct PushError {
    endpoint: String,
    kind: PushErrorKind,
    accepted_spans: u64,
}

/// The kinds of [`PushError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PushErrorKind {
    /// The endpoint could not be reached (connection refused, unknown host, …).
    Connect(String),
    /// A request took longer than [`PushOptions::timeout`].
    Timeout,
    /// The endpoint answered with a status that is not retried, or with a retried one after
    /// the last retry.
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
    /// A 413 for a request of one span, which cannot be split further.
    TooLarge {
        /// The request's size on the wire.
        bytes: usize,
    },
    /// The endpoint or the options are not usable (a bad URL, `https`, bad headers).
    Config(String),
}

impl PushError {
    /// The URL that was posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// What went wrong.
    pub fn kind(&self) -> &PushErrorKind {
        &self.kind
    }

    /// Spans the endpoint had accepted before the failure.
    pub fn accepted_spans(&self) -> u64 {
        self.accepted_spans
    }
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = &self.endpoint;
        match &self.kind {
            PushErrorKind::Connect(why) => write!(f, "cannot connect to {at}: {why}")?,
            PushErrorKind::Timeout => write!(f, "{at} did not answer in time (timeout)")?,
            PushErrorKind::Status { status, body } if body.is_empty() => {
                write!(f, "{at} answered HTTP {status}")?;
            }
            PushErrorKind::Status { status, body } => {
                write!(f, "{at} answered HTTP {status}: {body}")?;
            }
            PushErrorKind::TooLarge { bytes } => write!(
                f,
                "{at} answered HTTP 413 (payload too large) to a request of one span ({bytes} bytes)"
            )?,
            PushErrorKind::Config(why) if at.is_empty() => write!(f, "{why}")?,
            PushErrorKind::Config(why) => write!(f, "{at}: {why}")?,
        }
        if self.accepted_spans > 0 {
            write!(f, " ({} spans accepted before)", self.accepted_spans)?;
        }
        Ok(())
    }
}

impl std::error::Error for PushError {}

/// An HTTP client for one endpoint.
struct Client<'o> {
    url: String,
    agent: ureq::Agent,
    options: &'o PushOptions,
}

impl<'o> Client<'o> {
    fn new(endpoint: &Endpoint, options: &'o PushOptions) -> Result<Self, PushError> {
        let url = endpoint.url.clone();
        let config_error = |why: String| PushError {
            endpoint: url.clone(),
            kind: PushErrorKind::Config(why),
            accepted_spans: 0,
        };
        if url.starts_with("https://") {
            return Err(config_error(
                "https is not built in: send to a local OpenTelemetry Collector over http".into(),
            ));
        }
        if !url.starts_with("http://") {
            return Err(config_error("the endpoint must be an http:// URL".into()));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(options.timeout))
            .build()
            .new_agent();
        Ok(Self {
            url,
            agent,
            options,
        })
    }

    fn error(&self, kind: PushErrorKind, report: &PushReport) -> PushError {
        PushError {
            endpoint: self.url.clone(),
            kind,
            accepted_spans: report.accepted_spans,
        }
    }

    /// Sends `request`, the encoded spans `range` of the kept ones, splitting it in two
    /// halves of its spans on 413.
    fn send(
        &self,
        encoder: &mut wire::Encoder<'_, '_>,
        range: std::ops::Range<usize>,
        request: Vec<u8>,
        report: &mut PushReport,
    ) -> Result<(), PushError> {
        let body = gzip(&request);
        drop(request);
        match self.post(&body, report)? {
            Sent::Accepted => {
                report.accepted_spans += range.len() as u64;
                report.requests += 1;
                report.wire_bytes += body.len() as u64;
                Ok(())
            }
            Sent::TooLarge if range.len() >= 2 => {
                report.splits += 1;
                let mid = range.start + range.len() / 2;
                for half in [range.start..mid, mid..range.end] {
                    let (_, bytes) = encoder.request(half.clone(), false);
                    self.send(encoder, half, bytes, report)?;
                }
                Ok(())
            }
            Sent::TooLarge => {
                Err(self.error(PushErrorKind::TooLarge { bytes: body.len() }, report))
            }
        }
    }

    /// Posts `body`, retrying as the options say.
    fn post(&self, body: &[u8], report: &mut PushReport) -> Result<Sent, PushError> {
        let mut wait = self.options.backoff;
        let mut attempt = 0;
        loop {
            let mut request = self
                .agent
                .post(&self.url)
                .header("content-type", "application/x-protobuf")
                .header("content-encoding", "gzip");
            for (name, value) in &self.options.headers {
                request = request.header(name.as_str(), value.as_str());
            }
            let response = match request.send(body) {
                Ok(response) => response,
                Err(ureq::Error::Timeout(_)) => {
                    return Err(self.error(PushErrorKind::Timeout, report));
                }
                Err(ureq::Error::Io(e)) if e.kind() == io::ErrorKind::TimedOut => {
                    return Err(self.error(PushErrorKind::Timeout, report));
                }
                Err(e) => return Err(self.error(PushErrorKind::Connect(e.to_string()), report)),
            };
            let status = response.status().as_u16();
            if (200..300).contains(&status) {
                return Ok(Sent::Accepted);
            }
            if status == 413 {
                return Ok(Sent::TooLarge);
            }
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            if retried(status) && attempt < self.options.retries {
                attempt += 1;
                report.retries += 1;
                let pause = retry_after.unwrap_or(wait).min(self.options.max_backoff);
                report.waited += pause;
                std::thread::sleep(pause);
                wait = (wait * 2).min(self.options.max_backoff);
                continue;
            }
            let mut text = String::new();
            let _ = response
                .into_body()
                .into_reader()
                .take(200)
                .read_to_string(&mut text);
            let body = text.split_whitespace().collect::<Vec<_>>().join(" ");
            return Err(self.error(PushErrorKind::Status { status, body }, report));
        }
    }
}

/// The statuses tried again: 429 (too many requests), 500 (a server's passing failure), 502,
/// 503 and 504 (a gateway's or an overloaded server's).
fn retried(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504)
}

/// What the endpoint made of a request.
enum Sent {
    Accepted,
    TooLarge,
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::fast(),
    );
    encoder.write_all(bytes).expect("writing to a Vec");
    encoder.finish().expect("writing to a Vec")
}

#[cfg(test)]
mod tests {
    use super::parse_headers;

    #[test]
    fn headers_parse_and_decode() {
        assert_eq!(
            parse_headers("api-key=a%20b, x=1").unwrap(),
            vec![
                ("api-key".to_owned(), "a b".to_owned()),
                ("x".to_owned(), "1".to_owned())
            ]
        );
        assert_eq!(parse_headers("").unwrap(), vec![]);
        assert_eq!(
            parse_headers("novalue").unwrap_err(),
            "`novalue` is not key=value"
        );
        assert_eq!(
            parse_headers("a=%zz").unwrap_err(),
            "bad percent escape in `%zz`"
        );
    }
}
