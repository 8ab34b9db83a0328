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
//!   where there is one) and a static callsite id into a 16-byte record in the current
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
//!   report; **export** writes traces ([`export`]). [`Profiler`] (`session.rs`) is the façade
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
//! 0.28 ns. Each recorded scope takes 32 bytes of buffer (two 16-byte records). A stopped
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
/// its public handle, so `session.rs` cannot name it without a cycle). The listener is kept as
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

/// Opens a scope that lasts until the returned [`ScopeGuard`] is dropped.
///
/// - `scope!("name")`: a static name. One `static` [`Callsite`] per call site; entering and
///   leaving the scope stamps two raw ticks into this thread's buffer.
/// - `scope!(name = expr)`: a name computed at run time (`&str`, `String`, …). It is evaluated
///   only while recording, and interned: the first use of each distinct name on a thread
///   takes a lock (and, once per process, leaks a copy of the name); later uses cost a hash
///   lookup.
/// - `scope!("name", follows = link)`: a scope that follows from a [`Link`] captured where the
///   work was created, usually on another thread (see [`Link`]).
/// - `scope!("name", seq)`: a scope numbered from this thread's sequence counter; the
///   returned [`SeqGuard`]'s [`link`](SeqGuard::link) is its (sequence number, thread) pair.
/// - `scope!("name", key = value, key = %display, key = ?debug)` (also after
///   `follows = link`): arguments, in tracing's field syntax. Plain values may be integers,
///   floats, `bool` or strings ([`ArgValue`]); `%` formats with `Display`, `?` with `Debug`.
///   They are evaluated only when a session records the thread or an [`Observer`] is
///   registered, and are stored with the scope's entry without allocating (at most 1 KiB of
///   records; longer strings are cut and end in `…`).
///
/// ```
/// # let prof = tickscope::Profiler::builder().current_thread().start();
/// let _outer = tickscope::scope!("load", file = "a.png", bytes = 4096);
/// let kind = "png";
/// let _inner = tickscope::scope!(name = format!("decode {kind}"));
/// # drop((_inner, _outer)); prof.stop();
/// # assert_eq!(prof.report().get("decode png").unwrap().calls, 1);
/// ```
#[cfg(all(feature = "enabled", not(loom)))]
#[macro_export]
macro_rules! scope {
    (name = $name:expr $(,)?) => {
        if $crate::__private::active() {
            $crate::__private::enter_dynamic(::core::convert::AsRef::<str>::as_ref(&$name))
        } else {
            $crate::ScopeGuard::inactive()
        }
    };
    (name = $name:expr, follows = $link:expr $(, $($args:tt)*)?) => {
        if $crate::__private::active() {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($($args)*)?);
            __tickscope_args.enter_named(
                ::core::convert::AsRef::<str>::as_ref(&$name),
                ::core::option::Option::Some(&$link),
            )
        } else {
            $crate::ScopeGuard::inactive()
        }
    };
    (name = $name:expr, $($args:tt)+) => {
        if $crate::__private::active() {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
            __tickscope_args.enter_named(
                ::core::convert::AsRef::<str>::as_ref(&$name),
                ::core::option::Option::None,
            )
        } else {
            $crate::ScopeGuard::inactive()
        }
    };
    ($name:literal $(,)?) => {
        $crate::__private::enter($crate::__callsite!($name))
    };
    ($name:literal, follows = $link:expr $(,)?) => {
        $crate::__private::enter_following($crate::__callsite!($name), &$link)
    };
    ($name:literal, seq $(,)?) => {
        $crate::__private::enter_seq($crate::__callsite!($name))
    };
    ($name:literal, follows = $link:expr, $($args:tt)+) => {
        if $crate::__private::active() {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
            __tickscope_args.enter($crate::__callsite!($name), ::core::option::Option::Some(&$link))
        } else {
            $crate::ScopeGuard::inactive()
        }
    };
    ($name:literal, $($args:tt)+) => {
        if $crate::__private::active() {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
            __tickscope_args.enter($crate::__callsite!($name), ::core::option::Option::None)
        } else {
            $crate::ScopeGuard::inactive()
        }
    };
    ($($other:tt)*) => {
        $crate::__scope_usage!($($other)*)
    };
}

