use super::*;
use crate::record::callsite::Callsite;
use crate::record::clock::Compensation as RawCompensation;
use crate::record::event::{RawEvent, RawKind};
use crate::record::memory::MemoryMode;
use crate::trace::{Compensation, MemoryKind, SpanKind, SpanRef};

static CALL: Callsite = Callsite::new("call", file!(), line!(), module_path!());
static STEP: Callsite = Callsite::new("step", file!(), line!(), module_path!());

fn ev(kind: RawKind, id: u32, tick: u64) -> RawEvent {
    RawEvent::new(kind, id, tick)
}

fn build(events: Vec<RawEvent>, end_tick: u64) -> Trace {
    Capture::from_records(vec![(7, events)], 0, end_tick).decode()
}

#[test]
fn async_call_with_payloads_pairs_across_kinds() {
    let (call, step) = (CALL.id(), STEP.id());
    let trace = build(
        vec![
            ev(RawKind::AsyncBegin, call, 10),
            RawEvent::payload(5, 0),
            ev(RawKind::PollBegin, call, 10),
            RawEvent::payload(5, 0),
            RawEvent::begin(step, 12),
            RawEvent::end(RawEvent::end_key(step, 12), 15),
            RawEvent::end(RawEvent::end_key(call, 10), 20),
            ev(RawKind::AsyncEnd, call, 20),
            RawEvent::payload(5, 0),
        ],
        100,
    );
    assert_eq!(trace.event_count, 9);
    let spans = &trace.threads[0].spans;
    assert_eq!(spans.len(), 2);
    assert_eq!(
        spans[0].kind,
        SpanKind::Poll {
            async_span: Some(0)
        }
    );
    assert_eq!((spans[0].start_ns, spans[0].end_ns), (10, 20));
    assert_eq!((spans[1].depth, spans[1].parent), (1, Some(0)));
    let calls = &trace.async_spans;
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].start_ns, calls[0].end_ns), (10, 20));
    assert_eq!(
        (calls[0].polls, calls[0].busy_ns, calls[0].self_ns),
        (1, 10, 7)
    );
    assert!(!calls[0].open_at_stop);
}

#[test]
fn missing_and_orphan_payloads() {
    let (call, step) = (CALL.id(), STEP.id());
    let trace = build(
        vec![
            // The payload of a record before the window: not the window's.
            RawEvent::payload(9, 0),
            // A poll whose span id record is missing (bad input).
            ev(RawKind::PollBegin, call, 2),
            RawEvent::begin(step, 3),
            RawEvent::end(RawEvent::end_key(step, 3), 4),
            RawEvent::end(RawEvent::end_key(call, 2), 6),
            // A lead event with its payload cut off at the very end.
            ev(RawKind::AsyncEnd, call, 8),
        ],
        50,
    );
    assert_eq!(trace.event_count, 5);
    let spans = &trace.threads[0].spans;
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[0].kind, SpanKind::Poll { async_span: None });
    assert_eq!((spans[0].start_ns, spans[0].end_ns), (2, 6));
    assert_eq!(spans[0].self_ns(), 3);
    assert!(trace.async_spans.is_empty());
}

#[test]
fn frees_match_allocations_by_address_in_time_order_across_threads() {
    const X: u64 = 0x7f00_0000_1000;
    let alloc = |size, tick| RawEvent::memory(RawKind::Alloc, size, X, tick);
    let free = |size, tick| RawEvent::memory(RawKind::Free, size, X, tick);
    let step = STEP.id();
    let thread = |id, events: Vec<[RawEvent; 2]>| (id, events.concat());
    let mut a = thread(1, vec![alloc(1 << 33, 10), free(7, 40)]);
    a.1.insert(0, RawEvent::begin(step, 5));
    a.1.push(RawEvent::end(RawEvent::end_key(step, 5), 50));
    let threads = vec![
        a,
        // Frees A's block (and an older one first), then gets the same address again.
        thread(2, vec![free(3, 2), free(1 << 33, 20), alloc(7, 30)]),
    ];
    let trace = Capture::from_records(threads, 0, 100).decode();
    let memory = trace.memory.as_ref().unwrap();
    let got: Vec<_> = memory
        .events
        .iter()
        .map(|e| (e.ns, e.thread, e.kind, e.size, e.matched))
        .collect();
    use MemoryKind::{Alloc, Free};
    assert_eq!(
        got,
        [
            (2, 2, Free, 3, None),
            (10, 1, Alloc, 1 << 33, Some(2)),
            (20, 2, Free, 1 << 33, Some(1)),
            (30, 2, Alloc, 7, Some(4)),
            (40, 1, Free, 7, Some(3)),
        ]
    );
    assert!(memory.events.iter().all(|e| e.address == X));
    assert_eq!(memory.live_bytes(), [0, 1 << 33, 0, 7, 0]);
    assert_eq!(memory.live_at_stop().count(), 0);
    let step_stats = trace.threads[0].memory[0];
    assert_eq!(
        (
            step_stats.alloc_bytes,
            step_stats.freed_bytes,
            step_stats.peak_bytes
        ),
        (1 << 33, 7, 1 << 33)
    );
}

#[test]
fn threads_with_no_record_in_the_window_are_left_out() {
    let trace = build(Vec::new(), 10);
    assert!(trace.threads.is_empty());
    let step = STEP.id();
    // Entirely before the window (it starts at 20 for this capture).
    let mut capture = Capture::from_records(
        vec![(
            3,
            vec![
                RawEvent::begin(step, 5),
                RawEvent::end(RawEvent::end_key(step, 5), 6),
            ],
        )],
        20,
        30,
    );
    capture.threads[0].from_tick = 20;
    let trace = capture.decode();
    assert!(trace.threads.is_empty());
    assert_eq!(trace.event_count, 0);
}

#[test]
fn string_arguments_are_read_by_the_shared_reader() {
    let (step, key) = (STEP.id(), CALL.id());
    let text = b"hello, world!";
    let bytes = |chunk: &[u8]| {
        let mut raw = [0u8; 12];
        raw[..chunk.len()].copy_from_slice(chunk);
        let tick = u64::from_le_bytes(raw[..8].try_into().unwrap());
        let id = u32::from_le_bytes(raw[8..].try_into().unwrap());
        RawEvent::new(RawKind::Bytes, id, tick)
    };
    let trace = build(
        vec![
            RawEvent::begin(step, 1),
            ev(RawKind::ArgU64, key, 42),
            ev(RawKind::ArgStr, key, text.len() as u64),
            bytes(&text[..12]),
            bytes(&text[12..]),
            // A string cut short by bad input ends at the next record.
            ev(RawKind::ArgStr, key, 100),
            bytes(b"cut short ab"),
            RawEvent::end(RawEvent::end_key(step, 1), 9),
        ],
        10,
    );
    let args: Vec<String> = trace.threads[0]
        .args_of(0)
        .iter()
        .map(|a| format!("{}={}", a.key, a.value))
        .collect();
    assert_eq!(args, ["call=42", "call=hello, world!", "call=cut short ab"]);
}

