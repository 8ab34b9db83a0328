//! Packed event chunks: a thread's records, split into columns that repeat and compressed
//! with zstd, about a sixteenth of their recorded size.
//!
//! A recorded event chunk is 16 bytes a record: a tick, an id and a kind. In a program that
//! runs nested scopes at steady rates, most of that is predictable: the kinds and callsite
//! ids come in the same order request after request, the ticks grow by similar amounts, and
//! the id of a scope's exit is the key of the entry it closes, which the entry already says.
//! A packed chunk ([`EVENTS_PACKED`](super::format::EVENTS_PACKED)) writes the records as
//! columns that make this plain, then compresses the columns with zstd (with its checksum):
//!
//! - **kinds**, one byte a record: the record's kind, or [`CLOSES_TOP`] for an exit whose id
//!   is the key of the innermost entry still open in the chunk (which it closes);
//! - **ids**, a LEB128 varint for each record but those of [`CLOSES_TOP`];
//! - **ticks**, for each record whose tick is a time, the zig-zag difference from the time of
//!   the record of the chunk before it that has one (the first from 0), as a LEB128 varint;
//! - **values**, for each record whose tick holds data (arguments, payloads), the value as a
//!   LEB128 varint.
//!
//! The content of a packed chunk is a [`PACKED_PREFIX`]-byte prefix, then the zstd frame of
//! the columns: thread id (`u64`), reserved (`u64`, as an event chunk's), record count
//! (`u32`), version of the event chunk the records are of (`u16`), codec (`u16`,
//! [`CODEC_ZSTD_COLUMNS`]), bytes of the columns (`u32`), bytes of the ticks column
//! (`u32`), bytes of the ids column (`u32`), reserved (`u32`). Each chunk is compressed on its own: a reader decompresses one at a time, and a
//! file cut short keeps every packed chunk that is whole.
//!
//! Unpacking checks everything it reads and answers a [`PackError`] rather than records
//! made up: a frame that does not decompress (or whose checksum fails), columns of other
//! lengths than the prefix says, a kind this build does not know, an exit that closes
//! nothing.

use std::cell::RefCell;
use std::fmt;

use crate::record::event::{RawEvent, RawKind};
use crate::record::memory::MemoryMode;

/// Bytes of a packed chunk's content before its zstd frame.
pub(crate) const PACKED_PREFIX: usize = 40;

/// The codec of a packed chunk: the columns described in the module, compressed by zstd.
pub(crate) const CODEC_ZSTD_COLUMNS: u16 = 1;

/// Whether writers pack event chunks: this build has zstd (the `compress` feature).
pub(crate) const PACKING: bool = cfg!(feature = "compress");

thread_local! {
    /// Set by [`unpacked`]: this thread's writers write event chunks as recorded.
    static UNPACKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread's writers pack event chunks now: [`PACKING`], unless inside
/// [`unpacked`].
pub(crate) fn packing() -> bool {
    PACKING && !UNPACKED.try_with(std::cell::Cell::get).unwrap_or(false)
}

/// Runs `f` with this thread's writers writing event chunks as recorded, 16 bytes a record
/// (the format before packed chunks: old files, for tests).
#[cfg_attr(not(any(test, feature = "test-hooks")), allow(dead_code))]
pub(crate) fn unpacked<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            UNPACKED.set(self.0);
        }
    }
    let _reset = Reset(UNPACKED.replace(true));
    f()
}

/// The most records one packed chunk holds: a writer splits larger runs, and a reader
/// refuses a chunk that says more (what it decompresses stays within a few MiB).
pub(crate) const MAX_PACKED_RECORDS: usize = 1 << 16;

