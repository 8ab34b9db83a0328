//! The fixed-size records the hot path writes.

/// What a `RawEvent` records.
///
/// The discriminants are written as they are into captures; they are stable from the first
/// capture file format on.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RawKind {
    /// A scope was entered; `id` is its callsite id.
    Begin = 1,
    /// A scope was left; `id` is the key of the entry it closes (`RawEvent::end_key` of the
    /// entry's callsite id and tick), so that guards dropped in any order, also several of one
    /// callsite, each close their own entry. Also ends a [`PollBegin`](RawKind::PollBegin).
    End = 2,
    /// An async span began (the first poll of a `#[profile] async fn` call); `id` is its
    /// callsite id. A [`Payload`](RawKind::Payload) with the span's id follows.
    AsyncBegin = 3,
    /// An async span ended (the call completed or was dropped); `id` is its callsite id,
    /// followed by a [`Payload`](RawKind::Payload) with the span's id.
    AsyncEnd = 4,
    /// One poll of an async span began on this thread; `id` is its callsite id, followed by a
    /// [`Payload`](RawKind::Payload) with the span's id (0 when the span was not recorded).
    /// An [`End`](RawKind::End) closes it.
    PollBegin = 5,
    /// The payload of the record before it, published together with it (one
    /// `push_all`): 96 bits, `id` and `tick` (which is
    /// not a tick here: windows and reclamation go by the record before it). After
    /// [`AsyncBegin`](RawKind::AsyncBegin), [`AsyncEnd`](RawKind::AsyncEnd) and
    /// [`PollBegin`](RawKind::PollBegin): the span id in `id`, `tick` 0. After
    /// [`Alloc`](RawKind::Alloc) or [`Free`](RawKind::Free): the address in `tick` and the
    /// high 32 bits of the size in `id`. After [`BeginFollows`](RawKind::BeginFollows): the
    /// link's thread id in `tick` and its sequence number in `id`. After
    /// [`SpanEnter`](RawKind::SpanEnter) and [`SpanClose`](RawKind::SpanClose): the `tracing`
    /// span id in `tick`, `id` 0 (or, after a close, `RawEvent::SPAN_CLOSED_HERE`).
    Payload = 6,
    /// Memory was allocated (recorded by [`TrackingAlloc`](crate::TrackingAlloc)); `id` holds the
    /// low 32 bits of the size. A [`Payload`](RawKind::Payload) with the address follows.
    Alloc = 7,
    /// Memory is being freed (recorded before the allocator gets it back, so that a later
    /// allocation of the same address always has a later tick); laid out as
    /// [`Alloc`](RawKind::Alloc).
    Free = 8,
    /// A [`Link`](crate::Link) was captured inside the innermost open scope; `id` is its
    /// sequence number on this thread.
    Link = 9,
    /// A scope that follows from a link was entered: a [`Begin`](RawKind::Begin) whose
    /// [`Payload`](RawKind::Payload) names the link.
    BeginFollows = 10,
    /// A signed integer argument of the scope entered just before it (see `scope!`): `id`
    /// holds the key's callsite id, `tick` the value (not a tick).
    ArgI64 = 11,
    /// 12 bytes of a string argument: 8 in `tick`, 4 in `id`, little-endian.
    Bytes = 12,
    /// An unsigned integer argument, laid out as [`ArgI64`](RawKind::ArgI64).
    ArgU64 = 13,
    /// A float argument (its bits in `tick`), laid out as [`ArgI64`](RawKind::ArgI64).
    ArgF64 = 14,
    /// A boolean argument (0 or 1 in `tick`), laid out as [`ArgI64`](RawKind::ArgI64).
    ArgBool = 15,
    /// A string argument: `id` holds the key's callsite id, `tick` the string's length in
    /// bytes, carried by the [`Bytes`](RawKind::Bytes) records that follow.
    ArgStr = 16,
    /// Allocations counted without a time ([`MemoryMode::Counts`](crate::MemoryMode::Counts))
    /// since the thread's record before: `id` holds how many, `tick` their bytes (not a
    /// tick). A [`FreeCount`](RawKind::FreeCount) follows, published together with it. They
    /// belong to the innermost scope open at their place in the thread's records, and go with
    /// the record before them for windows.
    AllocCount = 40,
    /// The frees counted with the [`AllocCount`](RawKind::AllocCount) before it: `id` how
    /// many, `tick` their bytes. A [`Payload`](RawKind::Payload) follows whose `tick` holds
    /// the most that bytes allocated minus bytes freed rose meanwhile (for scopes' peaks).
    FreeCount = 41,
    /// A counter was set (`counter!("name", set = n)`): `id` is the counter's callsite id,
    /// followed by a [`Payload`](RawKind::Payload) with the value: its bits in `tick`, its
    /// type in `id` (`RawEvent::NUMBER_INT` for an `i64`, `RawEvent::NUMBER_FLOAT` for
    /// an `f64`).
    CounterSet = 17,
    /// An amount was added to a counter (`counter!("name", add = n)`), laid out as
    /// [`CounterSet`](RawKind::CounterSet).
    CounterAdd = 18,
    /// A sample of a value distribution (`value!("name", v)`), laid out as
    /// [`CounterSet`](RawKind::CounterSet).
    Value = 19,
    /// A thread-scoped instant (`instant!("name")`): `id` is its callsite id. Its arguments,
    /// if any, follow as those of a scope entry do ([`ArgI64`](RawKind::ArgI64) …).
    Instant = 20,
    /// A process-wide instant (`instant!("name", process)`), laid out as
    /// [`Instant`](RawKind::Instant).
    InstantProcess = 21,
    /// A `tracing` span was entered (the `tracing` bridge): a [`Begin`](RawKind::Begin) of
    /// the span's callsite whose [`Payload`](RawKind::Payload) holds the `tracing` span id in
    /// `tick` (`id` 0). An [`End`](RawKind::End) closes it. Decoding groups the enters of one
    /// span between its [`SpanClose`](RawKind::SpanClose)s: a span entered once is a plain
    /// scope, a span entered more than once an async call whose slices are its polls.
    SpanEnter = 22,
    /// A `tracing` span was closed (its last handle dropped); `id` is its callsite id, or 0
    /// where unknown, and a [`Payload`](RawKind::Payload) with the span id in `tick` follows;
    /// the payload's `id` is `RawEvent::SPAN_CLOSED_HERE` when every enter of the span was
    /// on this thread (decoding then resolves it on the thread), else 0.
    /// It ends the span's async call, if it became one, and the use of its id: the next enter
    /// of the same id is another span's.
    SpanClose = 23,
    /// A `tracing` span follows from another that is not entered on the calling thread
    /// (`effect.follows_from(cause)`, the `tracing` bridge): `id` 0, then two
    /// [`Payload`](RawKind::Payload)s, the effect's span id in the first's `tick` and the
    /// cause's in the second's (`id` 0). Decoding resolves each id to the span that used it at
    /// that time and links the two.
    SpanFollows = 24,
}

