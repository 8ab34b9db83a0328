//! The [`Collector`] trait and its errors.

use std::fmt;

/// The error type collectors return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A profiler of its own that a session runs beside its threads
/// ([`ProfilerBuilder::collector`](crate::ProfilerBuilder::collector)).
///
/// The session calls `start` when it starts (and at each restart), then `stop` and `collect`
/// when it stops, one call at a time, on the thread that starts or stops the session.
pub trait Collector: Send {
    /// The collector's name, in errors.
    fn name(&self) -> &str;
    /// Starts recording.
    fn start(&mut self) -> Result<(), BoxError>;
    /// Stops recording.
    fn stop(&mut self) -> Result<(), BoxError>;
    /// Appends what was recorded since the start to `out`, as capture bytes (whole sessions
    /// of the capture format, see `SessionWriter`). What it appended before an error is
    /// kept, up to its last well-formed chunk.
    fn collect(&mut self, out: &mut Vec<u8>) -> Result<(), BoxError>;
}

/// When a collector failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Loading a plug-in: the session runs without it.
    Load,
    /// At the session's start.
    Start,
    /// At the session's stop.
    Stop,
    /// Collecting its events (or reading them).
    Collect,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Load => "load",
            Self::Start => "start",
            Self::Stop => "stop",
            Self::Collect => "collect",
        })
    }
}

/// A collector's failure, as a session reports it ([`Profiler::errors`](crate::Profiler::errors)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectorError {
    /// The collector's name (a plug-in's path when it could not be loaded).
    pub collector: String,
    /// When it failed.
    pub stage: Stage,
    /// What went wrong.
    pub message: String,
}

impl CollectorError {
    pub(crate) fn new(collector: &str, stage: Stage, message: impl Into<String>) -> Self {
        Self {
            collector: collector.to_owned(),
            stage,
            message: message.into(),
        }
    }
}

impl fmt::Display for CollectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "collector `{}`: {} failed: {}",
            self.collector, self.stage, self.message
        )
    }
}

impl std::error::Error for CollectorError {}
