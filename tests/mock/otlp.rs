//! OTLP traces (cargo feature `otlp`): the exact mapping of a trace recorded under a mock
//! clock whose ticks are nanoseconds, folding and sampling with every span counted, instants
//! and counter samples as span events, our own encoder's bytes against prost's for the
//! reference messages, the OTLP/JSON file, and pushes to a test server on 127.0.0.1 (written
//! here with std::net): retries, `Retry-After`, a 500 then success, a 413 split, a refused
//! connection, a timeout, and four processes in one push.
#![cfg(feature = "enabled")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use crate::common::{YieldOnce, mock, poll_once, serial};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::Event;
use prost::Message;
use tickscope::export::otlp::{
    EVENTS_SPAN_NAME, Endpoint, Options, Otlp, PushErrorKind, PushOptions, PushReport, Stats,
};
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, counter, instant, profile, scope};

/// A [`Stats`] with these counts and 0 for the others (the struct is `#[non_exhaustive]`:
/// built from its default, field by field).
macro_rules! stats {
    ($($field:ident: $value:expr),* $(,)?) => {{
        let mut stats = Stats::default();
        $(stats.$field = $value;)*
        stats
    }};
}

/// A recording of `work` on this thread under the mock clock.
fn record(work: impl FnOnce(&tickscope::clock::Mock)) -> Profiler {
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    work(&m);
    prof.stop();
    prof
}

/// `main(user, n, ratio, ok) { parse { tokenize 10 } parse { tokenize 20 } }`, 1 ns between.
fn workload(m: &tickscope::clock::Mock) {
    m.increment(5u64);
    let _main = scope!(
        "main",
        user = "ann",
        n = 3u64,
        ratio = 0.5,
        ok = true,
        d = -2i32
    );
    m.increment(2u64);
    for d in [10u64, 20] {
        let _parse = scope!("parse");
        m.increment(3u64);
        let _t = scope!("tokenize");
        m.increment(d);
    }
    m.increment(1u64);
}

fn all_spans(requests: &[ExportTraceServiceRequest]) -> Vec<&Span> {
    requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .collect()
}

fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn int(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attributes, key)? {
        Any::IntValue(v) => Some(*v),
        other => panic!("{key} is {other:?}"),
    }
}

fn text<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attr(attributes, key)? {
        Any::StringValue(v) => Some(v),
        other => panic!("{key} is {other:?}"),
    }
}

fn by_id<'a>(spans: &[&'a Span], id: &[u8]) -> &'a Span {
    spans
        .iter()
        .find(|s| s.span_id == id)
        .expect("a span of that id")
}

/// The name of each span's parent ("" for a root).
fn parent_names(spans: &[&Span]) -> Vec<(String, String)> {
    spans
        .iter()
        .map(|s| {
            let parent = if s.parent_span_id.is_empty() {
                String::new()
            } else {
                by_id(spans, &s.parent_span_id).name.clone()
            };
            (s.name.clone(), parent)
        })
        .collect()
}

#[test]
fn scopes_map_to_spans_exactly() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new().service_name("svc"));
    assert_eq!(
        otlp.stats(),
        stats! {
            sent: 5,
            folded: 0,
            sampled_out: 0,
            links: 0,
            events: 0,
            events_sampled_out: 0,
            event_spans: 0,
        }
    );
    let requests: Vec<_> = otlp.requests().collect();
    assert_eq!(requests.len(), 1);
    let resource_spans = &requests[0].resource_spans;
    assert_eq!(resource_spans.len(), 1);
    let resource = &resource_spans[0].resource.as_ref().unwrap().attributes;
    let process = trace.process();
    assert_eq!(text(resource, "service.name"), Some("svc"));
    assert_eq!(int(resource, "process.pid"), Some(i64::from(process.id)));
    assert_eq!(text(resource, "telemetry.sdk.name"), Some("tickscope"));
    assert_eq!(
        text(resource, "telemetry.sdk.version"),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(text(resource, "host.name"), Some(process.host.as_str()));
    let scope = resource_spans[0].scope_spans[0].scope.as_ref().unwrap();
    assert_eq!(
        (scope.name.as_str(), scope.version.as_str()),
        ("tickscope", env!("CARGO_PKG_VERSION"))
    );

    let spans = all_spans(&requests);
    let t0 = trace.start_ns;
    let times: Vec<(&str, u64, u64)> = spans
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.start_time_unix_nano - t0,
                s.end_time_unix_nano - t0,
            )
        })
        .collect();
    assert_eq!(
        times,
        // In the order they end: each after the spans inside it.
        [
            ("tokenize", 10, 20),
            ("parse", 7, 20),
            ("tokenize", 23, 43),
            ("parse", 20, 43),
            ("main", 5, 5 + 2 + 13 + 23 + 1),
        ]
    );
    let parents: Vec<(String, String)> = parent_names(&spans);
    let expect: Vec<(String, String)> = [
        ("tokenize", "parse"),
        ("parse", "main"),
        ("tokenize", "parse"),
        ("parse", "main"),
        ("main", ""),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(parents, expect);
    // The second tokenize's parent is the second parse.
    assert_eq!(spans[2].parent_span_id, spans[3].span_id);
    // Unique, non-zero 8-byte span ids; one 16-byte trace id for the one root.
    let mut ids: Vec<&[u8]> = spans.iter().map(|s| s.span_id.as_slice()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 5);
    assert!(
        ids.iter()
            .all(|id| id.len() == 8 && id.iter().any(|&b| b != 0))
    );
    assert!(spans.iter().all(|s| s.trace_id == spans[0].trace_id));
    assert_eq!(spans[0].trace_id.len(), 16);

    let main = &spans[4].attributes;
    assert_eq!(text(main, "user"), Some("ann"));
    assert_eq!(int(main, "n"), Some(3));
    assert_eq!(attr(main, "ratio"), Some(&Any::DoubleValue(0.5)));
    assert_eq!(attr(main, "ok"), Some(&Any::BoolValue(true)));
    assert_eq!(int(main, "d"), Some(-2));
    assert_eq!(int(main, "thread.id"), Some(trace.threads[0].id as i64));
    assert_eq!(text(main, "thread.name"), trace.threads[0].name.as_deref());
    assert_eq!(text(main, "code.function"), Some("main"));
    assert_eq!(text(main, "code.filepath"), Some(file!()));
    assert_eq!(
        int(main, "code.lineno"),
        Some(i64::from(trace.threads[0].spans[0].callsite.line()))
    );
    assert_eq!(attr(main, "tickscope.open_at_stop"), None);
    assert_eq!(attr(main, "tickscope.folded.count"), None);
    // Memory tracking is off: no allocation attributes.
    assert_eq!(attr(main, "tickscope.alloc.bytes"), None);
}

