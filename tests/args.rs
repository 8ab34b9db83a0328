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
    assert_eq!(prof.trace().links.len(), 1);
}
