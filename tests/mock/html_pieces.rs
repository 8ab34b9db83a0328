//! The HTML report written from captures as they are decoded (`Format::write_captures`: what
//! `tickscope convert -o x.html`, `tickscope report` and `Profiler::write` of a streamed session
//! do): the whole trace's page, byte for byte, up to the scope budget; past it, a level of
//! detail whose blob holds exactly the scopes that lasted at least its threshold (and their
//! parents), while the rows, the call tree and the rows' histograms count every scope.
#![cfg(feature = "enabled")]

use serde_json::Value;
use tickscope::export::{Format, html};
use tickscope::trace::{Span, SpanKind, Trace};
use tickscope::{__private::set_html_scope_budget, Capture};

use crate::html::{Scope, block, decode};

/// The page of the whole trace of `captures`, and the page written from the captures as they
/// are decoded with the blob's budget `budget` (`None`: the default).
fn pages(captures: &[Capture], budget: Option<u64>) -> (String, String) {
    let options = html::Options::new().title("pieces");
    let mut whole = Vec::new();
    html::write(&Trace::from_captures(captures), &mut whole, &options).unwrap();
    let refs: Vec<&Capture> = captures.iter().collect();
    let mut pieces = Vec::new();
    set_html_scope_budget(budget);
    let written = options.write_captures(&refs, &mut pieces);
    set_html_scope_budget(None);
    assert!(matches!(written, Some(Ok(()))), "written from the pieces");
    (
        String::from_utf8(whole).unwrap(),
        String::from_utf8(pieces).unwrap(),
    )
}

fn meta(page: &str) -> Value {
    serde_json::from_str(block(page, "ts-meta")).unwrap()
}

/// The scopes of each thread of `trace` that a level of detail from `least` ns shows: those
/// that lasted at least `least` and the parents of those shown, their parents renumbered
/// among them.
fn shown(trace: &Trace, least: u64) -> Vec<Vec<Scope>> {
    let mut threads = Vec::new();
    for thread in &trace.threads {
        let spans = &thread.spans;
        let keep = kept(spans, least);
        let mut index = vec![None; spans.len()];
        let mut scopes = Vec::new();
        for (i, span) in spans.iter().enumerate() {
            if !keep[i] {
                continue;
            }
            index[i] = Some(scopes.len());
            scopes.push(Scope {
                name: span.name().to_owned(),
                start: (span.start_ns - trace.start_ns) as i64,
                duration: span.duration_ns(),
                parent: span.parent.and_then(|p| index[p as usize]),
            });
        }
        threads.push(scopes);
    }
    threads
}

/// Whether each of `spans` is shown from `least` ns: it lasted at least that, or a span under
/// it is shown.
fn kept(spans: &[Span], least: u64) -> Vec<bool> {
    let mut keep: Vec<bool> = spans.iter().map(|s| s.duration_ns() >= least).collect();
    for i in (0..spans.len()).rev() {
        if let Some(p) = spans[i].parent.map(|p| p as usize).filter(|&p| p < i)
            && keep[i]
        {
            keep[p] = true;
        }
    }
    keep
}

/// The bin of `ns` among 40 from `min` to `max`, as the page draws a row's histogram.
fn bin(min: u64, max: u64, ns: u64) -> usize {
    let (min, max, x) = (min as f64, max as f64, ns as f64);
    let log = max > 0.0 && min > 0.0 && max / min > 50.0;
    let f = |v: f64| if log { v.ln() } else { v };
    let w = (f(max) - f(min)) / 40.0;
    let w = if w == 0.0 { 1.0 } else { w };
    (((f(x) - f(min)) / w).floor().max(0.0) as usize).min(39)
}

