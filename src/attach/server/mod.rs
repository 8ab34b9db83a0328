//! The program's side: a listening thread that answers one client at a time.
//!
//! Nothing here runs on the recording path. The thread sleeps in `accept` until a client
//! connects; a recording it serves is a nested session of its own (all threads), started and
//! stopped by the thread, beside the program's session, which goes on as if nothing
//! happened.
//!
//! The same serving code answers on the Unix domain socket ([`Listener`]) and on a TCP
//! endpoint ([`TcpEndpoint`]), where the client must first send the endpoint's token. The
//! two endpoints of a process serve one client at a time between them.

use std::io::{self, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Origin;
use super::protocol::{
    self, Command, End, INFO, Info, MESSAGE_VERSION, Message, Mode, PROTOCOL_VERSION, REQUEST,
    Request, STOP, TOKEN,
};
use super::stream::{Stream, new_token, same_bytes};
use crate::capture::Capture;
use crate::capture::format::{CHUNK_HEADER, ORIGIN, ORIGIN_LEN, ORIGIN_VERSION, padded};
use crate::record::sync::lock;
use crate::record::untracked::Untracked;
use crate::session::{Recording, WeakProfiler};
use crate::{Profiler, ProfilerBuilder};

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a write to a client may block before the client is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a recording looks for the client's `STOP`, its leaving, or the session's end.
const POLL: Duration = Duration::from_millis(50);

/// One listener per process: set while a session listens.
static LISTENING: AtomicBool = AtomicBool::new(false);

/// Held while a client is served: the Unix socket and a TCP endpoint serve one client at a
/// time between them (each recording is a nested session of every thread).
static SERVING: Mutex<()> = Mutex::new(());

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

/// What the listening thread knows of the session it serves.
struct Served {
    /// The session, while it lives.
    session: WeakProfiler,
    /// Unix nanoseconds at which the session started listening.
    start_unix_ns: u64,
    /// The flight recorder's window in bytes, if the session has one.
    flight_bytes: Option<usize>,
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
        let dir = super::dir::private_dir()?;
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
        Ok(Self { addr, token, stop })
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
    }
}

/// The thread: one client at a time, until `stop`. `accept` waits for the next client;
/// `token`: the token each client must send first (a TCP endpoint).
fn listen<S: Stream>(
    mut accept: impl FnMut() -> io::Result<S>,
    served: &Served,
    stop: &AtomicBool,
    token: Option<&str>,
) {
    let _untracked = Untracked::enter();
    loop {
        let client = accept();
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(client) = client else {
            // Out of descriptors, say: wait a little rather than spin.
            std::thread::sleep(POLL);
            continue;
        };
        let client: &dyn Stream = &client;
        // A client's misuse ends its connection, never the thread; nor may a bug here.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // A client that left is told nothing.
            if let Err(Ended::Error(e)) = serve(client, served, stop, token) {
                let _ = protocol::write_error(&mut &*client, &e);
                // What the client sent and the thread did not read would reset the
                // connection at its close, the error unread: read it first (a little).
                let _ = client.shutdown_write();
                let _ = client.set_read_timeout(Some(POLL));
                let _ = io::copy(&mut Read::take(client, 1 << 16), &mut io::sink());
            }
        }));
    }
}

/// Why a connection ends early: a message for the client, or nothing to say (it left).
enum Ended {
    Error(String),
    Gone,
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Error(e) => f.write_str(e),
            Self::Gone => f.write_str("the client left"),
        }
    }
}

impl From<io::Error> for Ended {
    fn from(_: io::Error) -> Self {
        // A write that failed: the client left, or stopped reading past the write timeout.
        Self::Gone
    }
}

/// The client's next message, within [`REQUEST_TIMEOUT`] (set by [`serve`]).
fn first_message(client: &dyn Stream) -> Result<Message, Ended> {
    match protocol::read_message(&mut &*client) {
        Ok(Some(message)) => Ok(message),
        Ok(None) => Err(Ended::Gone),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(Ended::Error(format!(
                "bad request: none came within {} s",
                REQUEST_TIMEOUT.as_secs()
            )))
        }
        Err(e) => Err(Ended::Error(format!("bad request: {e}"))),
    }
}

/// Checks the token a TCP client sends first (compared in constant time).
fn check_token(client: &dyn Stream, token: &str) -> Result<(), Ended> {
    let message = first_message(client)?;
    if message.kind != TOKEN {
        return Err(Ended::Error(format!(
            "token required: a TCP client sends the token the program printed first (type \
             {TOKEN}), not type {}",
            message.kind
        )));
    }
    if message.version != MESSAGE_VERSION || !same_bytes(&message.content, token.as_bytes()) {
        return Err(Ended::Error("wrong token".to_owned()));
    }
    Ok(())
}

