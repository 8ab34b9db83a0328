//! The `tickscope` binary run as a process on capture files made here by real sessions.
//!
//! Sessions use the mock clock (ticks are nanoseconds), installed before the first one; the
//! clock is process-wide, so recording takes `SERIAL`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use tickscope::export::{self, chrome, folded};
use tickscope::report::Report;
use tickscope::report::compare::{Diff, Options};
use tickscope::table::{SortBy, Table};
use tickscope::trace::Trace;
use tickscope::{Capture, Profiler, scope};

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `work` in a session of this thread (and the threads that join it) under the mock
/// clock; `work` gets a function that advances the clock by that many nanoseconds.
fn record(work: impl FnOnce(&Profiler, &(dyn Fn(u64) + Sync))) -> Profiler {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mock = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    let advance = move |ns: u64| mock.increment(ns);
    let prof = Profiler::builder().current_thread().start();
    work(&prof, &advance);
    prof.stop();
    prof
}

/// The workload every test records: `main { parse { tokenize } ×3, hash }` on this thread
/// (with `extra` inside `main` when asked) and `io` on a second thread, 3 ms in all.
fn workload(tokenize_ns: u64, hash_ns: u64, extra: bool) -> Profiler {
    record(|prof, advance| {
        advance(1_000);
        let main = scope!("main");
        for _ in 0..3 {
            let _parse = scope!("parse");
            advance(200);
            let _tokenize = scope!("tokenize");
            advance(tokenize_ns);
        }
        {
            let _hash = scope!("hash");
            advance(hash_ns);
        }
        if extra {
            let _extra = scope!("extra");
            advance(5);
        }
        drop(main);
        let prof = prof.clone();
        std::thread::scope(|s| {
            s.spawn(move || {
                prof.join_current_thread();
                let _io = scope!("io");
                advance(300);
            });
        });
        let used = 1_000 + 3 * (200 + tokenize_ns) + hash_ns + 5 * u64::from(extra) + 300;
        advance(3_000_000 - used);
    })
}

