//! The fixed-size records the hot path writes.

/// What a [`RawEvent`] records.
///
/// The discriminants are stable: they are written as they are into raw trace files.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RawKind {
    /// A scope was entered; `id` is its callsite id.
    Begin = 1,
    /// A scope was left; `id` is its callsite id, the same as its `Begin`'s. Also ends a
    /// [`PollBegin`](RawKind::PollBegin).
    End = 2,
    /// An async call's logical span began (its first poll); `id` is its callsite id. The next
    /// event of the thread is a [`Data`](RawKind::Data) event with the span's id.
    AsyncBegin = 3,
    /// An async call's logical span ended (it completed or was dropped); `id` is its callsite
    /// id, followed by a [`Data`](RawKind::Data) event with the span's id.
    AsyncEnd = 4,
    /// One poll of an async call began on this thread; `id` is its callsite id, followed by a
    /// [`Data`](RawKind::Data) event with the span's id (0 when the span was not recorded).
    /// An [`End`](RawKind::End) closes it.
    PollBegin = 5,
    /// The payload of the event before it: `id` carries the value, `tick` repeats the tick of
    /// that event so that windows and reclamation treat the two alike.
    Data = 6,
    /// Memory was allocated (recorded by [`TrackingAlloc`](crate::TrackingAlloc)); `id` holds the
    /// low 32 bits of the size. A [`Wide`](RawKind::Wide) event with the address follows in the same chunk.
    Alloc = 7,
    /// Memory is being freed (recorded before the allocator gets it back, so that a later
    /// allocation of the same address always has a later tick); laid out as
    /// [`Alloc`](RawKind::Alloc).
    Free = 8,
    /// A 96-bit payload of the event before it, published together with it: `tick` holds a
    /// 64-bit value that is not a tick (windows and reclamation go by the event before it) and
    /// `id` 32 bits. After [`Alloc`](RawKind::Alloc) or [`Free`](RawKind::Free): the address,
    /// and the high 32 bits of the size. After [`BeginFollows`](RawKind::BeginFollows): the
    /// link's thread id and sequence number.
    Wide = 9,
    /// A [`Link`](crate::Link) was captured inside the innermost open scope; `id` is its
    /// sequence number on this thread.
    Link = 10,
    /// A scope that follows from a link was entered: a [`Begin`](RawKind::Begin) whose
    /// [`Wide`](RawKind::Wide) payload names the link.
    BeginFollows = 11,
    /// An argument of the scope entered just before it (see `scope!`): `id` holds the key's
    /// callsite id (low 24 bits) and the value's type (high 8 bits), `tick` the value (not a
    /// tick), or for a string its length in bytes, in the [`Bytes`](RawKind::Bytes) records
    /// that follow.
    Arg = 12,
    /// 12 bytes of a string argument: 8 in `tick`, 4 in `id`, little-endian.
    Bytes = 13,
}

impl RawKind {
    /// True for the kinds whose `tick` field holds data rather than a tick; they are published
    /// together with the event they belong to, whose tick counts for them.
    #[inline(always)]
    pub const fn carries_data(self) -> bool {
        matches!(self, Self::Wide | Self::Arg | Self::Bytes)
    }

    /// The kind with discriminant `value`, or `None` for a value this version does not know.
    pub const fn from_u32(value: u32) -> Option<Self> {
        match value {
            1 => Some(Self::Begin),
            2 => Some(Self::End),
            3 => Some(Self::AsyncBegin),
            4 => Some(Self::AsyncEnd),
            5 => Some(Self::PollBegin),
            6 => Some(Self::Data),
            7 => Some(Self::Alloc),
            8 => Some(Self::Free),
            9 => Some(Self::Wide),
            10 => Some(Self::Link),
            11 => Some(Self::BeginFollows),
            12 => Some(Self::Arg),
            13 => Some(Self::Bytes),
            _ => None,
        }
    }
}

/// One 16-byte record in a thread's buffer: a raw clock tick, a callsite id and a kind.
///
/// Ticks are unconverted [`quanta::Clock::raw`] values; they become nanoseconds only after
/// collection (see [`Converter`](crate::clock::Converter)).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent {
    /// Raw clock value when the event happened.
    pub tick: u64,
    /// Interned callsite id (see [`Callsite::id`](crate::Callsite::id)); never 0. A
    /// [`RawKind::Data`] event carries its payload here instead.
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

    /// A scope exit for callsite `id` at `tick`.
    #[inline(always)]
    pub const fn end(id: u32, tick: u64) -> Self {
        Self {
            tick,
            id,
            kind: RawKind::End,
        }
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
                kind: RawKind::Wide,
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
                kind: RawKind::Wide,
            },
        ]
    }

    /// The payload `value` of the event before it, which happened at `tick`.
    #[inline(always)]
    pub const fn data(value: u32, tick: u64) -> Self {
        Self {
            tick,
            id: value,
            kind: RawKind::Data,
        }
    }
}
