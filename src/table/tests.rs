//! Unit tests of the table module.

use super::format::format_bytes;
use super::grid::shorten;
use super::{Align, Grid, MAX_CELL_CHARS, format_ns};

#[test]
fn long_cells_keep_both_ends() {
    assert_eq!(shorten("abcdef", 6), "abcdef");
    assert_eq!(shorten("abcdefg", 6), "abc…fg");
    assert_eq!(shorten("🦀🦀🦀🦀🦀🦀🦀 *", 5), "🦀🦀… *");
    assert_eq!(shorten("abc", 1), "…");
    assert_eq!(shorten("abc", 0), "…");
    assert_eq!(shorten("a\nb\r\u{1b}[31m", 80), "a\\nb\\r\\u{1b}[31m");
    assert_eq!(shorten("a\nbcdef", 5), "a\\…ef");
    let long = "x".repeat(200_000) + " *";
    let cell = shorten(&long, MAX_CELL_CHARS);
    assert_eq!(cell.chars().count(), MAX_CELL_CHARS);
    assert!(cell.ends_with("xx *"));
    // A grid of such cells: every line as wide as the rule, nothing past it.
    let rows = vec![
        vec![long.clone(), "1".to_owned()],
        vec!["a".to_owned(), "22".to_owned()],
    ];
    let text = Grid::new(1).text(&["Name", "N"], &rows);
    let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
    assert_eq!(widths, [84, 84, 84, 84]);
    assert!(text.ends_with(&format!("\na{}22\n", " ".repeat(81))));
}

/// `cells` as rows of owned strings.
fn rows(cells: &[&[&str]]) -> Vec<Vec<String>> {
    cells
        .iter()
        .map(|row| row.iter().map(|&c| c.to_owned()).collect())
        .collect()
}

#[test]
fn grid_aligns_columns() {
    let text = Grid::new(1).text(&["Name", "N"], &rows(&[&["a", "1"], &["long", "22"]]));
    assert_eq!(text, "Name   N\n--------\na      1\nlong  22\n");
    // No line ends in padding: an empty last cell leaves none, nor does a left-aligned one.
    let text = Grid::new(2).text(&["A", "B", "C"], &rows(&[&["x", "yyy", ""], &["", "", ""]]));
    assert_eq!(text, "A  B    C\n---------\nx  yyy\n\n");
}

#[test]
fn grid_layouts() {
    // Live at stop: indented, no headers, a minimum width, a narrower gap, a third column
    // aligned left.
    let grid = Grid::new(1)
        .indent("  ")
        .min_width(1, 10)
        .align(2, Align::Left)
        .gap(2, " ");
    let text = grid.text(
        &[],
        &rows(&[
            &["work", "1.50 KiB", "in 3 allocations"],
            &["w", "12 B", "in 1 allocation"],
        ]),
    );
    assert_eq!(
        text,
        "  work    1.50 KiB in 3 allocations\n  w           12 B in 1 allocation\n"
    );
    // `ps`: minimum widths under headers with no rule; a short row's last cell spans the
    // columns left and widens none; whole cells keep their control characters.
    let grid = Grid::new(2)
        .min_width(0, 4)
        .align(2, Align::Right)
        .no_rule()
        .whole_cells()
        .spanning_last_cells();
    let text = grid.text(
        &["ID", "PROGRAM", "N"],
        &rows(&[
            &["1", "a\tb", "5"],
            &["22", "(an error longer than the columns)"],
        ]),
    );
    assert_eq!(
        text,
        "ID    PROGRAM  N\n1     a\tb      5\n22    (an error longer than the columns)\n"
    );
}

#[test]
fn byte_units() {
    assert_eq!(format_bytes(1000), "1000 B");
    assert_eq!(format_bytes(1536), "1.50 KiB");
    assert_eq!(format_bytes(3 << 20), "3.00 MiB");
    assert_eq!(format_bytes(5 << 30), "5.00 GiB");
}

#[test]
fn units() {
    assert_eq!(format_ns(999), "999 ns");
    assert_eq!(format_ns(1_500), "1.50 µs");
    assert_eq!(format_ns(2_345_678), "2.35 ms");
    assert_eq!(format_ns(3_000_000_000), "3.000 s");
}