/// Adds `key = value`, `key = %display` and `key = ?debug` arguments to an `Args`; used by
/// [`scope!`]. Not public API.
#[cfg(not(loom))]
#[doc(hidden)]
#[macro_export]
macro_rules! __scope_args {
    ($args:ident;) => {};
    ($args:ident; $key:ident = % $value:expr $(, $($rest:tt)*)?) => {
        $args.display($crate::__callsite!(@key $key), &$value);
        $crate::__scope_args!($args; $($($rest)*)?);
    };
    ($args:ident; $key:ident = ? $value:expr $(, $($rest:tt)*)?) => {
        $args.debug($crate::__callsite!(@key $key), &$value);
        $crate::__scope_args!($args; $($($rest)*)?);
    };
    ($args:ident; $key:ident = $value:expr $(, $($rest:tt)*)?) => {
        $args.value($crate::__callsite!(@key $key), &$value);
        $crate::__scope_args!($args; $($($rest)*)?);
    };
}

/// A `&'static` [`Callsite`] named `$name` for the place this macro is written; used by
/// [`scope!`] and [`profile`]. Not public API.
#[cfg(not(loom))]
#[doc(hidden)]
#[macro_export]
macro_rules! __callsite {
    (@key $key:ident) => {{
        static __TICKSCOPE_KEY: $crate::Callsite = $crate::__private::callsite(
            ::core::stringify!($key),
            ::core::file!(),
            ::core::line!(),
            ::core::module_path!(),
        );
        &__TICKSCOPE_KEY
    }};
    ($name:literal) => {{
        static __TICKSCOPE_CALLSITE: $crate::Callsite = $crate::__private::callsite(
            $name,
            ::core::file!(),
            ::core::line!(),
            ::core::module_path!(),
        );
        &__TICKSCOPE_CALLSITE
    }};
}

/// Opens a scope (instrumentation is compiled out: the `enabled` feature is off).
#[cfg(all(not(feature = "enabled"), not(loom)))]
#[macro_export]
macro_rules! scope {
    (name = $name:expr $(,)?) => {{
        if false {
            let _ = &$name;
        }
        $crate::ScopeGuard::inactive()
    }};
    (name = $name:expr, follows = $link:expr $(, $($args:tt)*)?) => {{
        let _: &$crate::Link = &$link;
        if false {
            let _ = &$name;
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($($args)*)?);
        }
        $crate::ScopeGuard::inactive()
    }};
    (name = $name:expr, $($args:tt)+) => {{
        if false {
            let _ = &$name;
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
        }
        $crate::ScopeGuard::inactive()
    }};
    ($name:literal $(,)?) => {{
        let _: &'static str = $name;
        $crate::ScopeGuard::inactive()
    }};
    ($name:literal, follows = $link:expr $(,)?) => {{
        let _: &'static str = $name;
        let _: &$crate::Link = &$link;
        $crate::ScopeGuard::inactive()
    }};
    ($name:literal, seq $(,)?) => {{
        let _: &'static str = $name;
        $crate::SeqGuard::inactive()
    }};
    ($name:literal, follows = $link:expr, $($args:tt)+) => {{
        let _: &'static str = $name;
        let _: &$crate::Link = &$link;
        if false {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
        }
        $crate::ScopeGuard::inactive()
    }};
    ($name:literal, $($args:tt)+) => {{
        let _: &'static str = $name;
        if false {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
        }
        $crate::ScopeGuard::inactive()
    }};
    ($($other:tt)*) => {
        $crate::__scope_usage!($($other)*)
    };
}

