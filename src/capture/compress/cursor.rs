//! The records of a packed chunk's columns, made one at a time.

use super::CLOSES_TOP;
use super::codec::{get_id, get_varint, opens, unzigzag};
use super::errors::PackError;
use super::prefix::Prefix;
use crate::record::event::{RawEvent, RawKind};

/// The records of a packed chunk's columns, made one at a time as they are asked for: a loop
/// that takes each as it comes has their making inlined in it, without a vector of them
/// between. Stops at the first error in the columns, which [`Cursor::finish`] returns.
pub(crate) struct Cursor<'c> {
    pub(super) kinds: &'c [u8],
    /// The next record's kind in `kinds`.
    pub(super) at_kind: usize,
    ids: &'c [u8],
    ticks: &'c [u8],
    values: &'c [u8],
    at_id: usize,
    at_tick: usize,
    at_value: usize,
    /// The time of the last record whose tick is a time.
    time: u64,
    /// The entries open in the chunk: id and tick.
    open: &'c mut Vec<(u32, u64)>,
    failed: Option<PackError>,
    /// The columns were checked plain ([`Cursor::walk`]).
    plain: bool,
}

/// A record of plain columns, as [`Cursor::walk`] hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// An entry ([`RawKind::Begin`]): its callsite id, its tick, and the key its exit
    /// carries ([`RawEvent::end_key`]).
    Begin { id: u32, tick: u64, key: u32 },
    /// An exit ([`RawKind::End`]): the key of the entry it closes, and its tick.
    End { key: u32, tick: u64 },
}

impl<'c> Cursor<'c> {
    /// The records of `columns`, which `prefix` describes; `open` is scratch (cleared).
    pub(super) fn new(
        prefix: &Prefix,
        columns: &'c [u8],
        open: &'c mut Vec<(u32, u64)>,
    ) -> Result<Self, PackError> {
        let count = prefix.count;
        let Some(kinds) = columns.get(..count) else {
            return Err(PackError::Columns("its kinds column is cut short"));
        };
        // `Prefix::read` checked that the kinds, ids and ticks fit in the columns.
        let ids_end = count + prefix.ids;
        let ticks_end = ids_end + prefix.ticks;
        open.clear();
        Ok(Self {
            kinds,
            at_kind: 0,
            ids: &columns[count..ids_end],
            ticks: &columns[ids_end..ticks_end],
            values: &columns[ticks_end..],
            at_id: 0,
            at_tick: 0,
            at_value: 0,
            time: 0,
            open,
            failed: None,
            plain: false,
        })
    }

    /// Marks the columns as checked plain: entries and exits only, none of whose exits of
    /// the innermost entry closes an entry of an earlier chunk ([`Cursor::walk`]).
    pub(super) fn checked_plain(mut self, plain: bool) -> Self {
        self.plain = plain;
        self
    }

    /// The records of the columns.
    pub(crate) fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether the columns were checked plain, for [`Cursor::walk`].
    pub(crate) fn plain(&self) -> bool {
        self.plain
    }

    /// Hands every record of plain columns ([`Cursor::plain`]) to `step` as [`Cursor::next`]
    /// makes it, but without making the records: a loop of two kinds of step, where the
    /// records' loop decodes any kind. An error of the columns (damaged since their check)
    /// stops it: `Err(None)`; an error of `step` too: `Err(Some(error))`.
    ///
    /// On columns that are not plain, what it hands over is wrong: take them with
    /// [`Cursor::next`].
    #[inline(always)]
    pub(crate) fn walk<E>(
        &mut self,
        mut step: impl FnMut(Step) -> Result<(), E>,
    ) -> Result<(), Option<E>> {
        debug_assert!(self.plain, "walked columns must be plain");
        let (kinds, ids, ticks) = (self.kinds, self.ids, self.ticks);
        let (mut at_id, mut at_tick, mut time) = (0, 0, 0u64);
        // The keys of the chunk's entries still open (their exits' ids).
        let mut open: Vec<u32> = Vec::new();
        let begin = RawKind::Begin as u8;
        for &code in kinds {
            let delta = get_varint(ticks, &mut at_tick).map_err(|_| None)?;
            time = time.wrapping_add(unzigzag(delta));
            let next = if code == CLOSES_TOP {
                let key = open.pop().ok_or(None)?;
                Step::End { key, tick: time }
            } else {
                let id = get_id(ids, &mut at_id).map_err(|_| None)?;
                if code == begin {
                    let key = RawEvent::end_key(id, time);
                    open.push(key);
                    Step::Begin {
                        id,
                        tick: time,
                        key,
                    }
                } else if code == RawKind::End as u8 {
                    Step::End {
                        key: id,
                        tick: time,
                    }
                } else {
                    return Err(None);
                }
            };
            // (`step` is called here only, to be inlined once.)
            step(next).map_err(Some)?;
        }
        self.at_kind = kinds.len();
        (self.at_id, self.at_tick) = (at_id, at_tick);
        Ok(())
    }

    /// The record of kind code `code`, the `n`th of the chunk.
    #[inline(always)]
    pub(super) fn record(&mut self, n: usize, code: u8) -> Result<RawEvent, PackError> {
        let (kind, id) = if code == CLOSES_TOP {
            let Some((id, tick)) = self.open.pop() else {
                return Err(PackError::Columns("an exit closes no open entry"));
            };
            (RawKind::End, RawEvent::end_key(id, tick))
        } else {
            let Some(kind) = RawKind::from_u32(u32::from(code)) else {
                return Err(PackError::Kind { record: n, code });
            };
            (kind, get_id(self.ids, &mut self.at_id)?)
        };
        let tick = if kind.carries_data() {
            get_varint(self.values, &mut self.at_value)?
        } else {
            let delta = unzigzag(get_varint(self.ticks, &mut self.at_tick)?);
            self.time = self.time.wrapping_add(delta);
            self.time
        };
        if code != CLOSES_TOP && opens(kind) {
            self.open.push((id, tick));
        }
        Ok(RawEvent::new(kind, id, tick))
    }

    /// Whether the columns were whole: the error that stopped the records, or any bytes left
    /// after the last.
    pub(crate) fn finish(self) -> Result<(), PackError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        if self.at_kind != self.kinds.len()
            || self.at_id != self.ids.len()
            || self.at_tick != self.ticks.len()
            || self.at_value != self.values.len()
        {
            return Err(PackError::Columns("its columns hold more than its records"));
        }
        Ok(())
    }
}

impl Iterator for Cursor<'_> {
    type Item = RawEvent;

    #[inline(always)]
    fn next(&mut self) -> Option<RawEvent> {
        let n = self.at_kind;
        let &code = self.kinds.get(n)?;
        self.at_kind = n + 1;
        match self.record(n, code) {
            Ok(record) => Some(record),
            Err(error) => {
                self.failed = Some(error);
                // Nothing after an error: `finish` says it.
                self.at_kind = self.kinds.len();
                None
            }
        }
    }
}