#[test]
fn short_and_deep_scopes_fold_with_exact_totals() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    // tokenize (10 and 20 ns) under 12 ns: the first folds into its parse (13 ns, kept).
    let otlp = Otlp::new(
        &trace,
        &Options::new().min_duration(Duration::from_nanos(12)),
    );
    assert_eq!(
        (otlp.stats().sent, otlp.stats().folded, otlp.stats().total()),
        (4, 1, 5)
    );
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["parse", "tokenize", "parse", "main"]);
    assert_eq!(int(&spans[0].attributes, "tickscope.folded.count"), Some(1));
    assert_eq!(int(&spans[0].attributes, "tickscope.folded.ns"), Some(10));
    assert_eq!(int(&spans[2].attributes, "tickscope.folded.count"), None);

    // Depth 0 only: everything folds into main, its children's time exact (13 + 23 ns).
    let otlp = Otlp::new(&trace, &Options::new().max_depth(0));
    assert_eq!((otlp.stats().sent, otlp.stats().folded), (1, 4));
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    assert_eq!(spans.len(), 1);
    assert_eq!(int(&spans[0].attributes, "tickscope.folded.count"), Some(4));
    assert_eq!(
        int(&spans[0].attributes, "tickscope.folded.ns"),
        Some(13 + 23)
    );
    let main = &trace.threads[0].spans[0];
    assert_eq!(main.children_ns, 13 + 23);
}

#[test]
fn roots_are_sampled_and_counted() {
    let _serial = serial();
    let prof = record(|m| {
        for _ in 0..5 {
            let _root = scope!("root");
            m.increment(4u64);
            let _leaf = scope!("leaf");
            m.increment(1u64);
        }
    });
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new().sample_roots(2));
    // Roots 1, 3 and 5 kept with their leaf; 2 and 4 out with theirs.
    assert_eq!(
        otlp.stats(),
        stats! {
            sent: 6,
            folded: 0,
            sampled_out: 4,
            links: 0,
            events: 0,
            events_sampled_out: 0,
            event_spans: 0,
        }
    );
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    assert_eq!(spans.len(), 6);
    // One trace per root; one per process with the option.
    let mut traces: Vec<&[u8]> = spans.iter().map(|s| s.trace_id.as_slice()).collect();
    traces.sort_unstable();
    traces.dedup();
    assert_eq!(traces.len(), 3);
    let otlp = Otlp::new(&trace, &Options::new().trace_per_process(true));
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    assert_eq!(spans.len(), 10);
    assert!(spans.iter().all(|s| s.trace_id == spans[0].trace_id));
}

#[test]
fn links_arguments_memory_and_the_open_at_stop_mark() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder()
        .current_thread()
        .track_memory(true)
        .start();
    let link = {
        let _origin = scope!("origin");
        m.increment(2u64);
        tickscope::link()
    };
    {
        let _follower = scope!("follower", follows = link);
        drop(std::hint::black_box(vec![1u8; 100]));
        m.increment(3u64);
    }
    let open = scope!("open");
    m.increment(4u64);
    prof.stop();
    drop(open);
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new());
    assert_eq!(otlp.stats().links, 1);
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["origin", "follower", "open"]);
    let (origin, follower, open) = (spans[0], spans[1], spans[2]);
    assert_eq!(follower.links.len(), 1);
    assert_eq!(follower.links[0].span_id, origin.span_id);
    assert_eq!(follower.links[0].trace_id, origin.trace_id);
    assert_eq!(
        int(&follower.links[0].attributes, "tickscope.link.seq"),
        Some(i64::from(trace.flows[0].seq))
    );
    // Memory: the follower allocated 100 bytes once.
    assert_eq!(
        int(&follower.attributes, "tickscope.alloc.bytes"),
        Some(100)
    );
    assert_eq!(int(&follower.attributes, "tickscope.alloc.count"), Some(1));
    assert_eq!(int(&origin.attributes, "tickscope.alloc.bytes"), Some(0));
    // Open at stop: closed at the stop, marked.
    assert_eq!(
        attr(&open.attributes, "tickscope.open_at_stop"),
        Some(&Any::BoolValue(true))
    );
    assert_eq!(open.end_time_unix_nano, trace.end_ns);
    assert_eq!(open.end_time_unix_nano - open.start_time_unix_nano, 4);
    assert_eq!(attr(&follower.attributes, "tickscope.open_at_stop"), None);
}

#[profile]
async fn fetch(m: Arc<tickscope::clock::Mock>) -> u32 {
    m.increment(10u64);
    YieldOnce::default().await;
    {
        let _g = scope!("decode");
        m.increment(5u64);
    }
    7
}

