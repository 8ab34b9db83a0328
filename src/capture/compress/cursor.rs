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
        })
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
