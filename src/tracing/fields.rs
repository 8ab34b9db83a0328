//! Recording a span's or event's field values: as arguments, or as counter and value samples
//! for fields named as metrics.

use std::cell::RefCell;
use std::fmt;

use ::tracing::field::{Field, Visit};

use super::site::{Message, MessageText, Site};
use crate::record::args::Args;
use crate::record::callsite::Callsite;
use crate::record::event::{RawEvent, RawKind};

/// Writes field values into an [`Args`], and an event's metric fields into samples.
pub(super) struct Fields<'a> {
    pub(super) site: &'static Site,
    pub(super) args: &'a mut Args,
    /// An event's counter and value samples (their tick not yet stamped); `None` for a span,
    /// whose fields are all arguments.
    pub(super) samples: Option<&'a mut Vec<RawEvent>>,
    /// How an event's `message` field was written; `None` for a span, or before the field.
    pub(super) message: Option<Message>,
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
pub(super) fn encode(site: &'static Site, record: impl FnOnce(&mut Fields<'_>)) -> Vec<RawEvent> {
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
pub(super) fn replace_args(args: &mut Vec<RawEvent>, new: &[RawEvent]) {
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
