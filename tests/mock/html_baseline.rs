//! The HTML report with a diff view against a baseline, written from captures
//! (`tickscope report NEW --baseline BASE`: `__private::write_html_with_baseline`, both runs'
//! sums and pieces and the diff of the captures): the page that `html::Options::baseline`
//! writes of both traces decoded whole, byte for byte, also when a run holds async calls
//! (their calls matched as the threads are read again, the baseline's call tree from its
//! polls).
#![cfg(feature = "enabled")]

use std::sync::Arc;

use serde_json::Value;
use tickscope::export::{Format, html, write_file, write_file_from_captures};
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, profile, scope};

use crate::common::{YieldOnce, first_difference, poll_once, scratch, serial_mock};
use crate::html::block;

/// Requests per thread: with three scopes each, pieces of a thousand spans or more, and the
/// `worker` scope carried over them.
const REQUESTS: u64 = 700;

#[profile]
async fn fetch(m: Arc<tickscope::clock::Mock>) {
    m.increment(30u64);
    YieldOnce::default().await;
    m.increment(20u64);
}

/// A run under the mock clock: three threads one after another, each of [`REQUESTS`]
/// requests (`request` holding `parse`, `parse` ns and a few more every seventh, and `query`,
/// `query` ns), the second inside a `worker` scope open from its first record to its last;
/// then `only` on the main thread (a name of one run only) and, with `async_call`, a call of
/// an `async fn` polled twice. Read back from a file.
fn run(name: &str, parse: u64, query: u64, only: &str, async_call: bool) -> Vec<Capture> {
    let (_serial, m) = serial_mock();
    let prof = Profiler::builder().current_thread().start();
    for t in 0..3u64 {
        let m = m.clone();
        tickscope::thread::Builder::new()
            .name(format!("worker-{t}"))
            .spawn(move || {
                let _worker = (t == 1).then(|| scope!("worker"));
                for i in 0..REQUESTS {
                    let _request = scope!("request");
                    m.increment(2 + i % 3);
                    {
                        let _parse = scope!("parse");
                        m.increment(parse + (i % 7) * 3);
                    }
                    let _query = scope!("query");
                    m.increment(query + i % 5);
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }
    {
        let _only = scope!(name = only);
        m.increment(50u64);
    }
    if async_call {
        let mut call = Box::pin(fetch(m.clone()));
        assert!(poll_once(call.as_mut()).is_pending());
        m.increment(10u64);
        assert!(poll_once(call.as_mut()).is_ready());
    }
    prof.stop();
    let path = scratch(name);
    prof.write_capture(&path).unwrap();
    Capture::read_all(&path).unwrap()
}

/// The page of `new` with a diff view against `base`, written from both traces decoded whole,
/// and from the captures (as `tickscope report` writes it); whether the captures were read in
/// pieces (else decoded whole).
fn pages(base: &[Capture], new: &[Capture], name: &str) -> (Vec<u8>, Vec<u8>, bool) {
    let (whole, captures) = (
        scratch(&format!("{name}-whole.html")),
        scratch(&format!("{name}.html")),
    );
    let options = html::Options::new().title("baseline");
    let with_base = options
        .clone()
        .baseline(Arc::new(Trace::from_captures(base)));
    write_file(&Trace::from_captures(new), &whole, &with_base).unwrap();
    let base: Vec<&Capture> = base.iter().collect();
    let new: Vec<&Capture> = new.iter().collect();
    let format = tickscope::__private::html_with_baseline(&options, &base);
    write_file_from_captures(&new, &captures, &format).unwrap();
    let pieces = format.write_captures(&new, &mut std::io::sink()).is_some();
    (
        std::fs::read(&whole).unwrap(),
        std::fs::read(&captures).unwrap(),
        pieces,
    )
}

/// The verdict of each name in the diff view of `page`.
fn verdicts(page: &[u8]) -> Vec<(String, String)> {
    let meta: Value =
        serde_json::from_str(block(std::str::from_utf8(page).unwrap(), "ts-meta")).unwrap();
    let names = meta["names"].as_array().unwrap();
    let mut verdicts: Vec<(String, String)> = (meta["diff"]["rows"].as_array().unwrap().iter())
        .map(|row| {
            let name = &names[row[0].as_u64().unwrap() as usize];
            (
                name.as_str().unwrap().to_owned(),
                row[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    verdicts.sort();
    verdicts
}

#[test]
fn a_report_with_a_baseline_from_captures_is_the_whole_traces_page() {
    let base = run("baseline-base.tscope", 100, 300, "setup", false);
    let new = run("baseline-new.tscope", 160, 200, "warm up", false);
    let (whole, captures, pieces) = pages(&base, &new, "baseline");
    assert!(pieces, "read in pieces");
    assert!(whole == captures, "{}", first_difference(&whole, &captures));
    let verdict = |name: &str, verdict: &str| (name.to_owned(), verdict.to_owned());
    assert_eq!(
        verdicts(&captures),
        [
            verdict("parse", "regressed"),
            verdict("query", "improved"),
            verdict("request", "unchanged"),
            verdict("setup", "removed"),
            verdict("warm up", "added"),
            verdict("worker", "inconclusive"),
        ]
    );
}

#[test]
fn a_report_with_a_baseline_of_async_calls_is_written_from_pieces() {
    let base = run("baseline-async-base.tscope", 100, 300, "setup", true);
    let new = run("baseline-async-new.tscope", 160, 200, "setup", false);
    for (base, new, name) in [(&base, &new, "async-base"), (&new, &base, "async-new")] {
        let (whole, captures, pieces) = pages(base, new, name);
        assert!(pieces, "{name}: read in pieces");
        assert!(
            whole == captures,
            "{name}: {}",
            first_difference(&whole, &captures)
        );
        let parse = if name == "async-base" {
            "regressed"
        } else {
            "improved"
        };
        assert!(verdicts(&captures).contains(&("parse".to_owned(), parse.to_owned())));
    }
}
