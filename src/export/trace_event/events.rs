//! What is not a thread's slice: async calls, memory, counters and instants.

use crate::record::hash::FxHashMap;
use std::collections::BTreeSet;
use std::io::{self, Write};

use super::writer::{Writer, push_number};
use crate::export::json;
use crate::trace::{AsyncSpan, InstantScope, MemoryKind, MemoryTrace, Trace};

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
    /// `instants` one instant per event. A process gets a counter when it has events (the
    /// process of a trace of one always does).
    pub(super) fn memory(
        &mut self,
        trace: &Trace,
        memory: &MemoryTrace,
        instants: bool,
    ) -> io::Result<()> {
        let live = memory.live_bytes();
        let counter = |w: &mut Self, pid: u32, ns: u64, bytes: u64| {
            write!(
                w.buf,
                ",\n{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":{pid},\"tid\":0,\"ts\":"
            )?;
            w.ts(ns);
            w.buf.extend_from_slice(b",\"args\":{\"live_bytes\":");
            json::push_u64(&mut w.buf, bytes);
            w.buf.extend_from_slice(b"}}");
            w.spill()
        };
        // One sample per process and timestamp: the value after its last event there; where
        // the events of one timestamp went higher than that (an allocation freed within the
        // nanosecond), their peak there and the value after them 1 ns later, so that no
        // viewer misses the peak.
        let mut sample = vec![false; memory.events.len()];
        let mut next: FxHashMap<u32, u64> = FxHashMap::default();
        for (i, event) in memory.events.iter().enumerate().rev() {
            sample[i] = next.insert(event.process, event.ns) != Some(event.ns);
        }
        // Per process: the timestamp of its events being read and their peak so far.
        let mut peaks: FxHashMap<u32, (u64, u64)> = FxHashMap::default();
        let mut counted: BTreeSet<u32> = memory.events.iter().map(|e| e.process).collect();
        if trace.processes.len() == 1 {
            counted.insert(0);
        }
        for process in counted {
            counter(self, self.pid(process), trace.start_ns, 0)?;
        }
        for (i, (event, &bytes)) in memory.events.iter().zip(&live).enumerate() {
            let pid = self.pid(event.process);
            let peak = match peaks.get_mut(&event.process) {
                Some((ns, peak)) if *ns == event.ns => {
                    *peak = (*peak).max(bytes);
                    *peak
                }
                _ => {
                    peaks.insert(event.process, (event.ns, bytes));
                    bytes
                }
            };
            if sample[i] {
                if peak > bytes {
                    counter(self, pid, event.ns, peak)?;
                    counter(self, pid, event.ns.saturating_add(1), bytes)?;
                } else {
                    counter(self, pid, event.ns, bytes)?;
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
