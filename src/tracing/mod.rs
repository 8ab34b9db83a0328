//! A bridge from the `tracing` ecosystem: a `tracing-subscriber` [`Layer`](TickscopeLayer)
//! that records `tracing` spans and events as tickscope scopes (cargo feature `tracing`), and
//! a [`Subscriber`](TickscopeSubscriber) that records them the same way without
//! `tracing-subscriber`'s registry, for programs that need no other layer (see *Cost*: a
//! thread's spans write nothing there that other threads write).
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let subscriber = tracing_subscriber::registry().with(tickscope::tracing::layer());
//! tracing::subscriber::with_default(subscriber, || {
//!     let prof = tickscope::Profiler::builder().current_thread().start();
//!     {
//!         let _load = tracing::info_span!("load", file = "a.png").entered();
//!         let _g = tickscope::scope!("decode");
//!     }
//!     prof.stop();
//!     let report = prof.report();
//!     assert_eq!(report.get("load").unwrap().calls, 1);
//!     assert_eq!(report.get("decode").unwrap().calls, 1);
//! });
//! ```
//!
//! The subscriber, as each thread's default (or the global one,
//! `tracing::subscriber::set_global_default(tickscope::tracing::subscriber())`):
//!
//! ```
//! let _d = tracing::dispatcher::set_default(&tickscope::tracing::dispatch());
//! let prof = tickscope::Profiler::builder().current_thread().start();
//! tracing::info_span!("load", file = "a.png").in_scope(|| {});
//! prof.stop();
//! assert_eq!(prof.report().get("load").unwrap().calls, 1);
//! ```
//!
//! # What is recorded
//!
//! - **Spans.** Each enter of a `tracing` span records a slice on the thread that entered it,
//!   nested under the scopes open there, named by the span's name; its
//!   [`Callsite`] gives the file and line, and its
//!   [`module_path`](crate::Callsite::module_path) holds the span's **target**. A span entered
//!   once is a plain scope. A span entered again (an `#[instrument]`ed future is entered at
//!   every poll, on whichever threads) is recorded like a call of a `#[profile] async fn`: one
//!   logical call ([`trace::AsyncSpan`](crate::trace::AsyncSpan)) from its first enter to its
//!   close, whose slices, the first one included, are its polls
//!   ([`trace::SpanKind::Poll`](crate::trace::SpanKind::Poll)); the report counts it once.
//!   The layer keeps no state for that: each enter records the span's id and each close
//!   records the end of the id's use, and decoding groups the enters of one span across
//!   threads. A span created before the session started is recorded when entered during it,
//!   without the fields it was created with.
//! - **Fields** given when the span is created and values given later with `Span::record`
//!   become the arguments of each slice (a value recorded while the span is entered on this
//!   thread goes to the open slice at once; a field recorded again keeps only its last value
//!   for the next slices).
//! - **`follows_from`.** A span that follows from a span entered on the current thread at the
//!   time of the `follows_from` call records each of its enters as a scope following from a
//!   [`Link`] captured in the innermost scope open there, usually that span's slice (so the
//!   Chrome export draws a flow arrow, and
//!   [`Report::by_origin`](crate::report::Report::by_origin) splits it by cause). Such a span
//!   is a plain scope per enter, not an async call. A `follows_from` whose cause is not
//!   entered on the calling thread (a batch span following request spans made on other
//!   threads) records the two span ids ([`Flow::seq`](crate::trace::Flow::seq) 0): decoding
//!   links the slices of the spans that used those ids at that time, whichever threads entered
//!   them: the enter in progress then, else the effect's next enter and the cause's last one
//!   (ids are reused once a span closes: each id stands for the span that used it at the time
//!   of the call, as in the registry; an id no span entered by then, nor until its close, finds
//!   no cause, and a `follows_from` whose effect is never entered in the window is no link).
//! - **Events** are thread instants ([`trace::Instant`](crate::trace::Instant), as
//!   [`instant!`](crate::instant) records), with the event's fields, `message` included, as
//!   arguments, and the file and line of the event in their callsite. An event is named by its
//!   message when that is a literal (`info!("request done")` is `request done`), else by its
//!   target and line (`info!("took {ms} ms")` in `my_app::db` at line 12 is `my_app::db:12`),
//!   one name per callsite, interned once. `tracing` hands the layer the message formatted, so
//!   a message counts as a literal while each event of the callsite writes it in one piece and
//!   the same text: a message made of one argument alone (`info!("{name}")`) is named by its
//!   first text until another event of the callsite writes another one.
//!   Fields named as `tracing-opentelemetry` names metrics feed tickscope's counters and
//!   values instead: `monotonic_counter.NAME = n` and `counter.NAME = n` add `n` to counter
//!   `NAME` (as `counter!("NAME", add = n)`), `histogram.NAME = v` samples value `NAME` (as
//!   `value!("NAME", v)`).
//!
//! # Cost
//!
//! Each `tracing` callsite is interned once (a leaked [`Callsite`] for it and
//! one per field name); recording a span or event does no string work beyond formatting the
//! values of its fields. The layer records only while a session wants the thread (the check
//! `scope!` makes); with no session running its hooks cost a relaxed load and a branch each on
//! top of what `tracing` and the registry cost anyway. A span without fields keeps nothing in
//! the registry's extensions: its enter on the thread that created it finds its callsite in
//! a thread-local cache, and records five records in all (80 bytes: the enter with the span's
//! id, the exit, the close with the span's id). A span with fields keeps their encoded values
//! (formatted when the span is created, while any session runs) and copies them after each
//! enter.
//!
//! The span path of a thread (creating a span, entering, exiting and closing it there) writes
//! nothing in the layer that other threads read or write, but for a fresh chunk every 800 or
//! so spans (as `scope!` takes one every 2048 scopes). Around the layer, two things do:
//!
//! - **The registry.** `tracing-subscriber`'s `Registry` keeps each thread's stack of entered
//!   spans in one array of all threads' stacks, next to each other: every enter and exit
//!   writes a cache line that a neighbouring thread's stack shares.
//! - **A `Dispatch` shared by threads.** Each `Span` holds a clone of its `Dispatch`: when the
//!   subscriber is a `Dispatch` set per thread (`tracing::dispatcher::set_default`,
//!   `with_default`), an `Arc` whose reference count every span raises when made and lowers
//!   when dropped. The layer keeps the registry's fields, which every span call reads, off
//!   that count's cache lines (the subscriber it is stacked in takes its alignment of 128
//!   bytes, lost when the layer is boxed), but the count stays one line that every thread
//!   writes. The global default (`set_global_default`, `SubscriberInitExt::init`) has no
//!   count.
//!
//! With 16 threads recording flat out, those lines cost more than the rest of the span. The
//! [subscriber](TickscopeSubscriber) has neither: each thread takes a table of spans of its own
//! (handed to a later thread when it exits), a span's id names its table, its slot and the
//! slot's generation (so any thread finds it without a shared lookup; ids come back, as the
//! registry's do), each thread keeps its stack of entered spans in a thread-local, and it holds
//! no state itself, so that each thread may set a `Dispatch` of its own
//! ([`dispatch`]) and write only its own count. It records exactly what the layer records.
//! A span shared by threads writes its own slot (its count of handles) from each of them, as
//! in the registry.
//!
//! The layer does not call [`Observer`](crate::Observer)s. A span closed on a thread the session
//! does not record leaves its id's use open: an async call of it is then open at stop.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{OnceLock, RwLock};

