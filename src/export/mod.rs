//! Writers for collected traces. Each one streams to any `io::Write`; the file variants on
//! [`Profiler`](crate::Profiler) write to a temporary file and rename it into place, so a failed
//! export never leaves a truncated file under the requested name, and gzip the output when the
//! path ends in `.gz` (`trace.json.gz` opens in ui.perfetto.dev as it is).

pub mod chrome;
#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod folded;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;

/// Writes `path` through `write`: into a temporary file beside it, renamed into place only when
/// everything was written and flushed. Gzipped when the path ends in `.gz`. Errors name the
/// path.
pub(crate) fn atomic_write(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let context = |e: io::Error, what: &str| {
        io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
    };
    let file_name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(&tmp)?);
        if path.extension().is_some_and(|e| e == "gz") {
            let mut gz = GzEncoder::new(out, Compression::fast());
            write(&mut gz)?;
            out = gz.finish()?;
        } else {
            write(&mut out)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    match result {
        Ok(()) => {
            std::fs::rename(&tmp, path).map_err(|e| context(e, "cannot rename the trace into"))
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(context(e, "cannot write"))
        }
    }
}

/// Writes `s` as a JSON string literal, quotes included.
pub(crate) fn json_str(out: &mut impl Write, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0..0x20 => None,
            _ => continue,
        };
        out.write_all(&bytes[start..i])?;
        match escape {
            Some(e) => out.write_all(e)?,
            None => write!(out, "\\u{b:04x}")?,
        }
        start = i + 1;
    }
    out.write_all(&bytes[start..])?;
    out.write_all(b"\"")
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_strings_are_escaped() {
        let mut out = Vec::new();
        super::json_str(&mut out, "a\"b\\c\nd\u{1}é").unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), r#""a\"b\\c\nd\u0001é""#);
    }
}
