//! Text output: stdout that tolerates a closed pipe, aligned columns, signed changes.

use std::io::{self, Write};

use crate::Failure;

/// Writes `text` to stdout. A reader that went away (`tickscope table f | head`) is not an
/// error; any other write error is.
pub(crate) fn print(text: &str) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(Failure(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// `rows` under `headers` in columns two spaces apart, with a rule under the headers; the
/// first `left` columns are aligned left, the others right. Long cells are shortened with an
/// ellipsis, as in the library's tables ([`tickscope::table::MAX_CELL_CHARS`]).
pub(crate) fn columns(headers: &[&str], rows: &[Vec<String>], left: usize) -> String {
    tickscope::table::grid_text(headers, rows, left)
}

/// A change of a count: `+2`, `-1`, `0`.
pub(crate) fn signed_count(base: u64, new: u64) -> String {
    match new.cmp(&base) {
        std::cmp::Ordering::Greater => format!("+{}", new - base),
        std::cmp::Ordering::Less => format!("-{}", base - new),
        std::cmp::Ordering::Equal => "0".to_owned(),
    }
}

/// A relative change with one decimal (`+12.5%`), or `-` when there is no base to compare
/// with.
pub(crate) fn percent_change(base: u64, new: u64) -> String {
    if base == 0 {
        return if new == 0 { "+0.0%" } else { "-" }.to_owned();
    }
    let change = (new as f64 - base as f64) * 100.0 / base as f64;
    format!("{change:+.1}%")
}

/// Seconds with three decimals, from nanoseconds.
pub(crate) fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes() {
        assert_eq!(signed_count(3, 1), "-2");
        assert_eq!(percent_change(200, 300), "+50.0%");
        assert_eq!(percent_change(200, 100), "-50.0%");
        assert_eq!(percent_change(0, 5), "-");
        assert_eq!(seconds(3_000_000), "0.003 s");
    }

    #[test]
    fn aligned_columns() {
        let rows = vec![
            vec!["a".to_owned(), "1".to_owned()],
            vec!["long".to_owned(), "22".to_owned()],
        ];
        let text = columns(&["Name", "N"], &rows, 1);
        assert_eq!(text, "Name   N\n--------\na      1\nlong  22\n");
    }
}
