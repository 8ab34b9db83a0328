//! Perfetto traces decoded back field by field: counters, instants, delta and absolute
//! times, and the short path's bytes against the general one's.

use super::fields::{
    CLOCK_BOOTTIME, EVENT_COUNTER_VALUE, EVENT_DEBUG_ANNOTATIONS, EVENT_DOUBLE_COUNTER_VALUE,
    EVENT_NAME_IID, EVENT_TRACK_UUID, EVENT_TYPE, INTERNED_NAMES, PACKET_DEFAULTS,
    PACKET_INTERNED_DATA, PACKET_SEQUENCE_FLAGS, PACKET_SEQUENCE_ID, PACKET_TIMESTAMP,
    PACKET_TIMESTAMP_CLOCK_ID, PACKET_TRACK_DESCRIPTOR, PACKET_TRACK_EVENT,
    SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE, TRACE_PACKET, TYPE_COUNTER,
    TYPE_INSTANT,
};
use super::model::{CounterValue, Instant, Unit};
use super::writer::Writer;
use crate::export::lanes::Lanes;
use crate::record::callsite::Callsite;
use crate::trace::{InstantScope, Number, Span, SpanArg, SpanKind, SpanRef, Trace, Value};

use super::*;

/// A protobuf message as (field, wire value) pairs: varints and fixed64s as numbers,
/// length-delimited fields as bytes.
#[derive(Debug, Clone, PartialEq)]
enum Wire {
    Int(u64),
    Bytes(Vec<u8>),
}

fn read_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let b = bytes[*at];
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return value;
        }
        shift += 7;
    }
}

fn fields(bytes: &[u8]) -> Vec<(u32, Wire)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let key = read_varint(bytes, &mut at);
        let field = (key >> 3) as u32;
        let wire = match key & 7 {
            0 => Wire::Int(read_varint(bytes, &mut at)),
            1 => {
                let v = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
                at += 8;
                Wire::Int(v)
            }
            2 => {
                let len = read_varint(bytes, &mut at) as usize;
                at += len;
                Wire::Bytes(bytes[at - len..at].to_vec())
            }
            other => panic!("wire type {other}"),
        };
        out.push((field, wire));
    }
    out
}

fn get(message: &[(u32, Wire)], field: u32) -> Option<&Wire> {
    message.iter().find(|(f, _)| *f == field).map(|(_, w)| w)
}

fn int(message: &[(u32, Wire)], field: u32) -> Option<u64> {
    match get(message, field)? {
        Wire::Int(v) => Some(*v),
        Wire::Bytes(_) => panic!("field {field} is bytes"),
    }
}

fn sub(message: &[(u32, Wire)], field: u32) -> Vec<(u32, Wire)> {
    match get(message, field) {
        Some(Wire::Bytes(b)) => fields(b),
        other => panic!("field {field}: {other:?}"),
    }
}

/// The packets of a trace.
fn packets(bytes: &[u8]) -> Vec<Vec<(u32, Wire)>> {
    fields(bytes)
        .into_iter()
        .map(|(field, wire)| {
            assert_eq!(field, TRACE_PACKET);
            match wire {
                Wire::Bytes(b) => fields(&b),
                Wire::Int(_) => panic!("a packet is a message"),
            }
        })
        .collect()
}

/// A decoded message: its fields in order.
type Fields = Vec<(u32, Wire)>;