/// The most records a packed chunk may hold per byte of its content: a reader refuses a
/// chunk that says more (a decompression bomb: what a file unpacks to stays within 2,048
/// times its size). Packed chunks of real programs hold one or two records a byte; of ticks
/// that grow by a constant (a mock clock), a few dozen; and a writer never writes more than
/// [`WRITE_RECORDS`] a chunk, which with the prefix and the smallest zstd frame (13 bytes)
/// makes at most 92 a byte.
pub(crate) const MAX_RECORDS_PER_BYTE: usize = 128;

/// The most records a writer packs into one chunk: those of a recorded chunk (4096).
pub(crate) const WRITE_RECORDS: usize = 4096;

/// The kinds column's code of an exit whose id is the key of the innermost entry open.
pub(crate) const CLOSES_TOP: u8 = 0;

/// The most bytes a record takes in the columns: kind, an id's varint of 5 bytes, and a
/// tick's or a value's of 10.
const MAX_COLUMN_BYTES: usize = 1 + 5 + 10;

/// zstd's level: 1, its fastest but for the negative levels, which compress the ticks far
/// less.
#[cfg(feature = "compress")]
const LEVEL: i32 = 1;

/// Why a packed chunk cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PackError {
    /// The content is shorter than the prefix.
    Short(usize),
    /// The prefix names a codec this build does not know.
    Codec(u16),
    /// The prefix says more records than a packed chunk holds, or columns larger than such
    /// records take.
    TooLarge {
        /// Records the prefix says.
        records: u64,
        /// Bytes of columns the prefix says.
        columns: u64,
    },
    /// The zstd frame does not decompress to the columns the prefix says (damaged).
    #[cfg_attr(not(feature = "compress"), allow(dead_code))]
    Frame(String),
    /// The columns do not hold the records the prefix says (damaged).
    Columns(&'static str),
    /// This build was made without the `compress` feature.
    #[cfg_attr(feature = "compress", allow(dead_code))]
    Unsupported,
    /// A record of a kind this build does not know.
    Kind {
        /// Its place in the chunk.
        record: usize,
        /// The kind's code.
        code: u8,
    },
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short(len) => write!(
                f,
                "a packed events chunk holds at least {PACKED_PREFIX} bytes, not {len}"
            ),
            Self::Codec(codec) => write!(
                f,
                "packed events chunk codec {codec} is not supported (this build reads codec \
                 {CODEC_ZSTD_COLUMNS})"
            ),
            Self::TooLarge { records, columns } => write!(
                f,
                "a packed events chunk says {records} records in {columns} bytes of columns: \
                 more than a chunk holds ({MAX_PACKED_RECORDS} records, {MAX_COLUMN_BYTES} \
                 bytes each, {MAX_RECORDS_PER_BYTE} a byte of the chunk)"
            ),
            Self::Frame(why) => write!(f, "the packed events chunk's zstd frame is damaged: {why}"),
            Self::Unsupported => f.write_str(
                "this build of tickscope reads no packed events chunk: it was built without \
                 the `compress` feature",
            ),
            Self::Columns(why) => write!(f, "the packed events chunk is damaged: {why}"),
            Self::Kind { record, code } => write!(
                f,
                "record {record} of the packed events chunk has unknown kind {code}"
            ),
        }
    }
}

impl std::error::Error for PackError {}

/// What the prefix of a packed chunk says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prefix {
    /// The thread whose records these are.
    pub(crate) thread: u64,
    /// The event chunk's reserved field (`EVENTS_CUT` or 0).
    pub(crate) reserved: u64,
    /// Records in the chunk.
    pub(crate) count: usize,
    /// Version of the event chunk the records are of.
    pub(crate) version: u16,
    columns: usize,
    ticks: usize,
    ids: usize,
}