fn serve(
    client: &dyn Stream,
    served: &Served,
    stop: &AtomicBool,
    token: Option<&str>,
) -> Result<(), Ended> {
    client.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    client.set_write_timeout(Some(WRITE_TIMEOUT))?;
    if let Some(token) = token {
        check_token(client, token)?;
    }
    let message = first_message(client)?;
    // One client at a time, whichever endpoint it came through.
    let _serving = lock(&SERVING);
    if stop.load(Ordering::Acquire) {
        return Err(Ended::Error("the program stopped listening".to_owned()));
    }
    serve_request(client, message, served, stop)
}

fn serve_request(
    client: &dyn Stream,
    message: Message,
    served: &Served,
    stop: &AtomicBool,
) -> Result<(), Ended> {
    if message.kind != REQUEST {
        return Err(Ended::Error(format!(
            "bad request: the first message must be a request (type {REQUEST}), not type {}",
            message.kind
        )));
    }
    if message.version != MESSAGE_VERSION {
        return Err(Ended::Error(format!(
            "bad request: request message version {} is not supported (the program speaks \
             version {MESSAGE_VERSION})",
            message.version
        )));
    }
    let request = Request::decode(&message.content).map_err(|e| Ended::Error(e.0))?;
    let Some(session) = served.session.upgrade() else {
        return Err(Ended::Error("the session has ended".to_owned()));
    };
    let Some(recording) = session.recording() else {
        return Err(Ended::Error("the session is stopped".to_owned()));
    };
    let duration_ms = match request.command {
        Command::Info => None,
        Command::Record { duration_ms } => Some(duration_ms),
        Command::Watch { interval_ms } => Some(interval_ms.max(MIN_INTERVAL_MS)),
    };
    if duration_ms == Some(0) && !recording.flight {
        return Err(Ended::Error(
            "the program runs no flight recorder: a window of 0 s holds nothing".to_owned(),
        ));
    }
    let attach_ns = unix_now_ns();
    // The live window starts before the answer (so that a client that has the program's
    // info knows that it records), and before the flight recorder's contents are taken,
    // which end where it starts: together they hold every record once.
    let live = duration_ms
        .filter(|&ms| ms > 0)
        .map(|_| ProfilerBuilder::new().listen(false).start());
    let live_start = live
        .as_ref()
        .and_then(Profiler::recording)
        .map(|r| r.start_tick);
    let info = Info {
        version: PROTOCOL_VERSION,
        mode: match recording {
            Recording { flight: true, .. } => Mode::Flight,
            Recording { stream: true, .. } => Mode::Stream,
            _ => Mode::Memory,
        },
        pid: std::process::id(),
        start_unix_ns: served.start_unix_ns,
        flight_bytes: served
            .flight_bytes
            .filter(|_| recording.flight)
            .unwrap_or(0) as u64,
        program: crate::Capture::empty().process_name().to_owned(),
    };
    let Some(duration_ms) = duration_ms else {
        // Let go of the session before answering: a client told that the program listens,
        // which then drops its session, finds the socket gone at once.
        drop(session);
        protocol::write_chunk(&mut &*client, INFO, MESSAGE_VERSION, &info.encode())?;
        return Ok(());
    };
    protocol::write_chunk(&mut &*client, INFO, MESSAGE_VERSION, &info.encode())?;
    let mut out = Counted::new(client);
    let mut sessions = 0;
    if matches!(request.command, Command::Watch { .. }) {
        drop(session);
        // A watch's interval is never 0: its live window runs.
        if let Some(live) = live {
            let windows = Windows {
                interval_ms: duration_ms,
                until: None,
                attach_ns,
            };
            sessions = windows.send(client, live, served, stop, &mut out)?;
        }
        return end(out, sessions);
    }
    if recording.flight {
        match Arc::try_unwrap(session.capture()) {
            Ok(mut window) => {
                if let Some(start) = live_start {
                    end_before(&mut window, start);
                }
                write_session(&window, Origin::Flight, attach_ns, &mut out)?;
            }
            // Never for a running session, whose snapshot is new: written as it is then.
            Err(shared) => write_session(&shared, Origin::Flight, attach_ns, &mut out)?,
        }
        sessions += 1;
    }
    // The thread holds no handle of the program's session while it waits.
    drop(session);
    if let Some(live) = live {
        // Sent a window at a time, so that the program holds at most a window's records
        // however long the client asks for.
        let windows = Windows {
            interval_ms: duration_ms.min(RECORD_WINDOW_MS),
            until: Some(Instant::now() + Duration::from_millis(duration_ms)),
            attach_ns,
        };
        sessions += windows.send(client, live, served, stop, &mut out)?;
    }
    end(out, sessions)
}

