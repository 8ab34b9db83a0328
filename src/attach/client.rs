//! The client's side: listing the programs that listen, asking one for its info or a capture.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::protocol::{
    self, Command, END, ERROR, End, INFO, Info, MESSAGE_VERSION, Message, REQUEST, Request, STOP,
    TOKEN,
};
use super::stream::Stream;

/// How long a program may take to answer a request for its info.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a recording client looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);
/// How long past the window's end a program may take to send it.
const GRACE: Duration = Duration::from_secs(60);

/// Why an attach failed: one line, for stderr.
#[non_exhaustive]
#[derive(Debug)]
pub enum AttachError {
    /// No program listens on the socket (none of that pid, or it does not listen).
    NotListening {
        /// The socket tried.
        path: PathBuf,
    },
    /// The socket belongs to another user.
    PermissionDenied {
        /// The socket tried.
        path: PathBuf,
    },
    /// The program answered with an error, or something that is not the protocol.
    Protocol(String),
    /// Reading, writing or the output file failed.
    Io(String),
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotListening { path } => write!(
                f,
                "{}: no program listens there (is it running, with listen(true) or \
                 TICKSCOPE_LISTEN=1, as this user?)",
                path.display()
            ),
            Self::PermissionDenied { path } => write!(
                f,
                "{}: permission denied (the program runs as another user)",
                path.display()
            ),
            Self::Protocol(e) | Self::Io(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for AttachError {}

fn io_error(what: &str, e: &io::Error) -> AttachError {
    match e.kind() {
        io::ErrorKind::InvalidData => AttachError::Protocol(format!("{what}: {e}")),
        _ => AttachError::Io(format!("{what}: {e}")),
    }
}

/// A program that listens, as `tickscope ps` lists it.
#[non_exhaustive]
#[derive(Debug)]
pub struct Program {
    /// Its socket; for a program that listens on TCP only, its TCP entry in
    /// [`socket_dir`](super::socket_dir) (`<pid>.tcp`).
    pub path: PathBuf,
    /// What it said of itself (a program that listens on TCP only: what its TCP entry says),
    /// or why it could not be asked.
    pub info: Result<Info, AttachError>,
    /// The address of its TCP endpoint
    /// ([`ProfilerBuilder::listen_tcp`](crate::ProfilerBuilder::listen_tcp)), from its
    /// entry in the socket directory; `None` without one. Attaching there takes the token the
    /// program printed, which no entry holds.
    pub tcp: Option<SocketAddr>,
}

/// How long [`list`] waits for a TCP endpoint to take a connection, to tell a live one from
/// the entry of a program that was killed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The programs of the current user that listen, on their socket or a TCP endpoint, by pid.
/// Sockets nobody listens on any more (left by a program that was killed) are removed, and so
/// are TCP entries whose endpoint refuses connections.
pub fn list() -> io::Result<Vec<Program>> {
    let dir = super::socket_dir()?;
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    };
    // Per pid: whether it has a socket, and whether a TCP entry.
    let mut pids: BTreeMap<u32, (bool, bool)> = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let (pid, socket) = match (name.strip_suffix(".sock"), name.strip_suffix(".tcp")) {
            (Some(pid), _) => (pid, true),
            (None, Some(pid)) => (pid, false),
            (None, None) => continue,
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let has = pids.entry(pid).or_default();
        if socket {
            has.0 = true;
        } else {
            has.1 = true;
        }
    }
    let mut programs = Vec::new();
    for (pid, (socket, tcp)) in pids {
        let entry = super::dir::tcp_entry(&dir, pid);
        let tcp = if tcp { tcp_entry(&entry, pid) } else { None };
        let tcp_addr = tcp.as_ref().and_then(|t| t.as_ref().ok()).map(|(a, _)| *a);
        if socket {
            let path = super::socket_path_in(&dir, pid);
            match info_at(&path) {
                Err(AttachError::NotListening { .. }) => {
                    let _ = std::fs::remove_file(&path);
                }
                info => {
                    programs.push(Program {
                        path,
                        info,
                        tcp: tcp_addr,
                    });
                    continue;
                }
            }
        }
        // No socket answers: the program listens on TCP only (or its entry is not one).
        if let Some(tcp) = tcp {
            programs.push(Program {
                path: entry,
                info: tcp.map(|(_, info)| info),
                tcp: tcp_addr,
            });
        }
    }
    programs.sort_by_key(|p| p.info.as_ref().map_or(u32::MAX, |i| i.pid));
    Ok(programs)
}

/// The TCP entry at `path`, of process `pid`: its address and info, or why it is not one;
/// `None` when it is gone, or its endpoint refuses connections (its program was killed: the
/// entry is removed).
fn tcp_entry(path: &Path, pid: u32) -> Option<Result<(SocketAddr, Info), AttachError>> {
    let content = match std::fs::read(path) {
        Ok(content) => content,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => return Some(Err(io_error(&path.display().to_string(), &e))),
    };
    let (addr, info) = match super::dir::parse_tcp_entry(&content) {
        Ok(entry) => entry,
        Err(e) => {
            return Some(Err(AttachError::Protocol(format!(
                "{}: {e}",
                path.display()
            ))));
        }
    };
    if info.pid != pid {
        return Some(Err(AttachError::Protocol(format!(
            "{}: the entry is of pid {}",
            path.display(),
            info.pid
        ))));
    }
    // A program that is gone: its entry goes, whatever listens on its port now.
    #[cfg(target_os = "linux")]
    if !Path::new(&format!("/proc/{pid}")).exists() {
        let _ = std::fs::remove_file(path);
        return None;
    }
    // An endpoint bound to every address takes connections on loopback.
    let mut probe = addr;
    if probe.ip().is_unspecified() {
        probe.set_ip(match probe {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    match TcpStream::connect_timeout(&probe, PROBE_TIMEOUT) {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            let _ = std::fs::remove_file(path);
            None
        }
        // Taken (closed at once, without a token: the program reads nothing more of it), or
        // no answer in time: listed.
        _ => Some(Ok((addr, info))),
    }
}

/// What the program of process `pid` says of itself.
pub fn info(pid: u32) -> Result<Info, AttachError> {
    let path = super::socket_path(pid).map_err(|e| io_error("the socket directory", &e))?;
    info_at(&path)
}

/// Where a program listens: its Unix domain socket, or a TCP endpoint
/// ([`ProfilerBuilder::listen_tcp`](crate::ProfilerBuilder::listen_tcp)) and its token.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix domain socket ([`socket_path`](super::socket_path)).
    Socket(PathBuf),
    /// A TCP endpoint: `host:port`, and the token the program printed on stderr, which the
    /// client sends first.
    Tcp {
        /// `host:port`.
        addr: String,
        /// The token.
        token: String,
    },
}

/// Connects to `endpoint`, sending the token first over TCP.
fn connect(endpoint: &Endpoint) -> Result<Box<dyn Stream>, AttachError> {
    match endpoint {
        Endpoint::Socket(path) => Ok(Box::new(connect_socket(path)?)),
        Endpoint::Tcp { addr, token } => {
            let stream = connect_tcp(addr)?;
            let mut out: &dyn Stream = &stream;
            stream
                .set_write_timeout(Some(ANSWER_TIMEOUT))
                .and_then(|()| {
                    protocol::write_chunk(&mut out, TOKEN, MESSAGE_VERSION, token.as_bytes())
                })
                .map_err(|e| io_error("sending the token", &e))?;
            Ok(Box::new(stream))
        }
    }
}

fn connect_tcp(addr: &str) -> Result<TcpStream, AttachError> {
    let addrs = addr
        .to_socket_addrs()
        .map_err(|e| AttachError::Io(format!("{addr}: {e}")))?;
    let mut last = None;
    for to in addrs {
        match TcpStream::connect_timeout(&to, ANSWER_TIMEOUT) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) if e.kind() == io::ErrorKind::ConnectionRefused => AttachError::Io(format!(
            "{addr}: no program listens there (connection refused)"
        )),
        Some(e) => AttachError::Io(format!("{addr}: {e}")),
        None => AttachError::Io(format!("{addr}: the address resolves to nothing")),
    })
}

