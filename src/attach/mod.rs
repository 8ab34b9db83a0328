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

pub use crate::capture::origin::{Origin, origins};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::format::ORIGIN;

    #[test]
    fn origins_of_garbage_stop_quietly() {
        assert_eq!(origins(b"not a capture at all"), Vec::new());
        let mut bytes = Vec::new();
        protocol::write_chunk(&mut bytes, ORIGIN, 1, &[1, 0, 0, 0]).unwrap();
        bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(origins(&bytes), Vec::new());
    }
}
