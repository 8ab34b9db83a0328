//! The `tracing` bridge: spans, fields, follows_from, events, async instrumented futures and
//! filters, each test under its own session limited to its threads.
#![cfg(feature = "tracing")]

use tickscope::Profiler;
use tickscope::trace::{SpanKind, Trace};
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer as _};

thread_local! {
    /// Set by the tests of module `subscriber`: [`dispatch`] is the tickscope subscriber.
    static OWN_SUBSCRIBER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The subscriber of the tests: the registry and the tickscope layer, or the tickscope
/// subscriber (this thread's `Dispatch` of it) in the tests of module `subscriber`.
fn dispatch() -> tracing::Dispatch {
    if OWN_SUBSCRIBER.get() {
        return tickscope::tracing::dispatch();
    }
    tracing::Dispatch::new(tracing_subscriber::registry().with(tickscope::tracing::layer()))
}

/// The tests of the bridge again, each under the tickscope subscriber (`tickscope::tracing::
/// subscriber()`, no registry) rather than the registry and the layer; all but those of the
/// layer alone (filters and layers stacked with it, its alignment) and one that a callsite's
/// history decides.
mod subscriber {
    macro_rules! under_subscriber {
        ($($test:ident),* $(,)?) => {
            $(
                #[test]
                fn $test() {
                    super::OWN_SUBSCRIBER.set(true);
                    super::$test();
                }
            )*
        };
    }

    under_subscriber!(
        span_names_nesting_and_counts,
        fields_and_recorded_values_are_arguments,
        events_are_instants_with_their_fields,
        metric_fields_of_events_are_counter_and_value_samples,
        follows_from_is_a_link_with_a_flow,
        instrumented_async_fns_under_tokio_multi_thread,
        parallel_tests_with_their_own_sessions_see_only_their_spans,
        follows_from_a_plain_span_created_here_is_seen_by_its_enter_here,
        a_span_id_used_again_after_its_close_is_another_span,
        a_span_entered_on_two_threads_is_one_async_call,
        deep_nesting_and_guards_dropped_out_of_order,
        no_session_records_nothing_and_spans_still_work,
        a_span_whose_id_comes_back_while_nothing_records_keeps_its_own_name,
        snapshot_while_spans_are_open_and_the_streamed_table,
        metric_fields_of_odd_types,
        a_value_recorded_while_a_child_span_is_innermost_is_not_the_childs,
        sessions_starting_and_stopping_while_a_span_is_entered,
        a_value_recorded_again_replaces_the_earlier_one,
        a_span_back_from_another_thread_and_closed_where_it_was_made,
        a_batch_follows_from_requests_entered_on_other_threads,
        a_batch_following_requests_of_other_threads_is_written_in_pieces,
        by_arg_splits_tracing_async_calls_by_their_fields,
        spans_with_fields_entered_on_one_thread_are_decoded_in_pieces,
    );
    // Not `events_are_named_by_their_static_message_else_by_target_and_line`: how a callsite's
    // events are named depends on the events of that callsite before, in the process.
}

/// Names of the spans of thread `t` with their depth, in order of entry.
fn spans(trace: &Trace, t: usize) -> Vec<(&'static str, u32)> {
    trace.threads[t]
        .spans
        .iter()
        .map(|s| (s.name(), s.depth))
        .collect()
}

/// A tokio runtime of `workers` threads, each joined to `prof` and keeping `dispatch` as its
/// subscriber until it exits.
fn runtime(
    workers: usize,
    prof: &Profiler,
    dispatch: &tracing::Dispatch,
) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .on_thread_start({
            let prof = prof.clone();
            let dispatch = dispatch.clone();
            move || {
                prof.join_current_thread();
                std::mem::forget(tracing::dispatcher::set_default(&dispatch));
            }
        })
        .build()
        .unwrap()
}

/// The session's capture written to bytes and read back, without warnings.
fn read_back(prof: &Profiler) -> Vec<tickscope::Capture> {
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    let read = tickscope::Capture::from_bytes(&bytes).unwrap();
    assert!(read[0].warnings().is_empty(), "{:?}", read[0].warnings());
    read
}

/// The arguments of span `i` of thread `t`, as `key=value` strings.
fn args(trace: &Trace, t: usize, i: u32) -> Vec<String> {
    trace.threads[t]
        .args_of(i)
        .iter()
        .map(|a| format!("{}={}", a.key, a.value))
        .collect()
}

#[test]
fn span_names_nesting_and_counts() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    for _ in 0..3 {
        let _outer = tracing::info_span!("outer").entered();
        let _g = tickscope::scope!("native");
        tracing::debug_span!(target: "my::target", "inner").in_scope(|| {});
    }
    prof.stop();

    let report = prof.report();
    assert_eq!(report.get("outer").unwrap().calls, 3);
    assert_eq!(report.get("inner").unwrap().calls, 3);
    assert_eq!(report.get("native").unwrap().calls, 3);
    assert_eq!(report.len(), 3);

    let trace = prof.trace();
    assert_eq!(trace.threads.len(), 1);
    let one = [("outer", 0), ("native", 1), ("inner", 2)];
    assert_eq!(spans(&trace, 0), [one, one, one].concat());
    // Spans entered once are plain scopes.
    assert!(trace.async_spans.is_empty());
    let inner = &trace.threads[0].spans[2];
    assert_eq!(inner.kind, SpanKind::Scope);
    assert_eq!(inner.callsite.module_path(), "my::target");
    assert!(inner.callsite.file().ends_with("tracing_bridge.rs"));
}

#[test]
fn fields_and_recorded_values_are_arguments() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    {
        let span = tracing::info_span!(
            "load",
            file = "a.png",
            bytes = 4096u64,
            delta = -3i64,
            ok = true,
            kind = ?Some(1),
            size = tracing::field::Empty,
        );
        let entered = span.enter();
        span.record("size", 77u64);
        drop(entered);
        // Entered again: the recorded value is now one of the span's own fields.
        span.in_scope(|| {});
    }
    prof.stop();

    let trace = prof.trace();
    assert_eq!(spans(&trace, 0), [("load", 0), ("load", 0)]);
    let first = args(&trace, 0, 0);
    assert_eq!(
        first,
        [
            "file=a.png",
            "bytes=4096",
            "delta=-3",
            "ok=true",
            "kind=Some(1)",
            "size=77"
        ]
    );
    assert_eq!(args(&trace, 0, 1), first);
    // Entered twice: one call, two slices (the first enter's slice is its first poll).
    assert_eq!(trace.async_spans.len(), 1);
    let call = &trace.async_spans[0];
    assert_eq!(call.polls, 2);
    let slices = &trace.threads[0].spans;
    assert_eq!(call.start_ns, slices[0].start_ns);
    assert!(call.end_ns >= slices[1].end_ns);
    let poll = SpanKind::Poll {
        async_span: Some(0),
    };
    assert!(slices.iter().all(|s| s.kind == poll));
    let report = prof.report();
    let row = report.get("load").unwrap();
    assert_eq!((row.calls, row.total_ns), (1, call.duration_ns()));
}

