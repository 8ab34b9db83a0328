//! Tracks: descriptors of processes, threads and named tracks; async calls, counters and
//! instants on tracks of their own.

use std::io::{self, Write};

use super::fields::{
    DESCRIPTOR_SEQUENCE, EVENT_COUNTER_VALUE, EVENT_DOUBLE_COUNTER_VALUE, EVENT_TYPE,
    PACKET_SEQUENCE_ID, PACKET_TRACK_DESCRIPTOR, TYPE_COUNTER, TYPE_INSTANT,
};
use super::model::{CounterValue, Instant, Unit};
use super::sequence::{CallLanes, Sequence};
use super::writer::Writer;
use crate::export::proto::{bytes_field, fixed64_field, int_field, varint_field};
use crate::trace::{AsyncSpan, Value};

/// A counter track whose samples are being written ([`Writer::counter_samples`]).
pub(crate) struct CounterTrack {
    /// Its uuid.
    track: u64,
    seq: Sequence,
}

impl<'a, W: Write + ?Sized> Writer<'a, W> {
    /// Writes a track descriptor packet whose `TrackDescriptor` fields `self.scratch` holds.
    fn descriptor(&mut self) -> io::Result<()> {
        self.packet.clear();
        bytes_field(&mut self.packet, PACKET_TRACK_DESCRIPTOR, &self.scratch);
        int_field(
            &mut self.packet,
            PACKET_SEQUENCE_ID,
            u64::from(DESCRIPTOR_SEQUENCE),
        );
        self.emit()
    }

    /// A process track: its uuid.
    pub(super) fn process_track(&mut self, pid: u32, name: &str) -> io::Result<u64> {
        let uuid = self.uuid();
        let mut process = Vec::new();
        varint_field(&mut process, 1, i64::from(pid as i32) as u64);
        bytes_field(&mut process, 6, name.as_bytes());
        self.scratch.clear();
        int_field(&mut self.scratch, 1, uuid);
        bytes_field(&mut self.scratch, 3, &process);
        self.descriptor()?;
        Ok(uuid)
    }

    /// A thread track of the process whose track is `parent`: its uuid.
    pub(super) fn thread_track(
        &mut self,
        parent: u64,
        pid: u32,
        tid: u64,
        name: &str,
    ) -> io::Result<u64> {
        let uuid = self.uuid();
        let mut thread = Vec::new();
        varint_field(&mut thread, 1, i64::from(pid as i32) as u64);
        varint_field(&mut thread, 2, tid);
        bytes_field(&mut thread, 5, name.as_bytes());
        self.scratch.clear();
        int_field(&mut self.scratch, 1, uuid);
        int_field(&mut self.scratch, 5, parent);
        bytes_field(&mut self.scratch, 4, &thread);
        self.descriptor()?;
        Ok(uuid)
    }

    /// A named track under `parent` (a process or thread track), with a counter descriptor
    /// when `counter` is given: its uuid.
    pub(super) fn named_track(
        &mut self,
        parent: u64,
        name: &str,
        counter: Option<Unit>,
    ) -> io::Result<u64> {
        let uuid = self.uuid();
        self.scratch.clear();
        int_field(&mut self.scratch, 1, uuid);
        int_field(&mut self.scratch, 5, parent);
        bytes_field(&mut self.scratch, 2, name.as_bytes());
        if let Some(unit) = counter {
            let mut descriptor = Vec::new();
            int_field(&mut descriptor, 3, unit as u64);
            bytes_field(&mut self.scratch, 8, &descriptor);
        }
        self.descriptor()?;
        Ok(uuid)
    }

    /// The async calls, on tracks of their process named after their function: a call goes
    /// to the first such track whose last call ended by its start.
    pub(super) fn async_calls(
        &mut self,
        calls: &[AsyncSpan],
        process_tracks: &[u64],
        lanes: &mut CallLanes,
    ) -> io::Result<()> {
        let mut order: Vec<&AsyncSpan> = calls.iter().collect();
        order.sort_by_key(|c| c.start_ns);
        for call in order {
            self.async_call(call, process_tracks, lanes)?;
        }
        Ok(())
    }

