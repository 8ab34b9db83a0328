//! Gzipped captures: sniffed by their magic, decompressed within a bound (a gzip bomb is an
//! error).

#[cfg(feature = "gzip")]
use std::io::Read;
use std::path::Path;

use super::errors::ReadError;
#[cfg(feature = "gzip")]
use crate::capture::format::{GZIP_ALLOWANCE, GZIP_MAX_RATIO};

/// True when `bytes` start with the gzip magic.
pub(super) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// The most bytes a gzipped input of `compressed` bytes may decompress to:
/// [`GZIP_MAX_RATIO`] times its size plus [`GZIP_ALLOWANCE`].
#[cfg(feature = "gzip")]
fn gzip_limit(compressed: usize) -> u64 {
    (compressed as u64)
        .saturating_mul(GZIP_MAX_RATIO)
        .saturating_add(GZIP_ALLOWANCE)
}

/// `gz` decompressed (every gzip member, one after the other), unless it decompresses to more
/// than [`gzip_limit`] allows: an error then, once that much is decompressed (not more).
///
/// A stream cut short (a `.tscope.gz` of a program killed while writing it, or truncated) or
/// damaged past its start gives the bytes decompressed before the problem, and a warning that
/// says so (the second value): they are read as a plain file cut there would be. A stream that
/// gives no byte at all is an error.
#[cfg(feature = "gzip")]
pub(super) fn gunzip(
    gz: &[u8],
    path: Option<&Path>,
) -> Result<(Vec<u8>, Option<String>), ReadError> {
    let limit = gzip_limit(gz.len());
    let mut out = Vec::new();
    let result = flate2::read::MultiGzDecoder::new(gz)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out);
    let cut = match result {
        Ok(_) => None,
        // `read_to_end` keeps what was read before the error.
        Err(e) if !out.is_empty() => Some(format!(
            "the gzip stream ends early or is damaged ({e}) after {} decompressed bytes: they \
             are read as they are, as a file cut there",
            out.len()
        )),
        Err(e) => return Err(ReadError::io(path, "cannot decompress", e)),
    };
    if out.len() as u64 > limit {
        return Err(ReadError {
            path: path.map(Path::to_path_buf),
            offset: None,
            what: format!(
                "gzipped, it decompresses to more than {limit} bytes ({GZIP_MAX_RATIO} times its \
                 {} bytes plus {} MiB): not read, as no capture compresses that well (a gzip \
                 bomb?)",
                gz.len(),
                GZIP_ALLOWANCE >> 20
            ),
            io: None,
        });
    }
    Ok((out, cut))
}

/// Without the `gzip` feature a gzipped capture is an error that says so.
#[cfg(not(feature = "gzip"))]
pub(super) fn gunzip(
    _gz: &[u8],
    path: Option<&Path>,
) -> Result<(Vec<u8>, Option<String>), ReadError> {
    Err(ReadError {
        path: path.map(Path::to_path_buf),
        offset: None,
        what: "gzipped, and tickscope was built without its `gzip` feature, which reads gzipped \
               captures"
            .to_owned(),
        io: None,
    })
}
