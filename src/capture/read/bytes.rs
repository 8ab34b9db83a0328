//! Little-endian fields at checked offsets, and the sizes of a record and an event prefix.

use crate::capture::format::{EVENT_PREFIX, RECORD};

/// Bytes of an event chunk's prefix and of a record, as `usize`.
pub(super) const PREFIX: usize = EVENT_PREFIX as usize;
pub(super) const RECORD_LEN: usize = RECORD as usize;

/// The little-endian `u16` at `at` of `bytes`, which the caller checked holds it.
pub(super) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(array(bytes, at))
}

/// The little-endian `u32` at `at` of `bytes`, which the caller checked holds it.
pub(super) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(array(bytes, at))
}

/// The little-endian `u64` at `at` of `bytes`, which the caller checked holds it.
pub(super) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(array(bytes, at))
}

/// The `N` bytes at `at`; zeros past the end (callers check lengths first, so never).
pub(super) fn array<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let field = bytes.get(at..).and_then(|b| b.first_chunk::<N>());
    debug_assert!(field.is_some(), "{N} bytes at {at} of {}", bytes.len());
    field.copied().unwrap_or([0; N])
}