#[test]
fn an_async_call_is_one_span_with_its_polls_as_children() {
    let _serial = serial();
    let m = mock();
    let prof = Profiler::builder().current_thread().start();
    {
        let _run = scope!("run");
        let mut fut = Box::pin(fetch(m.clone()));
        assert_eq!(poll_once(fut.as_mut()), Poll::Pending);
        m.increment(100u64);
        assert_eq!(poll_once(fut.as_mut()), Poll::Ready(7));
    }
    prof.stop();
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new());
    assert_eq!(otlp.stats().sent, 5);
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    let mut parents = parent_names(&spans);
    parents.sort();
    assert_eq!(
        parents,
        [
            ("decode", "fetch poll"),
            ("fetch", "run"),
            ("fetch poll", "fetch"),
            ("fetch poll", "fetch"),
            ("run", ""),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let call = spans.iter().find(|s| s.name == "fetch").unwrap();
    assert_eq!(
        call.end_time_unix_nano - call.start_time_unix_nano,
        10 + 100 + 5
    );
    assert_eq!(int(&call.attributes, "tickscope.async.polls"), Some(2));
    assert_eq!(int(&call.attributes, "tickscope.async.busy_ns"), Some(15));
    assert!(spans.iter().all(|s| s.trace_id == call.trace_id));
}

#[test]
fn the_json_file_holds_one_request_per_line() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new().batch_spans(2));
    let requests: Vec<_> = otlp.requests().collect();
    assert_eq!(requests.len(), 3);
    let dir = std::env::temp_dir().join(format!("tickscope-otlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.otlp.json");
    assert_eq!(otlp.write_json(&path).unwrap(), otlp.stats());
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    let read: Vec<ExportTraceServiceRequest> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(read, requests);
    // OTLP/JSON: hex ids, camelCase fields, ns times as strings or numbers.
    let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    let span = &first["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    let hex: String = requests[0].resource_spans[0].scope_spans[0].spans[0]
        .trace_id
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(span["traceId"], hex.as_str());
    assert_eq!(span["name"], "tokenize");
}

#[test]
fn batches_respect_the_byte_limit() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    let one = Otlp::new(&trace, &Options::new())
        .requests()
        .next()
        .unwrap();
    let limit = one.encoded_len() / 2;
    let otlp = Otlp::new(&trace, &Options::new().max_batch_bytes(limit));
    let requests: Vec<_> = otlp.requests().collect();
    assert!(requests.len() >= 2);
    assert!(requests.iter().all(|r| r.encoded_len() <= limit));
    assert_eq!(all_spans(&requests).len(), 5);
}

/// An event as the tests compare it: name, time after its span's start, attributes as text.
type EventText<'a> = (&'a str, u64, Vec<(String, String)>);

/// The events of `span`.
fn events_of(span: &Span) -> Vec<EventText<'_>> {
    span.events
        .iter()
        .map(|e: &Event| {
            let attributes = e
                .attributes
                .iter()
                .map(|kv| {
                    let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(Any::IntValue(v)) => format!("int {v}"),
                        Some(Any::DoubleValue(v)) => format!("double {v}"),
                        Some(Any::StringValue(v)) => format!("str {v}"),
                        Some(Any::BoolValue(v)) => format!("bool {v}"),
                        other => panic!("{other:?}"),
                    };
                    (kv.key.clone(), v)
                })
                .collect();
            (
                e.name.as_str(),
                e.time_unix_nano - span.start_time_unix_nano,
                attributes,
            )
        })
        .collect()
}

fn kvs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Instants and counter samples around and inside `a { b }`. A span is open from the tick
/// it starts at: the clock moves on between an event and the next span's start.
fn with_events(m: &tickscope::clock::Mock) {
    m.increment(5u64);
    instant!("boot", process);
    counter!("queue", set = 2);
    m.increment(1u64);
    {
        let _a = scope!("a");
        m.increment(3u64);
        instant!("hit", key = 7u64, table = "users");
        m.increment(1u64);
        {
            let _b = scope!("b");
            m.increment(2u64);
            counter!("queue", add = 3);
            instant!("flush", process);
            m.increment(1u64);
        }
        m.increment(4u64);
        counter!("load", set = 0.5);
        m.increment(1u64);
    }
    m.increment(2u64);
    instant!("late");
}

#[test]
fn instants_and_counter_samples_are_span_events_on_the_innermost_open_span() {
    let _serial = serial();
    let prof = record(with_events);
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new());
    assert_eq!(
        otlp.stats(),
        stats! {
            sent: 2,
            folded: 0,
            sampled_out: 0,
            links: 0,
            events: 7,
            events_sampled_out: 0,
            event_spans: 1,
        }
    );
    assert_eq!(otlp.stats().request_spans(), 3);
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["b", "a", EVENTS_SPAN_NAME]);
    let (a, b, outside) = (spans[1], spans[0], spans[2]);
    assert_eq!(
        events_of(a),
        [
            ("hit", 3, kvs(&[("key", "int 7"), ("table", "str users")])),
            (
                "load",
                11,
                kvs(&[
                    ("tickscope.counter.value", "double 0.5"),
                    ("tickscope.counter.op", "str set"),
                    ("tickscope.counter.amount", "double 0.5"),
                ])
            ),
        ]
    );
    assert_eq!(
        events_of(b),
        [
            // Equal times: instants first, then counter samples.
            (
                "flush",
                2,
                kvs(&[("tickscope.instant.scope", "str process")])
            ),
            (
                "queue",
                2,
                kvs(&[
                    ("tickscope.counter.value", "int 5"),
                    ("tickscope.counter.op", "str add"),
                    ("tickscope.counter.amount", "int 3"),
                ])
            ),
        ]
    );
    // Outside every span: the process's span over the whole window, thread ids on events.
    let thread = format!("int {}", trace.threads[0].id);
    assert_eq!(outside.start_time_unix_nano, trace.start_ns);
    assert_eq!(outside.end_time_unix_nano, trace.end_ns);
    assert!(outside.parent_span_id.is_empty());
    assert_eq!(
        attr(&outside.attributes, "tickscope.events_outside_spans"),
        Some(&Any::BoolValue(true))
    );
    let at = |e: &Event| e.time_unix_nano as i64 - a.start_time_unix_nano as i64;
    let outside_events: Vec<_> = outside
        .events
        .iter()
        .map(|e| (e.name.as_str(), at(e)))
        .collect();
    // boot and queue=2 1 ns before a, late 2 ns after a ended (12 ns).
    assert_eq!(outside_events, [("boot", -1), ("queue", -1), ("late", 14)]);
    assert_eq!(
        events_of(outside)[0].2,
        kvs(&[
            ("thread.id", thread.as_str()),
            ("tickscope.instant.scope", "str process")
        ])
    );
    // Exact Unix ns: the trace's own times.
    assert_eq!(
        b.events[1].time_unix_nano,
        trace
            .instants
            .iter()
            .find(|i| i.name() == "flush")
            .unwrap()
            .ns
    );
    // Our encoder writes the same.
    let ours: Vec<Vec<u8>> = otlp.encode_requests().collect();
    let reference: Vec<Vec<u8>> = requests.iter().map(|r| r.encode_to_vec()).collect();
    assert_eq!(ours, reference);
}