use crate::record::hash::FxHashMap;
use ::tracing::field::{Field, Visit};
use ::tracing::span::{Attributes, Id, Record};
use ::tracing::subscriber::Interest;
use ::tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::record::args::Args;
use crate::record::callsite::{self, Callsite};
use crate::record::event::{RawEvent, RawKind};
use crate::record::link::Link;
use crate::record::{clock, registry, thread};

/// The layer that records `tracing` spans and events as tickscope scopes; see the
/// [module documentation](self).
///
/// Aligned to 128 bytes though it holds nothing: the subscriber stacked with it (`Layered`)
/// takes that alignment, so that in the `Arc` of a `tracing::Dispatch` it starts two cache
/// lines after the `Arc`'s reference counts (see the module's *Cost*).
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(128))]
pub struct TickscopeLayer {
    _private: (),
}

/// The tickscope layer, for `tracing_subscriber::registry().with(tickscope::tracing::layer())`.
pub fn layer() -> TickscopeLayer {
    TickscopeLayer::default()
}

mod subscriber;

pub use subscriber::TickscopeSubscriber;

/// The tickscope subscriber, for `tracing::subscriber::set_global_default` (or
/// `tracing::Dispatch::new`): records as the [layer] does, without `tracing-subscriber`'s
/// registry, writing nothing that other threads write on the path of a thread's own spans.
pub fn subscriber() -> TickscopeSubscriber {
    TickscopeSubscriber::default()
}

/// A `Dispatch` of the [tickscope subscriber](subscriber), this thread's own: set it as the
/// thread's default (`tracing::dispatcher::set_default(&tickscope::tracing::dispatch())`) on
/// each thread and no span writes a reference count that other threads write, as one
/// `Dispatch` shared by the threads makes each of its spans do. All of them are one subscriber:
/// a span made under one thread's is entered, recorded and closed under any other's.
pub fn dispatch() -> ::tracing::Dispatch {
    thread_local! {
        static DISPATCH: ::tracing::Dispatch = ::tracing::Dispatch::new(subscriber());
    }
    DISPATCH
        .try_with(Clone::clone)
        .unwrap_or_else(|_| ::tracing::Dispatch::new(subscriber()))
}

