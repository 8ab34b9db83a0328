//! With the `enabled` feature off, `scope!` records nothing and does not evaluate dynamic names.
//!
//! `cargo test --no-default-features --test disabled`
#![cfg(not(feature = "enabled"))]

use tickscope::{Profiler, ProfilerBuilder, profile, scope};

/// A session's config, the mock clock installed first: every test of this file uses it (the
/// clock is the process's, chosen before the first session).
fn config() -> ProfilerBuilder {
    tickscope::clock::use_mock_clock().expect("the mock clock, installed first");
    Profiler::builder().current_thread()
}

#[test]
fn nothing_is_recorded() {
    let prof = config().start();
    let evaluated = std::cell::Cell::new(false);
    {
        let _g = scope!("compiled out");
        let _d = scope!(
            name = {
                evaluated.set(true);
                "dynamic"
            }
        );
        assert!(!_g.is_recording());
        // The guard holds nothing without the `enabled` feature.
        assert_eq!(std::mem::size_of_val(&_g), 0);
        let link = tickscope::link();
        assert_eq!(link, tickscope::Link::NONE);
        let numbered = scope!("numbered", seq);
        assert!(!numbered.is_recording());
        let _f = scope!("follows", follows = link);
        let _a = scope!(
            "with args",
            follows = numbered.link(),
            v = {
                evaluated.set(true);
                1
            },
            d = %"shown",
        );
    }
    prof.stop();
    assert!(prof.report().is_empty());
    assert!(!evaluated.get());
}

#[profile]
fn attributed(x: u32) -> u32 {
    x + 1
}

struct S;

#[profile]
impl S {
    fn method(&self) -> u32 {
        attributed(1)
    }

    #[profile(skip)]
    fn skipped(&self) -> u32 {
        3
    }
}

#[profile]
async fn later() -> u32 {
    4
}

#[test]
fn profile_attribute_records_nothing() {
    let prof = config().start();
    assert_eq!(S.method() + S.skipped(), 5);
    let mut fut = std::pin::pin!(later());
    let ready = fut
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    assert_eq!(ready, std::task::Poll::Ready(4));
    prof.stop();
    assert!(prof.report().is_empty());
    assert!(prof.trace().async_spans.is_empty());
}

#[test]
fn counters_values_and_instants_record_nothing() {
    let prof = config().start();
    let evaluated = std::cell::Cell::new(false);
    let n = || {
        evaluated.set(true);
        1
    };
    tickscope::counter!("depth", set = n());
    tickscope::counter!("bytes", add = n());
    tickscope::value!("batch", n());
    tickscope::instant!("tick");
    tickscope::instant!("flush", process);
    tickscope::instant!("miss", key = n());
    tickscope::instant!("epoch", process, key = n());
    prof.stop();
    assert!(!evaluated.get());
    let trace = prof.trace();
    assert!(trace.counters.is_empty() && trace.values.is_empty() && trace.instants.is_empty());
}

#[test]
fn threads_are_std_threads() {
    // The same functions and types as std's: a library can use them unconditionally.
    let spawn: fn(fn() -> u8) -> std::thread::JoinHandle<u8> = tickscope::thread::spawn;
    assert_eq!(spawn(|| 7).join().unwrap(), 7);
    let builder: std::thread::Builder = tickscope::thread::Builder::new().name("w".into());
    assert_eq!(builder.spawn(|| 8).unwrap().join().unwrap(), 8);
    let n = tickscope::thread::scope(|s: &std::thread::Scope<'_, '_>| s.spawn(|| 9).join());
    assert_eq!(n.unwrap(), 9);
    assert!(tickscope::thread::Sessions::current().is_empty());
}

