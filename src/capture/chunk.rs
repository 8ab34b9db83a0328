//! A capture's chunks of records: held from the recorder, read in place from a file's bytes,
//! owned, or read again from a file when used.

use std::sync::Arc;

#[cfg(doc)]
use super::Capture;
use super::compress;
use super::file;
use crate::record::chunk::SharedChunk;
use crate::record::event::{RawEvent, RawKind};
use crate::record::memory::MemoryMode;
use crate::record::pool;
use crate::record::registry::Untracked;

/// A capture's records of one thread, oldest first.
#[derive(Debug)]
pub(crate) enum Chunk {
    /// A recorded chunk, held (always `Some` until dropped): it goes back to the pool when
    /// the last holder lets go.
    Held(Option<SharedChunk>),
    /// The records of one event chunk of a file, where they lie in the file's bytes.
    File(FileRecords),
    /// Records made by hand, or read from a file whose bytes cannot be read in place, owned:
    /// as many as there are, in a vector of their size (a pooled chunk would cost 32 KiB
    /// however few they are).
    Owned(Vec<RawEvent>),
    /// The records of one event chunk of a file that is not held in memory: read from the
    /// file each time they are asked for, so that a capture of any size costs a few words
    /// per chunk ([`Capture::read_all`]).
    Lazy(LazyRecords),
}

impl Chunk {
    /// The chunk's records: where they lie, or read from the file for a [`Chunk::Lazy`].
    pub(crate) fn records(&self) -> Records<'_> {
        match self {
            Self::Held(held) => {
                Records::Loaded(held.as_ref().map_or(Vec::new(), SharedChunk::records))
            }
            Self::File(records) => Records::Borrowed(records.records()),
            Self::Owned(records) => Records::Borrowed(records),
            Self::Lazy(lazy) => Records::Loaded(lazy.load()),
        }
    }

    /// True when one of the chunk's records is of `kind`: a held chunk's words are decoded
    /// one by one, without collecting its records.
    pub(crate) fn holds_kind(&self, kind: RawKind) -> bool {
        match self {
            Self::Held(held) => held
                .as_ref()
                .is_some_and(|held| crate::record::word::holds_kind(held.words(), kind)),
            _ => self.records().iter().any(|r| r.kind == kind),
        }
    }

    /// The columns of a packed chunk kept from its check, when they were.
    pub(crate) fn kept(&self) -> Option<&compress::Columns> {
        match self {
            Self::Lazy(lazy) => lazy.kept.as_ref(),
            _ => None,
        }
    }

    /// Records in the chunk, without reading them from a file.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Lazy(lazy) => lazy.len,
            Self::Held(held) => held.as_ref().map_or(0, SharedChunk::count),
            _ => self.records().len(),
        }
    }
}

/// A chunk's records ([`Chunk::records`]): borrowed where they lie in memory, or read from
/// a file for the time they are used.
pub(crate) enum Records<'a> {
    Borrowed(&'a [RawEvent]),
    Loaded(Vec<RawEvent>),
}

impl std::ops::Deref for Records<'_> {
    type Target = [RawEvent];

    fn deref(&self) -> &[RawEvent] {
        match self {
            Self::Borrowed(records) => records,
            Self::Loaded(records) => records,
        }
    }
}

/// The records of an event chunk of a capture file read lazily: `len` records from byte
/// `offset` of `file`, checked when the file was read (every kind known). The file is read
/// again each time they are used ([`LazyRecords::load`]).
#[derive(Debug)]
pub(crate) struct LazyRecords {
    pub(crate) file: Arc<std::fs::File>,
    pub(crate) offset: u64,
    pub(crate) len: usize,
    /// For the records of a packed chunk ([`format::EVENTS_PACKED`](super::format::EVENTS_PACKED)): the bytes of its
    /// content, which starts at `offset`, read and unpacked each time.
    pub(crate) packed: Option<usize>,
    /// For the records of an event chunk of version 5: the bytes of its words, which start at
    /// `offset`, read and decoded each time.
    pub(crate) words: Option<usize>,
    /// For a packed chunk: its columns kept from its check, its records made from them
    /// instead of the file ([`compress::Columns`]).
    pub(crate) kept: Option<compress::Columns>,
}

