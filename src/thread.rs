//! Threads that join the sessions of the thread that spawns them: [`spawn`], [`Builder`] and
//! [`scope`] with the signatures of `std::thread`'s, for code that spawns its own workers.
//!
//! A session limited to the current thread ([`ProfilerBuilder::current_thread`](crate::ProfilerBuilder::current_thread),
//! the one to use in a `#[test]`) sees only the threads that join it. Threads spawned by the
//! code under test join it when that code spawns them through this module instead of
//! `std::thread`: each new thread joins every running session of its parent (those started or
//! joined on the parent thread, [`Sessions::current`]) before it runs its closure. A library
//! can use these unconditionally: with no session running they are `std::thread`'s at the cost
//! of one thread-local read, and with tickscope's `enabled` feature off they *are*
//! `std::thread`'s.
//!
//! ```
//! use tickscope::{Profiler, scope};
//!
//! // The code under test, which spawns workers of its own.
//! fn checksum(parts: Vec<Vec<u8>>) -> u64 {
//!     let workers: Vec<_> = parts
//!         .into_iter()
//!         .map(|part| {
//!             tickscope::thread::spawn(move || {
//!                 let _g = scope!("sum part");
//!                 part.iter().map(|&b| u64::from(b)).sum::<u64>()
//!             })
//!         })
//!         .collect();
//!     workers.into_iter().map(|w| w.join().unwrap()).sum()
//! }
//!
//! let prof = Profiler::builder().current_thread().start();
//! assert_eq!(checksum(vec![vec![1, 2], vec![3], vec![4, 5, 6]]), 21);
//! prof.stop();
//! let report = prof.report();
//! assert_eq!(report.get("sum part").unwrap().calls, 3);
//! assert_eq!(prof.trace().thread_count(), 3); // the three workers (this thread recorded nothing)
//! ```
//!
//! # Thread pools
//!
//! A pool's threads exist before the work reaches them: take the sessions when the pool is
//! built, inside the session, and have each pool thread join them when it starts.
//!
//! ```
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! let sessions = tickscope::thread::Sessions::current();
//! let runtime = tokio::runtime::Builder::new_multi_thread()
//!     .worker_threads(2)
//!     .on_thread_start(move || sessions.join())
//!     .build()
//!     .unwrap();
//! runtime.block_on(async {
//!     let task = tokio::spawn(async {
//!         let _g = tickscope::scope!("on a worker");
//!     });
//!     task.await.unwrap();
//! });
//! drop(runtime);
//! prof.stop();
//! assert_eq!(prof.report().get("on a worker").unwrap().calls, 1);
//! ```
//!
//! With rayon, the same through `ThreadPoolBuilder::start_handler`:
//!
//! ```
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! let sessions = tickscope::thread::Sessions::current();
//! let pool = rayon::ThreadPoolBuilder::new()
//!     .num_threads(2)
//!     .start_handler(move |_| sessions.join())
//!     .build()?;
//! pool.install(|| {
//!     let _g = tickscope::scope!("in the pool");
//! });
//! drop(pool);
//! prof.stop();
//! assert_eq!(prof.report().get("in the pool").unwrap().calls, 1);
//! # Ok::<(), rayon::ThreadPoolBuildError>(())
//! ```
//!
//! A global pool built before the session (rayon's
//! default pool, a runtime made outside the test) has threads that never join it: build the
//! pool in the session, or start an all-threads session.

#[cfg(not(feature = "enabled"))]
pub use std::thread::{Builder, Scope, ScopedJoinHandle, scope, spawn};

#[cfg(feature = "enabled")]
pub use enabled::{Builder, Scope, scope, spawn};
#[cfg(feature = "enabled")]
pub use std::thread::ScopedJoinHandle;

pub use crate::session::Sessions;

#[cfg(feature = "enabled")]
mod enabled {
    use std::io;
    use std::thread::{JoinHandle, ScopedJoinHandle};

    use crate::session::Sessions;

    /// `f` made to join `sessions` first, on the thread that runs it.
    fn joining<F: FnOnce() -> T, T>(sessions: Sessions, f: F) -> impl FnOnce() -> T {
        move || {
            sessions.join();
            drop(sessions);
            f()
        }
    }