impl RawKind {
    /// The kind whose discriminant is `raw`, if there is one (reading captures).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) const fn from_u32(raw: u32) -> Option<Self> {
        Some(match raw {
            1 => Self::Begin,
            2 => Self::End,
            3 => Self::AsyncBegin,
            4 => Self::AsyncEnd,
            5 => Self::PollBegin,
            6 => Self::Payload,
            7 => Self::Alloc,
            8 => Self::Free,
            9 => Self::Link,
            10 => Self::BeginFollows,
            11 => Self::ArgI64,
            12 => Self::Bytes,
            13 => Self::ArgU64,
            14 => Self::ArgF64,
            15 => Self::ArgBool,
            16 => Self::ArgStr,
            40 => Self::AllocCount,
            41 => Self::FreeCount,
            17 => Self::CounterSet,
            18 => Self::CounterAdd,
            19 => Self::Value,
            20 => Self::Instant,
            21 => Self::InstantProcess,
            22 => Self::SpanEnter,
            23 => Self::SpanClose,
            24 => Self::SpanFollows,
            _ => return None,
        })
    }

    /// True for the kinds whose `tick` field holds data rather than a tick; they are published
    /// together with the event they belong to, whose tick counts for them.
    #[inline(always)]
    pub const fn carries_data(self) -> bool {
        matches!(
            self,
            Self::Payload
                | Self::Bytes
                | Self::ArgI64
                | Self::ArgU64
                | Self::ArgF64
                | Self::ArgBool
                | Self::ArgStr
                | Self::AllocCount
                | Self::FreeCount
        )
    }
}

