//! Scope arguments: `scope!("read", path = %p.display(), bytes = n)`.
//!
//! While recording, the values are encoded into the records that follow the scope's entry
//! (published with it, no allocation): an [`RawKind::Arg`] record per argument (its key's id
//! and type in `id`, the value or a string's length in `tick`), and for strings
//! [`RawKind::Bytes`] records of 12 bytes each. A scope's records fit in [`Args::CAPACITY`];
//! longer strings are cut at a character boundary and end in `…`.

use std::fmt::{self, Write as _};
use std::mem::MaybeUninit;

use crate::callsite::Callsite;
use crate::event::{RawEvent, RawKind};
use crate::link::Link;
use crate::scope::ScopeGuard;
use crate::trace::Value;
use crate::{clock, registry};

/// Bits of an [`RawKind::Arg`] record's `id` that hold the key's callsite id.
pub(crate) const KEY_BITS: u32 = 24;

/// The type of an argument's value, in the top bits of an [`RawKind::Arg`] record's `id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum ArgType {
    I64 = 1,
    U64 = 2,
    F64 = 3,
    Bool = 4,
    Str = 5,
}

impl ArgType {
    /// The type in an [`RawKind::Arg`] record's `id`.
    pub(crate) fn of(record: &RawEvent) -> Option<Self> {
        Self::from_u8((record.id >> KEY_BITS) as u8)
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

    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::I64,
            2 => Self::U64,
            3 => Self::F64,
            4 => Self::Bool,
            5 => Self::Str,
            _ => return None,
        })
    }
}

/// Bytes of string carried by one [`RawKind::Bytes`] record (8 in `tick`, 4 in `id`).
pub(crate) const BYTES_PER_RECORD: usize = 12;

/// The records of a scope entry with arguments, built on the stack while recording. Made by
/// `scope!` with arguments; not public API.
#[doc(hidden)]
pub struct Args {
    /// Slots `LEAD..len` are initialised (and the lead slots once `enter` writes them). Left
    /// uninitialised, the array costs nothing to set up: filling its 1 KiB made a scope with
    /// two arguments 65.8 ns instead of 44.7 ns (`cargo bench --bench scope`).
    records: [MaybeUninit<RawEvent>; Args::CAPACITY],
    len: usize,
}

impl Default for Args {
    fn default() -> Self {
        Self::new()
    }
}

impl Args {
    /// Records per scope entry, the entry's own included: 1 KiB.
    pub const CAPACITY: usize = 64;
    /// The first two slots are kept for the entry (`Begin`, or `BeginFollows` and its link).
    const LEAD: usize = 2;

    /// No arguments yet.
    #[inline]
    pub fn new() -> Self {
        Self {
            records: [const { MaybeUninit::uninit() }; Self::CAPACITY],
            len: Self::LEAD,
        }
    }

    fn head(&mut self, key: &'static Callsite, ty: ArgType, value: u64) -> bool {
        if self.len == Self::CAPACITY {
            return false;
        }
        let key = key.id() & ((1 << KEY_BITS) - 1);
        self.put(RawEvent {
            tick: value,
            id: key | (ty as u32) << KEY_BITS,
            kind: RawKind::Arg,
        });
        true
    }

    /// Appends `record`; the caller has checked that there is room.
    fn put(&mut self, record: RawEvent) {
        self.records[self.len] = MaybeUninit::new(record);
        self.len += 1;
    }

    /// The records from slot `start` (at most [`Args::LEAD`], written) to the last.
    fn written(&self, start: usize) -> &[RawEvent] {
        let slots = &self.records[start..self.len];
        // SAFETY: every slot below `len` and from `LEAD` on was written by `put`, and the
        // callers write the lead slots from `start` on before asking; `MaybeUninit<T>` has
        // the layout of `T`.
        unsafe { &*(std::ptr::from_ref(slots) as *const [RawEvent]) }
    }

    /// Adds a signed integer.
    pub fn i64(&mut self, key: &'static Callsite, value: i64) {
        self.head(key, ArgType::I64, value as u64);
    }

    /// Adds an unsigned integer.
    pub fn u64(&mut self, key: &'static Callsite, value: u64) {
        self.head(key, ArgType::U64, value);
    }

