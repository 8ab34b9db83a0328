//! Native Perfetto traces decoded by an independent protobuf implementation (prost, with the
//! message definitions of Perfetto's `protos/perfetto/trace/` for the fields tickscope writes)
//! and replayed as the trace processor reads them: sequence state (incremental-state clears,
//! packet defaults, interned data, the incremental clock) per `trusted_packet_sequence_id`.
//! Exact slice names, nesting, times, args, flows and interning under a mock clock.
#![cfg(feature = "enabled")]

use std::collections::{BTreeMap, HashMap};

use prost::Message;
use tickscope::export::perfetto;
use tickscope::{Profiler, scope};

use crate::common::perfetto_pb::*;
use crate::common::serial;

/// An argument value as decoded.
#[derive(Debug, Clone, PartialEq)]
enum Arg {
    Bool(bool),
    U(u64),
    I(i64),
    F(f64),
    S(String),
}

/// A track event as the trace processor reads it: absolute time, track, names resolved.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    ts: u64,
    track: u64,
    kind: i32,
    name: Option<String>,
    categories: Vec<String>,
    args: Vec<(String, Arg)>,
    flows: Vec<u64>,
    terminating: Vec<u64>,
    counter: Option<i64>,
}

/// A decoded trace: its track descriptors and its events, with how often each name was
/// interned per sequence.
struct Decoded {
    tracks: HashMap<u64, TrackDescriptor>,
    events: Vec<Event>,
    name_interned: HashMap<(u32, String), usize>,
}

#[derive(Default)]
struct SeqState {
    cleared: bool,
    incremental: Option<u64>,
    default_clock: Option<u32>,
    default_track: Option<u64>,
    names: HashMap<u64, String>,
    categories: HashMap<u64, String>,
    annotations: HashMap<u64, String>,
}

/// Replays `bytes` packet by packet, checking the sequence rules as it goes.
fn decode(bytes: &[u8]) -> Decoded {
    let trace = Trace::decode(bytes).expect("a valid Trace message");
    let mut seqs: HashMap<u32, SeqState> = HashMap::new();
    let mut tracks = HashMap::new();
    let mut events = Vec::new();
    let mut name_interned = HashMap::new();
    for p in &trace.packet {
        if let Some(d) = &p.track_descriptor {
            assert!(
                tracks.insert(d.uuid, d.clone()).is_none(),
                "uuid {} twice",
                d.uuid
            );
            assert!(p.track_event.is_none());
            continue;
        }
        assert_ne!(p.trusted_packet_sequence_id, 0, "{p:?}");
        let seq = seqs.entry(p.trusted_packet_sequence_id).or_default();
        if p.sequence_flags & 1 != 0 {
            *seq = SeqState {
                cleared: true,
                ..SeqState::default()
            };
        }
        if p.sequence_flags & 2 != 0 {
            assert!(seq.cleared, "needs incremental state before a clear: {p:?}");
        }
        if let Some(d) = &p.trace_packet_defaults {
            seq.default_clock = d.timestamp_clock_id;
            seq.default_track = d.track_event_defaults.as_ref().and_then(|t| t.track_uuid);
        }
        if let Some(c) = &p.clock_snapshot {
            for clock in &c.clocks {
                if clock.is_incremental {
                    assert_eq!(clock.clock_id, 64);
                    seq.incremental = Some(clock.timestamp);
                } else {
                    assert_eq!(clock.clock_id, 6, "BOOTTIME");
                }
            }
        }
        if let Some(i) = &p.interned_data {
            for e in &i.event_names {
                seq.names.insert(e.iid, e.name.clone());
                *name_interned
                    .entry((p.trusted_packet_sequence_id, e.name.clone()))
                    .or_insert(0) += 1;
            }
            for e in &i.event_categories {
                seq.categories.insert(e.iid, e.name.clone());
            }
            for e in &i.debug_annotation_names {
                seq.annotations.insert(e.iid, e.name.clone());
            }
        }
        let Some(te) = &p.track_event else { continue };
        let raw = p.timestamp.expect("a track event has a time");
        let clock = p.timestamp_clock_id.or(seq.default_clock).unwrap_or(6);
        let ts = if clock == 64 {
            let now = seq.incremental.expect("incremental clock snapshot") + raw;
            seq.incremental = Some(now);
            now
        } else {
            assert_eq!(clock, 6);
            raw
        };
        let arg = |a: &DebugAnnotation| {
            let v = if let Some(v) = a.bool_value {
                Arg::Bool(v)
            } else if let Some(v) = a.uint_value {
                Arg::U(v)
            } else if let Some(v) = a.int_value {
                Arg::I(v)
            } else if let Some(v) = a.double_value {
                Arg::F(v)
            } else {
                Arg::S(a.string_value.clone().expect("a value"))
            };
            (seq.annotations[&a.name_iid].clone(), v)
        };
        events.push(Event {
            ts,
            track: te.track_uuid.or(seq.default_track).expect("a track"),
            kind: te.r#type.expect("a type"),
            name: te.name_iid.map(|i| seq.names[&i].clone()),
            categories: te
                .category_iids
                .iter()
                .map(|c| seq.categories[c].clone())
                .collect(),
            args: te.debug_annotations.iter().map(arg).collect(),
            flows: te.flow_ids.clone(),
            terminating: te.terminating_flow_ids.clone(),
            counter: te.counter_value,
        });
    }
    Decoded {
        tracks,
        events,
        name_interned,
    }
}

