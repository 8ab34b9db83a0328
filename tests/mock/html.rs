//! The single-file HTML report (`export::html`): self-contained, hostile names escaped, and its
//! embedded data decodes back to the report's names, calls and totals. No browser here:
//! `scripts/html_check.sh` opens reports in Chromium.
#![cfg(feature = "enabled")]

use std::io::Read;

use serde_json::Value;
use tickscope::export::html;
use tickscope::report::Report;
use tickscope::trace::Trace;
use tickscope::{Profiler, scope};

use crate::common::{mock, serial};

/// Names that would break a page that wrote them as HTML or inside a script.
fn hostile() -> Vec<String> {
    vec![
        "</script><script>alert(1)</script>".to_owned(),
        "<img src=x onerror=alert(2)>".to_owned(),
        "\"quoted\" 'single' & amp".to_owned(),
        "emoji 🦀 ünï \u{2028} \u{2029} line\nbreak".to_owned(),
        "<!-- x --> </SCRIPT > ]]>".to_owned(),
        format!("long {}", "y".repeat(100 * 1024)),
    ]
}

/// A session on this thread under the mock clock: `main { parse { tokenize } ×3 }`, then each
/// hostile name once (`work` ns each) with a child.
fn record(work: u64) -> Profiler {
    let _serial = serial();
    let m = mock();
    m.increment(1_000_000_000);
    let prof = Profiler::builder().current_thread().start();
    {
        let _main = scope!("main");
        for i in 0..3u64 {
            let _parse = scope!("parse");
            m.increment(100 + i);
            let _tokenize = scope!("tokenize");
            m.increment(40 + 7 * i);
        }
    }
    for name in hostile() {
        let _g = scope!(name = name.as_str());
        m.increment(work);
        let _c = scope!("child");
        m.increment(3);
    }
    m.increment(500);
    prof.stop();
    prof
}

fn page(trace: &Trace, options: &html::Options) -> String {
    let mut out = Vec::new();
    html::write(trace, &mut out, options).unwrap();
    String::from_utf8(out).unwrap()
}

/// The text of the `<script>` element whose opening tag contains `id`.
pub(crate) fn block<'a>(page: &'a str, id: &str) -> &'a str {
    let open = format!("id=\"{id}\">");
    let start = page.find(&open).unwrap() + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    &page[start..end]
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let sextets: Vec<u8> = text.bytes().filter_map(value).collect();
    let mut out = Vec::new();
    for chunk in sextets.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &s)| n | (u32::from(s) << (18 - 6 * i)));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    out
}

/// Bytes of the varints that give the columns' lengths.
fn lens_bytes(lens: &[u64]) -> usize {
    lens.iter()
        .map(|&l| (64 - l.max(1).leading_zeros() as usize).div_ceil(7))
        .sum()
}

/// One decoded scope: name, start (ns from the trace's start), duration, parent index.
#[derive(Debug, PartialEq)]
pub(crate) struct Scope {
    pub(crate) name: String,
    pub(crate) start: i64,
    pub(crate) duration: u64,
    pub(crate) parent: Option<usize>,
}

