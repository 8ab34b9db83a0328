//! Attaching to a running program: [`ProfilerBuilder::listen`](crate::ProfilerBuilder::listen) (or
//! `TICKSCOPE_LISTEN=1`) opens a control socket, through which `tickscope ps`, `tickscope
//! record --pid` (and [`record`]) take a capture of the program without stopping it: the
//! flight recorder's window (the seconds before the attach), then everything recorded for a
//! while.
//!
//! The socket is a Unix domain socket, `<pid>.sock` in [`socket_dir`]
//! (`$XDG_RUNTIME_DIR/tickscope`, else `tickscope-<uid>` in the temporary directory), in a
//! directory of mode 0700 and itself of mode 0600: only the program's user may connect. One
//! session per process listens, on one thread that sleeps until a client connects; nothing
//! is added to the recording path. The socket is removed when the session stops or is
//! dropped, or the process exits (`tickscope ps` removes those of processes killed).
//!
//! A TCP endpoint is opened only when asked, by
//! [`ProfilerBuilder::listen_tcp`](crate::ProfilerBuilder::listen_tcp): on a loopback address
//! (another one is refused unless asked by
//! [`ProfilerBuilder::listen_tcp_any`](crate::ProfilerBuilder::listen_tcp_any)), with a random
//! token printed once on stderr (`tickscope: listening on 127.0.0.1:40123, token 5f0c…`) that
//! each client sends first ([`Endpoint::Tcp`]); a wrong or missing token gets one line of
//! error and the connection closed.
//!
//! The wire protocol ([`protocol`], `docs/PROTOCOL.md` in the repository) sends the capture
//! file's own chunks: what a client receives is a capture file, each session of it marked
//! by an `ORIGIN` chunk ([`origins`]).
//!
//! ```no_run
//! # #[cfg(unix)] {
//! let prof = tickscope::Profiler::builder()
//!     .flight_recorder(16 << 20)
//!     .listen(true)
//!     .start();
//! // ... the program runs; meanwhile, in a shell:
//! // tickscope ps
//! // tickscope record --pid 4242 --duration 10s -o run.tscope
//! # drop(prof);
//! # }
//! ```

pub mod protocol;

#[cfg(unix)]
mod client;
#[cfg(unix)]
mod dir;
#[cfg(all(unix, feature = "enabled"))]
pub(crate) mod server;
#[cfg(unix)]
mod stream;

#[cfg(unix)]
pub use client::{
    AttachError, Endpoint, Program, Recorded, info, list, record, record_at, record_from, watch_at,
    watch_from,
};
#[cfg(unix)]
use dir::socket_path_in;
#[cfg(unix)]
pub use dir::{socket_dir, socket_path};

use crate::capture::format::{CHUNK_HEADER, ORIGIN, padded};

/// Where a session of an attach's capture comes from, as its
/// `ORIGIN` chunk says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The flight recorder's window at the attach: what the program recorded before.
    Flight,
    /// What the program recorded while the client was attached.
    Live,
}

impl Origin {
    /// Its code in the `ORIGIN` chunk.
    pub fn code(self) -> u32 {
        match self {
            Self::Flight => 1,
            Self::Live => 2,
        }
    }

    /// How `tickscope` names it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Flight => "flight recorder window before the attach",
            Self::Live => "recorded while attached",
        }
    }
}

/// The [`Origin`] of each session of a capture file's bytes, in order: `None` for a session
/// without an `ORIGIN` chunk (one not taken by an attach). Stops at the first bytes that are
/// not a chunk.
pub fn origins(bytes: &[u8]) -> Vec<Option<(Origin, u64)>> {
    use crate::capture::format::{CHUNK_MAGIC, SESSION_HEADER};
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(header) = bytes.get(pos..pos.saturating_add(CHUNK_HEADER)) {
        let field = |at: usize, len: usize| &header[at..at + len];
        if field(0, 4) != CHUNK_MAGIC.to_le_bytes() {
            break;
        }
        let kind = u16::from_le_bytes([header[4], header[5]]);
        let mut len = [0u8; 8];
        len.copy_from_slice(field(8, 8));
        let len = u64::from_le_bytes(len);
        let content = usize::try_from(len)
            .ok()
            .and_then(|len| bytes.get(pos + CHUNK_HEADER..)?.get(..len));
        match kind {
            SESSION_HEADER => out.push(None),
            ORIGIN => {
                if let (Some(last), Some(content)) = (out.last_mut(), content)
                    && let Some(origin) = parse_origin(content)
                {
                    *last = Some(origin);
                }
            }
            _ => {}
        }
        let Some(next) = usize::try_from(padded(len))
            .ok()
            .and_then(|l| pos.checked_add(CHUNK_HEADER)?.checked_add(l))
        else {
            break;
        };
        pos = next;
    }
    out
}

/// The content of an `ORIGIN` chunk saying `origin`, of an attach at `attach_unix_ns`.
pub(crate) fn origin_content(origin: Origin, attach_unix_ns: u64) -> Vec<u8> {
    let mut content = Vec::with_capacity(crate::capture::format::ORIGIN_LEN);
    content.extend_from_slice(&origin.code().to_le_bytes());
    content.extend_from_slice(&0u32.to_le_bytes());
    content.extend_from_slice(&attach_unix_ns.to_le_bytes());
    content
}

/// An `ORIGIN` chunk's content: the origin and the Unix nanoseconds of the attach.
pub(crate) fn parse_origin(content: &[u8]) -> Option<(Origin, u64)> {
    let code = u32::from_le_bytes(content.get(0..4)?.try_into().ok()?);
    let at = u64::from_le_bytes(content.get(8..16)?.try_into().ok()?);
    let origin = match code {
        1 => Origin::Flight,
        2 => Origin::Live,
        _ => return None,
    };
    Some((origin, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_of_garbage_stop_quietly() {
        assert_eq!(origins(b"not a capture at all"), Vec::new());
        let mut bytes = Vec::new();
        protocol::write_chunk(&mut bytes, ORIGIN, 1, &[1, 0, 0, 0]).unwrap();
        bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(origins(&bytes), Vec::new());
    }
}
