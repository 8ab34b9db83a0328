//! Pushing over OTLP/HTTP: one gzipped protobuf `POST` per request, retried with backoff.

use std::io::{self, Read, Write};
use std::time::Duration;

use super::endpoint::{Endpoint, PushOptions};
use super::errors::{PushError, PushErrorKind, PushReport};
use super::map::Otlp;
use super::options::Options;
use super::pieces::{self, Sink};
use super::wire;
use crate::Capture;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

impl<'t> Otlp<'t> {
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
            processes: self.trace.processes.len() as u64,
            ..PushReport::default()
        };
        let mut encoder = wire::Encoder::new(self);
        let mut at = 0;
        while at < self.kept.len() {
            let (end, bytes) = encoder.request(at..self.kept.len(), true);
            let mut halves = |half: std::ops::Range<usize>| {
                let start = at + half.start;
                encoder.request(start..at + half.end, false).1
            };
            client.send(0..end - at, bytes, &mut halves, &mut report)?;
            at = end;
            progress(&report);
        }
        Ok(report)
    }

    /// Sends what `captures` decode to ([`Trace::from_captures`](crate::trace::Trace::from_captures))
    /// to `endpoint`, as `Otlp::new(&trace, options).push_with_progress(endpoint, push,
    /// progress)` does: the same spans in the same requests, the same bytes on the wire, the
    /// same [`PushReport`]; but without decoding the trace whole when it can, as
    /// [`Otlp::write_json_from_captures`] does: what `tickscope push` does.
    ///
    /// Captures decoded in pieces are mapped a piece at a time, and each request is sent
    /// when it is full: the memory taken is bounded by a piece, the scopes open at once and
    /// one request, not by the captures' size. The report's [`PushReport::stats`] are then
    /// known at the end only: `progress` sees them at zero. Other captures (those
    /// [`Otlp::write_json_from_captures`] decodes whole) are decoded whole.
    ///
    /// ```no_run
    /// use tickscope::export::otlp::{Endpoint, Options, Otlp, PushOptions};
    ///
    /// let captures = tickscope::Capture::read_all("run.tscope")?;
    /// let captures: Vec<&tickscope::Capture> = captures.iter().collect();
    /// let report = Otlp::push_from_captures(
    ///     &captures,
    ///     &Options::new().service_name("demo"),
    ///     Endpoint::from_env(),
    ///     &PushOptions::from_env()?,
    ///     |so_far| eprintln!("{} spans accepted", so_far.accepted_spans),
    /// )?;
    /// println!("{} spans in {} requests", report.accepted_spans, report.requests);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn push_from_captures(
        captures: &[&Capture],
        options: &Options,
        endpoint: impl Into<Endpoint>,
        push: &PushOptions,
        progress: impl FnMut(&PushReport),
    ) -> Result<PushReport, PushError> {
        let endpoint = endpoint.into();
        let pieces = pieces::of_captures(captures, options);
        let Some((pieces, calls)) = pieces else {
            let trace = crate::trace::Trace::from_captures(captures.iter().copied());
            return Otlp::new(&trace, options).push_with_progress(endpoint, push, progress);
        };
        let client = Client::new(&endpoint, push)?;
        let processes = crate::decode::pieces::SpanSource::trace(&pieces)
            .processes
            .len() as u64;
        let mut sender = Sender {
            client: &client,
            report: PushReport {
                processes,
                ..PushReport::default()
            },
            progress,
            failed: None,
        };
        let walked = pieces::walk((&pieces, calls.as_ref()), options, &mut sender);
        if let Some(e) = sender.failed {
            return Err(e);
        }
        let mut report = sender.report;
        let stats =
            walked.map_err(|e| client.error(PushErrorKind::Input(e.to_string()), &report))?;
        report.stats = stats;
        Ok(report)
    }
}

/// Requests made piece by piece, sent as they come.
struct Sender<'c, 'o, P> {
    client: &'c Client<'o>,
    report: PushReport,
    progress: P,
    /// Why the push stopped: the walk is then stopped with an error that says nothing more.
    failed: Option<PushError>,
}

impl<P: FnMut(&PushReport)> Sink for Sender<'_, '_, P> {
    fn send(&mut self, request: ExportTraceServiceRequest, spans: usize) -> io::Result<()> {
        let bytes = request.encode_to_vec();
        let mut halves = |half: std::ops::Range<usize>| part(&request, half).encode_to_vec();
        match self
            .client
            .send(0..spans, bytes, &mut halves, &mut self.report)
        {
            Ok(()) => {
                (self.progress)(&self.report);
                Ok(())
            }
            Err(e) => {
                self.failed = Some(e);
                Err(io::Error::other("the push failed"))
            }
        }
    }
}

/// The request of the spans `range` of `request` (counted across its resources, in order),
/// each under its resource, as the encoder writes a part of a request split after a 413.
fn part(
    request: &ExportTraceServiceRequest,
    range: std::ops::Range<usize>,
) -> ExportTraceServiceRequest {
    let mut out = ExportTraceServiceRequest::default();
    let mut at = 0;
    for resource in &request.resource_spans {
        let Some(scope) = resource.scope_spans.first() else {
            continue;
        };
        let (from, to) = (at, at + scope.spans.len());
        at = to;
        let (lo, hi) = (range.start.max(from), range.end.min(to));
        if lo >= hi {
            continue;
        }
        let mut taken = resource.clone();
        taken.scope_spans.truncate(1);
        taken.scope_spans[0].spans = scope.spans[lo - from..hi - from].to_vec();
        out.resource_spans.push(taken);
    }
    out
}

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

    /// Sends `request`, the encoded spans `range` of a request, splitting it in two halves
    /// of its spans on 413 (`encode` encodes a range of them).
    fn send(
        &self,
        range: std::ops::Range<usize>,
        request: Vec<u8>,
        encode: &mut dyn FnMut(std::ops::Range<usize>) -> Vec<u8>,
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
                    let bytes = encode(half.clone());
                    self.send(half, bytes, encode, report)?;
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
    use super::part;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    fn resource(schema: &str, names: &[&str]) -> ResourceSpans {
        ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: (names.iter())
                    .map(|n| Span {
                        name: (*n).to_owned(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            schema_url: schema.to_owned(),
            ..Default::default()
        }
    }

    #[test]
    fn a_part_of_a_request_keeps_each_span_under_its_resource() {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![resource("p", &["a", "b", "c"]), resource("q", &["d", "e"])],
        };
        let whole = part(&request, 0..5);
        assert_eq!(whole, request);
        let first = part(&request, 0..2);
        assert_eq!(first.resource_spans, [resource("p", &["a", "b"])]);
        let second = part(&request, 2..5);
        assert_eq!(
            second.resource_spans,
            [resource("p", &["c"]), resource("q", &["d", "e"])]
        );
        assert_eq!(part(&request, 3..4).resource_spans, [resource("q", &["d"])]);
    }
}
