//! The writer: entry points, the buffer and its `pid`s, names and prefixes, the header and
//! the end of the file.

use crate::record::hash::{FxHashMap, FxHashSet};
use std::io::{self, Write};

use super::dialect::{Dialect, Placed};
use crate::decode::pieces::{Pieces, SpanSource};
use crate::export::json;
use crate::export::parts;
use crate::record::callsite::Callsite;
use crate::trace::{Compensation, Number, Process, SpanRef, Trace};

/// Bytes buffered before they are written out.
const BLOCK: usize = 64 * 1024;

/// Streams `trace` as Trace Event JSON in `dialect` into `out`.
pub(crate) fn write(trace: &Trace, out: &mut dyn Write, dialect: &Dialect) -> io::Result<()> {
    write_from(trace, out, dialect)
}

/// What a dialect's [`Format::write_captures`](crate::export::Format::write_captures) does:
/// the trace of `captures` written as they are decoded, piece by piece ([`Pieces`]), in the
/// dialect `dialect` makes of it; `None` where they cannot be written so.
pub(crate) fn write_captures(
    captures: &[&crate::Capture],
    out: &mut dyn Write,
    dialect: impl FnOnce(&Trace) -> Dialect,
) -> Option<io::Result<()>> {
    let pieces = Pieces::with_memory(captures)?;
    let dialect = dialect(pieces.trace());
    Some(write_from(&pieces, out, &dialect))
}

/// Streams the trace of `source` as Trace Event JSON in `dialect` into `out`, each thread's
/// spans piece by piece as `source` gives them ([`SpanSource::each_piece`]): the events of
/// a trace decoded whole, in the same order; of captures decoded in pieces, the same events
/// with a thread's extra tracks named before the first piece that uses them.
pub(crate) fn write_from(
    source: &dyn SpanSource,
    out: &mut dyn Write,
    dialect: &Dialect,
) -> io::Result<()> {
    let trace = source.trace();
    let (pids, link_args) = (pids(&trace.processes), link_args(trace));
    let mut w = Writer::new(out, dialect, &pids, &link_args);
    w.header(trace)?;
    // Tracks for the lanes of overlapping scopes are numbered after the largest thread id.
    let mut tracks = Tracks {
        next_tid: trace
            .threads
            .iter()
            .map(|t| t.id)
            .max()
            .unwrap_or(0)
            .saturating_add(1),
        sort_index: 0,
    };
    // Where the slices that took part in a link went: track and times as written.
    let mut flow_slices: FxHashMap<SpanRef, Slice> = FxHashMap::default();
    // Kineto's event numbers go on from the thread before: those threads are written in turn.
    let weights: Vec<usize> = (0..trace.threads.len())
        .map(|index| match dialect.op_ids {
            true => 0,
            false => source.apart_weight(index),
        })
        .collect();
    parts::threads(
        &weights,
        &|index, part| {
            let mut apart = Writer::new(part, dialect, &pids, &link_args);
            let mut flow_slices = FxHashMap::default();
            apart.spans(source, index, None, &mut flow_slices)?;
            apart.out.write_all(&apart.buf)?;
            Ok(flow_slices)
        },
        &mut |index, part| {
            w.thread_metadata_once(trace, index, &mut tracks)?;
            match part {
                Some((part, slices)) => {
                    w.out.write_all(&w.buf)?;
                    w.buf.clear();
                    flow_slices.extend(slices);
                    part.copy_to(w.out)
                }
                None => w.spans(source, index, Some(&mut tracks), &mut flow_slices),
            }
        },
    )?;
    w.flows(trace, &flow_slices)?;
    if dialect.async_spans {
        for (id, call) in trace.async_spans.iter().enumerate() {
            w.async_span(id, call)?;
        }
        // Of pieces, the calls matched as the threads are read again, in the same order.
        source.each_streamed_call(&mut |id, call| w.async_span(id, call))?;
    }
    if trace.memory.is_some() && dialect.memory {
        w.memory(trace, source, dialect.allocation_instants)?;
    }
    if dialect.counters {
        w.counters(trace)?;
        w.instants(trace)?;
    }
    w.finish(trace)
}

/// Numbering of the tracks written so far.
pub(super) struct Tracks {
    /// The `tid` of the next extra track (a lane past a thread's own).
    pub(super) next_tid: u64,
    /// The `thread_sort_index` of the next track.
    pub(super) sort_index: usize,
}

/// The tracks of the thread being written: one per lane of overlapping scopes so far.
pub(super) struct ThreadLanes {
    /// The thread's display name, which its extra tracks' names start with.
    pub(super) name: String,
    pub(super) pid: u32,
    /// The `tid` of each lane's track: the thread's own, then the extra ones.
    pub(super) tids: Vec<u64>,
    /// `,"pid":..,"tid":..,"ts":` of each lane's track.
    pub(super) heads: Vec<String>,
    /// What [`Dialect::times`] carries from one piece of the thread to the next.
    pub(super) placed: Placed,
    /// The `X` events written before this thread's (Kineto's event numbers go on from there).
    pub(super) ops_before: u64,
}

