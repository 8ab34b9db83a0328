//! The attach protocol's messages: chunks of the capture file's layout (a 16-byte header of
//! magic, type, version and content length, the content, zero padding to 16 bytes), with
//! types of their own for the control messages, and the capture file's own chunks for data.
//! The repository's `docs/PROTOCOL.md` gives every field.
//!
//! Parsing never panics: every function here takes any bytes and returns a value or a
//! [`ProtocolError`] (a one-line message), and refuses a message longer than its bound
//! before reading it.

use std::fmt;
use std::io::{self, Read, Write};

use crate::capture::format::{ALIGN, CHUNK_HEADER, CHUNK_MAGIC, padded};

/// Version of the attach protocol, sent in every [`Request`] and [`Info`]. A peer of another
/// version gets an [`ERROR`] message naming both versions. Version 2 added the TCP endpoint
/// and its [`TOKEN`] message.
pub const PROTOCOL_VERSION: u16 = 2;

/// Chunk type of a client's request ([`Request`]): the first message of a connection.
pub const REQUEST: u16 = 64;
/// Chunk type of a client's request to end a recording window now (empty content).
pub const STOP: u16 = 65;
/// Chunk type of the program's description ([`Info`]): its first answer to every request.
pub const INFO: u16 = 66;
/// Chunk type of an error: a UTF-8 message, the last message of the connection.
pub const ERROR: u16 = 67;
/// Chunk type of the end of a recording's data ([`End`]): the last message of a whole answer.
pub const END: u16 = 68;
/// Chunk type of a client's token (its content: the token's text, as the program printed
/// it): the first message on a TCP connection, before the request.
pub const TOKEN: u16 = 69;
/// Version of every control chunk type (`REQUEST` to `TOKEN`).
pub const MESSAGE_VERSION: u16 = 1;

/// The most bytes of content a control message (`REQUEST`, `STOP`, `INFO`, `ERROR`, `END`,
/// `TOKEN`)
/// may have: anything longer is refused before it is read.
pub const MAX_CONTROL: u64 = 4096;
/// The most bytes of content a data chunk (a capture file's chunk) may have on the wire.
pub const MAX_DATA: u64 = 1 << 30;

/// Bytes of a [`Request`]'s content.
pub const REQUEST_LEN: usize = 16;
/// Bytes of an [`Info`]'s fixed part, before the program's name.
pub const INFO_FIXED: usize = 32;
/// Bytes of an [`End`]'s content.
pub const END_LEN: usize = 16;

/// Why a message could not be read: one line, for the client's or the program's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

impl From<ProtocolError> for io::Error {
    fn from(e: ProtocolError) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

/// What a client asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// The program's [`Info`], and nothing more (what `tickscope ps` asks).
    Info,
    /// A capture: the flight recorder's window (when the program runs one), then everything
    /// recorded for `duration_ms` milliseconds or until the client sends [`STOP`].
    Record {
        /// The live window's length; 0 takes the flight recorder's window alone.
        duration_ms: u64,
    },
    /// Live windows back to back, one every `interval_ms` milliseconds (at least 10), each
    /// sent as it ends, until the client sends [`STOP`] (what `tickscope top` asks).
    Watch {
        /// The length of each window.
        interval_ms: u64,
    },
}

/// A client's request: the first message of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The protocol version the client speaks.
    pub version: u16,
    /// What it asks.
    pub command: Command,
}

impl Request {
    /// A request of this build's protocol version.
    pub fn new(command: Command) -> Self {
        Self {
            version: PROTOCOL_VERSION,
            command,
        }
    }

    /// The message's content ([`REQUEST_LEN`] bytes).
    pub fn encode(&self) -> Vec<u8> {
        let (code, duration) = match self.command {
            Command::Info => (1u16, 0),
            Command::Record { duration_ms } => (2, duration_ms),
            Command::Watch { interval_ms } => (3, interval_ms),
        };
        let mut out = Vec::with_capacity(REQUEST_LEN);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&code.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&duration.to_le_bytes());
        out
    }

    /// Reads a request's content. A request of another protocol version is an error naming
    /// both versions (its other fields may mean something else).
    pub fn decode(content: &[u8]) -> Result<Self, ProtocolError> {
        let version = u16_at(content, 0)
            .ok_or_else(|| ProtocolError("the request is too short".to_owned()))?;
        if version != PROTOCOL_VERSION {
            return Err(ProtocolError(format!(
                "protocol version {version} is not supported (the program speaks version \
                 {PROTOCOL_VERSION})"
            )));
        }
        if content.len() < REQUEST_LEN {
            return Err(ProtocolError(format!(
                "the request has {} bytes, not {REQUEST_LEN}",
                content.len()
            )));
        }
        // The length is checked: both fields are there.
        let code = u16::from_le_bytes([content[2], content[3]]);
        let duration_ms = u64_at(content, 8).unwrap_or_default();
        let command = match code {
            1 => Command::Info,
            2 => Command::Record { duration_ms },
            3 => Command::Watch {
                interval_ms: duration_ms,
            },
            other => return Err(ProtocolError(format!("unknown command {other}"))),
        };
        Ok(Self { version, command })
    }
}

