//! The check's readings of whole columns, eight bytes at a time where they allow it: the
//! kinds of a chunk of plain scopes, and runs of one-byte varints (most callsite ids, and
//! the tick differences of a program's scopes).
//!
//! Each gives what a loop of one record or varint at a time gives (the tests compare them on
//! random columns), errors included: a word that does not allow it is read one at a time.

use super::CLOSES_TOP;
use super::codec::{get_id, get_varint, unzigzag};
use super::errors::PackError;
use crate::record::event::RawKind;

/// The high bit of every byte.
const HIGH: u64 = 0x8080_8080_8080_8080;
/// The low bit of every byte.
const LOW: u64 = 0x0101_0101_0101_0101;

/// The word of the eight bytes at `at` in `bytes` (little-endian: byte `at` lowest).
#[inline(always)]
fn word(bytes: &[u8], at: usize) -> Option<u64> {
    let eight = bytes.get(at..at + 8)?;
    Some(u64::from_le_bytes(eight.try_into().ok()?))
}

/// The sum of the eight bytes of `x`.
#[inline(always)]
fn byte_sum(x: u64) -> u64 {
    const EVEN: u64 = 0x00FF_00FF_00FF_00FF;
    let pairs = (x & EVEN) + ((x >> 8) & EVEN);
    pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48
}

/// Whether `kinds` are those of plain scopes: each an entry, an exit, or an exit of the
/// innermost entry open in the chunk ([`CLOSES_TOP`]) while one is; and how many are not
/// [`CLOSES_TOP`] (those whose id the ids column holds).
pub(super) fn plain_kinds(kinds: &[u8]) -> (bool, usize) {
    const { assert!(CLOSES_TOP == 0 && RawKind::Begin as u8 == 1 && RawKind::End as u8 == 2) };
    // Entries open in the chunk so far.
    let mut depth = 0usize;
    let mut explicit = 0;
    let mut at = 0;
    while let Some(w) = word(kinds, at) {
        // A byte above 2 (its high bit, or that of the byte plus 0x7D) is another kind.
        if (w | w.wrapping_add(0x7D7D_7D7D_7D7D_7D7D)) & HIGH != 0 {
            return (false, 0);
        }
        // Each kind's change of depth plus one (exit of the innermost 0, exit 1, entry 2),
        // then their sums from the word's first byte: at most 16 a byte.
        let mut sums = ((w << 1) | (w >> 1)) & (3 * LOW);
        sums += sums << 8;
        sums += sums << 16;
        sums += sums << 32;
        if depth < 8 {
            // Byte k holds the depth after kind k, from the word's start, plus 8: none may be
            // below 8 - depth (bytes of at most 23: `x - n` borrows into a byte's high bit
            // exactly where it is below n).
            let at_least = (8 - depth) as u64;
            let depths = sums + 0x0001_0203_0405_0607;
            if depths.wrapping_sub(at_least * LOW) & !depths & HIGH != 0 {
                return (false, 0);
            }
        }
        depth = (depth + (sums >> 56) as usize) - 8;
        explicit += ((w | (w >> 1)) & LOW).count_ones() as usize;
        at += 8;
    }
    for &code in &kinds[at..] {
        match code {
            CLOSES_TOP => match depth.checked_sub(1) {
                Some(left) => depth = left,
                None => return (false, 0),
            },
            1 => (depth, explicit) = (depth + 1, explicit + 1),
            2 => explicit += 1,
            _ => return (false, 0),
        }
    }
    (true, explicit)
}

/// Reads `count` ids from the start of `ids` (each a varint of 32 bits at most), as `count`
/// calls of [`get_id`] do; returns where they end.
pub(super) fn skip_ids(ids: &[u8], count: usize) -> Result<usize, PackError> {
    let (mut at, mut left) = (0, count);
    while left >= 8 {
        match word(ids, at) {
            // Eight ids of one byte.
            Some(w) if w & HIGH == 0 => (at, left) = (at + 8, left - 8),
            _ => {
                get_id(ids, &mut at)?;
                left -= 1;
            }
        }
    }
    for _ in 0..left {
        get_id(ids, &mut at)?;
    }
    Ok(at)
}

/// Reads `count` zig-zag differences from the start of `ticks`, as `count` calls of
/// [`get_varint`] do, adding them up from 0 (wrapping); returns the first sum (after one
/// difference, when there is one), the last, and where they end.
pub(super) fn sum_ticks(ticks: &[u8], count: usize) -> Result<(u64, u64, usize), PackError> {
    let mut at = 0;
    if count == 0 {
        return Ok((0, 0, 0));
    }
    let first = unzigzag(get_varint(ticks, &mut at)?);
    let (mut time, mut left) = (first, count - 1);
    while left >= 8 {
        match word(ticks, at) {
            Some(w) if w & HIGH == 0 => {
                // Eight differences of one byte b each: b / 2 for an even b, -(b / 2) - 1
                // for an odd one; together the sum of the halves less the odd bytes.
                let odd = w & ((w & LOW) * 0xFF);
                let halves = (w >> 1) & (0x7F * LOW);
                let sum = byte_sum(halves).wrapping_sub(byte_sum(odd));
                time = time.wrapping_add(sum);
                (at, left) = (at + 8, left - 8);
            }
            _ => {
                time = time.wrapping_add(unzigzag(get_varint(ticks, &mut at)?));
                left -= 1;
            }
        }
    }
    for _ in 0..left {
        time = time.wrapping_add(unzigzag(get_varint(ticks, &mut at)?));
    }
    Ok((first, time, at))
}