/// One `tracing` callsite, interned: its scope's callsite and one key per field.
struct Site {
    callsite: &'static Callsite,
    /// The key of field `i` of the callsite's field set.
    keys: Box<[&'static Callsite]>,
    /// For field `i` of an event named as a metric (the `tracing-opentelemetry` prefixes
    /// `counter.`, `monotonic_counter.` and `histogram.`): the record kind of its samples and
    /// its counter's or value's callsite.
    metrics: Box<[Option<(RawKind, &'static Callsite)>]>,
    /// For an event: the callsite of its message's name, once an event of the callsite gave
    /// its message in one piece (a literal format string without arguments).
    named: OnceLock<&'static Callsite>,
    /// For an event: set once an event of the callsite gave a message formatted from several
    /// pieces, or other than [`Site::named`]'s: its events are named by `target:line` since.
    formatted: AtomicBool,
}

impl Site {
    /// The callsite an event of this site is named by, given how its message was written
    /// (`None`: it has no message): its message when that is a static text, else
    /// `target:line` ([`Site::callsite`]).
    fn event_callsite(&self, message: Option<&Message>) -> &'static Callsite {
        if self.formatted.load(Ordering::Relaxed) {
            return self.callsite;
        }
        let Some(message) = message else {
            return self.callsite;
        };
        let named = match (message.pieces, &message.text) {
            (1, _) if message.same => self.named.get().copied(),
            (1, Some(text)) => {
                let named = *self.named.get_or_init(|| {
                    let _untracked = registry::Untracked::enter();
                    callsite::intern_callsite(
                        callsite::intern_str(text),
                        self.callsite.file(),
                        self.callsite.line(),
                        self.callsite.module_path(),
                    )
                });
                (named.name() == text.as_str()).then_some(named)
            }
            _ => None,
        };
        named.unwrap_or_else(|| {
            // Another text, or one made of several pieces: the message is formatted.
            self.formatted.store(true, Ordering::Relaxed);
            self.callsite
        })
    }
}

/// How an event's message was written, for its name ([`Site::event_callsite`]).
#[derive(Default)]
struct Message {
    /// The pieces it was written in: 1 for a literal format string without arguments (or a
    /// `&str` given as the `message` field).
    pieces: u32,
    /// True when its first piece is the name of [`Site::named`].
    same: bool,
    /// Its first piece, copied while [`Site::named`] is not set yet.
    text: Option<String>,
}

impl Message {
    /// Notes piece `s` of the message of an event of `site`.
    fn piece(&mut self, site: &Site, s: &str) {
        self.pieces += 1;
        if self.pieces == 1 && !site.formatted.load(Ordering::Relaxed) {
            match site.named.get() {
                Some(named) => self.same = named.name() == s,
                None => self.text = Some(s.to_owned()),
            }
        }
    }
}

/// The message of an event, written through to the arguments while [`Message`] notes how.
struct MessageText<'a> {
    value: &'a dyn fmt::Debug,
    site: &'a Site,
    seen: RefCell<Message>,
}

impl fmt::Display for MessageText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// Counts the pieces written to `out`.
        struct Pieces<'a, 'b, 'f> {
            out: &'a mut fmt::Formatter<'f>,
            text: &'b MessageText<'b>,
        }
        impl fmt::Write for Pieces<'_, '_, '_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                if !s.is_empty() {
                    self.text.seen.borrow_mut().piece(self.text.site, s);
                }
                self.out.write_str(s)
            }
        }
        fmt::write(
            &mut Pieces { out: f, text: self },
            format_args!("{:?}", self.value),
        )
    }
}

/// The counter or value that a field named `name` feeds: `monotonic_counter.NAME` and
/// `counter.NAME` add to counter `NAME`, `histogram.NAME` samples value `NAME`.
fn metric(name: &'static str) -> Option<(RawKind, &'static str)> {
    [
        ("monotonic_counter.", RawKind::CounterAdd),
        ("counter.", RawKind::CounterAdd),
        ("histogram.", RawKind::Value),
    ]
    .into_iter()
    .find_map(|(prefix, kind)| {
        name.strip_prefix(prefix)
            .filter(|n| !n.is_empty())
            .map(|n| (kind, n))
    })
}

/// Interned sites by the address of their `tracing` metadata.
static SITES: RwLock<Option<FxHashMap<usize, &'static Site>>> = RwLock::new(None);

/// Raised whenever a span that had no [`SpanState`] gets one after it was created (a
/// `follows_from`): every thread's [`Plain`] entries made before are then stale.
static STATE_EPOCH: AtomicU32 = AtomicU32::new(0);

