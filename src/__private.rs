//! Support for the macros; not public API.

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

/// Sets the bytes of packed chunks' columns that reading capture files keeps unpacked, every
/// capture of the process together (64 MiB by default; 0: none, every chunk is read from its
/// file again when used), and returns the budget before: for tests of memory that must not
/// grow with a file's size. Not for programs.
pub fn set_unpacked_budget(bytes: usize) -> usize {
    crate::capture::compress::set_unpacked_budget(bytes)
}

/// Sets the number of scopes past which an HTML report written from captures on this thread
/// shows a level of detail (`None`: 4 Mi, `export::html`'s `SCOPE_BUDGET`): for tests of it
/// on small captures. Not for programs.
pub fn set_html_scope_budget(scopes: Option<u64>) {
    crate::export::html::set_scope_budget(scopes);
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

/// The diff of the traces that `base` and `new` decode to
/// ([`Diff::new`](crate::report::compare::Diff::new), or with `repetitions`
/// [`Diff::from_repetitions`](crate::report::compare::Diff::from_repetitions) of each capture
/// as a session), their threads read again a chunk at a time instead of decoded whole: the
/// same diff while each run's scopes fit the table's exact budget, past it time blocks' medians
/// from histograms (`tickscope diff`). `None` when a run cannot be read that way (async calls):
/// decode it whole. Not for programs.
pub fn diff_of_captures(
    base: &[crate::Capture],
    new: &[crate::Capture],
    options: &crate::report::compare::Options,
    repetitions: bool,
) -> Option<crate::report::compare::Diff> {
    crate::report::compare::Diff::of_captures(base, new, options, repetitions)
}

/// The HTML report with a diff view against the trace that `base` decodes to, as a
/// [`Format`](crate::export::Format) (`tickscope report --baseline`): its
/// [`write_captures`](crate::export::Format::write_captures) writes the report from the sums
/// and pieces of both runs, the diff made of the captures as [`diff_of_captures`] makes it, in
/// memory bounded by the scopes open at once (also of async calls), and declines when a run
/// cannot be read so (as [`diff_of_captures`] declines it); its
/// [`write`](crate::export::Format::write) decodes `base` whole. Either way the bytes of
/// [`html::Options::baseline`](crate::export::html::Options::baseline) with both traces
/// decoded whole, while each run's scopes fit the table's exact budget and the report's
/// blob. The options' own baseline is not used. Not for programs.
pub fn html_with_baseline<'a>(
    options: &'a crate::export::html::Options,
    base: &'a [&'a crate::Capture],
) -> impl crate::export::Format + 'a {
    crate::export::html::WithBaseline { options, base }
}
