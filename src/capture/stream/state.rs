//! The writer's side of a stream: what it writes to the file and how it counts what the file
//! took.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::record::buffer::StreamedChunk;
use crate::record::callsite;
use crate::record::chunk::{CHUNK_MAGIC, EVENT_PREFIX, RECORD};
use crate::record::clock::{self, Calibration, Compensation};
use crate::record::memory::MemoryMode;
use crate::record::registry;
use crate::record::word;

use super::super::format::{
    CALLSITES, CALLSITES_VERSION, CHUNK_HEADER, CLOCK, CLOCK_VERSION, SESSION_HEADER,
    SESSION_HEADER_VERSION, STRINGS, STRINGS_VERSION, THREADS, THREADS_VERSION, padded,
};
use super::super::write::{
    Strings, Writer, callsite_entries, clock_content, header_content, thread_entry,
};
use super::super::{ClockPairs, Header};
use super::{Counted, State, StreamOptions, StreamStats};
impl Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.file.write(bytes)?;
        self.took += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl State {
    /// The state of a stream of `options` writing to `out` (`None`: it has no file, and its
    /// path names none of its own), whose window starts at `start_tick` with calibration
    /// `start`.
    pub(super) fn new(
        options: &StreamOptions,
        out: Option<BufWriter<Counted>>,
        start_tick: u64,
        start: &Calibration,
        memory: MemoryMode,
    ) -> Self {
        Self {
            path: options.path.clone(),
            gone: out.is_none(),
            out,
            unflushed: Vec::new(),
            start_tick,
            start: start.clone(),
            compensation: options.compensation,
            memory,
            cursors: HashMap::new(),
            callsites: 0,
            stats: StreamStats {
                path: options.path.clone(),
                ..StreamStats::default()
            },
            finished: false,
        }
    }

    /// Declares what the records about to be written name: the callsites registered so far
    /// (a record's callsite is registered before the record is made), and new threads.
    pub(super) fn declare(&mut self, threads: &[registry::StreamThread]) -> io::Result<()> {
        let new_sites = callsite::table_from(self.callsites);
        let mut strings = Strings::default();
        let sites = callsite_entries(
            new_sites
                .iter()
                .enumerate()
                .map(|(i, &site)| (self.callsites + i + 1, site)),
            &mut strings,
        );
        let mut thread_table = Vec::new();
        for thread in threads {
            if let std::collections::hash_map::Entry::Vacant(new) = self.cursors.entry(thread.id) {
                new.insert((0, 0));
                thread_entry(
                    &mut thread_table,
                    thread.id,
                    thread.from_tick,
                    thread.name.as_deref(),
                    &mut strings,
                );
            }
        }
        self.callsites += new_sites.len();
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        if sites.is_empty() && thread_table.is_empty() {
            return Ok(());
        }
        let mut w = Writer { out, written: 0 };
        let result = (|| {
            w.chunk(STRINGS, STRINGS_VERSION, &strings.bytes)?;
            if !sites.is_empty() {
                w.chunk(CALLSITES, CALLSITES_VERSION, &sites)?;
            }
            if !thread_table.is_empty() {
                w.chunk(THREADS, THREADS_VERSION, &thread_table)?;
            }
            Ok(())
        })();
        self.stats.bytes_written += w.written;
        result
    }

    /// Writes the records of `held` that are not written yet and advances thread `thread`'s
    /// cursor past them; once the file has failed, counts them as lost instead.
    pub(super) fn write_chunk(&mut self, thread: u64, held: &StreamedChunk) -> io::Result<()> {
        let cursor = self.cursors.entry(thread).or_insert((0, 0));
        let from = if held.index == cursor.0 { cursor.1 } else { 0 };
        // Decoded once, for the count, the writing and the records' ends.
        let records = held.chunk.records();
        *cursor = if held.complete {
            (held.index + 1, 0)
        } else {
            (held.index, records.len())
        };
        let new = records.len().saturating_sub(from) as u64;
        if new == 0 {
            return Ok(());
        }
        let Some(out) = self.out.as_mut() else {
            self.stats.records_lost += new;
            return Ok(());
        };
        let mut w = Writer { out, written: 0 };
        let result = w.events_from(&held.chunk, from, Some(&records));
        let start = self.stats.bytes_written;
        self.stats.bytes_written += w.written;
        // Written once flushed; on an error (`fail`), as far as the file took it.
        let ends = match () {
            _ if super::super::compress::packing() => Vec::new(),
            _ if super::super::compress::records16() => {
                (1..=new as u32).map(|n| n * RECORD as u32).collect()
            }
            // The words of the records from `from` on, from base tick 0 (see `events_from`).
            _ => {
                let (mut base, mut end) = (0, 0);
                let rest = records.get(from..).unwrap_or_default();
                rest.iter()
                    .map(|&record| {
                        let (words, next) = word::size(record, base);
                        base = next;
                        end += words as u32 * word::WORD as u32;
                        end
                    })
                    .collect()
            }
        };
        self.unflushed
            .push((start, self.stats.bytes_written, new, ends));
        result
    }

    /// Fails the stream when its path no longer names the file it writes: the file was
    /// deleted (everything it held is lost with it, and its disk space would grow unseen), or
    /// moved or replaced (what it holds stays there). Two `stat`s, every
    /// [`TAIL_EVERY`](super::TAIL_EVERY).
    pub(super) fn check_file(&mut self) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let Some(out) = &self.out else {
                return;
            };
            let Ok(open) = out.get_ref().file.metadata() else {
                return;
            };
            if !open.is_file() {
                // A FIFO or a device: whoever reads it has what was written.
                return;
            }
            let named = std::fs::metadata(&self.path)
                .is_ok_and(|m| (m.dev(), m.ino()) == (open.dev(), open.ino()));
            if open.nlink() == 0 || !named {
                self.gone = true;
            }
            if open.nlink() == 0 {
                self.fail(&io::Error::new(
                    io::ErrorKind::NotFound,
                    "the file was deleted while the session streamed to it",
                ));
                // Nothing written is left: it counts as lost too.
                self.stats.records_lost += std::mem::take(&mut self.stats.records_written);
                self.stats.chunks_written = 0;
                self.stats.bytes_written = 0;
            } else if !named {
                self.fail(&io::Error::new(
                    io::ErrorKind::NotFound,
                    "the file was moved or replaced while the session streamed to it",
                ));
            }
        }
    }

    /// The file took every chunk handed to it: their records are written.
    pub(super) fn flushed(&mut self) {
        for (_, _, records, _) in self.unflushed.drain(..) {
            self.stats.chunks_written += 1;
            self.stats.records_written += records;
        }
    }

    /// Keeps the first write error and stops writing: the chunks not flushed yet are written
    /// as far as the file took them whole, and lost beyond (the buffer's rest is dropped,
    /// never written later).
    pub(super) fn fail(&mut self, error: &io::Error) {
        if self.stats.error.is_none() {
            let message = format!("{}: cannot write: {error}", self.path.display());
            // Said once, as a stream that cannot start says it: a program that never prints
            // the table still learns that its capture is incomplete.
            if self.out.is_some() {
                eprintln!(
                    "tickscope: {message}; the stream stops writing: what the session records \
                     from now on is lost, and counted (`Profiler::stream_stats`, the table's \
                     footer)"
                );
            }
            self.stats.error = Some(message);
        }
        let Some(out) = self.out.take() else {
            return;
        };
        // The bytes handed to the file since it was opened (the header first) are counted
        // from where it was opened, as those it took.
        let (file, _unwritten) = out.into_parts();
        let took = file.took;
        for (start, end, records, ends) in std::mem::take(&mut self.unflushed) {
            let first = start + CHUNK_HEADER as u64 + EVENT_PREFIX;
            let took_records = took.saturating_sub(first);
            let whole = match took >= end {
                true => records,
                // A packed chunk is read whole or not at all; an unpacked one up to its last
                // whole record.
                false => ends.partition_point(|&e| u64::from(e) <= took_records) as u64,
            };
            if whole > 0 {
                self.stats.chunks_written += 1;
            }
            self.stats.records_written += whole;
            self.stats.records_lost += records - whole;
        }
        self.stats.bytes_written = took;
    }
}