#[test]
fn events_are_instants_with_their_fields() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    let line = line!() + 3;
    tracing::info_span!("work").in_scope(|| {
        let when = "now";
        tracing::info!(items = 3u64, "done {}", when);
    });
    prof.stop();

    let trace = prof.trace();
    assert_eq!(spans(&trace, 0), [("work", 0)]);
    assert_eq!(trace.instants.len(), 1);
    let event = &trace.instants[0];
    // A formatted message: named by target and line.
    assert_eq!(event.name(), format!("{}:{line}", module_path!()));
    assert_eq!(event.scope, tickscope::trace::InstantScope::Thread);
    assert_eq!(event.thread, trace.threads[0].id);
    let work = &trace.threads[0].spans[0];
    assert!(work.start_ns <= event.ns && event.ns <= work.end_ns);
    let args: Vec<String> = event.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(args, ["message=done now", "items=3"]);
}

#[test]
fn metric_fields_of_events_are_counter_and_value_samples() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    for i in 0..3u64 {
        // The `tracing-opentelemetry` names: counters add, histograms sample.
        tracing::info!(
            monotonic_counter.requests = 1u64,
            counter.queue = -2i64,
            histogram.latency_ms = 1.5 * i as f64,
            route = "/a",
            "served"
        );
    }
    prof.stop();

    let trace = prof.trace();
    let track = |name: &str| trace.counters.iter().find(|c| c.name == name).unwrap();
    use tickscope::trace::Number;
    let values =
        |name: &str| -> Vec<Number> { track(name).samples.iter().map(|s| s.value).collect() };
    assert_eq!(
        values("requests"),
        [Number::Int(1), Number::Int(2), Number::Int(3)]
    );
    assert_eq!(
        values("queue"),
        [Number::Int(-2), Number::Int(-4), Number::Int(-6)]
    );
    let latency = trace
        .values
        .iter()
        .find(|v| v.name == "latency_ms")
        .unwrap();
    let samples: Vec<Number> = latency.samples.iter().map(|s| s.value).collect();
    assert_eq!(
        samples,
        [Number::Float(0.0), Number::Float(1.5), Number::Float(3.0)]
    );
    // The other fields stay the instants' arguments.
    assert_eq!(trace.instants.len(), 3);
    for event in &trace.instants {
        let args: Vec<String> = event.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(args, ["message=served", "route=/a"]);
    }
}

#[test]
fn follows_from_is_a_link_with_a_flow() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    let consumer = {
        let producer = tracing::info_span!("produce").entered();
        let consumer = tracing::info_span!("consume");
        consumer.follows_from(producer.id());
        consumer
    };
    let worker = std::thread::spawn({
        let prof = prof.clone();
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        move || {
            prof.join_current_thread();
            let _d = tracing::dispatcher::set_default(&dispatch);
            consumer.in_scope(|| {});
        }
    });
    worker.join().unwrap();
    prof.stop();

    let trace = prof.trace();
    assert_eq!(trace.flows.len(), 1);
    let flow = &trace.flows[0];
    assert_eq!(trace.span(flow.follower).1.name(), "consume");
    assert_eq!(trace.span(flow.origin.unwrap()).1.name(), "produce");
    let report = tickscope::report::Report::by_origin(&trace);
    assert_eq!(
        report
            .get_by_origin("consume", Some("produce"))
            .unwrap()
            .calls,
        1
    );
}

#[tracing::instrument]
async fn leaf(i: u64) -> u64 {
    tokio::task::yield_now().await;
    i * 2
}

#[tracing::instrument]
async fn fan_out(n: u64) -> u64 {
    let mut tasks = Vec::new();
    for i in 0..n {
        tasks.push(tokio::spawn(leaf(i).in_current_span()));
    }
    let mut sum = 0;
    for task in tasks {
        sum += task.await.unwrap();
    }
    sum
}

#[test]
fn instrumented_async_fns_under_tokio_multi_thread() {
    let dispatch = dispatch();
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    let rt = runtime(2, &prof, &dispatch);
    let sum = rt.block_on(fan_out(8));
    drop(rt); // workers exit: every span is closed
    prof.stop();
    assert_eq!(sum, 56);

    let report = prof.report();
    assert_eq!(report.get("leaf").unwrap().calls, 8);
    assert_eq!(report.get("fan_out").unwrap().calls, 1);
    assert_eq!(report.len(), 2);
    let trace = prof.trace();
    let leaves: Vec<_> = trace
        .async_spans
        .iter()
        .filter(|c| c.name() == "leaf")
        .collect();
    assert_eq!(leaves.len(), 8);
    // Each leaf yields once: two polls, and a third enter where `Instrumented` drops the
    // future inside its span; every call ended.
    assert!(leaves.iter().all(|c| c.polls == 3 && !c.open_at_stop));
    let slices = trace
        .threads
        .iter()
        .flat_map(|t| &t.spans)
        .filter(|s| s.name() == "leaf")
        .count();
    assert_eq!(slices, 24);
    // Every slice is a poll of its call, the first enter's included.
    assert!(
        trace
            .threads
            .iter()
            .flat_map(|t| &t.spans)
            .all(|s| matches!(
                s.kind,
                SpanKind::Poll {
                    async_span: Some(_)
                }
            ))
    );
    // The arguments of `#[instrument]`: the leaf's `i`.
    let mut is: Vec<String> = trace
        .threads
        .iter()
        .flat_map(|t| t.args.iter().filter(|a| a.key == "i"))
        .map(|a| a.value.to_string())
        .collect();
    is.sort();
    is.dedup();
    assert_eq!(is.len(), 8);
}