    /// One async call of [`Writer::async_calls`], after those begun before it, on the first
    /// of `lanes` free at its start.
    pub(super) fn async_call(
        &mut self,
        call: &AsyncSpan,
        process_tracks: &[u64],
        tracks: &mut CallLanes,
    ) -> io::Result<()> {
        let key = (call.process, std::ptr::from_ref(call.callsite));
        let lanes = tracks.entry(key).or_default();
        let lane = match lanes.iter().position(|(_, end)| *end <= call.start_ns) {
            Some(lane) => lane,
            None => {
                let parent = process_tracks
                    .get(call.process as usize)
                    .copied()
                    .unwrap_or(0);
                let track = self.named_track(parent, call.name(), None)?;
                lanes.push((self.sequence(track), 0));
                lanes.len() - 1
            }
        };
        let (seq, end) = &mut lanes[lane];
        *end = call.end_ns;
        self.begin_callsite(
            seq,
            call.start_ns,
            call.callsite,
            Some("async"),
            |w, seq| {
                w.annotation(seq, "polls", &Value::U64(u64::from(call.polls)));
                w.annotation(seq, "busy_ns", &Value::U64(call.busy_ns));
                w.annotation(seq, "self_ns", &Value::U64(call.self_ns));
                if call.open_at_stop {
                    w.annotation(seq, "open_at_stop", &Value::Bool(true));
                }
                if call.cut_at_start {
                    w.annotation(seq, "cut_at_start", &Value::Bool(true));
                }
            },
        )?;
        self.end(seq, call.end_ns)
    }

    /// A counter track named `name` under `parent` (a process or thread track) with
    /// `samples` (time in Unix ns, value), in time order: its uuid.
    pub(crate) fn counter_track(
        &mut self,
        parent: u64,
        name: &str,
        unit: Unit,
        samples: &[(u64, CounterValue)],
    ) -> io::Result<u64> {
        let mut counter = self.counter_samples(parent, name, unit)?;
        for &(ns, value) in samples {
            self.counter_sample(&mut counter, ns, value)?;
        }
        Ok(counter.track)
    }

    /// A counter track named `name` under `parent` (a process or thread track), its samples
    /// to come ([`Writer::counter_sample`]).
    pub(crate) fn counter_samples(
        &mut self,
        parent: u64,
        name: &str,
        unit: Unit,
    ) -> io::Result<CounterTrack> {
        let track = self.named_track(parent, name, Some(unit))?;
        let seq = self.sequence(track);
        Ok(CounterTrack { track, seq })
    }

    /// The next sample of `counter` (in time order): `value` from `ns` (Unix ns) on.
    pub(crate) fn counter_sample(
        &mut self,
        counter: &mut CounterTrack,
        ns: u64,
        value: CounterValue,
    ) -> io::Result<()> {
        self.event.clear();
        varint_field(&mut self.event, EVENT_TYPE, TYPE_COUNTER);
        match value {
            CounterValue::Int(v) => varint_field(&mut self.event, EVENT_COUNTER_VALUE, v as u64),
            CounterValue::Float(v) => {
                fixed64_field(&mut self.event, EVENT_DOUBLE_COUNTER_VALUE, v.to_bits());
            }
        }
        self.interned.clear();
        self.track_event(&mut counter.seq, ns)
    }

    /// Instant events on track `track` (a thread, process or any other track), in time order.
    pub(crate) fn instants(&mut self, track: u64, instants: &[Instant<'_>]) -> io::Result<()> {
        let mut seq = self.sequence(track);
        for instant in instants {
            self.event.clear();
            self.interned.clear();
            varint_field(&mut self.event, EVENT_TYPE, TYPE_INSTANT);
            let iid = self.names.id(instant.name);
            self.name_iid(&mut seq, iid);
            for (key, value) in instant.args {
                self.annotation(&mut seq, key, value);
            }
            self.track_event(&mut seq, instant.ns)?;
        }
        Ok(())
    }
}
