//! Where programs listen: one Unix domain socket per process, `<pid>.sock`, in a directory of
//! the user's own; beside it, for a program with a TCP endpoint
//! ([`ProfilerBuilder::listen_tcp`](crate::ProfilerBuilder::listen_tcp)), its entry
//! `<pid>.tcp` (mode 0600): the address bound, a newline, and the program's info as its
//! socket answers it ([`Info::encode`]). Never the token: the entry lets `tickscope ps` list
//! the endpoint, not attach to it.

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::protocol::Info;

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
    Ok(socket_path_in(&socket_dir()?, pid))
}

/// The socket of process `pid` in `dir`.
pub(crate) fn socket_path_in(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.sock"))
}

/// The entry of the TCP endpoint of process `pid`, in `dir`.
pub(crate) fn tcp_entry(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.tcp"))
}

/// Writes this process's TCP entry: `addr` and `info`, into [`private_dir`], whole or not at
/// all (written beside it, then renamed into place). Returns its path and inode.
#[cfg(feature = "enabled")]
pub(crate) fn write_tcp_entry(addr: SocketAddr, info: &Info) -> io::Result<(PathBuf, u64)> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = private_dir()?;
    let pid = std::process::id();
    let path = tcp_entry(&dir, pid);
    let temporary = dir.join(format!(".{pid}.tcp.new"));
    let mut content = format!("{addr}\n").into_bytes();
    content.extend_from_slice(&info.encode());
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| file.write_all(&content))
        .and_then(|()| std::fs::rename(&temporary, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(named(&path, "cannot write", e));
    }
    let inode = std::fs::symlink_metadata(&path)
        .map_err(|e| named(&path, "cannot read", e))?
        .ino();
    Ok((path, inode))
}

/// The address and the info of a TCP entry's `content`; `Err` says what is wrong with it.
pub(crate) fn parse_tcp_entry(content: &[u8]) -> Result<(SocketAddr, Info), String> {
    let at = content
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("not a TCP entry of tickscope (no address line)")?;
    let addr = std::str::from_utf8(&content[..at])
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or("not a TCP entry of tickscope (its first line is no address)")?;
    let info = Info::decode(&content[at + 1..]).map_err(|e| e.0)?;
    Ok((addr, info))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attach::protocol::{Mode, PROTOCOL_VERSION};

    #[test]
    fn tcp_entries_read_back_and_garbage_says_why() {
        let info = Info {
            version: PROTOCOL_VERSION,
            mode: Mode::Flight,
            pid: 4242,
            start_unix_ns: 7,
            flight_bytes: 4 << 20,
            program: "service".to_owned(),
        };
        let addr: SocketAddr = "127.0.0.1:40123".parse().unwrap();
        let mut entry = b"127.0.0.1:40123\n".to_vec();
        entry.extend_from_slice(&info.encode());
        assert_eq!(parse_tcp_entry(&entry), Ok((addr, info.clone())));
        let v6: SocketAddr = "[::1]:7000".parse().unwrap();
        let mut entry = b"[::1]:7000\n".to_vec();
        entry.extend_from_slice(&info.encode());
        assert_eq!(parse_tcp_entry(&entry), Ok((v6, info)));
        assert_eq!(
            parse_tcp_entry(b"127.0.0.1:40123"),
            Err("not a TCP entry of tickscope (no address line)".to_owned())
        );
        assert_eq!(
            parse_tcp_entry(b"hello\nworld"),
            Err("not a TCP entry of tickscope (its first line is no address)".to_owned())
        );
        assert_eq!(
            parse_tcp_entry(b"127.0.0.1:1\n"),
            Err("the program's info is too short".to_owned())
        );
    }
}