#[test]
fn parallel_tests_with_their_own_sessions_see_only_their_spans() {
    let dispatch = dispatch();
    let threads: Vec<_> = (0..4u64)
        .map(|k| {
            let dispatch = dispatch.clone();
            std::thread::spawn(move || {
                let _d = tracing::dispatcher::set_default(&dispatch);
                let prof = Profiler::builder().current_thread().start();
                for _ in 0..=k {
                    let _s = tracing::info_span!("mine", k).entered();
                }
                prof.stop();
                let report = prof.report();
                assert_eq!(report.get("mine").unwrap().calls, k + 1);
                assert_eq!(report.len(), 1);
                let trace = prof.trace();
                let ks: Vec<_> = trace.threads[0]
                    .args
                    .iter()
                    .map(|a| a.value.clone())
                    .collect();
                assert_eq!(ks, vec![tickscope::trace::Value::U64(k); k as usize + 1]);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn filters_in_front_of_the_layer() {
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tickscope::tracing::layer().with_filter(EnvFilter::new("warn,keep=trace"))),
    );
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    {
        let _a = tracing::warn_span!("kept").entered();
        let _b = tracing::info_span!("dropped").entered();
        let _c = tracing::trace_span!(target: "keep", "kept too").entered();
        tracing::info!("filtered out");
        tracing::error!("recorded");
    }
    prof.stop();

    let trace = prof.trace();
    assert_eq!(spans(&trace, 0), [("kept", 0), ("kept too", 1)]);
    assert_eq!(trace.instants.len(), 1);
    let args: Vec<String> = trace.instants[0]
        .args
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    assert_eq!(args, ["message=recorded"]);
    let report = prof.report();
    assert!(report.get("dropped").is_none());
}

#[test]
fn follows_from_a_plain_span_created_here_is_seen_by_its_enter_here() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    {
        // Created on this thread without fields: its enters here would find it plain, but
        // `follows_from` gives it a link after its creation.
        let consumer = tracing::info_span!("consume here");
        {
            let producer = tracing::info_span!("produce here").entered();
            consumer.follows_from(producer.id());
        }
        consumer.in_scope(|| {});
        consumer.in_scope(|| {});
    }
    prof.stop();

    let trace = prof.trace();
    assert_eq!(
        spans(&trace, 0),
        [
            ("produce here", 0),
            ("consume here", 0),
            ("consume here", 0)
        ]
    );
    // A span that follows from another is a plain scope at every enter, each with its flow.
    assert!(trace.async_spans.is_empty());
    assert_eq!(trace.flows.len(), 2);
    assert!(trace.flows.iter().all(|l| {
        trace.span(l.follower).1.name() == "consume here"
            && trace.span(l.origin.unwrap()).1.name() == "produce here"
    }));
}

#[test]
fn a_span_id_used_again_after_its_close_is_another_span() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    // The registry gives a closed span's slot to the next span, with the same id once its
    // generation wraps (every 16,384 uses of a slot): each is a span of its own.
    const N: u64 = 40_000;
    let mut ids = std::collections::HashSet::new();
    let mut reused = 0;
    for _ in 0..N {
        let span = tracing::info_span!("again").entered();
        if !ids.insert(span.id().unwrap().into_u64()) {
            reused += 1;
        }
    }
    prof.stop();
    assert!(reused > 0, "no span id was used twice");

    let report = prof.report();
    assert_eq!(report.get("again").unwrap().calls, N);
    let trace = prof.trace();
    assert!(trace.async_spans.is_empty());
    assert_eq!(trace.threads[0].spans.len() as u64, N);
    assert!(
        trace.threads[0]
            .spans
            .iter()
            .all(|s| s.kind == SpanKind::Scope)
    );
}

#[test]
fn a_span_entered_on_two_threads_is_one_async_call() {
    let dispatch = dispatch();
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    let span = tracing::info_span!("moves");
    span.in_scope(|| {});
    std::thread::Builder::new()
        .name("mover".into())
        .spawn({
            let prof = prof.clone();
            let dispatch = dispatch.clone();
            move || {
                prof.join_current_thread();
                let _d = tracing::dispatcher::set_default(&dispatch);
                span.in_scope(|| {});
                span.in_scope(|| {});
                drop(span); // closed here
            }
        })
        .unwrap()
        .join()
        .unwrap();
    // A plain span of the same callsite afterwards stays a plain scope.
    tracing::info_span!("moves").in_scope(|| {});
    prof.stop();

    let trace = prof.trace();
    assert_eq!(trace.async_spans.len(), 1);
    let call = &trace.async_spans[0];
    assert_eq!(
        (call.name(), call.polls, call.open_at_stop),
        ("moves", 3, false)
    );
    let there = trace
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("mover"))
        .unwrap();
    let main = trace.threads.iter().find(|t| t.id != there.id).unwrap();
    assert_eq!(call.end_thread, Some(there.id));
    let kinds = |t: &tickscope::trace::ThreadTrace| -> Vec<SpanKind> {
        t.spans.iter().map(|s| s.kind).collect()
    };
    let poll = SpanKind::Poll {
        async_span: Some(0),
    };
    assert_eq!(kinds(main), [poll, SpanKind::Scope]);
    assert_eq!(kinds(there), [poll, poll]);
    assert_eq!(call.start_ns, main.spans[0].start_ns);
    assert!(call.end_ns >= there.spans[1].end_ns);
    let report = prof.report();
    // One logical call and one plain scope.
    assert_eq!(report.get("moves").unwrap().calls, 2);
    // Its Total % counts the plain scope's duration and the call's polls, not the call's wall
    // time (which holds the time between polls, on no thread).
    let moves = report.get("moves").unwrap();
    let on_threads = main.spans[1].duration_ns() + call.busy_ns;
    assert_eq!(
        moves.total_percent,
        on_threads as f64 * 100.0 / report.scope_ns as f64
    );

    // The same from a capture file's bytes: decoding groups the enters, not the recording.
    let read = read_back(&prof);
    let decoded = read[0].decode();
    let calls = |t: &Trace| -> Vec<_> {
        t.async_spans
            .iter()
            .map(|c| {
                (
                    c.name(),
                    c.start_ns,
                    c.end_ns,
                    c.thread,
                    c.end_thread,
                    c.polls,
                    c.busy_ns,
                )
            })
            .collect()
    };
    assert_eq!(calls(&decoded), calls(&trace));
    let all = |t: &Trace| -> Vec<(u64, Vec<SpanKind>)> {
        t.threads.iter().map(|t| (t.id, kinds(t))).collect()
    };
    assert_eq!(all(&decoded), all(&trace));
}

