//! Chrome Trace Event JSON, for ui.perfetto.dev and chrome://tracing.
//!
//! Each scope is one complete event (`"ph":"X"`; a poll of an async call has `"cat":"poll"`);
//! threads get `thread_name` and `thread_sort_index` metadata, the process a `process_name`.
//! A trace of several processes ([`Trace::from_captures`]) has each under a `pid` of its own
//! (its process id, or for a second process with the same id, as on two hosts, a number past
//! every id of the trace, its name then saying `(pid N)`), with its `process_name` (its host's
//! name in front, `node-a/server`, when the processes ran on several hosts), its threads, flows,
//! async calls and memory counter, all on one origin.
//! Each `#[profile] async fn` call is a nestable async span (`"ph":"b"` / `"e"`, category
//! `async`, one id per call) from its first poll to its end, which viewers show on an async
//! track of its own.
//!
//! A scope that followed from a [`Link`](crate::Link) gets a flow arrow (`"ph":"s"` at the
//! capture, inside the originating slice; `"ph":"f"` with `"bp":"e"` at the follower's start,
//! inside it), and both slices carry PyTorch's args: `Sequence number`, and on the follower
//! `Fwd thread id`, the thread that captured the link. Each flow event is written on the
//! track of its slice. ui.perfetto.dev binds every arrow (all 48 of `examples/links.rs`). The
//! legacy chrome://tracing viewer (catapult) nests slices and binds flow events at 1 µs
//! precision, so a flow event in a scope shorter than a microsecond that sits next to another
//! one binds to no slice there and its arrow is not drawn (7 of those 48 arrows are drawn);
//! open traces with short linked scopes in ui.perfetto.dev.
//!
//! When the session tracked memory, a process-wide counter (`"ph":"C"`, name `memory`, series
//! `live_bytes`) follows the bytes allocated in the window and not yet freed, and with
//! [`Options::allocation_instants`] each allocation and free is also an instant (`"ph":"i"`,
//! category `memory`) on its thread with its size, address and scope in `args`.
//!
//! Timestamps are microseconds with three decimals (nanosecond precision). No two begins or
//! ends of one track share a nanosecond: where the clock gave several the same one (it
//! converts ticks to nanoseconds, and a busy machine's clock can give a child its parent's
//! start, or a scope its previous sibling's end), each goes 1 ns past the one before, in
//! nesting order, and a zero-length scope keeps its length. So a child lies strictly inside
//! its parent and siblings strictly apart, and importers that rebuild stacks from begins and
//! ends sorted by time (speedscope, which adds `ts` and `dur` as doubles) read every stack as
//! written. By default they count from the session start (of several sessions: the earliest), whose Unix time is in
//! `otherData.start_unix_ns`: viewers read `ts` as a double, and small values keep every
//! nanosecond. [`TimeOrigin::UnixEpoch`] writes absolute times instead, to line up files of
//! several processes written separately (decoding their captures into one trace with
//! [`Trace::from_captures`] lines them up in one file); a double then resolves only
//! about 0.25 µs at today's epoch, so viewers round sub-µs detail, and scopes are written as
//! `B`/`E` pairs so that nesting survives the rounding.
//!
//! The PyTorch profiler's dialect of this format, for HolisticTraceAnalysis, is
//! [`kineto`](super::kineto).
//!
//! # Scopes dropped out of order
//!
//! A scope whose guard outlives its parent's (open `a`, open `b`, drop `a`, drop `b`) keeps
//! its own duration, as in the report, so its slice reaches past its parent's end and cannot
//! nest on its thread's track: Perfetto drops such a complete event
//! (`slice_drop_overlapping_complete_event`) and `B`/`E` pairs would close the wrong slice.
//! Such scopes, and only scopes that cannot nest where they are, go to extra tracks of their
//! thread: each scope, in entry order, takes the lowest track where it nests inside the
//! slices still open there, or where those have all ended (track 0 is the thread's own).
//! Track `k > 0` is written as a thread of its own, named `"<thread name> (overlapping
//! scopes k)"` and sorted right after its thread; its `tid` is numbered after the largest
//! thread id in the trace, in order of threads and tracks, so it never clashes with a real
//! thread (tickscope's thread ids are small counters). A thread whose guards were all dropped
//! in order has its own track only. The Kineto dialect uses the same tracks, so
//! HolisticTraceAnalysis builds one call stack per track.

use std::io::{self, Write};

use super::Format;
use super::lanes::{Edge, Lanes};
use super::trace_event::{self, Dialect, Placed};
use crate::decode::pieces::Piece;
use crate::trace::Trace;

