//! The attribute names of the spans, events and resources tickscope exports: one set, which
//! both encoders use (the `opentelemetry-proto` messages of `requests.rs` and the direct
//! protobuf encoder of `wire.rs`), so that they cannot drift apart.

// Resource attributes (OpenTelemetry semantic conventions).
pub(super) const SERVICE_NAME: &str = "service.name";
pub(super) const PROCESS_PID: &str = "process.pid";
pub(super) const TELEMETRY_SDK_NAME: &str = "telemetry.sdk.name";
pub(super) const TELEMETRY_SDK_LANGUAGE: &str = "telemetry.sdk.language";
pub(super) const TELEMETRY_SDK_VERSION: &str = "telemetry.sdk.version";
pub(super) const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
pub(super) const HOST_NAME: &str = "host.name";

// Span and event attributes of the OpenTelemetry semantic conventions.
pub(super) const THREAD_ID: &str = "thread.id";
pub(super) const THREAD_NAME: &str = "thread.name";
pub(super) const CODE_FUNCTION: &str = "code.function";
pub(super) const CODE_NAMESPACE: &str = "code.namespace";
pub(super) const CODE_FILEPATH: &str = "code.filepath";
pub(super) const CODE_LINENO: &str = "code.lineno";

// tickscope's own span and event attributes.
pub(super) const TICKSCOPE_EVENTS_OUTSIDE_SPANS: &str = "tickscope.events_outside_spans";
pub(super) const TICKSCOPE_ASYNC_POLLS: &str = "tickscope.async.polls";
pub(super) const TICKSCOPE_ASYNC_BUSY_NS: &str = "tickscope.async.busy_ns";
pub(super) const TICKSCOPE_ALLOC_BYTES: &str = "tickscope.alloc.bytes";
pub(super) const TICKSCOPE_ALLOC_COUNT: &str = "tickscope.alloc.count";
pub(super) const TICKSCOPE_FREE_BYTES: &str = "tickscope.free.bytes";
pub(super) const TICKSCOPE_FREE_COUNT: &str = "tickscope.free.count";
pub(super) const TICKSCOPE_PEAK_BYTES: &str = "tickscope.peak.bytes";
pub(super) const TICKSCOPE_OVERHEAD_NS: &str = "tickscope.overhead_ns";
pub(super) const TICKSCOPE_OPEN_AT_STOP: &str = "tickscope.open_at_stop";
pub(super) const TICKSCOPE_FOLDED_COUNT: &str = "tickscope.folded.count";
pub(super) const TICKSCOPE_FOLDED_NS: &str = "tickscope.folded.ns";
pub(super) const TICKSCOPE_LINK_SEQ: &str = "tickscope.link.seq";
pub(super) const TICKSCOPE_LINK_THREAD: &str = "tickscope.link.thread";
pub(super) const TICKSCOPE_INSTANT_SCOPE: &str = "tickscope.instant.scope";
pub(super) const TICKSCOPE_COUNTER_VALUE: &str = "tickscope.counter.value";
pub(super) const TICKSCOPE_COUNTER_OP: &str = "tickscope.counter.op";
pub(super) const TICKSCOPE_COUNTER_AMOUNT: &str = "tickscope.counter.amount";
