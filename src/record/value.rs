//! Argument values and the one reader of their records.
//!
//! [`Args`](crate::record::args::Args) writes a scope's arguments as records after its entry;
//! [`ArgReader`] reads them back, for observers while recording and for decoding afterwards.

use crate::record::event::{RawEvent, RawKind};

/// The value of a scope argument.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// A signed integer.
    I64(i64),
    /// An unsigned integer.
    U64(u64),
    /// A float.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// A string, or a value formatted with `%` (Display) or `?` (Debug); cut with `…` when it
    /// did not fit the scope's records.
    Str(Box<str>),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::I64(v) => v.fmt(f),
            Self::U64(v) => v.fmt(f),
            Self::F64(v) => v.fmt(f),
            Self::Bool(v) => v.fmt(f),
            Self::Str(v) => v.fmt(f),
        }
    }
}

/// The type of an argument's value: the kind of its first record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArgType {
    I64,
    U64,
    F64,
    Bool,
    Str,
}

impl ArgType {
    /// The type of the argument whose first record is `record`, if it is one.
    pub(crate) fn of(record: &RawEvent) -> Option<Self> {
        Self::of_kind(record.kind)
    }

    /// The type of the arguments whose first record has kind `kind`, if it is one.
    pub(crate) fn of_kind(kind: RawKind) -> Option<Self> {
        Some(match kind {
            RawKind::ArgI64 => Self::I64,
            RawKind::ArgU64 => Self::U64,
            RawKind::ArgF64 => Self::F64,
            RawKind::ArgBool => Self::Bool,
            RawKind::ArgStr => Self::Str,
            _ => return None,
        })
    }

    /// The kind of an argument's first record.
    pub(crate) const fn kind(self) -> RawKind {
        match self {
            Self::I64 => RawKind::ArgI64,
            Self::U64 => RawKind::ArgU64,
            Self::F64 => RawKind::ArgF64,
            Self::Bool => RawKind::ArgBool,
            Self::Str => RawKind::ArgStr,
        }
    }

    /// The value a record of this type holds in `tick`; `None` for a string, whose bytes
    /// follow.
    pub(crate) fn scalar(self, bits: u64) -> Option<Value> {
        Some(match self {
            Self::I64 => Value::I64(bits as i64),
            Self::U64 => Value::U64(bits),
            Self::F64 => Value::F64(f64::from_bits(bits)),
            Self::Bool => Value::Bool(bits != 0),
            Self::Str => return None,
        })
    }
}

/// Bytes of string carried by one [`RawKind::Bytes`] record (8 in `tick`, 4 in `id`).
pub(crate) const BYTES_PER_RECORD: usize = 12;

/// Records one scope entry with arguments may take, the entry's own included: 1 KiB.
pub(crate) const ENTRY_RECORDS: usize = 64;
/// Records of the entry itself (`Begin`, or `BeginFollows` and its payload) before the
/// arguments.
pub(crate) const LEAD_RECORDS: usize = 2;
/// The most string bytes one scope entry holds: every record but the lead ones and the
/// string's head. A length above it comes from a corrupt record and reserves no more.
pub(crate) const MAX_STR: usize = (ENTRY_RECORDS - LEAD_RECORDS - 1) * BYTES_PER_RECORD;

/// Reads a scope's argument records back into values, one record at a time.
#[derive(Debug, Default)]
pub(crate) struct ArgReader {
    /// A string being read: the key's callsite id, its length, the bytes so far.
    string: Option<(u32, usize, Vec<u8>)>,
}

impl ArgReader {
    /// True for the kinds of argument records: a value's head, or string bytes.
    pub(crate) fn reads(kind: RawKind) -> bool {
        kind == RawKind::Bytes || ArgType::of_kind(kind).is_some()
    }

    /// Takes the next argument record (see [`ArgReader::reads`]) and gives `done` each
    /// argument it completes, as the key's callsite id and the value. Bytes with no string
    /// head before them are skipped.
    pub(crate) fn read(&mut self, record: &RawEvent, mut done: impl FnMut(u32, Value)) {
        if record.kind == RawKind::Bytes {
            if let Some((_, len, bytes)) = &mut self.string {
                push_bytes(bytes, record, *len);
                if bytes.len() >= *len {
                    self.finish(done);
                }
            }
            return;
        }
        self.finish(&mut done);
        let Some(ty) = ArgType::of(record) else {
            return;
        };
        match ty.scalar(record.tick) {
            Some(value) => done(record.id, value),
            None => {
                let len = usize::try_from(record.tick).unwrap_or(usize::MAX);
                self.string = Some((record.id, len, Vec::with_capacity(len.min(MAX_STR))));
                if len == 0 {
                    self.finish(done);
                }
            }
        }
    }

    /// True while a string is being read.
    #[inline]
    pub(crate) fn is_reading(&self) -> bool {
        self.string.is_some()
    }

    /// Ends a string cut short (its records stopped before its length): it is given to `done`
    /// as far as it came.
    pub(crate) fn finish(&mut self, mut done: impl FnMut(u32, Value)) {
        if let Some((key, _, bytes)) = self.string.take() {
            done(key, Value::Str(String::from_utf8_lossy(&bytes).into()));
        }
    }
}

/// Appends the bytes of one [`RawKind::Bytes`] record to `out`, a string of `len` bytes.
pub(crate) fn push_bytes(out: &mut Vec<u8>, record: &RawEvent, len: usize) {
    let mut raw = [0u8; BYTES_PER_RECORD];
    raw[..8].copy_from_slice(&record.tick.to_le_bytes());
    raw[8..].copy_from_slice(&record.id.to_le_bytes());
    let left = len.saturating_sub(out.len());
    out.extend_from_slice(&raw[..left.min(BYTES_PER_RECORD)]);
}