#[test]
fn deep_nesting_and_guards_dropped_out_of_order() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    {
        // Deeper than the layer keeps in its thread-local stack (32).
        let spans: Vec<tracing::Span> = (0..40).map(|_| tracing::info_span!("deep")).collect();
        let guards: Vec<_> = spans.iter().map(|s| s.enter()).collect();
        let _g = tickscope::scope!("bottom");
        drop(_g);
        // Dropped outermost first: each exit finds its span below the innermost.
        for guard in guards {
            drop(guard);
        }
        let a = tracing::info_span!("a").entered();
        let b = tracing::info_span!("b").entered();
        drop(a);
        let _c = tracing::info_span!("c").entered();
        drop(b);
    }
    prof.stop();

    let trace = prof.trace();
    let spans = &trace.threads[0].spans;
    assert_eq!(spans.len(), 44);
    for (depth, span) in spans[..40].iter().enumerate() {
        assert_eq!((span.name(), span.depth), ("deep", depth as u32));
        assert!(!span.open_at_stop);
    }
    assert_eq!((spans[40].name(), spans[40].depth), ("bottom", 40));
    // Each deep span ends when its own guard drops, outermost first.
    for pair in spans[..40].windows(2) {
        assert!(pair[0].end_ns <= pair[1].end_ns);
    }
    let names: Vec<_> = spans[41..].iter().map(|s| (s.name(), s.depth)).collect();
    assert_eq!(names, [("a", 0), ("b", 1), ("c", 2)]);
    // `a` ended first, then `b`, with `c` still open inside it, ended at its own exit.
    assert!(spans[41].end_ns <= spans[42].end_ns);
    assert!(spans[43].end_ns >= spans[42].end_ns);
    assert!(spans[41..].iter().all(|s| !s.open_at_stop));
    assert!(trace.async_spans.is_empty());
}

#[test]
fn no_session_records_nothing_and_spans_still_work() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let span = tracing::info_span!("before", x = 1u64);
    span.in_scope(|| tracing::info!("nobody listens"));
    let prof = Profiler::builder().current_thread().start();
    // Created before the session: its enter is recorded all the same (its fields only if
    // another session ran when it was created: other tests may run one).
    span.in_scope(|| {});
    tracing::info_span!("during").in_scope(|| {});
    prof.stop();
    let report = prof.report();
    assert_eq!(report.get("before").unwrap().calls, 1);
    assert_eq!(report.get("during").unwrap().calls, 1);
}

#[test]
fn a_span_whose_id_comes_back_while_nothing_records_keeps_its_own_name() {
    // A thread's cache of the plain spans it created must not outlive them: a span closed
    // while nothing recorded (or on another thread) leaves its entry, and the registry gives
    // its id again once its slot's generation wraps. (With another test's session running
    // meanwhile, the new span's creation is seen and the case is not reached.)
    let _d = tracing::dispatcher::set_default(&dispatch());
    // Session 1: a plain span created and entered here, closed after the session stopped
    // (the close is not recorded, so this thread's cache keeps it).
    let prof = Profiler::builder().current_thread().start();
    let first = tracing::info_span!("first_name");
    let id = first.id().unwrap().into_u64();
    first.in_scope(|| {});
    prof.stop();
    drop(first);
    // No session: the slot is used again until its generation wraps to the same id.
    let mut again = None;
    for _ in 0..40_000 {
        let span = tracing::info_span!("other_name", field = 1u64);
        if span.id().unwrap().into_u64() == id {
            again = Some(span);
            break;
        }
    }
    let again = again.expect("id not reused");
    let prof = Profiler::builder().current_thread().start();
    again.in_scope(|| {});
    prof.stop();
    let trace = prof.trace();
    assert_eq!(spans(&trace, 0), [("other_name", 0)]);
}

/// A snapshot while spans are open, then the table: from the session and streamed from the
/// capture file, the same.
#[test]
fn snapshot_while_spans_are_open_and_the_streamed_table() {
    let dispatch = dispatch();
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    let span = tracing::info_span!("snap_multi");
    span.in_scope(|| {});
    span.in_scope(|| {});
    let open = tracing::info_span!("snap_open").entered();
    let snap = prof.trace();
    assert_eq!(snap.async_spans.len(), 1);
    drop(open);
    drop(span);
    tracing::info_span!("snap_plain").in_scope(|| {});
    prof.stop();
    let table = prof.table().to_string();
    let read = read_back(&prof);
    let streamed = tickscope::table::Table::from_captures(read).to_string();
    assert_eq!(streamed, table);
    let report = prof.report();
    assert_eq!(report.get("snap_multi").unwrap().calls, 1);
    assert_eq!(report.get("snap_plain").unwrap().calls, 1);
}

#[test]
fn metric_fields_of_odd_types() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    tracing::info!(counter.hits = 1u64);
    tracing::info!(counter.hits = 2u64);
    tracing::info!(
        counter.text = "x",
        histogram.flag = true,
        monotonic_counter.big = u64::MAX,
        counter.wide = 5i128,
        "counter." = 3u64
    );
    prof.stop();
    let trace = prof.trace();
    use tickscope::trace::Number;
    let tracks: Vec<(&str, Vec<Number>)> = trace
        .counters
        .iter()
        .map(|c| (c.name, c.samples.iter().map(|s| s.value).collect()))
        .collect();
    // One counter per name, whichever callsites feed it; a u64 beyond i64 is a float; other
    // types (str, bool, i128) and an empty metric name stay arguments; no value is sampled.
    assert_eq!(
        tracks,
        [
            ("big", vec![Number::Float(u64::MAX as f64)]),
            ("hits", vec![Number::Int(1), Number::Int(3)])
        ]
    );
    assert!(trace.values.is_empty());
    let args: Vec<Vec<String>> = trace
        .instants
        .iter()
        .map(|e| e.args.iter().map(|(k, v)| format!("{k}={v}")).collect())
        .collect();
    assert_eq!(
        args,
        [
            vec![],
            vec![],
            vec![
                "counter.text=x".to_string(),
                "histogram.flag=true".into(),
                "counter.wide=5".into(),
                "counter.=3".into()
            ]
        ]
    );
}