/// How the program records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Its session keeps its window in memory.
    Memory,
    /// Its session is a flight recorder keeping its last [`Info::flight_bytes`].
    Flight,
    /// Its session streams to a capture file.
    Stream,
}

impl Mode {
    /// The mode's name, as `tickscope ps` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Flight => "flight",
            Self::Stream => "stream",
        }
    }

    fn code(self) -> u16 {
        match self {
            Self::Memory => 0,
            Self::Flight => 1,
            Self::Stream => 2,
        }
    }
}

/// The program's description: its first answer to every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// The protocol version the program speaks.
    pub version: u16,
    /// How its session records.
    pub mode: Mode,
    /// Its process id.
    pub pid: u32,
    /// Unix nanoseconds at which its listening session started.
    pub start_unix_ns: u64,
    /// The flight recorder's window in bytes (0 when it runs none).
    pub flight_bytes: u64,
    /// The file name of its executable.
    pub program: String,
}

impl Info {
    /// The message's content.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(INFO_FIXED + self.program.len() + 1);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.mode.code().to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.start_unix_ns.to_le_bytes());
        out.extend_from_slice(&self.flight_bytes.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        push_string(&mut out, &self.program);
        out
    }

    /// Reads an info message's content. A program of another protocol version is an error
    /// naming both versions.
    pub fn decode(content: &[u8]) -> Result<Self, ProtocolError> {
        let version = u16_at(content, 0)
            .ok_or_else(|| ProtocolError("the program's info is too short".to_owned()))?;
        if version != PROTOCOL_VERSION {
            return Err(ProtocolError(format!(
                "the program speaks protocol version {version}, this client version \
                 {PROTOCOL_VERSION}"
            )));
        }
        let (Some(mode), Some(pid), Some(start_unix_ns), Some(flight_bytes)) = (
            u16_at(content, 2),
            u32_at(content, 4),
            u64_at(content, 8),
            u64_at(content, 16),
        ) else {
            return Err(ProtocolError(format!(
                "the program's info has {} bytes, fewer than {INFO_FIXED}",
                content.len()
            )));
        };
        let mode = match mode {
            0 => Mode::Memory,
            1 => Mode::Flight,
            2 => Mode::Stream,
            other => return Err(ProtocolError(format!("unknown recording mode {other}"))),
        };
        let program = content
            .get(INFO_FIXED..)
            .map(string)
            .ok_or_else(|| ProtocolError("the program's info lacks its name".to_owned()))?;
        Ok(Self {
            version,
            mode,
            pid,
            start_unix_ns,
            flight_bytes,
            program,
        })
    }
}

/// The end of a recording's data: what was sent, for the client to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    /// Capture sessions sent.
    pub sessions: u32,
    /// Bytes of capture chunks sent (headers and padding included).
    pub bytes: u64,
}

impl End {
    /// The message's content ([`END_LEN`] bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(END_LEN);
        out.extend_from_slice(&self.sessions.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        out
    }

    /// Reads an end message's content.
    pub fn decode(content: &[u8]) -> Result<Self, ProtocolError> {
        match (u32_at(content, 0), u64_at(content, 8)) {
            (Some(sessions), Some(bytes)) => Ok(Self { sessions, bytes }),
            _ => Err(ProtocolError(format!(
                "the end message has {} bytes, fewer than {END_LEN}",
                content.len()
            ))),
        }
    }
}

/// One message as read: its chunk type and version, and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The chunk type: a control type ([`REQUEST`] to [`END`]) or a capture file's.
    pub kind: u16,
    /// The chunk version.
    pub version: u16,
    /// The content, padding left out.
    pub content: Vec<u8>,
}

impl Message {
    /// True for a capture file's chunk (data), false for a control message.
    pub fn is_data(&self) -> bool {
        !is_control(self.kind)
    }