#[test]
fn events_follow_their_span_when_it_is_folded_or_sampled_out() {
    let _serial = serial();
    let prof = record(|m| {
        with_events(m);
        m.increment(1u64);
        // A second root, sampled out by sample_roots(2), with one instant.
        let _c = scope!("c");
        m.increment(1u64);
        instant!("gone");
        m.increment(1u64);
    });
    let trace = prof.trace();
    // b (3 ns) folds into a: its two events go with it.
    let otlp = Otlp::new(
        &trace,
        &Options::new()
            .min_duration(Duration::from_nanos(5))
            .sample_roots(2),
    );
    let stats = otlp.stats();
    assert_eq!(
        (
            stats.sent,
            stats.folded,
            stats.sampled_out,
            stats.events,
            stats.events_sampled_out,
            stats.event_spans
        ),
        (1, 1, 1, 7, 1, 1)
    );
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", EVENTS_SPAN_NAME]);
    let on_a: Vec<(&str, u64)> = events_of(spans[0])
        .into_iter()
        .map(|(n, t, _)| (n, t))
        .collect();
    assert_eq!(on_a, [("hit", 3), ("flush", 6), ("queue", 6), ("load", 11)]);
    let ours: Vec<Vec<u8>> = otlp.encode_requests().collect();
    let reference: Vec<Vec<u8>> = requests.iter().map(|r| r.encode_to_vec()).collect();
    assert_eq!(ours, reference);
}

#[profile]
async fn fetch_more(m: Arc<tickscope::clock::Mock>) -> u32 {
    m.increment(3u64);
    YieldOnce::default().await;
    let _g = scope!("decode", bytes = 12u64);
    instant!("decoded");
    m.increment(2u64);
    9
}

/// Everything the mapping knows, on two threads: arguments of every type, a link, an async
/// call with two polls, memory, instants and counters,
/// short scopes to fold, several roots to sample, a scope open at stop.
fn everything() -> Trace {
    let m = mock();
    let prof = Profiler::builder().track_memory(true).start();
    m.increment(5u64);
    let link = {
        let _main = scope!(
            "main",
            user = "ann",
            empty = "",
            n = 3u64,
            big = u64::MAX,
            ratio = 0.5,
            zero = 0.0,
            ok = true,
            no = false,
            d = -2i32
        );
        m.increment(2u64);
        for d in [1u64, 20] {
            let _parse = scope!("parse", d = d);
            m.increment(3u64);
            let _t = scope!("tokenize");
            drop(std::hint::black_box(vec![0u8; 64]));
            m.increment(d);
            counter!("tokens", add = d);
        }
        instant!("parsed", process, ok = true);
        tickscope::link()
    };
    let m2 = m.clone();
    std::thread::Builder::new()
        .name("worker".into())
        .spawn(move || {
            let _w = scope!("work", follows = link);
            m2.increment(4u64);
            let _x = scope!("late_link");
            counter!("load", set = 1.25);
            m2.increment(1u64);
        })
        .unwrap()
        .join()
        .unwrap();
    {
        let _run = scope!("run");
        let mut fut = Box::pin(fetch_more(m.clone()));
        assert_eq!(poll_once(fut.as_mut()), Poll::Pending);
        m.increment(50u64);
        assert_eq!(poll_once(fut.as_mut()), Poll::Ready(9));
    }
    for _ in 0..3 {
        let _root = scope!("root");
        m.increment(2u64);
    }
    counter!("tokens", set = -1);
    let open = scope!("open");
    m.increment(4u64);
    prof.stop();
    drop(open);
    // The same capture as if three processes (on two hosts) had written it.
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    let mut all = Vec::new();
    for pid in [7u32, 8, 9] {
        let mut one = bytes.clone();
        one[20..24].copy_from_slice(&pid.to_le_bytes());
        all.extend_from_slice(&one);
    }
    Trace::from_captures(&Capture::from_bytes(&all).unwrap())
}

#[test]
fn our_encoder_writes_the_bytes_prost_writes_for_the_reference_messages() {
    let _serial = serial();
    let trace = everything();
    assert_eq!(trace.processes.len(), 3);
    let workers = trace
        .threads
        .iter()
        .filter(|t| t.name.as_deref() == Some("worker"));
    assert_eq!(workers.count(), 3);
    assert_eq!(trace.async_spans.len(), 3);
    assert!(trace.memory.is_some());
    let one = Otlp::new(&trace, &Options::new());
    let stats = one.stats();
    // Per process: main, 2 parse, 2 tokenize, work, late_link, run, fetch, 2 polls, decode,
    // 3 roots, open; 2 counter samples and an instant in main, 1 in work, 1 instant in the
    // poll, 1 counter sample outside every span.
    assert_eq!(
        (stats.sent, stats.links, stats.events, stats.event_spans),
        (3 * 16, 3, 3 * 6, 3)
    );
    assert_eq!(trace.flows.len(), 3);
    let size = one.requests().map(|r| r.encoded_len()).max().unwrap();
    let cases = [
        Options::new().service_name("svc"),
        Options::new().min_duration(Duration::from_nanos(3)),
        Options::new().max_depth(1),
        Options::new().sample_roots(2),
        Options::new().trace_per_process(true).batch_spans(5),
        Options::new().max_batch_bytes(size / 4),
        Options::new().max_batch_bytes(1),
    ];
    for options in &cases {
        let otlp = Otlp::new(&trace, options);
        let reference: Vec<ExportTraceServiceRequest> = otlp.requests().collect();
        let ours: Vec<Vec<u8>> = otlp.encode_requests().collect();
        assert_eq!(ours.len(), reference.len(), "{options:?}");
        for (bytes, request) in ours.iter().zip(&reference) {
            // The messages decoded from our bytes are the reference's, and so are the bytes.
            let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
            assert_eq!(&decoded, request, "{options:?}");
            assert_eq!(bytes, &request.encode_to_vec(), "{options:?}");
        }
        let spans = all_spans(&reference).len() as u64;
        assert_eq!(spans, otlp.stats().request_spans(), "{options:?}");
    }
    // What the cases cover: every attribute type, a link, events, folding, the cut mark.
    let otlp = Otlp::new(&trace, &cases[1]);
    let requests: Vec<_> = otlp.requests().collect();
    let spans = all_spans(&requests);
    let main = spans.iter().find(|s| s.name == "main").unwrap();
    assert_eq!(
        attr(&main.attributes, "big"),
        Some(&Any::StringValue(u64::MAX.to_string()))
    );
    assert_eq!(attr(&main.attributes, "zero"), Some(&Any::DoubleValue(0.0)));
    assert_eq!(attr(&main.attributes, "no"), Some(&Any::BoolValue(false)));
    assert_eq!(
        attr(&main.attributes, "empty"),
        Some(&Any::StringValue("".into()))
    );
    assert_eq!(int(&main.attributes, "d"), Some(-2));
    assert!(otlp.stats().folded > 0);
    assert!(spans.iter().any(|s| !s.links.is_empty()));
    assert!(spans.iter().any(|s| !s.events.is_empty()));
    assert!(spans.iter().any(|s| s.name == "fetch_more poll"));
    let open = spans.iter().find(|s| s.name == "open").unwrap();
    assert_eq!(
        attr(&open.attributes, "tickscope.open_at_stop"),
        Some(&Any::BoolValue(true))
    );
}

