//! The encoder ([`Writer`]): output buffers, the trace walked track by track, sequences and
//! their incremental state, packets flushed in blocks.

use std::io::{self, Write};

use crate::record::hash::FxHashMap;

use super::fields::{
    BLOCK, CALLSITE_CACHE, CLOCK_BOOTTIME, CLOCK_INCREMENTAL, DESCRIPTOR_SEQUENCE,
    EVENT_TRACK_UUID, PACKET_CLOCK_SNAPSHOT, PACKET_DEFAULTS, PACKET_SEQUENCE_FLAGS,
    PACKET_SEQUENCE_ID, PACKET_TIMESTAMP, PACKET_TIMESTAMP_CLOCK_ID, SEQ_INCREMENTAL_STATE_CLEARED,
    SEQ_NEEDS_INCREMENTAL_STATE, TAIL, TRACE_PACKET,
};
use super::model::{CounterValue, Instant, SliceLinks, Unit};
use super::sequence::{CallLanes, Interner, Sequence};
use crate::decode::pieces::SpanSource;
use crate::export::proto::{bytes_field, varint_field};
use crate::export::trace_event::pids;
use crate::record::callsite::Callsite;
use crate::trace::{InstantScope, Number, SpanRef};

/// The encoder: output buffers, interning tables, and the numbering of tracks and sequences.
pub(super) struct Writer<'a, W: Write + ?Sized> {
    pub(super) out: &'a mut W,
    /// Whole packets, flushed in blocks.
    pub(super) buf: Vec<u8>,
    /// The packet being written.
    pub(super) packet: Vec<u8>,
    /// The `TrackEvent` being written.
    pub(super) event: Vec<u8>,
    /// The `InternedData` of the packet being written.
    pub(super) interned: Vec<u8>,
    /// A nested message being written.
    pub(super) scratch: Vec<u8>,
    pub(super) names: Interner,
    pub(super) categories: Interner,
    pub(super) annotations: Interner,
    /// Name iids by callsite (address).
    pub(super) callsite_names: FxHashMap<*const Callsite, u64>,
    /// The last (callsite address, name iid) seen in each slot, a slot per address hash: most
    /// lookups end here, without hashing a map.
    pub(super) callsite_cache: Box<[(usize, u64); CALLSITE_CACHE]>,
    /// Plain slice begins and ends are written by [`Writer::short_packet`] (`false` only in
    /// the tests that compare its bytes with the general path's).
    pub(super) shortcuts: bool,
    pub(super) next_sequence: u32,
    pub(super) next_uuid: u64,
    /// Whether it numbers new tracks and sequences (not when it writes a thread apart).
    pub(super) numbering: bool,
    /// Times as deltas on each sequence's incremental clock, tracks from its defaults.
    pub(super) delta: bool,
}

impl<'a, W: Write + ?Sized> Writer<'a, W> {
    pub(super) fn new(out: &'a mut W, delta: bool) -> Self {
        Self {
            out,
            buf: Vec::with_capacity(BLOCK + 1024),
            packet: Vec::new(),
            event: Vec::new(),
            interned: Vec::new(),
            scratch: Vec::new(),
            names: Interner::default(),
            categories: Interner::default(),
            annotations: Interner::default(),
            callsite_names: FxHashMap::default(),
            callsite_cache: Box::new([(0, 0); CALLSITE_CACHE]),
            shortcuts: true,
            next_sequence: DESCRIPTOR_SEQUENCE + 1,
            next_uuid: 1,
            numbering: true,
            delta,
        }
    }

