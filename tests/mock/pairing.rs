//! Regression tests for the correctness pass (issue 13): scope arguments that fill their
//! records, guards dropped out of order, and exact nanoseconds at Unix-epoch tick values.
//!
//! Every test here shares the process-wide mock clock, so they take `SERIAL` to run one at a
//! time.
#![cfg(feature = "enabled")]

use std::fmt::Write as _;

use crate::common::serial_mock as serial;
use tickscope::trace::{Trace, Value};
use tickscope::{Profiler, scope};

/// `(name, start, end, depth, parent name, self)` of a span, relative to the session start.
type Row = (&'static str, u64, u64, u32, Option<&'static str>, u64);

/// Every span of the first thread as a [`Row`].
fn spans(trace: &Trace) -> Vec<Row> {
    let thread = &trace.threads[0];
    thread
        .spans
        .iter()
        .map(|s| {
            (
                s.name(),
                s.start_ns - trace.start_ns,
                s.end_ns - trace.start_ns,
                s.depth,
                s.parent.map(|p| thread.spans[p as usize].name()),
                s.self_ns(),
            )
        })
        .collect()
}

#[test]
fn repro_13_2_a_child_that_outlives_its_parent_keeps_its_duration() {
    let (_serial, m) = serial();
    let prof = Profiler::builder().current_thread().start();
    let a = scope!("a");
    m.increment(10u64);
    let b = scope!("b");
    m.increment(10u64);
    drop(a);
    m.increment(30u64);
    drop(b);
    prof.stop();

    let trace = prof.trace();
    assert_eq!(
        spans(&trace),
        [("a", 0, 20, 0, None, 10), ("b", 10, 50, 1, Some("a"), 40)]
    );
    let report = prof.report();
    let (a, b) = (report.get("a").unwrap(), report.get("b").unwrap());
    assert_eq!((a.total_ns, a.self_ns), (20, 10));
    assert_eq!(
        (b.total_ns, b.self_ns, b.min_ns, b.max_ns),
        (40, 40, 40, 40)
    );

    // The folded stacks hold self times per stack: the same 10 and 40 ns.
    let mut folded = Vec::new();
    tickscope::export::folded::write(&trace, &mut folded, Default::default()).unwrap();
    let folded = String::from_utf8(folded).unwrap();
    let mut lines: Vec<&str> = folded.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["a 10", "a;b 40"]);
}

#[test]
fn repro_13_2_grandchildren_of_an_overhanging_scope() {
    let (_serial, m) = serial();
    let prof = Profiler::builder().current_thread().start();
    let a = scope!("a");
    m.increment(10u64);
    let b = scope!("b");
    m.increment(5u64);
    {
        let _c = scope!("c"); // inside a and b
        m.increment(3u64);
    }
    m.increment(2u64);
    drop(a); // at 20: b (and only b) outlives it
    m.increment(4u64);
    {
        let _d = scope!("d"); // opened after a ended: a child of b
        m.increment(6u64);
    }
    m.increment(10u64);
    drop(b); // at 40
    prof.stop();

    assert_eq!(
        spans(&prof.trace()),
        [
            // a: 20 long, b inside it for 10 of them.
            ("a", 0, 20, 0, None, 10),
            // b: 30 long, minus c (3) and d (6).
            ("b", 10, 40, 1, Some("a"), 21),
            ("c", 15, 18, 2, Some("b"), 3),
            // d opened after a ended: still b's child, one level below it.
            ("d", 24, 30, 2, Some("b"), 6),
        ]
    );
}

#[test]
fn repro_13_2_the_overhang_is_child_time_of_the_next_open_ancestor() {
    let (_serial, m) = serial();
    let prof = Profiler::builder().current_thread().start();
    let g = scope!("g");
    m.increment(10u64);
    let a = scope!("a");
    m.increment(5u64);
    let b = scope!("b");
    m.increment(5u64);
    drop(a); // at 20
    m.increment(30u64);
    drop(b); // at 50
    m.increment(50u64);
    drop(g); // at 100
    prof.stop();

    // b's 15..20 lies in a, its 20..50 in g: the self times add up to the 100 ns that passed.
    let trace = prof.trace();
    assert_eq!(
        spans(&trace),
        [
            ("g", 0, 100, 0, None, 60),
            ("a", 10, 20, 1, Some("g"), 5),
            ("b", 15, 50, 2, Some("a"), 35),
        ]
    );
    let report = prof.report();
    let own: u64 = ["g", "a", "b"]
        .iter()
        .map(|n| report.get(n).unwrap().self_ns)
        .sum();
    assert_eq!(own, 100);
}