/// The error of a `scope!` that matches none of its forms, saying which forms there are; used
/// by [`scope!`]. Not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __scope_usage {
    ($name:ident $(, $($rest:tt)*)?) => {
        ::core::compile_error!(::core::concat!(
            "scope! takes a string literal, `scope!(\"parse\")`, or a name computed at run time, ",
            "`scope!(name = ",
            ::core::stringify!($name),
            ")`; arguments follow the name: `scope!(\"parse\", bytes = n)`"
        ))
    };
    () => {
        ::core::compile_error!(
            "scope! needs a name: `scope!(\"parse\")`, or `scope!(name = expr)` for a name computed at run time"
        )
    };
    ($($other:tt)*) => {
        ::core::compile_error!(::core::concat!(
            "scope! forms: `scope!(\"name\")`, `scope!(\"name\", key = value, ..)`, ",
            "`scope!(\"name\", follows = link)`, `scope!(\"name\", seq)`, ",
            "`scope!(name = expr)`, `scope!(name = expr, key = value, ..)`; not `scope!(",
            ::core::stringify!($($other)*),
            ")`"
        ))
    };
}

/// Records a sample of a process-wide counter: `counter!("name", set = n)` sets it to `n`,
/// `counter!("name", add = n)` adds `n` to it.
///
/// `n` is an integer (recorded as `i64`, exactly) or a float ([`Numeric`]). Each call costs one
/// tick and two 16-byte records on the current thread's buffer; while no session records the
/// thread, one relaxed load and a branch, and `n` is not evaluated. Decoding merges every
/// thread's samples of a name, in time order, into one [`trace::CounterTrack`] whose values
/// are the counter's value after each sample: a `set` replaces it, an `add` adds to it, so the
/// running sum of `add`s from many threads is exact. Without the `enabled` feature the macro
/// compiles to nothing.
///
/// ```
/// use tickscope::{Profiler, counter};
///
/// let prof = Profiler::builder().current_thread().start();
/// counter!("queue_depth", set = 3);
/// counter!("bytes_sent", add = 512u64);
/// counter!("bytes_sent", add = 1024u64);
/// prof.stop();
/// let trace = prof.trace();
/// let sent = trace.counter("bytes_sent").unwrap();
/// assert_eq!(sent.last().unwrap().value.as_f64(), 1536.0);
/// ```
#[cfg(all(feature = "enabled", not(loom)))]
#[macro_export]
macro_rules! counter {
    ($name:literal, set = $value:expr $(,)?) => {
        if $crate::__private::recording() {
            $crate::__private::sample(
                $crate::__callsite!($name),
                $crate::__private::RawKind::CounterSet,
                $value,
            );
        }
    };
    ($name:literal, add = $value:expr $(,)?) => {
        if $crate::__private::recording() {
            $crate::__private::sample(
                $crate::__callsite!($name),
                $crate::__private::RawKind::CounterAdd,
                $value,
            );
        }
    };
}

/// Records a sample of a value distribution: `value!("name", v)`.
///
/// A distribution has no timeline of its own: the report gives the count, min, max, mean,
/// p50 and p99 of each name's samples ([`report::ValueStats`]). `v` is an integer or a float
/// ([`Numeric`]); the cost is that of [`counter!`].
///
/// ```
/// use tickscope::{Profiler, value};
///
/// let prof = Profiler::builder().current_thread().start();
/// for batch in [4, 8, 16] {
///     value!("batch_size", batch);
/// }
/// prof.stop();
/// let stats = prof.report().value("batch_size").unwrap().clone();
/// assert_eq!((stats.count, stats.min, stats.max, stats.mean), (3, 4.0, 16.0, 28.0 / 3.0));
/// ```
#[cfg(all(feature = "enabled", not(loom)))]
#[macro_export]
macro_rules! value {
    ($name:literal, $value:expr $(,)?) => {
        if $crate::__private::recording() {
            $crate::__private::sample(
                $crate::__callsite!($name),
                $crate::__private::RawKind::Value,
                $value,
            );
        }
    };
}

