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

mod codec;
mod cursor;
mod errors;
mod kept;
mod packer;
mod prefix;
mod scan;
mod scratch;
#[cfg(test)]
mod tests;
mod unpacker;

pub(crate) use cursor::{Cursor, Step};
pub(crate) use errors::PackError;
pub(crate) use kept::{Columns, set_budget as set_unpacked_budget};
#[cfg(feature = "test-hooks")]
pub(crate) use packer::pack;
pub(crate) use packer::pack_each;
pub(crate) use prefix::Prefix;
pub(crate) use unpacker::{Checked, check, unpack, unpack_kept};

/// Bytes of a packed chunk's content before its zstd frame.
pub(crate) const PACKED_PREFIX: usize = 40;

/// The codec of a packed chunk: the columns described in the module, compressed by zstd.
pub(crate) const CODEC_ZSTD_COLUMNS: u16 = 1;

/// Whether writers pack event chunks: this build has zstd (the `compress` feature).
pub(crate) const PACKING: bool = cfg!(feature = "compress");

/// How this thread's capture writers write event chunks: [`PACKED`] (when [`PACKING`]),
/// [`WORDS`] or [`RECORDS`].
type Layout = u8;
/// Packed chunks (the default, with zstd).
const PACKED: Layout = 0;
/// Event chunks as recorded: 8-byte words (version 5).
const WORDS: Layout = 1;
/// Event chunks of 16-byte records (version 4, the format before 8-byte words).
const RECORDS: Layout = 2;

thread_local! {
    /// Set by [`unpacked`] and [`as_records`].
    static LAYOUT: std::cell::Cell<Layout> = const { std::cell::Cell::new(PACKED) };
}

fn layout() -> Layout {
    LAYOUT.try_with(std::cell::Cell::get).unwrap_or(PACKED)
}

/// Whether this thread's writers pack event chunks now: [`PACKING`], unless inside
/// [`unpacked`] or [`as_records`].
pub(crate) fn packing() -> bool {
    PACKING && layout() == PACKED
}

/// Whether this thread's writers write event chunks of 16-byte records now (inside
/// [`as_records`]).
pub(crate) fn records16() -> bool {
    layout() == RECORDS
}

/// Runs `f` with this thread's writers writing event chunks in `layout`.
fn with_layout<R>(layout: Layout, f: impl FnOnce() -> R) -> R {
    struct Reset(Layout);
    impl Drop for Reset {
        fn drop(&mut self) {
            LAYOUT.set(self.0);
        }
    }
    let _reset = Reset(LAYOUT.replace(layout));
    f()
}

/// Runs `f` with this thread's writers writing event chunks as recorded, 8-byte words
/// (version 5, the format of builds without packing).
#[cfg_attr(not(any(test, feature = "test-hooks")), allow(dead_code))]
pub(crate) fn unpacked<R>(f: impl FnOnce() -> R) -> R {
    with_layout(WORDS, f)
}

/// Runs `f` with this thread's writers writing event chunks of 16-byte records, unpacked
/// (version 4, the format before 8-byte words: old files, for tests).
#[cfg_attr(not(any(test, feature = "test-hooks")), allow(dead_code))]
pub(crate) fn as_records<R>(f: impl FnOnce() -> R) -> R {
    with_layout(RECORDS, f)
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