fn connect_socket(path: &Path) -> Result<UnixStream, AttachError> {
    UnixStream::connect(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => AttachError::NotListening {
            path: path.to_owned(),
        },
        io::ErrorKind::PermissionDenied => AttachError::PermissionDenied {
            path: path.to_owned(),
        },
        _ => io_error(&path.display().to_string(), &e),
    })
}

fn info_at(path: &Path) -> Result<Info, AttachError> {
    let stream = connect_socket(path)?;
    let mut stream: &dyn Stream = &stream;
    timeouts(stream, ANSWER_TIMEOUT)?;
    send(stream, Request::new(Command::Info))?;
    read_info(&mut stream)
}

/// Sets `stream`'s timeouts: a read gives up after `read` (the wait for an answer, or for
/// the next check of a stop), a write after [`ANSWER_TIMEOUT`].
fn timeouts(stream: &dyn Stream, read: Duration) -> Result<(), AttachError> {
    stream
        .set_read_timeout(Some(read))
        .and_then(|()| stream.set_write_timeout(Some(ANSWER_TIMEOUT)))
        .map_err(|e| io_error("the socket", &e))
}

fn send(mut stream: &dyn Stream, request: Request) -> Result<(), AttachError> {
    protocol::write_chunk(&mut stream, REQUEST, MESSAGE_VERSION, &request.encode())
        .map_err(|e| io_error("sending the request", &e))
}

