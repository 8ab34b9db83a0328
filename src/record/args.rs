//! Scope arguments: `scope!("read", path = %p.display(), bytes = n)`.
//!
//! While recording, the values are encoded into the records that follow the scope's entry
//! (published with it, no allocation): one record per argument whose kind says the value's
//! type ([`RawKind::ArgI64`] … [`RawKind::ArgStr`]), with the key's callsite id in `id` and
//! the value or a string's length in `tick`, and for strings [`RawKind::Bytes`] records of 12
//! bytes each. A scope's records fit in [`Args::CAPACITY`]: a string that does not fit in the
//! records left is cut at a character boundary and ends in `…` (the cut string, ellipsis
//! included, fills at most the records left); an argument that comes when not even its first
//! record (and, for a string, one record of text) is left is not recorded.

use std::fmt::{self, Write as _};
use std::mem::MaybeUninit;

use crate::record::callsite::{self, Callsite};
use crate::record::event::{RawEvent, RawKind};
use crate::record::link::Link;
use crate::record::scope::ScopeGuard;
use crate::record::value::{
    ArgReader, ArgType, BYTES_PER_RECORD, ENTRY_RECORDS, LEAD_RECORDS, MAX_STR, Value,
};
use crate::record::{clock, thread};

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
    pub const CAPACITY: usize = ENTRY_RECORDS;
    /// The first two slots are kept for the entry (`Begin`, or `BeginFollows` and its link).
    const LEAD: usize = LEAD_RECORDS;

    /// No arguments yet.
    #[inline]
    pub fn new() -> Self {
        Self {
            records: [const { MaybeUninit::uninit() }; Self::CAPACITY],
            len: Self::LEAD,
        }
    }

    /// Appends an argument's first record if it and `then` more records fit.
    fn head(&mut self, key: &'static Callsite, ty: ArgType, value: u64, then: usize) -> bool {
        if self.len + 1 + then > Self::CAPACITY {
            return false;
        }
        self.put(RawEvent::new(ty.kind(), key.id(), value));
        true
    }

    /// Appends `record`; the caller has checked that there is room.
    fn put(&mut self, record: RawEvent) {
        self.records[self.len] = MaybeUninit::new(record);
        self.len += 1;
    }

    /// The argument records (from slot [`Args::LEAD`] on).
    pub(crate) fn arguments(&self) -> &[RawEvent] {
        // SAFETY: every slot from `LEAD` to `len` was written by `put`.
        unsafe { self.written(Self::LEAD) }
    }

    /// The records from slot `start` to the last.
    ///
    /// # Safety
    /// `start <= LEAD`, and the lead slots from `start` on have been written.
    unsafe fn written(&self, start: usize) -> &[RawEvent] {
        let slots = &self.records[start..self.len];
        // SAFETY: slots from `LEAD` to `len` were written by `put`, and the caller wrote the
        // lead slots from `start` on; `MaybeUninit<T>` has the layout of `T`.
        unsafe { &*(std::ptr::from_ref(slots) as *const [RawEvent]) }
    }

    /// Adds a signed integer.
    pub fn i64(&mut self, key: &'static Callsite, value: i64) {
        self.head(key, ArgType::I64, value as u64, 0);
    }

    /// Adds an unsigned integer.
    pub fn u64(&mut self, key: &'static Callsite, value: u64) {
        self.head(key, ArgType::U64, value, 0);
    }

    /// Adds a float.
    pub fn f64(&mut self, key: &'static Callsite, value: f64) {
        self.head(key, ArgType::F64, value.to_bits(), 0);
    }

    /// Adds a boolean.
    pub fn bool(&mut self, key: &'static Callsite, value: bool) {
        self.head(key, ArgType::Bool, u64::from(value), 0);
    }

    /// Adds a string, cut to fit.
    pub fn str(&mut self, key: &'static Callsite, value: &str) {
        self.display(key, &value);
    }

    /// Adds `value` formatted with `Display`, cut to fit.
    pub fn display(&mut self, key: &'static Callsite, value: &dyn fmt::Display) {
        // The head, and room for at least the ellipsis of a cut string.
        if !self.head(key, ArgType::Str, 0, 1) {
            return;
        }
        let head = self.len - 1;
        let mut out = StrWriter {
            buf: [const { MaybeUninit::uninit() }; MAX_STR],
            len: 0,
            cap: (Self::CAPACITY - self.len) * BYTES_PER_RECORD,
            full: false,
        };
        let _ = write!(out, "{value}");
        let text = out.text();
        for piece in text.chunks(BYTES_PER_RECORD) {
            let mut raw = [0u8; BYTES_PER_RECORD];
            raw[..piece.len()].copy_from_slice(piece);
            let [t0, t1, t2, t3, t4, t5, t6, t7, i0, i1, i2, i3] = raw;
            self.put(RawEvent::new(
                RawKind::Bytes,
                u32::from_le_bytes([i0, i1, i2, i3]),
                u64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
            ));
        }
        self.records[head] =
            MaybeUninit::new(RawEvent::new(RawKind::ArgStr, key.id(), text.len() as u64));
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
        let mut reader = ArgReader::default();
        let mut named = |key: u32, value: Value| {
            if let Some(key) = crate::record::callsite::by_id(key) {
                out.push((key.name(), value));
            }
        };
        for record in self.arguments() {
            reader.read(record, &mut named);
        }
        reader.finish(&mut named);
        out
    }

    /// [`Args::enter`] for the scope named `name` at run time (`scope!(name = expr, ..)`):
    /// its callsite is interned once per distinct name.
    #[inline]
    pub fn enter_named(self, name: &str, link: Option<&Link>) -> ScopeGuard {
        self.enter(callsite::dynamic(name), link)
    }

    /// Records the entry of `callsite`'s scope (following from `link` when it is recorded)
    /// with these arguments, published together, and tells observers.
    #[inline]
    pub fn enter(mut self, callsite: &'static Callsite, link: Option<&Link>) -> ScopeGuard {
        let followed = link.copied().filter(Link::is_recorded);
        let observed = ScopeGuard::observe_with(callsite, followed, || self.decode());
        if !thread::thread_wants() {
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
        // SAFETY: `start <= LEAD`, and the lead slots from `start` on were just written.
        thread::push_all(unsafe { self.written(start) });
        ScopeGuard::opened(id, tick).with_observed(observed)
    }
}