/// The scopes of each thread in the page's blob, decoded as the page's script does.
pub(crate) fn decode(meta: &Value, page: &str) -> Vec<Vec<Scope>> {
    let bytes = base64_decode(block(page, "ts-blob"));
    let raw = if meta["blob"]["gzip"].as_bool().unwrap() {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut raw)
            .unwrap();
        raw
    } else {
        bytes
    };
    assert_eq!(raw.len(), meta["blob"]["bytes"].as_u64().unwrap() as usize);
    let mut pos = 0;
    let mut varint = || {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = raw[pos];
            pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return v;
            }
        }
    };
    let lens: Vec<u64> = (0..4).map(|_| varint()).collect();
    let counts: Vec<usize> = meta["threads"]
        .as_array()
        .unwrap()
        .iter()
        // Of a level of detail, the spans shown.
        .map(|t| t.get("shown").unwrap_or(&t["spans"]).as_u64().unwrap() as usize)
        .collect();
    let names: Vec<&str> = meta["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let mut cols: Vec<Vec<Vec<u64>>> = Vec::new();
    for _ in 0..4 {
        cols.push(
            counts
                .iter()
                .map(|&n| (0..n).map(|_| varint()).collect())
                .collect(),
        );
    }
    assert_eq!(pos, raw.len(), "the columns fill the blob");
    assert_eq!(
        lens.iter().sum::<u64>() as usize,
        raw.len() - lens_bytes(&lens)
    );
    let mut threads = Vec::new();
    for (t, &n) in counts.iter().enumerate() {
        let mut scopes: Vec<Scope> = Vec::with_capacity(n);
        let mut last_child_end: Vec<Option<i64>> = vec![None; n];
        let mut root_end = 0i64;
        for i in 0..n {
            let d = cols[1][t][i] as usize;
            let parent = (d > 0).then(|| i - d);
            let z = cols[2][t][i];
            let gap = ((z >> 1) as i64) ^ -((z & 1) as i64);
            let reference = match parent {
                Some(p) => last_child_end[p].unwrap_or(scopes[p].start),
                None => root_end,
            };
            let start = reference + gap;
            let duration = cols[3][t][i];
            let end = start + duration as i64;
            match parent {
                Some(p) => last_child_end[p] = Some(end),
                None => root_end = end,
            }
            scopes.push(Scope {
                name: names[cols[0][t][i] as usize].to_owned(),
                start,
                duration,
                parent,
            });
        }
        threads.push(scopes);
    }
    threads
}

#[test]
fn self_contained_and_no_name_can_close_a_block() {
    let prof = record(1_000);
    let page = page(
        &prof.trace(),
        &html::Options::new().title("</title><b>x</b>"),
    );
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    // The markup and code, without the data (names in the data are text, checked below).
    let code = page
        .replace(block(&page, "ts-meta"), "")
        .replace(block(&page, "ts-blob"), "");
    for forbidden in [
        "http://",
        "https://",
        "src=",
        "href=",
        "url(",
        "@import",
        "fetch(",
        "XMLHttpRequest",
        "WebSocket",
        "import(",
        "<link",
        "<iframe",
    ] {
        assert!(
            !code.contains(forbidden),
            "the page holds `{forbidden}`: it could request something"
        );
    }
    // Exactly the report's three scripts: the JSON data, the blob and the code.
    assert_eq!(page.matches("<script").count(), 3);
    assert_eq!(page.to_ascii_lowercase().matches("</script").count(), 3);
    let meta = block(&page, "ts-meta");
    for c in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
        assert!(!meta.contains(c), "raw {c:?} in the data block");
    }
    assert!(page.contains("<title>&lt;/title&gt;&lt;b&gt;x&lt;/b&gt;</title>"));
    // The data reads back as JSON with every name whole.
    let meta: Value = serde_json::from_str(meta).unwrap();
    let names: Vec<&str> = meta["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for name in hostile() {
        assert!(names.contains(&name.as_str()), "{:.40} missing", name);
    }
    assert_eq!(meta["title"], "</title><b>x</b>");
}