impl ThreadLanes {
    /// The start of the events on track `tid` of this thread's process.
    pub(super) fn head(&self, tid: u64) -> String {
        format!(",\"pid\":{},\"tid\":{tid},\"ts\":", self.pid)
    }
}

/// Where a slice that took part in a link was written.
#[derive(Clone, Copy)]
pub(super) struct Slice {
    pub(super) pid: u32,
    pub(super) tid: u64,
    /// Start and end as written, in ns from the origin.
    pub(super) start: u64,
    pub(super) end: u64,
}

/// The `pid` each process of `processes` is written with: its process id, unless an earlier
/// process has that id (processes of two hosts, or two programs that had one id at different
/// times), then a number past every process id of the trace, so that no two processes share
/// one.
pub(crate) fn pids(processes: &[Process]) -> Vec<u32> {
    let mut used: FxHashSet<u32> = FxHashSet::default();
    let mut next = processes.iter().map(|p| p.id).max().unwrap_or(0);
    processes
        .iter()
        .map(|p| {
            if used.insert(p.id) {
                return p.id;
            }
            loop {
                next = next.wrapping_add(1);
                if used.insert(next) {
                    return next;
                }
            }
        })
        .collect()
}

/// `ns` on the whole microsecond nearest to it, counting from `origin`.
pub(crate) fn nearest_micros(ns: u64, origin: u64) -> u64 {
    ns.saturating_sub(origin).saturating_add(500) / 1000
}

/// Slots of [`Writer::prefixes`].
pub(super) const PREFIXES: usize = 64;

/// The start of a span's event, `,\n{"ph":"<ph>","cat":"<cat>","name":<name>,"pid":..,"tid":..,"ts":`,
/// and what it is made of: phase, callsite (by address), poll or scope, and lane.
#[derive(Default)]
pub(super) struct Prefix {
    pub(super) key: Option<(u8, usize, bool, u32)>,
    pub(super) bytes: Vec<u8>,
}

pub(super) struct Writer<'a> {
    pub(super) out: &'a mut dyn Write,
    /// Events are formatted here by hand (no `fmt` machinery) and flushed in 64 KiB blocks.
    pub(super) buf: Vec<u8>,
    /// Each name escaped once per trace.
    names: FxHashMap<*const Callsite, Vec<u8>>,
    /// The `pid` of each process ([`pids`]).
    pids: &'a [u32],
    /// The threads (process and id) whose metadata is written: a thread that two sessions of
    /// one process recorded is one track.
    pub(super) named: FxHashSet<(u32, u64)>,
    /// The starts of recent span events of the current thread (see [`Prefix`]), at slots
    /// given by what they are made of: most events copy theirs in one piece.
    pub(super) prefixes: Vec<Prefix>,
    pub(super) dialect: &'a Dialect,
    /// Complete events written, for Kineto's ids.
    pub(super) events: u64,
    /// Args of the slices that took part in a link, rendered.
    pub(super) link_args: &'a FxHashMap<SpanRef, Vec<u8>>,
}

impl<'a> Writer<'a> {
    /// A writer into `out`, of nothing yet.
    fn new(
        out: &'a mut dyn Write,
        dialect: &'a Dialect,
        pids: &'a [u32],
        link_args: &'a FxHashMap<SpanRef, Vec<u8>>,
    ) -> Self {
        Writer {
            out,
            buf: Vec::with_capacity(BLOCK + 512),
            names: FxHashMap::default(),
            pids,
            named: FxHashSet::default(),
            prefixes: std::iter::repeat_with(Prefix::default)
                .take(PREFIXES)
                .collect(),
            dialect,
            events: 0,
            link_args,
        }
    }
}

/// The callsite's name as a JSON string.
fn escape(callsite: &Callsite) -> Vec<u8> {
    let mut name = Vec::new();
    json::push_str(&mut name, callsite.name());
    name
}

/// PyTorch's link args per slice: `"Sequence number":S` on an origin, plus
/// `"Fwd thread id":T` on a follower (whose own args win when a slice is both); none (but an
/// entry) for the slices of a link without sequence number.
fn link_args(trace: &Trace) -> FxHashMap<SpanRef, Vec<u8>> {
    let mut args: FxHashMap<SpanRef, Vec<u8>> = FxHashMap::default();
    for link in &trace.flows {
        if link.seq == 0 {
            // A `tracing` span's `follows_from` has no PyTorch link args, but its slices take
            // part in a flow.
            for at in link.origin.into_iter().chain([link.follower]) {
                args.entry(at).or_default();
            }
            continue;
        }
        let mut follower = b"\"Sequence number\":".to_vec();
        json::push_u64(&mut follower, u64::from(link.seq));
        if let Some(origin) = link.origin {
            args.entry(origin).or_insert_with(|| follower.clone());
        }
        follower.extend_from_slice(b",\"Fwd thread id\":");
        json::push_u64(&mut follower, link.origin_thread);
        args.insert(link.follower, follower);
    }
    args
}

