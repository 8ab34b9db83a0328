//! Observers: callbacks on every scope's entry and exit (PyTorch's RecordFunction callbacks).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::num::NonZeroU32;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::record::callsite::Callsite;
use crate::record::link::Link;
use crate::record::value::Value;
use crate::record::{registry, thread};

/// Whether an [`ObservedScope`] is an entry or an exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The scope was entered (called before its entry is recorded).
    Enter,
    /// The scope was left (called after its exit is recorded).
    Exit,
}

/// What an observer receives for each scope entry and exit.
#[derive(Debug)]
pub struct ObservedScope<'a> {
    /// Entry or exit.
    pub phase: Phase,
    /// The scope's callsite; [`Callsite::name`] is its name.
    pub callsite: &'static Callsite,
    /// tickscope's id of the thread.
    pub thread: u64,
    /// For `scope!("name", seq)`, the scope's own link (its sequence number); for
    /// `scope!("name", follows = link)`, the link it follows from; `None` otherwise.
    pub link: Option<Link>,
    /// The scope's arguments (`scope!("name", key = value)`).
    pub args: &'a [(&'static str, Value)],
}

impl ObservedScope<'_> {
    /// The scope's name.
    pub fn name(&self) -> &'static str {
        self.callsite.name()
    }
}

type Callback = dyn Fn(&ObservedScope<'_>) + Send + Sync;

struct Entry {
    callback: Box<Callback>,
    /// An entry is delivered when a draw is below this; `u64::MAX` delivers all.
    threshold: u64,
    rng: AtomicU64,
    active: AtomicBool,
}

impl Entry {
    fn sampled(&self) -> bool {
        if self.threshold == u64::MAX {
            return true;
        }
        // SplitMix64 over a shared counter: a fixed seed gives a fixed sequence of draws.
        let mut z = self
            .rng
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) < self.threshold
    }
}

/// Active observers, global and per-thread: the scope hot path's only check.
static GLOBAL: Mutex<Vec<Arc<Entry>>> = Mutex::new(Vec::new());
/// Bumped whenever the global list changes, so threads refresh their copy.
static VERSION: AtomicU64 = AtomicU64::new(1);
/// Callback panics caught so far, process-wide (see [`Observer::panic_count`]).
static PANICS: AtomicU64 = AtomicU64::new(0);

/// A thread's view: its copy of the global list, its own observers, and the scopes it has
/// delivered entries for (so that their exits go to the same observers).
#[derive(Default)]
struct ThreadObservers {
    version: u64,
    global: Vec<Arc<Entry>>,
    mine: Vec<Arc<Entry>>,
    open: Vec<Option<Open>>,
    free: Vec<usize>,
}