// ---- pushes to a test server ----

/// One scripted answer: status, extra headers, and a pause before answering.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: &'static str,
    pause: Duration,
}

fn answer(status: u16) -> Answer {
    Answer {
        status,
        headers: "",
        pause: Duration::ZERO,
    }
}

/// A test OTLP/HTTP server on 127.0.0.1: answers each request with the next scripted answer
/// (200 once the script is done) and keeps the decoded requests it answered with 200.
struct Server {
    endpoint: String,
    received: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    paths: Arc<Mutex<Vec<String>>>,
    /// The bodies answered with 200, as sent (gzipped).
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Server {
    fn start(script: Vec<Answer>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (r, p, b) = (received.clone(), paths.clone(), bodies.clone());
        std::thread::spawn(move || {
            let mut script = script.into_iter();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let answer = script.next().unwrap_or(answer(200));
                serve(stream, &answer, &r, &p, &b);
            }
        });
        Self {
            endpoint,
            received,
            paths,
            bodies,
        }
    }

    fn bodies(&self) -> Vec<Vec<u8>> {
        self.bodies.lock().unwrap().clone()
    }

    fn requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.received.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    answer: &Answer,
    received: &Mutex<Vec<ExportTraceServiceRequest>>,
    paths: &Mutex<Vec<String>>,
    bodies: &Mutex<Vec<Vec<u8>>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    paths
        .lock()
        .unwrap()
        .push(line.split_whitespace().nth(1).unwrap_or("").to_owned());
    let mut length = 0;
    let mut gzip = false;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        let header = header.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        if let Some(v) = header.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        gzip |= header == "content-encoding: gzip";
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    assert!(gzip, "the body is gzipped");
    std::thread::sleep(answer.pause);
    if answer.status == 200 {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(body.as_slice())
            .read_to_end(&mut plain)
            .unwrap();
        received
            .lock()
            .unwrap()
            .push(ExportTraceServiceRequest::decode(plain.as_slice()).unwrap());
        bodies.lock().unwrap().push(body);
    }
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {} X\r\ncontent-length: 4\r\nconnection: close\r\n{}\r\nnope",
        answer.status, answer.headers
    );
}

fn fast() -> PushOptions {
    PushOptions::new()
        .timeout(Duration::from_secs(20))
        .backoff(Duration::from_millis(10), Duration::from_secs(2))
}

#[test]
fn a_push_sends_every_span_to_v1_traces() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    let server = Server::start(vec![]);
    let otlp = Otlp::new(&trace, &Options::new().batch_spans(2));
    let report = otlp
        .push(server.endpoint.as_str(), &fast().header("x-team", "a"))
        .unwrap();
    assert_eq!(
        (report.accepted_spans, report.requests, report.retries),
        (5, 3, 0)
    );
    assert_eq!(server.requests(), otlp.requests().collect::<Vec<_>>());
    assert_eq!(*server.paths.lock().unwrap(), ["/v1/traces"; 3]);
}

#[test]
fn retried_statuses_back_off_and_honour_retry_after() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    let server = Server::start(vec![
        answer(503),
        Answer {
            status: 429,
            headers: "retry-after: 1\r\n",
            pause: Duration::ZERO,
        },
        answer(502),
    ]);
    let otlp = Otlp::new(&trace, &Options::new());
    let report = otlp.push(server.endpoint.as_str(), &fast()).unwrap();
    assert_eq!((report.accepted_spans, report.retries), (5, 3));
    // 10 ms, then the server's 1 s, then 40 ms (doubled twice).
    assert_eq!(report.waited, Duration::from_millis(10 + 1000 + 40));
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_500_then_success_is_retried_and_a_lasting_500_is_a_clear_error() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new());
    // A 500, then success: tried again after the first backoff.
    let server = Server::start(vec![answer(500)]);
    let report = otlp.push(server.endpoint.as_str(), &fast()).unwrap();
    assert_eq!(
        (report.accepted_spans, report.requests, report.retries),
        (5, 1, 1)
    );
    assert_eq!(report.waited, Duration::from_millis(10));
    assert_eq!(server.requests(), otlp.requests().collect::<Vec<_>>());
    // 500 past the retries (2: three tries): the last status is the error.
    let server = Server::start(vec![answer(500); 3]);
    let err = otlp
        .push(server.endpoint.as_str(), &fast().retries(2))
        .unwrap_err();
    let url = format!("{}/v1/traces", server.endpoint);
    assert_eq!(
        err.kind(),
        &PushErrorKind::Status {
            status: 500,
            body: "nope".into()
        }
    );
    assert_eq!(err.to_string(), format!("{url} answered HTTP 500: nope"));
    assert_eq!(err.endpoint(), url);
    assert_eq!(err.accepted_spans(), 0);
    assert!(server.requests().is_empty());
    // Run again: the server now accepts.
    let report = otlp.push(server.endpoint.as_str(), &fast()).unwrap();
    assert_eq!((report.accepted_spans, report.retries), (5, 0));
    // A status that is not retried fails at once.
    let server = Server::start(vec![answer(400)]);
    let err = otlp.push(server.endpoint.as_str(), &fast()).unwrap_err();
    assert_eq!(
        err.kind(),
        &PushErrorKind::Status {
            status: 400,
            body: "nope".into()
        }
    );
    let report = otlp.push(server.endpoint.as_str(), &fast()).unwrap();
    assert_eq!((report.accepted_spans, report.retries), (5, 0));
}