impl Writer<'_> {
    /// The `pid` of process `process` (an index in [`Trace::processes`]).
    pub(super) fn pid(&self, process: u32) -> u32 {
        let pid = self.pids.get(process as usize).or(self.pids.first());
        pid.copied().unwrap_or(0)
    }

    /// The dialect's header and the `process_name` metadata of each process: its executable's
    /// name (`tickscope` when unknown), after its host's name and a `/` when the processes ran
    /// on more than one host, and followed by ` (pid N)` when it is written with another
    /// `pid` than its own.
    fn header(&mut self, trace: &Trace) -> io::Result<()> {
        self.buf.extend_from_slice(&self.dialect.header);
        let hosts_differ = trace.hosts_differ();
        for (index, process) in (0..).zip(&trace.processes) {
            let mut name = match process.name.as_str() {
                "" => "tickscope".to_owned(),
                name => name.to_owned(),
            };
            if hosts_differ && !process.host.is_empty() {
                name = format!("{}/{name}", process.host);
            }
            let pid = self.pid(index);
            if pid != process.id {
                name = format!("{name} (pid {})", process.id);
            }
            if index > 0 {
                self.buf.extend_from_slice(b",\n");
            }
            write!(self.buf, "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"ts\":")?;
            self.ts(trace.start_ns);
            self.buf
                .extend_from_slice(b",\"name\":\"process_name\",\"args\":{\"name\":");
            json::push_str(&mut self.buf, &name);
            self.buf.extend_from_slice(b"}}");
        }
        Ok(())
    }

    /// Appends `ns` as a timestamp relative to the origin.
    pub(super) fn ts(&mut self, ns: u64) {
        json::push_micros(&mut self.buf, ns.saturating_sub(self.dialect.origin));
    }

    /// Appends the callsite's name as a JSON string, escaped once per trace.
    pub(super) fn name(&mut self, callsite: &'static Callsite) {
        let name = self
            .names
            .entry(callsite as *const Callsite)
            .or_insert_with(|| escape(callsite));
        self.buf.extend_from_slice(name);
    }

    /// The callsite's name as a JSON string, escaped once per trace.
    pub(super) fn escaped_name(&mut self, callsite: &'static Callsite) -> &[u8] {
        self.names
            .entry(callsite as *const Callsite)
            .or_insert_with(|| escape(callsite))
    }

    /// Writes the buffer out once it holds a block.
    pub(super) fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= BLOCK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// The rest of the buffer, the end of `traceEvents` and `otherData`.
    fn finish(self, trace: &Trace) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        write!(
            self.out,
            "\n],\"otherData\":{{\"producer\":\"tickscope {}\",\"start_unix_ns\":{},\"end_unix_ns\":{},\"dropped_events\":{},\"time_origin_unix_ns\":{}",
            env!("CARGO_PKG_VERSION"),
            trace.start_ns,
            trace.end_ns,
            trace.dropped_events,
            self.dialect.origin,
        )?;
        // A flight recorder's window: the events recycled before it.
        if trace.overwritten_events > 0 {
            write!(
                self.out,
                ",\"overwritten_events\":{}",
                trace.overwritten_events
            )?;
        }
        // The probe cost subtracted from durations in the table (the slices keep their
        // recorded times, but for the 1 ns that separates edges that shared a nanosecond on
        // one track); absent when the trace says nothing about it (a mock clock).
        match trace.compensation {
            Some(Compensation::Off) => write!(self.out, ",\"overhead_compensation\":\"off\"")?,
            Some(Compensation::Applied { inner_ns, outer_ns }) => write!(
                self.out,
                ",\"overhead_compensation\":\"applied\",\"probe_inner_ns\":{inner_ns:.3},\"probe_outer_ns\":{outer_ns:.3}"
            )?,
            None => {}
        }
        self.out.write_all(b"}}\n")
    }
}

/// Appends a counter value: an integer as it is, a finite float in Rust's shortest
/// round-trip form, a non-finite one (which JSON cannot hold) as `null`.
pub(super) fn push_number(buf: &mut Vec<u8>, n: Number) {
    match n {
        Number::Int(v) => {
            let _ = write!(buf, "{v}");
        }
        Number::Float(v) if v.is_finite() => {
            let _ = write!(buf, "{v}");
        }
        Number::Float(_) => buf.extend_from_slice(b"null"),
    }
}