/// Records an instant: a zero-duration event on the current thread, or process-wide.
///
/// - `instant!("name")`: on this thread's track.
/// - `instant!("name", process)`: process-wide (Chrome's `"s":"p"`).
/// - `instant!("name", key = value, …)` and `instant!("name", process, key = value, …)`:
///   with arguments, in `scope!`'s syntax (`%` Display, `?` Debug), evaluated only while
///   recording.
///
/// One tick and one 16-byte record (plus the arguments' records); while no session records
/// the thread, one relaxed load and a branch. Decoded into [`trace::Trace::instants`].
///
/// ```
/// use tickscope::{Profiler, instant};
///
/// let prof = Profiler::builder().current_thread().start();
/// instant!("cache_miss", key = 42u64);
/// instant!("flush", process);
/// prof.stop();
/// let trace = prof.trace();
/// assert_eq!(trace.instants.len(), 2);
/// assert_eq!(trace.instants[0].name(), "cache_miss");
/// assert_eq!(trace.instants[0].args[0].0, "key");
/// ```
#[cfg(all(feature = "enabled", not(loom)))]
#[macro_export]
macro_rules! instant {
    ($name:literal $(,)?) => {
        if $crate::__private::recording() {
            $crate::__private::instant($crate::__callsite!($name), false);
        }
    };
    ($name:literal, process $(,)?) => {
        if $crate::__private::recording() {
            $crate::__private::instant($crate::__callsite!($name), true);
        }
    };
    ($name:literal, process, $($args:tt)+) => {
        if $crate::__private::recording() {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
            __tickscope_args.instant($crate::__callsite!($name), true);
        }
    };
    ($name:literal, $($args:tt)+) => {
        if $crate::__private::recording() {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
            __tickscope_args.instant($crate::__callsite!($name), false);
        }
    };
}

/// Records a counter sample (instrumentation is compiled out: the `enabled` feature is off).
#[cfg(all(not(feature = "enabled"), not(loom)))]
#[macro_export]
macro_rules! counter {
    ($name:literal, set = $value:expr $(,)?) => {{
        let _: &'static str = $name;
        if false {
            $crate::__private::check_number($value);
        }
    }};
    ($name:literal, add = $value:expr $(,)?) => {{
        let _: &'static str = $name;
        if false {
            $crate::__private::check_number($value);
        }
    }};
}

/// Records a value sample (instrumentation is compiled out: the `enabled` feature is off).
#[cfg(all(not(feature = "enabled"), not(loom)))]
#[macro_export]
macro_rules! value {
    ($name:literal, $value:expr $(,)?) => {{
        let _: &'static str = $name;
        if false {
            $crate::__private::check_number($value);
        }
    }};
}

/// Records an instant (instrumentation is compiled out: the `enabled` feature is off).
#[cfg(all(not(feature = "enabled"), not(loom)))]
#[macro_export]
macro_rules! instant {
    ($name:literal $(,)?) => {{
        let _: &'static str = $name;
    }};
    ($name:literal, process $(,)?) => {{
        let _: &'static str = $name;
    }};
    ($name:literal, process, $($args:tt)+) => {{
        let _: &'static str = $name;
        if false {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
        }
    }};
    ($name:literal, $($args:tt)+) => {{
        let _: &'static str = $name;
        if false {
            let mut __tickscope_args = $crate::__private::Args::new();
            $crate::__scope_args!(__tickscope_args; $($args)+);
        }
    }};
}

/// Frees the event buffers kept warm for the next session and returns how many bytes that
/// gave back.
///
/// When a stopped session restarts or is dropped (and no one else holds its [`Capture`]), the
/// chunks its threads filled (64 KiB each) wait for the next session, up to 64 MiB, so that
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