#[test]
fn a_value_recorded_while_a_child_span_is_innermost_is_not_the_childs() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    let span = tracing::info_span!("rec_elsewhere", size = tracing::field::Empty);
    {
        let _e = span.enter();
        let _inner = tracing::info_span!("rec_inner").entered();
        // Recorded while a child span is the innermost one: not the child's argument.
        span.record("size", 5u64);
    }
    drop(span);
    prof.stop();
    let trace = prof.trace();
    assert_eq!(spans(&trace, 0), [("rec_elsewhere", 0), ("rec_inner", 1)]);
    assert!(args(&trace, 0, 1).is_empty());
}

/// Counts the enters of spans named `name` (a second layer, beside tickscope's).
struct CountEnters {
    name: &'static str,
    enters: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<S> tracing_subscriber::Layer<S> for CountEnters
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_enter(&self, id: &tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if ctx.span(id).is_some_and(|s| s.name() == self.name) {
            self.enters
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[test]
fn plain_spans_moving_between_tokio_workers_are_one_call_each() {
    const TASKS: u64 = 400;
    let enters = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tickscope::tracing::layer())
            .with(CountEnters {
                name: "mt_plain",
                enters: enters.clone(),
            }),
    );
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    let rt = runtime(3, &prof, &dispatch);
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..TASKS {
            // Half created here, half on the workers; some polled once, others several times.
            let work = async move {
                for _ in 0..i % 3 {
                    tokio::task::yield_now().await;
                }
            };
            if i % 2 == 0 {
                tasks.push(tokio::spawn(
                    work.instrument(tracing::info_span!("mt_plain")),
                ));
            } else {
                tasks.push(tokio::spawn(async move {
                    tokio::task::yield_now().await;
                    work.instrument(tracing::info_span!("mt_plain")).await
                }));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    drop(rt);
    prof.stop();

    let trace = prof.trace();
    let slices: Vec<_> = trace
        .threads
        .iter()
        .flat_map(|t| &t.spans)
        .filter(|s| s.name() == "mt_plain")
        .collect();
    let enters = enters.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(slices.len() as u64, enters);
    let calls: Vec<_> = trace
        .async_spans
        .iter()
        .filter(|c| c.name() == "mt_plain")
        .collect();
    assert!(calls.iter().all(|c| !c.open_at_stop));
    let scopes = slices.iter().filter(|s| s.kind == SpanKind::Scope).count() as u64;
    let polls: u64 = calls.iter().map(|c| u64::from(c.polls)).sum();
    assert_eq!(scopes + polls, enters);
    // `Instrumented` enters its span at each poll and once more to drop the future: every
    // span was entered at least twice, so each is one async call.
    assert_eq!(scopes, 0);
    assert_eq!(calls.len() as u64, TASKS);
    assert_eq!(prof.report().get("mt_plain").unwrap().calls, TASKS);

    // The same from the capture file, and the table streamed from it.
    let read = read_back(&prof);
    let decoded = read[0].decode();
    let polls = |t: &Trace| -> Vec<(u64, u32, u64)> {
        t.async_spans
            .iter()
            .map(|c| (c.start_ns, c.polls, c.end_ns))
            .collect()
    };
    assert_eq!(polls(&decoded), polls(&trace));
    let streamed = tickscope::table::Table::from_captures(read).to_string();
    assert_eq!(streamed, prof.table().to_string());
}

#[test]
fn sessions_starting_and_stopping_while_a_span_is_entered() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let outer = tracing::info_span!("entered_before").entered();
    let first = Profiler::builder().current_thread().start();
    tracing::info_span!("during_first").in_scope(|| {});
    let held = tracing::info_span!("held_across").entered();
    first.stop();
    let second = Profiler::builder().current_thread().start();
    tracing::info_span!("during_second").in_scope(|| {});
    // Exits of enters the second session did not see.
    drop(held);
    drop(outer);
    tracing::info_span!("after_exits").in_scope(|| {});
    second.stop();

    let trace = first.trace();
    assert_eq!(spans(&trace, 0), [("during_first", 0), ("held_across", 0)]);
    assert!(trace.threads[0].spans[1].open_at_stop);
    let trace = second.trace();
    assert_eq!(spans(&trace, 0), [("during_second", 0), ("after_exits", 0)]);
    assert!(trace.threads[0].spans.iter().all(|s| !s.open_at_stop));
    assert!(trace.async_spans.is_empty());
}

#[test]
fn a_value_recorded_again_replaces_the_earlier_one() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    {
        let span = tracing::info_span!(
            "rec_twice",
            x = 1u64,
            name = "a long name, more than one record of text",
            size = tracing::field::Empty,
        );
        span.record("size", 1u64);
        span.record("name", "b");
        span.record("size", 2u64);
        span.record("x", 3u64);
        span.in_scope(|| {});
        // Recorded at every poll of a long-lived span: its arguments do not pile up.
        for i in 0..100u64 {
            span.record("size", i);
        }
        span.in_scope(|| {});
    }
    prof.stop();
    let trace = prof.trace();
    assert_eq!(args(&trace, 0, 0), ["name=b", "size=2", "x=3"]);
    assert_eq!(args(&trace, 0, 1), ["name=b", "x=3", "size=99"]);
}

#[test]
fn a_span_back_from_another_thread_and_closed_where_it_was_made() {
    let dispatch = dispatch();
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    let span = tracing::info_span!("round_trip");
    span.in_scope(|| {});
    let span = std::thread::spawn({
        let prof = prof.clone();
        let dispatch = dispatch.clone();
        move || {
            prof.join_current_thread();
            let _d = tracing::dispatcher::set_default(&dispatch);
            span.in_scope(|| {});
            span
        }
    })
    .join()
    .unwrap();
    span.in_scope(|| {});
    drop(span); // closed here, where it was made, after an enter elsewhere
    // Entered once here and closed here: a plain scope.
    tracing::info_span!("round_trip").in_scope(|| {});
    prof.stop();

    let trace = prof.trace();
    assert_eq!(trace.async_spans.len(), 1);
    let call = &trace.async_spans[0];
    let main = trace
        .threads
        .iter()
        .position(|t| t.spans.len() == 3)
        .unwrap();
    assert_eq!(
        (call.polls, call.open_at_stop, call.thread, call.end_thread),
        (
            3,
            false,
            trace.threads[main].id,
            Some(trace.threads[main].id)
        )
    );
    let kinds: Vec<SpanKind> = trace.threads[main].spans.iter().map(|s| s.kind).collect();
    let poll = SpanKind::Poll {
        async_span: Some(0),
    };
    assert_eq!(kinds, [poll, poll, SpanKind::Scope]);
    assert_eq!(prof.report().get("round_trip").unwrap().calls, 2);
}

#[test]
fn a_batch_follows_from_requests_entered_on_other_threads() {
    let dispatch = dispatch();
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    // Four threads make 25 requests each, enter them there and hand them over still open.
    let (tx, rx) = std::sync::mpsc::channel();
    let closed = std::sync::Arc::new(std::sync::Barrier::new(5));
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let (prof, dispatch, tx) = (prof.clone(), dispatch.clone(), tx.clone());
            let closed = closed.clone();
            std::thread::spawn(move || {
                prof.join_current_thread();
                let _d = tracing::dispatcher::set_default(&dispatch);
                for i in 0..25 {
                    let request = tracing::info_span!("request", n = w * 25 + i);
                    request.in_scope(|| {});
                    tx.send(request).unwrap();
                }
                // Once the requests closed, their ids may come back for other spans.
                closed.wait();
                for _ in 0..25 {
                    tracing::info_span!("other").in_scope(|| {});
                }
                tickscope::link().thread()
            })
        })
        .collect();
    let requests: Vec<tracing::Span> = rx.iter().take(100).collect();
    let batch = tracing::info_span!("batch");
    for request in &requests {
        batch.follows_from(request);
    }
    batch.in_scope(|| {});
    drop(requests);
    closed.wait();
    let worker_ids: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    prof.stop();

    let check = |trace: &Trace| {
        assert_eq!(trace.flows.len(), 100);
        let batch = trace.flows[0].follower;
        assert_eq!(trace.span(batch).1.name(), "batch");
        let mut seen: Vec<u64> = Vec::new();
        for flow in &trace.flows {
            assert_eq!((flow.follower, flow.seq), (batch, 0));
            let origin = flow.origin.expect("a request");
            let (thread, span) = trace.span(origin);
            assert_eq!(span.name(), "request");
            assert!(worker_ids.contains(&thread.id));
            assert_eq!(flow.origin_thread, thread.id);
            let [n] = &args(trace, origin.thread as usize, origin.span)[..] else {
                panic!("one argument");
            };
            seen.push(n.strip_prefix("n=").unwrap().parse().unwrap());
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..100).collect::<Vec<u64>>());
        let report = tickscope::report::Report::by_origin(trace);
        let row = report.get_by_origin("batch", Some("request")).unwrap();
        assert_eq!(row.calls, 1);

        // A flow arrow from each request to the batch.
        let mut out = Vec::new();
        tickscope::export::chrome::write(trace, &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let batch_slice = events
            .iter()
            .find(|e| e["ph"] == "X" && e["name"] == "batch")
            .unwrap();
        let ends = |ph: &str| -> Vec<&serde_json::Value> {
            events.iter().filter(|e| e["ph"] == ph).collect()
        };
        let (starts, finishes) = (ends("s"), ends("f"));
        assert_eq!((starts.len(), finishes.len()), (100, 100));
        for f in &finishes {
            assert_eq!(
                (&f["tid"], &f["ts"]),
                (&batch_slice["tid"], &batch_slice["ts"])
            );
        }
        let mut per_tid: std::collections::BTreeMap<String, usize> = Default::default();
        for s in &starts {
            assert_ne!(s["tid"], batch_slice["tid"]);
            *per_tid.entry(s["tid"].to_string()).or_default() += 1;
        }
        assert_eq!(per_tid.values().copied().collect::<Vec<_>>(), [25; 4]);
    };
    check(&prof.trace());
    // The same from a capture file's bytes.
    check(&read_back(&prof)[0].decode());
}

