//! With the `enabled` feature off, `scope!` records nothing and does not evaluate dynamic names.
//!
//! `cargo test --no-default-features --test disabled`
#![cfg(not(feature = "enabled"))]

use tickscope::{Profiler, profile, scope};

#[test]
fn nothing_is_recorded() {
    let prof = Profiler::builder().current_thread().start();
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
        assert_eq!(std::mem::size_of_val(&_g), std::mem::size_of::<u32>());
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
    let prof = Profiler::builder().current_thread().start();
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
    let prof = Profiler::builder().current_thread().start();
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
