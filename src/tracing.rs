//! A bridge from the `tracing` ecosystem: a `tracing-subscriber` [`Layer`](TickscopeLayer)
//! that records `tracing` spans and events as tickscope scopes (cargo feature `tracing`).
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
//! - **Fields** given when the span is created and values given later with `Span::record`
//!   become the arguments of each slice (a value recorded while the span is entered on this
//!   thread goes to the open slice at once).
//! - **`follows_from`.** A span that follows from a span entered on the current thread at the
//!   time of the `follows_from` call records each of its enters as a scope following from a
//!   [`Link`] captured in the innermost scope open there, usually that span's slice (so the
//!   Chrome export draws a flow arrow, and
//!   [`Report::by_origin`](crate::report::Report::by_origin) splits it by cause). Such a span
//!   is a plain scope per enter, not an async call. A `follows_from` whose origin is not
//!   entered on the calling thread is not recorded.
//! - **Events** (tickscope has no instant yet) are zero-length scopes named by the event's
//!   callsite (`event src/file.rs:12`), with the event's fields, `message` included, as
//!   arguments.
//!
//! # Cost
//!
//! Each `tracing` callsite is interned once (a leaked [`Callsite`] for it and
//! one per field name); recording a span or event does no string work beyond formatting the
//! values of its fields. The layer records only while a session wants the thread (the check
//! `scope!` makes); with no session running its hooks cost a relaxed load and a branch each on
//! top of what `tracing` and the registry cost anyway. Field values are formatted when the
//! span is created, while any session runs.
//!
//! Spans created while no session runs are not recorded, even if they are entered later
//! under a session. The layer does not call [`Observer`](crate::Observer)s.

use std::cell::RefCell;
use std::fmt;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ::tracing::field::{Field, Visit};
use ::tracing::span::{Attributes, Id, Record};
use ::tracing::subscriber::Interest;
use ::tracing::{Event, Metadata, Subscriber};
use rustc_hash::FxHashMap;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::record::args::Args;
use crate::record::callsite::{self, Callsite};
use crate::record::event::{RawEvent, RawKind};
use crate::record::link::Link;
use crate::record::{clock, registry, thread};

/// The layer that records `tracing` spans and events as tickscope scopes; see the
/// [module documentation](self).
#[derive(Clone, Copy, Debug, Default)]
pub struct TickscopeLayer {
    _private: (),
}

/// The tickscope layer, for `tracing_subscriber::registry().with(tickscope::tracing::layer())`.
pub fn layer() -> TickscopeLayer {
    TickscopeLayer::default()
}

/// One `tracing` callsite, interned: its scope's callsite and one key per field.
struct Site {
    callsite: &'static Callsite,
    /// The key of field `i` of the callsite's field set.
    keys: Box<[&'static Callsite]>,
}

/// Interned sites by the address of their `tracing` metadata.
static SITES: RwLock<Option<FxHashMap<usize, &'static Site>>> = RwLock::new(None);

/// Spans whose async call began (entered twice) and that are not closed yet: while there are
/// none, closing a span needs no lookup of its state.
static ASYNC_OPEN: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's cache of [`SITES`], so that an event costs no lock.
    static LOCAL_SITES: RefCell<FxHashMap<usize, &'static Site>> =
        RefCell::new(FxHashMap::default());
    /// The spans entered on this thread whose slice was recorded: (span id, end key).
    static ENTERED: RefCell<Vec<(u64, u32)>> = const { RefCell::new(Vec::new()) };
}

/// The interned site of `meta`, made the first time in the process.
fn site(meta: &'static Metadata<'static>) -> &'static Site {
    let key = std::ptr::from_ref(meta) as usize;
    if let Ok(Some(site)) = LOCAL_SITES.try_with(|m| m.borrow().get(&key).copied()) {
        return site;
    }
    let site = global_site(key, meta);
    let _ = LOCAL_SITES.try_with(|m| m.borrow_mut().insert(key, site));
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
        let callsite: &'static Callsite = Box::leak(Box::new(Callsite::new(
            meta.name(),
            file,
            line,
            meta.target(),
        )));
        let keys = meta
            .fields()
            .iter()
            .map(|f| callsite::intern_callsite(f.name(), "<tracing field>", 0, ""))
            .collect();
        Box::leak(Box::new(Site { callsite, keys }))
    })
}

/// What the layer keeps in a span's extensions.
struct SpanState {
    site: &'static Site,
    /// The argument records of the span's fields, pushed after each enter.
    args: Vec<RawEvent>,
    /// The link the span follows from, if any.
    follows: Option<Link>,
    /// The tick of the first recorded enter; 0 before it.
    first: AtomicU64,
    /// The async call's span id once its beginning is recorded (at the second enter); 0
    /// before.
    call: AtomicU32,
}

/// Writes field values into an [`Args`].
struct Fields<'a> {
    site: &'static Site,
    args: &'a mut Args,
}

impl Fields<'_> {
    fn key(&self, field: &Field) -> Option<&'static Callsite> {
        self.site.keys.get(field.index()).copied()
    }
}

