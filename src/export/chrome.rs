//! Chrome Trace Event JSON, for ui.perfetto.dev and chrome://tracing.
//!
//! Each scope is one complete event (`"ph":"X"`; a poll of an async call has `"cat":"poll"`);
//! threads get `thread_name` and `thread_sort_index` metadata, the process a `process_name`.
//! Each `#[profile] async fn` call is a nestable async span (`"ph":"b"` / `"e"`, category
//! `async`, one id per call) from its first poll to its end, which viewers show on an async
//! track of its own.
//!
//! A scope that followed from a [`Link`](crate::Link) gets a flow arrow (`"ph":"s"` at the
//! capture, inside the originating slice; `"ph":"f"` with `"bp":"e"` at the follower's start,
//! inside it), and both slices carry PyTorch's args: `Sequence number`, and on the follower
//! `Fwd thread id`, the thread that captured the link.
//!
//! When the session tracked memory, a process-wide counter (`"ph":"C"`, name `memory`, series
//! `live_bytes`) follows the bytes allocated in the window and not yet freed, and with
//! [`Options::allocation_instants`] each allocation and free is also an instant (`"ph":"i"`,
//! category `memory`) on its thread with its size, address and scope in `args`. The Kineto
//! flavour leaves memory out.
//!
//! Timestamps are microseconds with three decimals (nanosecond precision). By default they
//! count from the session start, whose Unix time is in `otherData.start_unix_ns`: viewers read
//! `ts` as a double, and small values keep every nanosecond. [`TimeOrigin::UnixEpoch`] writes
//! absolute times instead, to merge traces of several processes; a double then resolves only
//! about 0.25 µs at today's epoch, so viewers round sub-µs detail, and scopes are written as
//! `B`/`E` pairs so that nesting survives the rounding.

use crate::hash::FxHashMap;
use std::io::{self, Write};

use super::json_str;
use crate::callsite::Callsite;
use crate::trace::{
    AsyncSpanRecord, MemoryKind, MemoryTrace, SpanArg, SpanKind, SpanRecord, SpanRef, Trace, Value,
};

const BLOCK: usize = 64 * 1024;

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

/// Which dialect of the format to write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flavor {
    /// Chrome trace events as ui.perfetto.dev and chrome://tracing read them.
    #[default]
    Chrome,
    /// What the PyTorch profiler (Kineto) writes, for HolisticTraceAnalysis and the PyTorch
    /// TensorBoard plugin: `"cat":"cpu_op"` complete events with the ids PyTorch puts in
    /// `args` (`External id`, `Ev Idx`, `Record function id`), `schemaVersion`,
    /// `distributedInfo` with a rank, and Kineto's absolute time base: `ts` counts from
    /// `baseTimeNanoseconds`, the session start in Unix-epoch nanoseconds, so traces of
    /// several ranks line up without losing precision. Async calls appear only as their poll
    /// slices: the format has no async spans.
    Kineto {
        /// This process's rank in a distributed job (0 for a single process).
        rank: u32,
        /// The number of ranks.
        world_size: u32,
    },
}

/// Options for [`write_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Where timestamps count from; [`Flavor::Kineto`] ignores it and always writes Kineto's
    /// `baseTimeNanoseconds` plus relative `ts`.
    pub time_origin: TimeOrigin,
    /// Plain Chrome JSON or the Kineto dialect.
    pub flavor: Flavor,
    /// Writes each allocation and free as an instant on its thread (the `memory` counter is
    /// written whenever the trace has memory data).
    pub allocation_instants: bool,
}

impl Options {
    /// The defaults: Chrome flavour, times from the session start.
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

    /// Writes the Kineto dialect as rank `rank` of `world_size`.
    pub fn kineto(mut self, rank: u32, world_size: u32) -> Self {
        self.flavor = Flavor::Kineto { rank, world_size };
        self
    }
}

/// Appends `v` in decimal.
fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Appends nanoseconds as microseconds with exactly three decimals.
fn push_micros(buf: &mut Vec<u8>, ns: u64) {
    push_u64(buf, ns / 1000);
    let frac = ns % 1000;
    buf.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

/// Streams `trace` as Chrome JSON with the default [`Options`].
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    write_with(trace, out, &Options::default())
}

