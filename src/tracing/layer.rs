//! The bridge as a `tracing-subscriber` [`Layer`]: it keeps what it needs of a span in the
//! registry's extensions.

use ::tracing::span::{Attributes, Id, Record};
use ::tracing::subscriber::Interest;
use ::tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use super::hooks::{
    Ext, SpanStore, on_close, on_enter, on_event, on_exit, on_follows_from, on_new_span, on_record,
};
use super::local::site;

/// [module documentation](super).
///
/// Aligned to 128 bytes though it holds nothing: the subscriber stacked with it (`Layered`)
/// takes that alignment, so that in the `Arc` of a `tracing::Dispatch` it starts two cache
/// lines after the `Arc`'s reference counts (see the module's *Cost*).
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(128))]
pub struct TickscopeLayer {
    _private: (),
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

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        on_close(&id, || ctx.span(&id));
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        on_event(event);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use tracing_subscriber::layer::SubscriberExt;

    use crate::tracing::layer;
    use crate::tracing::local::MOVED;

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
