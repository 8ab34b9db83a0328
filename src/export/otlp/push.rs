//! Pushing over OTLP/HTTP: one gzipped protobuf `POST` per request, retried with backoff.

use std::io::{self, Read, Write};
use std::time::Duration;

use super::endpoint::{Endpoint, PushOptions};
use super::errors::{PushError, PushErrorKind, PushReport};
use super::map::Otlp;
use super::wire;

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