/// The `END` message, after `sessions` sessions.
fn end(mut out: Counted<'_>, sessions: u32) -> Result<(), Ended> {
    let end = End {
        sessions,
        bytes: out.bytes,
    };
    protocol::write_chunk(&mut out, protocol::END, MESSAGE_VERSION, &end.encode())?;
    out.flush()?;
    Ok(())
}

/// The longest window a recording holds in the program before sending it: a recording of
/// ten seconds is ten sessions of the capture file.
const RECORD_WINDOW_MS: u64 = 1000;

/// The shortest window a watch sends.
const MIN_INTERVAL_MS: u64 = 10;

/// Live windows sent back to back: each next window starts before the last one stops,
/// which ends just before it, so that every record is in one window.
struct Windows {
    interval_ms: u64,
    /// When the last window ends (a recording); `None`: at the client's `STOP` (a watch).
    until: Option<Instant>,
    attach_ns: u64,
}

impl Windows {
    /// Sends the windows of `live` and its successors until `until`, the client's `STOP`, the
    /// program's session ending or this listener closing; returns how many.
    fn send(
        &self,
        client: &dyn Stream,
        mut live: Profiler,
        served: &Served,
        stop: &AtomicBool,
        out: &mut Counted<'_>,
    ) -> Result<u32, Ended> {
        let mut sessions = 0;
        out.flush()?;
        let mut deadline = Instant::now();
        loop {
            deadline += Duration::from_millis(self.interval_ms);
            if let Some(until) = self.until {
                deadline = deadline.min(until);
            }
            let ended = wait(client, deadline, served, stop)?
                || self.until.is_some_and(|until| deadline >= until);
            let next = (!ended).then(|| ProfilerBuilder::new().listen(false).start());
            live.stop();
            let capture = live.capture();
            // The session's own hold on its capture goes with it.
            drop(live);
            let next_start = next
                .as_ref()
                .and_then(Profiler::recording)
                .map(|r| r.start_tick);
            match Arc::try_unwrap(capture) {
                Ok(mut window) => {
                    if let Some(start) = next_start {
                        end_before(&mut window, start);
                    }
                    write_session(&window, Origin::Live, self.attach_ns, out)?;
                }
                Err(shared) => write_session(&shared, Origin::Live, self.attach_ns, out)?,
            }
            out.flush()?;
            sessions += 1;
            match next {
                Some(next) => live = next,
                None => return Ok(sessions),
            }
        }
    }
}

/// Waits until `deadline`, the client's `STOP`, or the program's session ending (or this
/// listener closing): `Ok(true)` for these last three, `Ok(false)` at the deadline; `Err`
/// when the client leaves or misbehaves.
fn wait(
    client: &dyn Stream,
    deadline: Instant,
    served: &Served,
    stop: &AtomicBool,
) -> Result<bool, Ended> {
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Acquire)
            || served
                .session
                .upgrade()
                .is_none_or(|s| s.recording().is_none())
        {
            return Ok(true);
        }
        if now >= deadline {
            return Ok(false);
        }
        client.set_read_timeout(Some((deadline - now).min(POLL)))?;
        match client.read_bytes(&mut buf) {
            Ok(0) => return Err(Ended::Gone),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(Ended::Gone),
        }
        match protocol::parse(&got) {
            Ok(Some((message, _))) if message.kind == STOP => return Ok(true),
            Ok(Some((message, _))) => {
                return Err(Ended::Error(format!(
                    "bad message: type {} while recording (only a stop, type {STOP}, may come)",
                    message.kind
                )));
            }
            Ok(None) => {}
            Err(e) => return Err(Ended::Error(format!("bad message: {e}"))),
        }
    }
}

/// A buffered writer to the client that counts the bytes.
struct Counted<'a> {
    out: BufWriter<&'a dyn Stream>,
    bytes: u64,
}

impl<'a> Counted<'a> {
    fn new(client: &'a dyn Stream) -> Self {
        Self {
            out: BufWriter::with_capacity(64 << 10, client),
            bytes: 0,
        }
    }
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Writes `capture` as one session with an `ORIGIN` chunk after its header.
pub(crate) fn write_session(
    capture: &Capture,
    origin: Origin,
    attach_ns: u64,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut content = Vec::with_capacity(ORIGIN_LEN);
    content.extend_from_slice(&origin.code().to_le_bytes());
    content.extend_from_slice(&0u32.to_le_bytes());
    content.extend_from_slice(&attach_ns.to_le_bytes());
    let mut chunk = Vec::new();
    protocol::write_chunk(&mut chunk, ORIGIN, ORIGIN_VERSION, &content)?;
    let mut spliced = AfterHeader {
        out,
        extra: Some(chunk),
        seen: 0,
        head: Vec::with_capacity(CHUNK_HEADER),
        header_end: None,
    };
    capture.write_to(&mut spliced)?;
    Ok(())
}

/// A writer that inserts `extra` after the first chunk written through it.
struct AfterHeader<'a> {
    out: &'a mut dyn Write,
    extra: Option<Vec<u8>>,
    /// Bytes written so far.
    seen: u64,
    /// The first chunk's header, while incomplete.
    head: Vec<u8>,
    /// Where the first chunk ends, once its header is known.
    header_end: Option<u64>,
}

