//! Fidelity (issue 19) under the mock clock: nested trees of known shape read exact self and
//! total times, no overhead compensation is applied to exact times, and a session with
//! compensation switched off says so in its table and trace. (The compensation's arithmetic
//! is tested in `src/decode/tests.rs`; its effect on real clocks is measured by
//! `examples/fidelity.rs`.)
//!
//! Every test here shares the process-wide mock clock, so they take `SERIAL` to run one at a
//! time.
#![cfg(feature = "enabled")]

use crate::common::serial_mock as serial;
use tickscope::trace::{Compensation, Trace};
use tickscope::{Profiler, scope};

/// `(name, total, self, overhead)` of every span of the first thread, in entry order.
fn times(trace: &Trace) -> Vec<(&'static str, u64, u64, u64)> {
    trace.threads[0]
        .spans
        .iter()
        .map(|s| (s.name(), s.duration_ns(), s.self_ns(), s.overhead_ns))
        .collect()
}

/// `root` [ `a` [ `leaf` × `leaves` ], `b` ] with 5 ns of own work before each child, 7 ns per
/// leaf and 3 ns in `b`.
fn tree(m: &tickscope::clock::Mock, leaves: u64) {
    let _root = scope!("root");
    m.increment(5u64);
    {
        let _a = scope!("a");
        for _ in 0..leaves {
            m.increment(5u64);
            let _leaf = scope!("leaf");
            m.increment(7u64);
        }
    }
    m.increment(5u64);
    let _b = scope!("b");
    m.increment(3u64);
}

#[test]
fn nested_trees_of_known_shape_are_exact() {
    let (_serial, m) = serial();
    for leaves in [0u64, 1, 3, 100] {
        let prof = Profiler::builder().current_thread().start();
        tree(&m, leaves);
        prof.stop();
        let trace = prof.trace();
        assert_eq!(trace.compensation, None, "exact times are not compensated");
        let a = 12 * leaves;
        let mut expected = vec![("root", 5 + a + 5 + 3, 10, 0), ("a", a, 5 * leaves, 0)];
        expected.extend((0..leaves).map(|_| ("leaf", 7, 7, 0)));
        expected.push(("b", 3, 3, 0));
        assert_eq!(times(&trace), expected);
        let report = prof.report();
        let leaf = report
            .get("leaf")
            .map_or((0, 0), |r| (r.total_ns, r.self_ns));
        assert_eq!(leaf, (7 * leaves, 7 * leaves));
        let root = report.get("root").unwrap();
        assert_eq!((root.total_ns, root.self_ns), (13 + a, 10));
        assert!(!prof.table().to_string().contains("Overhead compensation"));
    }
}

#[test]
fn compensation_switched_off_is_stated() {
    let (_serial, m) = serial();
    let prof = Profiler::builder()
        .current_thread()
        .compensate_overhead(false)
        .start();
    tree(&m, 2);
    prof.stop();
    let trace = prof.trace();
    assert_eq!(trace.compensation, Some(Compensation::Off));
    assert_eq!(
        times(&trace),
        [
            ("root", 37, 10, 0),
            ("a", 24, 10, 0),
            ("leaf", 7, 7, 0),
            ("leaf", 7, 7, 0),
            ("b", 3, 3, 0),
        ]
    );
    let table = prof.table().to_string();
    assert!(
        table.contains("\nOverhead compensation: off (times include the probes)\n"),
        "{table}"
    );
    let mut json = Vec::new();
    tickscope::export::chrome::write(&trace, &mut json).unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(
        json.contains(",\"overhead_compensation\":\"off\""),
        "{json}"
    );
    // A capture file keeps it.
    let mut file = Vec::new();
    prof.capture().write_to(&mut file).unwrap();
    let read = tickscope::Capture::from_bytes(&file).unwrap();
    assert_eq!(read[0].decode().compensation, Some(Compensation::Off));
}