#[test]
fn repro_13_3_guards_of_one_callsite_dropped_oldest_first() {
    let (_serial, m) = serial();
    let prof = Profiler::builder().current_thread().start();
    let mut guards = Vec::new();
    for _ in 0..3 {
        guards.push(scope!("fifo"));
        m.increment(10u64);
    }
    // Opened at 0, 10, 20; dropped oldest first at 30, 40, 50: each lived exactly 30 ns.
    for guard in guards.drain(..) {
        drop(guard);
        m.increment(10u64);
    }
    prof.stop();

    let report = prof.report();
    let fifo = report.get("fifo").unwrap();
    assert_eq!(fifo.calls, 3);
    assert_eq!(
        (
            fifo.min_ns,
            fifo.max_ns,
            fifo.p50_ns,
            fifo.p99_ns,
            fifo.total_ns
        ),
        (30, 30, 30, 30, 90)
    );
    let trace = prof.trace();
    let got: Vec<_> = spans(&trace).iter().map(|s| (s.1, s.2)).collect();
    assert_eq!(got, [(0, 30), (10, 40), (20, 50)]);
}

#[test]
fn repro_13_3_guards_of_one_callsite_dropped_in_any_order() {
    let (_serial, m) = serial();
    let prof = Profiler::builder().current_thread().start();
    // Five guards opened 10 ns apart and dropped in a scrambled order.
    let mut guards: Vec<Option<tickscope::ScopeGuard>> = Vec::new();
    for _ in 0..5 {
        guards.push(Some(scope!("any")));
        m.increment(10u64);
    }
    let mut ends = [0u64; 5];
    for (step, index) in [3usize, 0, 4, 1, 2].into_iter().enumerate() {
        ends[index] = 50 + 7 * step as u64;
        drop(guards[index].take());
        m.increment(7u64);
    }
    prof.stop();
    let trace = prof.trace();
    let got: Vec<_> = spans(&trace).iter().map(|s| (s.1, s.2)).collect();
    let want: Vec<_> = (0..5).map(|i| (10 * i as u64, ends[i])).collect();
    assert_eq!(got, want);
}

#[test]
fn repro_13_4_exact_nanoseconds_at_unix_epoch_ticks() {
    let (_serial, m) = serial();
    // Move the mock to a real Unix time (only forward: it is shared).
    let now = m.value();
    let target = 1_700_000_000_000_000_000u64;
    if now < target {
        m.increment(target - now);
    }
    let prof = Profiler::builder().current_thread().start();
    let durations = [1u64, 7, 100, 255, 256, 1000, 1_000_001];
    for d in durations {
        let _g = scope!("exact");
        m.increment(d);
    }
    prof.stop();
    let trace = prof.trace();
    assert!(trace.start_ns >= target);
    let got: Vec<u64> = trace.threads[0]
        .spans
        .iter()
        .map(|s| s.duration_ns())
        .collect();
    assert_eq!(got, durations);
    let exact = prof.report();
    let exact = exact.get("exact").unwrap();
    assert_eq!((exact.min_ns, exact.max_ns), (1, 1_000_001));
    assert_eq!(exact.total_ns, durations.iter().sum::<u64>());
}

/// The argument values a scope recorded, in order.
fn recorded_args(prof: &Profiler) -> Vec<(&'static str, Value)> {
    let trace = prof.trace();
    let thread = &trace.threads[0];
    assert_eq!(thread.spans.len(), 1);
    thread
        .args_of(0)
        .iter()
        .map(|a| (a.key, a.value.clone()))
        .collect()
}