struct Open {
    to: Vec<Arc<Entry>>,
    callsite: &'static Callsite,
    link: Option<Link>,
    args: Vec<(&'static str, Value)>,
}

thread_local! {
    static LOCAL: RefCell<ThreadObservers> = RefCell::new(ThreadObservers::default());
    /// Set while this thread runs observer callbacks: scopes they open are not observed.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// True when any observer is registered: one relaxed load. Scopes read it only once the
/// registry's generation says that sessions or observers exist.
#[inline(always)]
pub(crate) fn any() -> bool {
    registry::observers_exist()
}

/// Where this thread keeps a scope that observers took, until [`exit`] delivers its end:
/// taken by value, so each is exited once.
#[derive(Debug)]
pub(crate) struct Slot(NonZeroU32);

/// Delivers an entry to this thread's observers that sample it in; returns the slot that
/// [`exit`] takes, `None` when no observer took it.
#[cold]
#[inline(never)]
pub(crate) fn enter(
    callsite: &'static Callsite,
    link: Option<Link>,
    args: Vec<(&'static str, Value)>,
) -> Option<Slot> {
    if IN_CALLBACK.try_with(Cell::get).unwrap_or(true) {
        return None;
    }
    let Ok(to) = LOCAL.try_with(|local| {
        let mut local = local.borrow_mut();
        let version = VERSION.load(Ordering::Acquire);
        if local.version != version {
            local.global = crate::record::sync::lock(&GLOBAL).clone();
            local.version = version;
        }
        local.mine.retain(|e| e.active.load(Ordering::Relaxed));
        let local = &*local;
        let all = local.global.iter().chain(&local.mine);
        all.filter(|e| e.active.load(Ordering::Relaxed) && e.sampled())
            .cloned()
            .collect::<Vec<_>>()
    }) else {
        return None;
    };
    if to.is_empty() {
        return None;
    }
    let open = Open {
        to,
        callsite,
        link,
        args,
    };
    deliver(&open, Phase::Enter);
    LOCAL
        .try_with(|local| {
            let mut local = local.borrow_mut();
            let slot = match local.free.pop() {
                Some(slot) => {
                    local.open[slot] = Some(open);
                    slot
                }
                None => {
                    local.open.push(Some(open));
                    local.open.len() - 1
                }
            };
            // Slot `i` is kept as `i + 1`, never 0: an `Option<Slot>` takes 4 bytes.
            u32::try_from(slot + 1)
                .ok()
                .and_then(NonZeroU32::new)
                .map(Slot)
        })
        .ok()
        .flatten()
}

/// Delivers the exit of the scope in `slot` to the observers that took its entry and are
/// still registered.
#[cold]
#[inline(never)]
#[cfg_attr(not(feature = "enabled"), allow(dead_code))]
pub(crate) fn exit(slot: Slot) {
    let index = slot.0.get() as usize - 1;
    let open = LOCAL.try_with(|local| {
        let mut local = local.borrow_mut();
        let open = local.open.get_mut(index).and_then(Option::take);
        if open.is_some() {
            local.free.push(index);
        }
        open
    });
    if let Ok(Some(open)) = open {
        deliver(&open, Phase::Exit);
    }
}

fn deliver(open: &Open, phase: Phase) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            let _ = IN_CALLBACK.try_with(|c| c.set(false));
        }
    }
    let event = ObservedScope {
        phase,
        callsite: open.callsite,
        thread: thread::thread_id(),
        link: open.link,
        args: &open.args,
    };
    let _ = IN_CALLBACK.try_with(|c| c.set(true));
    let _reset = Reset;
    for entry in &open.to {
        if !entry.active.load(Ordering::Relaxed) {
            continue;
        }
        // A panic must not leave here: this may be a scope's drop while the thread unwinds,
        // where a second panic aborts the process.
        let called = catch_unwind(AssertUnwindSafe(|| (entry.callback)(&event)));
        if let Err(payload) = called {
            entry.active.store(false, Ordering::Relaxed);
            PANICS.fetch_add(1, Ordering::Relaxed);
            registry::observer_panicked(event.thread);
            drop_payload(payload);
        }
    }
}