/// Two processes (pids 100 and 200), both with a thread 1: process A's thread 1 captures a
/// link that its thread 2 follows, runs an async call at 1200 and allocates at 1300; process
/// B's thread 1 runs an async call at 1150, allocates at the same address at 1250, and
/// follows a link (thread 1, sequence 0) that B never captured.
fn two_processes() -> (Capture, Capture) {
    const X: u64 = 0x7f00_0000_2000;
    let (call, step) = (CALL.id(), STEP.id());
    let async_call = |span: u32, tick: u64| {
        vec![
            ev(RawKind::AsyncBegin, call, tick),
            RawEvent::payload(span, 0),
            ev(RawKind::PollBegin, call, tick),
            RawEvent::payload(span, 0),
            RawEvent::end(RawEvent::end_key(call, tick), tick + 10),
            ev(RawKind::AsyncEnd, call, tick + 10),
            RawEvent::payload(span, 0),
        ]
    };
    let a1 = [
        vec![
            RawEvent::begin(step, 1100),
            ev(RawKind::Link, 0, 1110),
            RawEvent::end(RawEvent::end_key(step, 1100), 1120),
        ],
        async_call(5, 1200),
        RawEvent::memory(RawKind::Alloc, 8, X, 1300).to_vec(),
        RawEvent::memory(RawKind::Free, 8, X, 1700).to_vec(),
    ]
    .concat();
    let a2 = [
        RawEvent::begin_follows(step, 1150, 1, 0).to_vec(),
        vec![RawEvent::end(RawEvent::end_key(step, 1150), 1160)],
    ]
    .concat();
    let b1 = [
        async_call(5, 1150),
        RawEvent::memory(RawKind::Alloc, 16, X, 1250).to_vec(),
        RawEvent::begin_follows(step, 1400, 1, 0).to_vec(),
        vec![RawEvent::end(RawEvent::end_key(step, 1400), 1410)],
        RawEvent::memory(RawKind::Free, 16, X, 1800).to_vec(),
    ]
    .concat();
    let mut a = Capture::from_records(vec![(1, a1), (2, a2)], 1000, 5000);
    a.header.process_id = 100;
    let mut b = Capture::from_records(vec![(1, b1)], 900, 6000);
    b.header.process_id = 200;
    (a, b)
}

#[test]
fn captures_of_two_processes_decode_into_one_trace() {
    let (a, b) = two_processes();
    let (ta, tb) = (a.decode(), b.decode());
    let trace = Trace::from_captures([&a, &b]);
    let ids: Vec<u32> = trace.processes.iter().map(|p| p.id).collect();
    assert_eq!(ids, [100, 200]);
    assert_eq!(trace.process().id, 100);
    assert_eq!((trace.start_ns, trace.end_ns), (900, 6000));
    assert_eq!(trace.event_count, ta.event_count + tb.event_count);
    // Threads stay with their process: both have a thread 1.
    let threads: Vec<(u32, u64)> = trace.threads.iter().map(|t| (t.process, t.id)).collect();
    assert_eq!(threads, [(0, 1), (0, 2), (1, 1)]);
    assert_eq!(trace.thread_count(), 3);
    assert_eq!(trace.threads[0].spans[0], ta.threads[0].spans[0]);
    // Async calls in order of their first poll, across processes; polls point to theirs.
    let calls: Vec<(u32, u64, u64)> = trace
        .async_spans
        .iter()
        .map(|c| (c.process, c.thread, c.start_ns))
        .collect();
    assert_eq!(calls, [(1, 1, 1150), (0, 1, 1200)]);
    let poll = |thread: usize| {
        let spans = &trace.threads[thread].spans;
        spans.iter().find(|s| s.name() == "call").unwrap().kind
    };
    assert_eq!(
        poll(0),
        SpanKind::Poll {
            async_span: Some(1)
        }
    );
    assert_eq!(
        poll(2),
        SpanKind::Poll {
            async_span: Some(0)
        }
    );
    // Links are matched within their process: B's follower found nothing of A's.
    let links: Vec<_> = trace
        .flows
        .iter()
        .map(|l| (l.follower, l.origin, l.origin_ns))
        .collect();
    let at = |thread, span| SpanRef { thread, span };
    assert_eq!(
        links,
        [
            (at(1, 0), Some(at(0, 0)), Some(1110)),
            (at(2, 1), None, None)
        ]
    );
    // Allocations in time order across processes, frees matched within their process, live
    // bytes per process.
    let memory = trace.memory.as_ref().unwrap();
    let events: Vec<_> = memory
        .events
        .iter()
        .map(|e| (e.ns, e.process, e.kind, e.size, e.matched))
        .collect();
    use MemoryKind::{Alloc, Free};
    assert_eq!(
        events,
        [
            (1250, 1, Alloc, 16, Some(3)),
            (1300, 0, Alloc, 8, Some(2)),
            (1700, 0, Free, 8, Some(1)),
            (1800, 1, Free, 16, Some(0)),
        ]
    );
    assert_eq!(memory.live_bytes(), [16, 8, 0, 0]);
    // The order of the captures decides the order of processes and threads only.
    let reversed = Trace::from_captures([&b, &a]);
    let ids: Vec<u32> = reversed.processes.iter().map(|p| p.id).collect();
    assert_eq!(ids, [200, 100]);
    assert_eq!(reversed.async_spans[0].process, 0);
    assert_eq!(reversed.memory.unwrap().live_bytes(), [16, 8, 0, 0]);
}

#[test]
fn sessions_of_one_process_are_one_process() {
    let (a, _) = two_processes();
    let trace = Trace::from_captures([&a, &a]);
    assert_eq!(trace.processes, a.decode().processes);
    let threads: Vec<(u32, u64)> = trace.threads.iter().map(|t| (t.process, t.id)).collect();
    assert_eq!(threads, [(0, 1), (0, 2), (0, 1), (0, 2)]);
    assert_eq!(trace.thread_count(), 2);
    // Each session's link stays within it.
    let followers: Vec<_> = trace.flows.iter().map(|l| (l.follower, l.origin)).collect();
    let at = |thread, span| SpanRef { thread, span };
    assert_eq!(
        followers,
        [(at(1, 0), Some(at(0, 0))), (at(3, 0), Some(at(2, 0)))]
    );
}

#[test]
fn one_capture_decodes_as_it_does_alone_and_none_as_an_empty_trace() {
    let (a, b) = two_processes();
    assert_eq!(Trace::from_captures([&a]), a.decode());
    assert_eq!(Trace::from_captures(std::slice::from_ref(&b)), b.decode());
    assert_eq!(Trace::from_captures(&[]), Trace::empty());
    // A session that never ran has no window: it adds its process, not the epoch.
    let never = Capture::empty();
    let trace = Trace::from_captures([&a, &never]);
    assert_eq!((trace.start_ns, trace.end_ns), (1000, 5000));
    assert_eq!(trace.processes.len(), 2);
}

#[test]
fn threads_decoded_in_parallel_give_the_trace_decoded_in_turn() {
    let (call, step) = (CALL.id(), STEP.id());
    const N: u32 = 300;
    let (mut one, mut three) = (Vec::new(), Vec::new());
    for i in 0..N {
        let t = 10_000 + u64::from(i) * 100;
        // Thread 1: a step that captures link `i`, an async call it begins and polls once,
        // an allocation that thread 3 frees.
        one.push(RawEvent::begin(step, t));
        one.push(ev(RawKind::Link, i, t + 1));
        one.push(RawEvent::end(RawEvent::end_key(step, t), t + 2));
        one.extend([
            ev(RawKind::AsyncBegin, call, t + 3),
            RawEvent::payload(i + 1, 0),
        ]);
        one.extend([
            ev(RawKind::PollBegin, call, t + 3),
            RawEvent::payload(i + 1, 0),
        ]);
        one.push(RawEvent::end(RawEvent::end_key(call, t + 3), t + 4));
        one.extend(RawEvent::memory(
            RawKind::Alloc,
            64,
            0x1000 + u64::from(i),
            t + 5,
        ));
        // Thread 3: a step that follows from link `i`, a nested step, the call's second poll
        // and its end, and the free.
        three.extend(RawEvent::begin_follows(step, t + 10, 1, i));
        three.push(RawEvent::begin(step, t + 11));
        three.push(RawEvent::end(RawEvent::end_key(step, t + 11), t + 12));
        three.push(RawEvent::end(RawEvent::end_key(step, t + 10), t + 13));
        three.extend([
            ev(RawKind::PollBegin, call, t + 20),
            RawEvent::payload(i + 1, 0),
        ]);
        three.push(RawEvent::end(RawEvent::end_key(call, t + 20), t + 21));
        three.extend([
            ev(RawKind::AsyncEnd, call, t + 21),
            RawEvent::payload(i + 1, 0),
        ]);
        three.extend(RawEvent::memory(
            RawKind::Free,
            64,
            0x1000 + u64::from(i),
            t + 22,
        ));
    }
    let end_tick = 10_000 + u64::from(N) * 100;
    // Thread 2 recorded only after the window: it is left out, and threads 3 and 4 take the
    // indices after thread 1's.
    let two = vec![
        RawEvent::begin(step, end_tick + 1),
        RawEvent::end(RawEvent::end_key(step, end_tick + 1), end_tick + 2),
    ];
    let four = vec![RawEvent::begin(step, 10_050)];
    let capture =
        Capture::from_records(vec![(1, one), (2, two), (3, three), (4, four)], 0, end_tick);
    let in_turn = decode(&capture, usize::MAX);
    let parallel = decode(&capture, 0);
    assert!(in_turn == parallel, "the decodes differ");
    let ids: Vec<u64> = parallel.threads.iter().map(|t| t.id).collect();
    assert_eq!(ids, [1, 3, 4]);
    assert_eq!(parallel.flows.len(), N as usize);
    assert!(
        parallel
            .flows
            .iter()
            .all(|l| l.origin.is_some_and(|o| o.thread == 0) && l.follower.thread == 1)
    );
    assert_eq!(parallel.async_spans.len(), N as usize);
    assert!(
        parallel
            .async_spans
            .iter()
            .all(|c| c.polls == 2 && c.end_thread == Some(3))
    );
    let memory = parallel.memory.as_ref().unwrap();
    assert_eq!(memory.events.len(), 2 * N as usize);
    assert!(memory.events.iter().all(|e| e.matched.is_some()));
    assert!(parallel.threads[2].spans[0].open_at_stop);
}