/// One 16-byte record in a thread's buffer: a raw clock tick, a callsite id and a kind.
///
/// Ticks are unconverted [`quanta::Clock::raw`] values; they become nanoseconds only after
/// collection, when a capture is decoded.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent {
    /// Raw clock value when the event happened.
    pub tick: u64,
    /// Interned callsite id (see [`Callsite::id`](crate::Callsite::id)), never 0, or what
    /// the kind says it holds instead.
    pub id: u32,
    /// What happened.
    pub kind: RawKind,
}

const _: () = assert!(std::mem::size_of::<RawEvent>() == 16);

impl RawEvent {
    /// A scope entry for callsite `id` at `tick`.
    #[inline(always)]
    pub const fn begin(id: u32, tick: u64) -> Self {
        Self {
            tick,
            id,
            kind: RawKind::Begin,
        }
    }

    /// A record of `kind` for `id` at `tick`.
    #[inline(always)]
    pub const fn new(kind: RawKind, id: u32, tick: u64) -> Self {
        Self { tick, id, kind }
    }

    /// A scope exit at `tick`, closing the entry whose [`end_key`](Self::end_key) is `key`.
    #[inline(always)]
    #[cfg_attr(not(feature = "enabled"), allow(dead_code))] // recorded by `enabled` code only
    pub const fn end(key: u32, tick: u64) -> Self {
        Self::new(RawKind::End, key, tick)
    }

    /// The key an [`End`](RawKind::End) carries for the entry of callsite `id` stamped
    /// `begin_tick`: 32 bits mixed from both (two multiplications). Entries open at once on a
    /// thread have different keys unless they share callsite and tick (then either pairing
    /// gives the same durations) or collide by chance (2⁻³² a pair; the newest is closed).
    #[inline(always)]
    pub const fn end_key(id: u32, begin_tick: u64) -> u32 {
        let x = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ begin_tick;
        (x.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32) as u32
    }

    /// The two records of an allocation (`kind` [`RawKind::Alloc`]) or a free
    /// ([`RawKind::Free`]) of `size` bytes at `address`, at `tick`.
    #[inline(always)]
    pub const fn memory(kind: RawKind, size: u64, address: u64, tick: u64) -> [Self; 2] {
        [
            Self {
                tick,
                id: size as u32,
                kind,
            },
            Self {
                tick: address,
                id: (size >> 32) as u32,
                kind: RawKind::Payload,
            },
        ]
    }

    /// The three records of allocations and frees counted without a time
    /// ([`RawKind::AllocCount`]): `(count, bytes)` allocated, `(count, bytes)` freed, and the
    /// most that bytes allocated minus bytes freed rose meanwhile.
    #[inline(always)]
    pub const fn memory_counts(allocs: (u32, u64), frees: (u32, u64), rise: u64) -> [Self; 3] {
        [
            Self {
                tick: allocs.1,
                id: allocs.0,
                kind: RawKind::AllocCount,
            },
            Self {
                tick: frees.1,
                id: frees.0,
                kind: RawKind::FreeCount,
            },
            Self {
                tick: rise,
                id: 0,
                kind: RawKind::Payload,
            },
        ]
    }