#[test]
fn repro_13_1_long_string_then_another_string_argument() {
    let (_serial, m) = serial();
    for len in 700..=760 {
        // Sessions are windows of ticks: keep each one's events out of the next.
        m.increment(1u64);
        let prof = Profiler::builder().current_thread().start();
        {
            let _g = scope!("query", sql = %"s".repeat(len), table = "users");
        }
        prof.stop();
        let args = recorded_args(&prof);
        // 62 records for arguments: the first string's head and its text (12 bytes a record),
        // then the second string's head and at least one record of text.
        let Value::Str(sql) = &args[0].1 else {
            panic!("sql is a string: {args:?}")
        };
        let room = 61 * 12;
        if len <= room - 2 * 12 {
            assert_eq!(sql.len(), len, "{len}");
            assert_eq!(args.len(), 2, "{len}");
            assert_eq!(args[1], ("table", Value::Str("users".into())));
        } else if len <= room {
            assert_eq!(sql.len(), len, "{len}");
            // The second string fits only if its head and one record are left.
            assert!(args.len() <= 2, "{len}");
        } else {
            assert_eq!(sql.len(), room, "{len}");
            assert!(sql.ends_with('…'));
            assert_eq!(args.len(), 1, "{len}");
        }
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the documentation promises for one argument list, given the 62 records a scope has
/// for arguments: scalars take a record, strings a head plus 12 bytes a record; a string that
/// does not fit is cut at a character boundary and ends in `…`, filling the records left; an
/// argument without room for its head (and, for a string, one record of text) is left out.
fn expected(args: &[(&'static str, Value)]) -> Vec<(&'static str, Value)> {
    const RECORDS: usize = 62;
    let mut used = 0;
    let mut out = Vec::new();
    for (key, value) in args {
        match value {
            Value::Str(s) => {
                if used + 2 > RECORDS {
                    continue;
                }
                let room = (RECORDS - used - 1) * 12;
                if s.len() <= room {
                    used += 1 + s.len().div_ceil(12);
                    out.push((*key, value.clone()));
                } else {
                    let mut cut = room - '…'.len_utf8();
                    while !s.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    used = RECORDS;
                    out.push((*key, Value::Str(format!("{}…", &s[..cut]).into())));
                }
            }
            _ => {
                if used < RECORDS {
                    used += 1;
                    out.push((*key, value.clone()));
                }
            }
        }
    }
    out
}

/// Displays a string one character per `write_str` call.
struct Pieces<'a>(&'a str);

impl std::fmt::Display for Pieces<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.chars().try_for_each(|c| f.write_char(c))
    }
}

#[test]
fn repro_13_1_random_argument_lists_never_panic_and_cut_as_documented() {
    let (_serial, m) = serial();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let alphabet = ['a', 'z', '0', 'é', '€', '𝄞', ' '];
    for round in 0..400 {
        // Up to 8 arguments (the macro takes a fixed list, so unused ones are skipped by
        // recording them through the same `Args` the macro expands to).
        let count = 1 + rng.below(8) as usize;
        let mut want: Vec<(&'static str, Value)> = Vec::new();
        for _ in 0..count {
            let value = match rng.below(5) {
                0 => Value::I64(rng.next() as i64),
                1 => Value::U64(rng.next()),
                2 => Value::Bool(rng.below(2) == 1),
                3 => Value::F64(rng.below(1000) as f64 / 8.0),
                _ => {
                    // Lengths around the capacity are the interesting ones.
                    let chars = match rng.below(3) {
                        0 => rng.below(20),
                        1 => rng.below(300),
                        _ => 150 + rng.below(700),
                    };
                    let s: String = (0..chars)
                        .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                        .collect();
                    Value::Str(s.into())
                }
            };
            want.push(("k", value));
        }
        m.increment(1u64);
        let prof = Profiler::builder().current_thread().start();
        {
            let mut args = tickscope::__private::Args::new();
            static KEY: tickscope::Callsite = tickscope::__private::callsite("k", file!(), 1, "t");
            static NAME: tickscope::Callsite =
                tickscope::__private::callsite("prop", file!(), 2, "t");
            for (_, value) in &want {
                match value {
                    Value::I64(v) => args.i64(&KEY, *v),
                    Value::U64(v) => args.u64(&KEY, *v),
                    Value::F64(v) => args.f64(&KEY, *v),
                    Value::Bool(v) => args.bool(&KEY, *v),
                    // Half the strings arrive one character per `write_str`, so that cuts
                    // fall across pieces and inside multi-byte characters.
                    Value::Str(v) if v.len() % 2 == 0 => args.display(&KEY, &Pieces(v)),
                    Value::Str(v) => args.display(&KEY, v),
                    other => unreachable!("a kind of value this test does not make: {other:?}"),
                }
            }
            let _g = args.enter(&NAME, None);
        }
        prof.stop();
        assert_eq!(recorded_args(&prof), expected(&want), "round {round}");
    }
}