/// Support for the macros; not public API.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod __private {
    use crate::record::callsite::Callsite;
    use crate::record::follows::SeqGuard;
    use crate::record::link::Link;
    use crate::record::scope::ScopeGuard;

    /// True when a session wants this thread's events or an observer is registered: when a
    /// scope's dynamic name or arguments must be evaluated. One relaxed load when neither.
    #[inline(always)]
    pub fn active() -> bool {
        use crate::record::{registry, thread};
        let generation = registry::generation();
        generation != 0 && (registry::observers_exist() || thread::thread_wants_at(generation))
    }

    /// Sets the number of scopes past which a table made from captures
    /// ([`Table::from_captures`](crate::table::Table::from_captures)) takes its p50 and p99
    /// from histograms instead of every duration (8 Mi by default): for tests of both ways on
    /// small captures. Not for programs.
    pub fn set_exact_quantile_budget(scopes: u64) {
        crate::decode::quantiles::set_exact_budget(scopes);
    }

    /// The records this process has decoded so far, every decoding together (one relaxed
    /// load): the `tickscope` command's progress display counts a decoding's records with it.
    pub fn decoded_records() -> u64 {
        crate::decode::decoded_records()
    }

    /// A callsite for a `static`: `scope!` and `#[profile]` put one at each call site.
    pub const fn callsite(
        name: &'static str,
        file: &'static str,
        line: u32,
        module_path: &'static str,
    ) -> Callsite {
        Callsite::new(name, file, line, module_path)
    }

    /// The cache of a method's callsite under `#[profile]` on the method alone: the type
    /// name of `Self` it was made for, and the callsite.
    pub type MethodCallsite = std::sync::OnceLock<(&'static str, &'static Callsite)>;

    /// The callsite `Type::method` of a method profiled on its own, where the macro does not
    /// see the type: named after `type_name` (`core::any::type_name::<Self>()`, its path and
    /// generics left out), made once per callsite and kept in `cache`. A method shared by
    /// several types (a trait's provided method, a blanket impl) gets one callsite per type.
    #[inline]
    pub fn method_callsite(
        cache: &'static MethodCallsite,
        type_name: &'static str,
        method: &'static str,
        file: &'static str,
        line: u32,
        module_path: &'static str,
    ) -> &'static Callsite {
        match cache.get() {
            // One type's name is one constant: the addresses match, and the text is the
            // fallback.
            Some(&(made_for, callsite))
                if std::ptr::eq(made_for, type_name) || made_for == type_name =>
            {
                callsite
            }
            _ => new_method_callsite(cache, type_name, method, file, line, module_path),
        }
    }

    #[cold]
    fn new_method_callsite(
        cache: &'static MethodCallsite,
        type_name: &'static str,
        method: &'static str,
        file: &'static str,
        line: u32,
        module_path: &'static str,
    ) -> &'static Callsite {
        use std::collections::HashMap;
        use std::sync::Mutex;

        use crate::record::callsite::{intern_callsite, intern_str};
        /// The callsites of the types after the first of each method (a trait's provided
        /// method, a blanket impl), by the method's cache and the type's name.
        type Others = HashMap<(usize, &'static str), &'static Callsite>;
        static OTHERS: Mutex<Option<Others>> = Mutex::new(None);

        let _untracked = crate::record::registry::Untracked::enter();
        let key = (std::ptr::from_ref(cache) as usize, type_name);
        let mut others = crate::record::sync::lock(&OTHERS);
        let others = others.get_or_insert_with(HashMap::new);
        if let Some(&callsite) = others.get(&key) {
            return callsite;
        }
        let name = intern_str(&format!("{}::{method}", short_type_name(type_name)));
        let callsite = intern_callsite(name, file, line, module_path);
        // The first type keeps the cache; the others are found in the map, without a name
        // made again.
        if cache.set((type_name, callsite)).is_err() {
            others.insert(key, callsite);
        }
        callsite
    }

    /// `Foo` for `crate::module::Foo<T>`, `&mut Foo<'a>` or `Foo`; other types (tuples,
    /// slices, arrays) as they are, their paths left in.
    pub(crate) fn short_type_name(type_name: &str) -> &str {
        let bare = type_name
            .trim_start_matches('&')
            .trim_start_matches("mut ")
            .trim_start_matches("dyn ");
        if bare.starts_with(['(', '[', '*']) {
            return type_name;
        }
        let path = bare.split('<').next().unwrap_or(bare);
        path.rsplit("::").next().unwrap_or(path)
    }

    /// `scope!("name")`.
    #[inline(always)]
    pub fn enter(callsite: &'static Callsite) -> ScopeGuard {
        ScopeGuard::enter(callsite)
    }

    /// `scope!(name = expr)`.
    #[inline]
    pub fn enter_dynamic(name: &str) -> ScopeGuard {
        ScopeGuard::enter_dynamic(name)
    }

    /// `scope!("name", follows = link)`.
    #[inline]
    pub fn enter_following(callsite: &'static Callsite, link: &Link) -> ScopeGuard {
        ScopeGuard::enter_following(callsite, link)
    }

    /// `scope!("name", seq)`.
    #[inline]
    pub fn enter_seq(callsite: &'static Callsite) -> SeqGuard {
        SeqGuard::enter(callsite)
    }

    pub use crate::record::args::Args;
    pub use crate::record::event::RawKind;

    /// True when a session records this thread (`counter!`, `value!`, `instant!`).
    #[inline(always)]
    pub fn recording() -> bool {
        crate::record::counter::recording()
    }

    /// `counter!` and `value!` while recording.
    #[inline(always)]
    pub fn sample(callsite: &'static Callsite, kind: RawKind, value: impl crate::Numeric) {
        crate::record::counter::sample(callsite, kind, value);
    }

    /// `instant!` without arguments while recording.
    #[inline(always)]
    pub fn instant(callsite: &'static Callsite, process: bool) {
        crate::record::counter::instant(callsite, process);
    }

    /// Type-checks a counter's or value's number (the macros without the `enabled` feature).
    #[inline(always)]
    pub fn check_number(_: impl crate::Numeric) {}

    pub use crate::record::async_span::{AsyncSpanGuard, instrument};

    /// Hooks of tickscope's own tests and benchmarks into its internals (the `test-hooks`
    /// feature); not public API.
    #[cfg(feature = "test-hooks")]
    pub use crate::hooks::*;
}

