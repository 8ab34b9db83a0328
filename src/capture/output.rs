//! Putting a file in place whole: through a temporary file renamed over the target, or
//! straight into a device or FIFO. Capture files and every export are written this way; the
//! export module's [Files](crate::export#files) section says what each kind of path gets.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(feature = "gzip")]
use flate2::Compression;
#[cfg(feature = "gzip")]
use flate2::write::GzEncoder;

/// Symbolic links followed before giving up, as Linux does (`ELOOP`).
const MAX_LINKS: usize = 40;

/// Attempts at a fresh temporary name before giving up (each one is unique to this process;
/// only another process's leftovers can be in the way).
const MAX_TEMP_ATTEMPTS: usize = 1000;

/// Longest stretch of the target's name kept in the temporary name, so that a name near the
/// file system's limit still leaves room for the suffix.
const MAX_TEMP_STEM: usize = 100;

/// Numbers the temporary files of this process, so that concurrent writers never share one.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `path` through `write`, gzipped when the path ends in `.gz`. See the
/// [export docs](crate::export#files): a regular file (or a new one) is written to a unique temporary file
/// beside it, synced and renamed into place; symbolic links are followed to their target;
/// other existing files (devices, FIFOs) are written directly. Errors name the path and the
/// step that failed, and no temporary file survives them.
pub(crate) fn atomic_write(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let gz = path.extension().is_some_and(|e| e == "gz");
    if gz && !cfg!(feature = "gzip") {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "cannot write {}: tickscope was built without its `gzip` feature, which writes \
                 `.gz` files",
                path.display()
            ),
        ));
    }
    let (target, existing) = resolve(path).map_err(|e| context(path, path, "cannot open", e))?;
    let ctx = |what: &str, e: io::Error| context(path, &target, what, e);
    match existing {
        Some(meta) if !meta.is_file() => {
            let file = match OpenOptions::new().write(true).open(&target) {
                Ok(file) => file,
                Err(e) => return Err(ctx("cannot open", e)),
            };
            match file.metadata() {
                // Replaced by a regular file since it was looked at: write that atomically
                // rather than over its old content.
                Ok(now) if now.is_file() => {
                    drop(file);
                    replace(path, &target, Some(now), gz, write)
                }
                _ => write_direct(file, gz, write, &ctx),
            }
        }
        existing => replace(path, &target, existing, gz, write),
    }
}

/// Follows `path` through symbolic links to the file they end at, which may not exist yet (a
/// dangling link, or a new file). Returns that path and its metadata, `None` when it does not
/// exist.
fn resolve(path: &Path) -> io::Result<(PathBuf, Option<fs::Metadata>)> {
    let mut current = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        let meta = match fs::symlink_metadata(&current) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((current, None)),
            Err(e) => return Err(e),
        };
        if !meta.file_type().is_symlink() {
            return Ok((current, Some(meta)));
        }
        let link = fs::read_link(&current)?;
        current = match current.parent() {
            Some(dir) if link.is_relative() => dir.join(link),
            _ => link,
        };
    }
    // Let the system say it (ELOOP), as it would on opening the path.
    Err(fs::metadata(path).err().unwrap_or_else(|| {
        io::Error::other(format!("more than {MAX_LINKS} levels of symbolic links"))
    }))
}

/// `path`, and the file it resolved to when that differs, in an error: "`what` `path`: `e`".
fn context(path: &Path, target: &Path, what: &str, e: io::Error) -> io::Error {
    let name = if path.as_os_str().is_empty() {
        "\"\"".to_owned()
    } else if target == path {
        path.display().to_string()
    } else {
        format!("{} (-> {})", path.display(), target.display())
    };
    io::Error::new(e.kind(), format!("{what} {name}: {e}"))
}

/// Streams `write` into `file` (gzipped when `gz`), flushes everything and hands the file
/// back.
fn stream(
    file: File,
    gz: bool,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<File> {
    let mut out = BufWriter::with_capacity(1 << 16, file);
    #[cfg(feature = "gzip")]
    if gz {
        let mut enc = GzEncoder::new(out, Compression::fast());
        write(&mut enc)?;
        out = enc.finish()?;
        return out.into_inner().map_err(|e| e.into_error());
    }
    // Without the `gzip` feature, `atomic_write` refused `.gz` paths before getting here.
    #[cfg(not(feature = "gzip"))]
    let _ = gz;
    write(&mut out)?;
    out.into_inner().map_err(|e| e.into_error())
}

/// Writes straight into an existing file that is not a regular one (a device, a FIFO).
fn write_direct(
    file: File,
    gz: bool,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ctx: &dyn Fn(&str, io::Error) -> io::Error,
) -> io::Result<()> {
    let file = stream(file, gz, write).map_err(|e| ctx("cannot write", e))?;
    match file.sync_all() {
        // Pipes, sockets and most devices cannot be synced (EINVAL, or EROFS per fsync(2)):
        // there is nothing to make durable.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            Ok(())
        }
        r => r.map_err(|e| ctx("cannot sync", e)),
    }
}

/// Removes the temporary file on every way out (errors, and panics in the writer) unless
/// [`Temp::keep`] says it was renamed into place.
struct Temp {
    path: PathBuf,
    armed: bool,
}

impl Temp {
    fn keep(mut self) {
        self.armed = false;
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if self.armed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Creates a temporary file beside `target` under a name no one else uses: the process id and
/// a per-process counter, created exclusively so that another process's file is never reused.
fn create_temp(target: &Path, name: &OsStr) -> io::Result<(File, Temp)> {
    let name = name.to_string_lossy();
    let mut stem_len = name.len().min(MAX_TEMP_STEM);
    while !name.is_char_boundary(stem_len) {
        stem_len -= 1;
    }
    let stem = &name[..stem_len];
    let pid = std::process::id();
    let mut last = None;
    for _ in 0..MAX_TEMP_ATTEMPTS {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = target.with_file_name(OsString::from(format!(".{stem}.tmp{pid}.{n}")));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => {
                return Ok((
                    file,
                    Temp {
                        path: tmp,
                        armed: true,
                    },
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

/// Writes a regular (or new) file atomically: a temporary file beside `target`, flushed and
/// synced, then renamed over it.
fn replace(
    path: &Path,
    target: &Path,
    existing: Option<fs::Metadata>,
    gz: bool,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let ctx = |what: &str, e: io::Error| context(path, target, what, e);
    let Some(name) = target.file_name() else {
        let e = io::Error::new(io::ErrorKind::InvalidInput, "the path names no file");
        return Err(ctx("cannot write", e));
    };
    let (file, temp) = create_temp(target, name).map_err(|e| ctx("cannot create", e))?;
    if let Some(meta) = existing {
        // Keep the target's permission bits (a private trace stays private). The temporary
        // file is ours, so this only fails on odd file systems; its own default mode is fine.
        let _ = file.set_permissions(meta.permissions());
    }
    let file = stream(file, gz, write).map_err(|e| ctx("cannot write", e))?;
    file.sync_all().map_err(|e| ctx("cannot sync", e))?;
    drop(file);
    fs::rename(&temp.path, target).map_err(|e| ctx("cannot move the written file to", e))?;
    temp.keep();
    sync_dir(target);
    Ok(())
}

/// Makes the rename durable by syncing the directory that holds `target`, where the system
/// allows it. Best effort: the file is already in place.
fn sync_dir(target: &Path) {
    #[cfg(unix)]
    {
        let dir = match target.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        if let Ok(dir) = File::open(dir) {
            let _ = dir.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = target;
}
