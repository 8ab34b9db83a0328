//! Serving a client: its requests, and the recordings and windows it is sent.

use std::io::{self, BufWriter, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::attach::Origin;
use crate::attach::protocol::{
    self, Command, End, INFO, Info, MESSAGE_VERSION, Message, Mode, PROTOCOL_VERSION, REQUEST,
    Request, STOP, TOKEN,
};
use crate::attach::stream::{Stream, same_bytes};
use crate::record::sync::lock;
use crate::record::untracked::Untracked;
use crate::session::{Recording, WeakProfiler};
use crate::{Profiler, ProfilerBuilder};

use super::write::{end_before, unix_now_ns, write_session};

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a write to a client may block before the client is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a recording looks for the client's `STOP`, its leaving, or the session's end.
pub(super) const POLL: Duration = Duration::from_millis(50);

/// Held while a client is served: the Unix socket and a TCP endpoint serve one client at a
/// time between them (each recording is a nested session of every thread).
static SERVING: Mutex<()> = Mutex::new(());

/// What the listening thread knows of the session it serves.
pub(super) struct Served {
    /// The session, while it lives.
    pub(super) session: WeakProfiler,
    /// Unix nanoseconds at which the session started listening.
    pub(super) start_unix_ns: u64,
    /// The flight recorder's window in bytes, if the session has one.
    pub(super) flight_bytes: Option<usize>,
}

/// The thread: one client at a time, until `stop`. `accept` waits for the next client;
/// `token`: the token each client must send first (a TCP endpoint).
pub(super) fn listen<S: Stream>(
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
    let info = info_of(served, &recording);
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

/// What the program says of itself, serving `served` as it records now.
pub(super) fn info_of(served: &Served, recording: &Recording) -> Info {
    Info {
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
    }
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