/// The next message, `Err` when the connection ends before it, inside it, or with an error.
fn next(r: &mut dyn Read) -> Result<Message, AttachError> {
    match protocol::read_message(r) {
        Ok(Some(message)) if message.kind == ERROR => Err(AttachError::Protocol(format!(
            "the program says: {}",
            protocol::error_text(&message.content)
        ))),
        Ok(Some(message)) => Ok(message),
        Ok(None) => Err(AttachError::Protocol(
            "the program closed the connection without answering".to_owned(),
        )),
        // Its session ended as the request came.
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Err(AttachError::Protocol(
            "the program closed the connection without answering".to_owned(),
        )),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(AttachError::Protocol(
                "the program did not answer in time".to_owned(),
            ))
        }
        Err(e) => Err(io_error("reading the answer", &e)),
    }
}

fn read_info(r: &mut dyn Read) -> Result<Info, AttachError> {
    let message = next(r)?;
    if message.kind != INFO {
        return Err(AttachError::Protocol(format!(
            "the program answered with a message of type {}, not its info (type {INFO})",
            message.kind
        )));
    }
    Info::decode(&message.content).map_err(|e| AttachError::Protocol(e.0))
}

/// What [`record`] wrote.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The program's description.
    pub info: Info,
    /// Sessions written (the flight recorder's window, the live window).
    pub sessions: u32,
    /// Bytes written.
    pub bytes: u64,
    /// From the connection to the first byte of capture data.
    pub first_data: Option<Duration>,
    /// The window was ended early by `stop`.
    pub stopped: bool,
}

/// Records the program of process `pid` for `duration` (zero: the flight recorder's window
/// alone) into the capture file `out`; `stop` set meanwhile ends the window early (what was
/// recorded up to then is still written whole). The file appears whole or not at all: it is
/// written beside as `<out>.part` and renamed at the end.
pub fn record(
    pid: u32,
    duration: Duration,
    out: &Path,
    stop: &AtomicBool,
) -> Result<Recorded, AttachError> {
    let path = super::socket_path(pid).map_err(|e| io_error("the socket directory", &e))?;
    record_at(&path, duration, out, stop, &mut |_| {})
}

/// [`record`] through the socket at `socket`, calling `attached` with the program's info as
/// soon as it arrives: the live window records from then on.
pub fn record_at(
    socket: &Path,
    duration: Duration,
    out: &Path,
    stop: &AtomicBool,
    attached: &mut dyn FnMut(&Info),
) -> Result<Recorded, AttachError> {
    record_from(
        &Endpoint::Socket(socket.to_owned()),
        duration,
        out,
        stop,
        attached,
    )
}

/// [`record_at`] through any [`Endpoint`]: a Unix domain socket, or a TCP endpoint with its
/// token.
pub fn record_from(
    endpoint: &Endpoint,
    duration: Duration,
    out: &Path,
    stop: &AtomicBool,
    attached: &mut dyn FnMut(&Info),
) -> Result<Recorded, AttachError> {
    let begun = Instant::now();
    let stream = connect(endpoint)?;
    let stream = &*stream;
    timeouts(stream, POLL)?;
    let duration_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    send(stream, Request::new(Command::Record { duration_ms }))?;
    let deadline = begun + duration + GRACE;
    let mut reader = Patient {
        stream,
        stop,
        stopped: false,
        deadline: Some(deadline),
    };
    let info = read_info(&mut reader)?;
    attached(&info);
    let part = {
        let mut name = out.as_os_str().to_owned();
        name.push(".part");
        PathBuf::from(name)
    };
    let file = File::create(&part)
        .map_err(|e| AttachError::Io(format!("cannot create {}: {e}", part.display())))?;
    let result = receive(&mut reader, BufWriter::new(file), &part, begun);
    match result {
        Ok((end, first_data)) => {
            std::fs::rename(&part, out).map_err(|e| {
                let _ = std::fs::remove_file(&part);
                AttachError::Io(format!("cannot write {}: {e}", out.display()))
            })?;
            Ok(Recorded {
                info,
                sessions: end.sessions,
                bytes: end.bytes,
                first_data,
                stopped: reader.stopped,
            })
        }
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            Err(e)
        }
    }
}