    /// Adds a float.
    pub fn f64(&mut self, key: &'static Callsite, value: f64) {
        self.head(key, ArgType::F64, value.to_bits());
    }

    /// Adds a boolean.
    pub fn bool(&mut self, key: &'static Callsite, value: bool) {
        self.head(key, ArgType::Bool, u64::from(value));
    }

    /// Adds a string, cut to fit.
    pub fn str(&mut self, key: &'static Callsite, value: &str) {
        self.display(key, &value);
    }

    /// Adds `value` formatted with `Display`, cut to fit.
    pub fn display(&mut self, key: &'static Callsite, value: &dyn fmt::Display) {
        if !self.head(key, ArgType::Str, 0) {
            return;
        }
        let head = self.len - 1;
        let mut out = StrWriter {
            args: self,
            bytes: 0,
            full: false,
            partial: [0; BYTES_PER_RECORD],
        };
        let _ = write!(out, "{value}");
        let bytes = out.finish();
        let key_and_type = self.written(head)[0].id;
        self.records[head] = MaybeUninit::new(RawEvent {
            tick: bytes as u64,
            id: key_and_type,
            kind: RawKind::Arg,
        });
    }

    /// Adds `value` formatted with `Debug`, cut to fit.
    pub fn debug(&mut self, key: &'static Callsite, value: &dyn fmt::Debug) {
        self.display(key, &DebugAsDisplay(value));
    }

    /// Adds a value of any type the macro accepts without `%` or `?`.
    pub fn value<T: ArgValue + ?Sized>(&mut self, key: &'static Callsite, value: &T) {
        value.add_to(self, key);
    }

    /// The arguments as values, for observers.
    fn decode(&self) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        let records = self.written(Self::LEAD);
        let mut i = 0;
        while i < records.len() {
            let record = records[i];
            i += 1;
            let key = crate::callsite::by_id(record.id & ((1 << KEY_BITS) - 1));
            let (Some(key), Some(ty)) = (key, ArgType::of(&record)) else {
                continue;
            };
            let len = record.tick as usize;
            let value = ty.scalar(record.tick).unwrap_or_else(|| {
                let mut bytes = Vec::with_capacity(len);
                while bytes.len() < len && i < records.len() {
                    push_bytes(&mut bytes, &records[i], len);
                    i += 1;
                }
                Value::Str(String::from_utf8_lossy(&bytes).into())
            });
            out.push((key.name(), value));
        }
        out
    }

    /// Records the entry of `callsite`'s scope (following from `link` when it is recorded)
    /// with these arguments, published together, and tells observers.
    #[inline]
    pub fn enter(mut self, callsite: &'static Callsite, link: Option<&Link>) -> ScopeGuard {
        let followed = link.copied().filter(Link::is_recorded);
        let observed = ScopeGuard::observe_with(callsite, followed, || self.decode());
        if !registry::thread_wants() {
            return ScopeGuard::observed_only(observed);
        }
        let id = callsite.id();
        let tick = clock::now();
        let start = match followed {
            Some(link) => {
                let [begin, wide] = RawEvent::begin_follows(id, tick, link.thread(), link.seq());
                self.records[0] = MaybeUninit::new(begin);
                self.records[1] = MaybeUninit::new(wide);
                0
            }
            None => {
                self.records[1] = MaybeUninit::new(RawEvent::begin(id, tick));
                1
            }
        };
        registry::push_all(self.written(start));
        ScopeGuard::opened(id).with_observed(observed)
    }
}

struct DebugAsDisplay<'a>(&'a dyn fmt::Debug);

impl fmt::Display for DebugAsDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

/// Appends string bytes to an [`Args`] as [`RawKind::Bytes`] records, cutting at a character
/// boundary when the records run out.
struct StrWriter<'a> {
    args: &'a mut Args,
    bytes: usize,
    full: bool,
    /// The bytes of the record being filled.
    partial: [u8; BYTES_PER_RECORD],
}