    /// The two records of entering callsite `id`'s scope at `tick`, following from the link
    /// with sequence number `seq` captured on thread `thread`.
    #[inline(always)]
    pub const fn begin_follows(id: u32, tick: u64, thread: u64, seq: u32) -> [Self; 2] {
        [
            Self {
                tick,
                id,
                kind: RawKind::BeginFollows,
            },
            Self {
                tick: thread,
                id: seq,
                kind: RawKind::Payload,
            },
        ]
    }

    /// The type of a number in a [`Payload`](RawKind::Payload)'s `id` after a counter or value
    /// record: a signed 64-bit integer in `tick`.
    pub const NUMBER_INT: u32 = 0;
    /// The type of a number in a [`Payload`](RawKind::Payload)'s `id` after a counter or value
    /// record: the bits of an `f64` in `tick`.
    pub const NUMBER_FLOAT: u32 = 1;

    /// The two records of a counter or value sample (`kind` [`RawKind::CounterSet`],
    /// [`RawKind::CounterAdd`] or [`RawKind::Value`]) of callsite `id` at `tick`: the number's
    /// type ([`RawEvent::NUMBER_INT`] or [`RawEvent::NUMBER_FLOAT`]) and its 64 bits.
    #[inline(always)]
    pub const fn sample(kind: RawKind, id: u32, tick: u64, (ty, bits): (u32, u64)) -> [Self; 2] {
        [
            Self { tick, id, kind },
            Self {
                tick: bits,
                id: ty,
                kind: RawKind::Payload,
            },
        ]
    }

    /// The two records of entering `tracing` span `span` of callsite `id` at `tick`
    /// ([`RawKind::SpanEnter`]).
    #[inline(always)]
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
    pub const fn span_enter(id: u32, tick: u64, span: u64) -> [Self; 2] {
        [
            Self {
                tick,
                id,
                kind: RawKind::SpanEnter,
            },
            Self::payload(0, span),
        ]
    }

    /// The two records of closing `tracing` span `span` of callsite `id` (0: unknown) at
    /// `tick` ([`RawKind::SpanClose`]); `here` when every enter of the span was on this
    /// thread.
    #[inline(always)]
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
    pub const fn span_close(id: u32, tick: u64, span: u64, here: bool) -> [Self; 2] {
        [
            Self {
                tick,
                id,
                kind: RawKind::SpanClose,
            },
            Self::payload(if here { Self::SPAN_CLOSED_HERE } else { 0 }, span),
        ]
    }

    /// The three records of `tracing` span `effect` following from span `cause` at `tick`
    /// ([`RawKind::SpanFollows`]).
    #[inline(always)]
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // used by `__private`'s test hooks
    pub const fn span_follows(tick: u64, effect: u64, cause: u64) -> [Self; 3] {
        [
            Self {
                tick,
                id: 0,
                kind: RawKind::SpanFollows,
            },
            Self::payload(0, effect),
            Self::payload(0, cause),
        ]
    }

    /// The `id` of a [`RawKind::SpanClose`]'s payload when every enter of the span was on
    /// the closing thread (0 when that is not known).
    pub const SPAN_CLOSED_HERE: u32 = 1;

    /// The payload of the record before it: `id` and 64 bits that are not a tick.
    #[inline(always)]
    pub const fn payload(id: u32, bits: u64) -> Self {
        Self {
            tick: bits,
            id,
            kind: RawKind::Payload,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RawKind;

    #[test]
    fn every_kind_reads_back_from_its_discriminant() {
        let mut kinds = 0;
        for raw in 0..=30 {
            if let Some(kind) = RawKind::from_u32(raw) {
                assert_eq!(kind as u32, raw);
                kinds += 1;
            }
        }
        assert_eq!(kinds, 24);
        assert_eq!(RawKind::from_u32(u32::MAX), None);
    }
}
