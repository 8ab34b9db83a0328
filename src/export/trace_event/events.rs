//! What is not a thread's slice: async calls, memory, counters and instants.

use crate::record::hash::{FxHashMap, FxHashSet};
use std::io::{self, Write};

use super::writer::{Writer, push_number};
use crate::decode::pieces::SpanSource;
use crate::export::json;
use crate::trace::{AsyncSpan, InstantScope, MemoryEvent, MemoryKind, Trace};

impl Writer<'_> {
    /// The `b` and `e` events of one async call, id `id`, on the thread of its first poll.
    pub(super) fn async_span(&mut self, id: usize, call: &AsyncSpan) -> io::Result<()> {
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
                self.pid(call.process),
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
                if call.cut_at_start {
                    self.buf.extend_from_slice(b",\"cut_at_start\":true");
                }
                self.buf.push(b'}');
            }
            self.buf.push(b'}');
        }
        self.spill()
    }

    /// The `memory` counter (`live_bytes`) of each process from the trace's start on, and with
    /// `instants` one instant per event, of the memory timeline `source` gives. A process gets
    /// a counter when it has events (the process of a trace of one always does).
    pub(super) fn memory(
        &mut self,
        trace: &Trace,
        source: &dyn SpanSource,
        instants: bool,
    ) -> io::Result<()> {
        let mut counted = source.memory_processes();
        if trace.processes.len() == 1 {
            counted.insert(0);
        }
        for process in counted {
            let pid = self.pid(process);
            self.memory_counter(pid, trace.start_ns, 0)?;
        }
        // The events of one timestamp (of any process), with their live bytes: a process's
        // sample there is known once they all are.
        let mut group: Vec<(MemoryEvent, u64)> = Vec::new();
        source.each_memory_event(None, &mut |event, bytes| {
            if group.first().is_some_and(|(first, _)| first.ns != event.ns) {
                self.memory_group(&group, instants)?;
                group.clear();
            }
            group.push((event.clone(), bytes));
            Ok(())
        })?;
        self.memory_group(&group, instants)
    }

    /// The memory events `group` of one timestamp, in order, with their process's live bytes
    /// after each. One sample per process: the value after its last event there; where its
    /// events went higher than that (an allocation freed within the nanosecond), their peak
    /// there and the value after them 1 ns later, so that no viewer misses the peak.
    fn memory_group(&mut self, group: &[(MemoryEvent, u64)], instants: bool) -> io::Result<()> {
        // Whether each is its process's last event of the group.
        let mut seen: FxHashSet<u32> = FxHashSet::default();
        let mut lasts: Vec<bool> = group
            .iter()
            .rev()
            .map(|(e, _)| seen.insert(e.process))
            .collect();
        lasts.reverse();
        // Per process: the peak of its events so far.
        let mut peaks: FxHashMap<u32, u64> = FxHashMap::default();
        for ((event, bytes), last) in group.iter().zip(lasts) {
            let bytes = *bytes;
            let pid = self.pid(event.process);
            let peak = peaks.entry(event.process).or_insert(bytes);
            *peak = (*peak).max(bytes);
            let peak = *peak;
            if last {
                if peak > bytes {
                    self.memory_counter(pid, event.ns, peak)?;
                    self.memory_counter(pid, event.ns.saturating_add(1), bytes)?;
                } else {
                    self.memory_counter(pid, event.ns, bytes)?;
                }
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

    /// One sample of process `pid`'s `memory` counter: `bytes` live at `ns`.
    fn memory_counter(&mut self, pid: u32, ns: u64, bytes: u64) -> io::Result<()> {
        write!(
            self.buf,
            ",\n{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":{pid},\"tid\":0,\"ts\":"
        )?;
        self.ts(ns);
        self.buf.extend_from_slice(b",\"args\":{\"live_bytes\":");
        json::push_u64(&mut self.buf, bytes);
        self.buf.extend_from_slice(b"}}");
        self.spill()
    }

    /// One `C` event per counter sample, named after the counter, with its value after the
    /// sample in `args.value`, under its process's `pid` (one track per counter and process).
    /// Samples of one timestamp are all written; viewers keep the last, which is the value
    /// after them.
    pub(super) fn counters(&mut self, trace: &Trace) -> io::Result<()> {
        for track in &trace.counters {
            let pid = self.pid(track.process);
            let mut name = Vec::new();
            json::push_str(&mut name, track.name);
            for sample in &track.samples {
                write!(self.buf, ",\n{{\"ph\":\"C\",\"name\":")?;
                self.buf.extend_from_slice(&name);
                write!(self.buf, ",\"pid\":{pid},\"tid\":0,\"ts\":")?;
                self.ts(sample.ns);
                self.buf.extend_from_slice(b",\"args\":{\"value\":");
                push_number(&mut self.buf, sample.value);
                self.buf.extend_from_slice(b"}}");
                self.spill()?;
            }
        }
        Ok(())
    }

    /// One `i` event per instant: `"s":"t"` on its thread's track, `"s":"p"` process-wide,
    /// with its arguments.
    pub(super) fn instants(&mut self, trace: &Trace) -> io::Result<()> {
        for instant in &trace.instants {
            let pid = self.pid(instant.process);
            let scope = match instant.scope {
                InstantScope::Thread => 't',
                InstantScope::Process => 'p',
            };
            write!(
                self.buf,
                ",\n{{\"ph\":\"i\",\"s\":\"{scope}\",\"cat\":\"instant\",\"name\":"
            )?;
            self.name(instant.callsite);
            write!(
                self.buf,
                ",\"pid\":{pid},\"tid\":{},\"ts\":",
                instant.thread
            )?;
            self.ts(instant.ns);
            // Where it was recorded (a `tracing` event's source file, an `instant!`'s), after
            // its own arguments.
            let (file, line) = (instant.callsite.file(), instant.callsite.line());
            let source = !file.is_empty() && !file.starts_with('<');
            if !instant.args.is_empty() || source {
                self.buf.extend_from_slice(b",\"args\":{");
                for (i, (key, value)) in instant.args.iter().enumerate() {
                    if i > 0 {
                        self.buf.push(b',');
                    }
                    json::push_str(&mut self.buf, key);
                    self.buf.push(b':');
                    json::push_value(&mut self.buf, value);
                }
                if source {
                    if !instant.args.is_empty() {
                        self.buf.push(b',');
                    }
                    self.buf.extend_from_slice(b"\"file\":");
                    json::push_str(&mut self.buf, file);
                    write!(self.buf, ",\"line\":{line}")?;
                }
                self.buf.push(b'}');
            }
            self.buf.push(b'}');
            self.spill()?;
        }
        Ok(())
    }
}
