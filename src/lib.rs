//! tickscope: an in-process profiler whose scopes cost a couple of clock reads.
//!
//! Put `let _g = scope!("name");` in the code you care about, run it under a [`Profiler`]
//! session, and get a per-name table (calls, total, self, avg, min, max, p50, p99, % of the
//! session) or the raw [`Trace`](trace::Trace) of every scope.
//!
//! ```
//! use tickscope::{Profiler, scope};
//!
//! fn parse(input: &str) -> usize {
//!     let _g = scope!("parse");
//!     input.len()
//! }
//!
//! let prof = Profiler::start();
//! for line in ["a", "bb", "ccc"] {
//!     let _g = scope!("line");
//!     parse(line);
//! }
//! prof.stop();
//! println!("{}", prof.table());
//!
//! let report = prof.report();
//! assert_eq!(report.get("line").unwrap().calls, 3);
//! assert_eq!(report.get("parse").unwrap().calls, 3);
//! // Self time excludes the children on the same thread.
//! let line = report.get("line").unwrap();
//! assert!(line.self_ns <= line.total_ns);
//! ```
//!
//! # How it works: one pipeline
//!
//! Data walks one way, and each stage is a folder of `src/` that imports only from the stages
//! before it (a test, `tests/it/layers.rs`, keeps it so). The model (`trace/`) holds data types
//! only, and `decode/` builds it, so in imports the model ranks just before `decode/`:
//! record → capture → trace → decode → report → table, export → session.
//!
//! ```text
//!  record/ ──stop──▶ capture/ ──decode/──▶ trace/ ──▶ report/ ──▶ table
//!  hot path          Capture               Trace       Report      └──▶ export/
//!  (scope!, args,    raw chunks, clock,    (the model: spans,       (Chrome, Kineto,
//!   links, alloc,    callsites, threads,   async spans, memory,      folded, flame graph)
//!   observers,       dropped events        flows)
//!   buffers, pool)
//! ```
//!
//! - **record**: the hot path stamps a raw clock tick ([`quanta::Clock::raw`][raw], the TSC
//!   where there is one) and a static callsite id into an 8-byte word in the current
//!   thread's own chunk: no lock, no allocation (after the thread's first chunk), no write to
//!   memory another thread writes.
//!
//! [raw]: https://docs.rs/quanta/latest/quanta/struct.Clock.html#method.raw
//! - **capture**: a session's stop hands its threads' chunks over, as recorded, to a
//!   [`Capture`] ([`Profiler::capture`]): no copy, no decoding. Its chunks already have the
//!   layout of a capture file (a 16-byte header of magic, type, version and length), so
//!   [`Profiler::write_capture`] writes them to a `.tscope` file as they are and
//!   [`Capture::read`] gives them back, to decode in another process as if live.
//! - **decode**: [`Capture::decode`] (or [`trace::Trace::from_capture`]) pairs entries and
//!   exits, nests them, reads arguments, converts ticks to Unix nanoseconds with a converter
//!   calibrated at start and stop, and matches async spans, links and allocations across
//!   threads. [`trace::Trace::from_captures`] decodes several captures, of one process or of
//!   many processes and hosts (a concatenated capture file), into one trace on Unix time.
//! - **trace**: [`trace::Trace`], the model every later stage reads.
//! - **report** ([`report::Report`]) aggregates it; **table** ([`table::Table`]) prints a
//!   report; **export** writes traces ([`export`]). [`Profiler`] (`session/`) is the façade
//!   over all of them.
//!
//! # Words
//!
//! A **scope** is a region of code: a `scope!` or a `#[profile]` function, named by its
//! [`Callsite`]. Each time it runs it records a **span** ([`trace::Span`]): one entry and one
//! exit on one thread, guarded by a [`ScopeGuard`]. A `#[profile] async fn` call is an
//! **async span** ([`trace::AsyncSpan`]) made of **polls**, each a span on the thread that
//! polled it. A report's **calls** count the spans of a scope. A **flow**
//! ([`trace::Flow`]) joins a span to the span that followed from its [`Link`]. Records that
//! could not be written (a thread tearing down) are **dropped events**, always counted.
//!
//! When no session runs, a scope costs one relaxed atomic load and a branch. Without the
//! default `enabled` cargo feature, `scope!` compiles to nothing at all.
//!
//! # Nesting, self time and guards dropped out of order
//!
//! A scope's parent is the innermost scope open on its thread when it was entered. Its total
//! time runs from its entry to the drop of its guard; its self time is its total minus the
//! time its direct children spent inside it. Guards are usually dropped in reverse order of
//! creation, but need not be:
//!
//! - Every guard's own duration is exact, whatever order guards are dropped in, also for
//!   several guards of one call site (each exit record names the entry it closes).
//! - A child whose guard outlives its parent's (open `a`, open `b`, drop `a`, drop `b`) keeps
//!   its full duration and stays `a`'s child in the call tree and in folded stacks; `a`'s self
//!   time subtracts only the part of `b` before `a` ended. In the Chrome export such a scope
//!   cannot nest on its thread's track, so it is drawn on an extra track of the same thread
//!   ("overlapping scopes"), with its true duration. The report, the table, the call tree and
//!   every export agree on every duration.
//!
//! # Overhead
//!
//! Measured with `cargo bench --bench scope` on a 2-vCPU AMD EPYC VM (Linux, one run,
//! medians): an enabled scope (enter + exit) costs 21.5 ns, where the two raw TSC reads it
//! cannot avoid cost 21.0 ns on their own (1.025×); a scope while no session records costs
//! 0.28 ns. Each recorded scope takes 16 bytes of buffer (an 8-byte word for its entry and one
//! for its exit; arguments and other records take 16 bytes each). A stopped
//! session's [`Capture`] holds its chunks until the session restarts or is dropped (or, for
//! a capture a caller keeps, until that goes); they then stay warm for the next session, up
//! to 64 MiB ([`release_memory`] frees them). The peer comparison in the repository's `benches/peers/`
//! puts puffin, fastrace, tracing, tracy-client, firestorm and perfetto-recorder at 2.3× to 70×
//! this cost on the same machine (see the README).
//!
//! # Links, arguments and observers
//!
//! Work handed to another thread keeps its cause: capture a [`Link`] where the work is made
//! and open the scope that does it with `scope!("name", follows = link)`; the report can split
//! that scope by the scope that caused it ([`report::Report::by_origin`]) and the Chrome
//! export draws an arrow between the two. Scopes take arguments in tracing's syntax, and an
//! [`Observer`] is called on every scope's entry and exit:
//!
//! ```
//! use tickscope::{Profiler, scope};
//!
//! let prof = Profiler::builder().current_thread().start();
//! let link = {
//!     let _g = scope!("accept", peer = %"10.0.0.7");
//!     tickscope::link()
//! };
//! let worker = {
//!     let prof = prof.clone();
//!     std::thread::spawn(move || {
//!         prof.join_current_thread();
//!         let _g = scope!("serve", follows = link, bytes = 512u32);
//!     })
//! };
//! worker.join().unwrap();
//! prof.stop();
//! let report = tickscope::report::Report::by_origin(&prof.trace());
//! assert_eq!(report.get_by_origin("serve", Some("accept")).unwrap().calls, 1);
//! ```
//!
//! # Allocations
//!
//! With [`TrackingAlloc`] as the global allocator, a session started with
//! [`ProfilerBuilder::track_memory`] also records every allocation and free of the threads it records:
//! the report gets allocation figures per scope ([`report::ScopeStats::memory`]) and the
//! memory still live at stop ([`report::Report::live_at_stop`]), [`trace::Trace::memory`] lists them
//! all with frees matched to allocations across threads, and the Chrome export draws live
//! bytes over time. See [`TrackingAlloc`] for an example.
//!
//! # Tests
//!
//! `cargo test` runs tests in parallel threads of one process. A session limited to the
//! current thread sees nothing of the other tests, so its counts are exact:
//!
//! ```
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! std::thread::spawn(|| {
//!     let _g = tickscope::scope!("elsewhere"); // another thread: not recorded
//! })
//! .join()
//! .unwrap();
//! {
//!     let _g = tickscope::scope!("here");
//! }
//! prof.stop();
//! let report = prof.report();
//! assert_eq!(report.get("here").unwrap().calls, 1);
//! assert!(report.get("elsewhere").is_none());
//! ```
//!
//! For exact durations, install a mock clock with [`clock::use_mock_clock`] before the first
//! session of the test binary.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// Items that the loom model (`--cfg loom`) leaves out: it checks the buffer protocol only.
macro_rules! not_under_loom {
    ($($item:item)*) => { $(#[cfg(not(loom))] $item)* };
}

pub(crate) mod record;

#[cfg(not(loom))]
pub mod attach;
#[cfg(not(loom))]
pub mod capture;
#[cfg(not(loom))]
pub mod collector;
#[cfg(not(loom))]
mod decode;
#[cfg(not(loom))]
pub mod export;
#[cfg(not(loom))]
#[cfg(feature = "native")]
pub mod native;
#[cfg(not(loom))]
pub mod report;
#[cfg(not(loom))]
pub mod schedule;
#[cfg(not(loom))]
mod session;
#[cfg(not(loom))]
pub mod table;

/// Opens the control socket of a session that listens: the one place where the session stage
/// reaches the attach front end built on top of it (`attach::server` serves a session through
/// its public handle, so `session/` cannot name it without a cycle). The listener is kept as
/// a guard: dropping it closes the socket and stops its thread.
#[cfg(all(not(loom), unix, feature = "enabled"))]
pub(crate) fn open_control_socket(
    session: &Profiler,
) -> std::io::Result<Box<dyn std::fmt::Debug + Send + Sync>> {
    attach::server::Listener::open(session)
        .map(|l| Box::new(l) as Box<dyn std::fmt::Debug + Send + Sync>)
}

/// Opens a session's TCP endpoint ([`ProfilerBuilder::listen_tcp`]), through the crate root
/// for the same reason as [`open_control_socket`]: the guard and the address bound.
#[cfg(all(not(loom), unix, feature = "enabled"))]
pub(crate) fn open_tcp_endpoint(
    session: &Profiler,
    addrs: &[std::net::SocketAddr],
    remote: bool,
) -> std::io::Result<TcpGuard> {
    attach::server::TcpEndpoint::open(session, addrs, remote).map(|endpoint| TcpGuard {
        addr: endpoint.addr(),
        token: endpoint.token().to_owned(),
        guard: Box::new(endpoint),
    })
}

/// An open TCP endpoint, as the session keeps it: dropping it closes it.
#[cfg(not(loom))]
pub(crate) struct TcpGuard {
    /// The address bound.
    pub(crate) addr: std::net::SocketAddr,
    /// The token clients send first.
    pub(crate) token: String,
    /// The endpoint.
    #[allow(dead_code)] // Held for its `Drop`.
    pub(crate) guard: Box<dyn std::fmt::Debug + Send + Sync>,
}

#[cfg(not(loom))]
impl std::fmt::Debug for TcpGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the token: a debug print goes to logs.
        f.debug_struct("TcpGuard")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// No TCP endpoint here: opening one is an error that says why.
#[cfg(all(not(loom), not(all(unix, feature = "enabled"))))]
pub(crate) fn open_tcp_endpoint(
    _: &Profiler,
    _: &[std::net::SocketAddr],
    _: bool,
) -> std::io::Result<TcpGuard> {
    Err(no_attach_here())
}

/// No control socket here: opening one is an error that says why.
#[cfg(all(not(loom), not(all(unix, feature = "enabled"))))]
pub(crate) fn open_control_socket(
    _: &Profiler,
) -> std::io::Result<Box<dyn std::fmt::Debug + Send + Sync>> {
    Err(no_attach_here())
}

/// Why no session of this build can be attached to.
#[cfg(all(not(loom), not(all(unix, feature = "enabled"))))]
fn no_attach_here() -> std::io::Error {
    std::io::Error::other(if cfg!(unix) {
        "recording is compiled out (the `enabled` feature is off)"
    } else {
        "attaching needs Unix domain sockets, which this platform lacks"
    })
}
#[cfg(not(loom))]
pub mod thread;
#[cfg(not(loom))]
pub mod trace;
#[cfg(not(loom))]
#[cfg(feature = "tracing")]
pub mod tracing;

not_under_loom! {
    pub use capture::Capture;
    pub use record::alloc::TrackingAlloc;
    pub use record::args::ArgValue;
    pub use record::callsite::Callsite;
    pub use record::clock;
    pub use record::counter::Numeric;
    pub use record::follows::SeqGuard;
    pub use record::link::{Link, link};
    pub use record::memory::MemoryMode;
    pub use record::observe::{ObservedScope, Observer, ObserverHandle, Phase};
    pub use record::scope::ScopeGuard;
    pub use record::pool::SlowWriter;
    pub use session::{Profiler, ProfilerBuilder, Threads};
    #[allow(deprecated)]
    pub use session::Config; // old name (renames.sh)
}

#[cfg(loom)]
#[doc(hidden)]
pub use record::{buffer, dry, event};

// The README's Rust blocks, compiled and run as doctests so that they never rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctests {}

/// Records every call of a function as a scope, like a `scope!` at the top of its body.
///
/// ```
/// use tickscope::{Profiler, profile};
///
/// #[profile]
/// fn parse(input: &str) -> Result<usize, std::num::ParseIntError> {
///     let n: usize = input.trim().parse()?; // `?` and early returns close the scope
///     Ok(n)
/// }
///
/// struct Lexer;
///
/// #[profile] // every method, named `Lexer::method`
/// impl Lexer {
///     fn tokens(&self, text: &str) -> usize {
///         text.split_whitespace().count()
///     }
///
///     #[profile(name = "lexer reset")]
///     fn reset(&mut self) {}
///
///     #[profile(skip)]
///     fn cheap(&self) -> u8 {
///         0
///     }
/// }
///
/// let prof = Profiler::builder().current_thread().start();
/// let mut lexer = Lexer;
/// parse("42").unwrap();
/// assert!(parse("x").is_err());
/// lexer.tokens("a b c");
/// lexer.reset();
/// lexer.cheap();
/// prof.stop();
/// let report = prof.report();
/// assert_eq!(report.get("parse").unwrap().calls, 2);
/// assert_eq!(report.get("Lexer::tokens").unwrap().calls, 1);
/// assert_eq!(report.get("lexer reset").unwrap().calls, 1);
/// assert!(report.get("Lexer::cheap").is_none());
/// ```
///
/// # Forms
///
/// - On a free function, an associated function or a method: one scope per call, named after
///   the function (`Type::method` when the attribute is on the `impl` block, which is where the
///   type is known).
/// - On an `impl` block: every method with a body. `#[profile(skip)]` leaves a method out;
///   `#[profile(name = "...")]` on a method renames it. `const fn` methods are left out (a
///   scope reads the clock at run time); `#[profile]` directly on a `const fn` is an error.
/// - Arguments: `name = "..."` sets the scope name; `skip` leaves the function as it is;
///   `crate = path` names the tickscope crate when it is re-exported under another path.
///
/// The signature, generics, where clauses, `unsafe`, `extern` ABI, attributes and docs stay as
/// they are. Early `return`, `?` and panics close the scope.
///
/// # Async functions
///
/// An `async fn` holds nothing thread-bound across `.await`. Each call records
/// (a) one slice per poll, on the thread that polled it, shown `(poll)` in the call tree, and
/// (b) one logical span from its first poll to its completion (or its drop when cancelled), on
/// whichever threads the runtime moved it to: a
/// [`trace::AsyncSpan`]. The table counts the call once, with its wall duration from first
/// poll to completion as Total and the time its own polls ran (minus the scopes they opened) as
/// Self. A function that returns `impl Future` without being `async` is timed as a sync
/// function: its scope covers creating the future, not running it.
///
/// With the `enabled` feature off, the attribute returns the item unchanged.
#[cfg(not(loom))]
pub use tickscope_macros::profile;

mod macros;

/// Frees the event buffers kept warm for the next session and returns how many bytes that
/// gave back.
///
/// When a stopped session restarts or is dropped (and no one else holds its [`Capture`]), the
/// chunks its threads filled (32 KiB each) wait for the next session, up to 64 MiB, so that
/// recording never pays page faults twice. Call this when no more profiling is coming and the
/// memory matters. Chunks that running sessions, threads or captures still hold are not
/// touched.
///
/// ```
/// let prof = tickscope::Profiler::builder().current_thread().start();
/// for _ in 0..10_000 {
///     let _g = tickscope::scope!("work");
/// }
/// prof.stop();
/// drop(prof);
/// tickscope::release_memory();
/// assert_eq!(tickscope::release_memory(), 0); // nothing left to free
/// ```
#[cfg(not(loom))]
pub fn release_memory() -> usize {
    let _untracked = record::registry::Untracked::enter();
    record::pool::release()
}

#[cfg(not(loom))]
#[doc(hidden)]
pub mod __private;

#[cfg(all(feature = "test-hooks", not(loom)))]
mod hooks;
