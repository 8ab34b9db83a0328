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
//! Spans are sent process by process: async calls, then each thread's spans in the order they
//! end (a span after the spans inside it), then the span of its events outside every span.
//! Async calls are numbered (their `span_id`s) process by process, each process's in order of
//! their start. From captures ([`Otlp::write_json_from_captures`],
//! [`Otlp::push_from_captures`]), the same spans are written piece by piece, in memory bounded
//! by the spans open at once, also of sessions with async calls unless spans are folded or
//! sampled out.
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

mod attributes;
mod calls;
#[cfg(test)]
mod calls_tests;
mod carry;
mod endpoint;
mod errors;
mod events;
mod fields;
#[cfg(test)]
pub(crate) mod hostile_calls_tests;
#[cfg(test)]
mod hostile_executor;
mod json;
mod links;
mod map;
mod options;
mod pieces;
mod push;
mod requests;
mod wire;

pub use endpoint::{Endpoint, PushOptions};
pub use errors::{PushError, PushErrorKind, PushReport};
pub use map::{EVENTS_SPAN_NAME, Otlp};
pub use options::{DEFAULT_BATCH_SPANS, DEFAULT_MAX_BATCH_BYTES, Options, Stats};

/// The request [`Otlp::requests`] gives, the OpenTelemetry project's own message type (from
/// the `opentelemetry-proto` crate, version 0.33, whose other types its fields have: depend on
/// that crate to read them).
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