/// Where `ts` counts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeOrigin {
    /// The session start (its Unix time is in `otherData.start_unix_ns`): nanosecond
    /// precision in every viewer.
    #[default]
    SessionStart,
    /// The Unix epoch: traces of several processes line up, but viewers that read `ts` as a
    /// double round it to about 0.25 µs, so scopes shorter than that show as zero-length.
    /// Scopes are written as `B`/`E` pairs, whose order states the nesting that rounded
    /// times no longer can.
    UnixEpoch,
}

/// Options of the Chrome format: the [`Format`] that
/// [`Profiler::write_chrome_trace`](crate::Profiler::write_chrome_trace) writes with its
/// defaults, and the argument of [`write_with`].
///
/// ```no_run
/// use tickscope::export::chrome::{Options, TimeOrigin};
///
/// let prof = tickscope::Profiler::start();
/// prof.stop();
/// let absolute = Options::new().time_origin(TimeOrigin::UnixEpoch);
/// prof.write("trace.json.gz", &absolute)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Where timestamps count from.
    pub time_origin: TimeOrigin,
    /// Writes each allocation and free as an instant on its thread (the `memory` counter is
    /// written whenever the trace has memory data).
    pub allocation_instants: bool,
}

impl Options {
    /// The defaults: times from the session start, no allocation instants.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets where timestamps count from.
    pub fn time_origin(mut self, origin: TimeOrigin) -> Self {
        self.time_origin = origin;
        self
    }

    /// Writes each allocation and free as an instant event too.
    pub fn allocation_instants(mut self, on: bool) -> Self {
        self.allocation_instants = on;
        self
    }

    /// What sets this format apart from the other dialects of the Trace Event format.
    fn dialect(&self, trace: &Trace) -> Dialect {
        let absolute = self.time_origin == TimeOrigin::UnixEpoch;
        Dialect {
            header: b"{\"traceEvents\":[\n".to_vec(),
            origin: if absolute { 0 } else { trace.start_ns },
            begin_end: absolute,
            scope_category: "scope",
            poll_category: "poll",
            op_ids: false,
            flow: "link",
            times: (!absolute).then_some(distinct_edges as trace_event::Times),
            whole_micros: false,
            async_spans: true,
            memory: true,
            allocation_instants: self.allocation_instants,
            counters: true,
        }
    }
}

impl Format for Options {
    fn write(&self, trace: &Trace, out: &mut dyn Write) -> io::Result<()> {
        trace_event::write(trace, out, &self.dialect(trace))
    }

    fn write_captures(
        &self,
        captures: &[&crate::Capture],
        out: &mut dyn Write,
    ) -> Option<io::Result<()>> {
        trace_event::write_captures(captures, out, |trace| self.dialect(trace))
    }
}

/// Start and end (ns from `origin`) of each span of one thread as the Chrome format writes
/// them: as recorded, except that no two edges of one track share a nanosecond. Each begin
/// or end, in order along its track, goes 1 ns past the one before where it would fall on or
/// before it; only the end of a zero-length scope stays on its own begin. So a child starts
/// strictly after its parent and ends strictly before it, and a scope starts strictly after
/// its previous sibling ends: importers that rebuild stacks from begin and end events sorted
/// by time (speedscope adds `ts` and `dur` in doubles, and reads the ends of one instant in
/// the order of their begins) cannot misread a tie. Times move only where the clock gave one
/// nanosecond to several edges (ticks converted to the same nanosecond), by 1 ns per edge
/// sharing it. `None` (nothing allocated) when no edges share a nanosecond.
///
/// For a thread written in pieces, `placed` is what its earlier pieces left: the last edge
/// placed on each lane and its time, and where the spans still open were placed to begin
/// (empty for the first), updated for the next.
fn distinct_edges(
    piece: &Piece<'_>,
    lanes: &Lanes,
    origin: u64,
    placed: &mut Placed,
) -> Option<Vec<(u64, u64)>> {
    let spans = piece.spans;
    if placed.last.len() < lanes.count() as usize {
        placed.last.resize(lanes.count() as usize, None);
    }
    let carried = piece.carried.len();
    // A carried span placed elsewhere than its start keeps that place.
    let shared = (0..carried)
        .any(|i| placed.open.get(i).copied() != Some(spans[i].start_ns.saturating_sub(origin)));
    // The times as written, made at the first edge that is not on its own time (or at once,
    // for a carried span placed elsewhere): the edges before it are on theirs. One walk.
    let mut out = shared.then(|| own_times(piece, origin, &placed.open));
    // Where the spans begun in this piece and still open at its end go.
    let mut open_begins = Vec::new();
    separate(
        piece,
        lanes,
        origin,
        &mut placed.last,
        |(edge, ns), moved| {
            if moved && out.is_none() {
                out = Some(own_times(piece, origin, &placed.open));
            }
            if let Some(out) = &mut out {
                match edge {
                    Edge::Begin(i) => out[i as usize].0 = ns,
                    Edge::End(i) => out[i as usize].1 = ns,
                }
            }
            if let Edge::Begin(i) = edge
                && piece.is_open(i)
            {
                open_begins.push(ns);
            }
        },
    );
    let mut begun = open_begins.into_iter();
    let open: Vec<u64> = (piece.open.iter())
        .map(|&i| match placed.open.get(i as usize) {
            Some(&ns) if (i as usize) < carried => ns,
            _ => begun.next().unwrap_or(0),
        })
        .collect();
    placed.open = open;
    out
}