#[test]
fn a_413_splits_the_batch_and_a_single_span_is_a_clear_error() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    let server = Server::start(vec![answer(413), answer(413)]);
    let otlp = Otlp::new(&trace, &Options::new());
    let report = otlp.push(server.endpoint.as_str(), &fast()).unwrap();
    // 5 spans → 413; 2 + 3; the 2 → 413; 1 + 1; then the 3.
    assert_eq!(
        (report.accepted_spans, report.requests, report.splits),
        (5, 3, 2)
    );
    let names: Vec<String> = all_spans(&server.requests())
        .iter()
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(names, ["tokenize", "parse", "tokenize", "parse", "main"]);

    let server = Server::start(vec![answer(413); 10]);
    let otlp = Otlp::new(&trace, &Options::new().batch_spans(1));
    let err = otlp.push(server.endpoint.as_str(), &fast()).unwrap_err();
    assert!(
        matches!(err.kind(), PushErrorKind::TooLarge { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("413"), "{err}");
}

#[test]
fn a_refused_connection_and_a_timeout_are_clear_errors() {
    let _serial = serial();
    let prof = record(workload);
    let trace = prof.trace();
    let otlp = Otlp::new(&trace, &Options::new());
    // A port that was free a moment ago.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let err = otlp.push(endpoint.as_str(), &fast()).unwrap_err();
    assert!(matches!(err.kind(), PushErrorKind::Connect(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot connect to {endpoint}/v1/traces: ")),
        "{err}"
    );

    let server = Server::start(vec![Answer {
        status: 200,
        headers: "",
        pause: Duration::from_secs(3),
    }]);
    let err = otlp
        .push(
            server.endpoint.as_str(),
            &fast().timeout(Duration::from_millis(200)),
        )
        .unwrap_err();
    assert_eq!(err.kind(), &PushErrorKind::Timeout);
    assert_eq!(
        err.to_string(),
        format!(
            "{}/v1/traces did not answer in time (timeout)",
            server.endpoint
        )
    );

    let err = otlp
        .push(
            Endpoint::traces("https://example.invalid/v1/traces"),
            &fast(),
        )
        .unwrap_err();
    assert!(matches!(err.kind(), PushErrorKind::Config(_)), "{err}");
}

#[test]
fn four_processes_push_as_four_resources_with_every_span() {
    let _serial = serial();
    let prof = record(workload);
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    // The same capture as if four processes had written it: the session header's pid.
    let mut all = Vec::new();
    for pid in [101u32, 102, 103, 104] {
        let mut one = bytes.clone();
        assert_eq!(&one[..4], b"TSCP");
        one[20..24].copy_from_slice(&pid.to_le_bytes());
        all.extend_from_slice(&one);
    }
    let captures = Capture::from_bytes(&all).unwrap();
    assert_eq!(captures.len(), 4);
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.processes.len(), 4);
    let server = Server::start(vec![]);
    let otlp = Otlp::new(&trace, &Options::new().batch_spans(7));
    let report = otlp.push(server.endpoint.as_str(), &fast()).unwrap();
    assert_eq!(report.accepted_spans, 20);
    let mut per_pid: BTreeMap<i64, usize> = BTreeMap::new();
    for request in server.requests() {
        for resource in &request.resource_spans {
            let pid = int(
                &resource.resource.as_ref().unwrap().attributes,
                "process.pid",
            )
            .unwrap();
            *per_pid.entry(pid).or_default() += resource.scope_spans[0].spans.len();
        }
    }
    assert_eq!(
        per_pid,
        BTreeMap::from([(101, 5), (102, 5), (103, 5), (104, 5)])
    );
}

// ---- pushes from captures, piece by piece ----

/// What a push reported after each request: accepted spans, requests, splits, wire bytes.
type Steps = Vec<(u64, u64, u64, u64)>;

/// Pushes `captures` whole (`Otlp::new(&trace, ..).push_with_progress`) and from captures
/// (`Otlp::push_from_captures`) to two servers answering with `script`, checks that they
/// received the same bodies (gzipped protobuf, byte for byte), that each body is prost's
/// encoding of its request, and that the reports are the same after each request and at the
/// end; returns the report and the requests.
fn push_both(
    captures: &[Capture],
    options: &Options,
    script: Vec<Answer>,
) -> (PushReport, Vec<ExportTraceServiceRequest>) {
    let trace = Trace::from_captures(captures);
    let whole_server = Server::start(script.clone());
    let mut whole_steps: Steps = Vec::new();
    let whole = Otlp::new(&trace, options)
        .push_with_progress(whole_server.endpoint.as_str(), &fast(), |r| {
            whole_steps.push((r.accepted_spans, r.requests, r.splits, r.wire_bytes));
        })
        .unwrap();
    drop(trace);
    let refs: Vec<&Capture> = captures.iter().collect();
    let server = Server::start(script);
    let mut steps: Steps = Vec::new();
    let report = Otlp::push_from_captures(&refs, options, server.endpoint.as_str(), &fast(), |r| {
        steps.push((r.accepted_spans, r.requests, r.splits, r.wire_bytes));
    })
    .unwrap();
    assert_eq!(report, whole);
    assert_eq!(steps, whole_steps);
    let (bodies, whole_bodies) = (server.bodies(), whole_server.bodies());
    assert_eq!(bodies.len(), whole_bodies.len());
    for (a, b) in bodies.iter().zip(&whole_bodies) {
        assert!(a == b, "{}", crate::common::first_difference(a, b));
    }
    let requests = server.requests();
    assert_eq!(requests, whole_server.requests());
    // Our encoder's bytes are prost's: the plain bodies are the requests' prost encodings.
    for (body, request) in bodies.iter().zip(&requests) {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(body.as_slice())
            .read_to_end(&mut plain)
            .unwrap();
        assert!(plain == request.encode_to_vec());
    }
    assert_eq!(report.accepted_spans, report.stats.request_spans());
    assert_eq!(
        report.wire_bytes,
        bodies.iter().map(|b| b.len() as u64).sum::<u64>()
    );
    (report, requests)
}

/// The capture of `otlp_carry`: one thread inside `main` over 20,013 scopes.
fn carried() -> Vec<Capture> {
    crate::otlp_carry::record()
}

/// The capture of `workload`, read back.
fn recorded() -> Vec<Capture> {
    let _serial = serial();
    let prof = record(workload);
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    Capture::from_bytes(&bytes).unwrap()
}

/// `captures` as if each of `pids` had written them (the session header's pid).
fn as_processes(captures: &[Capture], pids: &[u32]) -> Vec<Capture> {
    let mut bytes = Vec::new();
    for capture in captures {
        capture.write_to(&mut bytes).unwrap();
    }
    let mut all = Vec::new();
    for pid in pids {
        let mut one = bytes.clone();
        assert_eq!(&one[..4], b"TSCP");
        one[20..24].copy_from_slice(&pid.to_le_bytes());
        all.extend_from_slice(&one);
    }
    Capture::from_bytes(&all).unwrap()
}

#[test]
fn a_push_from_captures_sends_the_whole_pushes_requests() {
    let captures = recorded();
    let (report, requests) = push_both(&captures, &Options::new().batch_spans(2), vec![]);
    assert_eq!(
        (report.accepted_spans, report.requests, report.splits),
        (5, 3, 0)
    );
    assert_eq!(report.processes, 1);
    let names: Vec<&str> = all_spans(&requests)
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["tokenize", "parse", "tokenize", "parse", "main"]);
}

#[test]
fn a_push_from_captures_of_a_scope_open_over_its_thread_sends_the_whole_pushes_requests() {
    let captures = carried();
    let spans = crate::otlp_carry::SPANS;
    // Every span, and the span of the events outside spans, in requests of 8,192 spans.
    let (report, requests) = push_both(&captures, &Options::new(), vec![]);
    assert_eq!(
        (report.accepted_spans, report.requests, report.splits),
        (spans + 1, 3, 0)
    );
    assert_eq!(requests.len(), 3);
    // Batches by count and by bytes; folding, sampling, one trace per process.
    let (report, _) = push_both(&captures, &Options::new().batch_spans(1_000), vec![]);
    assert_eq!((report.accepted_spans, report.requests), (spans + 1, 21));
    let (report, _) = push_both(&captures, &Options::new().max_batch_bytes(64 << 10), vec![]);
    assert_eq!((report.accepted_spans, report.requests), (spans + 1, 102));
    let options = Options::new()
        .min_duration(Duration::from_nanos(3))
        .max_depth(3)
        .sample_roots(2)
        .trace_per_process(true);
    let (report, _) = push_both(&captures, &options, vec![]);
    assert_eq!(report.accepted_spans, 10_009);
}

/// Links between threads (origins on a later thread, an earlier one, the same one, and one
/// outside every scope) pushed from pieces: the whole push's requests, with every link.
#[test]
fn a_push_from_captures_of_links_between_threads_sends_the_whole_pushes_requests() {
    let captures = crate::pieces_links::linked("links-push.tscope");
    let (report, requests) = push_both(&captures, &Options::new().batch_spans(1_000), vec![]);
    assert_eq!(report.stats.links, 5_060);
    let spans = all_spans(&requests);
    let links: usize = spans.iter().map(|s| s.links.len()).sum();
    assert_eq!(links, 5_060);
    let options = Options::new()
        .max_depth(0)
        .sample_roots(2)
        .max_batch_bytes(64 << 10);
    let (report, _) = push_both(&captures, &options, vec![]);
    assert!(report.stats.links < 5_060, "{report:?}");
    // Two processes, each with its links.
    let two = as_processes(&captures, &[7, 8]);
    let (report, _) = push_both(&two, &Options::new().max_depth(1), vec![]);
    assert_eq!((report.processes, report.stats.links), (2, 2 * 5_060));
}

#[test]
fn a_push_from_captures_splits_on_413_as_the_whole_push_does() {
    let captures = carried();
    let spans = crate::otlp_carry::SPANS;
    // The first request (2,000 spans) → 413: 1,000 + 1,000, each → 413: 500 + 500.
    let script = vec![
        answer(413),
        answer(413),
        answer(200),
        answer(200),
        answer(413),
    ];
    let options = Options::new().batch_spans(2_000);
    let (report, requests) = push_both(&captures, &options, script);
    assert_eq!(
        (report.accepted_spans, report.requests, report.splits),
        (spans + 1, 14, 3)
    );
    let sizes: Vec<usize> = requests
        .iter()
        .map(|r| all_spans(std::slice::from_ref(r)).len())
        .collect();
    assert_eq!(sizes[..5], [500, 500, 500, 500, 2_000]);
    // A status that is not retried on the third request stops both pushes there: the same
    // error, after the same 4,000 spans.
    let refs: Vec<&Capture> = captures.iter().collect();
    let trace = Trace::from_captures(&captures);
    let script = vec![answer(200), answer(200), answer(400)];
    let server = Server::start(script.clone());
    let whole = Otlp::new(&trace, &options)
        .push(server.endpoint.as_str(), &fast())
        .unwrap_err();
    let server = Server::start(script);
    let from_pieces =
        Otlp::push_from_captures(&refs, &options, server.endpoint.as_str(), &fast(), |_| {})
            .unwrap_err();
    assert_eq!(from_pieces.kind(), whole.kind());
    assert_eq!(
        (from_pieces.accepted_spans(), whole.accepted_spans()),
        (4_000, 4_000)
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_push_from_captures_of_several_processes_sends_the_whole_pushes_requests() {
    let captures = recorded();
    let four = as_processes(&captures, &[101, 102, 103, 104]);
    let script = vec![answer(413)];
    let (report, requests) = push_both(&four, &Options::new().batch_spans(7), script);
    assert_eq!(
        (
            report.accepted_spans,
            report.requests,
            report.splits,
            report.processes
        ),
        (20, 4, 1, 4)
    );
    // 7 spans → 413: 3 + 4; then 7 and 6: 1, 2, 2 and 2 resources.
    let resources: usize = requests.iter().map(|r| r.resource_spans.len()).sum();
    assert_eq!(resources, 7);
    // Three processes of a thread inside one scope over 6,001 spans; batches across them,
    // a 413 on the first.
    let three = as_processes(&spanning(3_000), &[201, 202, 203]);
    let options = Options::new().batch_spans(4_000);
    let (report, requests) = push_both(&three, &options, vec![answer(413)]);
    assert_eq!(
        (
            report.accepted_spans,
            report.requests,
            report.splits,
            report.processes
        ),
        (3 * 6_001, 6, 1, 3)
    );
    let sizes: Vec<usize> = requests
        .iter()
        .map(|r| all_spans(std::slice::from_ref(r)).len())
        .collect();
    assert_eq!(sizes, [2_000, 2_000, 4_000, 4_000, 4_000, 2_003]);
    // With events outside spans: each process's span of them after its spans.
    let two = as_processes(&carried(), &[301, 302]);
    let (report, _) = push_both(&two, &Options::new().batch_spans(3_000), vec![]);
    assert_eq!(
        (report.accepted_spans, report.processes),
        (2 * (crate::otlp_carry::SPANS + 1), 2)
    );
}

/// `captures`, written one after the other, each with its pid in `pids`, read back as one
/// file of several processes.
fn with_pids(captures: &[(Vec<Capture>, u32)]) -> Vec<Capture> {
    let mut all = Vec::new();
    for (captures, pid) in captures {
        let mut one = Vec::new();
        for capture in captures {
            capture.write_to(&mut one).unwrap();
        }
        assert_eq!(&one[..4], b"TSCP");
        one[20..24].copy_from_slice(&pid.to_le_bytes());
        all.extend_from_slice(&one);
    }
    Capture::from_bytes(&all).unwrap()
}

/// One thread with events inside and outside its spans: `serve { got }` ten times, a
/// counter sample outside them first and an instant outside them last.
fn served() -> Vec<Capture> {
    let _serial = serial();
    let prof = record(|m| {
        m.increment(2u64);
        counter!("depth", set = 1);
        m.increment(1u64);
        for i in 0..10u64 {
            let _serve = scope!("serve", i = i);
            m.increment(2u64);
            instant!("got", i = i);
            counter!("depth", add = 1);
            m.increment(3u64);
        }
        m.increment(1u64);
        instant!("done");
    });
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    Capture::from_bytes(&bytes).unwrap()
}

/// The capture of `with_events`, read back.
fn eventful() -> Vec<Capture> {
    let _serial = serial();
    let prof = record(with_events);
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    Capture::from_bytes(&bytes).unwrap()
}

/// Three processes with instants and counter samples on their spans and outside them: the
/// span of each process's events outside spans is sent after that process's spans and
/// numbered as the whole trace numbers them (the process whose first event outside spans
/// comes first has the first), in the same requests; and OTLP/JSON from captures is the
/// whole trace's, byte for byte.
#[test]
fn a_push_from_captures_of_processes_with_events_sends_the_whole_pushes_requests() {
    // Recorded in this order on the mock clock: the last process's events come first.
    let early = eventful();
    let long = carried();
    let late = served();
    let three = with_pids(&[(long, 401), (late, 402), (early, 403)]);
    let trace = Trace::from_captures(&three);
    assert_eq!(trace.processes.len(), 3);
    // Instants: `carried`'s boot, 4 between, 20 tick, 50 checkpoint and last; `served`'s 10
    // got and done; `eventful`'s 4.
    assert_eq!(
        (trace.instants.len(), trace.counters.len()),
        (76 + 11 + 4, 3 + 1 + 2)
    );
    let spans = crate::otlp_carry::SPANS + 10 + 2;
    // Each span sent: its process and whether it holds events outside spans, and its id.
    let sent = |requests: &[ExportTraceServiceRequest]| -> Vec<(i64, bool, Vec<u8>)> {
        let mut sent = Vec::new();
        for request in requests {
            for resource in &request.resource_spans {
                let attributes = &resource.resource.as_ref().unwrap().attributes;
                let pid = int(attributes, "process.pid").unwrap();
                for span in &resource.scope_spans[0].spans {
                    let holder = span.name == EVENTS_SPAN_NAME;
                    sent.push((pid, holder, span.span_id.clone()));
                }
            }
        }
        sent
    };
    for (options, sampled) in [
        (Options::new().batch_spans(3_000), false),
        (Options::new().batch_spans(7), false),
        (Options::new().max_batch_bytes(64 << 10), false),
        (
            Options::new()
                .min_duration(Duration::from_nanos(3))
                .max_depth(2)
                .sample_roots(2)
                .trace_per_process(true),
            true,
        ),
    ] {
        let (report, requests) = push_both(&three, &options, vec![]);
        assert_eq!(report.processes, 3);
        assert_eq!(report.stats.event_spans, 3);
        if !sampled {
            assert_eq!(report.accepted_spans, spans + 3);
        }
        // Process by process, each one's span of events outside spans after its spans.
        let sent = sent(&requests);
        let pids: Vec<i64> = sent.iter().map(|s| s.0).collect();
        assert!(pids.is_sorted(), "{pids:?}");
        let found: Vec<&(i64, bool, Vec<u8>)> = sent.iter().filter(|s| s.1).collect();
        assert_eq!(found.len(), 3);
        let last_of = |pid: i64| sent.iter().rposition(|s| s.0 == pid).unwrap();
        for (holder, pid) in found.iter().zip([401, 402, 403]) {
            assert_eq!(holder.0, pid);
            assert!(std::ptr::eq(*holder, &sent[last_of(pid)]));
        }
        // Numbered after every span, the last process's first (its event outside spans
        // comes first), then the first's, then the second's (only a counter sample before
        // its last instant).
        let number = |id: &[u8]| u64::from_be_bytes(id.try_into().unwrap()) & 0xffff_ffff;
        let numbers: Vec<u64> = found.iter().map(|h| number(&h.2)).collect();
        assert_eq!(numbers, [spans + 2, spans + 3, spans + 1]);
        // OTLP/JSON from captures: the whole trace's bytes.
        let refs: Vec<&Capture> = three.iter().collect();
        let mut from_pieces = Vec::new();
        let stats = Otlp::write_json_from_captures(&refs, &options, &mut from_pieces).unwrap();
        let whole = Otlp::new(&trace, &options);
        let mut bytes = Vec::new();
        whole.write_json_to(&mut bytes).unwrap();
        assert!(
            from_pieces == bytes,
            "{}",
            crate::common::first_difference(&from_pieces, &bytes)
        );
        assert_eq!(stats, whole.stats());
    }
}

/// One thread: `main { request { parse } × n }`, read back.
fn spanning(n: u64) -> Vec<Capture> {
    let _serial = serial();
    let prof = record(|m| {
        let _main = scope!("main");
        m.increment(1u64);
        for i in 0..n {
            let _request = scope!("request", i = i);
            m.increment(i % 3);
            let _parse = scope!("parse");
            m.increment(2u64);
        }
    });
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    Capture::from_bytes(&bytes).unwrap()
}
