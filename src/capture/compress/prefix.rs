//! The prefix of a packed chunk ([`Prefix`]): its thread, counts and sizes, checked.

use super::PACKED_PREFIX;
use super::errors::PackError;
use super::{CODEC_ZSTD_COLUMNS, MAX_COLUMN_BYTES, MAX_PACKED_RECORDS, MAX_RECORDS_PER_BYTE};

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
    pub(super) columns: usize,
    pub(super) ticks: usize,
    pub(super) ids: usize,
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