/// The times of `piece`'s spans (ns from `origin`) where their edges are their own: a carried
/// span begins where `placed_open` says its earlier piece placed it (0 when it says nothing),
/// and a span still open has no end here (0).
fn own_times(piece: &Piece<'_>, origin: u64, placed_open: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = (piece.spans.iter())
        .map(|s| {
            (
                s.start_ns.saturating_sub(origin),
                s.end_ns.saturating_sub(origin),
            )
        })
        .collect();
    for (i, times) in out.iter_mut().enumerate().take(piece.carried.len()) {
        times.0 = placed_open.get(i).copied().unwrap_or(0);
    }
    for &i in piece.open {
        out[i as usize].1 = 0;
    }
    out
}

/// Walks the edges of `piece` ([`Lanes::walk`], those it holds: [`Piece::has_edge`]) and
/// gives `place` each one with its time as [`distinct_edges`] writes it (ns from `origin`),
/// and whether that is not its own; `last` holds the last edge placed on each lane (at least
/// one entry per lane).
fn separate(
    piece: &Piece<'_>,
    lanes: &Lanes,
    origin: u64,
    last: &mut [Option<(Edge, u64)>],
    mut place: impl FnMut((Edge, u64), bool),
) {
    let spans = piece.spans;
    lanes.walk(spans, |edge| {
        let (Edge::Begin(i) | Edge::End(i)) = edge;
        if !piece.has_edge(i, matches!(edge, Edge::Begin(_))) {
            return;
        }
        let span = &spans[i as usize];
        let last = &mut last[lanes.lane(i) as usize];
        let own = match edge {
            Edge::Begin(_) => span.start_ns,
            Edge::End(_) => span.end_ns,
        }
        .saturating_sub(origin);
        let ns = match *last {
            None => own,
            // A zero-length scope's end on its begin.
            Some((Edge::Begin(j), at)) if j == i && span.start_ns == span.end_ns => own.max(at),
            Some((_, at)) => own.max(at.saturating_add(1)),
        };
        place((edge, ns), ns != own);
        *last = Some((edge, ns));
    });
}

/// Streams `trace` as Chrome JSON with the default [`Options`].
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    write_with(trace, out, &Options::default())
}

/// Streams `trace` as Chrome JSON into `out`. Memory use does not depend on the trace size,
/// except for a few words per span of one thread at a time on a thread whose scopes were
/// dropped out of order (see the [module docs](self)) or that has edges on one nanosecond.
pub fn write_with(trace: &Trace, out: &mut impl Write, options: &Options) -> io::Result<()> {
    options.write(trace, out)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// [`distinct_edges`], for the tests of pieces beside Kineto's.
    pub(in crate::export) fn distinct_edges_of(
        piece: &Piece<'_>,
        lanes: &Lanes,
        origin: u64,
        placed: &mut Placed,
    ) -> Option<Vec<(u64, u64)>> {
        distinct_edges(piece, lanes, origin, placed)
    }
    use crate::export::lanes::tests::spans;

    /// Edges are separated per track: a scope on an extra lane may share a nanosecond with one
    /// on the thread's own track, and a thread without ties keeps its times (nothing is
    /// allocated for it).
    #[test]
    fn edges_are_separated_per_track() {
        let s = spans(&[
            (100, 110, None),    // a
            (105, 140, Some(0)), // b outlives a: lane 1
            (110, 110, Some(0)), // zero-length child of a at its end
            (110, 115, Some(1)), // child of b, where a ends: lane 0, after a
            (140, 150, None),    // where b ends, on lane 0
            (140, 140, Some(4)), // zero-length child at its parent's start
        ]);
        let lanes = Lanes::assign(&s);
        assert_eq!(lanes.count(), 2);
        assert_eq!(
            distinct_edges(&Piece::whole(&s), &lanes, 100, &mut Placed::default()),
            Some(vec![
                (0, 11),
                (5, 40),
                (10, 10),
                (12, 15),
                (40, 50),
                (41, 41)
            ])
        );
        let apart = spans(&[(0, 10, None), (1, 9, Some(0)), (11, 20, None)]);
        let lanes = Lanes::assign(&apart);
        assert_eq!(
            distinct_edges(&Piece::whole(&apart), &lanes, 0, &mut Placed::default()),
            None
        );
    }
}