impl Visit for Fields<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Some(key) = self.key(field) {
            self.args.i64(key, value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if let Some(key) = self.key(field) {
            self.args.u64(key, value);
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
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
        if let Some(key) = self.key(field) {
            self.args.str(key, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(key) = self.key(field) {
            self.args.debug(key, value);
        }
    }
}

/// The argument records of the values `record` visits.
fn encode(site: &'static Site, record: impl FnOnce(&mut Fields<'_>)) -> Vec<RawEvent> {
    let mut args = Args::new();
    record(&mut Fields {
        site,
        args: &mut args,
    });
    args.arguments().to_vec()
}

/// True when the span `id` is entered on this thread with a recorded slice.
fn entered_here(id: u64) -> bool {
    ENTERED
        .try_with(|e| e.borrow().iter().any(|&(s, _)| s == id))
        .unwrap_or(false)
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
        // Without the `enabled` feature no thread records: nothing to keep.
        if !cfg!(feature = "enabled") || registry::generation() == 0 {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let site = site(attrs.metadata());
        let args = if attrs.fields().is_empty() {
            Vec::new()
        } else {
            encode(site, |fields| attrs.record(fields))
        };
        span.extensions_mut().insert(SpanState {
            site,
            args,
            follows: None,
            first: AtomicU64::new(0),
            call: AtomicU32::new(0),
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if registry::generation() == 0 {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        let Some(state) = extensions.get_mut::<SpanState>() else {
            return;
        };
        let records = encode(state.site, |fields| values.record(fields));
        // A value recorded while the span's slice is the innermost one open here goes to it
        // now (arguments attach to the innermost open scope).
        let innermost = ENTERED
            .try_with(|e| e.borrow().last().map(|&(s, _)| s) == Some(id.into_u64()))
            .unwrap_or(false);
        if innermost && thread::thread_wants() {
            thread::push_all(&records);
        }
        state.args.extend_from_slice(&records);
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        if !thread::thread_wants() || !entered_here(follows.into_u64()) {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        if let Some(state) = extensions.get_mut::<SpanState>()
            && state.follows.is_none()
        {
            let link = crate::record::link::link();
            if link.is_recorded() {
                state.follows = Some(link);
            }
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !thread::thread_wants() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let extensions = span.extensions();
        let Some(state) = extensions.get::<SpanState>() else {
            return;
        };
        let cid = state.site.callsite.id();
        let tick = clock::now();
        if let Some(link) = state.follows {
            thread::push_all(&RawEvent::begin_follows(
                cid,
                tick,
                link.thread(),
                link.seq(),
            ));
        } else if state
            .first
            .compare_exchange(0, tick, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            // The first enter (the one that stored its tick): a plain scope, which stays one
            // unless the span is entered again.
            thread::push(RawEvent::begin(cid, tick));
        } else {
            let mut call = state.call.load(Ordering::Relaxed);
            if call == 0 {
                // The second enter: an async call begins, stamped with the first enter's tick
                // and naming its thread, so that decoding makes the first slice its first
                // poll.
                let fresh = thread::next_span_id();
                let won = state
                    .call
                    .compare_exchange(0, fresh, Ordering::Relaxed, Ordering::Relaxed);
                call = won.map_or_else(|other| other, |_| fresh);
                if won.is_ok() {
                    // Before anything that can close the span: its close sees the count.
                    ASYNC_OPEN.fetch_add(1, Ordering::Release);
                    // Stamped now (the first enter may precede this thread's window), naming
                    // the first enter's tick.
                    let first_tick = state.first.load(Ordering::Relaxed);
                    thread::push_all(&[
                        RawEvent::new(RawKind::AsyncBegin, cid, tick),
                        RawEvent::payload(call, first_tick),
                    ]);
                }
            }
            thread::push_all(&[
                RawEvent::new(RawKind::PollBegin, cid, tick),
                RawEvent::payload(call, 0),
            ]);
        }
        if !state.args.is_empty() {
            thread::push_all(&state.args);
        }
        let key = RawEvent::end_key(cid, tick);
        let _ = ENTERED.try_with(|e| e.borrow_mut().push((id.into_u64(), key)));
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        let id = id.into_u64();
        let key = ENTERED
            .try_with(|e| {
                let mut entered = e.borrow_mut();
                let at = entered.iter().rposition(|&(s, _)| s == id)?;
                Some(entered.remove(at).1)
            })
            .ok()
            .flatten();
        if let Some(key) = key {
            thread::push(RawEvent::end(key, clock::now()));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        // Most spans are entered once: a plain scope, nothing to end here.
        if ASYNC_OPEN.load(Ordering::Acquire) == 0 {
            return;
        }
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let extensions = span.extensions();
        let Some(state) = extensions.get::<SpanState>() else {
            return;
        };
        let call = state.call.load(Ordering::Relaxed);
        if call == 0 {
            return;
        }
        ASYNC_OPEN.fetch_sub(1, Ordering::Relaxed);
        if !thread::thread_wants() {
            return;
        }
        let cid = state.site.callsite.id();
        thread::push_all(&[
            RawEvent::new(RawKind::AsyncEnd, cid, clock::now()),
            RawEvent::payload(call, 0),
        ]);
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if !thread::thread_wants() {
            return;
        }
        let site = site(event.metadata());
        let cid = site.callsite.id();
        let mut args = Args::new();
        event.record(&mut Fields {
            site,
            args: &mut args,
        });
        let tick = clock::now();
        thread::push(RawEvent::begin(cid, tick));
        if !args.arguments().is_empty() {
            thread::push_all(args.arguments());
        }
        thread::push(RawEvent::end(RawEvent::end_key(cid, tick), tick));
    }
}