    /// The message as a chunk: header, content, padding.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHUNK_HEADER + self.content.len() + ALIGN);
        write_chunk(&mut out, self.kind, self.version, &self.content)
            .expect("writing to a Vec does not fail");
        out
    }
}

/// True for the control chunk types, false for the others (a capture file's chunks).
pub fn is_control(kind: u16) -> bool {
    (REQUEST..=TOKEN).contains(&kind)
}

/// Reads a chunk header from the first `CHUNK_HEADER` (16) bytes: type, version and content
/// length, or an error when the magic is wrong, the bytes are too few, or the content is
/// longer than its type's bound.
pub fn parse_header(bytes: &[u8]) -> Result<(u16, u16, u64), ProtocolError> {
    let (Some(magic), Some(kind), Some(version), Some(len)) = (
        u32_at(bytes, 0),
        u16_at(bytes, 4),
        u16_at(bytes, 6),
        u64_at(bytes, 8),
    ) else {
        return Err(ProtocolError(format!(
            "a message header has {CHUNK_HEADER} bytes, not {}",
            bytes.len()
        )));
    };
    if magic != CHUNK_MAGIC {
        return Err(ProtocolError(format!(
            "not a tickscope attach message (magic {magic:#010x}, not {CHUNK_MAGIC:#010x})"
        )));
    }
    let bound = if is_control(kind) {
        MAX_CONTROL
    } else {
        MAX_DATA
    };
    if len > bound {
        return Err(ProtocolError(format!(
            "a message of type {kind} announces {len} bytes, more than the {bound} allowed"
        )));
    }
    Ok((kind, version, len))
}

/// Parses the first message of `bytes`: `Ok(Some((message, bytes used)))`, `Ok(None)` when
/// `bytes` holds only part of it, or an error (bad magic, a length over the bound).
pub fn parse(bytes: &[u8]) -> Result<Option<(Message, usize)>, ProtocolError> {
    let Some(header) = bytes.get(..CHUNK_HEADER) else {
        return Ok(None);
    };
    let (kind, version, len) = parse_header(header)?;
    // Bounded above by `MAX_DATA`, so these fit.
    let len = usize::try_from(len).map_err(|_| ProtocolError("too long".to_owned()))?;
    let whole = CHUNK_HEADER + usize::try_from(padded(len as u64)).unwrap_or(usize::MAX);
    let Some(content) = bytes.get(CHUNK_HEADER..CHUNK_HEADER + len) else {
        return Ok(None);
    };
    if bytes.len() < whole {
        return Ok(None);
    }
    Ok(Some((
        Message {
            kind,
            version,
            content: content.to_vec(),
        },
        whole,
    )))
}

/// Reads one message from `r`: `Ok(None)` when `r` ends before its first byte; an error when
/// it ends inside a message, or the message is not one (see [`parse_header`]).
pub fn read_message(r: &mut dyn Read) -> io::Result<Option<Message>> {
    let mut header = [0u8; CHUNK_HEADER];
    let mut got = 0;
    while got < CHUNK_HEADER {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(cut("a message header")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let (kind, version, len) = parse_header(&header)?;
    let mut content = Vec::new();
    r.take(padded(len))
        .read_to_end(&mut content)
        .map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => cut("a message"),
            _ => e,
        })?;
    if (content.len() as u64) < padded(len) {
        return Err(cut("a message"));
    }
    content.truncate(len as usize);
    Ok(Some(Message {
        kind,
        version,
        content,
    }))
}

fn cut(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the connection closed inside {what}"),
    )
}

/// Writes a chunk: header, `content`, zero padding to `ALIGN` (8 bytes).
pub fn write_chunk(out: &mut dyn Write, kind: u16, version: u16, content: &[u8]) -> io::Result<()> {
    let mut header = [0u8; CHUNK_HEADER];
    header[0..4].copy_from_slice(&CHUNK_MAGIC.to_le_bytes());
    header[4..6].copy_from_slice(&kind.to_le_bytes());
    header[6..8].copy_from_slice(&version.to_le_bytes());
    header[8..16].copy_from_slice(&(content.len() as u64).to_le_bytes());
    out.write_all(&header)?;
    out.write_all(content)?;
    let pad = (padded(content.len() as u64) - content.len() as u64) as usize;
    out.write_all(&[0u8; ALIGN][..pad])
}