    /// Spawns a thread that joins the running sessions of this thread ([`Sessions::current`])
    /// and then runs `f`: [`std::thread::spawn`] otherwise.
    ///
    /// # Panics
    ///
    /// When the OS cannot create a thread, as [`std::thread::spawn`]; [`Builder::spawn`]
    /// returns the error instead.
    pub fn spawn<F, T>(f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        std::thread::spawn(joining(Sessions::current(), f))
    }

    /// [`std::thread::Builder`] whose threads join the running sessions of the thread that
    /// spawns them, as [`spawn`]'s do.
    #[derive(Debug)]
    #[must_use = "a Builder spawns nothing until `spawn` is called"]
    pub struct Builder(std::thread::Builder);

    impl Builder {
        /// A builder with the defaults of [`std::thread::Builder::new`].
        pub fn new() -> Self {
            Self(std::thread::Builder::new())
        }

        /// Names the thread, as [`std::thread::Builder::name`]; tickscope's traces and
        /// tables show the name.
        pub fn name(self, name: String) -> Self {
            Self(self.0.name(name))
        }

        /// The size of the thread's stack, as [`std::thread::Builder::stack_size`].
        pub fn stack_size(self, size: usize) -> Self {
            Self(self.0.stack_size(size))
        }

        /// Spawns the thread, as [`std::thread::Builder::spawn`]; it joins this thread's
        /// running sessions before it runs `f`.
        ///
        /// # Errors
        ///
        /// When the OS cannot create the thread.
        pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
        where
            F: FnOnce() -> T + Send + 'static,
            T: Send + 'static,
        {
            self.0.spawn(joining(Sessions::current(), f))
        }

        /// Spawns a scoped thread, as [`std::thread::Builder::spawn_scoped`]; it joins this
        /// thread's running sessions before it runs `f`.
        ///
        /// # Errors
        ///
        /// When the OS cannot create the thread.
        pub fn spawn_scoped<'scope, 'env, F, T>(
            self,
            scope: &'scope Scope<'scope, 'env>,
            f: F,
        ) -> io::Result<ScopedJoinHandle<'scope, T>>
        where
            F: FnOnce() -> T + Send + 'scope,
            T: Send + 'scope,
        {
            self.0
                .spawn_scoped(&scope.0, joining(Sessions::current(), f))
        }
    }

    impl Default for Builder {
        fn default() -> Self {
            Self::new()
        }
    }

    /// The scope of [`scope`]: [`std::thread::Scope`], whose threads join the running
    /// sessions of the thread that spawns them.
    #[repr(transparent)]
    #[derive(Debug)]
    pub struct Scope<'scope, 'env: 'scope>(std::thread::Scope<'scope, 'env>);

    impl<'scope> Scope<'scope, '_> {
        /// Spawns a scoped thread, as [`std::thread::Scope::spawn`]; it joins this thread's
        /// running sessions before it runs `f`.
        ///
        /// # Panics
        ///
        /// When the OS cannot create a thread, as [`std::thread::Scope::spawn`].
        pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
        where
            F: FnOnce() -> T + Send + 'scope,
            T: Send + 'scope,
        {
            self.0.spawn(joining(Sessions::current(), f))
        }
    }

    /// [`std::thread::scope`], with a [`Scope`] whose threads join the running sessions of the
    /// thread that spawns them.
    pub fn scope<'env, F, T>(f: F) -> T
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
    {
        std::thread::scope(|s| {
            let s: *const std::thread::Scope<'_, 'env> = s;
            // SAFETY: `Scope` is `repr(transparent)` over `std::thread::Scope` with the same
            // lifetimes, so a reference to one is a valid reference to the other for as long
            // as the original borrow (`'scope`); nothing else is read or written. This is the
            // one way to hand the closure a `&'scope Scope` (std's signature, so that threads
            // spawned inside can capture it) without a copy that lives shorter than `'scope`.
            let ours = unsafe { &*(s.cast::<Scope<'_, 'env>>()) };
            f(ours)
        })
    }
}