impl Prefix {
    /// The prefix at the start of `content`, checked for what it says alone.
    pub(crate) fn read(content: &[u8]) -> Result<Self, PackError> {
        let Some(prefix) = content.get(..PACKED_PREFIX) else {
            return Err(PackError::Short(content.len()));
        };
        let u64_at = |at: usize| u64::from_le_bytes(std::array::from_fn(|i| prefix[at + i]));
        let u32_at = |at: usize| u32::from_le_bytes(std::array::from_fn(|i| prefix[at + i]));
        let u16_at = |at: usize| u16::from_le_bytes([prefix[at], prefix[at + 1]]);
        let codec = u16_at(22);
        if codec != CODEC_ZSTD_COLUMNS {
            return Err(PackError::Codec(codec));
        }
        let count = u32_at(16) as usize;
        let columns = u32_at(24) as usize;
        let ticks = u32_at(28) as usize;
        let ids = u32_at(32) as usize;
        if count > MAX_PACKED_RECORDS
            || count > MAX_RECORDS_PER_BYTE * content.len()
            || columns > count * MAX_COLUMN_BYTES
        {
            return Err(PackError::TooLarge {
                records: count as u64,
                columns: columns as u64,
            });
        }
        if ticks.saturating_add(ids).saturating_add(count) > columns {
            return Err(PackError::Columns(
                "its kinds, ids and ticks columns are longer than its columns",
            ));
        }
        Ok(Self {
            thread: u64_at(0),
            reserved: u64_at(8),
            count,
            version: u16_at(20),
            columns,
            ticks,
            ids,
        })
    }
}

/// The scratch of one thread's packing and unpacking, kept between chunks.
#[derive(Default)]
struct Scratch {
    #[cfg(feature = "compress")]
    compressor: Option<zstd::bulk::Compressor<'static>>,
    #[cfg(feature = "compress")]
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
    kinds: Vec<u8>,
    ids: Vec<u8>,
    ticks: Vec<u8>,
    values: Vec<u8>,
    columns: Vec<u8>,
    frame: Vec<u8>,
    open: Vec<(u32, u64)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's scratch (a fresh one if it is in use further up the stack).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let mut f = Some(f);
    let done = SCRATCH.try_with(|cell| {
        cell.try_borrow_mut()
            .ok()
            .map(|mut scratch| (f.take().expect("called once"))(&mut scratch))
    });
    match done {
        Ok(Some(result)) => result,
        // In use (re-entered) or torn down (a thread's exit): a scratch of its own.
        _ => (f.take().expect("not called"))(&mut Scratch::default()),
    }
}

/// Whether a record of `kind` opens a scope that an [`End`](RawKind::End) closes with the
/// key of its id and tick.
fn opens(kind: RawKind) -> bool {
    matches!(
        kind,
        RawKind::Begin | RawKind::BeginFollows | RawKind::PollBegin | RawKind::SpanEnter
    )
}

/// Appends `value` as a LEB128 varint.
#[inline(always)]
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The varint at `*at` in `bytes`, moving `*at` past it.
#[inline(always)]
fn get_varint(bytes: &[u8], at: &mut usize) -> Result<u64, PackError> {
    // Most differences of a program's ticks take one byte.
    if let Some(&byte) = bytes.get(*at)
        && byte < 0x80
    {
        *at += 1;
        return Ok(u64::from(byte));
    }
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let Some(&byte) = bytes.get(*at) else {
            return Err(PackError::Columns("a varint runs past its column"));
        };
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err(PackError::Columns("a varint is longer than 10 bytes"))
}

/// The id at `*at` in the ids column `bytes` (a varint of 32 bits at most), moving `*at`
/// past it.
#[inline(always)]
fn get_id(bytes: &[u8], at: &mut usize) -> Result<u32, PackError> {
    u32::try_from(get_varint(bytes, at)?)
        .map_err(|_| PackError::Columns("an id is larger than 32 bits"))
}