/// A slice: begin and end paired per track, with its depth there.
#[derive(Debug, Clone, PartialEq)]
struct Slice {
    track: u64,
    name: String,
    start: u64,
    end: u64,
    depth: usize,
    args: Vec<(String, Arg)>,
    flows: Vec<u64>,
    terminating: Vec<u64>,
    categories: Vec<String>,
}

/// Slices in begin order (by time, then file order).
fn slices(d: &Decoded) -> Vec<Slice> {
    let mut order: Vec<&Event> = d.events.iter().filter(|e| e.kind <= 2).collect();
    order.sort_by_key(|e| e.ts);
    let mut open: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut out: Vec<Slice> = Vec::new();
    // Per track in file order (each track's events are in time order in its sequence).
    let mut per_track: BTreeMap<u64, Vec<&Event>> = BTreeMap::new();
    for e in d.events.iter().filter(|e| e.kind <= 2) {
        per_track.entry(e.track).or_default().push(e);
    }
    for (track, events) in per_track {
        let mut last = 0;
        for e in events {
            assert!(e.ts >= last, "time order on track {track}");
            last = e.ts;
            let stack = open.entry(track).or_default();
            if e.kind == 1 {
                stack.push(out.len());
                out.push(Slice {
                    track,
                    name: e.name.clone().expect("begin has a name"),
                    start: e.ts,
                    end: 0,
                    depth: stack.len() - 1,
                    args: e.args.clone(),
                    flows: e.flows.clone(),
                    terminating: e.terminating.clone(),
                    categories: e.categories.clone(),
                });
            } else {
                let i = stack.pop().expect("an end closes an open slice");
                out[i].end = e.ts;
            }
        }
    }
    assert!(open.values().all(Vec::is_empty), "slices left open");
    out.sort_by_key(|s| (s.start, s.depth));
    out
}

fn encode(trace: &tickscope::trace::Trace, delta: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    perfetto::write_with(
        trace,
        &mut bytes,
        perfetto::Options::new().delta_times(delta),
    )
    .unwrap();
    bytes
}