#[test]
fn by_arg_splits_tracing_async_calls_by_their_fields() {
    let dispatch = dispatch();
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    // A request entered here and on another thread: one async call.
    let a = tracing::info_span!("request", uri = "/a");
    a.in_scope(|| {});
    std::thread::spawn({
        let (prof, dispatch) = (prof.clone(), dispatch.clone());
        move || {
            prof.join_current_thread();
            let _d = tracing::dispatcher::set_default(&dispatch);
            a.in_scope(|| {});
        }
    })
    .join()
    .unwrap();
    // Two requests entered twice each, and one entered once (a plain scope).
    for _ in 0..2 {
        let b = tracing::info_span!("request", uri = "/b");
        b.in_scope(|| {});
        b.in_scope(|| {});
    }
    tracing::info_span!("request", uri = "/a").in_scope(|| {});
    // Handlers whose field is recorded after their first poll, as `#[instrument]`ed
    // functions do with `Span::current().record(..)`.
    for (given, recorded) in [(None, 10u64), (Some(20u64), 30)] {
        let handler = tracing::info_span!("handler", bytes = given);
        handler.in_scope(|| {});
        handler.record("bytes", recorded);
        handler.in_scope(|| {});
    }
    prof.stop();

    let check = |trace: &Trace| {
        assert_eq!(trace.async_spans.len(), 5);
        let by_uri = tickscope::report::Report::by_arg(trace, "uri");
        let calls = |r: &tickscope::report::Report, name: &str, value: Option<&str>| {
            r.get_with_arg(name, value).map(|row| row.calls)
        };
        assert_eq!(calls(&by_uri, "request", Some("/a")), Some(2));
        assert_eq!(calls(&by_uri, "request", Some("/b")), Some(2));
        assert_eq!(calls(&by_uri, "request", None), None);
        let by_bytes = tickscope::report::Report::by_arg(trace, "bytes");
        assert_eq!(calls(&by_bytes, "handler", Some("10")), Some(1));
        assert_eq!(calls(&by_bytes, "handler", Some("30")), Some(1));
        assert_eq!(calls(&by_bytes, "handler", Some("20")), None);
        assert_eq!(calls(&by_bytes, "handler", None), None);
    };
    check(&prof.trace());
    check(&read_back(&prof)[0].decode());
    // The table shows the column filled.
    let table = prof.table().by_arg("uri").to_string();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.starts_with("request"))
        .map(|l| l.split_whitespace().take(3).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{table}");
    for row in rows {
        assert!(matches!(row[..], ["request", "/a" | "/b", "2"]), "{table}");
    }
}