/// The clock's source goes through a capture file as it was, and the table names a
/// doubtful one.
#[test]
fn the_clock_source_is_kept_and_a_doubtful_one_is_named() {
    use std::sync::Arc;

    use crate::capture::Capture;
    use crate::record::callsite::Callsite;
    use crate::record::clock::ClockSource;
    use crate::record::event::RawEvent;

    static STEP: Callsite = Callsite::new("step", "table.rs", 1, "tests");
    let records = vec![
        RawEvent::begin(STEP.id(), 10),
        RawEvent::end(RawEvent::end_key(STEP.id(), 10), 20),
    ];
    let through_a_file = |capture: &Capture| {
        let mut bytes = Vec::new();
        capture.write_to(&mut bytes).unwrap();
        Capture::from_bytes(&bytes).unwrap().remove(0)
    };
    for source in [
        ClockSource::Cpu,
        ClockSource::CpuUnverified,
        ClockSource::Monotonic,
    ] {
        let mut capture = Capture::from_records(vec![(1, records.clone())], 0, 100);
        capture.clock.ns_per_tick = Some(1.0);
        capture.clock.source = Some(source);
        let back = through_a_file(&capture);
        assert_eq!(back.clock.source, Some(source));
        let trace = back.decode();
        assert_eq!(trace.clock_source, Some(source));
        let table = super::Table::new(Arc::new(trace)).to_string();
        let named = table.contains(&format!("\nClock: {source}\n"));
        assert_eq!(named, source != ClockSource::Cpu, "{table}");
    }
    // Ticks that are nanoseconds (a mock clock) read as the mock's.
    let mut capture = Capture::from_records(vec![(1, records)], 0, 100);
    capture.clock.ns_per_tick = None;
    assert_eq!(
        through_a_file(&capture).clock.source,
        Some(ClockSource::Mock)
    );
}

/// Hand-made `tracing` records in every order (payloads missing, closes of ids never entered,
/// exits of enters never seen, equal ticks, ids used again): decoding never panics, each
/// async call's polls are the spans that name it, and the table summed from the records is
/// the one of the decoded trace.
#[test]
fn tracing_records_in_any_order_decode_without_panic() {
    static CALL: crate::record::callsite::Callsite =
        crate::record::callsite::Callsite::new("call", file!(), line!(), module_path!());
    use crate::capture::Capture;
    use crate::record::event::RawEvent;
    use crate::trace::SpanKind;
    let call = CALL.id();
    let mut next = crate::record::test_random(0x2545_F491_4F6C_DD1D);
    for round in 0..3000 {
        let mut threads = Vec::new();
        for thread in 0..1 + next(3) {
            let mut records = Vec::new();
            let mut tick = 1;
            let mut entered: Vec<u64> = Vec::new();
            for _ in 0..next(24) {
                tick += next(3);
                let span = 1 + next(3);
                match next(9) {
                    0 | 1 => {
                        records.extend(RawEvent::span_enter(call, tick, span));
                        entered.push(tick);
                    }
                    2 => {
                        // An enter without its payload.
                        records.push(RawEvent::span_enter(call, tick, span)[0]);
                        entered.push(tick);
                    }
                    3 | 4 => {
                        let at = next(entered.len() as u64 + 1) as usize;
                        let start = entered.get(at).copied().unwrap_or(tick);
                        if at < entered.len() {
                            entered.remove(at);
                        }
                        records.push(RawEvent::end(RawEvent::end_key(call, start), tick));
                    }
                    5 => records.extend(RawEvent::span_close(0, tick, span, next(2) == 0)),
                    6 => records.push(RawEvent::span_close(call, tick, span, true)[0]),
                    7 => records.push(RawEvent::payload(next(2) as u32, span)),
                    _ => {
                        records.push(RawEvent::begin(call, tick));
                        records.push(RawEvent::end(RawEvent::end_key(call, tick), tick + 1));
                    }
                }
            }
            threads.push((7 + thread, records));
        }
        let capture = Capture::from_records(threads, 0, 200);
        let trace = capture.decode();
        for (r, call) in trace.async_spans.iter().enumerate() {
            let polls = trace
                .threads
                .iter()
                .flat_map(|t| &t.spans)
                .filter(|s| {
                    s.kind
                        == SpanKind::Poll {
                            async_span: Some(r as u32),
                        }
                })
                .count();
            assert_eq!(polls as u32, call.polls, "round {round}");
            assert!(call.start_ns <= call.end_ns, "round {round}");
        }
        let table = super::Table::new(std::sync::Arc::new(trace)).to_string();
        let summed = super::Table::from_captures(vec![capture]).to_string();
        assert_eq!(summed, table, "round {round}");
    }
}
