//! Arbitrary bytes read as a capture file, and everything the `tickscope` command does with
//! what was read: decode it, build the reports and the tables (flat and as a call tree, by
//! thread or not), write Chrome JSON, Kineto JSON and folded stacks, and write the capture
//! again, which must read back to the same trace. Nothing may panic (the build has debug
//! assertions, so an arithmetic overflow panics).
//!
//! `cargo +nightly fuzz run read_capture` (seeds in `corpus/read_capture`; see `.ci/run`).

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use tickscope::Capture;
use tickscope::export::{Format, chrome, folded, kineto};
use tickscope::report::Report;
use tickscope::table::Table;
use tickscope::trace::Trace;

fn chrome_json(trace: &Trace) -> Vec<u8> {
    let mut json = Vec::new();
    chrome::write(trace, &mut json).expect("writing to a Vec does not fail");
    json
}

fuzz_target!(|data: &[u8]| {
    let Ok(captures) = Capture::from_bytes(data) else {
        return;
    };
    for capture in captures {
        let trace = Arc::new(capture.decode());
        std::hint::black_box(Report::new(&trace));
        std::hint::black_box(Report::by_thread(&trace));
        for (tree, by_thread) in [(false, false), (false, true), (true, false), (true, true)] {
            let table = Table::new(Arc::clone(&trace))
                .tree(tree)
                .by_thread(by_thread);
            std::hint::black_box(table.to_string());
        }
        let json = chrome_json(&trace);
        let mut other = Vec::new();
        kineto::Options::new(0, 1)
            .write(&trace, &mut other)
            .expect("writing to a Vec does not fail");
        for by_thread in [false, true] {
            folded::write(
                &trace,
                &mut other,
                folded::Options::new().by_thread(by_thread),
            )
            .expect("writing to a Vec does not fail");
        }
        std::hint::black_box(other);

        // What `tickscope merge` writes reads back, to the same trace.
        let mut again = Vec::new();
        capture
            .write_to(&mut again)
            .expect("writing to a Vec does not fail");
        let reread = Capture::from_bytes(&again).expect("a capture written back reads back");
        assert_eq!(reread.len(), 1);
        assert!(
            reread[0].warnings().is_empty(),
            "a capture written back reads back without warnings: {:?}",
            reread[0].warnings()
        );
        assert_eq!(reread[0].record_count(), capture.record_count());
        assert!(
            chrome_json(&reread[0].decode()) == json,
            "a capture written back decodes to the same trace"
        );
    }
});
