//! Track event packets: the short path of plain slices and the general one (annotations,
//! flows, counters).

use std::io::{self, Write};

use super::fields::{
    BLOCK, CLOCK_BOOTTIME, EVENT_DEBUG_ANNOTATIONS, EVENT_NAME_IID, EVENT_TRACK_UUID, EVENT_TYPE,
    INTERNED_ANNOTATION_NAMES, PACKET_INTERNED_DATA, PACKET_SEQUENCE_FLAGS, PACKET_SEQUENCE_ID,
    PACKET_TIMESTAMP, PACKET_TIMESTAMP_CLOCK_ID, PACKET_TRACK_EVENT, SEQ_NEEDS_INCREMENTAL_STATE,
    SHORT_PACKET, TAIL, TRACE_PACKET, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};
use super::sequence::{Sequence, known};
use super::writer::{Writer, put_varint};
use crate::export::proto::{bytes_field, fixed64_field, int_field, varint_field};
use crate::trace::Value;

impl<'a, W: Write + ?Sized> Writer<'a, W> {
    /// Appends the packet of a plain slice begin (`name`: its interned name) or end (`None`)
    /// at `ns`, `delta` after the last packet of `seq` (which has started), in one piece:
    /// the same bytes as [`begin_callsite`](Self::begin_callsite) or [`end`](Self::end)
    /// write for it, without building the event and packet apart.
    #[inline(always)]
    pub(super) fn short_packet(
        &mut self,
        seq: &mut Sequence,
        delta: u64,
        ns: u64,
        name: Option<u64>,
    ) -> io::Result<()> {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; SHORT_PACKET]);
        let Some(packet) = self.buf.get_mut(start..start + SHORT_PACKET) else {
            unreachable!("{SHORT_PACKET} bytes were just appended");
        };
        packet[0] = ((TRACE_PACKET << 3) | 2) as u8;
        packet[2] = (PACKET_TIMESTAMP << 3) as u8;
        let mut at = 3;
        put_varint(packet, &mut at, delta);
        packet[at] = ((PACKET_TRACK_EVENT << 3) | 2) as u8;
        let event = at + 1;
        packet[event + 1] = (EVENT_TYPE << 3) as u8;
        at = event + 3;
        match name {
            Some(iid) => {
                packet[event + 2] = TYPE_SLICE_BEGIN as u8;
                packet[at] = (EVENT_NAME_IID << 3) as u8;
                at += 1;
                put_varint(packet, &mut at, iid);
            }
            None => packet[event + 2] = TYPE_SLICE_END as u8,
        }
        packet[event] = (at - event - 1) as u8;
        packet[at..at + TAIL].copy_from_slice(&seq.tail);
        at += seq.tail_len;
        // At most 3 + 10 + 4 + 11 + TAIL bytes: both lengths fit one byte.
        packet[1] = (at - 2) as u8;
        self.buf.truncate(start + at);
        seq.last_ns = Some(ns);
        if self.buf.len() >= BLOCK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A slice end.
    pub(super) fn end(&mut self, seq: &mut Sequence, ns: u64) -> io::Result<()> {
        self.event.clear();
        self.interned.clear();
        self.event
            .extend_from_slice(&[(EVENT_TYPE << 3) as u8, TYPE_SLICE_END as u8]);
        self.track_event(seq, ns)
    }

    /// Adds a debug annotation `key` = `value` to the event, interning `key` on `seq` first
    /// if needed.
    pub(super) fn annotation(&mut self, seq: &mut Sequence, key: &str, value: &Value) {
        let iid = self.annotations.id(key);
        if !known(&mut seq.annotations, iid) {
            self.scratch.clear();
            int_field(&mut self.scratch, 1, iid);
            bytes_field(&mut self.scratch, 2, key.as_bytes());
            bytes_field(&mut self.interned, INTERNED_ANNOTATION_NAMES, &self.scratch);
        }
        self.scratch.clear();
        int_field(&mut self.scratch, 1, iid);
        match value {
            Value::Bool(v) => varint_field(&mut self.scratch, 2, u64::from(*v)),
            Value::U64(v) => varint_field(&mut self.scratch, 3, *v),
            Value::I64(v) => varint_field(&mut self.scratch, 4, *v as u64),
            Value::F64(v) => fixed64_field(&mut self.scratch, 5, v.to_bits()),
            Value::Str(v) => bytes_field(&mut self.scratch, 6, v.as_bytes()),
        }
        bytes_field(&mut self.event, EVENT_DEBUG_ANNOTATIONS, &self.scratch);
    }

    /// Writes the packet of the event in `self.event` (with the interned data in
    /// `self.interned`) at `ns` on `seq`, starting the sequence first if this is its first.
    pub(super) fn track_event(&mut self, seq: &mut Sequence, ns: u64) -> io::Result<()> {
        let last = match seq.last_ns {
            Some(last) => last,
            None => {
                self.start_sequence(seq, ns)?;
                ns
            }
        };
        if self.delta && ns >= last && self.interned.is_empty() && self.event.len() < 64 {
            // The common packet, built on the stack and appended in one piece: a time delta,
            // the event, the sequence and its flags.
            let mut packet = [0u8; 96];
            let mut at = 2;
            put_varint(&mut packet, &mut at, u64::from(PACKET_TIMESTAMP) << 3);
            put_varint(&mut packet, &mut at, ns - last);
            put_varint(
                &mut packet,
                &mut at,
                (u64::from(PACKET_TRACK_EVENT) << 3) | 2,
            );
            put_varint(&mut packet, &mut at, self.event.len() as u64);
            packet[at..at + self.event.len()].copy_from_slice(&self.event);
            at += self.event.len();
            put_varint(&mut packet, &mut at, u64::from(PACKET_SEQUENCE_ID) << 3);
            put_varint(&mut packet, &mut at, u64::from(seq.id));
            put_varint(&mut packet, &mut at, u64::from(PACKET_SEQUENCE_FLAGS) << 3);
            put_varint(&mut packet, &mut at, SEQ_NEEDS_INCREMENTAL_STATE);
            // At most 11 + 2 + 63 + 6 + 2 bytes after the header: the length fits one byte.
            packet[0] = ((TRACE_PACKET << 3) | 2) as u8;
            packet[1] = (at - 2) as u8;
            seq.last_ns = Some(ns);
            self.buf.extend_from_slice(&packet[..at]);
            if self.buf.len() >= BLOCK {
                self.out.write_all(&self.buf)?;
                self.buf.clear();
            }
            return Ok(());
        }
        self.packet.clear();
        if !self.delta {
            varint_field(&mut self.event, EVENT_TRACK_UUID, seq.track);
            varint_field(&mut self.packet, PACKET_TIMESTAMP, ns);
        } else if ns >= last {
            varint_field(&mut self.packet, PACKET_TIMESTAMP, ns - last);
            seq.last_ns = Some(ns);
        } else {
            // Earlier than the sequence's last packet (only a forged capture gets here): an
            // absolute time, which leaves the incremental clock where it was.
            varint_field(&mut self.packet, PACKET_TIMESTAMP, ns);
            varint_field(&mut self.packet, PACKET_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME);
        }
        bytes_field(&mut self.packet, PACKET_TRACK_EVENT, &self.event);
        if !self.interned.is_empty() {
            bytes_field(&mut self.packet, PACKET_INTERNED_DATA, &self.interned);
        }
        varint_field(&mut self.packet, PACKET_SEQUENCE_ID, u64::from(seq.id));
        varint_field(
            &mut self.packet,
            PACKET_SEQUENCE_FLAGS,
            SEQ_NEEDS_INCREMENTAL_STATE,
        );
        self.emit()
    }
}