#[test]
fn events_are_named_by_their_static_message_else_by_target_and_line() {
    let _d = tracing::dispatcher::set_default(&dispatch());
    let prof = Profiler::builder().current_thread().start();
    let line = line!() + 2;
    for i in 0..3u64 {
        tracing::info!("request done");
        tracing::info!(items = i, "took {} ms", i);
        tracing::info!(items = i);
        tracing::info!(message = "given as a field");
        tracing::info!("{}", ["first", "second", "third"][i as usize]);
    }
    prof.stop();

    let trace = prof.trace();
    let names: Vec<&str> = trace.instants.iter().map(|i| i.name()).collect();
    let at = |l: u32| format!("{}:{l}", module_path!());
    let (took, items, by_arg) = (at(line + 1), at(line + 2), at(line + 4));
    let mut expected = Vec::new();
    for i in 0..3 {
        expected.extend([
            "request done",
            &took,
            &items,
            "given as a field",
            // One argument alone reads as a literal until the text changes.
            if i == 0 { "first" } else { &by_arg },
        ]);
    }
    assert_eq!(names, expected);
    // One callsite per name, with the event's file and line; the message stays an argument.
    let done: Vec<_> = trace
        .instants
        .iter()
        .filter(|i| i.name() == "request done")
        .collect();
    assert!(
        done.iter()
            .all(|i| std::ptr::eq(i.callsite, done[0].callsite))
    );
    assert!(done[0].callsite.file().ends_with("tracing_bridge.rs"));
    assert_eq!(done[0].callsite.line(), line);
    let args: Vec<String> = trace.instants[1]
        .args
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    assert_eq!(args, ["message=took 0 ms", "items=0"]);
    // The same from a capture file's bytes.
    let decoded = read_back(&prof)[0].decode();
    let read: Vec<&str> = decoded.instants.iter().map(|i| i.name()).collect();
    assert_eq!(read, expected);
    // The Chrome trace keeps where each event was written, after its fields.
    let mut json = Vec::new();
    tickscope::export::chrome::write(&trace, &mut json).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let events: Vec<&serde_json::Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "i")
        .collect();
    assert_eq!(events.len(), 15);
    assert_eq!(events[0]["name"], "request done");
    assert!(
        events[0]["args"]["file"]
            .as_str()
            .unwrap()
            .ends_with("tracing_bridge.rs")
    );
    assert_eq!(events[0]["args"]["line"], line);
    assert_eq!(events[1]["args"]["message"], "took 0 ms");
    assert_eq!(events[1]["args"]["items"], 0);
    assert_eq!(events[1]["args"]["line"], line + 1);
}

#[test]
fn the_subscriber_starts_two_cache_lines_after_its_dispatch_count() {
    use tickscope::tracing::TickscopeLayer;
    use tracing_subscriber::Registry;
    use tracing_subscriber::layer::{Identity, Layered};
    type Stacked = Layered<TickscopeLayer, Registry>;
    type Under = Layered<Identity, Stacked>;
    // A span holds a clone of its `Dispatch` (an `Arc`): the subscriber the layer is stacked in,
    // on top or under another layer, takes its alignment, so the registry's fields that every
    // span call reads lie past the two cache lines of the counts each span writes.
    assert_eq!(std::mem::align_of::<TickscopeLayer>(), 128);
    assert_eq!(std::mem::align_of::<Stacked>(), 128);
    assert_eq!(std::mem::align_of::<Under>(), 128);
    let top = dispatch();
    let subscriber: &Stacked = top.downcast_ref().unwrap();
    assert_eq!(std::ptr::from_ref(subscriber) as usize % 128, 0);
    let under = tracing::Dispatch::new(
        tracing_subscriber::registry()
            .with(tickscope::tracing::layer())
            .with(Identity::new()),
    );
    let subscriber: &Under = under.downcast_ref().unwrap();
    assert_eq!(std::ptr::from_ref(subscriber) as usize % 128, 0);
    // Spans record through it as through any subscriber.
    let prof = Profiler::builder().current_thread().start();
    tracing::dispatcher::with_default(&under, || {
        for _ in 0..3 {
            let _s = tracing::info_span!("aligned").entered();
        }
    });
    prof.stop();
    assert_eq!(prof.report().get("aligned").unwrap().calls, 3);
}

/// Spans with fields (as `#[instrument]` makes them), each entered once on the thread that
/// closes it, among them values recorded later: their close says every enter was there, so
/// the capture is summed and written piece by piece (no async call to match across threads),
/// with the whole trace's table, tables by field and Perfetto bytes. A span with fields
/// entered on two threads is still an async call, decoded whole.
#[test]
fn spans_with_fields_entered_on_one_thread_are_decoded_in_pieces() {
    use std::sync::Arc;
    use tickscope::export::{Format, perfetto};
    use tickscope::table::Table;

    let dispatch = dispatch();
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    for i in 0..3_000u64 {
        let step = tracing::info_span!("step", i = i % 3, done = tracing::field::Empty);
        step.in_scope(|| {
            tracing::info_span!("inner", k = "v").in_scope(|| std::hint::black_box(i));
            step.record("done", true);
        });
    }
    prof.stop();
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    let captures = tickscope::Capture::from_bytes(&bytes).unwrap();
    let refs: Vec<&tickscope::Capture> = captures.iter().collect();
    let trace = Trace::from_captures(&captures);
    assert!(trace.async_spans.is_empty());
    assert_eq!(trace.threads[0].spans.len(), 2 * 3_000);
    let mut pieces = Vec::new();
    assert!(
        perfetto::Options::new()
            .write_captures(&refs, &mut pieces)
            .is_some(),
        "written piece by piece"
    );
    let mut whole = Vec::new();
    perfetto::Options::new().write(&trace, &mut whole).unwrap();
    assert!(whole == pieces, "Perfetto differs");
    let decoded = Arc::new(trace);
    let tables = |table: fn(Table) -> Table| {
        let captures = tickscope::Capture::from_bytes(&bytes).unwrap();
        let from_captures = table(Table::from_captures(captures)).to_string();
        (
            from_captures,
            table(Table::new(decoded.clone())).to_string(),
        )
    };
    for table in [
        (|t| t) as fn(Table) -> Table,
        |t| t.tree(true),
        |t| t.by_arg("i"),
        |t| t.by_arg("done"),
    ] {
        let (pieces, whole) = tables(table);
        assert_eq!(pieces, whole);
    }
    let (by_i, _) = tables(|t| t.by_arg("i"));
    let steps = by_i
        .lines()
        .filter(|l| l.trim_start().starts_with("step"))
        .count();
    assert_eq!(steps, 3, "{by_i}");

    // Entered on two threads: an async call, matched as the threads are read again; the
    // trace written from pieces is the whole trace's.
    let prof = Profiler::builder().current_thread().start();
    let shared = tracing::info_span!("shared", n = 1);
    shared.in_scope(|| {});
    let other = {
        let span = shared.clone();
        let prof = prof.clone();
        let dispatch = dispatch.clone();
        std::thread::spawn(move || {
            prof.join_current_thread();
            let _d = tracing::dispatcher::set_default(&dispatch);
            span.in_scope(|| {});
        })
    };
    other.join().unwrap();
    drop(shared);
    prof.stop();
    let captures = read_back(&prof);
    let refs: Vec<&tickscope::Capture> = captures.iter().collect();
    let trace = Trace::from_captures(&captures);
    assert_eq!(trace.async_spans.len(), 1);
    let mut pieces = Vec::new();
    let written = perfetto::Options::new().write_captures(&refs, &mut pieces);
    assert!(matches!(written, Some(Ok(()))), "written from pieces");
    let mut whole = Vec::new();
    perfetto::Options::new().write(&trace, &mut whole).unwrap();
    assert!(pieces == whole, "the whole trace's bytes");
}