#[test]
fn an_async_begin_adopts_the_plain_scope_of_its_first_slice() {
    let call = CALL.id();
    let trace = build(
        vec![
            // The tracing bridge: a first enter as a plain scope, then at the second enter an
            // async begin that names the first enter's tick.
            RawEvent::begin(call, 10),
            RawEvent::end(RawEvent::end_key(call, 10), 14),
            ev(RawKind::AsyncBegin, call, 20),
            RawEvent::payload(5, 10),
            ev(RawKind::PollBegin, call, 20),
            RawEvent::payload(5, 0),
            RawEvent::end(RawEvent::end_key(call, 20), 23),
            ev(RawKind::AsyncEnd, call, 30),
            RawEvent::payload(5, 0),
        ],
        100,
    );
    let spans = &trace.threads[0].spans;
    assert_eq!(spans.len(), 2);
    assert!(spans.iter().all(|s| s.kind
        == SpanKind::Poll {
            async_span: Some(0)
        }));
    let calls = &trace.async_spans;
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].start_ns, calls[0].end_ns), (10, 30));
    assert_eq!((calls[0].polls, calls[0].busy_ns), (2, 7));
    // Without a tick in its payload the begin adopts nothing.
    let trace = build(
        vec![
            RawEvent::begin(call, 10),
            RawEvent::end(RawEvent::end_key(call, 10), 14),
            ev(RawKind::AsyncBegin, call, 10),
            RawEvent::payload(5, 0),
            ev(RawKind::AsyncEnd, call, 30),
            RawEvent::payload(5, 0),
        ],
        100,
    );
    assert_eq!(trace.threads[0].spans[0].kind, SpanKind::Scope);
    assert_eq!(trace.async_spans[0].polls, 0);
    assert_eq!(trace.async_spans[0].start_ns, 10);
}

/// A capture of `events` on one thread whose probes cost `inner` ticks inside a scope and
/// `outer` outside it (ticks are nanoseconds here).
fn compensated(events: Vec<RawEvent>, end_tick: u64, inner: u32, outer: u32) -> Capture {
    let mut capture = Capture::from_records(vec![(7, events)], 0, end_tick);
    let unit = crate::record::clock::PROBE_UNIT as u32;
    capture.clock.compensation = RawCompensation::Ticks {
        inner: inner * unit,
        outer: outer * unit,
    };
    capture
}

/// `(start, end)` of a scope of `site` as its two records.
fn scope_records(site: u32, start: u64, end: u64) -> [RawEvent; 2] {
    [
        RawEvent::begin(site, start),
        RawEvent::end(RawEvent::end_key(site, start), end),
    ]
}

#[test]
fn compensation_subtracts_inner_per_scope_and_outer_per_child() {
    let (call, step) = (CALL.id(), STEP.id());
    // A parent of 1 000 ns holding four children of 50 ns; probes of 3 ns inside a scope and
    // 5 ns outside.
    let mut events = vec![RawEvent::begin(call, 0)];
    for k in 0..4 {
        let start = 100 + 200 * k;
        events.extend(scope_records(step, start, start + 50));
    }
    events.push(RawEvent::end(RawEvent::end_key(call, 0), 1_000));
    let trace = compensated(events, 2_000, 3, 5).decode();
    assert_eq!(
        trace.compensation,
        Some(Compensation::Applied {
            inner_ns: 3.0,
            outer_ns: 5.0
        })
    );
    let spans = &trace.threads[0].spans;
    let parent = &spans[0];
    // Recorded: 1 000 ns, 800 ns self. Its own 3 ns and, per child, the child's 5 ns outside
    // and 3 ns inside come off its duration: 1 000 - 3 - 4 × 8.
    assert_eq!(parent.overhead_ns, 35);
    assert_eq!(parent.duration_ns(), 965);
    // Self time loses exactly its own inner part and 4 × the outer part: 800 - 3 - 20.
    assert_eq!(parent.self_ns(), 777);
    for child in &spans[1..] {
        assert_eq!(
            (child.overhead_ns, child.duration_ns(), child.self_ns()),
            (3, 47, 47)
        );
    }
    // Totals stay consistent: the parent's duration is its self time plus its children's.
    assert_eq!(parent.children_ns, 4 * 47);
    assert_eq!(parent.duration_ns(), parent.self_ns() + parent.children_ns);
    // The timeline keeps the recorded times.
    assert_eq!((parent.start_ns, parent.end_ns), (0, 1_000));
    assert_eq!((spans[1].start_ns, spans[1].end_ns), (100, 150));
}

#[test]
fn compensation_carries_up_nested_levels() {
    let (call, step) = (CALL.id(), STEP.id());
    // G [0, 500] ⊃ P [10, 400] ⊃ C [20, 120].
    let events = vec![
        RawEvent::begin(call, 0),
        RawEvent::begin(step, 10),
        RawEvent::begin(call, 20),
        RawEvent::end(RawEvent::end_key(call, 20), 120),
        RawEvent::end(RawEvent::end_key(step, 10), 400),
        RawEvent::end(RawEvent::end_key(call, 0), 500),
    ];
    let trace = compensated(events, 1_000, 3, 5).decode();
    let times: Vec<_> = trace.threads[0]
        .spans
        .iter()
        .map(|s| (s.overhead_ns, s.duration_ns(), s.self_ns()))
        .collect();
    // C: 100 - 3. P: 390 - (3 + 5 + 3), self 290 - 3 - 5. G: 500 - (3 + 5 + 11), self
    // 110 - 3 - 5.
    assert_eq!(times, [(19, 481, 102), (11, 379, 282), (3, 97, 97)]);
}

#[test]
fn compensation_never_goes_below_zero() {
    let (call, step) = (CALL.id(), STEP.id());
    // Two children of 2 ns (less than the 3 ns inner probe) in a parent of 12 ns.
    let mut events = vec![RawEvent::begin(call, 0)];
    events.extend(scope_records(step, 5, 7));
    events.extend(scope_records(step, 9, 11));
    events.push(RawEvent::end(RawEvent::end_key(call, 0), 12));
    let trace = compensated(events, 100, 3, 5).decode();
    let times: Vec<_> = trace.threads[0]
        .spans
        .iter()
        .map(|s| (s.overhead_ns, s.duration_ns(), s.self_ns(), s.children_ns))
        .collect();
    // The children lose their 2 ns; the parent's 3 + 2 × (5 + 3) = 19 ns of probes are
    // capped at its 12 ns.
    assert_eq!(times, [(12, 0, 0, 0), (2, 0, 0, 0), (2, 0, 0, 0)]);
}