/// The epoch a [`Plain`] entry is valid in: [`STATE_EPOCH`] plus the times recording resumed
/// after none was active ([`registry::resumed`]). Spans created while nothing recorded skipped
/// [`TickscopeLayer::on_new_span`], so an entry made before may name a span whose id the
/// registry has since given (after its slot's generation wrapped) to another span. Both only
/// grow, so their sum changes whenever either does.
#[inline(always)]
fn epoch() -> u32 {
    STATE_EPOCH
        .load(Ordering::Relaxed)
        .wrapping_add(registry::resumed())
}

/// Raised when a span without [`SpanState`] is first entered on a thread that does not hold it
/// as [`Plain`] (another thread created it), which marks it moved ([`Ext::moved`]): a span whose close sees
/// the value of its creation was entered on its own thread only, which decoding resolves there.
static MOVED: AtomicU32 = AtomicU32::new(0);

/// What the bridge keeps of a span that is not plain: in the registry's extensions
/// ([`TickscopeLayer`]) or in the slot of the tickscope subscriber's table
/// ([`TickscopeSubscriber`]).
#[derive(Default)]
struct Ext {
    /// The span's fields and link, when it has either.
    state: Option<SpanState>,
    /// For a span without state: [`MOVED`] was raised for it (its later enters off its thread
    /// write nothing shared).
    moved: bool,
}

/// Slots of a thread's [`Plain`] cache.
const PLAIN_SLOTS: usize = 64;

/// A span this thread created that has no [`SpanState`]: its id, its callsite's id and the
/// [`STATE_EPOCH`] it was made in. Its enter needs no lookup in the registry.
#[derive(Clone, Copy, Default)]
struct Plain {
    span: u64,
    callsite: u32,
    epoch: u32,
    /// [`MOVED`] when the span was created.
    moved: u32,
}

/// Slots of a thread's first-level cache of [`SITES`].
const SITE_SLOTS: usize = 64;

/// The layer's state on one thread, in one const-initialised thread-local without a
/// destructor (no lazy initialisation on the hot path).
struct Local {
    /// The plain spans this thread created lately, by the low bits of their id.
    plain: [Cell<Plain>; PLAIN_SLOTS],
    /// Interned sites by the address of their metadata, direct-mapped.
    sites: [Cell<(usize, Option<&'static Site>)>; SITE_SLOTS],
    /// The spans entered on this thread whose slice was recorded, innermost last: (span id,
    /// end key), the first [`STACK`] here and the deeper ones in [`DEEPER`].
    stack: [Cell<(u64, u32)>; STACK],
    /// How many spans are entered ([`Local::stack`] and [`DEEPER`] together).
    depth: Cell<usize>,
}

/// Entered spans a thread keeps in its [`Local::stack`] before [`DEEPER`].
const STACK: usize = 32;

impl Local {
    /// Notes the slice of span `span`, whose end carries `key`, as the innermost one entered.
    #[inline(always)]
    fn enter(&self, span: u64, key: u32) {
        let depth = self.depth.get();
        match self.stack.get(depth) {
            Some(slot) => slot.set((span, key)),
            None => {
                let _ = DEEPER.try_with(|d| d.borrow_mut().push((span, key)));
            }
        }
        self.depth.set(depth + 1);
    }

    /// Forgets the innermost slice of span `span` entered here and returns its end's key;
    /// `None` when none is entered here (its enter was not recorded).
    #[inline(always)]
    fn exit(&self, span: u64) -> Option<u32> {
        let depth = self.depth.get();
        // The usual case: the innermost span exits.
        if let Some(slot) = depth.checked_sub(1).and_then(|top| self.stack.get(top))
            && slot.get().0 == span
        {
            self.depth.set(depth - 1);
            return Some(slot.get().1);
        }
        self.exit_slow(span)
    }

    /// [`Local::exit`] for a span below the innermost one (guards dropped out of order) or
    /// deeper than [`STACK`].
    #[cold]
    #[inline(never)]
    fn exit_slow(&self, span: u64) -> Option<u32> {
        let mut all = self.entered();
        let at = all.iter().rposition(|&(s, _)| s == span)?;
        let (_, key) = all.remove(at);
        for (slot, &entry) in self.stack.iter().zip(&all) {
            slot.set(entry);
        }
        let _ = DEEPER.try_with(|d| {
            let mut deeper = d.borrow_mut();
            deeper.clear();
            deeper.extend(all.iter().skip(STACK));
        });
        self.depth.set(all.len());
        Some(key)
    }

    /// The spans entered here, outermost first.
    fn entered(&self) -> Vec<(u64, u32)> {
        let depth = self.depth.get();
        let mut all: Vec<(u64, u32)> = self.stack[..depth.min(STACK)]
            .iter()
            .map(Cell::get)
            .collect();
        if depth > STACK {
            let _ = DEEPER.try_with(|d| all.extend(d.borrow().iter().take(depth - STACK)));
        }
        all
    }

    /// The innermost span entered here.
    fn innermost(&self) -> Option<u64> {
        let depth = self.depth.get();
        match depth.checked_sub(1)? {
            top if top < STACK => Some(self.stack[top].get().0),
            _ => self.entered().last().map(|&(s, _)| s),
        }
    }
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            plain: [const {
                Cell::new(Plain {
                    span: 0,
                    callsite: 0,
                    epoch: 0,
                    moved: 0,
                })
            }; PLAIN_SLOTS],
            sites: [const { Cell::new((0, None)) }; SITE_SLOTS],
            stack: [const { Cell::new((0, 0)) }; STACK],
            depth: Cell::new(0),
        }
    };
    /// This thread's cache of [`SITES`], so that an event costs no lock.
    static LOCAL_SITES: RefCell<FxHashMap<usize, &'static Site>> =
        RefCell::new(FxHashMap::default());
    /// The spans entered on this thread beyond the first [`STACK`], innermost last.
    static DEEPER: RefCell<Vec<(u64, u32)>> = const { RefCell::new(Vec::new()) };
}

