//! Unpacking: a packed chunk checked, decompressed and turned back into records.

use super::codec::{get_varint, opens};
use super::cursor::Cursor;
use super::errors::PackError;
use super::kept::{Columns, Room};
use super::prefix::Prefix;
use super::scan;
use super::scratch::{Scratch, with_scratch};
use super::{CLOSES_TOP, PACKED_PREFIX};
use crate::record::event::{RawEvent, RawKind};
use crate::record::memory::MemoryMode;

/// Decompresses `frame` into `s.columns`, `len` bytes at most; returns the bytes.
fn decompress(s: &mut Scratch, frame: &[u8], len: usize) -> Result<usize, PackError> {
    decompress_into(s, frame, len, None)
}

/// Decompresses `frame` into `out` (cleared), or into `s.columns` without it, `len` bytes at
/// most; returns the bytes.
#[cfg(feature = "compress")]
fn decompress_into(
    s: &mut Scratch,
    frame: &[u8],
    len: usize,
    out: Option<&mut Vec<u8>>,
) -> Result<usize, PackError> {
    let decompressor = match &mut s.decompressor {
        Some(d) => d,
        empty => empty
            .insert(zstd::bulk::Decompressor::new().map_err(|e| PackError::Frame(e.to_string()))?),
    };
    let out = out.unwrap_or(&mut s.columns);
    out.clear();
    out.reserve(len);
    decompressor
        .decompress_to_buffer(frame, out)
        .map_err(|e| PackError::Frame(e.to_string()))
}

/// Without the `compress` feature a packed chunk cannot be read.
#[cfg(not(feature = "compress"))]
fn decompress_into(
    _s: &mut Scratch,
    _frame: &[u8],
    _len: usize,
    _out: Option<&mut Vec<u8>>,
) -> Result<usize, PackError> {
    Err(PackError::Unsupported)
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
    /// Its columns, unpacked, when the budget of columns kept has room for them.
    pub(crate) kept: Option<Columns>,
}

/// Checks the packed chunk `content` as [`unpack`] does (the same errors), without making
/// its records: for a reader that keeps where the chunk lies and unpacks it when used.
pub(crate) fn check(content: &[u8]) -> Result<Checked, PackError> {
    let prefix = Prefix::read(content)?;
    // Columns the budget has room for are unpacked into memory of their own and kept as
    // they are; others into the scratch.
    let room = Room::take(prefix.columns);
    let mut own = room.as_ref().map(|_| Vec::with_capacity(prefix.columns));
    with_scratch(|s| {
        let frame = &content[PACKED_PREFIX..];
        let got = decompress_into(s, frame, prefix.columns, own.as_mut())?;
        if got != prefix.columns {
            return Err(PackError::Columns(
                "its columns are not as long as its prefix says",
            ));
        }
        let columns = own.as_deref().unwrap_or(&s.columns);
        let Some(kinds) = columns.get(..prefix.count) else {
            return Err(PackError::Columns("its kinds column is cut short"));
        };
        let (mut open, mut explicit, mut times, mut data) = (0usize, 0, 0, 0);
        let mut memory = MemoryMode::Off;
        // Most chunks are entries and exits only: read eight kinds at a time, and by the loop
        // below only when they are not.
        let plain = match scan::plain_kinds(kinds) {
            (true, ids) => {
                (explicit, times) = (ids, kinds.len());
                true
            }
            (false, _) => false,
        };
        for (n, &code) in kinds.iter().enumerate().filter(|_| !plain) {
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
        if scan::skip_ids(ids, explicit)? != ids.len() {
            return Err(PackError::Columns("its columns hold more than its records"));
        }
        let (first, time, at) = scan::sum_ticks(ticks, times)?;
        let first = (times > 0).then_some(first);
        // The ticks of its first and last records, when the first one's is a time.
        let first_timed = kinds.first().is_some_and(|&code| {
            code == CLOSES_TOP
                || RawKind::from_u32(u32::from(code)).is_some_and(|k| !k.carries_data())
        });
        let ends = first.filter(|_| first_timed).map(|first| (first, time));
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
            kept: room
                .zip(own)
                .map(|(room, own)| room.keep(prefix, own, ends, plain)),
        })
    })
}

/// The records of the checked columns `kept` (cleared first). On an error `out` holds
/// nothing.
pub(crate) fn unpack_kept(kept: &Columns, out: &mut Vec<RawEvent>) -> Result<(), PackError> {
    out.clear();
    let result = with_scratch(|s| records(&kept.prefix, &kept.bytes, &mut s.open, out));
    if result.is_err() {
        out.clear();
    }
    result
}

/// The records of `columns`, which `prefix` describes, appended to `out`.
pub(super) fn records(
    prefix: &Prefix,
    columns: &[u8],
    open: &mut Vec<(u32, u64)>,
    out: &mut Vec<RawEvent>,
) -> Result<(), PackError> {
    let mut cursor = Cursor::new(prefix, columns, open)?;
    out.reserve(prefix.count);
    // A loop over the kinds that pushes each record (an `extend` from the cursor as an
    // iterator costs a `.pftrace` convert 5 % more: its length unknown, its error kept).
    let kinds = cursor.kinds;
    for (n, &code) in kinds.iter().enumerate() {
        out.push(cursor.record(n, code)?);
    }
    cursor.at_kind = kinds.len();
    cursor.finish()
}