/// Zig-zag: small differences of either sign become small numbers.
#[inline(always)]
fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline(always)]
fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// Appends to `out` the content of packed chunks holding `records` of thread `thread`, at most
/// [`WRITE_RECORDS`] each, calling `chunk` with each one's content (`out` cleared
/// before each); `version` is the version of the event chunk the records are of.
pub(crate) fn pack_each<E>(
    thread: u64,
    reserved: u64,
    version: u16,
    records: &[RawEvent],
    out: &mut Vec<u8>,
    mut chunk: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<std::io::Error>,
{
    for part in records.chunks(WRITE_RECORDS) {
        out.clear();
        pack(thread, reserved, version, part, out)?;
        chunk(out)?;
    }
    Ok(())
}

/// Appends to `out` the content of a packed chunk of `records` (at most [`WRITE_RECORDS`])
/// of thread `thread`.
pub(crate) fn pack(
    thread: u64,
    reserved: u64,
    version: u16,
    records: &[RawEvent],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    assert!(records.len() <= WRITE_RECORDS, "split by `pack_each`");
    with_scratch(|s| {
        columns(records, s);
        let start = out.len();
        out.extend_from_slice(&thread.to_le_bytes());
        out.extend_from_slice(&reserved.to_le_bytes());
        out.extend_from_slice(&(records.len() as u32).to_le_bytes());
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&CODEC_ZSTD_COLUMNS.to_le_bytes());
        out.extend_from_slice(&(s.columns.len() as u32).to_le_bytes());
        out.extend_from_slice(&(s.ticks.len() as u32).to_le_bytes());
        out.extend_from_slice(&(s.ids.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        debug_assert_eq!(out.len() - start, PACKED_PREFIX);
        compress(s)?;
        out.extend_from_slice(&s.frame);
        Ok(())
    })
}

/// Compresses `s.columns` into `s.frame`.
#[cfg(feature = "compress")]
fn compress(s: &mut Scratch) -> std::io::Result<()> {
    let compressor = match &mut s.compressor {
        Some(c) => c,
        empty => {
            let mut c = zstd::bulk::Compressor::new(LEVEL)?;
            c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
            empty.insert(c)
        }
    };
    // A `Vec` is filled from its start: the frame goes into the scratch, then after the
    // prefix.
    s.frame.clear();
    s.frame
        .reserve(zstd::zstd_safe::compress_bound(s.columns.len()));
    compressor.compress_to_buffer(&s.columns, &mut s.frame)?;
    Ok(())
}

/// Without the `compress` feature nothing is packed ([`PACKING`] is false).
#[cfg(not(feature = "compress"))]
fn compress(_s: &mut Scratch) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "this build of tickscope packs no events: it was built without the `compress` feature",
    ))
}

/// Decompresses `frame` into `s.columns`, `len` bytes at most; returns the bytes.
#[cfg(feature = "compress")]
fn decompress(s: &mut Scratch, frame: &[u8], len: usize) -> Result<usize, PackError> {
    let decompressor = match &mut s.decompressor {
        Some(d) => d,
        empty => empty
            .insert(zstd::bulk::Decompressor::new().map_err(|e| PackError::Frame(e.to_string()))?),
    };
    s.columns.clear();
    s.columns.reserve(len);
    decompressor
        .decompress_to_buffer(frame, &mut s.columns)
        .map_err(|e| PackError::Frame(e.to_string()))
}

/// Without the `compress` feature a packed chunk cannot be read.
#[cfg(not(feature = "compress"))]
fn decompress(_s: &mut Scratch, _frame: &[u8], _len: usize) -> Result<usize, PackError> {
    Err(PackError::Unsupported)
}

