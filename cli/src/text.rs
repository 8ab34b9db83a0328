//! Text output: stdout that tolerates a closed pipe, signed changes, sizes and times (aligned
//! columns are [`tickscope::table::Grid`]'s).

use std::io::{self, Write};
use std::path::Path;

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

/// A file size: `512 bytes`, `15.7 KiB (16,080 bytes)`, `1.2 MiB (1,234,567 bytes)`.
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        let s = if bytes == 1 { "" } else { "s" };
        return format!("{bytes} byte{s}");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let exact = crate::input::grouped(bytes);
    format!("{value:.1} {} ({exact} bytes)", UNITS[unit])
}

/// The line a command that wrote `path` prints on stderr: `wrote PATH: WHAT, SIZE`; the size
/// of what is now at `path` (a regular file; a device or FIFO has none).
pub(crate) fn wrote_line(path: &Path, what: &str, size_of: Option<u64>) -> String {
    match size_of {
        Some(bytes) => format!("wrote {}: {what}, {}", path.display(), size(bytes)),
        None => format!("wrote {}: {what}", path.display()),
    }
}

/// Prints [`wrote_line`] for `path` on stderr.
pub(crate) fn wrote(path: &Path, what: &str) {
    let bytes = std::fs::metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len());
    // Nothing more can be done when stderr itself fails.
    let _ = writeln!(io::stderr(), "{}", wrote_line(path, what, bytes));
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
    fn sizes() {
        assert_eq!(size(1), "1 byte");
        assert_eq!(size(1023), "1023 bytes");
        assert_eq!(size(16_080), "15.7 KiB (16,080 bytes)");
        assert_eq!(size(1_234_567), "1.2 MiB (1,234,567 bytes)");
        assert_eq!(
            wrote_line(Path::new("out/t.svg"), "flame graph SVG", Some(2048)),
            "wrote out/t.svg: flame graph SVG, 2.0 KiB (2,048 bytes)"
        );
        assert_eq!(
            wrote_line(Path::new("/dev/null"), "pprof profile", None),
            "wrote /dev/null: pprof profile"
        );
    }
}