/// Hooks of tickscope's own tests and benchmarks into its internals (the `test-hooks`
/// feature); not public API.
#[cfg(all(feature = "test-hooks", not(loom)))]
mod hooks {
    pub use crate::capture::format;
    pub use crate::record::event::RawEvent;

    /// A capture of records made by hand (benchmarks of decoding): one `(thread id, records)`
    /// per thread, ticks that are nanoseconds, and the window `start_tick..=end_tick`.
    pub fn capture_from_records(
        threads: Vec<(u64, Vec<RawEvent>)>,
        start_tick: u64,
        end_tick: u64,
    ) -> crate::Capture {
        crate::Capture::from_records(threads, start_tick, end_tick)
    }

    /// Chunks allocated and not freed, process-wide.
    pub fn live_chunks() -> usize {
        crate::record::chunk::live_chunks()
    }

    /// Chunks reserved by running sessions and not taken yet
    /// ([`ProfilerBuilder::reserve_memory`](crate::ProfilerBuilder::reserve_memory)).
    pub fn reserved_chunks() -> usize {
        crate::record::pool::reserved_chunks()
    }

    /// Threads in the registry (live, or exited with events still needed).
    pub fn registered_threads() -> usize {
        crate::record::registry::thread_count()
    }

    /// The running flight recorder's chunk reads so far: `(ahead, late)`, by its scanner and
    /// when recycled; `None` without one.
    pub fn flight_reads() -> Option<(u64, u64)> {
        crate::record::flight::reads()
    }

    /// Pauses (or resumes) the flight recorder's scanner (tests: chunks then are read when
    /// recycled, or by [`flight_read_pending`]).
    pub fn flight_pause_scanner(paused: bool) {
        crate::record::flight::pause_scanner(paused);
    }

    /// Reads the flight recorder's complete chunks not read yet on this thread, as its
    /// scanner does; returns how many.
    pub fn flight_read_pending() -> usize {
        crate::record::flight::read_pending()
    }
}