#[test]
fn nested_scopes_with_args_decode_exactly() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    m.increment(5u64);
    {
        let _main = scope!("main");
        m.increment(2u64);
        for (i, d) in [(0u64, 10u64), (1, 300)] {
            let _parse = scope!(
                "parse",
                i = i,
                neg = -3i64 - i as i64,
                f = 0.5,
                ok = i == 0,
                s = "x"
            );
            m.increment(3u64);
            let _t = scope!("tokenize");
            m.increment(d);
        }
        m.increment(1u64);
    }
    prof.stop();
    let trace = prof.trace();
    let bytes = encode(&trace, true);
    let d = decode(&bytes);

    // One process and one thread track, the thread's under the process's.
    let process = d.tracks.values().find(|t| t.process.is_some()).unwrap();
    assert_eq!(
        process.process.as_ref().unwrap().pid as u32,
        trace.process().id
    );
    let thread = d.tracks.values().find(|t| t.thread.is_some()).unwrap();
    assert_eq!(thread.parent_uuid, process.uuid);
    let t = thread.thread.as_ref().unwrap();
    assert_eq!(t.tid as u64, trace.threads[0].id);
    assert_eq!(t.thread_name, trace.threads[0].display_name());
    assert_eq!(d.tracks.len(), 2);

    let got = slices(&d);
    let spans = &trace.threads[0].spans;
    assert_eq!(got.len(), 5);
    let names: Vec<(&str, usize)> = got.iter().map(|s| (s.name.as_str(), s.depth)).collect();
    assert_eq!(
        names,
        [
            ("main", 0),
            ("parse", 1),
            ("tokenize", 2),
            ("parse", 1),
            ("tokenize", 2)
        ]
    );
    // Exact ns: each slice's times are its span's.
    for (slice, span) in got.iter().zip(spans) {
        assert_eq!((slice.start, slice.end), (span.start_ns, span.end_ns));
        assert_eq!(slice.track, thread.uuid);
    }
    assert_eq!(got[2].end - got[2].start, 10);
    assert_eq!(got[4].end - got[4].start, 300);
    let args = |i: u64, ok: bool| {
        vec![
            ("i".to_owned(), Arg::U(i)),
            ("neg".to_owned(), Arg::I(-3 - i as i64)),
            ("f".to_owned(), Arg::F(0.5)),
            ("ok".to_owned(), Arg::Bool(ok)),
            ("s".to_owned(), Arg::S("x".to_owned())),
        ]
    };
    assert_eq!(got[1].args, args(0, true));
    assert_eq!(got[3].args, args(1, false));
    assert!(got[0].args.is_empty() && got[2].args.is_empty());
    assert!(got.iter().all(|s| s.categories.is_empty()));
    // Each name interned once on the one sequence.
    let mut interned: Vec<(String, usize)> = d
        .name_interned
        .iter()
        .map(|((_, n), c)| (n.clone(), *c))
        .collect();
    interned.sort();
    assert_eq!(
        interned,
        [
            ("main".to_owned(), 1),
            ("parse".to_owned(), 1),
            ("tokenize".to_owned(), 1)
        ]
    );

    // Absolute times and explicit tracks: the same slices.
    let absolute = decode(&encode(&trace, false));
    assert_eq!(slices(&absolute), got);
    assert!(absolute.events.iter().all(|e| e.track == thread.uuid));

    // A file: gzipped for .gz, and the same trace inside.
    let path = std::env::temp_dir().join(format!("tickscope-{}.pftrace.gz", std::process::id()));
    prof.write_perfetto(&path).unwrap();
    let gz = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(&gz[..2], [0x1f, 0x8b]);
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut plain)
        .unwrap();
    assert_eq!(plain, bytes);
}

#[test]
fn packets_set_sequence_flags_per_sequence() {
    let _serial = serial();
    let _m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    {
        let _a = scope!("a");
    }
    let p2 = prof.clone();
    std::thread::spawn(move || {
        p2.join_current_thread();
        let _b = scope!("b");
        let _a = scope!("a");
    })
    .join()
    .unwrap();
    prof.stop();
    let bytes = encode(&prof.trace(), true);
    let trace = Trace::decode(bytes.as_slice()).unwrap();
    // Per sequence: the first packet clears, the rest need the state; descriptors need none.
    let mut first: HashMap<u32, bool> = HashMap::new();
    let mut events = 0;
    for p in &trace.packet {
        if p.track_descriptor.is_some() {
            assert_eq!(p.sequence_flags, 0);
            continue;
        }
        let seen = first.insert(p.trusted_packet_sequence_id, true).is_some();
        if seen {
            assert_eq!(p.sequence_flags, 2, "{p:?}");
            events += 1;
        } else {
            assert_eq!(p.sequence_flags, 1, "{p:?}");
            assert!(p.track_event.is_none() && p.clock_snapshot.is_some());
        }
    }
    assert_eq!(first.len(), 2, "one sequence per thread");
    assert_eq!(events, 6);
    let d = decode(&bytes);
    // "a" is interned on both sequences, once each.
    let mut a: Vec<usize> = d
        .name_interned
        .iter()
        .filter(|((_, n), _)| n == "a")
        .map(|(_, c)| *c)
        .collect();
    a.sort();
    assert_eq!(a, [1, 1]);
    let names: Vec<(String, usize)> = slices(&d).into_iter().map(|s| (s.name, s.depth)).collect();
    assert_eq!(names.len(), 3);
    assert!(names.contains(&("b".to_owned(), 0)) && names.contains(&("a".to_owned(), 1)));
}