/// Track events of `bytes` replayed on their sequence's incremental clock:
/// (absolute time, track, event fields).
fn replay(bytes: &[u8]) -> Vec<(u64, u64, Fields)> {
    let mut clocks: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut out = Vec::new();
    for p in packets(bytes) {
        let seq = int(&p, PACKET_SEQUENCE_ID).unwrap();
        if int(&p, PACKET_SEQUENCE_FLAGS) == Some(SEQ_INCREMENTAL_STATE_CLEARED) {
            let defaults = sub(&p, PACKET_DEFAULTS);
            let track = int(&sub(&defaults, 11), EVENT_TRACK_UUID).unwrap();
            clocks.insert(seq, (int(&p, PACKET_TIMESTAMP).unwrap(), track));
            continue;
        }
        if get(&p, PACKET_TRACK_EVENT).is_none() {
            continue;
        }
        assert_eq!(
            int(&p, PACKET_SEQUENCE_FLAGS),
            Some(SEQ_NEEDS_INCREMENTAL_STATE)
        );
        let (last, track) = clocks.get_mut(&seq).expect("sequence started");
        *last += int(&p, PACKET_TIMESTAMP).unwrap();
        out.push((*last, *track, sub(&p, PACKET_TRACK_EVENT)));
    }
    out
}

use std::collections::HashMap;

#[test]
fn counter_tracks_and_instants_from_plain_data() {
    // Unix-epoch magnitudes, odd nanoseconds: a double would round these.
    let t0 = 1_763_900_000_123_456_789u64;
    let mut bytes = Vec::new();
    let mut w = Writer::new(&mut bytes, true);
    let process = w.process_track(42, "server").unwrap();
    let thread = w.thread_track(process, 42, 7, "worker").unwrap();
    let depth = w
        .counter_track(
            process,
            "queue_depth",
            Unit::Unspecified,
            &[
                (t0, CounterValue::Int(3)),
                (t0 + 1, CounterValue::Int(-2)),
                (t0 + 1000, CounterValue::Float(2.5)),
            ],
        )
        .unwrap();
    let args = [("key", Value::U64(9)), ("hit", Value::Bool(false))];
    w.instants(
        thread,
        &[
            Instant {
                name: "cache_miss",
                ns: t0 + 5,
                args: &args,
            },
            Instant {
                name: "cache_miss",
                ns: t0 + 5,
                args: &[],
            },
        ],
    )
    .unwrap();
    w.finish().unwrap();

    // The counter track's descriptor: a counter under the process.
    let descriptors: Vec<Vec<(u32, Wire)>> = packets(&bytes)
        .iter()
        .filter(|p| get(p, PACKET_TRACK_DESCRIPTOR).is_some())
        .map(|p| sub(p, PACKET_TRACK_DESCRIPTOR))
        .collect();
    assert_eq!(descriptors.len(), 3);
    let counter = &descriptors[2];
    assert_eq!(int(counter, 1), Some(depth));
    assert_eq!(int(counter, 5), Some(process));
    assert_eq!(get(counter, 2), Some(&Wire::Bytes(b"queue_depth".to_vec())));
    assert!(get(counter, 8).is_some());

    let events = replay(&bytes);
    assert_eq!(events.len(), 5);
    let samples: Vec<(u64, u64, Option<u64>, Option<u64>)> = events[..3]
        .iter()
        .map(|(ts, track, e)| {
            assert_eq!(int(e, EVENT_TYPE), Some(TYPE_COUNTER));
            (
                *ts,
                *track,
                int(e, EVENT_COUNTER_VALUE),
                int(e, EVENT_DOUBLE_COUNTER_VALUE),
            )
        })
        .collect();
    assert_eq!(
        samples,
        [
            (t0, depth, Some(3), None),
            (t0 + 1, depth, Some(-2i64 as u64), None),
            (t0 + 1000, depth, None, Some(2.5f64.to_bits())),
        ]
    );
    // The instants: on the thread's track, the name interned once on their sequence.
    for (ts, track, e) in &events[3..] {
        assert_eq!((*ts, *track), (t0 + 5, thread));
        assert_eq!(int(e, EVENT_TYPE), Some(TYPE_INSTANT));
        assert_eq!(int(e, EVENT_NAME_IID), Some(1));
    }
    let annotations: Vec<Vec<(u32, Wire)>> = events[3]
        .2
        .iter()
        .filter(|(f, _)| *f == EVENT_DEBUG_ANNOTATIONS)
        .map(|(_, w)| match w {
            Wire::Bytes(b) => fields(b),
            Wire::Int(_) => panic!(),
        })
        .collect();
    assert_eq!(
        annotations,
        [
            vec![(1, Wire::Int(1)), (3, Wire::Int(9))],
            vec![(1, Wire::Int(2)), (2, Wire::Int(0))],
        ]
    );
    assert!(get(&events[4].2, EVENT_DEBUG_ANNOTATIONS).is_none());
    let interned: Vec<Vec<(u32, Wire)>> = packets(&bytes)
        .iter()
        .filter(|p| get(p, PACKET_INTERNED_DATA).is_some())
        .map(|p| sub(p, PACKET_INTERNED_DATA))
        .collect();
    assert_eq!(
        interned.len(),
        1,
        "interned once, in the first instant's packet: {interned:?}"
    );
    assert_eq!(
        fields(match get(&interned[0], INTERNED_NAMES).unwrap() {
            Wire::Bytes(b) => b,
            Wire::Int(_) => panic!(),
        }),
        [(1, Wire::Int(1)), (2, Wire::Bytes(b"cache_miss".to_vec()))]
    );
}