/// Writes the session header and the start calibration; returns the bytes written.
pub(super) fn first_chunks(
    start: &Calibration,
    compensation: Compensation,
    out: &mut dyn Write,
) -> io::Result<u64> {
    let start_unix_ns = start.pairs.first().map_or(0, |&(_, ns)| ns);
    let clock = ClockPairs {
        start: start.clone(),
        stop: Calibration::default(),
        ns_per_tick: clock::tick_rate(),
        compensation,
        source: Some(clock::source()),
        checkpoints: Vec::new(),
    };
    let mut w = Writer { out, written: 0 };
    w.chunk(
        SESSION_HEADER,
        SESSION_HEADER_VERSION,
        &header_content(&Header::this_process(start_unix_ns)),
    )?;
    w.chunk(CLOCK, CLOCK_VERSION, &clock_content(&clock))?;
    Ok(w.written)
}

/// Cuts `file` after its last whole chunk (a chunk whose header has the magic and whose
/// content, padded, ends within the file), leaving it positioned at its new end; returns the
/// bytes cut. A file of whole chunks is left as it is.
pub(super) fn trim_to_whole_chunks(file: &mut File) -> io::Result<u64> {
    let len = file.metadata()?.len();
    let mut whole = 0u64;
    let mut header = [0u8; CHUNK_HEADER];
    while len - whole >= CHUNK_HEADER as u64 {
        file.seek(SeekFrom::Start(whole))?;
        file.read_exact(&mut header)?;
        let magic = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let mut content = [0u8; 8];
        content.copy_from_slice(&header[8..]);
        let next = (CHUNK_HEADER as u64)
            .checked_add(padded(u64::from_le_bytes(content)))
            .and_then(|n| whole.checked_add(n));
        match next {
            Some(next) if magic == CHUNK_MAGIC && next <= len => whole = next,
            _ => break,
        }
    }
    if whole < len {
        file.set_len(whole)?;
    }
    file.seek(SeekFrom::Start(whole))?;
    Ok(len - whole)
}

/// `error`, its message prefixed with the path and what failed.
pub(super) fn annotate(path: &Path, what: &str, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {what}: {error}", path.display()))
}
