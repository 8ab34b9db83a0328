//! Where and how to push: the [`Endpoint`] URL and [`PushOptions`] (timeouts, retries,
//! headers), from code or from the `OTEL_EXPORTER_OTLP_*` environment.

use std::time::Duration;

use super::errors::{PushError, PushErrorKind};

/// Where [`Otlp::push`](super::Otlp::push) sends: the full URL of the traces resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub(super) url: String,
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

/// How [`Otlp::push`](super::Otlp::push) sends.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushOptions {
    pub(super) timeout: Duration,
    pub(super) retries: u32,
    pub(super) backoff: Duration,
    pub(super) max_backoff: Duration,
    pub(super) headers: Vec<(String, String)>,
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