/// Drops a caught panic's payload; one whose destructor panics in turn is leaked instead, so
/// that nothing unwinds out of [`deliver`].
fn drop_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// Options for a scope observer; register it with [`Observer::global`] or
/// [`Observer::current_thread`].
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use tickscope::{Observer, Phase, scope};
///
/// let entries = Arc::new(AtomicU64::new(0));
/// let seen = entries.clone();
/// let handle = Observer::new(move |scope| {
///     if scope.phase == Phase::Enter && scope.name() == "step" {
///         seen.fetch_add(1, Ordering::Relaxed);
///     }
/// })
/// .current_thread();
/// for _ in 0..3 {
///     let _g = scope!("step");
/// }
/// drop(handle); // unregisters it
/// let _g = scope!("step");
/// assert_eq!(entries.load(Ordering::Relaxed), 3);
/// ```
///
/// Observers run on the thread of the scope, whether or not a session records it, for
/// `scope!` and sync `#[profile]` functions (not for the polls of async ones). A scope that a
/// callback opens is recorded but not observed, so callbacks cannot recurse; they may
/// register and drop observers. While no observer is registered, a scope pays one relaxed
/// load for this feature.
///
/// # Callbacks that panic
///
/// A panic in a callback never leaves it: neither the scope nor the program sees it, and a
/// thread that is already unwinding through the scope goes on unwinding with its own panic
/// (a second panic there would abort the process). The panic is caught and counted: in
/// [`Observer::panic_count`] (process-wide), and in the [`Report::observer_panics`] and the
/// table footer of every session that records the thread at the time. The observer is then
/// deactivated: it gets no further calls (not even the exit of the scope whose entry it
/// panicked on; a call already under way on another thread finishes), while the other
/// observers keep theirs. Its handle stays registered until dropped, as usual. The panic hook
/// still runs for the panic, so its message is printed as for any other. Under
/// `panic = "abort"` nothing can be caught: a panicking callback aborts, as any panic does.
///
/// [`Report::observer_panics`]: crate::report::Report::observer_panics
#[must_use = "an observer does nothing until registered"]
pub struct Observer {
    callback: Box<Callback>,
    probability: f64,
    seed: u64,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("probability", &self.probability)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Observer {
    /// An observer calling `callback` on every scope entry and exit.
    pub fn new(callback: impl Fn(&ObservedScope<'_>) + Send + Sync + 'static) -> Self {
        Self {
            callback: Box::new(callback),
            probability: 1.0,
            seed: 0,
        }
    }

    /// Delivers each scope (its entry and its exit) with probability `p` (clamped to 0..=1).
    pub fn sample(mut self, p: f64) -> Self {
        self.probability = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        self
    }

    /// Seeds the sampling draws, for reproducible runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Callback panics caught so far in this process, over all observers (monotonic). Each
    /// deactivated the observer that raised it; see
    /// [callbacks that panic](Observer#callbacks-that-panic).
    pub fn panic_count() -> u64 {
        PANICS.load(Ordering::Relaxed)
    }

    fn entry(self) -> Arc<Entry> {
        let threshold = if self.probability >= 1.0 {
            u64::MAX
        } else {
            (self.probability * u64::MAX as f64) as u64
        };
        Arc::new(Entry {
            callback: self.callback,
            threshold,
            rng: AtomicU64::new(self.seed),
            active: AtomicBool::new(true),
        })
    }

    /// Registers the observer for the scopes of every thread.
    pub fn global(self) -> ObserverHandle {
        let entry = self.entry();
        crate::record::sync::lock(&GLOBAL).push(entry.clone());
        VERSION.fetch_add(1, Ordering::Release);
        added();
        ObserverHandle {
            entry,
            global: true,
        }
    }

    /// Registers the observer for the scopes of the calling thread.
    pub fn current_thread(self) -> ObserverHandle {
        let entry = self.entry();
        let _ = LOCAL.try_with(|local| local.borrow_mut().mine.push(entry.clone()));
        added();
        ObserverHandle {
            entry,
            global: false,
        }
    }
}

/// A registered observer; dropping it unregisters the observer (also from another thread).
/// Scopes entered before the drop get no exit call afterwards.
#[must_use = "dropping the handle unregisters the observer"]
pub struct ObserverHandle {
    entry: Arc<Entry>,
    global: bool,
}

impl std::fmt::Debug for ObserverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObserverHandle")
            .field("global", &self.global)
            .finish_non_exhaustive()
    }
}

impl Drop for ObserverHandle {
    fn drop(&mut self) {
        self.entry.active.store(false, Ordering::Relaxed);
        if self.global {
            let mut global = crate::record::sync::lock(&GLOBAL);
            global.retain(|e| !Arc::ptr_eq(e, &self.entry));
            VERSION.fetch_add(1, Ordering::Release);
        }
        registry::observer_removed();
    }
}

/// Counts a new observer and makes sure scopes look past their first check before it returns
/// (another thread's bump that read the count before this increment may still be landing, so
/// this checks under the registry lock rather than trusting the previous count).
fn added() {
    registry::observer_added();
}