#[cfg(test)]
mod tests {
    use super::super::codec::{put_varint, zigzag};
    use super::*;

    /// `plain_kinds` one kind at a time.
    fn plain_kinds_slowly(kinds: &[u8]) -> (bool, usize) {
        let (mut depth, mut explicit) = (0isize, 0);
        for &code in kinds {
            match code {
                CLOSES_TOP => depth -= 1,
                1 => (depth, explicit) = (depth + 1, explicit + 1),
                2 => explicit += 1,
                _ => return (false, 0),
            }
            if depth < 0 {
                return (false, 0);
            }
        }
        (true, explicit)
    }

    #[test]
    fn kinds_eight_at_a_time_are_read_as_one_at_a_time() {
        let mut next = crate::record::test_random(41);
        let mut plain = 0;
        for round in 0..4000 {
            let len = next(70) as usize;
            // Mostly entries and exits, balanced or not; now and then another kind.
            let kinds: Vec<u8> = (0..len)
                .map(|_| match (round % 4, next(100)) {
                    (0, 0) => [3, 9, 0x80, 0xFF, 0x83][next(5) as usize] as u8,
                    (1, n) => [1, 0, 0, 2][(n % 4) as usize],
                    (2, n) if n < 55 => 1,
                    (_, n) => [1, 0, 2][(n % 3) as usize],
                })
                .collect();
            let slowly = plain_kinds_slowly(&kinds);
            assert_eq!(plain_kinds(&kinds), slowly, "{kinds:?}");
            plain += usize::from(slowly.0 && len >= 16);
        }
        assert!(plain > 500, "{plain}");
        // Deep: the depth goes past what a byte holds.
        let deep: Vec<u8> = [vec![1; 300], vec![0; 300], vec![2; 9]].concat();
        assert_eq!(plain_kinds(&deep), (true, 309));
        let under: Vec<u8> = [vec![1; 300], vec![0; 301]].concat();
        assert_eq!(plain_kinds(&under), (false, 0));
    }

    #[test]
    fn varints_eight_at_a_time_are_read_as_one_at_a_time() {
        let mut next = crate::record::test_random(43);
        for round in 0..3000 {
            let count = next(40) as usize;
            let mut bytes = Vec::new();
            for _ in 0..count {
                // Mostly one byte; some longer, some ids past 32 bits.
                let value = match next(10) {
                    0 => next(0) >> next(64),
                    1 => 128 + next(20_000),
                    _ => next(128),
                };
                put_varint(&mut bytes, value);
            }
            // Cut short, or a varint left unfinished, now and then.
            match round % 5 {
                0 => bytes.truncate(next(bytes.len() as u64 + 1) as usize),
                1 => bytes.extend([0x80; 11]),
                _ => {}
            }
            let asked = count + usize::from(round % 7 == 0);
            let mut at = 0;
            let slowly: Result<usize, PackError> = (0..asked)
                .try_for_each(|_| get_id(&bytes, &mut at).map(drop))
                .map(|()| at);
            assert_eq!(
                format!("{:?}", skip_ids(&bytes, asked)),
                format!("{slowly:?}"),
                "ids {bytes:?}"
            );
            let mut at = 0;
            let mut sums = Vec::new();
            let slowly = (0..asked)
                .try_for_each(|_| {
                    let z = unzigzag(get_varint(&bytes, &mut at)?);
                    sums.push(sums.last().map_or(z, |&s: &u64| s.wrapping_add(z)));
                    Ok::<(), PackError>(())
                })
                .map(|()| match (sums.first(), sums.last()) {
                    (Some(&first), Some(&last)) => (first, last, at),
                    _ => (0, 0, 0),
                });
            assert_eq!(
                format!("{:?}", sum_ticks(&bytes, asked)),
                format!("{slowly:?}"),
                "ticks {bytes:?}"
            );
        }
        // Differences of either sign, eight at a time.
        let deltas: Vec<i64> = vec![3, -1, 0, 63, -64, 5, -5, 1, 2, -2, 7];
        let mut bytes = Vec::new();
        for &d in &deltas {
            put_varint(&mut bytes, zigzag(d as u64));
        }
        let total = deltas.iter().sum::<i64>() as u64;
        assert_eq!(
            sum_ticks(&bytes, deltas.len()).unwrap(),
            (3, total, bytes.len())
        );
    }
}