#[test]
fn compensation_off_and_unknown_subtract_nothing() {
    let (call, step) = (CALL.id(), STEP.id());
    let mut events = vec![RawEvent::begin(call, 0)];
    events.extend(scope_records(step, 10, 20));
    events.push(RawEvent::end(RawEvent::end_key(call, 0), 40));
    for (compensation, stated) in [
        (RawCompensation::Unknown, None),
        (RawCompensation::Off, Some(Compensation::Off)),
        (RawCompensation::Ticks { inner: 0, outer: 0 }, None),
    ] {
        let mut capture = Capture::from_records(vec![(7, events.clone())], 0, 100);
        capture.clock.compensation = compensation;
        let trace = capture.decode();
        if let Some(stated) = stated {
            assert_eq!(trace.compensation, Some(stated));
        }
        let times: Vec<_> = trace.threads[0]
            .spans
            .iter()
            .map(|s| (s.overhead_ns, s.duration_ns(), s.self_ns()))
            .collect();
        assert_eq!(times, [(0, 40, 30), (0, 10, 10)]);
    }
}

#[test]
fn compensation_survives_a_capture_file() {
    let (call, step) = (CALL.id(), STEP.id());
    let mut events = vec![RawEvent::begin(call, 0)];
    events.extend(scope_records(step, 10, 20));
    events.push(RawEvent::end(RawEvent::end_key(call, 0), 40));
    let capture = compensated(events, 100, 2, 4);
    let mut file = Vec::new();
    capture.write_to(&mut file).unwrap();
    let read = Capture::from_bytes(&file).unwrap();
    assert!(read[0].warnings().is_empty());
    assert_eq!(read[0].clock.compensation, capture.clock.compensation);
    let (live, from_file) = (capture.decode(), read[0].decode());
    let times = |trace: &Trace| -> Vec<_> {
        trace.threads[0]
            .spans
            .iter()
            .map(|s| (s.name(), s.start_ns, s.end_ns, s.overhead_ns, s.self_ns()))
            .collect()
    };
    assert_eq!(
        times(&live),
        [("call", 0, 40, 8, 24), ("step", 10, 20, 2, 8)]
    );
    assert_eq!(times(&live), times(&from_file));
    assert_eq!(live.compensation, from_file.compensation);
}

#[test]
fn counted_memory_goes_to_the_innermost_scope_with_its_peak() {
    let (call, step) = (CALL.id(), STEP.id());
    let trace = build(
        vec![
            RawEvent::begin(call, 10),
            // 2 allocations of 300 bytes in all, 1 free of 100, rising 250 at most.
            RawEvent::memory_counts((2, 300), (1, 100), 250)[0],
            RawEvent::memory_counts((2, 300), (1, 100), 250)[1],
            RawEvent::memory_counts((2, 300), (1, 100), 250)[2],
            RawEvent::begin(step, 12),
        ]
        .into_iter()
        .chain(RawEvent::memory_counts((1, 1000), (1, 1000), 1000))
        .chain([
            RawEvent::end(RawEvent::end_key(step, 12), 15),
            // Cut short (bad input): an AllocCount with nothing after it counts as it came.
            RawEvent::memory_counts((1, 7), (0, 0), 7)[0],
            RawEvent::end(RawEvent::end_key(call, 10), 20),
        ])
        .collect(),
        100,
    );
    let memory = &trace.threads[0].memory;
    let (call_stats, step_stats) = (memory[0], memory[1]);
    assert_eq!(
        (
            step_stats.allocs,
            step_stats.alloc_bytes,
            step_stats.frees,
            step_stats.peak_bytes
        ),
        (1, 1000, 1, 1000)
    );
    assert_eq!(
        (
            call_stats.self_allocs,
            call_stats.self_alloc_bytes,
            call_stats.self_frees
        ),
        (3, 307, 1)
    );
    assert_eq!((call_stats.allocs, call_stats.alloc_bytes), (4, 1307));
    // 250 before the child; the child rose 1000 above the 200 left: 1200.
    assert_eq!(call_stats.peak_bytes, 1200);
    assert_eq!(
        trace.memory.as_ref().map(|m| m.mode),
        Some(MemoryMode::Counts)
    );
}

/// The pairing of thread 0 (id 1) of `callsites`, ticks as nanoseconds, `probe` subtracted.
fn pairing_of<'a>(
    callsites: &'a [&'static Callsite],
    probe: super::pair::Probe,
    marks: &'a mut Vec<async_spans::Mark>,
    links: &'a mut Links,
) -> Pairing<'a> {
    static IDENTITY: Converter = Converter::IDENTITY;
    Pairing::new(
        callsites,
        (&IDENTITY, probe),
        (0, 1),
        marks,
        links,
        None,
        16,
    )
}

