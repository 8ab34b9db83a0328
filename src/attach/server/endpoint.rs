//! The endpoints: the Unix domain socket ([`Listener`]) and the TCP endpoint ([`TcpEndpoint`]),
//! each with its listening thread.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Profiler;
#[cfg(doc)]
use crate::ProfilerBuilder;
use crate::attach::stream::new_token;
use crate::record::untracked::Untracked;

#[cfg(doc)]
use super::serve::POLL;
use super::serve::{Served, info_of, listen};
use super::write::unix_now_ns;
use crate::attach::protocol::Info;

/// One listener per process: set while a session listens.
static LISTENING: AtomicBool = AtomicBool::new(false);

/// A listening socket and its thread; dropping it closes the socket, removes its file and
/// lets the thread end (without waiting for it: a recording being served ends within
/// [`POLL`]).
#[derive(Debug)]
pub(crate) struct Listener {
    path: PathBuf,
    /// The socket file's inode, so that only this listener's file is removed.
    inode: u64,
    stop: Arc<AtomicBool>,
}

impl Listener {
    /// Opens the process's socket and starts its thread, or says why not (another session of
    /// the process listens, the directory is not private, the socket cannot be bound).
    pub(crate) fn open(session: &Profiler) -> io::Result<Self> {
        let served = Served {
            session: session.downgrade(),
            start_unix_ns: unix_now_ns(),
            flight_bytes: session.flight_bytes(),
        };
        if LISTENING.swap(true, Ordering::AcqRel) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another session of this process listens already",
            ));
        }
        let opened = Self::bind(served);
        if opened.is_err() {
            LISTENING.store(false, Ordering::Release);
        }
        opened
    }

    fn bind(served: Served) -> io::Result<Self> {
        let _untracked = Untracked::enter();
        let dir = crate::attach::dir::private_dir()?;
        let path = dir.join(format!("{}.sock", std::process::id()));
        // A socket of this pid left by a process that died (the pid was reused).
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        let inode = std::fs::symlink_metadata(&path)?.ino();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("tickscope-listen".to_owned())
            .spawn(move || {
                listen(
                    || listener.accept().map(|(client, _)| client),
                    &served,
                    &thread_stop,
                    None,
                );
            })?;
        at_exit::register(&path);
        Ok(Self { path, inode, stop })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _untracked = Untracked::enter();
        self.stop.store(true, Ordering::Release);
        // Wakes the thread from `accept`: it sees `stop` and ends.
        let _ = UnixStream::connect(&self.path);
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
        at_exit::unregister(&self.path);
        LISTENING.store(false, Ordering::Release);
    }
}

/// A TCP endpoint ([`ProfilerBuilder::listen_tcp`]) and its thread: clients send its token
/// first. Dropping it lets the thread end and close the socket.
pub(crate) struct TcpEndpoint {
    /// The address bound (with the port chosen by the system for port 0).
    addr: SocketAddr,
    /// The token clients send first.
    token: String,
    stop: Arc<AtomicBool>,
    /// Its entry in the socket directory, `<pid>.tcp`, and the entry's inode (so that only
    /// this endpoint's entry is removed); `None` where it could not be written.
    entry: Option<(PathBuf, u64)>,
}

impl TcpEndpoint {
    /// Binds the first of `addrs` that can be bound, draws a token, prints both on stderr
    /// (once) and starts the thread; or says why not: an address that is not a loopback one
    /// unless `remote`, no address, no randomness, an address that cannot be bound.
    pub(crate) fn open(session: &Profiler, addrs: &[SocketAddr], remote: bool) -> io::Result<Self> {
        let _untracked = Untracked::enter();
        let Some(first) = addrs.first() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the address resolves to nothing",
            ));
        };
        if !remote && let Some(wide) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{wide} is not a loopback address (listen_tcp_any lets clients of other \
                     machines in)"
                ),
            ));
        }
        let token = new_token()?;
        let listener = TcpListener::bind(addrs)
            .map_err(|e| io::Error::new(e.kind(), format!("{first}: {e}")))?;
        let addr = listener.local_addr()?;
        let served = Served {
            session: session.downgrade(),
            start_unix_ns: unix_now_ns(),
            flight_bytes: session.flight_bytes(),
        };
        // What `tickscope ps` lists of the program (its session records by now).
        let info = session.recording().map(|r| info_of(&served, &r));
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread_token = token.clone();
        std::thread::Builder::new()
            .name("tickscope-listen-tcp".to_owned())
            .spawn(move || {
                let accept = || {
                    listener.accept().map(|(client, _)| {
                        // Control messages are small: each goes at once.
                        let _ = client.set_nodelay(true);
                        client
                    })
                };
                listen(accept, &served, &thread_stop, Some(&thread_token));
            })?;
        eprintln!("tickscope: listening on {addr}, token {token}");
        let entry = info.and_then(|info| Self::write_entry(addr, &info));
        Ok(Self {
            addr,
            token,
            stop,
            entry,
        })
    }

    /// Writes the endpoint's entry in the socket directory, for `tickscope ps`: its address
    /// and the program's `info`, never the token. Says on stderr, in one line, why it cannot.
    fn write_entry(addr: SocketAddr, info: &Info) -> Option<(PathBuf, u64)> {
        match crate::attach::dir::write_tcp_entry(addr, info) {
            Ok((path, inode)) => {
                at_exit::register(&path);
                Some((path, inode))
            }
            Err(e) => {
                eprintln!("tickscope: `tickscope ps` will not list the TCP endpoint: {e}");
                None
            }
        }
    }

    /// The address bound.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token clients send first.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }
}

impl std::fmt::Debug for TcpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the token: a debug print goes to logs.
        f.debug_struct("TcpEndpoint")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for TcpEndpoint {
    fn drop(&mut self) {
        let _untracked = Untracked::enter();
        self.stop.store(true, Ordering::Release);
        // Wakes the thread from `accept` (through loopback where the endpoint is bound to
        // every address): it sees `stop` and ends, closing the socket.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some((path, inode)) = &self.entry {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.ino() == *inode) {
                let _ = std::fs::remove_file(path);
            }
            at_exit::unregister(path);
        }
    }
}

/// Removing the sockets of listeners (and the entries of TCP endpoints) still open when the
/// process exits (`exit` runs no destructor of the session).
mod at_exit {
    use super::*;

    static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

    pub(super) fn register(path: &std::path::Path) {
        #[cfg(target_os = "linux")]
        {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                // SAFETY: `remove_sockets` is an `extern "C"` function without arguments that
                // never unwinds (it only tries a lock and removes files); `atexit` keeps the
                // pointer, which is valid for the life of the program.
                unsafe {
                    libc::atexit(remove_sockets);
                }
            });
        }
        if let Ok(mut paths) = PATHS.lock() {
            paths.push(path.to_owned());
        }
    }

    /// Forgets one registration of `path` (two TCP endpoints of one process register the
    /// same entry).
    pub(super) fn unregister(path: &std::path::Path) {
        if let Ok(mut paths) = PATHS.lock()
            && let Some(at) = paths.iter().position(|p| p == path)
        {
            paths.swap_remove(at);
        }
    }

    #[cfg(target_os = "linux")]
    extern "C" fn remove_sockets() {
        // Never blocks at exit: a lock held by a thread that `exit` interrupted is skipped.
        if let Ok(paths) = PATHS.try_lock() {
            for path in paths.iter() {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}
