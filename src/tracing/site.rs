//! The bridge's interned `tracing` callsites ([`Site`]): a tickscope callsite per span or
//! event callsite, a key per field, the metrics an event's fields feed, and the name of an
//! event, taken from its message while that is a literal.

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{OnceLock, RwLock};

use ::tracing::Metadata;

use crate::record::callsite::{self, Callsite};
use crate::record::event::RawKind;
use crate::record::hash::FxHashMap;
use crate::record::registry;

/// One `tracing` callsite, interned: its scope's callsite and one key per field.
pub(super) struct Site {
    pub(super) callsite: &'static Callsite,
    /// The key of field `i` of the callsite's field set.
    pub(super) keys: Box<[&'static Callsite]>,
    /// For field `i` of an event named as a metric (the `tracing-opentelemetry` prefixes
    /// `counter.`, `monotonic_counter.` and `histogram.`): the record kind of its samples and
    /// its counter's or value's callsite.
    pub(super) metrics: Box<[Option<(RawKind, &'static Callsite)>]>,
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
    pub(super) fn event_callsite(&self, message: Option<&Message>) -> &'static Callsite {
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
pub(super) struct Message {
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
    pub(super) fn piece(&mut self, site: &Site, s: &str) {
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
pub(super) struct MessageText<'a> {
    pub(super) value: &'a dyn fmt::Debug,
    pub(super) site: &'a Site,
    pub(super) seen: RefCell<Message>,
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

#[cold]
pub(super) fn global_site(key: usize, meta: &'static Metadata<'static>) -> &'static Site {
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