/// The page of `captures` is the whole trace's, byte for byte, under the budget; with a
/// budget of `share` of its scopes, its blob holds exactly what a level of detail shows, and
/// the rest of its data is the whole page's.
/// Returns the numbers of the flows of the page of a level of detail and of the whole page.
fn check(captures: &[Capture], name: &str, share: f64) -> (usize, usize) {
    let (whole, pieces) = pages(captures, None);
    assert!(whole == pieces, "{name}: the pages differ");
    let whole_meta = meta(&whole);
    assert!(whole_meta.get("lod").is_none());

    let trace = Trace::from_captures(captures);
    let scopes = trace.spans().count() as u64;
    let budget = (scopes as f64 * share) as u64;
    let (_, lod) = pages(captures, Some(budget));
    let lod_meta = meta(&lod);
    let least = lod_meta["lod"]["min_ns"].as_u64().unwrap();
    assert_eq!(lod_meta["lod"]["scopes"], scopes, "{name}");
    assert_eq!(lod_meta["lod"]["budget"], budget, "{name}");
    // The threshold: the least that keeps at most the budget, to the histogram's bucket.
    let at_least = trace.spans().filter(|s| s.1.duration_ns() >= least).count() as u64;
    assert!(at_least <= budget && at_least > 0, "{name}: {at_least}");
    let expected = shown(&trace, least);
    let decoded = decode(&lod_meta, &lod);
    assert_eq!(decoded, expected, "{name}: the scopes shown");
    let total: usize = expected.iter().map(Vec::len).sum();
    assert!((total as u64) < scopes, "{name}: {total} of {scopes}");
    assert_eq!(lod_meta["lod"]["shown"], total, "{name}");
    for (t, thread) in lod_meta["threads"].as_array().unwrap().iter().enumerate() {
        assert_eq!(thread["shown"], expected[t].len(), "{name}");
        assert_eq!(thread["spans"], trace.threads[t].spans.len(), "{name}");
    }
    // Everything else is the whole page's: the rows, the tree, the footer, the events.
    for key in [
        "table",
        "by_thread",
        "tree",
        "footer",
        "session",
        "counters",
        "instants",
        "memory",
        "names",
        "processes",
        "wall_ns",
    ] {
        assert_eq!(lod_meta[key], whole_meta[key], "{name}: {key}");
    }
    // The flows between scopes shown, renumbered.
    let renumber: Vec<Vec<Option<usize>>> = (trace.threads.iter())
        .map(|thread| {
            let mut n = 0;
            (kept(&thread.spans, least).into_iter())
                .map(|kept| {
                    n += usize::from(kept);
                    kept.then(|| n - 1)
                })
                .collect()
        })
        .collect();
    let whole_flows: Vec<u64> = serde_json::from_value(whole_meta["flows"].clone()).unwrap();
    let mut flows = Vec::new();
    for f in whole_flows.chunks(4) {
        let from = renumber[f[0] as usize][f[1] as usize];
        let to = renumber[f[2] as usize][f[3] as usize];
        if let (Some(from), Some(to)) = (from, to) {
            flows.extend([f[0], from as u64, f[2], to as u64]);
        }
    }
    assert_eq!(lod_meta["flows"], serde_json::json!(flows), "{name}: flows");
    let flow_counts = (flows.len() / 4, whole_flows.len() / 4);
    // Each row's histogram counts every call of the row, in the page's bins.
    let names: Vec<&str> = (lod_meta["names"].as_array().unwrap().iter())
        .map(|n| n.as_str().unwrap())
        .collect();
    for key in ["table", "by_thread"] {
        let rows = &lod_meta[key];
        let hist = lod_meta["hist"][key].as_array().unwrap();
        assert_eq!(hist.len() as u64, rows["rows"].as_u64().unwrap());
        for (i, counts) in hist.iter().enumerate() {
            let row_name = names[rows["name"][i].as_u64().unwrap() as usize];
            let thread = rows["thread"][i].as_i64().unwrap();
            let (min, max) = (
                rows["min_ns"][i].as_u64().unwrap(),
                rows["max_ns"][i].as_u64().unwrap(),
            );
            let mut want = [0u64; 40];
            for (t, th) in trace.threads.iter().enumerate() {
                if thread >= 0 && t as i64 != thread {
                    continue;
                }
                for span in th.spans.iter().filter(|s| s.kind == SpanKind::Scope) {
                    if span.name() == row_name {
                        want[bin(min, max, span.duration_ns())] += 1;
                    }
                }
            }
            assert_eq!(
                counts,
                &serde_json::json!(want.to_vec()),
                "{name}: {key} {row_name:.40}"
            );
            let calls: u64 = want.iter().sum();
            assert_eq!(rows["calls"][i], calls);
        }
    }
    flow_counts
}

#[test]
fn nested_threads_and_a_scope_dropped_out_of_order() {
    let captures = crate::pieces::capture("html-pieces-nested.tscope", 2, true);
    assert_eq!(check(&captures, "nested", 0.25), (0, 0));
}

#[test]
fn scopes_open_over_pieces() {
    for tangled in [false, true] {
        let name = format!("html-pieces-open-{tangled}.tscope");
        check(&crate::pieces::spanning(&name, tangled), &name, 0.25);
    }
}

#[test]
fn links_between_threads() {
    let captures = crate::pieces_links::linked("html-pieces-links.tscope");
    assert!(!Trace::from_captures(&captures).flows.is_empty());
    // Most scopes shown: some flows between them, some from or to scopes not shown.
    let (shown, all) = check(&captures, "links", 0.9);
    assert!(shown > 0 && shown < all, "{shown} of {all} flows");
}

#[test]
fn a_memory_timeline() {
    let file = crate::memory_pieces::session(2, tickscope::MemoryMode::Timeline);
    let captures = Capture::from_bytes(&file).unwrap();
    let trace = Trace::from_captures(&captures);
    assert!(!trace.memory.as_ref().unwrap().events.is_empty());
    check(&captures, "memory", 0.25);
}