#[test]
fn an_earlier_time_is_written_absolute() {
    let mut bytes = Vec::new();
    let mut w = Writer::new(&mut bytes, true);
    let process = w.process_track(1, "p").unwrap();
    w.counter_track(
        process,
        "c",
        Unit::Bytes,
        &[(100, CounterValue::Int(1)), (50, CounterValue::Int(2))],
    )
    .unwrap();
    w.finish().unwrap();
    let last = packets(&bytes).pop().unwrap();
    assert_eq!(int(&last, PACKET_TIMESTAMP), Some(50));
    assert_eq!(int(&last, PACKET_TIMESTAMP_CLOCK_ID), Some(CLOCK_BOOTTIME));
}

/// The bytes of `trace` as `write_with` writes them with `delta`, and as the general
/// path alone writes them (without [`Writer::short_packet`]).
fn both_ways(trace: &Trace, delta: bool) -> (Vec<u8>, Vec<u8>) {
    let mut fast = Vec::new();
    write_with(trace, &mut fast, Options::new().delta_times(delta)).unwrap();
    let mut general = Vec::new();
    let mut w = Writer::new(&mut general, delta);
    w.shortcuts = false;
    w.trace(trace).unwrap();
    w.finish().unwrap();
    (fast, general)
}

/// A trace of every kind of span edge the writer meets: four threads of random nesting with
/// deltas from 0 to 2^40 ns, more than 128 names (two-byte iids), names shared by two
/// callsites, arguments of each type, polls, links, scopes outliving their parents (extra
/// lanes), a scope starting before its parent (an absolute time), a thread with neither
/// arguments nor flows, a counter and instants.
fn rich_trace() -> Trace {
    use crate::trace::{CounterOp, CounterSample, CounterTrack, Flow, ThreadTrace};

    static TICK: Callsite = Callsite::new("tick", "f.rs", 1, "m");
    let mut trace = Trace::empty();
    trace.start_ns = 1_763_900_000_123_456_789;
    let samples = (0..3)
        .map(|i| CounterSample {
            ns: trace.start_ns + i * 1000,
            thread: 1,
            op: CounterOp::Set,
            amount: Number::Int(i as i64),
            value: Number::Int(i as i64),
        })
        .collect();
    trace.counters.push(CounterTrack {
        name: "depth",
        process: 0,
        samples,
    });
    for i in 0..3 {
        trace.instants.push(crate::trace::Instant {
            callsite: &TICK,
            ns: trace.start_ns + i * 1000,
            process: 0,
            thread: 1,
            scope: InstantScope::Thread,
            args: vec![("n", Value::U64(i))],
        });
    }
    // 200 names, the first 10 on two callsites each.
    let sites: Vec<&'static Callsite> = (0..210)
        .map(|n| {
            let name: &'static str = Box::leak(format!("name{}", n % 200).into_boxed_str());
            &*Box::leak(Box::new(Callsite::new(name, "f.rs", n, "m")))
        })
        .collect();
    let mut random = crate::record::test_random(0x2545_f491_4f6c_dd1d);
    for t in 0..4u32 {
        let mut spans: Vec<Span> = Vec::new();
        let mut args = Vec::new();
        let mut open: Vec<u32> = Vec::new();
        let mut ns = trace.start_ns;
        while spans.len() < 3000 || !open.is_empty() {
            ns += match random(4) {
                0 => 0,
                1 => random(100),
                2 => random(100_000),
                _ => random(1 << 40),
            };
            if spans.len() < 3000 && (open.is_empty() || random(2) == 0) {
                let index = spans.len() as u32;
                let kind = match random(10) {
                    0 => SpanKind::Poll { async_span: None },
                    _ => SpanKind::Scope,
                };
                spans.push(Span {
                    callsite: sites[random(sites.len() as u64) as usize],
                    start_ns: ns,
                    end_ns: ns,
                    depth: open.len() as u32,
                    parent: open.last().copied(),
                    children_ns: 0,
                    overhead_ns: 0,
                    open_at_stop: false,
                    cut_at_start: false,
                    kind,
                });
                // The last thread: no arguments (nor flows).
                if t < 3 && random(8) == 0 {
                    let value = match random(5) {
                        0 => Value::I64(-(random(1000) as i64)),
                        1 => Value::U64(random(u64::MAX)),
                        2 => Value::F64(0.25),
                        3 => Value::Bool(random(2) == 0),
                        _ => Value::Str("text".into()),
                    };
                    args.push(SpanArg {
                        span: index,
                        key: "k",
                        value: value.clone(),
                    });
                    args.push(SpanArg {
                        span: index,
                        key: "k2",
                        value,
                    });
                }
                open.push(index);
            } else if let Some(top) = open.pop() {
                spans[top as usize].end_ns = ns;
            }
        }
        if t == 1 {
            // Scopes outliving their parents: their parents end first.
            for i in (50..3000).step_by(97) {
                if let Some(p) = spans[i].parent {
                    spans[i].end_ns = spans[p as usize].end_ns + 1 + random(1000);
                }
            }
        }
        if t == 2 {
            // A scope that starts before the packet before it.
            let i = (1..3000).find(|&i| spans[i].parent.is_some()).unwrap();
            spans[i].start_ns -= 1000;
        }
        trace.threads.push(ThreadTrace {
            process: 0,
            id: 100 + u64::from(t),
            name: Some(format!("gen{t}")),
            spans,
            memory: Vec::new(),
            args,
        });
    }
    let first = trace.threads.len() as u32 - 4;
    for k in 0..40 {
        let thread = first + (k % 3);
        trace.flows.push(Flow {
            seq: k,
            origin_thread: 1,
            origin: (k % 5 != 0).then_some(SpanRef {
                thread,
                span: k * 7,
            }),
            origin_ns: None,
            follower: SpanRef {
                thread: first + ((k + 1) % 3),
                span: k * 11 + 1,
            },
        });
    }
    trace
}

#[test]
fn short_packets_are_the_general_paths_bytes() {
    let trace = rich_trace();
    assert!(trace.counters.len() == 1 && trace.instants.len() == 3);
    assert!(Lanes::assign(&trace.threads[1].spans).count() > 1);
    let scopes: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
    for delta in [true, false] {
        let (fast, general) = both_ways(&trace, delta);
        assert_eq!(fast.len(), general.len(), "delta {delta}");
        assert!(fast == general, "delta {delta}: the bytes differ");
        // Every span's begin and end, and the sequences' first packets.
        let events = packets(&fast)
            .iter()
            .filter(|p| get(p, PACKET_TRACK_EVENT).is_some())
            .count();
        assert_eq!(events, 2 * scopes + 3 + 3, "delta {delta}");
    }
}