#[test]
fn the_table_says_that_nothing_was_recorded() {
    let prof = config().start();
    {
        let _g = scope!("work");
    }
    prof.stop();
    // Not "0 threads, 0 scopes": the build, not the program, is why the table is empty.
    assert_eq!(
        prof.table().to_string(),
        "Name  Calls  Total  Total %  Self  Self %  Avg  Min  Max  P50  P99\n\
         ------------------------------------------------------------------\n\
         tickscope was built without its `enabled` feature: nothing was recorded\n"
    );
}

/// Without the `plugins` feature (no libloading), a plug-in named is a load error that says
/// why; the session runs without it.
#[cfg(not(feature = "plugins"))]
#[test]
fn a_plugin_is_a_load_error_without_the_plugins_feature() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let prof = config().plugin(&path).start();
    prof.stop();
    let errors: Vec<String> = prof.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [format!(
            "collector `{}`: load failed: tickscope was built without its `plugins` feature, \
             which loads plug-ins",
            path.display()
        )]
    );
}

/// Without the `gzip` feature (no flate2), writing to a `.gz` path and reading a gzipped
/// capture are errors that say why, and no file is left behind.
#[cfg(not(feature = "gzip"))]
#[test]
fn gzip_is_an_error_without_the_gzip_feature() {
    let dir = std::env::temp_dir().join(format!("tickscope-disabled-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json.gz");
    let prof = config().start();
    prof.stop();
    let err = prof.write_chrome_trace(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    assert_eq!(
        err.to_string(),
        format!(
            "cannot write {}: tickscope was built without its `gzip` feature, which writes `.gz` \
             files",
            path.display()
        )
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir(&dir).unwrap();
    let err = tickscope::Capture::from_bytes(&[0x1f, 0x8b, 8, 0]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "gzipped, and tickscope was built without its `gzip` feature, which reads gzipped \
         captures"
    );
}

/// Without `enabled` (no quanta) the mock clock is tickscope's own, with quanta's methods: a
/// library's tests that move it compile with the feature on or off.
#[test]
fn the_mock_clock_moves_by_nanoseconds_and_durations() {
    let mock: std::sync::Arc<tickscope::clock::Mock> = tickscope::clock::use_mock_clock().unwrap();
    let start = mock.value();
    mock.increment(5u64);
    mock.increment(std::time::Duration::from_micros(2));
    mock.decrement(1);
    assert_eq!(mock.value() - start, 2_004);
    assert_eq!(
        tickscope::clock::source(),
        tickscope::clock::ClockSource::Mock
    );
}

/// A collector records without `enabled` (it is not tickscope's instrumentation): the table
/// counts its events and says that they are all there is.
#[test]
fn the_table_counts_a_collectors_events_and_says_the_rest_is_compiled_out() {
    use tickscope::collector::{BoxError, Collector, SessionWriter};

    struct Device;
    impl Collector for Device {
        fn name(&self) -> &str {
            "device"
        }
        fn start(&mut self) -> Result<(), BoxError> {
            Ok(())
        }
        fn stop(&mut self) -> Result<(), BoxError> {
            Ok(())
        }
        fn collect(&mut self, out: &mut Vec<u8>) -> Result<(), BoxError> {
            let mut session =
                SessionWriter::new("gpu0", (1_000, 5_000), (1_000_000, 1_004_000), 1.0);
            let stream = session.thread("stream 1");
            session.span(stream, "kernel", 2_000, 3_000);
            session.write_to(out);
            Ok(())
        }
    }

    let prof = config().collector(Device).start();
    {
        let _g = scope!("work");
    }
    prof.stop();
    let table = prof.table().to_string();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 6, "{table}");
    assert!(lines[2].starts_with("kernel "), "{table}");
    assert!(
        lines[3].ends_with(" wall, 2 processes, 1 thread, 1 scope, 0 dropped events"),
        "{table}"
    );
    assert_eq!(
        lines[4],
        "Total % and Self %: of 1.00 µs in scopes, all threads (every row's Self added up)"
    );
    assert_eq!(
        lines[5],
        "tickscope was built without its `enabled` feature: only collectors recorded"
    );
}
