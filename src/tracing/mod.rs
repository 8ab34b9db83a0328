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
//!   [`Callsite`](crate::Callsite) gives the file and line, and its
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
//!   [`Link`](crate::Link) captured in the innermost scope open there, usually that span's slice (so the
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
//! Each `tracing` callsite is interned once (a leaked [`Callsite`](crate::Callsite) for it and
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

mod fields;
mod hooks;
mod layer;
mod local;
mod site;
mod subscriber;

pub use layer::TickscopeLayer;
pub use subscriber::TickscopeSubscriber;

/// The tickscope layer, for `tracing_subscriber::registry().with(tickscope::tracing::layer())`.
pub fn layer() -> TickscopeLayer {
    TickscopeLayer::default()
}

/// The tickscope subscriber, for `tracing::subscriber::set_global_default` (or
/// `tracing::Dispatch::new`): records as the [layer](fn@layer) does, without `tracing-subscriber`'s
/// registry, writing nothing that other threads write on the path of a thread's own spans.
pub fn subscriber() -> TickscopeSubscriber {
    TickscopeSubscriber::default()
}

/// A `Dispatch` of the [tickscope subscriber](fn@subscriber), this thread's own: set it as the
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