/// The slot of span `span` in a thread's [`Local::plain`] cache.
#[inline(always)]
fn plain_slot(span: u64) -> usize {
    // The registry's ids differ in their low bits between spans alive at once.
    (span as usize) % PLAIN_SLOTS
}

/// The callsite id of span `span` when this thread created it without state, since the last
/// [`STATE_EPOCH`] change.
#[inline(always)]
fn plain_callsite(span: u64) -> Option<u32> {
    let plain = LOCAL.try_with(|l| l.plain[plain_slot(span)].get()).ok()?;
    (plain.span == span && plain.epoch == epoch()).then_some(plain.callsite)
}

/// True when this thread created span `span` as [`Plain`] and no span was entered since on a
/// thread that did not create it: then every enter of `span` was on this thread.
#[inline(always)]
fn entered_only_here(span: u64) -> bool {
    LOCAL
        .try_with(|l| {
            let plain = l.plain[plain_slot(span)].get();
            plain.span == span
                && plain.epoch == epoch()
                && plain.moved == MOVED.load(Ordering::Relaxed)
        })
        .unwrap_or(false)
}

/// Notes (or, with `callsite` `None`, forgets) span `span` in this thread's [`Local::plain`] cache.
#[inline(always)]
fn set_plain(span: u64, callsite: Option<u32>) {
    let _ = LOCAL.try_with(|l| {
        let slot = &l.plain[plain_slot(span)];
        match callsite {
            Some(callsite) => slot.set(Plain {
                span,
                callsite,
                epoch: epoch(),
                moved: MOVED.load(Ordering::Relaxed),
            }),
            None if slot.get().span == span => slot.set(Plain::default()),
            None => {}
        }
    });
}

/// The interned site of `meta`, made the first time in the process.
#[inline]
fn site(meta: &'static Metadata<'static>) -> &'static Site {
    let key = std::ptr::from_ref(meta) as usize;
    // Metadata are statics, at least 8 bytes apart.
    let slot = (key >> 3) % SITE_SLOTS;
    if let Ok((cached, Some(site))) = LOCAL.try_with(|l| l.sites[slot].get())
        && cached == key
    {
        return site;
    }
    site_slow(key, slot, meta)
}

/// [`site`] when the thread's first-level cache misses.
#[cold]
#[inline(never)]
fn site_slow(key: usize, slot: usize, meta: &'static Metadata<'static>) -> &'static Site {
    let site = match LOCAL_SITES.try_with(|m| m.borrow().get(&key).copied()) {
        Ok(Some(site)) => site,
        _ => {
            let site = global_site(key, meta);
            let _ = LOCAL_SITES.try_with(|m| m.borrow_mut().insert(key, site));
            site
        }
    };
    let _ = LOCAL.try_with(|l| l.sites[slot].set((key, Some(site))));
    site
}

#[cold]
fn global_site(key: usize, meta: &'static Metadata<'static>) -> &'static Site {
    let _untracked = registry::Untracked::enter();
    if let Some(site) = crate::record::sync::recover(SITES.read())
        .as_ref()
        .and_then(|m| m.get(&key).copied())
    {
        return site;
    }
    let mut sites = crate::record::sync::recover(SITES.write());
    let sites = sites.get_or_insert_with(FxHashMap::default);
    sites.entry(key).or_insert_with(|| {
        let file = meta.file().unwrap_or("<tracing>");
        let line = meta.line().unwrap_or(0);
        // An event is named `target:line` unless its message names it (see `on_event`).
        let name = match (meta.is_event(), meta.line()) {
            (true, Some(line)) => callsite::intern_str(&format!("{}:{line}", meta.target())),
            (true, None) => meta.target(),
            (false, _) => meta.name(),
        };
        let callsite: &'static Callsite =
            Box::leak(Box::new(Callsite::new(name, file, line, meta.target())));
        let keys = meta
            .fields()
            .iter()
            .map(|f| callsite::intern_callsite(f.name(), "<tracing field>", 0, ""))
            .collect();
        let metrics = meta
            .fields()
            .iter()
            .map(|f| {
                let (kind, name) = metric(f.name()).filter(|_| meta.is_event())?;
                Some((
                    kind,
                    callsite::intern_callsite(name, file, line, meta.target()),
                ))
            })
            .collect();
        Box::leak(Box::new(Site {
            callsite,
            keys,
            metrics,
            named: OnceLock::new(),
            formatted: AtomicBool::new(false),
        }))
    })
}

