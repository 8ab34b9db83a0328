//! A session that listens for attaches: its control socket and TCP endpoint, and what an
//! attach sees of it.

#[cfg(all(unix, feature = "enabled"))]
use std::sync::{Arc, Weak};

use crate::record::sync::lock;

#[cfg(all(unix, feature = "enabled"))]
use super::Inner;
use super::Profiler;
#[cfg(doc)]
use super::ProfilerBuilder;

/// What the running session of a program is, for an attach ([`Profiler::recording`]).
#[cfg(all(unix, feature = "enabled"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recording {
    /// Its window is a flight recorder's.
    pub(crate) flight: bool,
    /// It streams to a file.
    pub(crate) stream: bool,
    /// The tick at which its window started.
    pub(crate) start_tick: u64,
}

/// A [`Profiler`] held weakly: see [`Profiler::downgrade`].
#[cfg(all(unix, feature = "enabled"))]
#[derive(Debug, Clone)]
pub(crate) struct WeakProfiler(Weak<Inner>);

#[cfg(all(unix, feature = "enabled"))]
impl WeakProfiler {
    /// The session, while some handle of it lives.
    pub(crate) fn upgrade(&self) -> Option<Profiler> {
        self.0.upgrade().map(|inner| Profiler { inner })
    }
}

impl Profiler {
    /// Opens the control socket of a session that listens ([`ProfilerBuilder::listen`]), unless it is
    /// open; says on stderr, in one line, why it cannot.
    pub(super) fn open_listener(&self) {
        if let Some(options) = &self.inner.config.tcp {
            let mut tcp = lock(&self.inner.tcp);
            if tcp.is_none() {
                let opened = options
                    .addrs
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|addrs| {
                        crate::open_tcp_endpoint(self, addrs, options.remote)
                            .map_err(|e| e.to_string())
                    });
                match opened {
                    Ok(opened) => *tcp = Some(opened),
                    Err(e) => eprintln!("tickscope: not listening on TCP: {e}"),
                }
            }
        }
        if !self.inner.config.listens() {
            return;
        }
        let mut listener = lock(&self.inner.listener);
        if listener.is_some() {
            return;
        }
        match crate::open_control_socket(self) {
            Ok(opened) => *listener = Some(opened),
            Err(e) => eprintln!("tickscope: not listening for attaches: {e}"),
        }
    }

    /// The address of the session's TCP endpoint ([`ProfilerBuilder::listen_tcp`]) while it
    /// is open, with the port the system chose for port 0; `None` without one (not asked, or
    /// refused), and once the session is stopped.
    pub fn listen_addr(&self) -> Option<std::net::SocketAddr> {
        lock(&self.inner.tcp).as_ref().map(|tcp| tcp.addr)
    }

    /// The token of the session's TCP endpoint ([`ProfilerBuilder::listen_tcp`]) while it is
    /// open, as printed on stderr: for a program that hands it to its clients another way.
    pub fn listen_token(&self) -> Option<String> {
        lock(&self.inner.tcp).as_ref().map(|tcp| tcp.token.clone())
    }

    /// A handle that does not keep the session alive (for its listening thread).
    #[cfg(all(unix, feature = "enabled"))]
    pub(crate) fn downgrade(&self) -> WeakProfiler {
        WeakProfiler(Arc::downgrade(&self.inner))
    }

    /// The flight recorder's window in bytes ([`ProfilerBuilder::flight_recorder`]), if any.
    #[cfg(all(unix, feature = "enabled"))]
    pub(crate) fn flight_bytes(&self) -> Option<usize> {
        self.inner.config.flight
    }

    /// What the running window is, for an attach; `None` when stopped.
    #[cfg(all(unix, feature = "enabled"))]
    pub(crate) fn recording(&self) -> Option<Recording> {
        let state = self.inner.state();
        let window = state.window.as_ref()?;
        Some(Recording {
            flight: window.flight,
            stream: window.stream.is_some(),
            start_tick: window.start_tick,
        })
    }
}