impl StrWriter<'_> {
    /// Bytes that still fit: the free records, less what the record being filled holds.
    fn room(&self) -> usize {
        (Args::CAPACITY - self.args.len) * BYTES_PER_RECORD - self.bytes % BYTES_PER_RECORD
    }

    fn push_byte(&mut self, b: u8) {
        self.partial[self.bytes % BYTES_PER_RECORD] = b;
        self.bytes += 1;
        if self.bytes % BYTES_PER_RECORD == 0 {
            self.flush();
        }
    }

    /// Writes the record being filled (zero-padded).
    fn flush(&mut self) {
        let [t0, t1, t2, t3, t4, t5, t6, t7, i0, i1, i2, i3] = self.partial;
        self.args.put(RawEvent {
            tick: u64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
            id: u32::from_le_bytes([i0, i1, i2, i3]),
            kind: RawKind::Bytes,
        });
        self.partial = [0; BYTES_PER_RECORD];
    }

    /// Writes the last, partly filled record; the string's length in bytes.
    fn finish(mut self) -> usize {
        if self.bytes % BYTES_PER_RECORD != 0 {
            self.flush();
        }
        self.bytes
    }
}

impl fmt::Write for StrWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.full {
            return Ok(());
        }
        const ELLIPSIS: &str = "…";
        let mut fits = s.len();
        if fits > self.room() {
            self.full = true;
            fits = self.room().saturating_sub(ELLIPSIS.len());
            while !s.is_char_boundary(fits) {
                fits -= 1;
            }
        }
        for &b in &s.as_bytes()[..fits] {
            self.push_byte(b);
        }
        if self.full {
            for &b in ELLIPSIS.as_bytes() {
                self.push_byte(b);
            }
        }
        Ok(())
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

/// Values `scope!` accepts as arguments without `%` (Display) or `?` (Debug): integers,
/// floats, `bool` and strings, and references to them. The macro borrows the value.
pub trait ArgValue {
    /// Adds the value under `key`.
    fn add_to(&self, args: &mut Args, key: &'static Callsite);
}

macro_rules! arg_value {
    ($method:ident as $as:ty: $($t:ty),*) => {$(
        impl ArgValue for $t {
            #[inline]
            fn add_to(&self, args: &mut Args, key: &'static Callsite) {
                args.$method(key, *self as $as);
            }
        }
    )*};
}
arg_value!(i64 as i64: i8, i16, i32, i64, isize);
arg_value!(u64 as u64: u8, u16, u32, u64, usize);
arg_value!(f64 as f64: f32, f64);

impl ArgValue for bool {
    fn add_to(&self, args: &mut Args, key: &'static Callsite) {
        args.bool(key, *self);
    }
}

impl ArgValue for str {
    fn add_to(&self, args: &mut Args, key: &'static Callsite) {
        args.str(key, self);
    }
}

impl ArgValue for String {
    fn add_to(&self, args: &mut Args, key: &'static Callsite) {
        args.str(key, self);
    }
}

impl<T: ArgValue + ?Sized> ArgValue for &T {
    fn add_to(&self, args: &mut Args, key: &'static Callsite) {
        (**self).add_to(args, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static KEY: Callsite = Callsite::new("k", file!(), line!(), module_path!());

    fn strings(args: &Args) -> Vec<String> {
        args.decode()
            .into_iter()
            .map(|(_, v)| v.to_string())
            .collect()
    }

    #[test]
    fn strings_fill_the_records_exactly_or_are_cut() {
        // 62 free records: one head and 61 × 12 bytes.
        let room = (Args::CAPACITY - Args::LEAD - 1) * BYTES_PER_RECORD;
        let mut args = Args::new();
        args.str(&KEY, &"a".repeat(room));
        assert_eq!(args.len, Args::CAPACITY);
        args.u64(&KEY, 1); // no room left: dropped
        assert_eq!(strings(&args), ["a".repeat(room)]);

        let mut args = Args::new();
        args.str(&KEY, &"b".repeat(room + 1));
        let got = strings(&args);
        assert_eq!(got[0].len(), room);
        assert_eq!(got[0], "b".repeat(room - 3) + "…");

        let mut args = Args::new();
        for i in 0..100 {
            args.u64(&KEY, i);
        }
        assert_eq!(args.len, Args::CAPACITY);
        assert_eq!(strings(&args).len(), Args::CAPACITY - Args::LEAD);
        // An empty string takes its head record only.
        let mut args = Args::new();
        args.str(&KEY, "");
        args.bool(&KEY, true);
        assert_eq!(strings(&args), ["", "true"]);
    }
}