/// What the layer keeps in a span's extensions: only spans with fields or a `follows_from`
/// have one (a plain span's enter needs only its callsite, see [`Plain`]).
struct SpanState {
    site: &'static Site,
    /// The argument records of the span's fields, pushed after each enter.
    args: Vec<RawEvent>,
    /// The link the span follows from, if any.
    follows: Option<Link>,
}

/// Writes field values into an [`Args`], and an event's metric fields into samples.
struct Fields<'a> {
    site: &'static Site,
    args: &'a mut Args,
    /// An event's counter and value samples (their tick not yet stamped); `None` for a span,
    /// whose fields are all arguments.
    samples: Option<&'a mut Vec<RawEvent>>,
    /// How an event's `message` field was written; `None` for a span, or before the field.
    message: Option<Message>,
}

impl Fields<'_> {
    fn key(&self, field: &Field) -> Option<&'static Callsite> {
        self.site.keys.get(field.index()).copied()
    }

    /// Takes a number of field `field` as a sample when it names a metric.
    fn sample(&mut self, field: &Field, raw: (u32, u64)) -> bool {
        let metric = self.site.metrics.get(field.index()).copied().flatten();
        match (metric, self.samples.as_deref_mut()) {
            (Some((kind, callsite)), Some(samples)) => {
                samples.extend(RawEvent::sample(kind, callsite.id(), 0, raw));
                true
            }
            _ => false,
        }
    }

    /// True for the `message` field of an event.
    fn is_message(&self, field: &Field) -> bool {
        self.samples.is_some() && field.name() == "message"
    }
}

