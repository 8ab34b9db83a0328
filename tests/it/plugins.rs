//! C ABI plug-ins (`include/tickscope_plugin.h`): the header against its Rust mirror, loading
//! and its misuses, the collect protocol. The plug-ins are tests/plugins/test_plugin.c, built
//! here by the system C compiler (`cc`) into shared objects in a temporary folder.
#![cfg(all(feature = "enabled", feature = "plugins", target_os = "linux"))]

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tickscope::collector::{SessionWriter, Stage, abi};
use tickscope::{Profiler, scope};

use crate::common::cbuild;
use cbuild::cc;

/// The folder the plug-ins are built in (one per test binary run).
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = cbuild::temp_dir("plugins");
        std::fs::write(dir.join("payload.h"), payload_header()).unwrap();
        dir
    })
}

/// The session every test plug-in hands back: process "accel", track "queue 0", two
/// "kernel" spans, on a clock whose tick 5 000 was Unix time 1 s.
fn payload() -> Vec<u8> {
    let mut session = SessionWriter::new(
        "accel",
        (5_000, 1_000_000_000),
        (105_000, 1_000_100_000),
        1.0,
    );
    let queue = session.thread("queue 0");
    session.span(queue, "kernel", 6_000, 7_000);
    session.span(queue, "kernel", 8_000, 8_500);
    let mut out = Vec::new();
    session.write_to(&mut out);
    out
}

fn payload_header() -> String {
    let bytes: Vec<String> = payload().iter().map(|b| b.to_string()).collect();
    format!(
        "static const unsigned char PAYLOAD[] = {{{}}};\n",
        bytes.join(",")
    )
}

/// Builds the test plug-in with `defines` into `lib<name>.so`.
fn build(name: &str, defines: &[&str]) -> PathBuf {
    let dir = dir();
    let local = format!("-I{}", dir.display());
    let defines: Vec<String> = defines.iter().map(|d| format!("-D{d}")).collect();
    let mut extra = vec![local.as_str()];
    extra.extend(defines.iter().map(String::as_str));
    cbuild::shared_object(dir, name, "tests/plugins/test_plugin.c", &extra)
}

/// A session of this thread with `plugins`: a host scope, and the plug-ins' sessions.
fn session(plugins: &[&Path]) -> Profiler {
    let mut builder = Profiler::builder().current_thread();
    for p in plugins {
        builder = builder.plugin(*p);
    }
    let prof = builder.start();
    drop(scope!("host work"));
    prof.stop();
    prof
}

/// The kernels of the trace: (start, end) in Unix ns.
fn kernels(prof: &Profiler) -> Vec<(u64, u64)> {
    let trace = prof.trace();
    trace
        .threads
        .iter()
        .filter(|t| t.name.as_deref() == Some("queue 0"))
        .flat_map(|t| t.spans.iter().map(|s| (s.start_ns, s.end_ns)))
        .collect()
}

const KERNELS: [(u64, u64); 2] = [
    (1_000_001_000, 1_000_002_000),
    (1_000_003_000, 1_000_003_500),
];

fn messages(prof: &Profiler) -> Vec<String> {
    prof.errors().iter().map(ToString::to_string).collect()
}

