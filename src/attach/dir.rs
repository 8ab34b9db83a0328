//! Where programs listen: one Unix domain socket per process, `<pid>.sock`, in a directory of
//! the user's own.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The directory of the current user's sockets: `$XDG_RUNTIME_DIR/tickscope` where
/// `XDG_RUNTIME_DIR` names a directory, else `tickscope-<uid>` in the temporary directory.
/// Nothing is created.
pub fn socket_dir() -> io::Result<PathBuf> {
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && runtime.is_absolute()
        && runtime.is_dir()
    {
        return Ok(runtime.join("tickscope"));
    }
    Ok(std::env::temp_dir().join(format!("tickscope-{}", uid()?)))
}

/// The socket a program of process `pid` listens on.
pub fn socket_path(pid: u32) -> io::Result<PathBuf> {
    Ok(socket_dir()?.join(format!("{pid}.sock")))
}

/// [`socket_dir`], created (mode 0700) when missing, and checked: a directory (not a link)
/// that this user owns and nobody else may enter.
#[cfg(feature = "enabled")]
pub(crate) fn private_dir() -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = socket_dir()?;
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(named(&dir, "cannot create", e)),
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| named(&dir, "cannot read", e))?;
    let me = uid()?;
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{}: not a private directory of user {me} (owner {}, mode {:o}): not listening",
                dir.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(dir)
}

#[cfg(feature = "enabled")]
fn named(path: &std::path::Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// The effective user id of this process.
fn uid() -> io::Result<u32> {
    // `/proc/self` belongs to the process's effective user on Linux; elsewhere a file this
    // process creates does.
    if cfg!(target_os = "linux")
        && let Ok(meta) = std::fs::metadata("/proc/self")
    {
        return Ok(meta.uid());
    }
    let probe = std::env::temp_dir().join(format!(".tickscope-uid-{}", std::process::id()));
    let file = std::fs::File::create(&probe)?;
    let uid = file.metadata()?.uid();
    drop(file);
    let _ = std::fs::remove_file(&probe);
    Ok(uid)
}