impl LazyRecords {
    /// The records, read from the file. A file changed since it was read (cut short, or
    /// rewritten with records of unknown kinds) gives the records up to the change: decoding
    /// never trusts more than the bytes it reads (a packed chunk changed since gives none).
    pub(crate) fn load(&self) -> Vec<RawEvent> {
        if let Some(kept) = &self.kept {
            let mut records = Vec::new();
            // An error leaves `records` empty (it cannot come: the columns were checked).
            let _ = compress::unpack_kept(kept, &mut records);
            records.truncate(self.len);
            return records;
        }
        if let Some(content) = self.packed {
            let mut bytes = vec![0u8; content];
            let mut records = Vec::new();
            if file::read_at(&self.file, &mut bytes, self.offset) == content {
                // An error leaves `records` empty; the chunk was checked when the file was
                // read.
                let _ = compress::unpack(&bytes, &mut records);
            }
            records.truncate(self.len);
            return records;
        }
        if let Some(content) = self.words {
            let mut bytes = vec![0u8; content];
            let read = file::read_at(&self.file, &mut bytes, self.offset);
            let words = crate::record::word::from_le_bytes(&bytes[..read]);
            let mut records = crate::record::word::decode(&words);
            records.truncate(self.len);
            return records;
        }
        let mut bytes = vec![0u8; self.len * RECORD_LEN];
        let read = file::read_at(&self.file, &mut bytes, self.offset);
        let whole = read / RECORD_LEN;
        let mut records = Vec::with_capacity(whole);
        for record in bytes[..whole * RECORD_LEN].chunks_exact(RECORD_LEN) {
            // `chunks_exact` gives 16 bytes: every index is in range.
            let tick = u64::from_le_bytes(std::array::from_fn(|i| record[i]));
            let id = u32::from_le_bytes(std::array::from_fn(|i| record[8 + i]));
            let kind = u32::from_le_bytes(std::array::from_fn(|i| record[12 + i]));
            let Some(kind) = RawKind::from_u32(kind) else {
                break;
            };
            records.push(RawEvent::new(kind, id, tick));
        }
        records
    }
}

/// Records of a capture file read in place: `len` records from byte `start` of the file's
/// bytes, which every chunk read from the file shares. A file's records have the layout of
/// [`RawEvent`] in memory on a little-endian machine, so reading a file copies nothing per
/// record: [`FileRecords::scan`] checks them once, and they are used where they lie.
#[derive(Debug)]
pub(crate) struct FileRecords {
    bytes: Arc<Vec<u8>>,
    start: usize,
    len: usize,
}

/// What [`FileRecords::scan`] found.
pub(crate) struct Scanned {
    /// The records up to the first of unknown kind (all of them when every kind is known).
    pub(crate) records: FileRecords,
    /// The most an allocation or a free among the records taken says of the session's memory
    /// mode.
    pub(crate) memory: MemoryMode,
}

impl FileRecords {
    /// The records of `bytes` from byte `start` on, at most `count` of them (`count` × 16
    /// bytes, which `bytes` must hold), up to the first of unknown kind; `None` when they
    /// cannot be read in place (a big-endian machine, or records not aligned in memory as
    /// [`RawEvent`]s are: the caller then copies them).
    pub(crate) fn scan(bytes: &Arc<Vec<u8>>, start: usize, count: usize) -> Option<Scanned> {
        if cfg!(target_endian = "big") {
            return None;
        }
        let end = count
            .checked_mul(RECORD_LEN)
            .and_then(|len| start.checked_add(len))?;
        let region = bytes.get(start..end)?;
        if !region.as_ptr().cast::<RawEvent>().is_aligned() {
            return None;
        }
        let mut memory = MemoryMode::Off;
        let mut len = 0;
        for record in region.chunks_exact(RECORD_LEN) {
            let kind = u32::from_le_bytes([record[12], record[13], record[14], record[15]]);
            if RawKind::from_u32(kind).is_none() {
                break;
            }
            memory = memory.max(MemoryMode::of_kind(kind));
            len += 1;
        }
        Some(Scanned {
            records: Self {
                bytes: Arc::clone(bytes),
                start,
                len,
            },
            memory,
        })
    }

    pub(crate) fn records(&self) -> &[RawEvent] {
        let bytes = &self.bytes[self.start..self.start + self.len * RECORD_LEN];
        // SAFETY: `scan` made these bytes: `len` records of 16 bytes, aligned as `RawEvent`,
        // on a little-endian machine, so each is a `RawEvent`'s fields as `repr(C)` lays
        // them out (tick, id, kind: no padding) with the bytes of a valid `RawKind` (checked
        // by `scan`) in its kind. The bytes are shared and never written again (no `&mut`
        // to them exists: the `Vec` is behind an `Arc` from the start), and the slice
        // borrows `self`, which holds them.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<RawEvent>(), self.len) }
    }

    /// The file's bytes of the records (their content in an event chunk, as written).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len * RECORD_LEN]
    }
}

/// Bytes of a record.
const RECORD_LEN: usize = std::mem::size_of::<RawEvent>();

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Self::Held(held) = self {
            // Freeing a chunk the pool cannot keep is the profiler's own work, not the
            // program's.
            let _untracked = Untracked::enter();
            if let Some(free) = held.take().and_then(SharedChunk::release) {
                pool::give(free);
            }
        }
    }
}