impl Visit for Fields<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        if self.sample(field, (RawEvent::NUMBER_INT, value as u64)) {
            return;
        }
        if let Some(key) = self.key(field) {
            self.args.i64(key, value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        let raw = match i64::try_from(value) {
            Ok(v) => (RawEvent::NUMBER_INT, v as u64),
            Err(_) => (RawEvent::NUMBER_FLOAT, (value as f64).to_bits()),
        };
        if self.sample(field, raw) {
            return;
        }
        if let Some(key) = self.key(field) {
            self.args.u64(key, value);
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if self.sample(field, (RawEvent::NUMBER_FLOAT, value.to_bits())) {
            return;
        }
        if let Some(key) = self.key(field) {
            self.args.f64(key, value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if let Some(key) = self.key(field) {
            self.args.bool(key, value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if self.is_message(field) {
            let mut message = Message::default();
            if !value.is_empty() {
                message.piece(self.site, value);
            }
            self.message = Some(message);
        }
        if let Some(key) = self.key(field) {
            self.args.str(key, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let Some(key) = self.key(field) else {
            return;
        };
        if self.is_message(field) {
            let text = MessageText {
                value,
                site: self.site,
                seen: RefCell::new(Message::default()),
            };
            self.args.display(key, &text);
            self.message = Some(text.seen.into_inner());
            return;
        }
        self.args.debug(key, value);
    }
}

/// The argument records of the values `record` visits.
fn encode(site: &'static Site, record: impl FnOnce(&mut Fields<'_>)) -> Vec<RawEvent> {
    let mut args = Args::new();
    record(&mut Fields {
        site,
        args: &mut args,
        samples: None,
        message: None,
    });
    args.arguments().to_vec()
}

/// Appends the argument records `new` to `args`, less the arguments of `args` whose key
/// `new` gives again: a value recorded again replaces the earlier one (of a field given at
/// creation too), so a span's arguments stay one per field however often it records.
fn replace_args(args: &mut Vec<RawEvent>, new: &[RawEvent]) {
    let is_head = |r: &RawEvent| r.kind != RawKind::Bytes;
    let keys: Vec<u32> = new.iter().filter(|r| is_head(r)).map(|r| r.id).collect();
    let mut keep = true;
    args.retain(|r| {
        // A string's text records follow its head: they go with it.
        if is_head(r) {
            keep = !keys.contains(&r.id);
        }
        keep
    });
    args.extend_from_slice(new);
}

/// Where the bridge finds what it keeps of one span that is not plain: its metadata and its
/// [`Ext`], in the registry's extensions ([`TickscopeLayer`]) or in the tickscope
/// subscriber's table ([`TickscopeSubscriber`]).
trait SpanStore {
    /// The span's metadata.
    fn metadata(&self) -> &'static Metadata<'static>;
    /// Runs `f` on the span's [`Ext`], locked for that time.
    fn with_ext<R>(&self, f: impl FnOnce(&mut Ext) -> R) -> R;
}

impl<S> SpanStore for tracing_subscriber::registry::SpanRef<'_, S>
where
    S: for<'a> LookupSpan<'a>,
{
    fn metadata(&self) -> &'static Metadata<'static> {
        tracing_subscriber::registry::SpanRef::metadata(self)
    }

    fn with_ext<R>(&self, f: impl FnOnce(&mut Ext) -> R) -> R {
        let mut extensions = self.extensions_mut();
        if let Some(ext) = extensions.get_mut::<Ext>() {
            return f(ext);
        }
        let mut ext = Ext::default();
        let r = f(&mut ext);
        if ext.state.is_some() || ext.moved {
            extensions.insert(ext);
        }
        r
    }
}

/// True when the span `id` is entered on this thread with a recorded slice.
fn entered_here(id: u64) -> bool {
    LOCAL
        .try_with(|l| l.entered().iter().any(|&(s, _)| s == id))
        .unwrap_or(false)
}

/// Records the enter of a span this thread does not know as plain: one with state (fields, a
/// `follows_from`), or created on another thread. Returns the key of its end.
#[cold]
#[inline(never)]
fn enter_slow(id: &Id, span: &impl SpanStore) -> u32 {
    let metadata = span.metadata();
    span.with_ext(|ext| {
        if ext.state.is_none() && !ext.moved {
            // A plain span this thread did not create (or no longer holds): its close must
            // not take its enters for its own thread's only. Once per span, not per enter:
            // `MOVED` is read by every span's creation and close on every thread.
            ext.moved = true;
            MOVED.fetch_add(1, Ordering::Relaxed);
        }
        let state = ext.state.as_ref();
        let cid = state
            .map_or_else(|| site(metadata), |s| s.site)
            .callsite
            .id();
        let tick = clock::now();
        match state.and_then(|s| s.follows) {
            // A span that follows from another is a plain scope at every enter.
            Some(link) => thread::push_all(&RawEvent::begin_follows(
                cid,
                tick,
                link.thread(),
                link.seq(),
            )),
            None => thread::push_all(&RawEvent::span_enter(cid, tick, id.into_u64())),
        }
        if let Some(state) = state.filter(|s| !s.args.is_empty()) {
            thread::push_all(&state.args);
        }
        RawEvent::end_key(cid, tick)
    })
}

/// The bridge's part of the creation of span `id`: notes a plain span in this thread's
/// cache, or returns the state of a span with fields, for its subscriber to keep.
#[inline]
fn on_new_span(attrs: &Attributes<'_>, id: &Id) -> Option<SpanState> {
    // Without the `enabled` feature no thread records: nothing to keep.
    if !cfg!(feature = "enabled") || registry::generation() == 0 {
        return None;
    }
    let site = site(attrs.metadata());
    if attrs.fields().is_empty() {
        // A plain span: no state, its enters on this thread find its callsite here.
        set_plain(id.into_u64(), Some(site.callsite.id()));
        return None;
    }
    set_plain(id.into_u64(), None);
    Some(SpanState {
        site,
        args: encode(site, |fields| attrs.record(fields)),
        follows: None,
    })
}

/// The bridge's part of `Span::record` on span `id`, which `span` finds.
fn on_record<T: SpanStore>(id: &Id, values: &Record<'_>, span: impl FnOnce() -> Option<T>) {
    if registry::generation() == 0 {
        return;
    }
    let Some(span) = span() else {
        return;
    };
    span.with_ext(|ext| {
        let Some(state) = ext.state.as_mut() else {
            // A span without fields: `tracing` records no value into it.
            return;
        };
        let records = encode(state.site, |fields| values.record(fields));
        // A value recorded while the span's slice is the innermost one open here goes to it
        // now (arguments attach to the innermost open scope).
        let innermost = LOCAL
            .try_with(|l| l.innermost() == Some(id.into_u64()))
            .unwrap_or(false);
        if innermost && thread::thread_wants() {
            thread::push_all(&records);
        }
        replace_args(&mut state.args, &records);
    });
}

/// The bridge's part of `follows_from` of span `id` from span `follows`, which `span` finds.
fn on_follows_from<T: SpanStore>(id: &Id, follows: &Id, span: impl FnOnce() -> Option<T>) {
    if !thread::thread_wants() {
        return;
    }
    if !entered_here(follows.into_u64()) {
        // The cause runs elsewhere (a batch following requests made on other threads):
        // decoding finds both spans by their ids at this time.
        thread::push_all(&RawEvent::span_follows(
            clock::now(),
            id.into_u64(),
            follows.into_u64(),
        ));
        return;
    }
    let Some(span) = span() else {
        return;
    };
    let link = crate::record::link::link();
    if !link.is_recorded() {
        return;
    }
    let metadata = span.metadata();
    span.with_ext(|ext| match ext.state.as_mut() {
        Some(state) => {
            state.follows.get_or_insert(link);
        }
        None => {
            ext.state = Some(SpanState {
                site: site(metadata),
                args: Vec::new(),
                follows: Some(link),
            });
            // Enters must now find the state: no thread may take the span as plain.
            STATE_EPOCH.fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// The bridge's part of the enter of span `id`, which `span` finds when this thread does
/// not know it as plain.
#[inline(always)]
fn on_enter<T: SpanStore>(id: &Id, span: impl FnOnce() -> Option<T>) {
    if !thread::thread_wants() {
        return;
    }
    let span_id = id.into_u64();
    let key = match plain_callsite(span_id) {
        // The usual case: a span without fields, created on this thread.
        Some(cid) => {
            let tick = clock::now();
            thread::push_pair(RawEvent::span_enter(cid, tick, span_id));
            RawEvent::end_key(cid, tick)
        }
        None => {
            let Some(span) = span() else {
                return;
            };
            enter_slow(id, &span)
        }
    };
    let _ = LOCAL.try_with(|l| l.enter(span_id, key));
}

/// The bridge's part of the exit of span `id`.
#[inline(always)]
fn on_exit(id: &Id) {
    let id = id.into_u64();
    let key = LOCAL.try_with(|l| l.exit(id)).ok().flatten();
    if let Some(key) = key {
        thread::push(RawEvent::end(key, clock::now()));
    }
}

/// The bridge's part of the close of span `id`.
#[inline(always)]
fn on_close(id: &Id) {
    if !thread::thread_wants() {
        return;
    }
    let span_id = id.into_u64();
    let here = entered_only_here(span_id);
    set_plain(span_id, None);
    // Ends the span's async call if it was entered more than once, and the use of its id.
    thread::push_pair(RawEvent::span_close(0, clock::now(), span_id, here));
}

/// The bridge's part of an event.
fn on_event(event: &Event<'_>) {
    if !thread::thread_wants() {
        return;
    }
    let site = site(event.metadata());
    let mut args = Args::new();
    let mut samples = Vec::new();
    let mut fields = Fields {
        site,
        args: &mut args,
        samples: Some(&mut samples),
        message: None,
    };
    event.record(&mut fields);
    let message = fields.message.take();
    if !samples.is_empty() {
        // Each sample is a record and its payload: stamped now, before the instant.
        let tick = clock::now();
        for sample in samples.iter_mut().step_by(2) {
            sample.tick = tick;
        }
        thread::push_all(&samples);
    }
    args.instant(site.event_callsite(message.as_ref()), false);
}

impl<S> Layer<S> for TickscopeLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        site(meta);
        Interest::always()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(state) = on_new_span(attrs, id) else {
            return;
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().replace(Ext {
                state: Some(state),
                moved: false,
            });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        on_record(id, values, || ctx.span(id));
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        on_follows_from(id, follows, || ctx.span(id));
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        on_enter(id, || ctx.span(id));
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        on_exit(id);
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        on_close(&id);
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        on_event(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn a_plain_span_entered_on_another_thread_raises_moved_once() {
        let dispatch = ::tracing::Dispatch::new(tracing_subscriber::registry().with(layer()));
        let _d = ::tracing::dispatcher::set_default(&dispatch);
        let prof = crate::Profiler::builder().current_thread().start();
        let span = ::tracing::info_span!("moving");
        span.in_scope(|| {});
        let before = MOVED.load(Ordering::Relaxed);
        let span = std::thread::spawn({
            let prof = prof.clone();
            let dispatch = dispatch.clone();
            move || {
                prof.join_current_thread();
                let _d = ::tracing::dispatcher::set_default(&dispatch);
                for _ in 0..3 {
                    span.in_scope(|| {});
                }
                span
            }
        })
        .join()
        .unwrap();
        // Three enters on the other thread: one write of the shared counter, for the first.
        assert_eq!(MOVED.load(Ordering::Relaxed).wrapping_sub(before), 1);
        span.in_scope(|| {});
        drop(span);
        prof.stop();
        // Still one async call of its five enters, closed where it was made.
        let trace = prof.trace();
        assert_eq!(trace.async_spans.len(), 1);
        let call = &trace.async_spans[0];
        assert_eq!((call.polls, call.open_at_stop), (5, false));
        assert_eq!(prof.report().get("moving").unwrap().calls, 1);
    }
}
