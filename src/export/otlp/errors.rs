//! What a push reports: [`PushReport`] on success, [`PushError`] otherwise.

use std::fmt;
use std::time::Duration;

use super::options::Stats;

/// What [`Otlp::push`](super::Otlp::push) did.
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
    /// The processes of the trace (each its own resource).
    pub processes: u64,
}

/// Why [`Otlp::push`](super::Otlp::push) failed.
#[derive(Debug)]
pub struct PushError {
    pub(super) endpoint: String,
    pub(super) kind: PushErrorKind,
    pub(super) accepted_spans: u64,
}

/// The kinds of [`PushError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PushErrorKind {
    /// The endpoint could not be reached (connection refused, unknown host, …).
    Connect(String),
    /// A request took longer than [`PushOptions::timeout`](super::PushOptions::timeout).
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
    /// The captures could not be made into requests
    /// ([`Otlp::push_from_captures`](super::Otlp::push_from_captures)).
    Input(String),
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
            PushErrorKind::Input(why) => write!(f, "cannot push the captures to {at}: {why}")?,
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
