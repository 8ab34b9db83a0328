//! What the layer and the subscriber share: the bridge's part of each `tracing` hook (a span's
//! creation, `record`, `follows_from`, enter, exit and close, an event), and what it keeps
//! of a span that is not plain, which each finds in its own store ([`SpanStore`]).

use std::sync::atomic::Ordering;

use ::tracing::span::{Attributes, Id, Record};
use ::tracing::{Event, Metadata};

use super::fields::{Fields, encode, replace_args};
use super::local::{
    LOCAL, MOVED, STATE_EPOCH, entered_here, entered_only_here, plain_callsite, set_plain, site,
};
use super::site::Site;
use crate::record::args::Args;
use crate::record::event::RawEvent;
use crate::record::link::Link;
use crate::record::{clock, registry, thread};

/// What the bridge keeps of a span that is not plain: in the registry's extensions
/// ([`TickscopeLayer`](super::TickscopeLayer)) or in the slot of the tickscope subscriber's table
/// ([`TickscopeSubscriber`](super::TickscopeSubscriber)).
#[derive(Default)]
pub(super) struct Ext {
    /// The span's fields and link, when it has either.
    pub(super) state: Option<SpanState>,
    /// For a span without state: [`MOVED`] was raised for it (its later enters off its thread
    /// write nothing shared).
    pub(super) moved: bool,
}

/// What the layer keeps in a span's extensions: only spans with fields or a `follows_from`
/// have one (a plain span's enter needs only its callsite, see `Plain` in [`local`](super::local)).
pub(super) struct SpanState {
    site: &'static Site,
    /// The argument records of the span's fields, pushed after each enter.
    args: Vec<RawEvent>,
    /// The link the span follows from, if any.
    follows: Option<Link>,
    /// The thread (tickscope's id) of its first enter, if it was entered.
    entered_on: Option<u64>,
    /// It was entered on more than one thread.
    elsewhere: bool,
}

/// Where the bridge finds what it keeps of one span that is not plain: its metadata and its
/// [`Ext`], in the registry's extensions ([`TickscopeLayer`](super::TickscopeLayer)) or in the tickscope
/// subscriber's table ([`TickscopeSubscriber`](super::TickscopeSubscriber)).
pub(super) trait SpanStore {
    /// The span's metadata.
    fn metadata(&self) -> &'static Metadata<'static>;
    /// Runs `f` on the span's [`Ext`], locked for that time.
    fn with_ext<R>(&self, f: impl FnOnce(&mut Ext) -> R) -> R;
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
        if let Some(state) = ext.state.as_mut() {
            // (0: a thread being torn down, unknown: taken as another.)
            let here = thread::thread_id();
            match state.entered_on {
                None if here != 0 => state.entered_on = Some(here),
                None => state.elsewhere = true,
                Some(first) => state.elsewhere |= first != here,
            }
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
pub(super) fn on_new_span(attrs: &Attributes<'_>, id: &Id) -> Option<SpanState> {
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
        entered_on: None,
        elsewhere: false,
    })
}

/// The bridge's part of `Span::record` on span `id`, which `span` finds.
pub(super) fn on_record<T: SpanStore>(
    id: &Id,
    values: &Record<'_>,
    span: impl FnOnce() -> Option<T>,
) {
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
pub(super) fn on_follows_from<T: SpanStore>(
    id: &Id,
    follows: &Id,
    span: impl FnOnce() -> Option<T>,
) {
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
                // Its enters before now were not counted: its close says nothing from them.
                entered_on: None,
                elsewhere: true,
            });
            // Enters must now find the state: no thread may take the span as plain.
            STATE_EPOCH.fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// The bridge's part of the enter of span `id`, which `span` finds when this thread does
/// not know it as plain.
#[inline(always)]
pub(super) fn on_enter<T: SpanStore>(id: &Id, span: impl FnOnce() -> Option<T>) {
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
pub(super) fn on_exit(id: &Id) {
    let id = id.into_u64();
    let key = LOCAL.try_with(|l| l.exit(id)).ok().flatten();
    if let Some(key) = key {
        thread::push(RawEvent::end(key, clock::now()));
    }
}

/// The bridge's part of the close of span `id`, which `span` finds.
#[inline(always)]
pub(super) fn on_close<T: SpanStore>(id: &Id, span: impl FnOnce() -> Option<T>) {
    if !thread::thread_wants() {
        return;
    }
    let span_id = id.into_u64();
    // Every enter on this thread: a plain span this thread created (its cache says so), or
    // one with fields whose state saw every enter here.
    let here = entered_only_here(span_id) || span().is_some_and(|span| only_here(&span));
    set_plain(span_id, None);
    // Ends the span's async call if it was entered more than once, and the use of its id.
    thread::push_pair(RawEvent::span_close(0, clock::now(), span_id, here));
}

/// True when span `span` has state and was entered on this thread only, or never.
#[cold]
fn only_here(span: &impl SpanStore) -> bool {
    span.with_ext(|ext| {
        ext.state.as_ref().is_some_and(|state| {
            !state.elsewhere
                && state
                    .entered_on
                    .is_none_or(|first| first == thread::thread_id())
        })
    })
}

/// The bridge's part of an event.
pub(super) fn on_event(event: &Event<'_>) {
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
