//! The messages of Perfetto's `protos/perfetto/trace/` (`trace.proto`, `trace_packet.proto`,
//! `track_event/*.proto`, `interned_data/*.proto`, `clock_snapshot.proto`,
//! `trace_packet_defaults.proto`), only the fields tickscope writes, as prost messages: the
//! independent decoder of `tests/mock/perfetto.rs` and the prost encoder that
//! `benches/export.rs` measures against tickscope's own. A module of `tests/common`, and
//! included by the bench with `#[path]`.
// Each user reads part of them.
#![allow(dead_code)]

use prost::Message;

#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(uint32, tag = "10")]
    pub trusted_packet_sequence_id: u32,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(uint32, tag = "13")]
    pub sequence_flags: u32,
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TracePacketDefaults {
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event_defaults: Option<TrackEventDefaults>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TrackEventDefaults {
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Clock {
    #[prost(uint32, tag = "1")]
    pub clock_id: u32,
    #[prost(uint64, tag = "2")]
    pub timestamp: u64,
    #[prost(bool, tag = "3")]
    pub is_incremental: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct DebugAnnotation {
    #[prost(uint64, tag = "1")]
    pub name_iid: u64,
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(double, optional, tag = "5")]
    pub double_value: Option<f64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct InternedData {
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<Interned>,
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<Interned>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<Interned>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Interned {
    #[prost(uint64, tag = "1")]
    pub iid: u64,
    #[prost(string, tag = "2")]
    pub name: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    #[prost(uint64, tag = "1")]
    pub uuid: u64,
    #[prost(uint64, tag = "5")]
    pub parent_uuid: u64,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ProcessDescriptor {
    #[prost(int32, tag = "1")]
    pub pid: i32,
    #[prost(string, tag = "6")]
    pub process_name: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct ThreadDescriptor {
    #[prost(int32, tag = "1")]
    pub pid: i32,
    #[prost(int64, tag = "2")]
    pub tid: i64,
    #[prost(string, tag = "5")]
    pub thread_name: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct CounterDescriptor {
    #[prost(int32, tag = "3")]
    pub unit: i32,
}

/// The same packets as `tickscope::export::perfetto::write` (default options) for a trace of
/// one process whose threads' scopes all nest in their parents and have no arguments, flows
/// or categories (the export bench's trace), built as the messages above and encoded by prost
/// into `out`, streamed in blocks of 64 KiB as tickscope's writer does. The export bench
/// measures it beside tickscope's own encoder; `tests/mock/perfetto.rs` checks that both decode to
/// the same packets.
///
/// # Panics
///
/// On a trace it does not cover (more than one process, scopes with arguments, polls, links,
/// async calls, counters, memory or instants), or when `out` fails.
pub fn write_with_prost(trace: &tickscope::trace::Trace, out: &mut impl std::io::Write) {
    use rustc_hash::FxHashMap;

    const BLOCK: usize = 64 * 1024;
    assert!(
        trace.processes.len() == 1
            && trace.flows.is_empty()
            && trace.async_spans.is_empty()
            && trace.memory.is_none()
            && trace.counters.is_empty()
            && trace.instants.is_empty(),
        "only plain scopes of one process"
    );
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK + 1024);
    let mut emit = |buf: &mut Vec<u8>, packet: &TracePacket| {
        prost::encoding::message::encode(1, packet, buf);
        if buf.len() >= BLOCK {
            out.write_all(buf).unwrap();
            buf.clear();
        }
    };
    let process = &trace.processes[0];
    let pid = process.id as i32;
    let process_name = match process.name.as_str() {
        "" => "tickscope".to_owned(),
        name => name.to_owned(),
    };
    let process_uuid = 1;
    emit(
        &mut buf,
        &TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: process_uuid,
                process: Some(ProcessDescriptor { pid, process_name }),
                ..Default::default()
            }),
            trusted_packet_sequence_id: 1,
            ..Default::default()
        },
    );
    // Name iids from 1, by name and (the same) by callsite address, shared by all sequences.
    let mut names: FxHashMap<&str, u64> = FxHashMap::default();
    let mut iids: FxHashMap<*const tickscope::Callsite, u64> = FxHashMap::default();
    // Thread k: track uuid k + 2, sequence k + 2 (sequence 1 holds the descriptors).
    for (k, thread) in (0u32..).zip(&trace.threads) {
        assert!(thread.args.is_empty(), "scopes without arguments only");
        let track = process_uuid + 1 + u64::from(k);
        let sequence = 2 + k;
        emit(
            &mut buf,
            &TracePacket {
                track_descriptor: Some(TrackDescriptor {
                    uuid: track,
                    parent_uuid: process_uuid,
                    thread: Some(ThreadDescriptor {
                        pid,
                        tid: thread.id as i64,
                        thread_name: thread.display_name(),
                    }),
                    ..Default::default()
                }),
                trusted_packet_sequence_id: 1,
                ..Default::default()
            },
        );
        let mut last: Option<u64> = None;
        let mut interned: Vec<bool> = Vec::new();
        let mut stack: Vec<u32> = Vec::new();
        // One slice begin (with its name's iid, interned on first use) or end.
        let mut event = |buf: &mut Vec<u8>, ns: u64, name: Option<(u64, &str)>| {
            let delta = match last {
                Some(last) => ns - last,
                None => {
                    let clock = |clock_id, is_incremental| Clock {
                        clock_id,
                        timestamp: ns,
                        is_incremental,
                    };
                    emit(
                        buf,
                        &TracePacket {
                            timestamp: Some(ns),
                            timestamp_clock_id: Some(6),
                            trusted_packet_sequence_id: sequence,
                            sequence_flags: 1,
                            trace_packet_defaults: Some(TracePacketDefaults {
                                timestamp_clock_id: Some(64),
                                track_event_defaults: Some(TrackEventDefaults {
                                    track_uuid: Some(track),
                                }),
                            }),
                            clock_snapshot: Some(ClockSnapshot {
                                clocks: vec![clock(6, false), clock(64, true)],
                            }),
                            ..Default::default()
                        },
                    );
                    0
                }
            };
            last = Some(ns);
            let mut interned_data = None;
            if let Some((iid, name)) = name {
                if interned.len() <= iid as usize {
                    interned.resize(iid as usize + 1, false);
                }
                if !std::mem::replace(&mut interned[iid as usize], true) {
                    interned_data = Some(InternedData {
                        event_names: vec![Interned {
                            iid,
                            name: name.to_owned(),
                        }],
                        ..Default::default()
                    });
                }
            }
            emit(
                buf,
                &TracePacket {
                    timestamp: Some(delta),
                    track_event: Some(TrackEvent {
                        r#type: Some(if name.is_some() { 1 } else { 2 }),
                        name_iid: name.map(|(iid, _)| iid),
                        ..Default::default()
                    }),
                    interned_data,
                    trusted_packet_sequence_id: sequence,
                    sequence_flags: 2,
                    ..Default::default()
                },
            );
        };
        for (index, span) in (0..).zip(&thread.spans) {
            assert!(
                span.kind == tickscope::trace::SpanKind::Scope,
                "scopes only, no polls"
            );
            while let Some(&top) = stack.last() {
                if Some(top) == span.parent {
                    break;
                }
                stack.pop();
                event(&mut buf, thread.spans[top as usize].end_ns, None);
            }
            stack.push(index);
            let iid = *iids
                .entry(std::ptr::from_ref(span.callsite))
                .or_insert_with(|| {
                    let next = names.len() as u64 + 1;
                    *names.entry(span.callsite.name()).or_insert(next)
                });
            event(&mut buf, span.start_ns, Some((iid, span.callsite.name())));
        }
        while let Some(top) = stack.pop() {
            event(&mut buf, thread.spans[top as usize].end_ns, None);
        }
    }
    out.write_all(&buf).unwrap();
}
