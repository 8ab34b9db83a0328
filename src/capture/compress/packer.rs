//! Packing: records into columns, compressed, in chunks of at most
//! [`MAX_PACKED_RECORDS`](super::MAX_PACKED_RECORDS) records.

use super::codec::{opens, put_varint, zigzag};
use super::scratch::{Scratch, with_scratch};
use super::{CLOSES_TOP, CODEC_ZSTD_COLUMNS, PACKED_PREFIX, WRITE_RECORDS};
use crate::record::event::{RawEvent, RawKind};

/// zstd's level: 1, its fastest but for the negative levels, which compress the ticks far
/// less.
#[cfg(feature = "compress")]
const LEVEL: i32 = 1;

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
pub(super) fn compress(s: &mut Scratch) -> std::io::Result<()> {
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
pub(super) fn compress(_s: &mut Scratch) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "this build of tickscope packs no events: it was built without the `compress` feature",
    ))
}

/// Fills `s.columns` with the columns of `records`.
pub(super) fn columns(records: &[RawEvent], s: &mut Scratch) {
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