/// `n` scopes "make" on this thread, each with a link (`between` runs inside each), followed by
/// one scope "use" each on a second thread that joins `prof`.
fn made_and_used(prof: &Profiler, n: usize, between: impl Fn()) {
    let links: Vec<tickscope::Link> = (0..n)
        .map(|_| {
            let g = scope!("make", seq);
            between();
            g.link()
        })
        .collect();
    let p2 = prof.clone();
    std::thread::spawn(move || {
        p2.join_current_thread();
        for link in links {
            let _g = scope!("use", follows = link);
        }
    })
    .join()
    .unwrap();
}

#[test]
fn links_are_flows_from_origin_to_follower() {
    let _serial = serial();
    let _m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    made_and_used(&prof, 3, || {});
    prof.stop();
    let d = decode(&encode(&prof.trace(), true));
    // Each name interned once on its thread's sequence, however often it is used.
    let mut interned: Vec<(&str, usize)> = d
        .name_interned
        .iter()
        .map(|((_, n), c)| (n.as_str(), *c))
        .collect();
    interned.sort();
    assert_eq!(interned, [("make", 1), ("use", 1)]);
    let got = slices(&d);
    let makes: Vec<&Slice> = got.iter().filter(|s| s.name == "make").collect();
    let uses: Vec<&Slice> = got.iter().filter(|s| s.name == "use").collect();
    assert_eq!((makes.len(), uses.len()), (3, 3));
    for (k, (m, u)) in makes.iter().zip(&uses).enumerate() {
        assert_eq!(m.flows, [k as u64 + 1]);
        assert!(m.terminating.is_empty());
        assert_eq!(u.terminating, [k as u64 + 1]);
        assert!(u.flows.is_empty());
        assert_ne!(m.track, u.track);
    }
}

#[test]
fn overlapping_scopes_go_to_an_extra_track_of_their_thread() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    let a = scope!("a");
    m.increment(10u64);
    let b = scope!("b");
    m.increment(10u64);
    drop(a);
    m.increment(10u64);
    drop(b);
    prof.stop();
    let trace = prof.trace();
    let d = decode(&encode(&trace, true));
    let got = slices(&d);
    assert_eq!(got.len(), 2);
    let (a, b) = (&got[0], &got[1]);
    assert_eq!((a.name.as_str(), b.name.as_str()), ("a", "b"));
    assert_eq!((a.end - a.start, b.end - b.start), (20, 20));
    assert_eq!(b.depth, 0);
    let lane = &d.tracks[&b.track];
    assert_eq!(lane.parent_uuid, a.track);
    assert_eq!(
        lane.name.as_deref(),
        Some(format!("{} (overlapping scopes 1)", trace.threads[0].display_name()).as_str())
    );
}

#[test]
fn live_bytes_are_a_counter_track() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder()
        .current_thread()
        .track_memory(true)
        .start();
    {
        let _outer = scope!("outer");
        m.increment(1u64);
        let kept = std::hint::black_box(vec![1u8; 1000]);
        m.increment(1u64);
        let temp = std::hint::black_box(vec![2u64; 100]);
        m.increment(1u64);
        drop(temp);
        m.increment(1u64);
        drop(kept);
    }
    prof.stop();
    let trace = prof.trace();
    let d = decode(&encode(&trace, true));
    let counter = d
        .tracks
        .values()
        .find(|t| t.counter.is_some())
        .expect("a counter track");
    assert_eq!(counter.name.as_deref(), Some("memory"));
    assert_eq!(counter.counter.as_ref().unwrap().unit, 3, "UNIT_SIZE_BYTES");
    let samples: Vec<(u64, i64)> = d
        .events
        .iter()
        .filter(|e| e.track == counter.uuid)
        .map(|e| {
            assert_eq!(e.kind, 4);
            (e.ts, e.counter.expect("a value"))
        })
        .collect();
    // From 0 at the start, then the live bytes after each event (the last of each time).
    let memory = trace.memory.as_ref().unwrap();
    let mut want: Vec<(u64, i64)> = vec![(trace.start_ns, 0)];
    for (e, live) in memory.events.iter().zip(memory.live_bytes()) {
        match want.last_mut() {
            Some(last) if last.0 == e.ns => last.1 = live as i64,
            _ => want.push((e.ns, live as i64)),
        }
    }
    assert_eq!(samples, want);
    let values: Vec<i64> = samples.iter().map(|&(_, v)| v).collect();
    assert_eq!(values, [0, 1000, 1800, 1000, 0]);
}