/// A pairing that lets go of final spans keeps a window and the open scopes with their
/// ancestors, whatever runs through it: a scope open all along, guards dropped out of order,
/// scopes nested deeper than a window; and hands every span over once.
#[test]
fn a_drained_pairing_keeps_a_window_and_the_open_ancestry() {
    use super::pair::Probe;
    use super::summary::WINDOW;
    static ROOT: Callsite = Callsite::new("root", file!(), line!(), module_path!());
    // Ids in this table: 1 root, 2 call, 3 step.
    let callsites: [&'static Callsite; 3] = [&ROOT, &CALL, &STEP];
    let (mut marks, mut links) = (Vec::new(), Links::default());
    let mut pairing = pairing_of(&callsites, Probe::default(), &mut marks, &mut links);
    pairing.drain_every(WINDOW);
    let (mut handed, mut peak) = (0usize, 0usize);
    let mut records = vec![RawEvent::begin(1, 0)];
    let n = 10 * WINDOW as u64;
    for i in 0..n {
        let t = 10 + i * 10;
        // `call` ends before the `step` inside it.
        records.extend([
            RawEvent::begin(2, t),
            RawEvent::begin(3, t + 1),
            RawEvent::end(RawEvent::end_key(2, t), t + 2),
            RawEvent::end(RawEvent::end_key(3, t + 1), t + 3),
        ]);
    }
    for record in records {
        pairing.push(record);
        if pairing.window_full() {
            pairing.drain_final(|_, _, _| handed += 1);
        }
        peak = peak.max(pairing.kept());
    }
    // The window fills to twice its size at most while a scope is open, plus the root.
    assert!(peak <= 2 * WINDOW + 1, "{peak} spans kept");
    assert!(
        handed >= 2 * n as usize - 2 * WINDOW,
        "{handed} spans handed over"
    );
    // Nested deeper than two windows: all kept while open, then handed over.
    let depth = 3 * WINDOW as u64;
    let base = 10 + n * 10;
    for i in 0..depth {
        pairing.push(RawEvent::begin(2, base + i));
        if pairing.window_full() {
            pairing.drain_final(|_, _, _| handed += 1);
        }
    }
    assert_eq!(pairing.kept() as u64, depth + 1 + (2 * n - handed as u64));
    for i in (0..depth).rev() {
        pairing.push(RawEvent::end(
            RawEvent::end_key(2, base + i),
            base + 2 * depth - i,
        ));
        if pairing.window_full() {
            pairing.drain_final(|_, _, _| handed += 1);
        }
    }
    let (events, spans, ..) = pairing.finish(1_000_000);
    assert_eq!(events, 1 + 4 * n + 2 * depth);
    assert_eq!(handed + spans.len(), 1 + 2 * n as usize + depth as usize);
    // The root, open at the end, comes last among what is kept, closed there.
    let root = spans.iter().find(|s| s.name() == "root").unwrap();
    assert_eq!(
        (root.start_ns, root.end_ns, root.open_at_stop),
        (0, 1_000_000, true)
    );
    // Each `call` ran 2 ns in the root, and the 1 ns its `step` outlived it; the outermost
    // nested scope 2 × depth.
    assert_eq!(root.children_ns, 3 * n + 2 * depth);
}

#[test]
fn tracing_span_enters_group_by_span_id_up_to_its_close() {
    let call = CALL.id();
    let enter = |span: u64, tick: u64| RawEvent::span_enter(call, tick, span);
    let exit = |tick_in: u64, tick: u64| RawEvent::end(RawEvent::end_key(call, tick_in), tick);
    // Thread 7: span 5 entered twice; thread 8: once more, then closed; then span 5's id used
    // again (entered once, closed: a plain scope); span 6 entered twice, never closed; a
    // close of an id never entered.
    let seven = [
        enter(5, 10).to_vec(),
        vec![exit(10, 20)],
        enter(5, 30).to_vec(),
        vec![exit(30, 40)],
        enter(6, 100).to_vec(),
        vec![exit(100, 110)],
        enter(6, 120).to_vec(),
        vec![exit(120, 130)],
    ]
    .concat();
    let eight = [
        enter(5, 50).to_vec(),
        vec![exit(50, 60)],
        RawEvent::span_close(0, 70, 5, false).to_vec(),
        enter(5, 80).to_vec(),
        vec![exit(80, 90)],
        RawEvent::span_close(call, 95, 5, true).to_vec(),
        RawEvent::span_close(0, 96, 77, false).to_vec(),
    ]
    .concat();
    // Thread 9: span 9 entered twice and closed there, all on this thread (resolved on it).
    let nine = [
        enter(9, 200).to_vec(),
        vec![exit(200, 210)],
        enter(9, 220).to_vec(),
        vec![exit(220, 230)],
        RawEvent::span_close(0, 240, 9, true).to_vec(),
    ]
    .concat();
    let trace = Capture::from_records(vec![(7, seven), (8, eight), (9, nine)], 0, 300).decode();
    let calls = &trace.async_spans;
    assert_eq!(calls.len(), 3);
    assert_eq!(
        (
            calls[2].start_ns,
            calls[2].end_ns,
            calls[2].polls,
            calls[2].open_at_stop
        ),
        (200, 240, 2, false)
    );
    assert_eq!((calls[2].thread, calls[2].end_thread), (9, Some(9)));
    assert!(trace.threads[2].spans.iter().all(|s| s.kind
        == SpanKind::Poll {
            async_span: Some(2)
        }));
    assert_eq!(
        (
            calls[0].start_ns,
            calls[0].end_ns,
            calls[0].polls,
            calls[0].open_at_stop
        ),
        (10, 70, 3, false)
    );
    assert_eq!((calls[0].thread, calls[0].end_thread), (7, Some(8)));
    assert_eq!(calls[0].busy_ns, 30);
    assert_eq!(
        (
            calls[1].start_ns,
            calls[1].end_ns,
            calls[1].polls,
            calls[1].open_at_stop
        ),
        (100, 300, 2, true)
    );
    let kinds =
        |t: usize| -> Vec<SpanKind> { trace.threads[t].spans.iter().map(|s| s.kind).collect() };
    let (first, second) = (
        SpanKind::Poll {
            async_span: Some(0),
        },
        SpanKind::Poll {
            async_span: Some(1),
        },
    );
    assert_eq!(kinds(0), [first, first, second, second]);
    assert_eq!(kinds(1), [first, SpanKind::Scope]);
    assert_eq!(trace.threads[1].spans[1].start_ns, 80);
}

#[test]
fn tracing_enters_waiting_long_for_their_close_are_matched_across_threads() {
    let call = CALL.id();
    let mut records = Vec::new();
    let slice = |records: &mut Vec<RawEvent>, span: u64, tick: u64| {
        records.extend(RawEvent::span_enter(call, tick, span));
        records.push(RawEvent::end(RawEvent::end_key(call, tick), tick + 5));
    };
    // Span 1 entered once, then more spans than a thread keeps waiting (their closes come
    // elsewhere, or never), then span 1 closed here; then its id used again, closed with
    // enters that may be elsewhere.
    slice(&mut records, 1, 10);
    for span in 2..=5000 {
        slice(&mut records, span, span * 10);
    }
    records.extend(RawEvent::span_close(0, 60_000, 1, true));
    slice(&mut records, 1, 60_010);
    records.extend(RawEvent::span_close(0, 70_000, 1, false));
    let trace = Capture::from_records(vec![(7, records)], 0, 80_000).decode();
    // Every span was entered once: plain scopes, no async call.
    assert!(trace.async_spans.is_empty());
    let spans = &trace.threads[0].spans;
    assert_eq!(spans.len(), 5001);
    assert!(spans.iter().all(|s| s.kind == SpanKind::Scope));
}

#[test]
fn a_salvaged_call_polled_on_several_threads_ends_no_later_than_it_can_have() {
    let call = CALL.id();
    let tagged =
        |kind: RawKind, tick: u64, span: u32| [ev(kind, call, tick), RawEvent::payload(span, 0)];
    let exit = |entered: u64, tick: u64| RawEvent::end(RawEvent::end_key(call, entered), tick);
    let poll = |tick: u64, span: u32, until: u64| -> Vec<RawEvent> {
        [
            tagged(RawKind::PollBegin, tick, span).to_vec(),
            vec![exit(tick, until)],
        ]
        .concat()
    };
    // Call 1 begins and is polled on thread 7, polled again on thread 8 from 20 to 22; its
    // end is lost. Thread 7's records stop at 40, thread 8's at 90: the end may have been on
    // thread 7 after 40, so the call is known to have lasted until 40, not until 90.
    let seven = [
        tagged(RawKind::AsyncBegin, 10, 1).to_vec(),
        poll(10, 1, 12),
        poll(30, 2, 40),
    ]
    .concat();
    let eight = [poll(20, 1, 22), poll(80, 3, 90)].concat();
    let mut capture = Capture::from_records(vec![(7, seven), (8, eight)], 0, 100);
    // Whole: the call is open at the window's end, as it was.
    let whole = capture.decode();
    let first = &whole.async_spans[0];
    assert_eq!(
        (first.start_ns, first.end_ns, first.open_at_stop),
        (10, 100, true)
    );
    // Salvaged: at the earliest of the threads' last records, past its last poll.
    capture.salvaged = Some(0);
    let trace = capture.decode();
    let first = &trace.async_spans[0];
    assert_eq!((first.start_ns, first.end_ns, first.polls), (10, 40, 2));
    assert!(first.open_at_stop);
    // A call whose last poll ends after every thread's last record but one: there.
    let seven = [tagged(RawKind::AsyncBegin, 10, 1).to_vec(), poll(10, 1, 12)].concat();
    let eight = [poll(50, 1, 60), poll(80, 3, 90)].concat();
    let mut capture = Capture::from_records(vec![(7, seven), (8, eight)], 0, 100);
    capture.salvaged = Some(0);
    let trace = capture.decode();
    assert_eq!(
        (trace.async_spans[0].start_ns, trace.async_spans[0].end_ns),
        (10, 60)
    );
}

#[test]
fn a_flight_window_start_common_to_every_thread_cuts_async_calls() {
    let call = CALL.id();
    let tagged =
        |kind: RawKind, tick: u64, span: u32| [ev(kind, call, tick), RawEvent::payload(span, 0)];
    let exit = |entered: u64, tick: u64| RawEvent::end(RawEvent::end_key(call, entered), tick);
    let poll = |tick: u64, span: u32, until: u64| -> Vec<RawEvent> {
        [
            tagged(RawKind::PollBegin, tick, span).to_vec(),
            vec![exit(tick, until)],
        ]
        .concat()
    };
    // Calls 1 to 3 begin on thread 7 before the window start, 50: 1 is polled and ends on
    // thread 8 in it, 2 only ends in it, 3 ends before it. Call 4 begins in it on thread 7
    // and is polled on 8, and call 5 begins before it on 8 and is polled on 7 in it; neither
    // ends.
    let seven = [
        tagged(RawKind::AsyncBegin, 10, 1).to_vec(),
        poll(10, 1, 12),
        tagged(RawKind::AsyncBegin, 20, 2).to_vec(),
        poll(20, 2, 22),
        tagged(RawKind::AsyncBegin, 30, 3).to_vec(),
        poll(30, 3, 31),
        tagged(RawKind::AsyncEnd, 40, 3).to_vec(),
        tagged(RawKind::AsyncBegin, 70, 4).to_vec(),
        poll(70, 4, 72),
        poll(90, 5, 91),
    ]
    .concat();
    let eight = [
        tagged(RawKind::AsyncBegin, 45, 5).to_vec(),
        poll(45, 5, 46),
        tagged(RawKind::AsyncEnd, 55, 2).to_vec(),
        poll(60, 1, 62),
        tagged(RawKind::AsyncEnd, 62, 1).to_vec(),
        poll(80, 4, 81),
    ]
    .concat();
    let capture = || Capture::from_records(vec![(7, seven.clone()), (8, eight.clone())], 0, 100);
    type Shape = (u64, u64, u32, u64, Option<u64>, bool, bool);
    let shapes = |trace: &Trace| -> Vec<Shape> {
        let shape = |c: &crate::trace::AsyncSpan| {
            (
                c.start_ns,
                c.end_ns,
                c.polls,
                c.thread,
                c.end_thread,
                c.cut_at_start,
                c.open_at_stop,
            )
        };
        trace.async_spans.iter().map(shape).collect()
    };
    let tasks = |trace: &Trace, t: usize| -> Vec<(u64, SpanKind)> {
        trace.threads[t]
            .spans
            .iter()
            .map(|s| (s.start_ns, s.kind))
            .collect()
    };
    let poll_of = |task: Option<u32>| SpanKind::Poll { async_span: task };

    // Every record counts: each call from its begin.
    let whole = capture().decode();
    assert_eq!(whole.cut_start_ns, None);
    assert_eq!(
        shapes(&whole),
        [
            (10, 62, 2, 7, Some(8), false, false),
            (20, 55, 1, 7, Some(8), false, false),
            (30, 40, 1, 7, Some(7), false, false),
            (45, 100, 2, 8, None, false, true),
            (70, 100, 2, 7, None, false, true),
        ]
    );

    // From the window start on: calls cut there first (in the order of their first record
    // in it), the whole ones after; the slices before it belong to no call.
    let mut cut = capture();
    cut.cut_start = Some(50);
    let trace = cut.decode();
    assert_eq!(trace.cut_start_ns, Some(50));
    assert_eq!(
        shapes(&trace),
        [
            (50, 55, 0, 8, Some(8), true, false),
            (50, 62, 1, 8, Some(8), true, false),
            (50, 100, 1, 7, None, true, true),
            (70, 100, 2, 7, None, false, true),
        ]
    );
    assert_eq!(
        tasks(&trace, 0),
        [
            (10, poll_of(None)),
            (20, poll_of(None)),
            (30, poll_of(None)),
            (70, poll_of(Some(3))),
            (90, poll_of(Some(2))),
        ]
    );
    assert_eq!(
        tasks(&trace, 1),
        [
            (45, poll_of(None)),
            (60, poll_of(Some(1))),
            (80, poll_of(Some(3)))
        ]
    );
    // The threads' slices and counts are those of the whole decoding.
    assert_eq!(trace.event_count, whole.event_count);
    for (t, w) in trace.threads.iter().zip(&whole.threads) {
        let times = |t: &crate::trace::ThreadTrace| -> Vec<(u64, u64)> {
            t.spans.iter().map(|s| (s.start_ns, s.end_ns)).collect()
        };
        assert_eq!(times(t), times(w));
    }
}

#[test]
fn tracing_follows_from_resolves_each_id_to_its_use_at_that_time() {
    let call = CALL.id();
    let enter = |span: u64, tick: u64| RawEvent::span_enter(call, tick, span);
    let exit = |tick_in: u64, tick: u64| RawEvent::end(RawEvent::end_key(call, tick_in), tick);
    let follows = |tick: u64, effect: u64, cause: u64| RawEvent::span_follows(tick, effect, cause);
    // Thread 7: span 5 entered at 10 and closed, its id used again by a span entered at 40;
    // span 6 entered at 30 and at 70 (an async call), never closed.
    let seven = [
        enter(5, 10).to_vec(),
        vec![exit(10, 20)],
        RawEvent::span_close(0, 25, 5, true).to_vec(),
        enter(6, 30).to_vec(),
        vec![exit(30, 35)],
        enter(5, 40).to_vec(),
        vec![exit(40, 50)],
        RawEvent::span_close(0, 60, 5, true).to_vec(),
        enter(6, 70).to_vec(),
        vec![exit(70, 80)],
    ]
    .concat();
    // Thread 8: span 9 follows from them, before its enters and during its second; span 99,
    // never entered, follows too; span 77 was never entered.
    let eight = [
        follows(5, 9, 6).to_vec(),
        follows(22, 9, 5).to_vec(),
        follows(36, 9, 6).to_vec(),
        follows(45, 9, 5).to_vec(),
        follows(46, 9, 77).to_vec(),
        follows(47, 99, 5).to_vec(),
        follows(55, 9, 5).to_vec(),
        enter(9, 100).to_vec(),
        vec![exit(100, 110)],
        enter(9, 120).to_vec(),
        follows(125, 9, 6).to_vec(),
        vec![exit(120, 130)],
    ]
    .concat();
    let trace = Capture::from_records(vec![(7, seven), (8, eight)], 0, 300).decode();
    let start = |at: SpanRef| trace.span(at).1.start_ns;
    let links: Vec<(u64, Option<u64>, u64, u32)> = trace
        .flows
        .iter()
        .map(|l| {
            (
                l.origin_ns.unwrap(),
                l.origin.map(start),
                start(l.follower),
                l.seq,
            )
        })
        .collect();
    assert_eq!(
        links,
        [
            // Before any enter of the cause: its first one.
            (5, Some(30), 100, 0),
            // The first use of id 5, not the second.
            (22, Some(10), 100, 0),
            (36, Some(30), 100, 0),
            // The enter in progress.
            (45, Some(40), 100, 0),
            (46, None, 100, 0),
            (55, Some(40), 100, 0),
            // The effect's enter in progress, the cause's last one before.
            (125, Some(70), 120, 0),
        ]
    );
    assert!(trace.flows.iter().all(|l| trace.span(l.follower).0.id == 8));
    let causes: Vec<u64> = trace.flows.iter().map(|l| l.origin_thread).collect();
    assert_eq!(causes, [7, 7, 7, 7, 0, 7, 7]);
}

/// Summed (the threads' spans let go a window at a time), the `follows_from`s of `tracing`
/// spans entered once, on the thread that closes them, are matched by a second reading of
/// the threads to the same flows as from the decoded spans: an id used again, a cause whose
/// slice is drained windows before the `follows_from` comes, an effect entered after it.
#[test]
fn summed_tracing_follows_from_give_the_decoded_flows() {
    let (call, step) = (CALL.id(), STEP.id());
    let enter = |span: u64, tick: u64| RawEvent::span_enter(call, tick, span);
    let exit = |tick_in: u64, tick: u64| RawEvent::end(RawEvent::end_key(call, tick_in), tick);
    let close = |span: u64, tick: u64| RawEvent::span_close(0, tick, span, true).to_vec();
    let steps = |from: u64, n: u64| -> Vec<RawEvent> {
        (0..n)
            .flat_map(|i| {
                let tick = from + 2 * i;
                [
                    RawEvent::begin(step, tick),
                    RawEvent::end(RawEvent::end_key(step, tick), tick + 1),
                ]
            })
            .collect()
    };
    // Thread 7: span 5 (10..20), 3,000 steps, span 6 (7_000..7_010) holding 2,000 steps, span
    // 5's id used again (20_000..20_010); each closed here.
    let seven = [
        enter(5, 10).to_vec(),
        vec![exit(10, 20)],
        close(5, 21),
        steps(100, 3_000),
        enter(6, 7_000).to_vec(),
        steps(7_001, 2_000),
        vec![exit(7_000, 12_000)],
        close(6, 12_001),
        enter(5, 20_000).to_vec(),
        vec![exit(20_000, 20_010)],
        close(5, 20_011),
    ]
    .concat();
    // Thread 8: 1,500 steps, then span 9 follows from 5 (the first), from 6 while it is in
    // progress, from 5 (the second) and from 77 (never entered), and is entered last.
    let eight = [
        steps(1, 1_500),
        RawEvent::span_follows(15, 9, 5).to_vec(),
        RawEvent::span_follows(8_000, 9, 6).to_vec(),
        RawEvent::span_follows(20_005, 9, 5).to_vec(),
        RawEvent::span_follows(20_006, 9, 77).to_vec(),
        enter(9, 30_000).to_vec(),
        vec![exit(30_000, 30_010)],
        close(9, 30_011),
    ]
    .concat();
    let capture = Capture::from_records(vec![(7, seven), (8, eight)], 0, 40_000);
    let trace = capture.decode();
    assert_eq!(trace.flows.len(), 4);
    let origins: Vec<Option<u32>> = trace
        .flows
        .iter()
        .map(|f| f.origin.map(|o| o.span))
        .collect();
    assert_eq!(origins, [Some(0), Some(3_001), Some(5_002), None]);
    let summary = Summary::of(&[&capture]).expect("summed");
    assert_eq!(summary.trace.flows, trace.flows);
    // Each origin's callsite, which a table split by origin names a follower's row after.
    let sites: Vec<Option<&str>> = (trace.flows.iter())
        .map(|f| {
            f.origin
                .map(|o| trace.threads[o.thread as usize].spans[o.span as usize].name())
        })
        .collect();
    assert_eq!(sites, [Some("call"), Some("call"), Some("call"), None]);
    let summed: Vec<Option<&str>> = (summary.origin_sites.iter())
        .map(|site| site.map(Callsite::name))
        .collect();
    assert_eq!(summed, sites);
    assert!(summary.threads.iter().all(|t| t.spans > summary::WINDOW));
}

/// Every record a decoding takes is counted for progress displays (other tests decode at the
/// same time, so the count grows by at least this capture's records).
#[test]
fn decoding_counts_the_records_it_takes() {
    let step = STEP.id();
    let events: Vec<RawEvent> = (0..100u64)
        .flat_map(|i| {
            let tick = 10 + 2 * i;
            [
                RawEvent::begin(step, tick),
                RawEvent::end(RawEvent::end_key(step, tick), tick + 1),
            ]
        })
        .collect();
    let capture = Capture::from_records(vec![(7, events)], 0, 1000);
    assert_eq!(capture.record_count(), 200);
    let before = decoded_records();
    let trace = capture.decode();
    assert_eq!(trace.threads[0].spans.len(), 100);
    assert!(decoded_records() - before >= 200);
}

/// Random nested scopes, handed over in pieces wherever [`Pairing::can_carry`] allows (the
/// open scopes carried into the next piece), give each span once, in the piece where it
/// ends, as the whole thread's pairing gives it: times, parents (in the thread), children's
/// time and overhead; and a pairing carrying pieces keeps only the open spans between them.
#[test]
fn pieces_carrying_open_scopes_give_the_whole_threads_spans() {
    use super::pair::Probe;
    use crate::decode::pieces::Piece;
    use crate::trace::Span;
    let callsites: [&'static Callsite; 2] = [&CALL, &STEP];
    let probe = Probe {
        inner: 300,
        outer: 200,
    };
    let (mut carried_total, mut pieces_total) = (0, 0);
    for seed in 1..60u64 {
        let mut next = crate::record::test_random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (mut records, mut open, mut t) = (Vec::new(), Vec::<(u32, u64)>::new(), 0u64);
        for _ in 0..3_000 {
            t += next(4);
            if open.is_empty() || (open.len() < 10 && next(2) == 0) {
                let id = 1 + next(2) as u32;
                records.push(RawEvent::begin(id, t));
                open.push((id, t));
            } else {
                let (id, at) = open.pop().unwrap();
                records.push(RawEvent::end(RawEvent::end_key(id, at), t));
            }
        }
        let pairing = |marks, links| pairing_of(&callsites, probe, marks, links);
        let (mut marks, mut links) = (Vec::new(), Links::default());
        let mut whole = pairing(&mut marks, &mut links);
        records.iter().for_each(|&r| whole.push(r));
        let (_, whole, ..) = whole.finish(t + 5);
        let (mut marks, mut links) = (Vec::new(), Links::default());
        let mut pieces = pairing(&mut marks, &mut links);
        let mut got: Vec<Option<Span>> = vec![None; whole.len()];
        let mut take = |piece: Piece<'_>| {
            for (i, span) in (0..).zip(piece.spans) {
                if piece.is_open(i) {
                    assert_eq!(span.end_ns, u64::MAX);
                    continue;
                }
                let at = piece.index(i) as usize;
                assert!(got[at].is_none(), "seed {seed}: span {at} twice");
                got[at] = Some(Span {
                    parent: span.parent.map(|p| piece.index(p)),
                    ..span.clone()
                });
            }
            carried_total += piece.carried.len();
            pieces_total += 1;
        };
        for &record in &records {
            pieces.push(record);
            assert!(!pieces.tangled());
            if pieces.can_carry() && next(5) == 0 {
                pieces.drain_piece(&mut take);
                assert_eq!(pieces.kept(), pieces.open_count(), "seed {seed}");
            }
        }
        pieces.close_rest(t + 5);
        pieces.drain_piece(&mut take);
        let got: Vec<Span> = got.into_iter().map(Option::unwrap).collect();
        assert_eq!(got, whole, "seed {seed}");
    }
    assert!(pieces_total > 10_000, "{pieces_total} pieces");
    assert!(carried_total > 20_000, "{carried_total} spans carried");
}

/// An argument recorded for an outer scope after a child scope began comes after the child's
/// in the records; decoding puts the arguments in span order (each span's in recorded order),
/// so that `ThreadTrace::args_of` finds both.
#[test]
fn arguments_recorded_late_for_an_outer_scope_are_found() {
    use super::pair::Probe;
    static KEY: Callsite = Callsite::new("k", file!(), line!(), module_path!());
    // Ids: 1 call, 2 step, 3 k.
    let callsites: [&'static Callsite; 3] = [&CALL, &STEP, &KEY];
    let (mut marks, mut links) = (Vec::new(), Links::default());
    let mut pairing = pairing_of(&callsites, Probe::default(), &mut marks, &mut links);
    let arg = |value: u64| RawEvent {
        tick: value,
        id: 3,
        kind: RawKind::ArgU64,
    };
    for record in [
        RawEvent::begin(1, 10),
        arg(1),
        RawEvent::begin(2, 11),
        arg(2),
        RawEvent::end(RawEvent::end_key(2, 11), 12),
        // For `call`, the innermost open scope again.
        RawEvent::begin(2, 13),
        RawEvent::end(RawEvent::end_key(2, 13), 14),
        arg(3),
        RawEvent::end(RawEvent::end_key(1, 10), 15),
    ] {
        pairing.push(record);
    }
    let (_, spans, _, args, _) = pairing.finish(100);
    let thread = crate::trace::ThreadTrace {
        process: 0,
        id: 1,
        name: None,
        spans,
        memory: Vec::new(),
        args,
    };
    let values = |span: u32| -> Vec<String> {
        (thread.args_of(span).iter())
            .map(|a| format!("{}={}", a.key, a.value))
            .collect()
    };
    assert_eq!(values(0), ["k=1", "k=3"]);
    assert_eq!(values(1), ["k=2"]);
    assert!(values(2).is_empty());
}

/// A memory event as [`streamed`] gives it: time, process, thread, kind, size, live bytes
/// after it, scope.
type Streamed = (u64, u32, u64, MemoryKind, u64, u64, Option<&'static str>);

/// The memory events `source` streams, with their live bytes (`matched` left out: the
/// stream does not say it).
fn streamed(source: &dyn pieces::SpanSource, process: Option<u32>) -> Vec<Streamed> {
    let mut got = Vec::new();
    source
        .each_memory_event(process, &mut |e, live| {
            got.push((
                e.ns,
                e.process,
                e.thread,
                e.kind,
                e.size,
                live,
                e.scope_name(),
            ));
            Ok(())
        })
        .unwrap();
    got
}

#[test]
fn a_memory_timeline_merged_as_threads_are_read_is_the_decoded_one() {
    let step = STEP.id();
    // Three threads of a pseudo-random walk over 40 addresses: allocations and frees on equal
    // ticks across threads, frees of blocks allocated elsewhere, of blocks never allocated,
    // and allocations at an address still live; each thread's events in tick order, inside
    // and outside scopes, over many pieces.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut threads = Vec::new();
    for id in 1..=3u64 {
        let mut records = Vec::new();
        let mut tick = 10;
        for _ in 0..6_000 {
            tick += next() % 3;
            let r = next();
            if r % 5 == 0 {
                records.push(RawEvent::begin(step, tick));
                records.push(RawEvent::end(RawEvent::end_key(step, tick), tick + 1));
                continue;
            }
            let kind = if r % 2 == 0 {
                RawKind::Alloc
            } else {
                RawKind::Free
            };
            let address = 0x1000 + (next() % 40) * 64;
            let open = r % 3 == 0;
            if open {
                records.push(RawEvent::begin(step, tick));
            }
            records.extend(RawEvent::memory(kind, 16 + next() % 100, address, tick));
            if open {
                records.push(RawEvent::end(RawEvent::end_key(step, tick), tick));
            }
        }
        threads.push((id, records));
    }
    let capture = Capture::from_records(threads.clone(), 0, 100_000);
    let captures = [&capture];
    let whole = Trace::from_captures(captures);
    let pieces = pieces::Pieces::with_memory(&captures).expect("in time order");
    assert_eq!(pieces::SpanSource::memory_processes(&pieces).len(), 1);
    let expected = streamed(&whole, None);
    assert_eq!(expected.len(), whole.memory.as_ref().unwrap().events.len());
    assert!(expected.len() > 10_000);
    assert!(expected.iter().any(|e| e.6.is_some()) && expected.iter().any(|e| e.6.is_none()));
    assert_eq!(streamed(&pieces, None), expected);
    assert_eq!(streamed(&pieces, Some(0)), expected);
    assert!(streamed(&pieces, Some(1)).is_empty());

    // A thread whose allocations go back in time (a forged file) cannot be merged as read:
    // such captures are decoded whole.
    let mut forged = threads;
    forged[1]
        .1
        .extend(RawEvent::memory(RawKind::Alloc, 8, 0x9000, 11));
    let forged = Capture::from_records(forged, 0, 100_000);
    assert!(pieces::Pieces::with_memory(&[&forged]).is_none());
}

#[test]
fn forged_memory_records_stream_and_sum_as_decoded() {
    use RawKind::{Alloc, Free};
    let (call, step) = (CALL.id(), STEP.id());
    let (a, b, c) = (0xa000, 0xb000, 0xc000);
    let mem = |kind, size, address, tick| RawEvent::memory(kind, size, address, tick);
    // Thread 1: a size that saturates the live bytes, an orphan payload, an allocation cut
    // from its payload, an address reused on one tick, counted allocations in a timeline,
    // an allocation at a live address (its free lost), one outside every scope.
    let mut one = vec![RawEvent::begin(step, 10)];
    one.extend(mem(Alloc, 100, a, 10));
    one.extend(mem(Alloc, u64::MAX - 5, b, 10));
    one.push(RawEvent::payload(0, 0x1234));
    one.push(RawEvent::new(Alloc, 3, 12));
    one.push(RawEvent::begin(call, 12));
    one.extend(mem(Free, 100, a, 12));
    one.extend(mem(Alloc, 7, a, 12));
    one.extend(RawEvent::memory_counts((2, 300), (1, 100), 250));
    one.push(RawEvent::end(RawEvent::end_key(call, 12), 13));
    one.extend(mem(Free, u64::MAX - 5, b, 14));
    one.push(RawEvent::end(RawEvent::end_key(step, 10), 15));
    one.extend(mem(Alloc, 5, c, 15));
    one.extend(mem(Alloc, 9, a, 16));
    // Thread 2, on the same ticks: a free of a block thread 1 allocated on the same tick, a
    // free of one never allocated, an allocation inside a scope open at the end, and a free
    // cut from its payload at the end.
    let mut two = vec![RawEvent::begin(call, 9)];
    two.extend(mem(Free, 100, a, 10));
    two.extend(mem(Free, 1, 0xdead, 11));
    two.extend(mem(Alloc, 64, a, 12));
    two.extend(mem(Free, 5, c, 16));
    two.push(RawEvent::new(Free, 64, 17));
    // Thread 3 has no allocation; thread 4 no record in the window.
    let three = vec![
        RawEvent::begin(step, 11),
        RawEvent::end(RawEvent::end_key(step, 11), 12),
    ];
    let four = mem(Alloc, 8, 0xf000, 500).to_vec();
    let capture = |pid: u32| {
        let threads = vec![
            (1, one.clone()),
            (2, two.clone()),
            (3, three.clone()),
            (4, four.clone()),
        ];
        let mut capture = Capture::from_records(threads, 0, 100);
        capture.header.process_id = pid;
        capture
    };
    let (first, second, again) = (capture(1), capture(2), capture(1));
    let sets: [&[&Capture]; 4] = [
        &[&first],
        &[&first, &second],
        &[&first, &first],
        &[&second, &first, &again],
    ];
    for (set, captures) in sets.into_iter().enumerate() {
        let whole = Trace::from_captures(captures.iter().copied());
        let pieces = pieces::Pieces::with_memory(captures).expect("in time order");
        let expected = streamed(&whole, None);
        // 7 and 4 a capture: those cut from their payload are not.
        assert_eq!(expected.len(), 11 * captures.len(), "set {set}");
        assert_eq!(streamed(&pieces, None), expected, "set {set}");
        for p in 0..whole.processes.len() as u32 {
            assert_eq!(
                streamed(&pieces, Some(p)),
                streamed(&whole, Some(p)),
                "set {set}"
            );
        }
        let summary = Summary::of(captures).expect("summed");
        // The allocations live at the end, by scope, as the decoded timeline lists them.
        let mut live: crate::record::hash::FxHashMap<Option<&str>, (u64, u64)> = Default::default();
        for alloc in whole.memory.as_ref().unwrap().live_at_stop() {
            let (allocs, bytes) = live.entry(alloc.scope_name()).or_default();
            *allocs += 1;
            *bytes = bytes.saturating_add(alloc.size);
        }
        assert!(live.len() >= 2, "set {set}");
        assert_eq!(summary.live_at_end.0, live, "set {set}");
        // Each thread's memory figures by callsite, as its decoded spans have them.
        let sites = summary.threads.iter().flat_map(|t| &t.sites);
        assert!(
            sites.filter(|s| s.memory.self_allocs == 3).count() == captures.len(),
            "set {set}"
        );
        for (sums, thread) in summary.threads.iter().zip(&whole.threads) {
            for site in &sums.sites {
                let mut decoded = crate::trace::MemoryStats::default();
                (thread.spans.iter().zip(&thread.memory))
                    .filter(|(span, _)| std::ptr::eq(span.callsite, site.callsite))
                    .for_each(|(_, stats)| decoded.add(stats));
                assert_eq!(site.memory, decoded, "set {set}");
            }
        }
    }
}
