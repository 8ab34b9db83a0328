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
        return Err(bomb(path, limit, gz.len() as u64));
    }
    Ok((out, cut))
}

/// A gzipped capture decompressed into a temporary file ([`gunzip_to_file`]).
#[cfg(all(target_os = "linux", feature = "enabled", feature = "gzip"))]
pub(super) struct Gunzipped {
    /// The temporary file, removed from its folder.
    pub(super) file: std::fs::File,
    /// Its length.
    pub(super) len: u64,
    /// The warning of a gzip stream cut short.
    pub(super) cut: Option<String>,
}

/// The gzipped capture file `gz` (of `len` bytes, read from its start) decompressed into a
/// temporary file of its own, with [`gunzip`]'s bound and its warning of a stream cut short:
/// the file is removed from its folder at once, and goes when the last handle to it closes,
/// so that the capture's records are read from it chunk by chunk, as from a plain file,
/// instead of held in memory. `None` when no temporary file can be made or written (its
/// folder is full): the capture is then decompressed into memory.
#[cfg(all(target_os = "linux", feature = "enabled", feature = "gzip"))]
pub(super) fn gunzip_to_file(
    gz: &std::fs::File,
    len: u64,
    path: &Path,
    on_read: &(dyn Fn(u64) + Sync),
) -> Option<Result<Gunzipped, ReadError>> {
    use std::io::{BufReader, Seek, SeekFrom, Write};
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};

    // Past a limit on the size of files (`ulimit -f`), writing would end the process
    // (`SIGXFSZ`): into memory then.
    if !file_size_unlimited() {
        return None;
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir();
    let temporary = dir.join(format!(
        ".tickscope-gunzip-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    // Made anew (never through a link or over a file there), readable by this user only, and
    // gone from the folder at once: nothing is left behind, whatever happens next.
    let mut out = std::fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .ok()?;
    if std::fs::remove_file(&temporary).is_err() {
        drop(out);
        let _ = std::fs::remove_file(&temporary);
        return None;
    }
    let limit = gzip_limit(usize::try_from(len).unwrap_or(usize::MAX));
    /// The compressed bytes read so far, told to `on_read`; and the error of reading them,
    /// kept apart from the decoder's (a damaged stream).
    struct Counted<'a, R> {
        inner: R,
        read: u64,
        on_read: &'a (dyn Fn(u64) + Sync),
        failed: Option<std::io::Error>,
    }
    impl<R: Read> Read for Counted<'_, R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf).inspect_err(|e| {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    self.failed = Some(std::io::Error::new(e.kind(), e.to_string()));
                }
            })?;
            self.read += n as u64;
            (self.on_read)(self.read);
            Ok(n)
        }
    }
    let mut source = gz;
    if let Err(e) = source.seek(SeekFrom::Start(0)) {
        return Some(Err(ReadError::io(Some(path), "cannot read", e)));
    }
    let counted = Counted {
        inner: BufReader::with_capacity(256 << 10, source),
        read: 0,
        on_read,
        failed: None,
    };
    let mut decoder = flate2::read::MultiGzDecoder::new(counted).take(limit.saturating_add(1));
    let mut buffer = vec![0u8; 256 << 10];
    let mut written = 0u64;
    let cut = loop {
        match decoder.read(&mut buffer) {
            Ok(0) => break None,
            Ok(n) => {
                if out.write_all(&buffer[..n]).is_err() {
                    // The folder is full (or failing): into memory, as without it.
                    return None;
                }
                written += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // The file could not be read: not a damaged stream.
            Err(_) if decoder.get_ref().get_ref().failed.is_some() => {
                let e = decoder
                    .get_mut()
                    .get_mut()
                    .failed
                    .take()
                    .expect("just seen");
                return Some(Err(ReadError::io(Some(path), "cannot read", e)));
            }
            Err(e) if written > 0 => {
                break Some(format!(
                    "the gzip stream ends early or is damaged ({e}) after {written} \
                     decompressed bytes: they are read as they are, as a file cut there"
                ));
            }
            Err(e) => return Some(Err(ReadError::io(Some(path), "cannot decompress", e))),
        }
    };
    if written > limit {
        return Some(Err(bomb(Some(path), limit, len)));
    }
    Some(Ok(Gunzipped {
        file: out,
        len: written,
        cut,
    }))
}

/// True when this process may write files of any size (no `RLIMIT_FSIZE`).
#[cfg(all(target_os = "linux", feature = "enabled", feature = "gzip"))]
pub(crate) fn file_size_unlimited() -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes the limit into `limit`, a valid `rlimit` this function owns,
    // and reads nothing but its arguments.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } == 0;
    got && limit.rlim_cur == libc::RLIM_INFINITY
}

/// The error of a gzipped input of `compressed` bytes that decompresses past `limit`.
#[cfg(feature = "gzip")]
fn bomb(path: Option<&Path>, limit: u64, compressed: u64) -> ReadError {
    ReadError {
        path: path.map(Path::to_path_buf),
        offset: None,
        what: format!(
            "gzipped, it decompresses to more than {limit} bytes ({GZIP_MAX_RATIO} times its \
             {compressed} bytes plus {} MiB): not read, as no capture compresses that well (a \
             gzip bomb?)",
            GZIP_ALLOWANCE >> 20
        ),
        io: None,
    }
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