#[test]
fn the_memory_counter_keeps_a_peak_within_one_nanosecond() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder()
        .current_thread()
        .track_memory(true)
        .start();
    {
        let _outer = scope!("outer");
        m.increment(1u64);
        let kept = std::hint::black_box(vec![1u8; 1000]);
        m.increment(1u64);
        // Made and freed on one tick.
        drop(std::hint::black_box(vec![2u64; 100]));
        m.increment(1u64);
        drop(kept);
    }
    prof.stop();
    let trace = prof.trace();
    for delta in [false, true] {
        let d = decode(&encode(&trace, delta));
        let counter = d.tracks.values().find(|t| t.counter.is_some()).unwrap();
        let samples: Vec<(u64, i64)> = (d.events.iter())
            .filter(|e| e.track == counter.uuid)
            .map(|e| (e.ts, e.counter.expect("a value")))
            .collect();
        // The peak at the tick of the block made and freed, and the value after it 1 ns later.
        let values: Vec<i64> = samples.iter().map(|&(_, v)| v).collect();
        assert_eq!(values, [0, 1000, 1800, 1000, 0], "{samples:?}");
        assert_eq!(samples[3].0, samples[2].0 + 1, "{samples:?}");
    }
}

#[test]
fn async_calls_are_slices_on_their_own_tracks() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    let mut fut = Box::pin(two_polls());
    assert!(crate::common::poll_once(fut.as_mut()).is_pending());
    m.increment(100u64);
    assert!(crate::common::poll_once(fut.as_mut()).is_ready());
    prof.stop();
    let trace = prof.trace();
    assert_eq!(trace.async_spans.len(), 1);
    let call = &trace.async_spans[0];
    let d = decode(&encode(&trace, true));
    let got = slices(&d);
    let calls: Vec<&Slice> = got.iter().filter(|s| s.categories == ["async"]).collect();
    assert_eq!(calls.len(), 1);
    let c = calls[0];
    assert_eq!((c.start, c.end), (call.start_ns, call.end_ns));
    assert_eq!(c.name, call.name());
    let track = &d.tracks[&c.track];
    assert_eq!(track.name.as_deref(), Some(call.name()));
    assert!(d.tracks[&track.parent_uuid].process.is_some());
    assert_eq!(c.args[0], ("polls".to_owned(), Arg::U(2)));
    let polls = got.iter().filter(|s| s.categories == ["poll"]).count();
    assert_eq!(polls, 2);
}

#[tickscope::profile]
async fn two_polls() {
    crate::common::YieldOnce::default().await;
}

/// `counter!` samples are a counter track per name under their process, with the counter's
/// running value; `instant!`s are instant events on their thread's track or their process's,
/// with their arguments.
#[test]
fn counters_and_instants_are_counter_tracks_and_instant_events() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    {
        let _work = scope!("work");
        m.increment(10u64);
        tickscope::counter!("depth", set = 5);
        m.increment(10u64);
        tickscope::counter!("depth", add = 3);
        tickscope::instant!("miss", key = 7);
        m.increment(10u64);
        tickscope::counter!("depth", add = -6);
        tickscope::instant!("flush", process);
    }
    prof.stop();
    let trace = prof.trace();
    let d = decode(&encode(&trace, true));
    let depth = d
        .tracks
        .values()
        .find(|t| t.counter.is_some() && t.name.as_deref() == Some("depth"))
        .expect("a depth counter track");
    let samples: Vec<(u64, i64)> = d
        .events
        .iter()
        .filter(|e| e.track == depth.uuid)
        .map(|e| (e.ts - trace.start_ns, e.counter.expect("a value")))
        .collect();
    assert_eq!(samples, [(10, 5), (20, 8), (30, 2)]);
    // (name, time from the start, arguments, parent track of its track)
    type Seen<'a> = (&'a str, u64, Vec<(String, Arg)>, u64);
    let instants: Vec<Seen<'_>> = d
        .events
        .iter()
        .filter(|e| e.kind == 3)
        .map(|e| {
            let parent = d.tracks.get(&e.track).map_or(0, |t| t.parent_uuid);
            (
                e.name.as_deref().unwrap_or(""),
                e.ts - trace.start_ns,
                e.args.clone(),
                parent,
            )
        })
        .collect();
    assert_eq!(instants.len(), 2, "{instants:?}");
    assert_eq!((instants[0].0, instants[0].1), ("miss", 20));
    assert_eq!(instants[0].2, [("key".to_string(), Arg::I(7))]);
    assert_ne!(instants[0].3, 0, "on the thread's track, under its process");
    assert_eq!((instants[1].0, instants[1].1), ("flush", 30));
    assert_eq!(instants[1].3, 0, "on the process's track");
}