/// The data chunks into `file` until the end message, checked against it.
fn receive(
    reader: &mut Patient<'_>,
    mut file: BufWriter<File>,
    part: &Path,
    begun: Instant,
) -> Result<(End, Option<Duration>), AttachError> {
    let mut bytes = 0u64;
    let mut sessions = 0u32;
    let mut first_data = None;
    let failed = |e: io::Error| AttachError::Io(format!("cannot write {}: {e}", part.display()));
    loop {
        let message = next(reader).map_err(|e| match e {
            AttachError::Protocol(m) if m.contains("closed the connection") => {
                AttachError::Protocol(format!(
                    "the program closed the connection mid-transfer, after {bytes} bytes"
                ))
            }
            e => e,
        })?;
        if message.kind == END {
            let end = End::decode(&message.content).map_err(|e| AttachError::Protocol(e.0))?;
            if end.bytes != bytes || end.sessions != sessions {
                return Err(AttachError::Protocol(format!(
                    "the program sent {} sessions in {} bytes, {sessions} in {bytes} arrived",
                    end.sessions, end.bytes
                )));
            }
            file.flush().map_err(failed)?;
            file.get_ref().sync_all().map_err(failed)?;
            return Ok((end, first_data));
        }
        if !message.is_data() {
            return Err(AttachError::Protocol(format!(
                "unexpected message of type {} amid the data",
                message.kind
            )));
        }
        first_data.get_or_insert_with(|| begun.elapsed());
        if message.kind == crate::capture::format::SESSION_HEADER {
            sessions += 1;
        }
        let chunk = message.to_bytes();
        bytes += chunk.len() as u64;
        file.write_all(&chunk).map_err(failed)?;
    }
}

/// Watches the program listening on `socket`: windows of `interval` back to back (see
/// [`Command::Watch`]), each handed to `window` as a [`Capture`](crate::Capture) as it
/// arrives, until `stop` is set (the program then sends its last window) or the program's
/// session ends. `attached` gets the program's info first.
pub fn watch_at(
    socket: &Path,
    interval: Duration,
    stop: &AtomicBool,
    attached: &mut dyn FnMut(&Info),
    window: &mut dyn FnMut(crate::Capture),
) -> Result<(), AttachError> {
    watch_from(
        &Endpoint::Socket(socket.to_owned()),
        interval,
        stop,
        attached,
        window,
    )
}

/// [`watch_at`] through any [`Endpoint`]: a Unix domain socket, or a TCP endpoint with its
/// token.
pub fn watch_from(
    endpoint: &Endpoint,
    interval: Duration,
    stop: &AtomicBool,
    attached: &mut dyn FnMut(&Info),
    window: &mut dyn FnMut(crate::Capture),
) -> Result<(), AttachError> {
    let stream = connect(endpoint)?;
    let stream = &*stream;
    timeouts(stream, POLL)?;
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    send(stream, Request::new(Command::Watch { interval_ms }))?;
    let mut reader = Patient {
        stream,
        stop,
        stopped: false,
        deadline: None,
    };
    let info = read_info(&mut reader)?;
    attached(&info);
    let mut session = Vec::new();
    loop {
        let message = next(&mut reader)?;
        if message.kind == END {
            return Ok(());
        }
        if !message.is_data() {
            return Err(AttachError::Protocol(format!(
                "unexpected message of type {} amid the data",
                message.kind
            )));
        }
        if message.kind == crate::capture::format::SESSION_HEADER {
            session.clear();
        }
        session.extend_from_slice(&message.to_bytes());
        if message.kind == crate::capture::format::SESSION_FOOTER {
            let read = crate::Capture::from_vec(std::mem::take(&mut session))
                .map_err(|e| AttachError::Protocol(format!("a window does not read: {e}")))?;
            for capture in read {
                window(capture);
            }
        }
    }
}

/// A reader of the socket that waits out its read timeouts, sending [`STOP`] once when
/// `stop` is set, until `deadline`.
struct Patient<'a> {
    stream: &'a dyn Stream,
    stop: &'a AtomicBool,
    stopped: bool,
    /// When to give up waiting; `None`: never.
    deadline: Option<Instant>,
}

impl Read for Patient<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // Before each read: data that keeps coming (a watch) never lets a read time out.
            if !self.stopped && self.stop.load(Ordering::Acquire) {
                self.stopped = true;
                // A program that no longer reads is told by the connection's end.
                let mut out = self.stream;
                let _ = protocol::write_chunk(&mut out, STOP, MESSAGE_VERSION, &[]);
            }
            match self.stream.read_bytes(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if self.deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(e);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}