    /// Everything of the trace of `source`.
    pub(super) fn trace(&mut self, source: &dyn SpanSource) -> io::Result<()> {
        let trace = source.trace();
        let pids = pids(&trace.processes);
        let hosts_differ = trace.hosts_differ();
        let mut process_tracks = Vec::with_capacity(trace.processes.len());
        for (process, &pid) in trace.processes.iter().zip(&pids) {
            let mut name = match process.name.as_str() {
                "" => "tickscope".to_owned(),
                name => name.to_owned(),
            };
            if hosts_differ && !process.host.is_empty() {
                name = format!("{}/{name}", process.host);
            }
            process_tracks.push(self.process_track(pid, &name)?);
        }
        // Flow ids (from 1) by slice: on the origin's begin, or ending at the follower's; and
        // PyTorch's link arguments, as the Chrome export writes them: an origin's sequence
        // number (its first link's), a follower's sequence number and forward thread (its last
        // link's), which win when a slice is both.
        let mut links: FxHashMap<SpanRef, SliceLinks> = FxHashMap::default();
        for (id, link) in (1..).zip(&trace.flows) {
            if let Some(origin) = link.origin {
                let origin = links.entry(origin).or_default();
                origin.flows.push((id, false));
                origin.args.get_or_insert((link.seq, None));
                links
                    .entry(link.follower)
                    .or_default()
                    .flows
                    .push((id, true));
            }
            links.entry(link.follower).or_default().args =
                Some((link.seq, Some(link.origin_thread)));
        }
        let mut flow_threads = vec![false; trace.threads.len()];
        for slice in links.keys() {
            if let Some(has) = flow_threads.get_mut(slice.thread as usize) {
                *has = true;
            }
        }
        // Every thread's track and first sequence, numbered in order before any is written: a
        // thread written apart ([`parts`]) numbers nothing.
        let mut thread_tracks: FxHashMap<(u32, u64), u64> = FxHashMap::default();
        let mut firsts = Vec::with_capacity(trace.threads.len());
        for thread in &trace.threads {
            let key = (thread.process, thread.id);
            let track = match thread_tracks.get(&key) {
                Some(&track) => track,
                None => {
                    let track = self.thread_track(
                        process_tracks[thread.process as usize],
                        pids[thread.process as usize],
                        thread.id,
                        &thread.display_name(),
                    )?;
                    thread_tracks.insert(key, track);
                    track
                }
            };
            firsts.push((track, self.sequence(track).id));
        }
        self.threads(source, &firsts, &links, &flow_threads)?;
        let mut lanes = CallLanes::default();
        self.async_calls(&trace.async_spans, &process_tracks, &mut lanes)?;
        // Of pieces, the calls matched as the threads are read again, in the order they began.
        source.each_streamed_call(&mut |_, call| {
            self.async_call(call, &process_tracks, &mut lanes)
        })?;
        if trace.memory.is_some() {
            let with_events = source.memory_processes();
            for (p, &parent) in (0..).zip(&process_tracks) {
                if !with_events.contains(&p) && trace.processes.len() > 1 {
                    continue;
                }
                // From 0 at the start, then one sample per time: the value after the last
                // event at that time; where the events of one time went higher than that (an
                // allocation freed within the nanosecond), their peak there and the value
                // after them 1 ns later, so that no viewer misses the peak (as in Chrome
                // JSON).
                let mut counter = self.counter_samples(parent, "memory", Unit::Bytes)?;
                // The time being read, the value after its events so far, and their peak.
                let mut at = (trace.start_ns, 0i64, 0i64);
                let mut flush = |w: &mut Self, (ns, value, peak): (u64, i64, i64)| {
                    if peak > value {
                        w.counter_sample(&mut counter, ns, CounterValue::Int(peak))?;
                        w.counter_sample(
                            &mut counter,
                            ns.saturating_add(1),
                            CounterValue::Int(value),
                        )
                    } else {
                        w.counter_sample(&mut counter, ns, CounterValue::Int(value))
                    }
                };
                source.each_memory_event(Some(p), &mut |event, bytes| {
                    let value = i64::try_from(bytes).unwrap_or(i64::MAX);
                    if event.ns == at.0 {
                        at = (at.0, value, at.2.max(value));
                    } else {
                        flush(self, at)?;
                        at = (event.ns, value, value);
                    }
                    Ok(())
                })?;
                flush(self, at)?;
            }
        }
        for counter in &trace.counters {
            let Some(&parent) = process_tracks.get(counter.process as usize) else {
                continue;
            };
            let samples: Vec<(u64, CounterValue)> = counter
                .samples
                .iter()
                .map(|sample| {
                    let value = match sample.value {
                        Number::Int(v) => CounterValue::Int(v),
                        Number::Float(v) => CounterValue::Float(v),
                    };
                    (sample.ns, value)
                })
                .collect();
            self.counter_track(parent, counter.name, Unit::Unspecified, &samples)?;
        }
        // Instants on their thread's track (one made for a thread without scopes) or their
        // process's, in time order on each.
        let mut by_track: Vec<(u64, Vec<Instant<'_>>)> = Vec::new();
        for instant in &trace.instants {
            let process = instant.process as usize;
            let track = match instant.scope {
                InstantScope::Process => match process_tracks.get(process) {
                    Some(&track) => track,
                    None => continue,
                },
                InstantScope::Thread => match thread_tracks.get(&(instant.process, instant.thread))
                {
                    Some(&track) => track,
                    None => {
                        let (Some(&parent), Some(&pid)) =
                            (process_tracks.get(process), pids.get(process))
                        else {
                            continue;
                        };
                        let track = self.thread_track(
                            parent,
                            pid,
                            instant.thread,
                            &format!("thread {}", instant.thread),
                        )?;
                        thread_tracks.insert((instant.process, instant.thread), track);
                        track
                    }
                },
            };
            let at = match by_track.iter().position(|(t, _)| *t == track) {
                Some(at) => at,
                None => {
                    by_track.push((track, Vec::new()));
                    by_track.len() - 1
                }
            };
            by_track[at].1.push(Instant {
                name: instant.name(),
                ns: instant.ns,
                args: &instant.args,
            });
        }
        for (track, instants) in &by_track {
            self.instants(*track, instants)?;
        }
        Ok(())
    }

    /// A new track uuid.
    pub(super) fn uuid(&mut self) -> u64 {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        uuid
    }

    /// A new sequence whose events go to `track`.
    pub(super) fn sequence(&mut self, track: u64) -> Sequence {
        let id = self.next_sequence;
        self.next_sequence = self.next_sequence.saturating_add(1);
        Sequence::new(id, track)
    }

    /// The first packet of `seq`: clears its incremental state, sets its defaults (its track,
    /// the incremental clock) and ties that clock to `BOOTTIME` at `ns`.
    pub(super) fn start_sequence(&mut self, seq: &mut Sequence, ns: u64) -> io::Result<()> {
        let mut packet = Vec::new();
        varint_field(&mut packet, PACKET_TIMESTAMP, ns);
        varint_field(&mut packet, PACKET_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME);
        varint_field(&mut packet, PACKET_SEQUENCE_ID, u64::from(seq.id));
        varint_field(
            &mut packet,
            PACKET_SEQUENCE_FLAGS,
            SEQ_INCREMENTAL_STATE_CLEARED,
        );
        // A sequence is started once, before its first event's packet (whose names are
        // already marked interned: they go in that packet).
        seq.last_ns = Some(ns);
        if !self.delta {
            self.packet = packet;
            return self.emit();
        }
        let mut track_defaults = Vec::new();
        varint_field(&mut track_defaults, EVENT_TRACK_UUID, seq.track);
        let mut defaults = Vec::new();
        varint_field(&mut defaults, 58, CLOCK_INCREMENTAL);
        bytes_field(&mut defaults, 11, &track_defaults);
        bytes_field(&mut packet, PACKET_DEFAULTS, &defaults);
        let mut snapshot = Vec::new();
        let mut clock = Vec::new();
        varint_field(&mut clock, 1, CLOCK_BOOTTIME);
        varint_field(&mut clock, 2, ns);
        bytes_field(&mut snapshot, 1, &clock);
        clock.clear();
        varint_field(&mut clock, 1, CLOCK_INCREMENTAL);
        varint_field(&mut clock, 2, ns);
        varint_field(&mut clock, 3, 1);
        bytes_field(&mut snapshot, 1, &clock);
        bytes_field(&mut packet, PACKET_CLOCK_SNAPSHOT, &snapshot);
        self.packet = packet;
        self.emit()
    }

    /// Appends `self.packet` as a `Trace.packet` and writes out a full block.
    pub(super) fn emit(&mut self) -> io::Result<()> {
        let len = self.packet.len();
        if len < 0x80 {
            self.buf
                .extend_from_slice(&[((TRACE_PACKET << 3) | 2) as u8, len as u8]);
            self.buf.extend_from_slice(&self.packet);
        } else {
            bytes_field(&mut self.buf, TRACE_PACKET, &self.packet);
        }
        if self.buf.len() >= BLOCK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes out what is buffered.
    pub(super) fn finish(mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

impl Sequence {
    /// Sequence `id`, whose events go to `track`, before its first packet.
    pub(super) fn new(id: u32, track: u64) -> Self {
        let mut tail = [0; TAIL];
        let mut tail_len = 0;
        put_varint(&mut tail, &mut tail_len, u64::from(PACKET_SEQUENCE_ID) << 3);
        put_varint(&mut tail, &mut tail_len, u64::from(id));
        put_varint(
            &mut tail,
            &mut tail_len,
            u64::from(PACKET_SEQUENCE_FLAGS) << 3,
        );
        put_varint(&mut tail, &mut tail_len, SEQ_NEEDS_INCREMENTAL_STATE);
        Sequence {
            id,
            track,
            last_ns: None,
            names: Vec::new(),
            categories: Vec::new(),
            annotations: Vec::new(),
            tail,
            tail_len,
        }
    }
}

/// Writes `value` as a varint at `packet[*at..]`, moving `at` past it.
pub(super) fn put_varint(packet: &mut [u8], at: &mut usize, mut value: u64) {
    while value >= 0x80 {
        packet[*at] = (value as u8) | 0x80;
        value >>= 7;
        *at += 1;
    }
    packet[*at] = value as u8;
    *at += 1;
}