/// The prost encoder that `benches/export.rs` measures beside tickscope's writes the same
/// packets (prost puts fields in tag order, so the bytes differ in order, not in content
/// or size), so that the two are compared on the same work.
#[test]
fn the_benchs_prost_encoder_writes_the_same_packets() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    // Deltas of one to three varint bytes; two callsites named "step" share a name iid.
    for d in [1u64, 200, 70_000] {
        let _o = scope!("request");
        m.increment(d);
        for _ in 0..2 {
            let _i = scope!("step");
            m.increment(d);
        }
        let _other = scope!("step");
        m.increment(1u64);
    }
    prof.stop();
    let trace = prof.trace();
    let ours = encode(&trace, true);
    let mut with_prost = Vec::new();
    crate::common::perfetto_pb::write_with_prost(&trace, &mut with_prost);
    let ours_packets = Trace::decode(ours.as_slice()).unwrap().packet;
    let prost_packets = Trace::decode(with_prost.as_slice()).unwrap().packet;
    // 2 descriptors, the sequence's first packet, 12 begins and 12 ends.
    assert_eq!(ours_packets.len(), 27);
    assert_eq!(prost_packets, ours_packets);
    assert_eq!(with_prost.len(), ours.len());
    let names: Vec<u64> = ours_packets
        .iter()
        .filter_map(|p| p.interned_data.as_ref())
        .flat_map(|i| i.event_names.iter().map(|n| n.iid))
        .collect();
    assert_eq!(names, [1, 2]);
}

/// As in the Chrome export: PyTorch's link arguments on the slices of a link (`Sequence
/// number` on the origin; it and `Fwd thread id` on the follower), and `open_at_stop` on a
/// scope still open when the session stopped, as debug annotations after the scope's own.
#[test]
fn link_arguments_and_the_open_at_stop_mark_are_annotations() {
    let _serial = serial();
    let m = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let prof = Profiler::builder().current_thread().start();
    made_and_used(&prof, 2, || m.increment(10u64));
    let open = scope!("open", n = 7u64);
    m.increment(5u64);
    prof.stop();
    drop(open);
    let trace = prof.trace();
    let origin_thread = trace.threads[0].id;
    for delta in [true, false] {
        let got = slices(&decode(&encode(&trace, delta)));
        let args: Vec<(&str, Vec<(String, Arg)>)> = got
            .iter()
            .map(|s| (s.name.as_str(), s.args.clone()))
            .collect();
        let seq = |n: u64| ("Sequence number".to_owned(), Arg::U(n));
        let fwd = ("Fwd thread id".to_owned(), Arg::U(origin_thread));
        let links = trace
            .flows
            .iter()
            .map(|l| u64::from(l.seq))
            .collect::<Vec<_>>();
        assert_eq!(links.len(), 2);
        let mut want = vec![
            ("make", vec![seq(links[0])]),
            ("make", vec![seq(links[1])]),
            (
                "open",
                vec![
                    ("n".to_owned(), Arg::U(7)),
                    ("open_at_stop".to_owned(), Arg::Bool(true)),
                ],
            ),
            ("use", vec![seq(links[0]), fwd.clone()]),
            ("use", vec![seq(links[1]), fwd.clone()]),
        ];
        let mut args = args;
        // By name, then sequence number.
        let key = |a: &(&str, Vec<(String, Arg)>)| format!("{} {:?}", a.0, a.1);
        args.sort_by_key(key);
        want.sort_by_key(key);
        assert_eq!(args, want, "delta {delta}");
    }
}
