//! Scope arguments: every value type, evaluation only while recording, cut-off strings,
//! grouping the report by an argument, and the Chrome args.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use tickscope::report::Report;
use tickscope::trace::{SpanArg, Value};
use tickscope::{Profiler, scope};

fn session() -> Profiler {
    Profiler::builder().current_thread().start()
}

fn args(prof: &Profiler, span: u32) -> Vec<(&'static str, Value)> {
    let trace = prof.trace();
    trace.threads[0]
        .args_of(span)
        .iter()
        .map(|SpanArg { key, value, .. }| (*key, value.clone()))
        .collect()
}

#[test]
fn every_kind_of_value_is_recorded() {
    let prof = session();
    let path = Path::new("/tmp/data.bin");
    let n: usize = 4096;
    {
        let _g = scope!(
            "read",
            path = %path.display(),
            bytes = n,
            ok = true,
            ratio = 0.25,
            delta = -3i32,
            label = "lit",
            parts = ?[1, 2],
        );
    }
    {
        let _g = scope!("plain");
    }
    prof.stop();
    assert_eq!(
        args(&prof, 0),
        [
            ("path", Value::Str("/tmp/data.bin".into())),
            ("bytes", Value::U64(4096)),
            ("ok", Value::Bool(true)),
            ("ratio", Value::F64(0.25)),
            ("delta", Value::I64(-3)),
            ("label", Value::Str("lit".into())),
            ("parts", Value::Str("[1, 2]".into())),
        ]
    );
    assert!(args(&prof, 1).is_empty());
    assert_eq!(prof.report().get("read").unwrap().calls, 1);
}

static EVALUATED: AtomicU64 = AtomicU64::new(0);

fn costly() -> u64 {
    EVALUATED.fetch_add(1, Ordering::Relaxed) + 100
}

#[test]
fn values_are_evaluated_only_while_recording() {
    {
        let _g = scope!("idle", v = costly());
    }
    assert_eq!(EVALUATED.load(Ordering::Relaxed), 0);
    let prof = session();
    {
        let _g = scope!("busy", v = costly());
    }
    prof.stop();
    assert_eq!(EVALUATED.load(Ordering::Relaxed), 1);
    assert_eq!(args(&prof, 0), [("v", Value::U64(100))]);
}

#[test]
fn long_strings_are_cut_at_a_character_boundary() {
    let prof = session();
    let long = "é".repeat(1000); // 2000 bytes
    let short = "x".repeat(30);
    {
        let _g = scope!("big", first = %short, text = %long, after = 1u8);
    }
    prof.stop();
    let got = args(&prof, 0);
    assert_eq!(got[0], ("first", Value::Str(short.into())));
    let Value::Str(text) = &got[1].1 else {
        panic!("{got:?}")
    };
    assert!(text.ends_with('…'), "{text}");
    assert!(text.trim_end_matches('…').chars().all(|c| c == 'é'));
    // 64 records: the entry, `first` (1 + 3), `text`'s head, and 12 bytes per record after.
    assert!(
        text.len() <= (64 - 5 - 1) * 12 && text.len() > 600,
        "{}",
        text.len()
    );
    // No room was left for `after`.
    assert_eq!(got.len(), 2);
}

#[test]
fn the_report_groups_a_name_by_an_argument() {
    let prof = session();
    for bytes in [10u64, 20, 10, 10] {
        let _g = scope!("read", bytes = bytes, file = "a");
    }
    {
        let _g = scope!("read");
    }
    prof.stop();
    let trace = prof.trace();
    let report = Report::by_arg(&trace, "bytes");
    let calls = |v| report.get_with_arg("read", v).map(|r| r.calls);
    assert_eq!(
        (calls(Some("10")), calls(Some("20")), calls(None)),
        (Some(3), Some(1), Some(1))
    );
    let by_file = Report::by_arg(&trace, "file");
    assert_eq!(by_file.get_with_arg("read", Some("a")).unwrap().calls, 4);
    assert_eq!(prof.report().get("read").unwrap().calls, 5);
}

#[test]
fn chrome_slices_carry_the_arguments() {
    let prof = session();
    let link = {
        let _g = scope!("make");
        tickscope::link()
    };
    {
        let _g = scope!("use", follows = link, size = 7u32, name = %"w\"x");
    }
    prof.stop();
    let mut out = Vec::new();
    tickscope::export::chrome::write(&prof.trace(), &mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let used = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "use" && e["ph"] == "X")
        .unwrap();
    assert_eq!(used["args"]["size"], 7);
    assert_eq!(used["args"]["name"], "w\"x");
    assert_eq!(used["args"]["Sequence number"], u64::from(link.seq()));
    assert_eq!(prof.trace().flows.len(), 1);
}

#[test]
fn names_made_at_run_time_take_arguments_and_links() {
    let prof = session();
    let evaluated = AtomicU64::new(0);
    let count = |n: u64| {
        evaluated.fetch_add(1, Ordering::Relaxed);
        n
    };
    for i in 0..3u64 {
        let _g = scope!(name = format!("doc {}", i % 2), bytes = count(i), tag = %"t");
    }
    let first = scope!("origin", seq);
    let link = first.link();
    drop(first);
    {
        let _f = scope!(name = String::from("follower"), follows = link, n = 7u8);
    }
    {
        let _f = scope!(name = "bare follower", follows = link);
    }
    prof.stop();
    assert_eq!(evaluated.load(Ordering::Relaxed), 3);
    let report = prof.report();
    assert_eq!(report.get("doc 0").unwrap().calls, 2);
    assert_eq!(report.get("doc 1").unwrap().calls, 1);
    let by_bytes = Report::by_arg(&prof.trace(), "bytes");
    let mut rows: Vec<(&str, Option<&str>, u64)> = by_bytes
        .rows()
        .iter()
        .filter(|r| r.name.starts_with("doc"))
        .map(|r| (r.name, r.arg.as_deref(), r.calls))
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            ("doc 0", Some("0"), 1),
            ("doc 0", Some("2"), 1),
            ("doc 1", Some("1"), 1)
        ]
    );
    assert_eq!(
        args(&prof, 0),
        [("bytes", Value::U64(0)), ("tag", Value::Str("t".into()))]
    );
    assert_eq!(args(&prof, 4), [("n", Value::U64(7))]);
    let trace = prof.trace();
    let followers: Vec<&str> = trace
        .flows
        .iter()
        .map(|l| trace.span(l.follower).1.name())
        .collect();
    assert_eq!(followers, ["follower", "bare follower"]);

    // Not recording: neither the name nor the arguments are evaluated.
    let before = evaluated.load(Ordering::Relaxed);
    let _g = scope!(
        name = {
            evaluated.fetch_add(1, Ordering::Relaxed);
            "never"
        },
        bytes = count(9)
    );
    assert_eq!(evaluated.load(Ordering::Relaxed), before);
}
