//! Links between scopes across threads: exact matching by (sequence number, thread), exited
//! origin threads, the report split by origin, and the Chrome flow arrows and args.

use tickscope::report::Report;
use tickscope::trace::Trace;
use tickscope::{Link, Profiler, scope};

fn session() -> Profiler {
    Profiler::builder().current_thread().start()
}

/// Runs `f` on a new thread that joins `prof`.
fn on_thread<T: Send + 'static>(prof: &Profiler, f: impl FnOnce() -> T + Send + 'static) -> T {
    let prof = prof.clone();
    std::thread::spawn(move || {
        prof.join_current_thread();
        f()
    })
    .join()
    .unwrap()
}

fn name(trace: &Trace, at: tickscope::trace::SpanRef) -> &'static str {
    trace.span(at).1.name()
}

#[test]
fn followers_match_their_own_link_exactly() {
    let prof = session();
    let links: Vec<Link> = (0..5)
        .map(|_| {
            let g = scope!("make", seq);
            assert!(g.is_recording());
            g.link()
        })
        .collect();
    let me = links[0].thread();
    let seqs: Vec<u32> = links.iter().map(Link::seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    // Used in reverse order on another thread.
    let reversed: Vec<Link> = links.iter().rev().copied().collect();
    on_thread(&prof, move || {
        for link in reversed {
            let _g = scope!("use", follows = link);
        }
    });
    prof.stop();
    let trace = prof.trace();
    assert_eq!(trace.flows.len(), 5);
    for (k, link) in trace.flows.iter().enumerate() {
        let origin = link.origin.expect("matched");
        assert_eq!(
            (name(&trace, origin), name(&trace, link.follower)),
            ("make", "use")
        );
        assert_eq!(trace.threads[origin.thread as usize].id, me);
        // The k-th follower used the (4 - k)-th link, made in the (4 - k)-th `make`.
        assert_eq!(origin.span as usize, 4 - k);
        assert_eq!(link.follower.span as usize, k);
        assert_eq!((link.seq, link.origin_thread), (seqs[4 - k], me));
        let (origin_span, ns) = (trace.span(origin).1, link.origin_ns.unwrap());
        assert!(origin_span.start_ns <= ns && ns <= origin_span.end_ns);
    }
}

#[test]
fn links_match_after_the_origin_thread_has_exited() {
    let prof = session();
    let (link, origin_thread) = on_thread(&prof, || {
        let _g = scope!("origin");
        let link = tickscope::link();
        (link, link.thread())
    });
    // The origin thread has exited; its events are still there.
    {
        let _g = scope!("follower", follows = link);
    }
    prof.stop();
    let trace = prof.trace();
    assert_eq!(trace.flows.len(), 1);
    let record = &trace.flows[0];
    assert_eq!(record.origin_thread, origin_thread);
    let origin = record.origin.expect("matched");
    assert_eq!(name(&trace, origin), "origin");
    assert_eq!(trace.threads[origin.thread as usize].id, origin_thread);
    assert_eq!(name(&trace, record.follower), "follower");
}

#[test]
fn links_outside_scopes_windows_and_sessions() {
    // No session: nothing is recorded and a follower is a plain scope.
    let none = tickscope::link();
    assert_eq!(none, Link::NONE);
    assert!(!none.is_recorded());

    let prof = session();
    let before = {
        let _g = scope!("old");
        tickscope::link()
    };
    prof.stop();
    prof.restart();
    let outside = tickscope::link(); // in no scope
    {
        let _a = scope!("after restart", follows = before);
        let _b = scope!("after outside", follows = outside);
        let _c = scope!("after none", follows = none);
    }
    prof.stop();
    let trace = prof.trace();
    let got: Vec<_> = trace
        .flows
        .iter()
        .map(|l| {
            (
                name(&trace, l.follower),
                l.origin.is_some(),
                l.origin_ns.is_some(),
            )
        })
        .collect();
    // The capture before the window is not in this trace; the one outside scopes has a time
    // but no originating scope; the unrecorded link makes a plain scope.
    assert_eq!(
        got,
        [
            ("after restart", false, false),
            ("after outside", false, true)
        ]
    );
    assert_eq!(prof.report().get("after none").unwrap().calls, 1);
}

#[test]
fn the_report_splits_a_scope_by_origin() {
    let prof = session();
    let mut links = Vec::new();
    for i in 0..5 {
        if i < 3 {
            let _g = scope!("from_a");
            links.push(tickscope::link());
        } else {
            let g = scope!("from_b", seq);
            links.push(g.link());
        }
    }
    on_thread(&prof, move || {
        for link in links {
            let _g = scope!("handle", follows = link);
        }
        let _g = scope!("handle");
    });
    prof.stop();
    let trace = prof.trace();
    let report = Report::by_origin(&trace);
    let calls = |origin| report.get_by_origin("handle", origin).map(|r| r.calls);
    assert_eq!(calls(Some("from_a")), Some(3));
    assert_eq!(calls(Some("from_b")), Some(2));
    assert_eq!(calls(None), Some(1));
    assert_eq!(report.get_by_origin("from_a", None).unwrap().calls, 3);
    // The plain report keeps one row per name.
    assert_eq!(prof.report().get("handle").unwrap().calls, 6);
    let table = prof.table().by_origin(true).to_string();
    assert!(table.contains("Caused by"), "{table}");
    assert_eq!(table.lines().filter(|l| l.starts_with("handle")).count(), 3);
}

#[test]
fn chrome_export_draws_flows_inside_the_linked_slices() {
    let prof = session();
    let link = {
        let _g = scope!("submit");
        let _inner = scope!("prepare");
        drop(_inner);
        tickscope::link()
    };
    let follower_thread = on_thread(&prof, move || {
        let _g = scope!("run", follows = link);
        let _child = scope!("step");
        tickscope::link().thread()
    });
    prof.stop();
    let mut out = Vec::new();
    tickscope::export::chrome::write(&prof.trace(), &mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let slice = |name: &str| {
        events
            .iter()
            .find(|e| e["ph"] == "X" && e["name"] == name)
            .unwrap()
    };
    let ts = |e: &serde_json::Value| e["ts"].as_f64().unwrap();
    let flow = |ph: &str| events.iter().find(|e| e["ph"] == ph).unwrap();
    let (s, f) = (flow("s"), flow("f"));
    assert_eq!(s["id"], f["id"]);
    assert_eq!((&s["cat"], &s["name"]), (&f["cat"], &f["name"]));
    assert_eq!(f["bp"], "e");
    let (submit, prepare, run) = (slice("submit"), slice("prepare"), slice("run"));
    // `s` lies in `submit` after its child `prepare`; `f` at the start of `run`.
    assert_eq!(s["tid"], submit["tid"]);
    assert!(ts(s) >= ts(prepare) + prepare["dur"].as_f64().unwrap());
    assert!(ts(s) <= ts(submit) + submit["dur"].as_f64().unwrap());
    assert_eq!(
        (f["tid"].as_u64().unwrap(), ts(f)),
        (follower_thread, ts(run))
    );
    // PyTorch's args.
    assert_eq!(run["args"]["Sequence number"], u64::from(link.seq()));
    assert_eq!(run["args"]["Fwd thread id"], link.thread());
    assert_eq!(submit["args"]["Sequence number"], u64::from(link.seq()));
    assert!(slice("step").get("args").is_none());
    assert_eq!(events.iter().filter(|e| e["ph"] == "s").count(), 1);
}
