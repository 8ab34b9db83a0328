//! A session's event chunks of version 5: 8-byte words (see [`word`]), decoded into records
//! and checked as they are.

use std::sync::Arc;

use crate::capture::format::{CHUNK_HEADER, EVENTS_CUT};
use crate::capture::{Chunk, LazyRecords};
use crate::record::memory::MemoryMode;
use crate::record::word;

use super::bytes::{PREFIX, u64_at};
use super::errors::ReadError;
use super::session::Session;
use super::source::Input;

/// Bytes of a word.
pub(super) const WORD_LEN: usize = word::WORD as usize;

impl Session {
    /// The event chunk of version 5 at `pos` of `input` with `content` (`len` bytes: the
    /// prefix and whole words); returns the bytes read. `salvage` (a chunk cut short) keeps
    /// the records before a bad word instead of failing.
    pub(super) fn word_events(
        &mut self,
        input: &Input,
        pos: usize,
        content: &[u8],
        len: usize,
        salvage: bool,
    ) -> Result<usize, ReadError> {
        let (id, index) = self.event_prefix(pos, content, len, WORD_LEN, "words")?;
        if content.len() < len {
            return Err(ReadError::at(
                pos,
                format!(
                    "an events chunk of {len} bytes holds only {}",
                    content.len()
                ),
            ));
        }
        let start = pos + CHUNK_HEADER + PREFIX;
        let words = word::from_le_bytes(&content[PREFIX..len]);
        let mut records = Vec::with_capacity(words.len());
        let mut decoder = word::Decoder::new(&words);
        for record in decoder.by_ref() {
            match record {
                Ok(record) => records.push(record),
                Err(_) if salvage => break,
                Err(bad) => {
                    return Err(ReadError::at(
                        start + bad.at() * WORD_LEN,
                        format!("the events chunk at byte {pos}: {bad}"),
                    ));
                }
            }
        }
        // Whole records only: a salvaged chunk ends before its first bad word.
        let read = PREFIX + decoder.words_read() * WORD_LEN;
        if u64_at(content, 8) == EVENTS_CUT {
            self.cut_scopes(id, pos, records.into_iter().map(|r| (start, Some(r))))?;
            return Ok(read);
        }
        let memory = records
            .iter()
            .map(|r| MemoryMode::of_kind(r.kind as u32))
            .max()
            .unwrap_or(MemoryMode::Off);
        self.records += records.len() as u64;
        match input {
            Input::File { file, .. } => {
                // Checked here, read again from the file when used.
                let last = records
                    .iter()
                    .rev()
                    .find(|r| !r.kind.carries_data())
                    .map(|r| r.tick);
                if !records.is_empty() {
                    let lazy = LazyRecords {
                        file: Arc::clone(file),
                        offset: start as u64,
                        len: records.len(),
                        packed: None,
                        words: Some(read - PREFIX),
                        kept: None,
                    };
                    self.threads[index].push_checked(Chunk::Lazy(lazy), memory, last);
                }
            }
            Input::Memory { .. } => self.threads[index].push(Chunk::Owned(records), memory),
        }
        Ok(read)
    }
}