#[test]
fn header_matches_the_rust_mirror() {
    let mut c = String::from("#include <stddef.h>\n#include \"tickscope_plugin.h\"\n");
    let mut check = |what: String, value: usize| {
        c += &format!("_Static_assert({what} == {value}, \"{what} is not {value}\");\n");
    };
    macro_rules! layout {
        ($c:literal, $rust:ty, [$($field:ident),*]) => {
            check(format!("sizeof({})", $c), size_of::<$rust>());
            $(check(format!("offsetof({}, {})", $c, stringify!($field)), offset_of!($rust, $field));)*
        };
    }
    layout!("TSP_Status", abi::Status, [struct_size, ext, code, message]);
    layout!(
        "TSP_Profiler",
        abi::Profiler,
        [struct_size, ext, data, name]
    );
    layout!(
        "TSP_ProfilerFns",
        abi::ProfilerFns,
        [struct_size, ext, start, stop, collect, destroy]
    );
    layout!(
        "TSP_RegistrationParams",
        abi::RegistrationParams,
        [
            struct_size,
            ext,
            major_version,
            minor_version,
            patch_version,
            profiler,
            fns
        ]
    );
    check("TSP_VERSION_MAJOR".into(), abi::VERSION_MAJOR as usize);
    check("TSP_VERSION_MINOR".into(), abi::VERSION_MINOR as usize);
    check("TSP_VERSION_PATCH".into(), abi::VERSION_PATCH as usize);
    check("TSP_OK".into(), abi::OK as usize);
    check("TSP_ERROR".into(), abi::ERROR as usize);
    check("TSP_MESSAGE_SIZE".into(), abi::MESSAGE_SIZE);
    check(
        "TSP_PROFILER_STRUCT_SIZE_1_0".into(),
        abi::PROFILER_STRUCT_SIZE_1_0,
    );
    check(
        "TSP_PROFILER_FNS_STRUCT_SIZE_1_0".into(),
        abi::PROFILER_FNS_STRUCT_SIZE_1_0,
    );
    check(
        "TSP_STATUS_STRUCT_SIZE_1_0".into(),
        abi::STATUS_STRUCT_SIZE_1_0,
    );
    check(
        "TSP_REGISTRATION_PARAMS_STRUCT_SIZE_1_0".into(),
        abi::REGISTRATION_PARAMS_STRUCT_SIZE_1_0,
    );
    c += &format!(
        "_Static_assert(sizeof(TSP_INIT_SYMBOL) == {}, \"symbol\");\n",
        abi::INIT_SYMBOL.len() + 1
    );
    let file = dir().join("layout.c");
    std::fs::write(&file, c).unwrap();
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/include");
    let out = dir().join("layout.o");
    // C99, strict: the header must not need anything newer.
    cc(&[
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic-errors",
        &format!("-I{include}"),
        "-c",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(abi::INIT_SYMBOL, "TSP_InitProfiler");
}

#[test]
fn a_plugin_records_its_own_process_and_track() {
    let lib = build("good", &[]);
    let prof = session(&[&lib]);
    assert_eq!(messages(&prof), Vec::<String>::new());
    assert_eq!(kernels(&prof), KERNELS);
    let trace = prof.trace();
    let queue = trace
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("queue 0"))
        .unwrap();
    assert_eq!(trace.processes[queue.process as usize].name, "accel");
    assert_eq!(prof.report().get("host work").unwrap().calls, 1);
    // Restarted, it is started and collected again.
    prof.restart();
    prof.stop();
    assert_eq!(kernels(&prof), KERNELS);
}

#[test]
fn older_and_newer_struct_sizes_work_with_the_fields_both_know() {
    // Both fail their stop so that the error names them: the 1.0 plug-in has no name field
    // (its file's name is used), the newer one's name is read from the field both know.
    let old = build("old", &["OLD_PROFILER", "FAIL_STOP"]);
    let new = build("new", &["NEW_PROFILER", "FAIL_STOP"]);
    let prof = session(&[&old, &new]);
    assert_eq!(
        messages(&prof),
        [
            "collector `libold`: stop failed: stop refused (status code 1)",
            "collector `newer`: stop failed: stop refused (status code 1)",
        ]
    );
    // Collected all the same: the kernels of both.
    let mut both = KERNELS.to_vec();
    both.extend(KERNELS);
    both.sort();
    let mut got = kernels(&prof);
    got.sort();
    assert_eq!(got, both);
}

#[test]
fn misuses_are_errors_naming_the_plugin_and_the_session_runs_on() {
    let dir = dir();
    let too_small = build("too_small", &["PROFILER_SIZE=8"]);
    let fns_small = build("fns_small", &["FNS_SIZE=16"]);
    let null_fn = build("null_collect", &["NULL_COLLECT"]);
    let no_init = build("no_init", &["NO_INIT"]);
    let init_fails = build("init_fails", &["INIT_FAILS"]);
    let missing = dir.join("libmissing.so");
    let not_a_library = dir.join("payload.h");
    let good = build("good2", &[]);
    let prof = session(&[
        &too_small,
        &fns_small,
        &null_fn,
        &no_init,
        &init_fails,
        &missing,
        &not_a_library,
        &good,
    ]);
    let errors = prof.errors();
    assert!(errors.iter().all(|e| e.stage == Stage::Load));
    let named = |lib: &Path, message: &str| {
        format!("collector `{}`: load failed: {message}", lib.display())
    };
    let messages = messages(&prof);
    // What the user sees (`cargo test --test it -- --nocapture plugins::misuses`).
    for m in &messages {
        println!("{m}");
    }
    assert_eq!(messages.len(), 7, "{messages:#?}");
    assert_eq!(
        messages[0],
        named(
            &too_small,
            &format!(
                "TSP_Profiler.struct_size is 8, smaller than version 1.0's {}",
                abi::PROFILER_STRUCT_SIZE_1_0
            )
        )
    );
    assert_eq!(
        messages[1],
        named(
            &fns_small,
            "TSP_ProfilerFns.struct_size is 16, smaller than version 1.0's 48"
        )
    );
    assert_eq!(
        messages[2],
        named(&null_fn, "TSP_ProfilerFns.collect is NULL")
    );
    assert!(
        messages[3].starts_with(&named(&no_init, "no init function `TSP_InitProfiler`: ")),
        "{}",
        messages[3]
    );
    assert_eq!(
        messages[4],
        named(&init_fails, "init failed: no device found (status code 1)")
    );
    assert_eq!(messages[5], named(&missing, "no such file"));
    assert!(
        messages[6].starts_with(&named(&not_a_library, "cannot load: ")),
        "{}",
        messages[6]
    );
    // The session ran, with the plug-in that loaded.
    assert_eq!(prof.report().get("host work").unwrap().calls, 1);
    assert_eq!(kernels(&prof), KERNELS);
    // The table's footer lists them.
    let table = prof.table().to_string();
    for m in &messages {
        assert!(table.contains(&format!("Error: {m}")), "{table}");
    }
}

#[test]
fn collect_protocol_failures_keep_every_well_formed_chunk() {
    let bigger = build("bigger", &["BIGGER_SECOND"]);
    let malformed = build("malformed", &["MALFORMED"]);
    let failing = build("failing", &["COLLECT_ERROR"]);
    let size = payload().len();
    for (lib, expected) in [
        (
            &bigger,
            vec![format!(
                "collector `test-plugin`: collect failed: the second call reports {} bytes, more \
                 than the {size} its size query asked for: the {size} bytes written are kept",
                size + 4096
            )],
        ),
        (
            &failing,
            vec![
                "collector `test-plugin`: collect failed: device reset (status code 1)".to_owned(),
            ],
        ),
        (
            &malformed,
            vec![format!(
                "collector `test-plugin`: collect failed: malformed chunks: "
            )],
        ),
    ] {
        let prof = session(&[lib]);
        let got = messages(&prof);
        assert_eq!(got.len(), expected.len(), "{got:#?}");
        for (g, e) in got.iter().zip(&expected) {
            assert!(g.starts_with(e.as_str()), "{g}\nis not\n{e}");
        }
        // Every well-formed chunk kept: the whole session before the failure.
        assert_eq!(kernels(&prof), KERNELS, "{}", lib.display());
        assert_eq!(prof.report().get("host work").unwrap().calls, 1);
    }
}

#[test]
fn plugins_from_the_environment() {
    const VAR: &str = "TICKSCOPE_PLUGINS";
    if std::env::var_os("TICKSCOPE_PLUGINS_CHILD").is_some() {
        // The child: its environment names a good plug-in and a missing one.
        let prof = session(&[]);
        assert_eq!(kernels(&prof), KERNELS);
        let missing = std::env::var("TICKSCOPE_PLUGINS").unwrap();
        let missing = missing.split(':').nth(1).unwrap().to_owned();
        assert_eq!(
            messages(&prof),
            [format!("collector `{missing}`: load failed: no such file")]
        );
        return;
    }
    let good = build("env", &[]);
    let missing = dir().join("libgone.so");
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::common::test_name(module_path!(), "plugins_from_the_environment"),
            "--test-threads=1",
            "-q",
        ])
        .env(VAR, format!("{}:{}", good.display(), missing.display()))
        .env("TICKSCOPE_PLUGINS_CHILD", "1")
        .status()
        .unwrap();
    assert!(status.success());
}