/// Streams `trace` as Chrome JSON into `out`; memory use does not depend on the trace size.
pub fn write_with(trace: &Trace, out: &mut impl Write, options: &Options) -> io::Result<()> {
    let mut w = Writer {
        out,
        buf: Vec::with_capacity(BLOCK + 512),
        names: FxHashMap::default(),
        pid: std::process::id(),
        origin: match (options.flavor, options.time_origin) {
            (Flavor::Chrome, TimeOrigin::UnixEpoch) => 0,
            (Flavor::Kineto { .. }, _) | (Flavor::Chrome, TimeOrigin::SessionStart) => {
                trace.start_ns
            }
        },
        kineto: matches!(options.flavor, Flavor::Kineto { .. }),
        begin_end: options.flavor == Flavor::Chrome && options.time_origin == TimeOrigin::UnixEpoch,
        events: 0,
        link_args: link_args(trace),
    };
    w.header(trace, options)?;
    let mut ends: Vec<u64> = Vec::new();
    for (index, thread) in trace.threads.iter().enumerate() {
        w.thread_metadata(thread.id, &thread.display_name(), index)?;
        let head = format!(",\"pid\":{},\"tid\":{},\"ts\":", w.pid, thread.id);
        let at = |span: usize| SpanRef {
            thread: index as u32,
            span: span as u32,
        };
        if w.begin_end {
            // Absolute times: viewers read `ts` as a double, which resolves only 0.25 µs
            // at today's epoch, so nesting inferred from `ts` and `dur` would break (a child
            // seeming to outlast its parent is dropped). `B`/`E` pairs, in order, state it.
            let mut open: Vec<(u32, u64)> = Vec::new();
            for (index, span) in thread.spans.iter().enumerate() {
                while let Some(&(top, end)) = open.last() {
                    if Some(top) == span.parent {
                        break;
                    }
                    open.pop();
                    w.edge(&thread.spans[top as usize], &head, end, None);
                }
                let parent_end = open.last().map_or(u64::MAX, |&(_, end)| end);
                open.push((index as u32, span.end_ns.min(parent_end).max(span.start_ns)));
                w.edge(
                    span,
                    &head,
                    span.start_ns,
                    Some((at(index), thread.args_of(index as u32))),
                );
                w.spill()?;
            }
            while let Some((top, end)) = open.pop() {
                w.edge(&thread.spans[top as usize], &head, end, None);
            }
            continue;
        }
        ends.clear();
        for (i, span) in thread.spans.iter().enumerate() {
            // A child never outlives its parent in the file, so viewers nest it; only scopes
            // dropped out of order need this.
            let parent_end = span.parent.map_or(u64::MAX, |p| ends[p as usize]);
            let end = span.end_ns.min(parent_end);
            ends.push(end);
            let dur = end.saturating_sub(span.start_ns);
            w.complete(span, &head, dur, at(i), thread.args_of(i as u32));
            w.spill()?;
        }
    }
    w.flows(trace)?;
    if !w.kineto {
        for (id, call) in trace.async_spans.iter().enumerate() {
            w.async_span(id, call)?;
        }
        if let Some(memory) = &trace.memory {
            w.memory(trace.start_ns, memory, options.allocation_instants)?;
        }
    }
    w.finish(trace)
}

struct Writer<'a, W: Write> {
    out: &'a mut W,
    /// Events are formatted here by hand (no `fmt` machinery) and flushed in 64 KiB blocks.
    buf: Vec<u8>,
    /// Each name escaped once per trace.
    names: FxHashMap<*const Callsite, Vec<u8>>,
    pid: u32,
    origin: u64,
    kineto: bool,
    /// Scopes as `B`/`E` pairs instead of `X` events.
    begin_end: bool,
    /// Complete events written, for Kineto's ids.
    events: u64,
    /// Args of the slices that took part in a link, rendered.
    link_args: FxHashMap<SpanRef, Vec<u8>>,
}

/// PyTorch's link args per slice: `"Sequence number":S` on an origin, plus
/// `"Fwd thread id":T` on a follower (whose own args win when a slice is both).
fn link_args(trace: &Trace) -> FxHashMap<SpanRef, Vec<u8>> {
    let mut args: FxHashMap<SpanRef, Vec<u8>> = FxHashMap::default();
    for link in &trace.links {
        let mut follower = b"\"Sequence number\":".to_vec();
        push_u64(&mut follower, u64::from(link.seq));
        if let Some(origin) = link.origin {
            args.entry(origin).or_insert_with(|| follower.clone());
        }
        follower.extend_from_slice(b",\"Fwd thread id\":");
        push_u64(&mut follower, link.origin_thread);
        args.insert(link.follower, follower);
    }
    args
}

