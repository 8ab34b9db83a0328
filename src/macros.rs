//! The macros `scope!`, `counter!`, `value!` and `instant!`, with the instrumentation compiled
//! in (the `enabled` feature) and compiled out, and the helpers they expand to.

#[cfg(doc)]
use crate::{ArgValue, Callsite, Link, Numeric, Observer, ScopeGuard, SeqGuard, report, trace};

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