/// Fills `s.columns` with the columns of `records`.
fn columns(records: &[RawEvent], s: &mut Scratch) {
    s.kinds.clear();
    s.ids.clear();
    s.ticks.clear();
    s.values.clear();
    s.open.clear();
    s.kinds.reserve(records.len());
    s.ids.reserve(records.len());
    s.ticks.reserve(2 * records.len());
    let mut time = 0u64;
    for r in records {
        let kind = r.kind;
        let closes_top = kind == RawKind::End
            && s.open
                .last()
                .is_some_and(|&(id, tick)| RawEvent::end_key(id, tick) == r.id);
        if closes_top {
            s.open.pop();
            s.kinds.push(CLOSES_TOP);
        } else {
            s.kinds.push(kind as u32 as u8);
            put_varint(&mut s.ids, u64::from(r.id));
            if opens(kind) {
                s.open.push((r.id, r.tick));
            }
        }
        if kind.carries_data() {
            put_varint(&mut s.values, r.tick);
        } else {
            put_varint(&mut s.ticks, zigzag(r.tick.wrapping_sub(time)));
            time = r.tick;
        }
    }
    s.columns.clear();
    s.columns
        .reserve(s.kinds.len() + s.ids.len() + s.ticks.len() + s.values.len());
    s.columns.extend_from_slice(&s.kinds);
    s.columns.extend_from_slice(&s.ids);
    s.columns.extend_from_slice(&s.ticks);
    s.columns.extend_from_slice(&s.values);
}

/// The records of the packed chunk `content`, appended to `out` (cleared first), with its
/// prefix. On an error `out` holds nothing.
pub(crate) fn unpack(content: &[u8], out: &mut Vec<RawEvent>) -> Result<Prefix, PackError> {
    out.clear();
    let prefix = Prefix::read(content)?;
    let result = with_scratch(|s| {
        let got = decompress(s, &content[PACKED_PREFIX..], prefix.columns)?;
        if got != prefix.columns {
            return Err(PackError::Columns(
                "its columns are not as long as its prefix says",
            ));
        }
        records(&prefix, &s.columns, &mut s.open, out)
    });
    if result.is_err() {
        out.clear();
    }
    result.map(|()| prefix)
}

/// What [`check`] finds in a packed chunk, without making its records.
pub(crate) struct Checked {
    /// The most its allocations and frees say of the session's memory mode.
    pub(crate) memory: MemoryMode,
    /// The tick of its last record whose tick is a time (not data).
    pub(crate) last_tick: Option<u64>,
}

/// Checks the packed chunk `content` as [`unpack`] does (the same errors), without making
/// its records: for a reader that keeps where the chunk lies and unpacks it when used.
pub(crate) fn check(content: &[u8]) -> Result<Checked, PackError> {
    let prefix = Prefix::read(content)?;
    with_scratch(|s| {
        let got = decompress(s, &content[PACKED_PREFIX..], prefix.columns)?;
        if got != prefix.columns {
            return Err(PackError::Columns(
                "its columns are not as long as its prefix says",
            ));
        }
        let columns = &s.columns;
        let Some(kinds) = columns.get(..prefix.count) else {
            return Err(PackError::Columns("its kinds column is cut short"));
        };
        let (mut open, mut explicit, mut times, mut data) = (0usize, 0, 0, 0);
        let mut memory = MemoryMode::Off;
        for (n, &code) in kinds.iter().enumerate() {
            if code == CLOSES_TOP {
                let Some(left) = open.checked_sub(1) else {
                    return Err(PackError::Columns("an exit closes no open entry"));
                };
                open = left;
                times += 1;
                continue;
            }
            let Some(kind) = RawKind::from_u32(u32::from(code)) else {
                return Err(PackError::Kind { record: n, code });
            };
            explicit += 1;
            open += usize::from(opens(kind));
            memory = memory.max(MemoryMode::of_kind(u32::from(code)));
            if kind.carries_data() {
                data += 1;
            } else {
                times += 1;
            }
        }
        // `Prefix::read` checked that the kinds, ids and ticks fit in the columns.
        let ids_end = prefix.count + prefix.ids;
        let ticks_end = ids_end + prefix.ticks;
        let ids = &columns[prefix.count..ids_end];
        let (ticks, values) = (&columns[ids_end..ticks_end], &columns[ticks_end..]);
        let mut at_id = 0;
        for _ in 0..explicit {
            get_id(ids, &mut at_id)?;
        }
        if at_id != ids.len() {
            return Err(PackError::Columns("its columns hold more than its records"));
        }
        let (mut at, mut time) = (0, 0u64);
        for _ in 0..times {
            time = time.wrapping_add(unzigzag(get_varint(ticks, &mut at)?));
        }
        let mut at_value = 0;
        for _ in 0..data {
            get_varint(values, &mut at_value)?;
        }
        if at != ticks.len() || at_value != values.len() {
            return Err(PackError::Columns("its columns hold more than its records"));
        }
        Ok(Checked {
            memory,
            last_tick: (times > 0).then_some(time),
        })
    })
}