impl Args {
    /// Records an instant of `callsite` (process-wide when `process`) with these arguments,
    /// published together; `instant!` with arguments calls it while recording.
    #[inline]
    pub fn instant(mut self, callsite: &'static Callsite, process: bool) {
        let kind = crate::record::counter::instant_kind(process);
        self.records[1] = MaybeUninit::new(RawEvent::new(kind, callsite.id(), clock::now()));
        // SAFETY: slot 1 (`<= LEAD`) was just written, and the slots after it by `put`.
        thread::push_all(unsafe { self.written(1) });
    }
}

struct DebugAsDisplay<'a>(&'a dyn fmt::Debug);

impl fmt::Display for DebugAsDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

/// Collects a formatted string, cutting it at a character boundary and ending it in `…` when
/// it does not fit in `cap` bytes.
struct StrWriter {
    /// Bytes `..len` are written. Left uninitialised, the buffer costs nothing to set up:
    /// zero-filling it made a scope with two arguments 73.2 ns instead of 64.6 ns.
    buf: [MaybeUninit<u8>; MAX_STR],
    len: usize,
    /// Bytes that fit; at least [`BYTES_PER_RECORD`], so the ellipsis always does.
    cap: usize,
    full: bool,
}

impl StrWriter {
    /// The bytes written so far.
    fn text(&self) -> &[u8] {
        let written = &self.buf[..self.len];
        // SAFETY: every byte below `len` was written by `put`; `MaybeUninit<u8>` has the
        // layout of `u8`.
        unsafe { &*(std::ptr::from_ref(written) as *const [u8]) }
    }

    /// Writes `bytes` from byte `at` on; `at + bytes.len() <= cap`.
    fn put(&mut self, at: usize, bytes: &[u8]) {
        for (slot, &b) in self.buf[at..at + bytes.len()].iter_mut().zip(bytes) {
            slot.write(b);
        }
    }
}

impl fmt::Write for StrWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.full {
            return Ok(());
        }
        let take = s.len().min(self.cap - self.len);
        self.put(self.len, &s.as_bytes()[..take]);
        self.len += take;
        if take < s.len() {
            // Cut so that the ellipsis fits too, at a character boundary: a byte that does
            // not continue a character starts one (the text is UTF-8, and the byte at `cut`
            // is one of it, since `cut < len`).
            const ELLIPSIS: &str = "…";
            self.full = true;
            let text = self.text();
            let mut cut = self.cap - ELLIPSIS.len();
            while cut > 0 && text[cut] & 0xC0 == 0x80 {
                cut -= 1;
            }
            self.put(cut, ELLIPSIS.as_bytes());
            self.len = cut + ELLIPSIS.len();
        }
        Ok(())
    }
}

/// Values `scope!` accepts as arguments without `%` (Display) or `?` (Debug): integers,
/// floats, `bool` and strings, and references to them. The macro borrows the value.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a value `scope!` records as it is",
    label = "not an integer, float, bool or string",
    note = "write `key = ?value` to record it with `Debug`, or `key = %value` with `Display`"
)]
pub trait ArgValue {
    /// Adds the value under `key` (used by `scope!`; not public API).
    #[doc(hidden)]
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
    fn keys_keep_their_whole_callsite_id() {
        // The value's type is the record's kind, so no bit of the key's id is given up for it.
        let mut args = Args::new();
        args.u64(&KEY, 7);
        args.str(&KEY, "x");
        let records = args.arguments();
        assert_eq!(
            (records[0].kind, records[0].id),
            (RawKind::ArgU64, KEY.id())
        );
        assert_eq!(
            (records[1].kind, records[1].id),
            (RawKind::ArgStr, KEY.id())
        );
        let forged = RawEvent::new(RawKind::ArgBool, u32::MAX, 1);
        assert_eq!(forged.id, u32::MAX);
        assert_eq!(ArgType::of(&forged), Some(ArgType::Bool));
        assert_eq!(ArgType::of(&RawEvent::begin(1, 1)), None);
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
