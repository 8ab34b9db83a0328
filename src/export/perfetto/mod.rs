//! Native Perfetto traces (`.pftrace`): the `Trace` protobuf of Perfetto's
//! `protos/perfetto/trace/`, for ui.perfetto.dev and the trace processor, with exact
//! nanosecond times.
//!
//! What is written:
//!
//! - A process track per process (`ProcessDescriptor`: its `pid` as the Chrome export writes
//!   it, and its name) and a thread track per thread (`ThreadDescriptor`: tickscope's thread id
//!   and the thread's name).
//! - Each scope is a `TrackEvent` slice: a `TYPE_SLICE_BEGIN` and a `TYPE_SLICE_END` packet on
//!   its thread's track. Polls of async calls have the category `poll`. Scopes whose guards were
//!   dropped out of order (a child that outlived its parent) go to extra tracks of their thread
//!   (`<thread> (overlapping scopes N)`), as in the Chrome export, so every slice nests.
//! - Scope arguments are debug annotations (int, uint, double, bool, string), and so are the
//!   marks of the Chrome export: `open_at_stop` (true) on a scope still open when the session
//!   stopped (closed at the stop time), `cut_at_start` (true) on one entered before a flight
//!   recorder's window.
//! - A link gets a flow: `flow_ids` on the slice that was open where the link was captured,
//!   `terminating_flow_ids` on the slice that followed from it (links whose origin is outside
//!   the window get none); and, as in the Chrome export, PyTorch's link arguments as
//!   annotations before the scope's own: `Sequence number` on both slices and `Fwd thread id`
//!   (the capturing thread's id) on the follower.
//! - Each `#[profile] async fn` call is a slice (category `async`, with `polls`, `busy_ns` and
//!   `self_ns` annotations, and the marks `open_at_stop` and `cut_at_start` when set) on a
//!   track of its process named after the function; calls of one function that do not overlap
//!   share a track.
//! - With memory tracking, a `memory` counter track per process (bytes) of its live bytes.
//!
//! Every track's events form their own packet sequence (`trusted_packet_sequence_id`), which
//! starts with a packet that sets `SEQ_INCREMENTAL_STATE_CLEARED`, the sequence's
//! `TracePacketDefaults` (its track and an incremental clock) and a `ClockSnapshot` tying that
//! clock to `BOOTTIME` at the sequence's first time. Every later packet sets
//! `SEQ_NEEDS_INCREMENTAL_STATE` and holds the time since the previous packet of its sequence,
//! in nanoseconds. Event names, categories and annotation names are interned
//! (`InternedData`) in the first packet of each sequence that uses them. So the trace
//! processor's `ts` is the Unix-epoch nanosecond of each event, exactly (no rounding through
//! doubles, unlike JSON). A plain nested scope takes about 26 bytes (`benches/export.rs`).
//!
//! The encoder is our own (`src/export/proto.rs`, shared with [pprof](super::pprof)), of the
//! fields listed here only. Plain slice begins and ends (no arguments, links, category or
//! marks), nearly every packet of a typical trace, are written in one piece each: the time
//! delta, the name's iid and a tail of bytes fixed per sequence. prost encodes the same
//! packets about 7 times slower (`benches/export.rs`, `perfetto_prost_to_sink`): it builds a
//! message value per packet and sizes each nested message before writing it.
//!
//! ```
//! use tickscope::export::perfetto;
//!
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! {
//!     let _outer = tickscope::scope!("outer");
//!     let _inner = tickscope::scope!("inner", n = 3);
//! }
//! prof.stop();
//! let mut trace = Vec::new();
//! perfetto::write(&prof.trace(), &mut trace)?;
//! assert!(!trace.is_empty());
//! // prof.write_perfetto("trace.pftrace")? writes it to a file (gzipped for `.pftrace.gz`).
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::{self, Write};

use super::Format;
use crate::decode::pieces::{Pieces, SpanSource};
use crate::trace::Trace;

#[cfg(test)]
mod edges_tests;
mod fields;
mod interning;
mod model;
mod packets;
mod sequence;
mod spans;
#[cfg(test)]
mod tests;
mod tracks;
mod writer;

use writer::Writer;

/// Options of native Perfetto traces: the [`Format`] to hand to
/// [`Profiler::write`](crate::Profiler::write) or [`write_file`](super::write_file) (use a
/// `.pftrace` or `.pftrace.gz` path).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Each packet holds the time since the previous one of its sequence, on an incremental
    /// clock, and its track is the sequence's default (the default: about 26 bytes per plain
    /// scope). `false`: every track event holds its absolute time and its `track_uuid` (about
    /// 46 bytes per scope), for consumers that do not apply `TracePacketDefaults` and
    /// incremental clocks (the trace processor applies both).
    pub delta_times: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { delta_times: true }
    }
}

impl Options {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Options::delta_times`].
    pub fn delta_times(mut self, on: bool) -> Self {
        self.delta_times = on;
        self
    }
}

impl Format for Options {
    fn write(&self, trace: &Trace, mut out: &mut dyn Write) -> io::Result<()> {
        write_with(trace, &mut out, *self)
    }

    fn write_captures(
        &self,
        captures: &[&crate::Capture],
        out: &mut dyn Write,
    ) -> Option<io::Result<()>> {
        let pieces = Pieces::with_memory(captures)?;
        Some(write_from(&pieces, out, *self))
    }
}

/// Writes `trace` as an (uncompressed) Perfetto `Trace` protobuf, with the default
/// [`Options`].
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    write_with(trace, out, Options::new())
}

/// Writes `trace` as an (uncompressed) Perfetto `Trace` protobuf, with `options`.
pub fn write_with(trace: &Trace, out: &mut impl Write, options: Options) -> io::Result<()> {
    write_from(trace, out, options)
}

/// Writes the trace of `source` as [`write_with`] does, each thread's spans piece by piece as
/// `source` gives them ([`SpanSource::each_piece`]): a thread's extra tracks (lanes of
/// overlapping scopes) are made before the first piece that uses them.
fn write_from<W: Write + ?Sized>(
    source: &dyn SpanSource,
    out: &mut W,
    options: Options,
) -> io::Result<()> {
    let mut w = Writer::new(out, options.delta_times);
    w.trace(source)?;
    w.finish()
}
