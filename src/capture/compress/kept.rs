//! The columns of packed chunks kept unpacked from their check, within a budget: a file's
//! chunk is checked when the file is read and unpacked again each time it is used (a table
//! reads it once, an export twice); kept, its columns need no second read of the file and no
//! second decompression.
//!
//! Every chunk kept counts its bytes against one budget for the whole process
//! ([`DEFAULT_BUDGET`]), given back when the chunk is let go: past it, chunks are read again
//! when used, as before, so that reading a file of any size still takes memory of its own
//! size only up to the budget.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::cursor::Cursor;
use super::prefix::Prefix;

/// The bytes of columns kept at most, every capture of the process together: 64 MiB, about
/// 25 M records of a program's nested scopes (two to three bytes a record).
pub(crate) const DEFAULT_BUDGET: usize = 64 << 20;

/// [`DEFAULT_BUDGET`], unless a test set another ([`set_budget`]).
static BUDGET: AtomicUsize = AtomicUsize::new(DEFAULT_BUDGET);

/// The bytes of columns kept now.
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// Sets the budget to `bytes` (0: nothing is kept) and returns the one before: for tests of
/// memory that must not grow with a file's size
/// (`tickscope::__private::set_unpacked_budget`).
pub(crate) fn set_budget(bytes: usize) -> usize {
    BUDGET.swap(bytes, Ordering::Relaxed)
}

/// The bytes of columns kept now, every capture together.
#[cfg(test)]
pub(crate) fn kept_bytes() -> usize {
    KEPT.load(Ordering::Relaxed)
}

#[cfg(test)]
thread_local! {
    /// A unit test's budget for the chunks checked on its thread, in place of the process's
    /// ([`set_budget_here`]): the tests run side by side in one process.
    static BUDGET_HERE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    /// The bytes of room taken on this thread and not given back here ([`held_here`]).
    static HELD_HERE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

/// Sets the budget for the chunks checked on this thread (`None`: the process's).
#[cfg(test)]
pub(crate) fn set_budget_here(bytes: Option<usize>) {
    BUDGET_HERE.set(bytes);
}

/// The bytes of room taken on this thread less those given back on it (by rooms and kept
/// columns dropped here): 0 when everything taken here was given back.
#[cfg(test)]
pub(crate) fn held_here() -> isize {
    HELD_HERE.get()
}

/// Counts `bytes` of room taken (or given back, negative) on this thread.
fn held(bytes: isize) {
    #[cfg(test)]
    HELD_HERE.set(HELD_HERE.get() + bytes);
    #[cfg(not(test))]
    let _ = bytes;
}

/// The budget: the process's, or in a unit test the one set for its thread.
fn budget() -> usize {
    #[cfg(test)]
    if let Some(bytes) = BUDGET_HERE.get() {
        return bytes;
    }
    BUDGET.load(Ordering::Relaxed)
}

/// The checked columns of one packed chunk, unpacked: its records are made from them when
/// used. Its bytes count against the budget while it lives.
pub(crate) struct Columns {
    pub(super) prefix: Prefix,
    pub(super) bytes: Box<[u8]>,
    /// The ticks of its first record and of its last record whose tick is a time, when the
    /// first one's is a time.
    ends: Option<(u64, u64)>,
    /// Entries and exits only, none of whose exits of the innermost entry closes an entry of
    /// an earlier chunk ([`Cursor::walk`]).
    plain: bool,
}

/// Room for a chunk's columns in the budget, taken before they are unpacked (into memory of
/// their own, then kept as they are: [`Room::keep`]); given back when dropped unkept.
pub(super) struct Room(usize);

impl Room {
    /// Room for `len` bytes of columns, when the budget has it.
    pub(super) fn take(len: usize) -> Option<Self> {
        let budget = budget();
        KEPT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |kept| {
            kept.checked_add(len).filter(|&now| now <= budget)
        })
        .ok()?;
        held(len as isize);
        Some(Self(len))
    }

    /// Keeps `bytes`, the columns of the chunk `prefix` describes (as long as the room
    /// taken); `ends` and `plain` as [`Columns::ends`] and [`Cursor::walk`] say.
    pub(super) fn keep(
        self,
        prefix: Prefix,
        bytes: Vec<u8>,
        ends: Option<(u64, u64)>,
        plain: bool,
    ) -> Columns {
        debug_assert_eq!(bytes.len(), self.0, "the columns fill their room");
        // The room is the columns' now: they give it back when dropped.
        std::mem::forget(self);
        Columns {
            prefix,
            bytes: bytes.into_boxed_slice(),
            ends,
            plain,
        }
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        KEPT.fetch_sub(self.0, Ordering::Relaxed);
        held(-(self.0 as isize));
    }
}

impl Columns {
    /// The tick of the chunk's first record and of its last record whose tick is a time, when
    /// the first one's is a time (it is not for a chunk that starts with the payload of a
    /// record of the chunk before).
    pub(crate) fn ends(&self) -> Option<(u64, u64)> {
        self.ends
    }

    /// Its records.
    pub(crate) fn len(&self) -> usize {
        self.prefix.count
    }

    /// Its records, made one at a time ([`Cursor`]); `open` is scratch.
    pub(crate) fn cursor<'c>(&'c self, open: &'c mut Vec<(u32, u64)>) -> Cursor<'c> {
        // The columns were checked: the prefix fits them.
        Cursor::new(&self.prefix, &self.bytes, open)
            .unwrap_or_else(|_| unreachable!("checked columns fit their prefix"))
            .checked_plain(self.plain)
    }
}

impl Drop for Columns {
    fn drop(&mut self) {
        KEPT.fetch_sub(self.bytes.len(), Ordering::Relaxed);
        held(-(self.bytes.len() as isize));
    }
}

impl std::fmt::Debug for Columns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Columns")
            .field("records", &self.prefix.count)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}
