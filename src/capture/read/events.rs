//! A session's event chunks: records checked kind by kind, as written or packed.

use std::fs::File;
use std::sync::Arc;

use crate::record::event::{RawEvent, RawKind};
use crate::record::memory::MemoryMode;

use super::bytes::{PREFIX, RECORD_LEN, u32_at, u64_at};
use super::errors::ReadError;
use super::session::Session;
use super::source::Input;
use crate::capture::format::EVENTS_CUT;
use crate::capture::format::{CHUNK_HEADER, EVENT_CHUNK_VERSION};
use crate::capture::{Chunk, FileRecords, LazyRecords};
use crate::record::flight::CutScope;

impl Session {
    /// The event chunk at `pos` of `input` with `content` (whole records); returns the bytes
    /// read. `salvage` (a chunk cut short) keeps the records before a bad one instead of
    /// failing.
    pub(super) fn events(
        &mut self,
        input: &Input,
        pos: usize,
        content: &[u8],
        len: usize,
        salvage: bool,
    ) -> Result<usize, ReadError> {
        let (id, index) = self.event_prefix(pos, content, len, RECORD_LEN, "records")?;
        let records = &content[PREFIX..];
        let count = (len - PREFIX) / RECORD_LEN;
        let start = pos + CHUNK_HEADER + PREFIX;
        if records.len() < count * RECORD_LEN {
            // Skimmed: the records are neither read nor checked; they are counted.
            if let Input::File { file, .. } = input {
                self.threads[index].push_unread(LazyRecords {
                    file: Arc::clone(file),
                    offset: start as u64,
                    len: count,
                    packed: None,
                    words: None,
                    kept: None,
                });
            }
            self.records += count as u64;
            return Ok(len);
        }
        if u64_at(content, 8) == EVENTS_CUT {
            let cut = records
                .chunks_exact(RECORD_LEN)
                .enumerate()
                .map(|(n, record)| {
                    let kind = RawKind::from_u32(u32_at(record, 12));
                    let event =
                        kind.map(|k| RawEvent::new(k, u32_at(record, 8), u64_at(record, 0)));
                    (start + n * RECORD_LEN, event)
                });
            self.cut_scopes(id, pos, cut)?;
            return Ok(content.len());
        }
        let in_place = match input {
            Input::Memory {
                bytes,
                in_place: true,
            } => FileRecords::scan(bytes, start, count),
            _ => None,
        };
        let (chunk, taken, memory) = match (in_place, input) {
            (Some(scanned), _) => {
                let taken = scanned.records.records().len();
                (Chunk::File(scanned.records), taken, scanned.memory)
            }
            (None, Input::File { file, .. }) => {
                // Checked here, read again from the file when used.
                let mut memory = MemoryMode::Off;
                let mut taken = 0;
                for record in records.chunks_exact(RECORD_LEN) {
                    let Some(kind) = RawKind::from_u32(u32_at(record, 12)) else {
                        break;
                    };
                    memory = memory.max(MemoryMode::of_kind(kind as u32));
                    taken += 1;
                }
                let lazy = LazyRecords {
                    file: Arc::clone(file),
                    offset: start as u64,
                    len: taken,
                    packed: None,
                    words: None,
                    kept: None,
                };
                let last = records[..taken * RECORD_LEN]
                    .chunks_exact(RECORD_LEN)
                    .rev()
                    .filter_map(|r| Some((RawKind::from_u32(u32_at(r, 12))?, u64_at(r, 0))))
                    .find(|(kind, _)| !kind.carries_data())
                    .map(|(_, tick)| tick);
                if taken > 0 {
                    self.threads[index].push_checked(Chunk::Lazy(lazy), memory, last);
                }
                self.records += taken as u64;
                return self.events_end(records, pos, start, taken, count, salvage, len);
            }
            (None, Input::Memory { .. }) => {
                // Bounded by the chunk's bytes, which are in the input.
                let mut owned = Vec::with_capacity(count);
                let mut memory = MemoryMode::Off;
                for record in records.chunks_exact(RECORD_LEN) {
                    let Some(kind) = RawKind::from_u32(u32_at(record, 12)) else {
                        break;
                    };
                    memory = memory.max(MemoryMode::of_kind(kind as u32));
                    owned.push(RawEvent::new(kind, u32_at(record, 8), u64_at(record, 0)));
                }
                let taken = owned.len();
                (Chunk::Owned(owned), taken, memory)
            }
        };
        self.threads[index].push(chunk, memory);
        self.records += taken as u64;
        self.events_end(records, pos, start, taken, count, salvage, len)
    }

