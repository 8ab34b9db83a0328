//! A session's trace written with its large threads apart ([`parts`](crate::export::parts)):
//! scope arguments and links across threads (flows) are the same bytes whatever writes them.

use crate::capture::Capture;
use crate::export::parts::traces_tests::{same_bytes_whatever_writes, thread_names};

/// A session of four threads: scopes with arguments, scopes that link to scopes of
/// another thread (flows), and a small thread.
fn session() -> std::sync::Arc<Capture> {
    let prof = crate::Profiler::builder().current_thread().start();
    let submits = crate::thread::spawn(|| {
        let mut links = Vec::new();
        for i in 0..9_000u32 {
            let submit = crate::scope!("submit", seq);
            let _work = crate::scope!("work", i = i % 5);
            if i % 300 == 0 {
                links.push(submit.link());
            }
        }
        links
    });
    let args = crate::thread::spawn(|| {
        for i in 0..9_000u32 {
            let _outer = crate::scope!("outer", name = ["x", "y"][i as usize % 2]);
            let _inner = crate::scope!("inner");
        }
    });
    let links = submits.join().unwrap();
    args.join().unwrap();
    crate::thread::spawn(move || {
        let _main = crate::scope!("main");
        for link in links {
            let _handle = crate::scope!("handle", follows = link);
            for _ in 0..300 {
                let _step = crate::scope!("step");
            }
        }
    })
    .join()
    .unwrap();
    crate::thread::spawn(|| drop(crate::scope!("small")))
        .join()
        .unwrap();
    prof.stop();
    prof.capture()
}

#[test]
fn traces_with_arguments_and_flows_are_the_same_bytes_whatever_writes_their_threads() {
    let json = same_bytes_whatever_writes(&[&session()], false);
    assert_eq!(thread_names(&json), 4);
}
