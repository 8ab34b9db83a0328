//! The pieces of the column codec: varints, zigzag deltas, callsite ids, and which kinds
//! open a scope.

use super::errors::PackError;
use crate::record::event::RawKind;

/// Whether a record of `kind` opens a scope that an [`End`](RawKind::End) closes with the
/// key of its id and tick.
pub(super) fn opens(kind: RawKind) -> bool {
    matches!(
        kind,
        RawKind::Begin | RawKind::BeginFollows | RawKind::PollBegin | RawKind::SpanEnter
    )
}

/// Appends `value` as a LEB128 varint.
#[inline(always)]
pub(super) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The varint at `*at` in `bytes`, moving `*at` past it.
#[inline(always)]
pub(super) fn get_varint(bytes: &[u8], at: &mut usize) -> Result<u64, PackError> {
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
pub(super) fn get_id(bytes: &[u8], at: &mut usize) -> Result<u32, PackError> {
    u32::try_from(get_varint(bytes, at)?)
        .map_err(|_| PackError::Columns("an id is larger than 32 bits"))
}

/// Zig-zag: small differences of either sign become small numbers.
#[inline(always)]
pub(super) fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline(always)]
pub(super) fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}