#[test]
fn embedded_data_decodes_to_the_report() {
    let prof = record(2_000);
    let trace = prof.trace();
    let report = Report::new(&trace);
    let page = page(&trace, &html::Options::new());
    let meta: Value = serde_json::from_str(block(&page, "ts-meta")).unwrap();
    let names = meta["names"].as_array().unwrap();
    let table = &meta["table"];
    let rows = table["rows"].as_u64().unwrap() as usize;
    assert_eq!(rows, report.rows().len());
    assert_eq!(rows, 3 + hostile().len() + 1);
    for (i, row) in report.rows().iter().enumerate() {
        let name = names[table["name"][i].as_u64().unwrap() as usize]
            .as_str()
            .unwrap();
        assert_eq!(name, row.name);
        assert_eq!(table["calls"][i], row.calls);
        assert_eq!(table["total_ns"][i], row.total_ns);
        assert_eq!(table["self_ns"][i], row.self_ns);
        assert_eq!(table["p50_ns"][i], row.p50_ns);
        assert_eq!(table["p99_ns"][i], row.p99_ns);
        assert_eq!(table["min_ns"][i], row.min_ns);
        assert_eq!(table["max_ns"][i], row.max_ns);
        assert_eq!(table["avg_ns"][i], row.avg_ns());
    }
    // Every scope, exactly: name, start, duration and parent.
    let threads = decode(&meta, &page);
    assert_eq!(threads.len(), trace.threads.len());
    for (decoded, thread) in threads.iter().zip(&trace.threads) {
        let expected: Vec<Scope> = thread
            .spans
            .iter()
            .map(|s| Scope {
                name: s.name().to_owned(),
                start: (s.start_ns - trace.start_ns) as i64,
                duration: s.duration_ns(),
                parent: s.parent.map(|p| p as usize),
            })
            .collect();
        assert_eq!(decoded, &expected);
    }
    // Summed per name, the scopes give the report's calls and totals.
    for row in report.rows() {
        let calls: Vec<&Scope> = threads
            .iter()
            .flatten()
            .filter(|s| s.name == row.name)
            .collect();
        assert_eq!(calls.len() as u64, row.calls, "{:.40}", row.name);
        assert_eq!(
            calls.iter().map(|s| s.duration).sum::<u64>(),
            row.total_ns,
            "{:.40}",
            row.name
        );
    }
    // The merged call tree: main's children are parse (3 calls) and nothing else.
    let tree = &meta["tree"];
    let node_name = |i: usize| {
        names[tree["name"][i].as_u64().unwrap() as usize]
            .as_str()
            .unwrap()
    };
    let roots: Vec<usize> = (0..tree["parent"].as_array().unwrap().len())
        .filter(|&i| tree["parent"][i] == -1)
        .collect();
    let main = *roots.iter().find(|&&i| node_name(i) == "main").unwrap();
    let kids: Vec<usize> = (0..tree["parent"].as_array().unwrap().len())
        .filter(|&i| tree["parent"][i] == main as i64)
        .collect();
    assert_eq!(kids.len(), 1);
    assert_eq!(node_name(kids[0]), "parse");
    assert_eq!(tree["calls"][kids[0]], 3);
    assert_eq!(
        tree["total_ns"][kids[0]],
        report.get("parse").unwrap().total_ns
    );
    assert_eq!(meta["base"], Value::Null);
    assert_eq!(meta["diff"], Value::Null);
}

#[test]
fn a_baseline_adds_the_verdicts_of_diff() {
    let base = record(1_000).trace();
    let new = record(1_500).trace();
    let page = page(&new, &html::Options::new().baseline(base.clone()));
    let meta: Value = serde_json::from_str(block(&page, "ts-meta")).unwrap();
    let names = meta["names"].as_array().unwrap();
    let diff = tickscope::report::Diff::new(&base, &new, &Default::default());
    let rows = meta["diff"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), diff.rows.len());
    for (row, expected) in rows.iter().zip(&diff.rows) {
        assert_eq!(names[row[0].as_u64().unwrap() as usize], expected.name);
        assert_eq!(row[1], expected.verdict.name());
    }
    assert_eq!(
        meta["base"]["table"]["rows"].as_u64().unwrap() as usize,
        Report::new(&base).rows().len()
    );
}

#[test]
fn profiler_write_puts_the_page_in_a_file() {
    let prof = record(10);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.html");
    prof.write(&path, &html::Options::new()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, page(&prof.trace(), &html::Options::new()));
}