impl Write for AfterHeader<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(extra) = &self.extra else {
            return self.out.write(buf);
        };
        let mut rest = buf;
        if self.header_end.is_none() {
            let take = (CHUNK_HEADER - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..take]);
            if self.head.len() == CHUNK_HEADER {
                let mut len = [0u8; 8];
                len.copy_from_slice(&self.head[8..16]);
                self.header_end = Some(CHUNK_HEADER as u64 + padded(u64::from_le_bytes(len)));
            }
        }
        if let Some(end) = self.header_end {
            let before = usize::try_from(end.saturating_sub(self.seen))
                .unwrap_or(usize::MAX)
                .min(rest.len());
            self.out.write_all(&rest[..before])?;
            self.seen += before as u64;
            rest = &rest[before..];
            if self.seen == end {
                self.out.write_all(extra)?;
                self.extra = None;
            }
            self.out.write_all(rest)?;
        } else {
            self.out.write_all(rest)?;
        }
        self.seen += rest.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Ends `capture`'s window just before tick `start` (where another window starts).
pub(crate) fn end_before(capture: &mut Capture, start: u64) {
    capture.end_tick = capture.end_tick.min(start.saturating_sub(1));
}

/// Unix nanoseconds now (0 before 1970).
pub(crate) fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Removing the sockets of listeners still open when the process exits (`exit` runs no
/// destructor of the session).
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

    pub(super) fn unregister(path: &std::path::Path) {
        if let Ok(mut paths) = PATHS.lock() {
            paths.retain(|p| p != path);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attach::origins;

    #[test]
    fn tcp_is_loopback_only_unless_widened() {
        let prof = crate::Profiler::builder().current_thread().start();
        for wide in ["10.0.0.1:0", "0.0.0.0:7000", "[::]:0"] {
            let addr: SocketAddr = wide.parse().unwrap();
            let e = TcpEndpoint::open(&prof, &[addr], false).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
            assert_eq!(
                e.to_string(),
                format!(
                    "{addr} is not a loopback address (listen_tcp_any lets clients of other \
                     machines in)"
                )
            );
        }
        // One wide address among loopback ones is refused too.
        let mixed: Vec<SocketAddr> = vec![
            "127.0.0.1:0".parse().unwrap(),
            "10.0.0.1:0".parse().unwrap(),
        ];
        assert!(TcpEndpoint::open(&prof, &mixed, false).is_err());
        assert_eq!(
            TcpEndpoint::open(&prof, &[], false)
                .unwrap_err()
                .to_string(),
            "the address resolves to nothing"
        );
        let open = TcpEndpoint::open(&prof, &["127.0.0.1:0".parse().unwrap()], false).unwrap();
        assert!(open.addr().ip().is_loopback() && open.addr().port() != 0);
        assert_eq!(open.token().len(), 32);
        assert!(!format!("{open:?}").contains(open.token()));
    }

    #[test]
    fn origin_follows_each_header() {
        let prof = crate::Profiler::builder().current_thread().start();
        for _ in 0..3 {
            let _g = crate::scope!("step");
        }
        prof.stop();
        let capture = prof.capture();
        let mut plain = Vec::new();
        capture.write_to(&mut plain).unwrap();
        let mut bytes = Vec::new();
        write_session(&capture, Origin::Flight, 11, &mut bytes).unwrap();
        write_session(&capture, Origin::Live, 12, &mut bytes).unwrap();
        bytes.extend_from_slice(&plain);
        assert_eq!(
            bytes.len(),
            plain.len() * 3 + 2 * (CHUNK_HEADER + ORIGIN_LEN)
        );
        assert_eq!(
            origins(&bytes),
            vec![Some((Origin::Flight, 11)), Some((Origin::Live, 12)), None]
        );
        let read = Capture::from_bytes(&bytes).unwrap();
        assert_eq!(read.len(), 3);
        for session in &read {
            assert_eq!(session.warnings(), &[] as &[String]);
            assert_eq!(session.record_count(), 6);
        }
    }
}