/// Writes an error message (one line) as an [`ERROR`] chunk.
pub fn write_error(out: &mut dyn Write, message: &str) -> io::Result<()> {
    // Bounded like every control message: a longer one is cut (at a character).
    let mut end = message.len().min(MAX_CONTROL as usize - 1);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let mut content = Vec::with_capacity(end + 1);
    push_string(&mut content, &message[..end]);
    write_chunk(out, ERROR, MESSAGE_VERSION, &content)
}

/// The text of an [`ERROR`] chunk's content.
pub fn error_text(content: &[u8]) -> String {
    string(content)
}

fn push_string(out: &mut Vec<u8>, s: &str) {
    out.extend(s.bytes().map(|b| if b == 0 { b'?' } else { b }));
    out.push(0);
}

/// The NUL-terminated (or whole) UTF-8 string at the start of `bytes`, lossily.
fn string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips() {
        for command in [
            Command::Info,
            Command::Record {
                duration_ms: 10_000,
            },
            Command::Watch { interval_ms: 500 },
        ] {
            let request = Request::new(command);
            let bytes = request.encode();
            assert_eq!(bytes.len(), REQUEST_LEN);
            assert_eq!(Request::decode(&bytes), Ok(request));
        }
    }

    #[test]
    fn another_version_is_one_line_naming_both() {
        let mut bytes = Request::new(Command::Info).encode();
        bytes[0..2].copy_from_slice(&7u16.to_le_bytes());
        let e = Request::decode(&bytes).unwrap_err();
        assert_eq!(
            e.0,
            "protocol version 7 is not supported (the program speaks version 2)"
        );
        let info = Info {
            version: 9,
            mode: Mode::Flight,
            pid: 1,
            start_unix_ns: 2,
            flight_bytes: 3,
            program: "p".into(),
        };
        let e = Info::decode(&info.encode()).unwrap_err();
        assert_eq!(
            e.0,
            "the program speaks protocol version 9, this client version 2"
        );
    }

    #[test]
    fn info_and_end_round_trip() {
        let info = Info {
            version: PROTOCOL_VERSION,
            mode: Mode::Stream,
            pid: 4242,
            start_unix_ns: 1_700_000_000_000_000_000,
            flight_bytes: 0,
            program: "service".into(),
        };
        assert_eq!(Info::decode(&info.encode()), Ok(info));
        let end = End {
            sessions: 2,
            bytes: 12345,
        };
        assert_eq!(End::decode(&end.encode()), Ok(end));
    }

    #[test]
    fn messages_parse_whole_or_wait() {
        let message = Message {
            kind: REQUEST,
            version: MESSAGE_VERSION,
            content: Request::new(Command::Record { duration_ms: 5 }).encode(),
        };
        let bytes = message.to_bytes();
        assert_eq!(bytes.len(), 32);
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut]), Ok(None), "{cut} bytes");
        }
        assert_eq!(parse(&bytes), Ok(Some((message.clone(), 32))));
        let read = read_message(&mut &bytes[..]).unwrap();
        assert_eq!(read, Some(message));
        assert!(read_message(&mut &bytes[..20]).is_err());
        assert_eq!(read_message(&mut &[][..]).unwrap(), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let e = parse(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap_err();
        assert_eq!(
            e.0,
            "not a tickscope attach message (magic 0x20544547, not 0x50435354)"
        );
        // A control message that announces more than its bound is refused unread.
        let mut huge = Message {
            kind: REQUEST,
            version: 1,
            content: Vec::new(),
        }
        .to_bytes();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(
            parse(&huge)
                .unwrap_err()
                .0
                .contains("more than the 4096 allowed")
        );
        assert!(read_message(&mut &huge[..]).is_err());
        assert!(Request::decode(&[1]).is_err());
        assert!(Request::decode(&[1, 0, 9, 0]).is_err());
        assert!(Info::decode(&[1, 0, 0, 0]).is_err());
        assert!(End::decode(&[0; 15]).is_err());
        let mut bad_command = Request::new(Command::Info).encode();
        bad_command[2] = 77;
        assert_eq!(
            Request::decode(&bad_command).unwrap_err().0,
            "unknown command 77"
        );
    }

    #[test]
    fn errors_are_bounded_lines() {
        let mut out = Vec::new();
        write_error(&mut out, &"é".repeat(5000)).unwrap();
        let (message, used) = parse(&out).unwrap().unwrap();
        assert_eq!(used, out.len());
        assert_eq!(message.kind, ERROR);
        assert!(message.content.len() as u64 <= MAX_CONTROL);
        assert!(error_text(&message.content).chars().all(|c| c == 'é'));
    }
}