    /// The packed events chunk at `pos` ([`EVENTS_PACKED`]), whole: unpacked and checked;
    /// kept as the file's bytes when read from a file (unpacked again when used), else as
    /// its records. A damaged chunk is an error, never records made up or cut short.
    pub(super) fn packed(
        &mut self,
        input: &Input,
        pos: usize,
        content: &[u8],
    ) -> Result<(), ReadError> {
        let damaged = |e: crate::capture::compress::PackError| ReadError::at(pos, e.to_string());
        let prefix = crate::capture::compress::Prefix::read(content).map_err(damaged)?;
        if prefix.version > EVENT_CHUNK_VERSION {
            self.warnings.push(format!(
                "byte {pos}: packed events chunk of events chunk version {} is not supported \
                 (this build reads up to version {EVENT_CHUNK_VERSION}): skipped",
                prefix.version
            ));
            return Ok(());
        }
        let file = match input {
            Input::File { file, skim } => Some((file, *skim)),
            Input::Memory { .. } => None,
        };
        // (A file's chunk is kept where it lies, unpacked when used; from memory, unpacked.)
        let lazy = |file: &Arc<File>| LazyRecords {
            file: Arc::clone(file),
            offset: (pos + CHUNK_HEADER) as u64,
            len: prefix.count,
            packed: Some(content.len()),
            words: None,
            kept: None,
        };
        if let Some((file, true)) = file
            && prefix.reserved != EVENTS_CUT
        {
            // Skimmed: counted, not unpacked.
            let Some(&index) = self.thread_index.get(&prefix.thread) else {
                return Err(self.undeclared(pos, prefix.thread));
            };
            self.threads[index].push_unread(lazy(file));
            self.records += prefix.count as u64;
            return Ok(());
        }
        if let Some((file, _)) = file
            && prefix.reserved != EVENTS_CUT
        {
            // Checked (as unpacking would) with the chunks after it, on every core; unpacked
            // again when used: from the columns the check kept, within their budget, else
            // from the file.
            return self.check_later(pos, content, prefix.thread, lazy(file));
        }
        // (What this chunk does comes after the packed chunks waiting.)
        self.check_waiting()?;
        let mut records = Vec::new();
        crate::capture::compress::unpack(content, &mut records).map_err(damaged)?;
        if prefix.reserved != EVENTS_CUT {
            let Some(&index) = self.thread_index.get(&prefix.thread) else {
                return Err(self.undeclared(pos, prefix.thread));
            };
            self.records += records.len() as u64;
            let memory = records
                .iter()
                .map(|r| MemoryMode::of_kind(r.kind as u32))
                .max();
            let memory = memory.unwrap_or(MemoryMode::Off);
            self.threads[index].push(Chunk::Owned(records), memory);
            return Ok(());
        }
        // The entries of cut scopes: as the event chunk it packs, read from memory.
        let mut plain = Vec::with_capacity(PREFIX + RECORD_LEN * records.len());
        plain.extend_from_slice(&prefix.thread.to_le_bytes());
        plain.extend_from_slice(&prefix.reserved.to_le_bytes());
        for r in &records {
            plain.extend_from_slice(&r.tick.to_le_bytes());
            plain.extend_from_slice(&r.id.to_le_bytes());
            plain.extend_from_slice(&(r.kind as u32).to_le_bytes());
        }
        let memory = Input::Memory {
            bytes: Arc::new(Vec::new()),
            in_place: false,
        };
        self.events(&memory, pos, &plain, plain.len(), false)?;
        Ok(())
    }

    /// The thread id of the events chunk at `pos` (its `content`, `len` bytes announced: the
    /// prefix, then whole records of `unit` bytes, named `what`), and its index in the
    /// session; an error when the length is not that or the session declares no such thread.
    pub(super) fn event_prefix(
        &self,
        pos: usize,
        content: &[u8],
        len: usize,
        unit: usize,
        what: &str,
    ) -> Result<(u64, usize), ReadError> {
        if len < PREFIX || !(len - PREFIX).is_multiple_of(unit) || content.len() < PREFIX {
            return Err(ReadError::at(
                pos,
                format!(
                    "an events chunk holds {PREFIX} bytes (thread id, reserved) and then \
                     {unit}-byte {what}: {len} bytes are not that"
                ),
            ));
        }
        let id = u64_at(content, 0);
        match self.thread_index.get(&id) {
            Some(&index) => Ok((id, index)),
            None => Err(self.undeclared(pos, id)),
        }
    }

    /// The entries of the scopes cut at a window's start, outermost first, of thread `id`:
    /// the records of an events chunk marked [`EVENTS_CUT`] at `pos`, each with its byte
    /// offset (`None` for a record of unknown kind).
    pub(super) fn cut_scopes(
        &mut self,
        id: u64,
        pos: usize,
        records: impl Iterator<Item = (usize, Option<RawEvent>)>,
    ) -> Result<(), ReadError> {
        for (n, (at, record)) in records.enumerate() {
            let Some(scope) = record.as_ref().and_then(CutScope::from_record) else {
                return Err(ReadError::at(
                    at,
                    format!(
                        "record {n} of the cut-scopes chunk at byte {pos} is not a scope's entry"
                    ),
                ));
            };
            match self.cut.last_mut() {
                Some((thread, scopes)) if *thread == id => scopes.push(scope),
                _ => self.cut.push((id, vec![scope])),
            }
            self.records += 1;
        }
        Ok(())
    }

    /// The error of an events chunk at `pos` of thread `id`, which the session does not
    /// declare.
    pub(super) fn undeclared(&self, pos: usize, id: u64) -> ReadError {
        ReadError::at(
            pos,
            format!(
                "an events chunk of thread {id}, which no thread table of the session declares"
            ),
        )
    }

    /// What [`Session::events`] returns once `taken` of the `count` records of the chunk at
    /// `pos` (`records`, from byte `start`; `len` bytes of content) are taken: the bytes read,
    /// or the error of a record of unknown kind (kept up to it when salvaging).
    #[allow(clippy::too_many_arguments)]
    fn events_end(
        &self,
        records: &[u8],
        pos: usize,
        start: usize,
        taken: usize,
        count: usize,
        salvage: bool,
        len: usize,
    ) -> Result<usize, ReadError> {
        if taken < count {
            if salvage {
                return Ok(PREFIX + taken * RECORD_LEN);
            }
            let kind = u32_at(records, taken * RECORD_LEN + 12);
            return Err(ReadError::at(
                start + taken * RECORD_LEN,
                format!("record {taken} of the events chunk at byte {pos} has unknown kind {kind}"),
            ));
        }
        Ok(len)
    }
}