impl<W: Write> Writer<'_, W> {
    fn header(&mut self, trace: &Trace, options: &Options) -> io::Result<()> {
        if let Flavor::Kineto { rank, world_size } = options.flavor {
            // Spaced as Kineto writes it: HolisticTraceAnalysis finds the rank with the regex
            // `"rank":\s+(\d+)`.
            write!(
                self.buf,
                "{{\"schemaVersion\":1,\"deviceProperties\":[],\"distributedInfo\": {{\"backend\": \"none\", \"rank\": {rank}, \"world_size\": {world_size}}},\"baseTimeNanoseconds\":{},\"displayTimeUnit\":\"ms\",\"traceName\":\"tickscope\",\"traceEvents\":[",
                self.origin
            )?;
            self.buf.push(b'\n');
        } else {
            self.buf.extend_from_slice(b"{\"traceEvents\":[\n");
        }
        let process = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "tickscope".to_owned());
        write!(
            self.buf,
            "{{\"ph\":\"M\",\"pid\":{},\"tid\":0,\"ts\":",
            self.pid
        )?;
        self.ts(trace.start_ns);
        self.buf
            .extend_from_slice(b",\"name\":\"process_name\",\"args\":{\"name\":");
        json_str(&mut self.buf, &process)?;
        self.buf.extend_from_slice(b"}}");
        Ok(())
    }

    fn thread_metadata(&mut self, tid: u64, name: &str, index: usize) -> io::Result<()> {
        let pid = self.pid;
        write!(
            self.buf,
            ",\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":"
        )?;
        json_str(&mut self.buf, name)?;
        write!(
            self.buf,
            "}}}},\n{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{index}}}}}"
        )
    }

    /// Appends `ns` as a timestamp relative to the origin.
    fn ts(&mut self, ns: u64) {
        push_micros(&mut self.buf, ns.saturating_sub(self.origin));
    }

    /// Appends the callsite's name as a JSON string, escaped once per trace.
    fn name(&mut self, callsite: &'static Callsite) {
        let name = self
            .names
            .entry(callsite as *const Callsite)
            .or_insert_with(|| {
                let mut name = Vec::new();
                json_str(&mut name, callsite.name()).expect("writing to a Vec cannot fail");
                name
            });
        self.buf.extend_from_slice(name);
    }

    /// The category and name of an event for `span`, after `"ph":"<ph>"`.
    fn cat_and_name(&mut self, span: &SpanRecord) {
        let poll = matches!(span.kind, SpanKind::Poll { .. });
        let cat: &[u8] = match (self.kineto, poll) {
            (true, _) => b"\",\"cat\":\"cpu_op\",\"name\":",
            (false, false) => b"\",\"cat\":\"scope\",\"name\":",
            (false, true) => b"\",\"cat\":\"poll\",\"name\":",
        };
        self.buf.extend_from_slice(cat);
        self.name(span.callsite);
    }

    /// A `B` event of the span at `begin`, or an `E` event, of `span` at `ns`; `head` is
    /// `,"pid":..,"tid":..,"ts":`.
    fn edge(
        &mut self,
        span: &SpanRecord,
        head: &str,
        ns: u64,
        begin: Option<(SpanRef, &[SpanArg])>,
    ) {
        self.buf.extend_from_slice(if begin.is_some() {
            b",\n{\"ph\":\"B"
        } else {
            b",\n{\"ph\":\"E"
        });
        self.cat_and_name(span);
        self.buf.extend_from_slice(head.as_bytes());
        self.ts(ns);
        if let Some((at, args)) = begin {
            self.args(at, args, span.open_at_stop, None);
        }
        self.buf.push(b'}');
    }

    /// `,"args":{..}` with Kineto's ids (`kineto_id`), the link args of the slice at `at`, the
    /// scope's own `args`, and `open_at_stop`; nothing when there are none.
    fn args(
        &mut self,
        at: SpanRef,
        args: &[SpanArg],
        open_at_stop: bool,
        kineto_id: Option<(u64, u32)>,
    ) {
        let link = if self.link_args.is_empty() {
            None
        } else {
            self.link_args.get(&at)
        };
        if link.is_none() && args.is_empty() && !open_at_stop && kineto_id.is_none() {
            return;
        }
        self.buf.extend_from_slice(b",\"args\":{");
        let mut first = true;
        let mut sep = |buf: &mut Vec<u8>| {
            if !std::mem::take(&mut first) {
                buf.push(b',');
            }
        };
        if let Some((event, callsite)) = kineto_id {
            sep(&mut self.buf);
            self.buf.extend_from_slice(b"\"External id\":");
            push_u64(&mut self.buf, event);
            self.buf.extend_from_slice(b",\"Ev Idx\":");
            push_u64(&mut self.buf, event - 1);
            self.buf.extend_from_slice(b",\"Record function id\":");
            push_u64(&mut self.buf, u64::from(callsite));
        }
        if let Some(link) = link {
            sep(&mut self.buf);
            self.buf.extend_from_slice(link);
        }
        for arg in args {
            sep(&mut self.buf);
            json_str(&mut self.buf, arg.key).expect("writing to a Vec cannot fail");
            self.buf.push(b':');
            match &arg.value {
                Value::I64(v) => self.buf.extend_from_slice(v.to_string().as_bytes()),
                Value::U64(v) => push_u64(&mut self.buf, *v),
                Value::F64(v) if v.is_finite() => {
                    self.buf.extend_from_slice(v.to_string().as_bytes());
                }
                Value::Bool(v) => self
                    .buf
                    .extend_from_slice(if *v { b"true" } else { b"false" }),
                Value::F64(_) | Value::Str(_) => {
                    json_str(&mut self.buf, &arg.value.to_string())
                        .expect("writing to a Vec cannot fail");
                }
            }
        }
        if open_at_stop {
            sep(&mut self.buf);
            self.buf.extend_from_slice(b"\"open_at_stop\":true");
        }
        self.buf.push(b'}');
    }

    /// A flow arrow per link whose capture is in the trace: `s` at the capture time on the
    /// originating slice, `f` (binding to the enclosing slice) at the follower's start.
    fn flows(&mut self, trace: &Trace) -> io::Result<()> {
        let (cat, name): (&str, &str) = if self.kineto {
            ("fwdbwd", "fwdbwd")
        } else {
            ("link", "link")
        };
        for (id, link) in trace.links.iter().enumerate() {
            let (Some(origin), Some(origin_ns)) = (link.origin, link.origin_ns) else {
                continue;
            };
            let (origin_thread, origin_span) = trace.span(origin);
            let (follower_thread, follower_span) = trace.span(link.follower);
            let ends = [
                (
                    "s",
                    origin_thread.id,
                    origin_ns.clamp(origin_span.start_ns, origin_span.end_ns),
                    "",
                ),
                (
                    "f",
                    follower_thread.id,
                    follower_span.start_ns,
                    ",\"bp\":\"e\"",
                ),
            ];
            for (ph, tid, ns, bp) in ends {
                write!(
                    self.buf,
                    ",\n{{\"ph\":\"{ph}\"{bp},\"cat\":\"{cat}\",\"name\":\"{name}\",\"id\":{},\"pid\":{},\"tid\":{tid},\"ts\":",
                    id + 1,
                    self.pid
                )?;
                self.ts(ns);
                self.buf.push(b'}');
            }
            self.spill()?;
        }
        Ok(())
    }

    /// One `X` event lasting `dur` ns for the span at `at`; `head` is
    /// `,"pid":..,"tid":..,"ts":`.
    fn complete(&mut self, span: &SpanRecord, head: &str, dur: u64, at: SpanRef, args: &[SpanArg]) {
        let (callsite, open_at_stop) = (span.callsite, span.open_at_stop);
        self.buf.extend_from_slice(b",\n{\"ph\":\"X");
        self.cat_and_name(span);
        self.buf.extend_from_slice(head.as_bytes());
        self.ts(span.start_ns);
        self.buf.extend_from_slice(b",\"dur\":");
        push_micros(&mut self.buf, dur);
        let kineto_id = self.kineto.then(|| {
            self.events += 1;
            (self.events, callsite.id())
        });
        self.args(at, args, open_at_stop, kineto_id);
        self.buf.push(b'}');
    }

    /// The `b` and `e` events of one async call, id `id`, on the thread of its first poll.
    fn async_span(&mut self, id: usize, call: &AsyncSpanRecord) -> io::Result<()> {
        for begin in [true, false] {
            let ph: &[u8] = if begin { b"b" } else { b"e" };
            self.buf.extend_from_slice(b",\n{\"ph\":\"");
            self.buf.extend_from_slice(ph);
            self.buf
                .extend_from_slice(b"\",\"cat\":\"async\",\"name\":");
            self.name(call.callsite);
            write!(
                self.buf,
                ",\"id\":\"0x{:x}\",\"pid\":{},\"tid\":{},\"ts\":",
                id + 1,
                self.pid,
                call.thread
            )?;
            self.ts(if begin { call.start_ns } else { call.end_ns });
            if begin {
                write!(
                    self.buf,
                    ",\"args\":{{\"polls\":{},\"busy_ns\":{},\"self_ns\":{}",
                    call.polls, call.busy_ns, call.self_ns
                )?;
                if let Some(end_thread) = call.end_thread {
                    write!(self.buf, ",\"end_thread\":{end_thread}")?;
                }
                if call.open_at_stop {
                    self.buf.extend_from_slice(b",\"open_at_stop\":true");
                }
                self.buf.push(b'}');
            }
            self.buf.push(b'}');
        }
        self.spill()
    }

    /// The `memory` counter (`live_bytes`) from `start_ns` on, and with `instants` one instant per event.
    fn memory(&mut self, start_ns: u64, memory: &MemoryTrace, instants: bool) -> io::Result<()> {
        let live = memory.live_bytes();
        let pid = self.pid;
        let counter = |w: &mut Self, ns: u64, bytes: u64| {
            write!(
                w.buf,
                ",\n{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":{pid},\"tid\":0,\"ts\":"
            )?;
            w.ts(ns);
            w.buf.extend_from_slice(b",\"args\":{\"live_bytes\":");
            push_u64(&mut w.buf, bytes);
            w.buf.extend_from_slice(b"}}");
            w.spill()
        };
        counter(self, start_ns, 0)?;
        for (i, (event, &bytes)) in memory.events.iter().zip(&live).enumerate() {
            // One sample per timestamp: the value after its last event.
            if memory
                .events
                .get(i + 1)
                .is_none_or(|next| next.ns != event.ns)
            {
                counter(self, event.ns, bytes)?;
            }
            if instants {
                let name = match event.kind {
                    MemoryKind::Alloc => "alloc",
                    MemoryKind::Free => "free",
                };
                write!(
                    self.buf,
                    ",\n{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"memory\",\"name\":\"{name}\",\"pid\":{pid},\"tid\":{},\"ts\":",
                    event.thread
                )?;
                self.ts(event.ns);
                write!(
                    self.buf,
                    ",\"args\":{{\"size\":{},\"address\":\"0x{:x}\",\"live_bytes\":{bytes}",
                    event.size, event.address
                )?;
                if let Some((_, callsite)) = event.span {
                    self.buf.extend_from_slice(b",\"scope\":");
                    self.name(callsite);
                }
                self.buf.extend_from_slice(b"}}");
                self.spill()?;
            }
        }
        Ok(())
    }

    /// Writes the buffer out once it holds a block.
    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= BLOCK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(self, trace: &Trace) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        write!(
            self.out,
            "\n],\"otherData\":{{\"producer\":\"tickscope {}\",\"start_unix_ns\":{},\"end_unix_ns\":{},\"dropped_events\":{},\"time_origin_unix_ns\":{}}}}}\n",
            env!("CARGO_PKG_VERSION"),
            trace.start_ns,
            trace.end_ns,
            trace.dropped_events,
            self.origin,
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn micros_have_three_decimals() {
        for (ns, text) in [
            (0, "0.000"),
            (7, "0.007"),
            (1_250, "1.250"),
            (u64::MAX, "18446744073709551.615"),
        ] {
            let mut buf = Vec::new();
            super::push_micros(&mut buf, ns);
            assert_eq!(String::from_utf8(buf).unwrap(), text);
        }
    }
}