/// The records of `columns`, which `prefix` describes, appended to `out`.
fn records(
    prefix: &Prefix,
    columns: &[u8],
    open: &mut Vec<(u32, u64)>,
    out: &mut Vec<RawEvent>,
) -> Result<(), PackError> {
    let count = prefix.count;
    let Some(kinds) = columns.get(..count) else {
        return Err(PackError::Columns("its kinds column is cut short"));
    };
    // `Prefix::read` checked that the kinds, ids and ticks fit in the columns.
    let ids_end = count + prefix.ids;
    let ticks_end = ids_end + prefix.ticks;
    let ids = &columns[count..ids_end];
    let ticks = &columns[ids_end..ticks_end];
    let values = &columns[ticks_end..];
    out.reserve(count);
    open.clear();
    let (mut at_id, mut at_tick, mut at_value) = (0, 0, 0);
    let mut time = 0u64;
    for (n, &code) in kinds.iter().enumerate() {
        let (kind, id) = if code == CLOSES_TOP {
            let Some((id, tick)) = open.pop() else {
                return Err(PackError::Columns("an exit closes no open entry"));
            };
            (RawKind::End, RawEvent::end_key(id, tick))
        } else {
            let Some(kind) = RawKind::from_u32(u32::from(code)) else {
                return Err(PackError::Kind { record: n, code });
            };
            (kind, get_id(ids, &mut at_id)?)
        };
        let tick = if kind.carries_data() {
            get_varint(values, &mut at_value)?
        } else {
            time = time.wrapping_add(unzigzag(get_varint(ticks, &mut at_tick)?));
            time
        };
        if code != CLOSES_TOP && opens(kind) {
            open.push((id, tick));
        }
        out.push(RawEvent::new(kind, id, tick));
    }
    if at_id != ids.len() || at_tick != ticks.len() || at_value != values.len() {
        return Err(PackError::Columns("its columns hold more than its records"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(records: &[RawEvent]) -> Vec<u8> {
        let mut content = Vec::new();
        pack(7, 1, 4, records, &mut content).unwrap();
        let mut back = Vec::new();
        let prefix = unpack(&content, &mut back).unwrap();
        assert_eq!(back, records);
        let checked = check(&content).unwrap();
        let last = records.iter().rev().find(|r| !r.kind.carries_data());
        assert_eq!(checked.last_tick, last.map(|r| r.tick));
        let memory = records
            .iter()
            .map(|r| MemoryMode::of_kind(r.kind as u32))
            .max();
        assert_eq!(checked.memory, memory.unwrap_or(MemoryMode::Off));
        assert_eq!((prefix.thread, prefix.reserved, prefix.version), (7, 1, 4));
        assert_eq!(prefix.count, records.len());
        content
    }

    /// `depth`-deep nested scopes, `n` times, ticks `step` apart with a jitter.
    fn nested(n: usize, depth: u32, step: u64) -> Vec<RawEvent> {
        let mut records = Vec::new();
        let mut tick = 1_000_000_000u64;
        let mut open = Vec::new();
        for i in 0..n {
            for d in 0..depth {
                tick += step + (i as u64 * 7 + u64::from(d)) % 5;
                records.push(RawEvent::new(RawKind::Begin, d + 1, tick));
                open.push((d + 1, tick));
            }
            while let Some((id, began)) = open.pop() {
                tick += step + (i as u64 * 3) % 4;
                records.push(RawEvent::new(
                    RawKind::End,
                    RawEvent::end_key(id, began),
                    tick,
                ));
            }
        }
        records
    }

    #[test]
    fn nested_scopes_round_trip_small() {
        let records = nested(512, 4, 40);
        assert_eq!(records.len(), 4096);
        let content = round_trip(&records);
        // 4096 records of 16 bytes: well under a sixteenth.
        assert!(content.len() < 4096, "{} bytes", content.len());
    }

    #[test]
    fn every_kind_and_odd_values_round_trip() {
        let mut records = Vec::new();
        for raw in 1..=255u32 {
            if let Some(kind) = RawKind::from_u32(raw) {
                records.push(RawEvent::new(kind, raw * 1000, u64::MAX - u64::from(raw)));
                records.push(RawEvent::new(kind, u32::MAX, 0));
            }
        }
        // An exit that closes nothing open, and one that closes an entry further down.
        records.push(RawEvent::new(RawKind::Begin, 5, 10));
        records.push(RawEvent::new(RawKind::Begin, 6, 20));
        records.push(RawEvent::new(RawKind::End, RawEvent::end_key(5, 10), 30));
        records.push(RawEvent::new(RawKind::End, RawEvent::end_key(6, 20), 40));
        records.push(RawEvent::new(RawKind::End, 12345, 5));
        round_trip(&records);
        round_trip(&[]);
    }

    #[test]
    fn varints_and_zigzag_invert() {
        for v in [0, 1, 127, 128, 300, u64::MAX, u64::MAX / 2, 1 << 63] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut at = 0;
            assert_eq!(get_varint(&out, &mut at), Ok(v));
            assert_eq!(at, out.len());
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(u64::MAX), 1);
    }

    #[test]
    fn damage_is_an_error_never_records() {
        let records = nested(100, 3, 50);
        let mut content = Vec::new();
        pack(1, 0, 4, &records, &mut content).unwrap();
        let mut out = Vec::new();
        // Every byte flipped in turn: an error, or (a byte the checksum does not cover, such
        // as the thread) the same number of records.
        for at in 0..content.len() {
            let mut bad = content.clone();
            bad[at] ^= 0x55;
            // Checking finds what unpacking finds.
            assert_eq!(check(&bad).is_ok(), unpack(&bad, &mut Vec::new()).is_ok());
            match unpack(&bad, &mut out) {
                Ok(prefix) => {
                    // The thread, the reserved field and the version are the reader's to
                    // check.
                    let unchecked = at < 16 || (20..22).contains(&at) || (36..40).contains(&at);
                    assert!(unchecked, "byte {at} changed and still unpacked");
                    assert_eq!(out.len(), prefix.count);
                }
                Err(_) => assert!(out.is_empty()),
            }
        }
        // Cut short anywhere: an error.
        for len in 0..content.len() {
            assert!(unpack(&content[..len], &mut out).is_err(), "cut at {len}");
            assert!(out.is_empty());
        }
        // A prefix that says too much.
        let mut bad = content.clone();
        bad[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            unpack(&bad, &mut out),
            Err(PackError::TooLarge { .. })
        ));
        let mut bad = content;
        bad[22] = 9;
        assert_eq!(unpack(&bad, &mut out), Err(PackError::Codec(9)));
    }

    #[test]
    fn large_runs_split() {
        let records = nested(MAX_PACKED_RECORDS / 4 + 10, 2, 30);
        let mut out = Vec::new();
        let mut back = Vec::new();
        let mut chunks = 0;
        pack_each::<std::io::Error>(3, 0, 4, &records, &mut out, |content| {
            let mut part = Vec::new();
            unpack(content, &mut part).unwrap();
            back.extend(part);
            chunks += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(chunks, records.len().div_ceil(WRITE_RECORDS));
        assert_eq!(back, records);
    }
}