/// A fresh, empty folder for one test.
fn folder(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-tests")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// `prof`'s capture written to `dir/name`.
fn capture_file(prof: &Profiler, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    prof.write_capture(&path).unwrap();
    path
}

/// [`capture_file`] in the format before packed event chunks: records of 16 bytes, which a
/// file cut inside a chunk keeps whole up to the cut.
fn unpacked_capture_file(prof: &Profiler, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    tickscope::__private::unpacked(|| prof.write_capture(&path)).unwrap();
    path
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn tickscope(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(args)
        .output()
        .unwrap();
    Run {
        code: out.status.code().expect("exited, not killed by a signal"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The run failed with exit code 2 and one line on stderr that names `file`.
fn assert_input_error(run: &Run, file: &Path) {
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
    assert!(run.stderr.contains(s(file)), "{}", run.stderr);
    assert_eq!(run.stdout, "");
}

#[test]
fn table_prints_what_the_profiler_prints() {
    let prof = workload(100, 50, false);
    let dir = folder("table");
    let file = capture_file(&prof, &dir, "run.tscope");
    let cases: [(&[&str], tickscope::table::Table); 7] = [
        (&[], prof.table()),
        (
            &["--sort", "calls", "--limit", "2"],
            prof.table().sort_by(SortBy::Calls).limit(2),
        ),
        (&["--sort", "self"], prof.table().sort_by(SortBy::SelfTime)),
        (&["--sort", "name"], prof.table().sort_by(SortBy::Name)),
        (&["--by-thread"], prof.table().by_thread(true)),
        (&["--tree"], prof.table().tree(true)),
        (
            &["--tree", "--by-thread", "--limit", "3", "--sort", "p99"],
            prof.table()
                .tree(true)
                .by_thread(true)
                .limit(3)
                .sort_by(SortBy::P99),
        ),
    ];
    for (options, expected) in cases {
        let mut args = vec!["table", s(&file)];
        args.extend(options);
        let run = tickscope(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert_eq!(run.stdout, expected.to_string(), "{args:?}");
        assert_eq!(run.stderr, "");
    }
    // The numbers themselves, for one row.
    let run = tickscope(&["table", s(&file), "--sort", "name"]);
    let tokenize = run
        .stdout
        .lines()
        .find(|l| l.starts_with("tokenize"))
        .unwrap();
    let cells: Vec<&str> = tokenize.split("  ").filter(|c| !c.is_empty()).collect();
    assert_eq!(cells[1].trim(), "3");
    assert_eq!(cells[2].trim(), "300 ns");
}

#[test]
fn table_shows_counters_and_values() {
    let prof = record(|_, advance| {
        for (i, depth) in [3, 7, 2].into_iter().enumerate() {
            advance(10);
            tickscope::counter!("queue_depth", set = depth);
            tickscope::counter!("bytes_sent", add = 100 * (i + 1));
            tickscope::value!("batch_size", depth);
        }
        tickscope::instant!("drained");
    });
    let dir = folder("table_counters");
    let file = capture_file(&prof, &dir, "run.tscope");
    let run = tickscope(&["table", s(&file), "--sort", "max"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, prof.table().sort_by(SortBy::Max).to_string());
    let sections = run.stdout.split_once("\nCounters\n").unwrap().1;
    assert_eq!(
        sections,
        "\
Name         Samples  First  Last  Min  Max     Mean
----------------------------------------------------
bytes_sent         3    100   600  100  600  333.333
queue_depth        3      3     2    2    7        4

Values
Name        Count  Min  Max  Mean  P50  P99
-------------------------------------------
batch_size      3    2    7     4    3    7
"
    );
}

#[test]
fn table_selects_a_session() {
    let (a, b) = (workload(100, 50, false), workload(100, 50, true));
    let dir = folder("table_session");
    let (fa, fb) = (
        capture_file(&a, &dir, "a.tscope"),
        capture_file(&b, &dir, "b.tscope"),
    );
    let both = dir.join("both.tscope");
    assert_eq!(
        tickscope(&["merge", s(&fa), s(&fb), "-o", s(&both)]).code,
        0
    );
    let run = tickscope(&["table", s(&both), "--session", "2"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, b.table().to_string());
    let run = tickscope(&["table", s(&both), "--session", "1"]);
    assert_eq!(run.stdout, a.table().to_string());
    // By default, every session: two of this process, one trace.
    let run = tickscope(&["table", s(&both)]);
    let all = Trace::from_captures(&Capture::read_all(&both).unwrap());
    assert_eq!(all.processes.len(), 1);
    assert_eq!(run.stdout, Table::new(Arc::new(all)).to_string());
    assert_eq!(row(&run.stdout, "main")[1], "2", "{}", run.stdout);
    let run = tickscope(&["table", s(&both), "--session", "3"]);
    assert_input_error(&run, &both);
    assert!(run.stderr.contains("2 sessions"), "{}", run.stderr);
    // Counted across several files.
    let run = tickscope(&["table", s(&fa), s(&fb), "--session", "2"]);
    assert_eq!(run.stdout, b.table().to_string());
    let run = tickscope(&["table", s(&fa), s(&fb), "--session", "3"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "error: no session 3: the files hold 2 sessions\n"
    );
}

/// The cells of the table row named `name` (its first cell).
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    let cells = |l: &'a str| l.split_whitespace().collect::<Vec<_>>();
    let found = table.lines().map(cells).find(|c| c.first() == Some(&name));
    found.unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

/// The bytes of the capture file at `path` as if process `pid` had written it: its session
/// header's process id, after the 16-byte chunk header, the format version (2 bytes) and 2
/// reserved bytes.
fn as_process(path: &Path, pid: u32) -> Vec<u8> {
    let mut bytes = fs::read(path).unwrap();
    assert_eq!(&bytes[..4], b"TSCP");
    bytes[20..24].copy_from_slice(&pid.to_le_bytes());
    bytes
}

#[test]
fn a_file_of_two_processes_converts_into_one_trace() {
    let (a, b) = (workload(100, 50, false), workload(100, 50, true));
    let dir = folder("two_processes");
    let fa = capture_file(&a, &dir, "a.tscope");
    let pid = std::process::id();
    let other = pid + 1;
    let fb = dir.join("b.tscope");
    fs::write(&fb, as_process(&capture_file(&b, &dir, "b0.tscope"), other)).unwrap();
    let both = dir.join("both.tscope");
    fs::write(
        &both,
        [fs::read(&fa).unwrap(), fs::read(&fb).unwrap()].concat(),
    )
    .unwrap();
    let trace = Trace::from_captures(&Capture::read_all(&both).unwrap());
    let pids: Vec<u32> = trace.processes.iter().map(|p| p.id).collect();
    assert_eq!(pids, [pid, other]);

    // The table sums the processes: each name's calls in both.
    let run = tickscope(&["table", s(&both)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, Table::new(Arc::new(trace.clone())).to_string());
    for (name, calls) in [
        ("main", "2"),
        ("parse", "6"),
        ("tokenize", "6"),
        ("io", "2"),
    ] {
        assert_eq!(row(&run.stdout, name)[1], calls, "{}", run.stdout);
    }
    assert_eq!(row(&run.stdout, "extra")[1], "1", "{}", run.stdout);
    assert!(
        run.stdout
            .contains(" wall, 2 processes, 4 threads, 19 scopes, "),
        "{}",
        run.stdout
    );
    // By thread, each thread is named after its process.
    let run = tickscope(&["table", s(&both), "--by-thread"]);
    let expected = Table::new(Arc::new(trace.clone())).by_thread(true);
    assert_eq!(run.stdout, expected.to_string());
    let exe = &trace.processes[0].name;
    for process in [pid, other] {
        let label = format!("{exe} {process}/");
        let rows = run.stdout.lines().filter(|l| l.starts_with(&label)).count();
        assert_eq!(rows, if process == pid { 5 } else { 6 }, "{}", run.stdout);
    }

    // Chrome JSON: both processes, under their pids, on one time line.
    let out = dir.join("both.json");
    let run = tickscope(&["convert", s(&both), "-o", s(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&out);
    let events = doc["traceEvents"].as_array().unwrap();
    let names: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [(pid.into(), exe.as_str()), (other.into(), exe.as_str())]
    );
    let mains: Vec<(u64, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "main")
        .map(|e| (e["pid"].as_u64().unwrap(), e["ts"].as_f64().unwrap()))
        .collect();
    let starts: Vec<(u64, f64)> = trace
        .threads
        .iter()
        .flat_map(|t| t.spans.iter().map(move |s| (t, s)))
        .filter(|(_, s)| s.name() == "main")
        .map(|(t, s)| {
            let pid = trace.process_of(t).id;
            (pid.into(), (s.start_ns - trace.start_ns) as f64 / 1000.0)
        })
        .collect();
    assert_eq!(mains, starts);
    // The second process's session ran after the first: its scopes after the first's.
    assert!(mains[1].1 >= 3_000.0, "{mains:?}");
    assert_eq!(events_with(&doc, "ph", "X"), 19);

    // Several files convert as their concatenation.
    let out2 = dir.join("files.json");
    let run = tickscope(&["convert", s(&fa), s(&fb), "-o", s(&out2)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(fs::read(&out2).unwrap(), fs::read(&out).unwrap());
    // And one session is what it was.
    let out3 = dir.join("second.json");
    let run = tickscope(&["convert", s(&both), "--session", "2", "-o", s(&out3)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(events_with(&json(&out3), "ph", "X"), 10);
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn events_with(doc: &serde_json::Value, key: &str, value: &str) -> usize {
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e[key] == value)
        .count()
}

#[test]
fn convert_writes_each_format() {
    let prof = workload(100, 50, false);
    let dir = folder("convert");
    let file = capture_file(&prof, &dir, "run.tscope");
    let scopes = 9; // main, 3 parse, 3 tokenize, hash, io
    let convert = |out: &Path, flags: &[&str]| {
        let mut args = vec!["convert", s(&file), "-o", s(out)];
        args.extend(flags);
        let run = tickscope(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert_eq!(run.stdout, "");
        // What it wrote, on stderr: the path, the format and the size.
        let name = out.file_name().unwrap().to_str().unwrap();
        let what = match (name, flags) {
            (_, ["--kineto"]) => "Kineto JSON (PyTorch profiler trace)",
            ("trace.json.gz", _) => "Chrome Trace Event JSON, gzipped",
            (_, _) if name.ends_with(".json") => "Chrome Trace Event JSON",
            (_, _) if name.ends_with(".folded") => "folded stacks",
            ("flame.svg", _) => "flame graph SVG",
            ("profile.pb.gz", _) => "pprof profile, gzipped",
            ("trace.pftrace", _) => "Perfetto trace",
            _ => unreachable!("{name}"),
        };
        let size = size_text(fs::metadata(out).unwrap().len());
        assert_eq!(run.stderr, format!("wrote {}: {what}, {size}\n", s(out)));
        let quiet = tickscope(&[&args[..], &["-q"]].concat());
        assert_eq!((quiet.code, quiet.stderr.as_str()), (0, ""));
    };

    let out = dir.join("trace.json");
    convert(&out, &[]);
    assert_eq!(events_with(&json(&out), "ph", "X"), scopes);
    let expected = dir.join("expected.json");
    export::write_file(&prof.trace(), &expected, &chrome::Options::new()).unwrap();
    // Byte for byte: the process named is the one that recorded (this test), not the CLI.
    assert_eq!(fs::read(&out).unwrap(), fs::read(&expected).unwrap());
    let doc = json(&out);
    let pids: Vec<_> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["pid"].as_u64())
        .collect();
    assert!(!pids.is_empty());
    assert!(pids.iter().all(|&p| p == u64::from(std::process::id())));

    let out = dir.join("unix.json");
    convert(&out, &["--unix-time"]);
    let doc = json(&out);
    assert_eq!(events_with(&doc, "ph", "B"), scopes);
    assert_eq!(events_with(&doc, "ph", "E"), scopes);

    let out = dir.join("kineto.json");
    convert(&out, &["--kineto"]);
    let doc = json(&out);
    assert_eq!(events_with(&doc, "cat", "cpu_op"), scopes);
    assert_eq!(doc["distributedInfo"]["rank"], 0);

    let out = dir.join("trace.json.gz");
    convert(&out, &[]);
    assert_eq!(fs::read(&out).unwrap()[..2], [0x1f, 0x8b]);

    let out = dir.join("stacks.folded");
    convert(&out, &[]);
    let text = fs::read_to_string(&out).unwrap();
    let expected = dir.join("expected.folded");
    export::write_file(&prof.trace(), &expected, &folded::Options::new()).unwrap();
    assert_eq!(text, fs::read_to_string(&expected).unwrap());
    let stacks: Vec<&str> = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().0)
        .collect();
    assert_eq!(
        stacks,
        [
            "io",
            "main",
            "main;hash",
            "main;parse",
            "main;parse;tokenize"
        ]
    );

    let out = dir.join("threads.folded");
    convert(&out, &["--by-thread"]);
    assert_eq!(fs::read_to_string(&out).unwrap().lines().count(), 5);

    let out = dir.join("flame.svg");
    convert(&out, &[]);
    let svg = fs::read_to_string(&out).unwrap();
    assert!(svg.contains("<svg") && svg.contains("tokenize"), "{svg}");

    // pprof, gzipped: what the library writes (tests/mock/pprof.rs decodes it).
    let out = dir.join("profile.pb.gz");
    convert(&out, &[]);
    let expected = dir.join("expected.pb");
    export::write_file(&prof.trace(), &expected, &export::pprof::Options::new()).unwrap();
    let gz = fs::read(&out).unwrap();
    assert_eq!(gz[..2], [0x1f, 0x8b]);
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut plain)
        .unwrap();
    assert_eq!(plain, fs::read(&expected).unwrap());

    // A native Perfetto trace: what the library writes (tests/mock/perfetto.rs decodes it).
    let out = dir.join("trace.pftrace");
    convert(&out, &[]);
    let expected = dir.join("expected.pftrace");
    export::write_file(&prof.trace(), &expected, &export::perfetto::Options::new()).unwrap();
    assert_eq!(fs::read(&out).unwrap(), fs::read(&expected).unwrap());
}

#[test]
fn convert_refuses_what_it_cannot_write() {
    let prof = workload(100, 50, false);
    let dir = folder("convert_refuses");
    let file = capture_file(&prof, &dir, "run.tscope");
    let out = dir.join("trace.txt");
    let run = tickscope(&["convert", s(&file), "-o", s(&out)]);
    assert_input_error(&run, &out);
    for ext in [".json", ".json.gz", ".folded", ".svg", ".pftrace"] {
        assert!(run.stderr.contains(ext), "{}", run.stderr);
    }
    let out = dir.join("stacks.folded");
    let run = tickscope(&["convert", s(&file), "-o", s(&out), "--kineto"]);
    assert_input_error(&run, &out);
    // A usage error, reported by the argument parser.
    let out = dir.join("t.json");
    let run = tickscope(&[
        "convert",
        s(&file),
        "-o",
        s(&out),
        "--kineto",
        "--unix-time",
    ]);
    assert_eq!(run.code, 2);
    assert!(!out.exists());
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["run.tscope"], "nothing else written");
}

/// A size under 1 MiB as the CLI writes it: `512 bytes`, `15.7 KiB (16,080 bytes)`.
fn size_text(bytes: u64) -> String {
    assert!(bytes < 1 << 20, "{bytes}");
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        format!(
            "{:.1} KiB ({} bytes)",
            bytes as f64 / 1024.0,
            grouped(bytes)
        )
    }
}

/// `n` with its thousands grouped, as the CLI writes counts: `12,345`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[test]
fn an_output_that_cannot_be_written_is_named_not_its_temporary_file() {
    let prof = workload(100, 50, false);
    let dir = folder("convert_unwritable");
    let file = capture_file(&prof, &dir, "run.tscope");
    // A folder that does not exist, and a "folder" that is a file: the temporary file beside
    // the target cannot be created (whoever runs the tests, root included).
    let missing = dir.join("missing").join("trace.json");
    let run = tickscope(&["convert", s(&file), "-o", s(&missing)]);
    assert_input_error(&run, &missing);
    assert!(
        run.stderr
            .starts_with(&format!("error: cannot create {}: ", s(&missing))),
        "{}",
        run.stderr
    );
    let under_a_file = file.join("trace.folded");
    for command in ["convert", "merge"] {
        let run = tickscope(&[command, s(&file), "-o", s(&under_a_file)]);
        assert_input_error(&run, &under_a_file);
        assert!(!run.stderr.contains(".tmp"), "{}", run.stderr);
    }
    let run = tickscope(&["merge", s(&file), "-o", s(&missing)]);
    assert!(
        run.stderr
            .starts_with(&format!("error: cannot create {}: ", s(&missing))),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains(".tmp"), "{}", run.stderr);
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["run.tscope"], "nothing else written");
}

#[test]
fn merge_says_what_it_wrote() {
    let prof = workload(100, 50, false);
    let dir = folder("merge_says");
    let file = capture_file(&prof, &dir, "run.tscope");
    let out = dir.join("both.tscope");
    let run = tickscope(&["merge", s(&file), s(&file), "-o", s(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bytes = fs::metadata(&out).unwrap().len();
    assert_eq!(bytes, 2 * fs::metadata(&file).unwrap().len());
    let size = size_text(bytes);
    assert_eq!(
        run.stderr,
        format!("wrote {}: capture file, 2 sessions, {size}\n", s(&out))
    );
    let run = tickscope(&["merge", "--quiet", s(&file), "-o", s(&out)]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
}

/// The workload's shares: the time in scopes is main 0 + parse 600 + tokenize 300 + hash 50
/// + io 300 = 1250 ns over both threads.
#[test]
fn table_percentages_are_shares_of_the_time_in_scopes() {
    let prof = workload(100, 50, false);
    let dir = folder("table_percent");
    let file = capture_file(&prof, &dir, "run.tscope");
    let run = tickscope(&["table", s(&file), "--unit", "ns"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "Name", "Calls", "Total", "Total", "%", "Self", "Self", "%", "Avg", "Min", "Max",
            "P50", "P99"
        ]
    );
    // Name, calls, total, total %, self, self % (the unit aside).
    let shares: Vec<Vec<&str>> = lines[2..7]
        .iter()
        .map(|l| {
            l.split_whitespace()
                .filter(|c| *c != "ns")
                .take(6)
                .collect()
        })
        .collect();
    assert_eq!(
        shares,
        [
            ["main", "1", "950", "76.0", "0", "0.0"],
            ["parse", "3", "900", "72.0", "600", "48.0"],
            ["io", "1", "300", "24.0", "300", "24.0"],
            ["tokenize", "3", "300", "24.0", "300", "24.0"],
            ["hash", "1", "50", "4.0", "50", "4.0"],
        ]
    );
    assert_eq!(
        lines[7..],
        [
            "3.00 ms wall, 2 threads, 9 scopes, 0 dropped events",
            "Total % and Self %: of 1.25 µs in scopes, all threads (every row's Self added up)",
        ]
    );
    let run = tickscope(&["table", s(&file), "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        (doc["schema"].clone(), doc["scope_ns"].clone()),
        (2.into(), 1250.into())
    );
    let percents: Vec<(f64, f64)> = (doc["rows"].as_array().unwrap().iter())
        .map(|r| {
            let f = |key: &str| r[key].as_f64().unwrap();
            (f("total_percent"), f("self_percent"))
        })
        .collect();
    assert_eq!(
        percents,
        [
            (76.0, 0.0),
            (72.0, 48.0),
            (24.0, 24.0),
            (24.0, 24.0),
            (4.0, 4.0)
        ]
    );
    let run = tickscope(&["table", s(&file), "--tree", "--unit", "ns"]);
    let root: Vec<&str> = (run.stdout.lines().nth(2).unwrap().split_whitespace())
        .filter(|c| *c != "ns")
        .collect();
    assert_eq!(root, ["main", "1", "950", "76.0", "0", "0.0"]);
}

#[test]
fn limit_says_how_many_rows_it_hid() {
    let prof = workload(100, 50, false);
    let dir = folder("table_limit");
    let file = capture_file(&prof, &dir, "run.tscope");
    let table = |flags: &[&str]| {
        let run = tickscope(&[&["table", s(&file)], flags].concat());
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
    };
    let footer = |text: &str| {
        text.lines()
            .skip_while(|l| !l.contains(" wall, "))
            .nth(2)
            .map(str::to_owned)
    };
    // Five names, two shown.
    let text = table(&["--limit", "2"]);
    assert_eq!(text.lines().count(), 2 + 2 + 3, "{text}");
    assert_eq!(
        footer(&text).as_deref(),
        Some("3 rows hidden by the limit of 2")
    );
    // Four names on the main thread, one on the other; a row each shown.
    let text = table(&["--limit", "1", "--by-thread"]);
    assert_eq!(
        footer(&text).as_deref(),
        Some("3 rows hidden by the limit of 1 per thread"),
        "{text}"
    );
    let text = table(&["--limit", "2", "--tree"]);
    assert_eq!(
        footer(&text).as_deref(),
        Some("3 nodes hidden by the limit of 2")
    );
    // Nothing hidden, nothing said.
    for flags in [&["--limit", "5"][..], &[]] {
        let text = table(flags);
        assert_eq!(footer(&text), None, "{text}");
    }
    // Markdown: a paragraph after the table; JSON: a field (and the footer's line); CSV: the
    // rows only.
    let markdown = table(&["--limit", "2", "--format", "markdown"]);
    assert!(
        markdown.ends_with("\n\n3 rows hidden by the limit of 2\n"),
        "{markdown}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&table(&["--limit", "2", "--format", "json"])).unwrap();
    assert_eq!(doc["hidden_rows"], 3);
    assert_eq!(doc["rows"].as_array().unwrap().len(), 2);
    assert_eq!(doc["footer"][2], "3 rows hidden by the limit of 2");
    let doc: serde_json::Value = serde_json::from_str(&table(&["--format", "json"])).unwrap();
    assert_eq!(doc["hidden_rows"], 0);
    let csv = table(&["--limit", "2", "--format", "csv"]);
    assert_eq!(csv.lines().count(), 3, "{csv}");
}

/// A capture of 16 MiB or more: the size from which progress is shown on a terminal.
#[test]
fn a_large_input_shows_no_progress_when_stderr_is_not_a_terminal() {
    let prof = record(|_, advance| {
        for _ in 0..1_100_000 {
            let _g = scope!("step");
            advance(1);
        }
    });
    let dir = folder("large_input");
    // Unpacked: 8 bytes a record (packed, the file would be a fiftieth of that).
    let file = unpacked_capture_file(&prof, &dir, "large.tscope");
    assert!(fs::metadata(&file).unwrap().len() >= 16 << 20);
    let run = tickscope(&["table", s(&file)]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert!(run.stdout.contains("1100000"), "{}", run.stdout);
    let out = dir.join("large.folded");
    let run = tickscope(&["convert", s(&file), "-o", s(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr.lines().count(),
        1,
        "only what it wrote: {}",
        run.stderr
    );
    assert!(run.stderr.starts_with("wrote "), "{}", run.stderr);
}

/// `key  value` lines of `tickscope info`, under `session N`.
fn info_fields(stdout: &str, session: usize) -> Vec<(String, String)> {
    stdout
        .lines()
        .skip_while(|l| *l != format!("session {session}"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.trim().split_once("  "))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// `name`, or `(unknown)` as `info` shows an empty one.
fn known(name: &str) -> String {
    if name.is_empty() { "(unknown)" } else { name }.to_owned()
}

#[test]
fn info_describes_the_file() {
    let prof = workload(100, 50, false);
    let dir = folder("info");
    let file = capture_file(&prof, &dir, "run.tscope");
    let run = tickscope(&["info", s(&file)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "");
    assert_eq!(
        run.stdout.lines().next().unwrap(),
        format!("{}: 1 session", s(&file))
    );
    let capture = prof.capture();
    let expected = [
        ("format version", capture.format_version().to_string()),
        ("producer", capture.producer().to_owned()),
        ("process id", std::process::id().to_string()),
        ("process name", capture.process_name().to_owned()),
        ("host name", known(capture.host_name())),
        ("threads", capture.thread_count().to_string()),
        ("chunks", capture.chunk_count().to_string()),
        ("records", capture.record_count().to_string()),
        ("dropped events", "0".to_owned()),
        ("overwritten events", "0".to_owned()),
        ("memory tracked", "no".to_owned()),
        ("time span", "0.003 s".to_owned()),
        ("time covered", "0.003 s".to_owned()),
        ("warnings", "0".to_owned()),
    ];
    let expected: Vec<(String, String)> = expected
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert_eq!(info_fields(&run.stdout, 1), expected);
    assert_eq!(capture.thread_count(), 2);
    assert_eq!(capture.record_count(), 18);
    assert!(capture.producer().starts_with("tickscope "));
}

#[test]
fn merge_concatenates_sessions() {
    let (a, b) = (workload(100, 50, false), workload(200, 40, true));
    let dir = folder("merge");
    let (fa, fb) = (
        capture_file(&a, &dir, "a.tscope"),
        capture_file(&b, &dir, "b.tscope"),
    );
    let out = dir.join("both.tscope");
    let run = tickscope(&["merge", "-q", s(&fa), s(&fb), "-o", s(&out)]);
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr.as_str()),
        (0, "", "")
    );
    let sessions = Capture::read_all(&out).unwrap();
    assert_eq!(sessions.len(), 2);
    for (session, prof) in sessions.into_iter().zip([a, b]) {
        let table = tickscope::table::Table::new(Arc::new(session.decode()));
        assert_eq!(
            table.tree(true).to_string(),
            prof.table().tree(true).to_string()
        );
    }
    let run = tickscope(&["info", s(&out)]);
    assert!(
        run.stdout
            .starts_with(&format!("{}: 2 sessions\n", s(&out)))
    );
    assert_eq!(info_fields(&run.stdout, 2).len(), 14);
    // Merging a merged file keeps every session.
    let out3 = dir.join("three.tscope");
    assert_eq!(
        tickscope(&["merge", s(&out), s(&fa), "-o", s(&out3)]).code,
        0
    );
    assert_eq!(Capture::read_all(&out3).unwrap().len(), 3);
    // A table of a file of several sessions is of all of them, without a warning; one
    // session is asked for with --session.
    let run = tickscope(&["table", s(&out3)]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stderr, "");
    assert_ne!(
        run.stdout,
        tickscope(&["table", s(&out3), "--session", "1"]).stdout
    );
}

#[test]
fn merge_writes_nothing_when_an_input_is_bad() {
    let prof = workload(100, 50, false);
    let dir = folder("merge_bad");
    let good = capture_file(&prof, &dir, "good.tscope");
    let bad = dir.join("bad.tscope");
    fs::write(&bad, b"definitely not a capture").unwrap();
    let out = dir.join("out.tscope");
    let run = tickscope(&["merge", s(&good), s(&bad), "-o", s(&out)]);
    assert_input_error(&run, &bad);
    assert!(!out.exists());
    // An existing output stays as it was.
    fs::write(&out, b"old").unwrap();
    let missing = dir.join("missing.tscope");
    let run = tickscope(&["merge", s(&good), s(&missing), "-o", s(&out)]);
    assert_input_error(&run, &missing);
    assert_eq!(fs::read(&out).unwrap(), b"old");
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        3,
        "no temporary file left"
    );
}

/// The chunks of a capture file: (offset, type, content length).
fn chunks(bytes: &[u8]) -> Vec<(usize, u16, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= bytes.len() {
        let kind = u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]);
        let len = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap()) as usize;
        out.push((at, kind, len));
        at += 16 + len.next_multiple_of(16);
    }
    out
}

/// A capture cut inside its second thread's records: `main` (1 ms) on this thread, and on
/// a worker, `batch` from 1100 around two `add_line`s (1100 to 1120, 1120 to 1150); the cut
/// keeps the worker's first four records and 5 bytes of the fifth. `batch` and the second
/// `add_line` are cut open, and end at the worker's last salvaged record (1120), not at the
/// session's end (main's, 1_001_000): `table --by-thread` lists both threads and says what
/// was lost. The same file gzipped and cut reads as its decompressed prefix. (Written in the
/// format before packed event chunks, whose records a cut keeps up to it; a packed chunk cut
/// short is lost whole.)
#[test]
fn table_of_a_cut_capture_ends_open_scopes_at_their_threads_last_record() {
    let prof = record(|prof, advance| {
        advance(1_000);
        let main = scope!("main");
        let prof = prof.clone();
        std::thread::scope(|s| {
            s.spawn(move || {
                prof.join_current_thread();
                advance(100);
                let _batch = scope!("batch");
                for ns in [20, 30] {
                    let _line = scope!("add_line");
                    advance(ns);
                }
            });
        });
        advance(1_000_000 - 150);
        drop(main);
    });
    let dir = folder("table_cut");
    let whole = fs::read(unpacked_capture_file(&prof, &dir, "whole.tscope")).unwrap();
    let events: Vec<_> = chunks(&whole).into_iter().filter(|c| c.1 == 5).collect();
    assert_eq!(events.len(), 2, "one event chunk per thread");
    // The worker's chunk: its prefix (thread id, flags) and six records, a word each.
    let (at, _, len) = events[1];
    assert_eq!(len, 16 + 6 * 8);
    let cut = dir.join("cut.tscope");
    fs::write(&cut, &whole[..at + 16 + 16 + 4 * 8 + 5]).unwrap();

    let run = tickscope(&["table", s(&cut), "--by-thread", "--sort", "name"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let table = &run.stdout;
    let rows: Vec<String> = table
        .lines()
        .skip(2)
        .take(3)
        .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        .collect();
    // The worker, unnamed, is `thread-N` (N its id, which depends on the tests run before).
    assert!(
        table.lines().nth(3).unwrap().starts_with("thread-"),
        "{table}"
    );
    // Old: batch * and add_line * lasted to 1_001_000 (1.00 ms), and the worker's thread was
    // listed only as long as one of its records was left.
    assert_eq!(
        rows[1..],
        [
            "add_line * 2 20 ns 0.0 20 ns 0.0 10 ns 0 ns 20 ns 0 ns 20 ns",
            "batch * 1 20 ns 0.0 0 ns 0.0 20 ns 20 ns 20 ns 20 ns 20 ns",
        ],
        "{table}"
    );
    assert_eq!(
        rows[0],
        "main 1 1.00 ms 100.0 1.00 ms 100.0 1.00 ms 1.00 ms 1.00 ms 1.00 ms 1.00 ms"
    );
    assert!(
        table.contains(
            "2 threads, 4 scopes, 0 dropped events\nTotal % and Self %: of 1.00 ms in scopes, \
             all threads (every row's Self added up)\nSalvaged: 1 session cut short (no footer): \
             16 bytes lost at the cut, 2 scopes cut open (*)\n"
        ),
        "{table}"
    );
    assert!(
        run.stderr.contains("(16 bytes lost at the cut)"),
        "{}",
        run.stderr
    );

    // Gzipped, cut in its compressed bytes where what it decompresses to holds the first
    // event chunk but not the footer: the table of that prefix.
    let gz = unpacked_capture_file(&prof, &dir, "whole.tscope.gz");
    let packed = fs::read(&gz).unwrap();
    let prefix_of = |len: usize| {
        let mut prefix = Vec::new();
        let read = std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&packed[..len]),
            &mut prefix,
        );
        assert!(read.is_err(), "the stream is cut");
        prefix
    };
    let (len, prefix) = (1..packed.len())
        .rev()
        .map(|len| (len, prefix_of(len)))
        .find(|(_, p)| p.len() < whole.len() - 64)
        .unwrap();
    assert!(prefix.len() > events[0].0 + 32, "{} bytes", prefix.len());
    assert_eq!(prefix[..], whole[..prefix.len()]);
    let cut_gz = dir.join("cut.tscope.gz");
    fs::write(&cut_gz, &packed[..len]).unwrap();
    let plain = dir.join("prefix.tscope");
    fs::write(&plain, &prefix).unwrap();
    let (from_gz, from_plain) = (
        tickscope(&["table", s(&cut_gz), "--by-thread"]),
        tickscope(&["table", s(&plain), "--by-thread"]),
    );
    assert_eq!(from_gz.code, 0, "{}", from_gz.stderr);
    assert!(
        from_gz.stderr.contains("the gzip stream ends early"),
        "{}",
        from_gz.stderr
    );
    assert_eq!(from_gz.stdout, from_plain.stdout);
    assert!(
        from_gz.stdout.contains("Salvaged: 1 session cut short"),
        "{}",
        from_gz.stdout
    );
}

#[test]
fn merge_refuses_salvaged_input() {
    let (a, b) = (workload(100, 50, false), workload(200, 40, true));
    let dir = folder("merge_salvaged");
    let good = capture_file(&a, &dir, "good.tscope");
    let whole = capture_file(&b, &dir, "whole.tscope");
    let cut = dir.join("cut.tscope");
    let bytes = fs::read(&whole).unwrap();
    fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let sessions = Capture::read_all(&cut).expect("a cut capture is salvaged, not refused");
    let warnings: Vec<String> = sessions
        .iter()
        .flat_map(|c| c.warnings().iter().cloned())
        .collect();
    assert!(!warnings.is_empty());
    let out = dir.join("out.tscope");

    let run = tickscope(&["merge", s(&good), s(&cut), "-o", s(&out)]);
    assert_input_error(&run, &cut);
    assert_eq!(
        run.stderr,
        format!(
            "error: {}: read with warnings, refusing to merge it as if whole \
             (--allow-salvaged merges it anyway): {}\n",
            s(&cut),
            warnings[0]
        )
    );
    assert!(!out.exists());
    // --quiet silences warnings, not this error.
    let run = tickscope(&["--quiet", "merge", s(&cut), "-o", s(&out)]);
    assert_input_error(&run, &cut);
    assert!(!out.exists());

    let run = tickscope(&[
        "merge",
        s(&good),
        s(&cut),
        "-o",
        s(&out),
        "--allow-salvaged",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    let mut expected: String = warnings
        .iter()
        .map(|w| format!("warning: {}: {w}\n", s(&cut)))
        .collect();
    let size = size_text(fs::metadata(&out).unwrap().len());
    expected.push_str(&format!(
        "wrote {}: capture file, {} sessions, {size}\n",
        s(&out),
        1 + sessions.len()
    ));
    assert_eq!(run.stderr, expected);
    let merged = Capture::read_all(&out).unwrap();
    assert_eq!(merged.len(), 1 + sessions.len());
    // What the merged file no longer says, and why merging it needs to be asked for.
    assert!(merged.iter().all(|c| c.warnings().is_empty()));

    fs::remove_file(&out).unwrap();
    let run = tickscope(&[
        "merge",
        s(&good),
        s(&cut),
        "-o",
        s(&out),
        "--allow-salvaged",
        "-q",
    ]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert_eq!(Capture::read_all(&out).unwrap().len(), 1 + sessions.len());
}

#[cfg(unix)]
#[test]
fn merge_writes_through_a_symlink() {
    let (a, b) = (workload(100, 50, false), workload(200, 40, true));
    let dir = folder("merge_symlink");
    let (fa, fb) = (
        capture_file(&a, &dir, "a.tscope"),
        capture_file(&b, &dir, "b.tscope"),
    );
    let real = dir.join("real.tscope");
    fs::write(&real, b"old").unwrap();
    let link = dir.join("link.tscope");
    std::os::unix::fs::symlink("real.tscope", &link).unwrap();
    let run = tickscope(&["merge", s(&fa), s(&fb), "-o", s(&link)]);
    // Named as given: the link.
    let size = size_text(fs::metadata(&real).unwrap().len());
    assert_eq!(
        (run.code, run.stdout.as_str(), run.stderr),
        (
            0,
            "",
            format!("wrote {}: capture file, 2 sessions, {size}\n", s(&link))
        )
    );
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("real.tscope"));
    assert_eq!(Capture::read_all(&real).unwrap().len(), 2);
    let mut names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["a.tscope", "b.tscope", "link.tscope", "real.tscope"]
    );

    // A `.gz` output is gzipped, and reads back.
    let gz = dir.join("both.tscope.gz");
    assert_eq!(tickscope(&["merge", s(&fa), s(&fb), "-o", s(&gz)]).code, 0);
    assert_eq!(fs::read(&gz).unwrap()[..2], [0x1f, 0x8b]);
    assert_eq!(Capture::read_all(&gz).unwrap().len(), 2);
    // A device is written directly.
    let run = tickscope(&["merge", s(&fa), "-o", "/dev/null"]);
    assert_eq!(
        (run.code, run.stderr.as_str()),
        (0, "wrote /dev/null: capture file, 1 session\n")
    );
}

/// The names of the data rows of `tickscope diff`, in order.
fn diff_names(stdout: &str) -> Vec<&str> {
    let rows: Vec<&str> = stdout.lines().skip(2).collect();
    rows[..rows.len() - 1]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect()
}

/// The row of `name` in `tickscope diff`'s output.
fn diff_row<'a>(stdout: &'a str, name: &str) -> Vec<&'a str> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap();
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// `rounds` rounds of `main { parse { tokenize }, hash }` on this thread (with `extra` inside
/// `main` when asked) and `io` once on a second thread. Round `i` adds `i * 7 % 10` ns to
/// `tokenize`, `i * 3 % 10` ns to `hash`: distributions, not one value repeated.
fn rounds(rounds: u64, tokenize_ns: u64, hash_ns: u64, extra: bool) -> Profiler {
    record(|prof, advance| {
        advance(1_000);
        let main = scope!("main");
        for i in 0..rounds {
            {
                let _parse = scope!("parse");
                advance(200);
                let _tokenize = scope!("tokenize");
                advance(tokenize_ns + i * 7 % 10);
            }
            let _hash = scope!("hash");
            advance(hash_ns + i * 3 % 10);
        }
        if extra {
            let _extra = scope!("extra");
            advance(5);
        }
        drop(main);
        let prof = prof.clone();
        std::thread::scope(|s| {
            s.spawn(move || {
                prof.join_current_thread();
                let _io = scope!("io");
                advance(300);
            });
        });
        advance(1_000);
    })
}

/// The verdict of each name in `tickscope diff`'s text output, in the order of the rows.
fn verdicts(stdout: &str) -> Vec<(&str, &str)> {
    diff_names(stdout)
        .into_iter()
        .map(|name| (name, diff_row(stdout, name)[1]))
        .collect()
}

#[test]
fn diff_judges_per_call_distributions() {
    let dir = folder("diff");
    let base = capture_file(&rounds(100, 1_000, 500, false), &dir, "base.tscope");
    let same = capture_file(&rounds(100, 1_000, 500, false), &dir, "same.tscope");
    // tokenize +20 % (+200 ns), parse +200 ns (+16.7 %), hash -20 %, extra added.
    let slower = capture_file(&rounds(100, 1_200, 400, true), &dir, "slower.tscope");
    // Twice the calls, each as long: per call nothing changed.
    let twice = capture_file(&rounds(200, 1_000, 500, false), &dir, "twice.tscope");
    // +3 % (+30 ns) per tokenize call: under the 5 % threshold and under 50 ns.
    let little = capture_file(&rounds(100, 1_030, 500, false), &dir, "little.tscope");

    let run = tickscope(&["diff", s(&base), s(&same)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // One call each of main and io: too few to judge, never a failure.
    assert_eq!(
        verdicts(&run.stdout),
        [
            ("io", "inconclusive"),
            ("main", "inconclusive"),
            ("hash", "unchanged"),
            ("parse", "unchanged"),
            ("tokenize", "unchanged"),
        ]
    );
    assert!(
        run.stdout.ends_with(
            "0 regressed, 0 improved, 2 inconclusive, 3 unchanged, 0 added, 0 removed \
             (per-call time: threshold 5.0%, min change 50 ns, min 20 calls; samples: 20 time \
             blocks of calls, run noise 0.7%; 3 names judged, each at 98.33% for 95% over all, \
             Bonferroni)\n"
        ),
        "{}",
        run.stdout
    );

    let run = tickscope(&["diff", s(&base), s(&slower)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stderr, "");
    assert_eq!(
        verdicts(&run.stdout),
        [
            ("tokenize", "regressed"),
            ("parse", "regressed"),
            ("hash", "improved"),
            ("main", "inconclusive"),
            ("io", "inconclusive"),
            ("extra", "added"),
        ]
    );
    assert_eq!(
        diff_row(&run.stdout, "tokenize"),
        [
            "tokenize",
            "regressed",
            "100",
            "0",
            "1.00 µs",
            "1.20 µs",
            "+200 ns",
            "+19.9%",
            "+183 ns .. +217 ns"
        ]
    );
    // The other way round: tokenize and parse improved, hash regressed, extra removed.
    let run = tickscope(&["diff", s(&slower), s(&base)]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(diff_row(&run.stdout, "extra")[1], "removed");
    assert_eq!(diff_row(&run.stdout, "tokenize")[1], "improved");
    assert_eq!(diff_row(&run.stdout, "hash")[1], "regressed");
    // Self time: parse's own 200 ns did not change, its child did.
    let run = tickscope(&["diff", s(&base), s(&slower), "--metric", "self"]);
    assert_eq!(run.code, 1);
    assert_eq!(diff_row(&run.stdout, "parse")[1], "unchanged");
    assert_eq!(diff_row(&run.stdout, "tokenize")[1], "regressed");

    // A workload twice as large is no regression per call; its total time is.
    let run = tickscope(&["diff", s(&base), s(&twice)]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(diff_row(&run.stdout, "tokenize")[1], "unchanged");
    let run = tickscope(&["diff", s(&base), s(&twice), "--metric", "total"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(diff_row(&run.stdout, "tokenize")[1], "regressed");

    // +30 ns (3 %): unchanged; past a 1 % threshold it is still under --min-change 50 ns;
    // with no minimum change it regresses.
    let run = tickscope(&["diff", s(&base), s(&little)]);
    assert_eq!(
        (run.code, diff_row(&run.stdout, "tokenize")[1]),
        (0, "unchanged")
    );
    let run = tickscope(&["diff", s(&base), s(&little), "--threshold", "1%"]);
    assert_eq!(
        (run.code, diff_row(&run.stdout, "tokenize")[1]),
        (0, "unchanged")
    );
    let run = tickscope(&[
        "diff",
        s(&base),
        s(&little),
        "--threshold",
        "1%",
        "--min-change",
        "0",
    ]);
    assert_eq!(
        (run.code, diff_row(&run.stdout, "tokenize")[1]),
        (1, "regressed")
    );
    let run = tickscope(&["diff", s(&base), s(&little), "--min-change", "20ns"]);
    assert_eq!(
        (run.code, diff_row(&run.stdout, "tokenize")[1]),
        (0, "unchanged")
    );

    // Too few calls to judge: inconclusive, exit 0.
    let run = tickscope(&["diff", s(&base), s(&slower), "--min-calls", "101"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(diff_row(&run.stdout, "tokenize")[1], "inconclusive");
    assert!(run.stdout.contains("; 0 names judged,"), "{}", run.stdout);

    // --require: a name missing from either run is an error, one present is not.
    let run = tickscope(&["diff", s(&base), s(&slower), "--require", "tokenize"]);
    assert_eq!(run.code, 1);
    for (args, missing) in [
        (
            vec!["diff", s(&base), s(&slower), "--require", "extra"],
            s(&base).to_owned(),
        ),
        (
            vec!["diff", s(&slower), s(&base), "--require", "extra"],
            s(&base).to_owned(),
        ),
        (
            vec![
                "diff",
                s(&base),
                s(&slower),
                "--require",
                "tokenize",
                "--require",
                "nope",
            ],
            format!("either {} or {}", s(&base), s(&slower)),
        ),
    ] {
        let run = tickscope(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        assert_eq!(run.stdout, "");
        let name = args.last().unwrap();
        assert_eq!(
            run.stderr,
            format!("error: --require {name}: no scope `{name}` in {missing}: cannot judge it\n")
        );
    }
    // Values that are not thresholds, durations or levels are usage errors.
    for (flag, value) in [
        ("--threshold", "-5%"),
        ("--min-change", "fast"),
        ("--confidence", "100%"),
        ("--format", "xml"),
        ("--unit", "h"),
    ] {
        let arg = format!("{flag}={value}");
        let run = tickscope(&["diff", s(&base), s(&slower), &arg]);
        assert_eq!(run.code, 2, "{flag} {value}");
        assert!(run.stderr.contains(value), "{}", run.stderr);
    }
}

#[test]
fn diff_takes_the_sessions_of_a_capture_as_repetitions() {
    let dir = folder("diff_sessions");
    let many = |name: &str, tokenize_ns: u64| {
        let mut bytes = Vec::new();
        for i in 0..5 {
            let part = capture_file(&rounds(30, tokenize_ns + i * 20, 500, false), &dir, name);
            bytes.extend(fs::read(&part).unwrap());
        }
        let path = dir.join(name);
        fs::write(&path, bytes).unwrap();
        path
    };
    // Five sessions a side, each 20 ns slower than the one before; tokenize +200 ns.
    let base = many("base.tscope", 1_000);
    let slower = many("slower.tscope", 1_200);
    let run = tickscope(&["diff", s(&base), s(&slower)]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("min 20 calls; samples: the medians of 5 and 5 sessions; 3 names judged,"),
        "{}",
        run.stdout
    );
    // Calls are summed over the sessions; the shift is that of the session medians.
    let row = diff_row(&run.stdout, "tokenize");
    assert_eq!(row[..4], ["tokenize", "regressed", "150", "0"]);
    assert_eq!(row[6], "+200 ns");
    assert_eq!(diff_row(&run.stdout, "hash")[1], "unchanged");
    // One session each (main, io): too few repetitions, inconclusive.
    assert_eq!(diff_row(&run.stdout, "io")[1], "inconclusive");
    // --repetitions calls pools the calls of every session.
    let run = tickscope(&["diff", s(&base), s(&slower), "--repetitions", "calls"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .contains("; samples: 20 time blocks of calls, run noise 0.7%; 3 names judged"),
        "{}",
        run.stdout
    );
    assert_eq!(
        diff_row(&run.stdout, "tokenize")[..3],
        ["tokenize", "regressed", "150"]
    );
    // Single sessions: auto pools calls; asked for sessions, one a side judges nothing.
    let one = capture_file(&rounds(30, 1_000, 500, false), &dir, "one.tscope");
    let other = capture_file(&rounds(30, 1_200, 500, false), &dir, "other.tscope");
    let run = tickscope(&["diff", s(&one), s(&other)]);
    assert_eq!(
        (run.code, diff_row(&run.stdout, "tokenize")[1]),
        (1, "regressed")
    );
    let run = tickscope(&["diff", s(&one), s(&other), "--repetitions", "sessions"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(diff_row(&run.stdout, "tokenize")[1], "inconclusive");
    let doc: serde_json::Value = serde_json::from_str(
        &tickscope(&["diff", s(&base), s(&slower), "--format", "json"]).stdout,
    )
    .unwrap();
    assert_eq!(doc["repetitions"], serde_json::json!([5, 5]));
}

/// The records of CSV `text` (its header row checked to be `header`), parsed by the `csv`
/// crate.
fn csv_rows(text: &str, header: &[&str]) -> Vec<csv::StringRecord> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(reader.headers().unwrap(), header);
    reader.records().map(Result::unwrap).collect()
}

#[test]
fn diff_formats_parse_back_to_the_library_diff() {
    let dir = folder("diff_formats");
    let base = capture_file(&rounds(100, 1_000, 500, false), &dir, "base.tscope");
    let new = capture_file(&rounds(100, 1_200, 400, true), &dir, "new.tscope");
    let trace = |path: &Path| Trace::from_captures(&Capture::read_all(path).unwrap());
    let diff = Diff::new(&trace(&base), &trace(&new), &Options::default());

    // JSON: the library's `Diff` (serde), with the schema version, kind, files and counts.
    let run = tickscope(&["diff", s(&base), s(&new), "--format", "json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["schema"], 1);
    assert_eq!(doc["kind"], "diff");
    assert_eq!(doc["base_file"], s(&base));
    assert_eq!(doc["new_file"], s(&new));
    // Both sides through JSON text: serde_json's reading of a float may differ from the
    // float written in its last bit, the same way for the same text.
    let as_read = |text: String| serde_json::from_str::<serde_json::Value>(&text).unwrap();
    assert_eq!(
        doc["rows"],
        as_read(serde_json::to_string(&diff.rows).unwrap())
    );
    assert_eq!(
        doc["options"],
        as_read(serde_json::to_string(&diff.options).unwrap())
    );
    assert_eq!(doc["judged"], 3);
    assert_eq!(doc["base_wall_ns"], diff.base_wall_ns);
    let counts = serde_json::json!({
        "regressed": 2, "improved": 1, "inconclusive": 2, "unchanged": 0, "added": 1,
        "removed": 0,
    });
    assert_eq!(doc["counts"], counts);
    assert_eq!(doc["rows"][0]["name"], "tokenize");
    assert_eq!(doc["rows"][0]["verdict"], "regressed");
    // tokenize: 20 blocks of 5 calls a side, block medians 1,004/1,005 and 1,204/1,205: the
    // blocks give 200 .. 200, widened by the run noise, z·0.007 × the base median 1,004 ns
    // (z = 2.394 for 98.33 %): 16.83 ns each way.
    let interval = &doc["rows"][0]["interval_ns"];
    let (low, high) = (interval[0].as_f64().unwrap(), interval[1].as_f64().unwrap());
    assert!(
        (low - 183.17).abs() < 0.01 && (high - 216.83).abs() < 0.01,
        "{interval}"
    );
    assert_eq!(doc["options"]["blocks"], 20);
    assert_eq!(doc["options"]["run_noise"], 0.007);
    assert_eq!(doc["rows"][0]["base"]["samples"], 20);

    // CSV: a row per name, plain numbers in ns, what the library's rows hold.
    let run = tickscope(&["diff", s(&base), s(&new), "--format", "csv"]);
    assert_eq!(run.code, 1);
    let rows = csv_rows(
        &run.stdout,
        &[
            "name",
            "verdict",
            "base_calls",
            "new_calls",
            "base_total_ns",
            "new_total_ns",
            "base_median_ns",
            "new_median_ns",
            "change_ns",
            "change",
            "low_ns",
            "high_ns",
            "margin_ns",
        ],
    );
    assert_eq!(rows.len(), diff.rows.len());
    for (record, row) in rows.iter().zip(&diff.rows) {
        assert_eq!(&record[0], row.name);
        assert_eq!(&record[1], row.verdict.name());
        let int = |i: usize| record[i].parse::<u64>().ok();
        let num = |i: usize| record[i].parse::<f64>().ok();
        assert_eq!(int(2), row.base.map(|b| b.calls));
        assert_eq!(int(3), row.new.map(|n| n.calls));
        assert_eq!(int(4), row.base.map(|b| b.total_ns));
        assert_eq!(int(7), row.new.map(|n| n.median_ns));
        assert_eq!(num(8), row.change_ns);
        assert_eq!(num(10), row.interval_ns.map(|i| i.0));
        assert_eq!(num(11), row.interval_ns.map(|i| i.1));
        assert_eq!(num(12), row.margin_ns);
    }
    assert_eq!((&rows[0][0], &rows[0][1]), ("tokenize", "regressed"));
    assert_eq!(
        rows[5].iter().collect::<Vec<_>>()[..4],
        ["extra", "added", "", "1"]
    );

    // Markdown: a GitHub table (header, alignment row, a row per name), then the footer line.
    let run = tickscope(&[
        "diff",
        s(&base),
        s(&new),
        "--format",
        "markdown",
        "--unit",
        "ns",
    ]);
    assert_eq!(run.code, 1);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("**tickscope diff** `{}` → `{}`", s(&base), s(&new))
    );
    assert_eq!(
        lines[2],
        "| Name | Verdict | Calls | Δ Calls | Base p50 | New p50 | Change | Change % | Interval |"
    );
    assert_eq!(
        lines[3],
        "| :-- | :-- | --: | --: | --: | --: | --: | --: | --: |"
    );
    assert_eq!(
        lines[4],
        "| tokenize | regressed | 100 | 0 | 1004 ns | 1204 ns | +200 ns | +19.9% | +183 ns .. +217 ns |"
    );
    assert_eq!(
        lines[4..10].iter().filter(|l| l.starts_with("| ")).count(),
        6
    );
    assert_eq!(lines[10], "");
    assert!(
        lines[11].starts_with("wall ") && lines[11].contains("2 regressed, 1 improved"),
        "{}",
        run.stdout
    );
    assert_eq!(lines.len(), 12);
    // --unit us in the text table.
    let run = tickscope(&["diff", s(&base), s(&new), "--unit", "us"]);
    assert_eq!(
        diff_row(&run.stdout, "tokenize")[4..7],
        ["1.004 µs", "1.204 µs", "+0.200 µs"]
    );
}

#[test]
fn table_and_info_formats_parse_back() {
    let dir = folder("table_formats");
    let path = capture_file(&rounds(50, 1_000, 500, true), &dir, "run.tscope");
    let captures = Capture::read_all(&path).unwrap();
    let report = Report::new(&Trace::from_captures(&captures));

    // The library's Report serialises (feature `serde`).
    let value = serde_json::to_value(&report).unwrap();
    assert_eq!(value["rows"].as_array().unwrap().len(), report.rows().len());
    assert_eq!(value["rows"][0]["name"], report.rows()[0].name);
    assert_eq!(value["wall_ns"], report.wall_ns);

    let header = [
        "thread",
        "name",
        "caused_by",
        "arg",
        "calls",
        "total_ns",
        "self_ns",
        "avg_ns",
        "min_ns",
        "max_ns",
        "p50_ns",
        "p99_ns",
        "total_percent",
        "self_percent",
        "open_at_stop",
    ];
    let run = tickscope(&["table", s(&path), "--format", "csv"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = csv_rows(&run.stdout, &header);
    assert_eq!(rows.len(), report.rows().len());
    for (record, row) in rows.iter().zip(report.rows()) {
        assert_eq!(&record[1], row.name);
        let int = |i: usize| record[i].parse::<u64>().unwrap();
        assert_eq!(
            [
                int(4),
                int(5),
                int(6),
                int(7),
                int(8),
                int(9),
                int(10),
                int(11),
                int(14)
            ],
            [
                row.calls,
                row.total_ns,
                row.self_ns,
                row.avg_ns(),
                row.min_ns,
                row.max_ns,
                row.p50_ns,
                row.p99_ns,
                row.open_at_stop
            ]
        );
        assert_eq!(record[12].parse::<f64>().unwrap(), row.total_percent);
        assert_eq!(record[13].parse::<f64>().unwrap(), row.self_percent);
    }

    let run = tickscope(&["table", s(&path), "--format", "json", "--limit", "2"]);
    assert_eq!(run.code, 0);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        (doc["schema"].clone(), doc["kind"].clone()),
        (2.into(), "table".into())
    );
    assert_eq!(doc["wall_ns"], report.wall_ns);
    assert_eq!(doc["threads"], 2);
    assert_eq!(doc["scopes"], 50 * 3 + 3);
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "--limit 2");
    for (json, row) in rows.iter().zip(report.rows()) {
        assert_eq!(json["name"], row.name);
        assert_eq!(json["calls"], row.calls);
        assert_eq!(json["total_ns"], row.total_ns);
        assert_eq!(json["p99_ns"], row.p99_ns);
        // serde_json parses floats to within an ulp (without its `float_roundtrip` feature).
        assert!((json["total_percent"].as_f64().unwrap() - row.total_percent).abs() < 1e-9);
        assert!((json["self_percent"].as_f64().unwrap() - row.self_percent).abs() < 1e-9);
        assert_eq!(json["thread"], serde_json::Value::Null);
    }
    assert_eq!(
        doc["footer"][0],
        "87.75 µs wall, 2 threads, 153 scopes, 0 dropped events"
    );

    // The tree: a row per node with its depth.
    let run = tickscope(&["table", s(&path), "--tree", "--format", "csv"]);
    let rows = csv_rows(
        &run.stdout,
        &[
            "thread",
            "depth",
            "name",
            "poll",
            "calls",
            "total_ns",
            "self_ns",
            "total_percent",
            "self_percent",
            "open_at_stop",
        ],
    );
    let nodes: Vec<(&str, &str, &str)> = rows.iter().map(|r| (&r[1], &r[2], &r[4])).collect();
    assert_eq!(
        nodes,
        [
            ("0", "main", "1"),
            ("1", "parse", "50"),
            ("2", "tokenize", "50"),
            ("1", "hash", "50"),
            ("1", "extra", "1"),
            ("0", "io", "1")
        ]
    );

    // Markdown: the same rows as the text table, as a GitHub table.
    let run = tickscope(&["table", s(&path), "--format", "markdown", "--unit", "ns"]);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "| Name | Calls | Total | Total % | Self | Self % | Avg | Min | Max | P50 | P99 |"
    );
    assert_eq!(
        lines[1],
        "| :-- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |"
    );
    // The rows, then the summary line and the percentages' base as paragraphs.
    assert_eq!(lines.len(), 2 + report.rows().len() + 4);
    assert!(lines[2].starts_with("| main | 1 | "), "{}", run.stdout);
    assert_eq!(lines[lines.len() - 3], doc["footer"][0]);
    assert_eq!(lines[lines.len() - 1], doc["footer"][1]);

    // info: a row per session.
    let capture = &captures[0];
    let run = tickscope(&["info", s(&path), "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        (doc["schema"].clone(), doc["kind"].clone()),
        (1.into(), "info".into())
    );
    assert_eq!(doc["file"], s(&path));
    let session = &doc["sessions"][0];
    assert_eq!(session["process_id"], capture.process_id());
    assert_eq!(session["records"], capture.record_count());
    assert_eq!(session["threads"], capture.thread_count());
    assert_eq!(session["memory_tracked"], false);
    assert_eq!(session["time_span_ns"], report.wall_ns);
    assert_eq!(session["covered_ns"], report.wall_ns);
    assert_eq!(session["overwritten_events"], 0);
    assert_eq!(session["warning_messages"], serde_json::json!([]));
    assert_eq!(session["origin"], serde_json::Value::Null);
    assert_eq!(session["attach_unix_ns"], serde_json::Value::Null);
    let run = tickscope(&["info", s(&path), "--format", "csv"]);
    let rows = csv_rows(
        &run.stdout,
        &[
            "session",
            "format_version",
            "producer",
            "process_id",
            "process_name",
            "host_name",
            "threads",
            "chunks",
            "records",
            "dropped_events",
            "overwritten_events",
            "memory_tracked",
            "time_span_ns",
            "covered_ns",
            "warnings",
            "origin",
            "attach_unix_ns",
        ],
    );
    assert_eq!(rows.len(), 1);
    assert_eq!((&rows[0][15], &rows[0][16]), ("", ""));
    assert_eq!(rows[0][3].parse::<u32>().unwrap(), capture.process_id());
    assert_eq!(rows[0][8].parse::<u64>().unwrap(), capture.record_count());
    assert_eq!(rows[0][10].parse::<u64>().unwrap(), 0);
    assert_eq!(rows[0][12].parse::<u64>().unwrap(), report.wall_ns);
    assert_eq!(rows[0][13].parse::<u64>().unwrap(), report.wall_ns);
    let run = tickscope(&["info", s(&path), "--format", "markdown"]);
    assert!(
        run.stdout
            .contains("| session | format version | producer |"),
        "{}",
        run.stdout
    );
}

#[test]
fn diff_refuses_an_ambiguous_threshold() {
    // tokenize +500 ns (+50 %), parse +500 ns (+41.5 %), hash -20 %, extra added.
    let base = rounds(30, 1_000, 500, false);
    let slower = rounds(30, 1_500, 400, true);
    let dir = folder("diff_threshold");
    let base = capture_file(&base, &dir, "base.tscope");
    let slower = capture_file(&slower, &dir, "slower.tscope");
    for bare in ["5", "50", "1.5"] {
        let run = tickscope(&["diff", s(&base), s(&slower), "--threshold", bare]);
        assert_eq!(run.code, 2, "--threshold {bare}: {}", run.stdout);
        assert_eq!(run.stdout, "");
        assert!(
            run.stderr
                .contains(&format!("`{bare}` is ambiguous: write `{bare}%`")),
            "{}",
            run.stderr
        );
    }
    let run = tickscope(&["diff", s(&base), s(&slower), "--threshold", "5"]);
    assert!(
        run.stderr
            .contains("`5` is ambiguous: write `5%` for 5 percent, or a fraction (`0.05` is 5%)"),
        "{}",
        run.stderr
    );
    // 5% and 0.05 are the same threshold, and 45% lets parse (+41.5%) pass but not tokenize.
    let five = tickscope(&["diff", s(&base), s(&slower), "--threshold", "5%"]);
    let fraction = tickscope(&["diff", s(&base), s(&slower), "--threshold", "0.05"]);
    assert_eq!((five.code, fraction.code), (1, 1));
    assert_eq!(five.stdout, fraction.stdout);
    assert!(
        five.stdout
            .contains("2 regressed, 1 improved, 2 inconclusive, 0 unchanged, 1 added, 0 removed (per-call time: threshold 5.0%,"),
        "{}",
        five.stdout
    );
    let run = tickscope(&["diff", s(&base), s(&slower), "--threshold", "45%"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .contains("1 regressed, 0 improved, 2 inconclusive, 2 unchanged, 1 added, 0 removed (per-call time: threshold 45.0%,"),
        "{}",
        run.stdout
    );
    assert_eq!(diff_row(&run.stdout, "tokenize")[1], "regressed");
    assert_eq!(diff_row(&run.stdout, "parse")[1], "unchanged");
}

#[test]
fn bad_inputs_exit_2_naming_the_file() {
    let prof = workload(100, 50, false);
    let dir = folder("bad_inputs");
    let good = capture_file(&prof, &dir, "good.tscope");
    let missing = dir.join("missing.tscope");
    let empty = dir.join("empty.tscope");
    fs::write(&empty, b"").unwrap();
    let garbage = dir.join("garbage.tscope");
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(&garbage, bytes).unwrap();
    let out = dir.join("out.json");
    for bad in [&missing, &empty, &garbage] {
        let b = s(bad);
        let g = s(&good);
        let o = s(&out);
        for args in [
            vec!["table", b],
            vec!["table", b, "--tree"],
            vec!["info", b],
            vec!["convert", b, "-o", o],
            vec!["merge", g, b, "-o", o],
            vec!["diff", b, g],
            vec!["diff", g, b],
        ] {
            let run = tickscope(&args);
            assert_input_error(&run, bad);
        }
        assert!(!out.exists());
    }
}

/// `tickscope --help` as a newcomer reads it: a short line per command.
const HELP: &str = "\
Tables, traces, merges and diffs of tickscope capture files

Usage: tickscope [OPTIONS] <COMMAND>

Commands:
  table    Print the table of calls and times per scope name
  convert  Convert captures to Chrome JSON, Perfetto, pprof, flame graphs, OTLP
  info     Describe each session of a capture file
  merge    Concatenate capture files into one, checking every input first
  diff     Compare two captures per scope name; exit 1 on a regression
  push     Send captures to an OpenTelemetry backend as OTLP traces
  report   Write one HTML report that opens offline: tables, flame graph, timeline
  ps       List the running programs of this user that can be attached to
  record   Capture a running program: the seconds before the attach, then --duration
  top      Show a live table of a running program, refreshed every 0.5 s
  help     Print this message or the help of the given subcommand(s)

Options:
  -q, --quiet    Print only errors: no progress, warnings or summaries on stderr
  -h, --help     Print help
  -V, --version  Print version

A command's details: tickscope help COMMAND (or COMMAND --help).
";

#[test]
fn help_is_a_short_line_per_command_and_details_fit_80_columns() {
    for flags in [&["--help"][..], &["-h"], &["help"]] {
        let run = tickscope(flags);
        assert_eq!((run.code, run.stdout.as_str()), (0, HELP), "{flags:?}");
    }
    let summaries: Vec<&str> = HELP
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take(6)
        .collect();
    for command in ["table", "convert", "info", "merge", "diff", "push"] {
        let long = tickscope(&["help", command]);
        assert_eq!(long.code, 0);
        assert_eq!(long.stdout, tickscope(&[command, "--help"]).stdout);
        // The detail starts with the line the list gives, then says more.
        let line = summaries
            .iter()
            .find(|l| l[2..].starts_with(command))
            .unwrap();
        let summary = line[2..].trim_start_matches(command).trim_start();
        assert!(
            long.stdout.starts_with(&format!("{summary}.\n\n")),
            "{}",
            long.stdout
        );
        assert!(long.stdout.lines().count() > 20, "{}", long.stdout);
        let short = tickscope(&[command, "-h"]);
        assert!(
            short.stdout.starts_with(&format!("{summary}\n\n")),
            "{}",
            short.stdout
        );
        for text in [&long.stdout, &short.stdout] {
            for line in text.lines() {
                assert!(line.chars().count() <= 80, "{command}: {line:?}");
            }
        }
    }
}

#[test]
fn help_and_usage() {
    for command in ["table", "convert", "info", "merge", "diff"] {
        let run = tickscope(&[command, "--help"]);
        assert_eq!(run.code, 0);
        assert!(run.stdout.contains("Usage: tickscope"), "{}", run.stdout);
    }
    let run = tickscope(&["--help"]);
    assert_eq!(run.code, 0);
    for command in ["table", "convert", "info", "merge", "diff"] {
        assert!(run.stdout.contains(command), "{}", run.stdout);
    }
    assert_eq!(tickscope(&["--version"]).code, 0);
    assert_eq!(tickscope(&[]).code, 2);
    assert_eq!(tickscope(&["table"]).code, 2);
    // Sort keys are the library's (`SortBy`'s `FromStr`), listed when one is wrong and in
    // the help.
    let run = tickscope(&["table", "x.tscope", "--sort", "colour"]);
    assert_eq!(run.code, 2);
    let keys: Vec<&str> = SortBy::ALL.iter().map(|c| c.key_name()).collect();
    assert!(
        run.stderr.contains(&format!(
            "unknown sort key \"colour\": valid keys are {}",
            keys.join(", ")
        )),
        "{}",
        run.stderr
    );
    let help = tickscope(&["table", "--help"]).stdout;
    for column in SortBy::ALL {
        let line = format!("- {}:", column.key_name());
        assert!(help.contains(&line), "{line} in {help}");
    }
    // A valid key gets as far as the file.
    let run = tickscope(&["table", "x.tscope", "--sort", "self-alloc"]);
    assert!(
        run.stderr.starts_with("error: cannot read x.tscope"),
        "{}",
        run.stderr
    );
    assert_eq!(tickscope(&["merge", "-o", "out.tscope"]).code, 2);
    assert_eq!(tickscope(&["frobnicate"]).code, 2);
}

#[test]
fn quiet_changes_nothing_on_success() {
    let prof = workload(100, 50, false);
    let dir = folder("quiet");
    let file = capture_file(&prof, &dir, "run.tscope");
    let loud = tickscope(&["table", s(&file)]);
    let quiet = tickscope(&["--quiet", "table", s(&file)]);
    let quiet_after = tickscope(&["table", s(&file), "-q"]);
    assert_eq!(quiet.code, 0);
    assert_eq!(loud.stdout, quiet.stdout);
    assert_eq!(loud.stdout, quiet_after.stdout);
    assert_eq!(quiet.stderr, "");
}

#[cfg(feature = "otlp")]
/// A test OTLP/HTTP server on 127.0.0.1 that answers `status` to `count` requests, one per
/// connection, and gives back the requests it received: the request line and headers
/// (lowercase), and the body decoded.
fn otlp_server(
    count: usize,
    status: u16,
) -> (
    String,
    std::thread::JoinHandle<
        Vec<(
            String,
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
        )>,
    >,
) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut received = Vec::new();
        for _ in 0..count {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut head = String::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end().to_ascii_lowercase();
                if line.is_empty() {
                    break;
                }
                head.push_str(&line);
                head.push('\n');
                if let Some(v) = line.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(body.as_slice())
                .read_to_end(&mut plain)
                .unwrap();
            received.push((head, prost::Message::decode(plain.as_slice()).unwrap()));
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            .unwrap();
        }
        received
    });
    (endpoint, handle)
}

#[cfg(feature = "otlp")]
#[test]
fn push_sends_four_processes_and_convert_writes_otlp_json() {
    let prof = workload(100, 50, false);
    let dir = folder("push_four");
    let first = capture_file(&prof, &dir, "p0.tscope");
    let mut files = Vec::new();
    for (i, pid) in [201u32, 202, 203, 204].into_iter().enumerate() {
        let path = dir.join(format!("p{}.tscope", i + 1));
        fs::write(&path, as_process(&first, pid)).unwrap();
        files.push(path);
    }
    let (endpoint, server) = otlp_server(1, 200);
    let mut args = vec!["push"];
    args.extend(files.iter().map(|f| s(f)));
    args.extend([
        "--endpoint",
        &endpoint,
        "--service",
        "svc",
        "--min-duration",
        "150ns",
    ]);
    let run = tickscope(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // 9 scopes a process; tokenize (100 ns) ×3 and hash (50 ns) fold into their parents.
    assert!(
        run.stdout.starts_with(&format!(
            "pushed 20 spans to {endpoint}/v1/traces in 1 requests ("
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .ends_with("; 16 folded, 0 sampled out; 0 span events (0 sampled out); 4 processes\n"),
        "{}",
        run.stdout
    );
    let received = server.join().unwrap();
    let resources = &received[0].1.resource_spans;
    let pids: Vec<(i64, usize)> = resources
        .iter()
        .map(|r| {
            let attrs = &r.resource.as_ref().unwrap().attributes;
            let pid = attrs.iter().find(|kv| kv.key == "process.pid").unwrap();
            let pid = match pid.value.as_ref().unwrap().value.as_ref().unwrap() {
                opentelemetry_proto::tonic::common::v1::any_value::Value::IntValue(v) => *v,
                other => panic!("{other:?}"),
            };
            (pid, r.scope_spans[0].spans.len())
        })
        .collect();
    assert_eq!(pids, [(201, 5), (202, 5), (203, 5), (204, 5)]);

    // Nothing listens: a clear error naming the endpoint, exit code 2.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("http://127.0.0.1:{port}");
    let run = tickscope(&["push", s(&files[0]), "--endpoint", &refused]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .starts_with(&format!("error: cannot connect to {refused}/v1/traces: ")),
        "{}",
        run.stderr
    );
    // A 400: the status in the error.
    let (endpoint, server) = otlp_server(1, 400);
    let run = tickscope(&["push", s(&files[0]), "--endpoint", &endpoint]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!("error: {endpoint}/v1/traces answered HTTP 400\n")
    );
    server.join().unwrap();

    // convert -o .otlp.json: one request per line, every scope of the four processes.
    let out = dir.join("all.otlp.json");
    let mut args = vec!["convert"];
    args.extend(files.iter().map(|f| s(f)));
    args.extend(["-o", s(&out)]);
    let run = tickscope(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = fs::read_to_string(&out).unwrap();
    let spans: usize = text
        .lines()
        .map(|line| {
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            doc["resourceSpans"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["scopeSpans"][0]["spans"].as_array().unwrap().len())
                .sum::<usize>()
        })
        .sum();
    assert_eq!(spans, 36);
}

#[cfg(not(feature = "otlp"))]
#[test]
fn push_and_otlp_json_say_how_to_get_them_without_the_otlp_feature() {
    let prof = workload(100, 50, false);
    let dir = folder("push_without");
    let file = capture_file(&prof, &dir, "a.tscope");
    let how = "this tickscope was built without OTLP support: install it with `cargo install \
               --locked --path cli --features otlp` (or build with `-p tickscope-cli --features \
               otlp`)";
    let push = tickscope(&["push", s(&file), "--endpoint", "http://127.0.0.1:9"]);
    assert_eq!(push.code, 2);
    assert_eq!(push.stdout, "");
    assert_eq!(push.stderr, format!("error: {how}\n"));
    let out = dir.join("a.otlp.json");
    let convert = tickscope(&["convert", s(&file), "-o", s(&out)]);
    assert_eq!(convert.code, 2);
    assert_eq!(convert.stderr, format!("error: {}: {how}\n", out.display()));
    assert!(!out.exists());
}

#[cfg(feature = "otlp")]
#[test]
fn push_reads_the_otel_environment() {
    let prof = workload(100, 50, false);
    let dir = folder("push_env");
    let file = capture_file(&prof, &dir, "a.tscope");
    let (endpoint, server) = otlp_server(1, 200);
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(["push", s(&file)])
        .env(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{endpoint}/custom/traces"),
        )
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=a%20b,x-team=core")
        .env("OTEL_SERVICE_NAME", "from-env")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let received = server.join().unwrap();
    let (head, request) = &received[0];
    assert!(head.starts_with("post /custom/traces http/1.1\n"), "{head}");
    assert!(head.contains("\nx-api-key: a b\n"), "{head}");
    assert!(head.contains("\nx-team: core\n"), "{head}");
    assert!(
        head.contains("\ncontent-type: application/x-protobuf\n"),
        "{head}"
    );
    let attrs = &request.resource_spans[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes;
    let service = attrs.iter().find(|kv| kv.key == "service.name").unwrap();
    assert_eq!(
        service.value.as_ref().unwrap().value,
        Some(
            opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(
                "from-env".into()
            )
        )
    );
    // A bad header list is a usage error, before anything is read or sent.
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(["push", s(&file), "--endpoint", "http://127.0.0.1:9"])
        .env("OTEL_EXPORTER_OTLP_HEADERS", "novalue")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: OTEL_EXPORTER_OTLP_HEADERS: `novalue` is not key=value\n"
    );
}

#[test]
fn diff_refuses_salvaged_and_unrelated_captures() {
    let (a, b) = (rounds(30, 1_000, 500, false), rounds(30, 1_500, 400, true));
    let dir = folder("diff_untrusted");
    let base = capture_file(&a, &dir, "base.tscope");
    let whole = capture_file(&b, &dir, "whole.tscope");
    let cut = dir.join("cut.tscope");
    let bytes = fs::read(&whole).unwrap();
    fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let warnings = Capture::read(&cut).unwrap().warnings().to_vec();
    let warning = &warnings[0];

    // A damaged input fails the comparison, on either side, even with -q.
    for args in [
        vec!["diff", s(&base), s(&cut)],
        vec!["diff", s(&cut), s(&base)],
        vec!["-q", "diff", s(&base), s(&cut)],
    ] {
        let run = tickscope(&args);
        assert_input_error(&run, &cut);
        assert_eq!(
            run.stderr,
            format!(
                "error: {}: read with warnings, refusing to compare it as if whole \
                 (--allow-salvaged compares it anyway): {warning}\n",
                s(&cut)
            )
        );
    }
    // Asked for, it compares what could be read, and says what was damaged.
    let run = tickscope(&["diff", s(&base), s(&cut), "--allow-salvaged"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let expected: String = warnings
        .iter()
        .map(|w| format!("warning: {}: {w}\n", s(&cut)))
        .collect();
    assert_eq!(run.stderr, expected);
    assert_eq!(diff_row(&run.stdout, "tokenize")[1], "regressed");

    // Two programs with no scope name in common.
    let other = record(|_, advance| {
        let _a = scope!("render");
        advance(500);
        let _b = scope!("upload");
        advance(700);
    });
    let other = capture_file(&other, &dir, "other.tscope");
    let run = tickscope(&["diff", s(&base), s(&other)]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        format!(
            "error: {} and {} have no scope name in common (5 and 2 names): nothing to \
             compare; are they runs of the same program?\n",
            s(&base),
            s(&other)
        )
    );
    // One name in common is enough to compare.
    let shared = record(|_, advance| {
        let _a = scope!("render");
        advance(500);
        let _b = scope!("hash");
        advance(50);
    });
    let shared = capture_file(&shared, &dir, "shared.tscope");
    let run = tickscope(&["diff", s(&base), s(&shared)]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(diff_row(&run.stdout, "render")[1], "added");
}

/// A name of about 100 KB with markup, quotes, a newline-free run of emoji and a long tail.
fn hostile_name() -> String {
    let mut name = String::from("<script>alert(\"x\")</script> 'q' & 🦀🔥 ");
    while name.len() < 100_000 {
        name.push_str("abcdefghij🦀");
    }
    name.push_str(" the end");
    name
}

#[test]
fn long_names_never_break_a_table() {
    let long = hostile_name();
    let prof = record(|_, advance| {
        let _main = scope!("main");
        advance(100);
        for _ in 0..2 {
            let _g = scope!(name = long.clone());
            advance(1_000);
        }
    });
    let dir = folder("long_names");
    let path = capture_file(&prof, &dir, "long.tscope");
    let short = |text: &str| {
        let line = text
            .lines()
            .find(|l| l.contains("<script>"))
            .unwrap_or_else(|| panic!("no row of the long name in\n{text}"))
            .to_owned();
        assert!(line.len() < 400, "{line}");
        line
    };
    // The library's table and tree, flat and by thread.
    let table = prof.table().to_string();
    let row = short(&table);
    let name: String = row.chars().take(80).collect();
    assert_eq!(name.chars().count(), 80);
    let chars: Vec<char> = long.chars().collect();
    let expected: String = chars[..40]
        .iter()
        .chain(&['…'])
        .chain(&chars[chars.len() - 39..])
        .collect();
    assert_eq!(name, expected);
    assert!(name.ends_with("hij🦀 the end"), "{name}");
    assert_eq!(
        row.chars()
            .skip(80)
            .collect::<String>()
            .split_whitespace()
            .next(),
        Some("2")
    );
    short(&prof.table().tree(true).to_string());
    short(&prof.table().by_thread(true).to_string());
    // The CLI's table, tree and diff.
    for args in [
        vec!["table", s(&path)],
        vec!["table", s(&path), "--tree"],
        vec!["table", s(&path), "--by-thread"],
        vec!["table", s(&path), "--format", "markdown"],
        vec!["diff", s(&path), s(&path)],
        vec!["diff", s(&path), s(&path), "--format", "markdown"],
    ] {
        let run = tickscope(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        short(&run.stdout);
    }
    // Exports keep the whole name.
    let json = dir.join("long.json");
    assert_eq!(tickscope(&["convert", s(&path), "-o", s(&json)]).code, 0);
    let doc = self::json(&json);
    assert_eq!(events_with(&doc, "name", &long), 2, "two calls, whole");
    assert_eq!(prof.report().get(&long).unwrap().calls, 2);
}

#[test]
fn other_files_are_named_for_what_they_are() {
    let prof = workload(100, 50, false);
    let dir = folder("other_files");
    let cap = capture_file(&prof, &dir, "run.tscope");
    let chrome = dir.join("run.json");
    let perfetto = dir.join("run.pftrace");
    let folded = dir.join("run.folded");
    for out in [&chrome, &perfetto, &folded] {
        assert_eq!(tickscope(&["convert", s(&cap), "-o", s(out)]).code, 0);
    }
    let gz = dir.join("run.json.gz");
    assert_eq!(tickscope(&["convert", s(&cap), "-o", s(&gz)]).code, 0);
    let pprof = dir.join("run.pb");
    assert_eq!(tickscope(&["convert", s(&cap), "-o", s(&pprof)]).code, 0);
    let svg = dir.join("run.svg");
    fs::write(
        &svg,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\"></svg>\n",
    )
    .unwrap();
    let other_json = dir.join("config.json");
    fs::write(&other_json, br#"  {"threads": 4, "name": "a config file"}"#).unwrap();
    for (file, what) in [
        (
            &chrome,
            "this is a Chrome JSON trace (it opens in ui.perfetto.dev)",
        ),
        (
            &gz,
            "this is a Chrome JSON trace (it opens in ui.perfetto.dev)",
        ),
        (
            &perfetto,
            "this looks like a protobuf file: a Perfetto trace (it opens in ui.perfetto.dev) or \
             a pprof profile",
        ),
        (
            &pprof,
            "this looks like a protobuf file: a Perfetto trace (it opens in ui.perfetto.dev) or \
             a pprof profile",
        ),
        (&svg, "this is an SVG image (a flame graph?)"),
        (&folded, "this looks like a text file of folded stacks"),
        (&other_json, "this is a JSON file"),
    ] {
        for command in ["table", "info"] {
            let run = tickscope(&[command, s(file)]);
            assert_input_error(&run, file);
            assert_eq!(
                run.stderr,
                format!(
                    "error: {}: at byte 0: {what}, not a tickscope capture\n",
                    s(file)
                )
            );
        }
    }
}

#[test]
fn info_and_table_of_a_flight_recorder_speak_of_its_window() {
    let dir = folder("flight");
    let path = dir.join("flight.tscope");
    {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mock = tickscope::clock::use_mock_clock().expect("mock clock installed first");
        // One chunk of 4096 records: 10,000 scopes (20,000 records) overwrite most of them.
        let prof = Profiler::builder()
            .current_thread()
            .flight_recorder(64 << 10)
            .start();
        for _ in 0..10_000 {
            let _g = scope!("tick");
            mock.increment(1_000);
        }
        prof.stop();
        prof.write_capture(&path).unwrap();
    }
    let capture = Capture::read(&path).unwrap();
    let overwritten = capture.overwritten_events();
    assert!(overwritten > 0);
    let trace = capture.decode();
    let covered = trace.covered_ns();
    assert!(
        covered < trace.wall_ns() / 2,
        "{covered} of {}",
        trace.wall_ns()
    );
    let run = tickscope(&["info", s(&path)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let fields = info_fields(&run.stdout, 1);
    let field = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field("overwritten events"), Some(overwritten.to_string()));
    assert_eq!(
        field("time span"),
        Some(format!("{:.3} s", trace.wall_ns() as f64 / 1e9))
    );
    assert_eq!(
        field("time covered"),
        Some(format!("{:.3} s", covered as f64 / 1e9))
    );
    let run = tickscope(&["table", s(&path)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows = row(&run.stdout, "tick");
    // Every retained call took 1 µs: the time in scopes is of the retained window, not of
    // the session, and the one name holds all of it.
    let calls: u64 = rows[1].parse().unwrap();
    assert_eq!((rows[4], rows[7]), ("100.0", "100.0"), "{}", run.stdout);
    let base = format!(
        "\nTotal % and Self %: of {} in scopes, ",
        tickscope::table::format_ns(calls * 1_000)
    );
    assert!(run.stdout.contains(&base), "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!(
            "{} wall, the flight recorder's window of a {} session, ",
            tickscope::table::format_ns(covered),
            tickscope::table::format_ns(trace.wall_ns())
        )),
        "{}",
        run.stdout
    );
}

/// The JSON data block of an HTML report.
fn report_meta(path: &Path) -> serde_json::Value {
    let page = fs::read_to_string(path).unwrap();
    let open = "id=\"ts-meta\">";
    let start = page.find(open).unwrap() + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..end]).unwrap()
}

/// The names of an HTML report's table rows.
fn report_names(meta: &serde_json::Value, table: &serde_json::Value) -> Vec<String> {
    let names = meta["names"].as_array().unwrap();
    let mut out: Vec<String> = table["name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            names[i.as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn report_writes_one_html_file() {
    let dir = folder("report_writes");
    let base = capture_file(&workload(100, 50, false), &dir, "base.tscope");
    let new = capture_file(&workload(150, 50, true), &dir, "new.tscope");
    let out = dir.join("run.html");
    let run = tickscope(&["report", s(&new), "-o", s(&out), "--title", "nightly"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    let meta = report_meta(&out);
    assert_eq!(meta["title"], "nightly");
    let expected = Report::new(&Trace::from_captures(&Capture::read_all(&new).unwrap()));
    let mut names: Vec<String> = expected.rows().iter().map(|r| r.name.to_owned()).collect();
    names.sort();
    assert_eq!(report_names(&meta, &meta["table"]), names);
    assert_eq!(meta["diff"], serde_json::Value::Null);
    // With a baseline: the diff's verdicts, and the baseline's rows.
    let out = dir.join("diff.html");
    let run = tickscope(&["report", s(&new), "--baseline", s(&base), "-o", s(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let meta = report_meta(&out);
    assert_eq!(report_names(&meta, &meta["table"]), names);
    let base_names = report_names(&meta, &meta["base"]["table"]);
    assert!(!base_names.contains(&"extra".to_owned()));
    assert_eq!(meta["diff"]["rows"].as_array().unwrap().len(), names.len());
    // Two captures: one report, each process with its threads.
    let other = dir.join("other.tscope");
    fs::write(&other, as_process(&base, 4242)).unwrap();
    let out = dir.join("both.html");
    let run = tickscope(&["report", s(&new), s(&other), "-o", s(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(report_meta(&out)["processes"].as_array().unwrap().len(), 2);
    // `convert` writes the same page for `.html`.
    let out = dir.join("converted.html");
    let run = tickscope(&["convert", s(&new), "-o", s(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let meta_of_out = report_meta(&out);
    assert_eq!(report_names(&meta_of_out, &meta_of_out["table"]), names);
    // Both written from the captures' sums and pieces: the whole trace's page, byte for byte.
    let whole = |options: &tickscope::export::html::Options| {
        let mut page = Vec::new();
        let trace = Trace::from_captures(&Capture::read_all(&new).unwrap());
        tickscope::export::html::write(&trace, &mut page, options).unwrap();
        page
    };
    assert!(fs::read(&out).unwrap() == whole(&Default::default()));
    let out = dir.join("again.html");
    let run = tickscope(&["report", s(&new), "-o", s(&out), "--title", "nightly"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let titled = tickscope::export::html::Options::new().title("nightly");
    assert!(fs::read(&out).unwrap() == whole(&titled));
}

#[test]
fn report_writes_nothing_when_an_input_is_bad() {
    let dir = folder("report_bad");
    let good = capture_file(&workload(100, 50, false), &dir, "good.tscope");
    let bad = dir.join("bad.tscope");
    fs::write(&bad, b"definitely not a capture").unwrap();
    let out = dir.join("out.html");
    let run = tickscope(&["report", s(&good), s(&bad), "-o", s(&out)]);
    assert_input_error(&run, &bad);
    assert!(!out.exists());
    let run = tickscope(&["report", s(&good), "--baseline", s(&bad), "-o", s(&out)]);
    assert_input_error(&run, &bad);
    assert!(!out.exists());
    // An existing output stays as it was.
    fs::write(&out, b"old").unwrap();
    let missing = dir.join("missing.tscope");
    let run = tickscope(&["report", s(&missing), "-o", s(&out)]);
    assert_input_error(&run, &missing);
    assert_eq!(fs::read(&out).unwrap(), b"old");
    // An output that cannot be written: an error naming it, and no temporary file left.
    let blocked = dir.join("no-such-dir").join("out.html");
    let run = tickscope(&["report", s(&good), "-o", s(&blocked)]);
    assert_input_error(&run, &blocked);
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        3,
        "no temporary file left"
    );
}

/// `session` (one capture session's bytes) with an `ORIGIN` chunk (type 8, version 1) after
/// its header, as an attach writes it: origin `code` (1 the flight recorder's window, 2 live),
/// attach at `at`.
fn attach_made(session: &[u8], code: u32, at: u64) -> Vec<u8> {
    let header_len = u64::from_le_bytes(session[8..16].try_into().unwrap());
    let end = 16 + usize::try_from(header_len.next_multiple_of(16)).unwrap();
    let mut content = code.to_le_bytes().to_vec();
    content.extend_from_slice(&[0; 4]);
    content.extend_from_slice(&at.to_le_bytes());
    let mut out = session[..end].to_vec();
    tickscope::attach::protocol::write_chunk(&mut out, 8, 1, &content).unwrap();
    out.extend_from_slice(&session[end..]);
    out
}

#[test]
fn merge_keeps_and_info_lists_the_origins_of_attach_captures() {
    use tickscope::attach::Origin;
    // 2026-11-26 01:00:00 UTC, and a bit.
    const AT: u64 = 1_795_654_800_123_456_789;
    const LATER: u64 = AT + 90 * 1_000_000_000;
    let dir = folder("origins");
    let mut bytes = Vec::new();
    workload(100, 50, false)
        .capture()
        .write_to(&mut bytes)
        .unwrap();
    // Two attaches' captures (a window and a live session, then a window alone) and a
    // plain one.
    let first = dir.join("first.tscope");
    fs::write(
        &first,
        [attach_made(&bytes, 1, AT), attach_made(&bytes, 2, AT)].concat(),
    )
    .unwrap();
    let second = dir.join("second.tscope");
    fs::write(&second, attach_made(&bytes, 1, LATER)).unwrap();
    let plain = dir.join("plain.tscope");
    fs::write(&plain, &bytes).unwrap();
    let merged = dir.join("merged.tscope");
    let run = tickscope(&[
        "merge",
        "-q",
        s(&first),
        s(&plain),
        s(&second),
        "-o",
        s(&merged),
    ]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let expected = [
        Some((Origin::Flight, AT)),
        Some((Origin::Live, AT)),
        None,
        Some((Origin::Flight, LATER)),
    ];
    assert_eq!(
        tickscope::attach::origins(&fs::read(&merged).unwrap()),
        expected
    );
    let sessions = Capture::read_all(&merged).unwrap();
    assert_eq!(
        sessions.iter().map(Capture::origin).collect::<Vec<_>>(),
        expected
    );
    assert!(sessions.iter().all(|c| c.warnings().is_empty()));

    // `info`: the two lines of each attach's session, none for the plain one.
    let run = tickscope(&["info", s(&merged)]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let origin_lines = |session: usize| -> Vec<&str> {
        run.stdout
            .lines()
            .skip_while(|l| *l != format!("session {session}"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter(|l| l.contains("origin") || l.contains("attached at"))
            .collect()
    };
    assert_eq!(
        origin_lines(1),
        [
            "  origin              flight recorder window before the attach",
            "  attached at         2026-11-26 01:00:00 UTC",
        ]
    );
    assert_eq!(
        origin_lines(2),
        [
            "  origin              recorded while attached",
            "  attached at         2026-11-26 01:00:00 UTC",
        ]
    );
    assert_eq!(origin_lines(3), Vec::<&str>::new());
    assert_eq!(info_fields(&run.stdout, 3).len(), 14);
    assert_eq!(
        origin_lines(4),
        [
            "  origin              flight recorder window before the attach",
            "  attached at         2026-11-26 01:01:30 UTC",
        ]
    );
    assert_eq!(info_fields(&run.stdout, 4).len(), 16);

    // JSON: the origin and the attach's time, null for the plain session.
    let run = tickscope(&["info", s(&merged), "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let origins: Vec<(serde_json::Value, serde_json::Value)> = doc["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["origin"].clone(), s["attach_unix_ns"].clone()))
        .collect();
    assert_eq!(
        origins,
        [
            ("flight".into(), AT.into()),
            ("live".into(), AT.into()),
            (serde_json::Value::Null, serde_json::Value::Null),
            ("flight".into(), LATER.into()),
        ]
    );
    // CSV: the same, empty for the plain session.
    let run = tickscope(&["info", s(&merged), "--format", "csv"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut reader = csv::Reader::from_reader(run.stdout.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (origin, attach) = (column("origin"), column("attach_unix_ns"));
    let cells: Vec<(String, String)> = reader
        .records()
        .map(Result::unwrap)
        .map(|r| (r[origin].to_owned(), r[attach].to_owned()))
        .collect();
    let (at, later) = (AT.to_string(), LATER.to_string());
    assert_eq!(
        cells,
        [
            ("flight".to_owned(), at.clone()),
            ("live".to_owned(), at),
            (String::new(), String::new()),
            ("flight".to_owned(), later),
        ]
    );
}

/// A process that may write files only up to a size (`ulimit -f`) reads a gzipped capture
/// that decompresses past it in memory, as a temporary file would end it (`SIGXFSZ`): the
/// same table as of the plain file.
#[cfg(target_os = "linux")]
#[test]
fn a_gzipped_capture_is_read_under_a_file_size_limit() {
    let prof = record(|_, advance| {
        for _ in 0..4_000 {
            let _step = scope!("step");
            advance(10);
        }
    });
    let dir = folder("gz_file_size_limit");
    // Unpacked (16 bytes a record), the capture decompresses to more than the limit's 50 KiB.
    let plain = unpacked_capture_file(&prof, &dir, "run.tscope");
    let gz = unpacked_capture_file(&prof, &dir, "run.tscope.gz");
    assert!(fs::metadata(&plain).unwrap().len() > 60 << 10);
    let limited = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 50 && exec \"$0\" table \"$1\"")
        .arg(env!("CARGO_BIN_EXE_tickscope"))
        .arg(&gz)
        .output()
        .unwrap();
    assert_eq!(
        limited.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&limited.stderr)
    );
    let expected = tickscope(&["table", s(&plain)]);
    assert_eq!(expected.code, 0, "{}", expected.stderr);
    assert_eq!(String::from_utf8(limited.stdout).unwrap(), expected.stdout);
}

/// Advances the mock clock by `ns` between two awaits that are ready at once.
#[tickscope::profile]
async fn fetch(advance: &(dyn Fn(u64) + Sync), ns: u64) {
    advance(ns);
    std::future::ready(()).await;
    advance(ns);
}

/// Runs `fut` to completion on this thread (it never waits on anything).
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// Captures holding async calls (a `#[profile] async fn`, whose polls make one call each)
/// are compared in pieces, their calls matched as the threads are read again: the diff is the
/// library's of the decoded traces, the async calls' name included.
#[test]
fn diff_of_async_calls_is_the_diff_of_the_decoded_traces() {
    let dir = folder("diff_async");
    let run = |ns: u64| {
        record(|_, advance| {
            for _ in 0..30 {
                let _main = scope!("main");
                advance(ns);
                block_on(fetch(advance, ns));
            }
        })
    };
    let base = capture_file(&run(1_000), &dir, "base.tscope");
    let new = capture_file(&run(2_000), &dir, "new.tscope");
    let trace = |path: &Path| Trace::from_captures(&Capture::read_all(path).unwrap());
    let diff = Diff::new(&trace(&base), &trace(&new), &Options::default());
    let read = |path: &Path| Capture::read_all(path).unwrap();
    let streamed = tickscope::__private::diff_of_captures(
        &read(&base),
        &read(&new),
        &Options::default(),
        false,
    );
    assert_eq!(streamed.as_ref(), Some(&diff), "read in pieces");
    assert!(
        diff.rows.iter().any(|r| r.name.contains("fetch")),
        "{diff:?}"
    );
    let run = tickscope(&["diff", s(&base), s(&new), "--format", "json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let as_read = |text: String| serde_json::from_str::<serde_json::Value>(&text).unwrap();
    assert_eq!(
        doc["rows"],
        as_read(serde_json::to_string(&diff.rows).unwrap())
    );
    assert_eq!(doc["base_wall_ns"], diff.base_wall_ns);
}