/// A batch span that follows from 100 request spans, each entered on one of four other
/// threads among 50 other spans (more spans a thread than a piece holds) and closed there
/// once the batch has followed from it: its flows are
/// matched by the first pass (the `follows_from`s, then a second reading for the spans they
/// name), so Chrome JSON (both time origins), Kineto, Perfetto, the call tree and the table
/// by argument are written piece by piece, with the whole trace's bytes.
#[test]
fn a_batch_following_requests_of_other_threads_is_written_in_pieces() {
    use tickscope::export::{Format, chrome, kineto, perfetto};
    use tickscope::table::Table;

    let dispatch = dispatch();
    let _d = tracing::dispatcher::set_default(&dispatch);
    let prof = Profiler::builder().current_thread().start();
    let (tx, rx) = std::sync::mpsc::channel();
    let followed = std::sync::Arc::new(std::sync::Barrier::new(5));
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let (prof, dispatch, tx) = (prof.clone(), dispatch.clone(), tx.clone());
            let followed = followed.clone();
            std::thread::spawn(move || {
                prof.join_current_thread();
                let _d = tracing::dispatcher::set_default(&dispatch);
                let mut requests = Vec::new();
                for i in 0..25 {
                    for k in 0..50u64 {
                        tracing::info_span!("work", k = k % 2).in_scope(|| {});
                    }
                    let request = tracing::info_span!("request", n = w * 25 + i);
                    request.in_scope(|| {
                        tracing::info_span!("parse").in_scope(|| {});
                    });
                    tx.send(request.id().unwrap()).unwrap();
                    requests.push(request);
                }
                // Closed here, once the batch followed from them.
                followed.wait();
                drop(requests);
            })
        })
        .collect();
    let requests: Vec<tracing::Id> = rx.iter().take(100).collect();
    let batch = tracing::info_span!("batch", size = 100u64);
    for request in &requests {
        batch.follows_from(request.clone());
    }
    followed.wait();
    for worker in workers {
        worker.join().unwrap();
    }
    batch.in_scope(|| {});
    drop(batch);
    prof.stop();

    let captures = read_back(&prof);
    let refs: Vec<&tickscope::Capture> = captures.iter().collect();
    let trace = Trace::from_captures(&captures);
    assert!(trace.async_spans.is_empty());
    assert_eq!(trace.flows.len(), 100);
    let batch = trace.flows[0].follower;
    assert_eq!(trace.span(batch).1.name(), "batch");
    for flow in &trace.flows {
        assert_eq!(trace.span(flow.origin.unwrap()).1.name(), "request");
    }
    let spans: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
    assert_eq!(spans, 4 * 25 * 52 + 1);
    for (name, format) in [
        ("Chrome", &chrome::Options::new() as &dyn Format),
        (
            "Chrome, Unix time",
            &chrome::Options::new().time_origin(chrome::TimeOrigin::UnixEpoch),
        ),
        ("Kineto", &kineto::Options::new(0, 1)),
        ("Perfetto", &perfetto::Options::new()),
    ] {
        let mut pieces = Vec::new();
        let written = format.write_captures(&refs, &mut pieces);
        assert!(
            matches!(written, Some(Ok(()))),
            "{name}: written piece by piece"
        );
        let mut whole = Vec::new();
        format.write(&trace, &mut whole).unwrap();
        assert!(pieces == whole, "{name} differs");
    }
    #[cfg(feature = "otlp")]
    {
        // OTLP/JSON from pieces: each span link where the whole trace has it.
        use tickscope::export::otlp::{Options, Otlp};
        let mut whole = Vec::new();
        Otlp::new(&trace, &Options::new())
            .write_json_to(&mut whole)
            .unwrap();
        let mut pieces = Vec::new();
        let stats = Otlp::write_json_from_captures(&refs, &Options::new(), &mut pieces).unwrap();
        assert_eq!(stats.links, 100);
        assert!(pieces == whole, "OTLP/JSON differs");
    }
    let mut chrome = Vec::new();
    chrome::Options::new().write(&trace, &mut chrome).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&chrome).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let flows = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    assert_eq!((flows("s"), flows("f")), (100, 100));
    let bytes = {
        let mut bytes = Vec::new();
        prof.capture().write_to(&mut bytes).unwrap();
        bytes
    };
    let decoded = std::sync::Arc::new(trace);
    for table in [
        (|t| t) as fn(Table) -> Table,
        |t| t.tree(true),
        |t| t.by_arg("k"),
        |t| t.by_arg("n"),
        |t| t.by_thread(true).tree(true),
    ] {
        let captures = tickscope::Capture::from_bytes(&bytes).unwrap();
        let from_captures = table(Table::from_captures(captures)).to_string();
        assert_eq!(
            from_captures,
            table(Table::new(decoded.clone())).to_string()
        );
    }
}
