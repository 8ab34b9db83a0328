//! The binary block (every scope as varint columns, gzipped) and the escapes that keep
//! the blocks inside their `<script>` elements.

use std::io::{self, Write};

use crate::trace::Trace;

use super::names::Names;

/// `ns` (since the Unix epoch) from the trace's start.
pub(super) fn rel(trace: &Trace, ns: u64) -> i64 {
    (i128::from(ns) - i128::from(trace.start_ns)).clamp(i128::from(i64::MIN), i128::from(i64::MAX))
        as i64
}

/// Every scope of every thread as four varint columns (see the module docs), gzipped when the
/// `gzip` feature is on: the bytes, whether gzipped, and the length before compression.
pub(super) fn spans_blob(trace: &Trace, names: &mut Names) -> (Vec<u8>, bool, usize) {
    let scopes: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
    let mut cols: [Vec<u8>; 4] = std::array::from_fn(|_| Vec::with_capacity(scopes * 2));
    for thread in &trace.threads {
        let mut last_child_end: Vec<Option<i64>> = vec![None; thread.spans.len()];
        let mut last_root_end = 0i64;
        for (i, span) in thread.spans.iter().enumerate() {
            let start = rel(trace, span.start_ns);
            // The duration the table counts (overhead compensation applied), so that the
            // report's histograms agree with its rows.
            let duration = span.duration_ns().min(i64::MAX as u64);
            let end = start.saturating_add(duration as i64);
            let parent = span.parent.map(|p| p as usize).filter(|&p| p < i);
            let reference = match parent {
                Some(p) => {
                    last_child_end[p].unwrap_or_else(|| rel(trace, thread.spans[p].start_ns))
                }
                None => last_root_end,
            };
            varint(&mut cols[0], u64::from(names.of(span.callsite)));
            varint(&mut cols[1], parent.map_or(0, |p| (i - p) as u64));
            varint(&mut cols[2], zigzag(start.wrapping_sub(reference)));
            varint(&mut cols[3], duration);
            match parent {
                Some(p) => last_child_end[p] = Some(end),
                None => last_root_end = end,
            }
        }
    }
    let raw_len: usize = cols.iter().map(Vec::len).sum();
    let mut raw = Vec::with_capacity(raw_len + 32);
    for col in &cols {
        varint(&mut raw, col.len() as u64);
    }
    for col in cols {
        raw.extend_from_slice(&col);
    }
    compress(raw)
}

#[cfg(feature = "gzip")]
pub(super) fn compress(raw: Vec<u8>) -> (Vec<u8>, bool, usize) {
    use flate2::Compression;
    use flate2::write::GzEncoder;
    let len = raw.len();
    let mut enc = GzEncoder::new(Vec::with_capacity(len / 3 + 64), Compression::fast());
    // Writing into a `Vec` cannot fail.
    match enc.write_all(&raw).and_then(|()| enc.finish()) {
        Ok(gz) => (gz, true, len),
        Err(_) => (raw, false, len),
    }
}

#[cfg(not(feature = "gzip"))]
pub(super) fn compress(raw: Vec<u8>) -> (Vec<u8>, bool, usize) {
    let len = raw.len();
    (raw, false, len)
}

pub(super) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// A comma before every item of a list but the first (`i`: the item's index).
pub(super) fn sep(j: &mut String, i: usize) {
    if i > 0 {
        j.push(',');
    }
}

/// `json` made safe inside a `<script>` element: `<`, `>` and `&` (which only occur in
/// strings) and the line separators JavaScript once refused in strings become `\u` escapes.
pub(super) fn script_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// `s` as HTML text.
pub(super) fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes `bytes` in base64 (standard alphabet, padded), in lines of 4096 characters.
pub(super) fn base64(bytes: &[u8], out: &mut (impl Write + ?Sized)) -> io::Result<()> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut line = Vec::with_capacity(4097);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        line.push(ALPHABET[(n >> 18) as usize & 63]);
        line.push(ALPHABET[(n >> 12) as usize & 63]);
        line.push(if chunk.len() > 1 {
            ALPHABET[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        line.push(if chunk.len() > 2 {
            ALPHABET[n as usize & 63]
        } else {
            b'='
        });
        if line.len() >= 4096 {
            line.push(b'\n');
            out.write_all(&line)?;
            line.clear();
        }
    }
    out.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::{base64, script_safe, varint, zigzag};

    #[test]
    fn base64_pads() {
        let enc = |b: &[u8]| {
            let mut out = Vec::new();
            base64(b, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(enc(b""), "");
        assert_eq!(enc(b"f"), "Zg==");
        assert_eq!(enc(b"fo"), "Zm8=");
        assert_eq!(enc(b"foo"), "Zm9v");
        assert_eq!(enc(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn varints_and_zigzag() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
    }

    #[test]
    fn script_blocks_cannot_be_closed() {
        assert_eq!(
            script_safe(r#"["</script>&\u2028"]"#),
            r#"["\u003c/script\u003e\u0026\u2028"]"#
        );
        assert_eq!(script_safe("\u{2028}"), "\\u2028");
    }
}
