//! Pluggable collectors: profilers of their own (a device, a runtime, another language) that
//! a session runs beside its threads, and whose events show up wherever the session's do.
//!
//! A [`Collector`] is started and stopped with the session, and at each stop hands back its
//! events as capture bytes ([`docs/FORMAT.md`], one or more whole sessions: see
//! [`SessionWriter`]). They are read like a capture file and decoded with the session's own
//! capture ([`Trace::from_captures`](crate::trace::Trace::from_captures)): each collector
//! session is a process of its own (say `gpu0`) with its tracks as threads (`stream 1`), its
//! ticks converted to Unix time through its own clock pairs, so a device clock lines up with
//! the host's. The table ([`Table::by_thread`](crate::table::Table::by_thread)), every export
//! and [`Profiler::write_capture`](crate::Profiler::write_capture) show them.
//!
//! A collector that fails (an error at start, stop or collect, a panic, bytes that do not
//! read) is reported ([`Profiler::errors`](crate::Profiler::errors) and the table's footer);
//! the session goes on, and keeps everything the others recorded and every well-formed
//! chunk of the failing one.
//!
//! Plug-ins written in C (or anything with a C ABI) implement `include/tickscope_plugin.h`
//! and are loaded with [`ProfilerBuilder::plugin`](crate::ProfilerBuilder::plugin) or `TICKSCOPE_PLUGINS`
//! ([`abi`] is the header's Rust mirror).
//!
//! ```
//! use tickscope::collector::{Collector, SessionWriter};
//!
//! struct Device;
//! impl Collector for Device {
//!     fn name(&self) -> &str { "device" }
//!     fn start(&mut self) -> Result<(), tickscope::collector::BoxError> { Ok(()) }
//!     fn stop(&mut self) -> Result<(), tickscope::collector::BoxError> { Ok(()) }
//!     fn collect(&mut self, out: &mut Vec<u8>) -> Result<(), tickscope::collector::BoxError> {
//!         // Its own clock: tick 1_000 was Unix time 5_000 ns, one tick per nanosecond.
//!         let mut session = SessionWriter::new("gpu0", (1_000, 5_000), (1_000_000, 1_004_000), 1.0);
//!         let stream = session.thread("stream 1");
//!         session.span(stream, "kernel", 2_000, 3_000);
//!         session.write_to(out);
//!         Ok(())
//!     }
//! }
//!
//! let prof = tickscope::Profiler::builder().current_thread().collector(Device).start();
//! prof.stop();
//! let trace = prof.trace();
//! let gpu = trace.threads.iter().find(|t| t.name.as_deref() == Some("stream 1")).unwrap();
//! assert_eq!(trace.processes[gpu.process as usize].name, "gpu0");
//! assert_eq!(gpu.spans[0].start_ns, 6_000);
//! assert!(prof.errors().is_empty());
//! ```
//!
//! [`docs/FORMAT.md`]: https://github.com/tickscope/tickscope/blob/main/docs/FORMAT.md

pub mod abi;
mod api;
#[cfg(feature = "plugins")]
mod plugin;
mod writer;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::capture::Capture;
use crate::record::sync::lock;

pub use api::{BoxError, Collector, CollectorError, Stage};
pub use writer::SessionWriter;

/// A collector of a session, shared by the clones of its [`ProfilerBuilder`](crate::ProfilerBuilder).
#[derive(Clone)]
pub(crate) struct Slot(Arc<Mutex<Box<dyn Collector>>>);

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let collector = lock(&self.0);
        f.debug_tuple("Slot").field(&collector.name()).finish()
    }
}

impl Slot {
    pub(crate) fn new(collector: Box<dyn Collector>) -> Self {
        Self(Arc::new(Mutex::new(collector)))
    }

    /// Loads the plug-in at `path`.
    #[cfg(feature = "plugins")]
    pub(crate) fn plugin(path: &Path) -> Result<Self, CollectorError> {
        plugin::Plugin::load(path).map(|p| Self::new(Box::new(p)))
    }

    /// Without the `plugins` feature, a load error that says so: the session runs without it.
    #[cfg(not(feature = "plugins"))]
    pub(crate) fn plugin(path: &Path) -> Result<Self, CollectorError> {
        Err(CollectorError::new(
            &path.display().to_string(),
            Stage::Load,
            "tickscope was built without its `plugins` feature, which loads plug-ins".to_owned(),
        ))
    }

    /// Runs `call` on the collector, a panic turned into an error.
    fn call<T>(
        &self,
        stage: Stage,
        call: impl FnOnce(&mut dyn Collector) -> Result<T, BoxError>,
    ) -> Result<T, CollectorError> {
        let mut collector = lock(&self.0);
        let name = collector.name().to_owned();
        match catch_unwind(AssertUnwindSafe(|| call(&mut **collector))) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(CollectorError::new(&name, stage, e.to_string())),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Err(CollectorError::new(
                    &name,
                    stage,
                    format!("panicked: {what}"),
                ))
            }
        }
    }

    /// Starts the collector.
    pub(crate) fn start(&self) -> Result<(), CollectorError> {
        self.call(Stage::Start, |c| c.start())
    }

    /// Stops the collector and reads what it collected: its sessions, and its errors.
    pub(crate) fn finish(&self, errors: &mut Vec<CollectorError>) -> Vec<Capture> {
        if let Err(e) = self.call(Stage::Stop, |c| c.stop()) {
            errors.push(e);
        }
        let mut bytes = Vec::new();
        let outcome = self.call(Stage::Collect, |c| {
            let name = c.name().to_owned();
            c.collect(&mut bytes).map(|()| name)
        });
        let name = match outcome {
            Ok(name) => name,
            Err(e) => {
                let name = e.collector.clone();
                errors.push(e);
                name
            }
        };
        read_collected(&name, bytes, errors)
    }
}

/// The sessions of `bytes`: all of them, or when they do not read, those before the chunk
/// that does not (the error reported).
fn read_collected(name: &str, bytes: Vec<u8>, errors: &mut Vec<CollectorError>) -> Vec<Capture> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let captures = match Capture::from_bytes(&bytes) {
        Ok(captures) => captures,
        Err(e) => {
            errors.push(CollectorError::new(
                name,
                Stage::Collect,
                format!("malformed chunks: {e}"),
            ));
            // The chunks before the one that failed.
            match e.offset().and_then(|o| usize::try_from(o).ok()) {
                Some(end) if end > 0 && end <= bytes.len() => {
                    Capture::from_bytes(&bytes[..end]).unwrap_or_default()
                }
                _ => Vec::new(),
            }
        }
    };
    for capture in &captures {
        for warning in capture.warnings() {
            errors.push(CollectorError::new(name, Stage::Collect, warning.clone()));
        }
    }
    captures
}
