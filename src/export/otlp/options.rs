//! What [`Otlp`] is asked for ([`Options`]: service name, traces, folding, sampling,
//! batches) and what it did with the trace's spans ([`Stats`]).

use std::time::Duration;

/// The largest request [`Otlp::requests`](super::Otlp::requests) makes by default, encoded:
/// 4 MiB, the default limit of the OpenTelemetry Collector's receivers.
pub const DEFAULT_MAX_BATCH_BYTES: usize = 4 << 20;

/// The most spans in a request by default.
pub const DEFAULT_BATCH_SPANS: usize = 8192;

/// What [`Otlp`](super::Otlp) makes of a trace. [`Options::new`] gives the defaults: every
/// scope sent, one trace per root scope, the service named by `OTEL_SERVICE_NAME` or the
/// executable.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub(super) service_name: Option<String>,
    pub(super) trace_per_process: bool,
    pub(super) min_duration_ns: u64,
    pub(super) max_depth: Option<u32>,
    pub(super) sample_roots: u32,
    pub(super) batch_spans: usize,
    pub(super) max_batch_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            service_name: None,
            trace_per_process: false,
            min_duration_ns: 0,
            max_depth: None,
            sample_roots: 1,
            batch_spans: DEFAULT_BATCH_SPANS,
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
        }
    }
}

impl Options {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// `service.name` of every process's resource (by default `OTEL_SERVICE_NAME`, else the
    /// process's executable name, else `unknown_service`).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// One `trace_id` per process (a session's window is one trace) instead of one per root
    /// scope.
    pub fn trace_per_process(mut self, yes: bool) -> Self {
        self.trace_per_process = yes;
        self
    }

    /// Folds every non-root scope shorter than this (wall time, in ns) into its parent, with
    /// everything under it: the parent gets `tickscope.folded.count` and
    /// `tickscope.folded.ns`.
    pub fn min_duration(mut self, duration: Duration) -> Self {
        self.min_duration_ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self
    }

    /// Folds every scope deeper than `depth` (roots are at depth 0) into its ancestor at
    /// `depth`, as [`Options::min_duration`] folds.
    pub fn max_depth(mut self, depth: u32) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// Keeps one root call in `n` (the first, the `n+1`-th, … in the trace's order) with
    /// everything under it; the others are counted in [`Stats::sampled_out`]. 0 and 1 keep
    /// every root.
    pub fn sample_roots(mut self, n: u32) -> Self {
        self.sample_roots = n.max(1);
        self
    }

    /// The most spans in one request (at least 1; default [`DEFAULT_BATCH_SPANS`]).
    pub fn batch_spans(mut self, spans: usize) -> Self {
        self.batch_spans = spans.max(1);
        self
    }

    /// The largest encoded request (default [`DEFAULT_MAX_BATCH_BYTES`]); a request holds at
    /// least one span whatever its size.
    pub fn max_batch_bytes(mut self, bytes: usize) -> Self {
        self.max_batch_bytes = bytes;
        self
    }
}

/// What happened to the spans of a trace: every span of the trace (scopes, polls and async
/// calls) is counted once, in `sent`, `folded` or `sampled_out`; every instant and counter
/// sample once, in `events` or `events_sampled_out`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Spans in the requests.
    pub sent: u64,
    /// Spans folded into an ancestor ([`Options::min_duration`], [`Options::max_depth`]).
    pub folded: u64,
    /// Spans of root calls left out by [`Options::sample_roots`].
    pub sampled_out: u64,
    /// Span links written (a link whose origin was not recorded has no span to point to and
    /// is only the follower's `tickscope.link.*` attributes).
    pub links: u64,
    /// Span events written: instants and counter samples.
    pub events: u64,
    /// Instants and counter samples left out with the root call they fell in
    /// ([`Options::sample_roots`]).
    pub events_sampled_out: u64,
    /// The spans `events outside spans` (one per process that has an instant or a counter
    /// sample while none of its thread's spans was open): in the requests besides `sent`.
    pub event_spans: u64,
}

impl Stats {
    /// Every span of the trace: sent, folded and sampled out.
    pub fn total(&self) -> u64 {
        self.sent + self.folded + self.sampled_out
    }

    /// The spans in the requests: `sent` and `event_spans`.
    pub fn request_spans(&self) -> u64 {
        self.sent + self.event_spans
    }
}
