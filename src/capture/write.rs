//! Writing a [`Capture`] as a capture file: one session, its tables built here, its event
//! chunks copied from memory as they are.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::record::callsite::{self, Callsite};
use crate::record::chunk::SharedChunk;
use crate::record::clock::{ClockSource, Compensation};
use crate::record::event::RawEvent;
use crate::record::flight::CutScope;
use crate::record::registry::Untracked;

use super::compress;
use super::footer::Footer;
use super::format::{
    ALIGN, CALLSITE_ENTRY, CALLSITES, CALLSITES_VERSION, CHUNK_MAGIC, CLOCK, CLOCK_COMPENSATED,
    CLOCK_FIXED, CLOCK_IDENTITY, CLOCK_SOURCE_CPU, CLOCK_SOURCE_CPU_UNVERIFIED,
    CLOCK_SOURCE_MONOTONIC, CLOCK_UNCOMPENSATED, CLOCK_VERSION, EVENT_CHUNK, EVENT_CHUNK_VERSION,
    EVENTS_CUT, FORMAT_VERSION, NO_STRING, ORIGIN, ORIGIN_VERSION, SESSION_FOOTER,
    SESSION_FOOTER_VERSION, SESSION_HEADER, SESSION_HEADER_FIXED, SESSION_HEADER_VERSION, STRINGS,
    STRINGS_VERSION, THREAD_ENTRY, THREADS, THREADS_VERSION,
};
use super::format::{EVENTS_PACKED, EVENTS_PACKED_VERSION};
use super::{Capture, Chunk, ClockPairs, Header};
use crate::record::chunk::RECORD_CHUNK_VERSION;
use crate::record::word;

impl Capture {
    /// Writes `captures` to the file at `path` as one capture file: each one's
    /// [`write_to`](Capture::write_to) output in order, so that [`Capture::read_all`] gives
    /// them back session by session (what `tickscope merge` writes). The file is put in place
    /// as every export is: gzipped when the path ends in `.gz`, through a temporary file
    /// renamed into place for a regular file, through a symbolic link to its target, straight
    /// into a device or FIFO (see the export module's [Files](crate::export#files)). The first
    /// error stops the writing, and names the path and the step that failed.
    ///
    /// ```no_run
    /// use tickscope::Capture;
    ///
    /// let a = Capture::read_all("a.tscope")?;
    /// let b = Capture::read_all("b.tscope")?;
    /// let both: Vec<&Capture> = a.iter().chain(&b).collect();
    /// Capture::write_all("both.tscope.gz", &both)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_all(path: impl AsRef<std::path::Path>, captures: &[&Capture]) -> io::Result<()> {
        super::output::atomic_write(path.as_ref(), |out| {
            for capture in captures {
                capture.write_to(out)?;
            }
            Ok(())
        })
    }

    /// Writes the capture to `out` as one session of a capture file and returns the bytes
    /// written. `out` is not flushed.
    ///
    /// The session is a header (followed by its `ORIGIN` chunk for a session taken by an
    /// attach, [`Capture::origin`]), the clock calibration, a string table, the callsite and
    /// thread tables, one packed event chunk per chunk of records, and a footer (see the
    /// repository's `docs/FORMAT.md`). A packed chunk holds the records as columns (kinds,
    /// callsite ids, tick differences, values) compressed by zstd, chunk by chunk: a program of
    /// nested scopes at steady rates costs about a byte per record or less, where the recorded
    /// memory takes 8 to 16 (built without the `compress` feature, the chunks are written as
    /// recorded: 8 bytes for an entry or an exit, 16 for another record). `out` should be buffered (the chunk headers are small
    /// writes).
    ///
    /// Files concatenate: the output of several `write_to` calls, one after the other, is a
    /// file of several sessions ([`Capture::read_all`]). A name holding a NUL character (which
    /// ends a string in the file) is written with U+FFFD in its place.
    ///
    /// ```
    /// let prof = tickscope::Profiler::builder().current_thread().start();
    /// for _ in 0..1000 {
    ///     let _g = tickscope::scope!("step");
    /// }
    /// prof.stop();
    /// let capture = prof.capture();
    /// let mut file = Vec::new();
    /// let written = capture.write_to(&mut file)?;
    /// assert_eq!(written, file.len() as u64);
    /// // 2000 records, packed, plus the tables.
    /// assert!(file.len() < 2000 * 16);
    ///
    /// let back = tickscope::Capture::from_bytes(&file).unwrap();
    /// assert_eq!(back.len(), 1);
    /// assert_eq!(back[0].record_count(), capture.record_count());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<u64> {
        // The tables are built in memory: the profiler's work, not the program's.
        let _untracked = Untracked::enter();
        let mut w = Writer { out, written: 0 };
        w.chunk(
            SESSION_HEADER,
            SESSION_HEADER_VERSION,
            &header_content(&self.header),
        )?;
        if let Some((origin, attach_unix_ns)) = self.header.origin {
            let content = crate::capture::origin::origin_content(origin, attach_unix_ns);
            w.chunk(ORIGIN, ORIGIN_VERSION, &content)?;
        }
        w.chunk(CLOCK, CLOCK_VERSION, &clock_content(&self.clock))?;
        let mut strings = Strings::default();
        let callsites = self.callsite_content(&mut strings);
        let threads = self.thread_content(&mut strings);
        w.chunk(STRINGS, STRINGS_VERSION, &strings.bytes)?;
        w.chunk(CALLSITES, CALLSITES_VERSION, &callsites)?;
        w.chunk(THREADS, THREADS_VERSION, &threads)?;
        for thread in &self.threads {
            let cut = self.cut_of(thread.id);
            if !cut.is_empty() {
                let entries: Vec<RawEvent> = cut.iter().map(CutScope::record).collect();
                w.owned_events_marked(thread.id, EVENTS_CUT, &entries)?;
            }
            for chunk in &thread.chunks {
                match chunk {
                    Chunk::Held(Some(shared)) => {
                        debug_assert_eq!(shared.thread(), thread.id);
                        w.events(shared)?;
                    }
                    Chunk::Held(None) => {}
                    Chunk::File(records) if compress::records16() => {
                        w.file_events(thread.id, records.bytes())?;
                    }
                    Chunk::File(records) => w.owned_events(thread.id, records.records())?,
                    Chunk::Owned(records) => w.owned_events(thread.id, records)?,
                    Chunk::Lazy(lazy) => {
                        // Read again from its file, a chunk at a time.
                        let records = lazy.load();
                        if records.len() != lazy.len {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "the capture file read was cut short since: its records \
                                 cannot be written whole",
                            ));
                        }
                        w.owned_events(thread.id, &records)?;
                    }
                }
            }
        }
        let footer = Footer {
            start_tick: self.start_tick,
            end_tick: self.end_tick,
            records: self.record_count(),
            dropped_events: self.dropped_events,
            memory: self.memory,
            overwritten_events: self.overwritten_events,
            cut_start: self.cut_start,
            salvaged: self.salvaged,
        };
        w.chunk(SESSION_FOOTER, SESSION_FOOTER_VERSION, &footer.content())?;
        Ok(w.written)
    }

    /// The callsite table (ids the capture does not declare are left out), adding its strings
    /// to `strings`.
    fn callsite_content<'c>(&'c self, strings: &mut Strings<'c>) -> Vec<u8> {
        let sites = self.callsites.iter().enumerate();
        callsite_entries(sites.map(|(index, &site)| (index + 1, site)), strings)
    }

    /// The thread table, adding the threads' names to `strings`.
    fn thread_content<'c>(&'c self, strings: &mut Strings<'c>) -> Vec<u8> {
        let mut out = Vec::with_capacity(THREAD_ENTRY * self.threads.len());
        for thread in &self.threads {
            thread_entry(
                &mut out,
                thread.id,
                thread.from_tick,
                thread.name.as_deref(),
                strings,
            );
        }
        out
    }
}

/// The session header: format version, process id, start time, producer, process name and
/// host name.
pub(super) fn header_content(header: &Header) -> Vec<u8> {
    {
        let mut out = Vec::with_capacity(SESSION_HEADER_FIXED + 64);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&header.process_id.to_le_bytes());
        out.extend_from_slice(&header.start_unix_ns.to_le_bytes());
        debug_assert_eq!(out.len(), SESSION_HEADER_FIXED);
        for s in [&header.producer, &header.process_name, &header.host_name] {
            push_cstr(&mut out, s);
        }
        out
    }
}

/// The clock calibration: flags, pair counts, tick rate, then the start and stop pairs and the
/// checkpoints.
pub(super) fn clock_content(clock: &ClockPairs) -> Vec<u8> {
    {
        let (start, stop) = (&clock.start.pairs, &clock.stop.pairs);
        let middle = &clock.checkpoints;
        let mut out =
            Vec::with_capacity(CLOCK_FIXED + 16 * (start.len() + stop.len() + middle.len()));
        let identity = if clock.ns_per_tick.is_none() {
            CLOCK_IDENTITY
        } else {
            0
        };
        let (compensated, inner, outer) = match clock.compensation {
            Compensation::Unknown => (0, 0, 0),
            Compensation::Off => (CLOCK_UNCOMPENSATED, 0, 0),
            Compensation::Ticks { inner, outer } => (CLOCK_COMPENSATED, inner, outer),
        };
        let source = match clock.source {
            // Ticks that are nanoseconds say it with `CLOCK_IDENTITY`.
            _ if identity != 0 => 0,
            Some(ClockSource::Cpu) => CLOCK_SOURCE_CPU,
            Some(ClockSource::CpuUnverified) => CLOCK_SOURCE_CPU_UNVERIFIED,
            Some(ClockSource::Monotonic) => CLOCK_SOURCE_MONOTONIC,
            Some(ClockSource::Mock) | None => 0,
        };
        out.extend_from_slice(&(identity | compensated | source).to_le_bytes());
        out.extend_from_slice(&count(start.len()).to_le_bytes());
        out.extend_from_slice(&count(stop.len()).to_le_bytes());
        out.extend_from_slice(&inner.to_le_bytes());
        out.extend_from_slice(&clock.ns_per_tick.unwrap_or(0.0).to_bits().to_le_bytes());
        out.extend_from_slice(&outer.to_le_bytes());
        out.extend_from_slice(&count(middle.len()).to_le_bytes());
        debug_assert_eq!(out.len(), CLOCK_FIXED);
        let start = start.iter().take(count(start.len()) as usize);
        let stop = stop.iter().take(count(stop.len()) as usize);
        let middle = middle.iter().take(count(middle.len()) as usize);
        for &(tick, ns) in start.chain(stop).chain(middle) {
            out.extend_from_slice(&tick.to_le_bytes());
            out.extend_from_slice(&ns.to_le_bytes());
        }
        out
    }
}

/// Callsite table entries for `sites` (`(id, callsite)`), adding their strings to `strings`.
pub(super) fn callsite_entries(
    sites: impl ExactSizeIterator<Item = (usize, &'static Callsite)>,
    strings: &mut Strings<'_>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(CALLSITE_ENTRY * sites.len());
    for (id, site) in sites {
        let Ok(id) = u32::try_from(id) else {
            break;
        };
        if std::ptr::eq(site, &callsite::UNDECLARED) {
            // Ids stay dense, so that a reader's bound (ids up to the number of entries)
            // keeps every id: this one is declared without a name.
            for field in [id, NO_STRING, NO_STRING, 0, NO_STRING, 0] {
                out.extend_from_slice(&field.to_le_bytes());
            }
            continue;
        }
        for field in [
            id,
            strings.id(site.name()),
            strings.id(site.file()),
            site.line(),
            strings.id(site.module_path()),
            0,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }
    out
}

/// A thread table entry, adding the thread's name to `strings`.
pub(super) fn thread_entry<'c>(
    out: &mut Vec<u8>,
    id: u64,
    from_tick: u64,
    name: Option<&'c str>,
    strings: &mut Strings<'c>,
) {
    let name = name.map_or(NO_STRING, |n| strings.id(n));
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&from_tick.to_le_bytes());
    out.extend_from_slice(&name.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
}

/// Writes chunks to `out`, counting the bytes.
pub(super) struct Writer<'o> {
    pub(super) out: &'o mut dyn Write,
    pub(super) written: u64,
}

impl Writer<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// A chunk header announcing `len` bytes of content.
    fn header(&mut self, kind: u16, version: u16, len: u64) -> io::Result<()> {
        let mut header = [0u8; 16];
        header[0..4].copy_from_slice(&CHUNK_MAGIC.to_le_bytes());
        header[4..6].copy_from_slice(&kind.to_le_bytes());
        header[6..8].copy_from_slice(&version.to_le_bytes());
        header[8..16].copy_from_slice(&len.to_le_bytes());
        self.write(&header)
    }

    /// A whole chunk: header, `content`, padding.
    pub(super) fn chunk(&mut self, kind: u16, version: u16, content: &[u8]) -> io::Result<()> {
        self.header(kind, version, content.len() as u64)?;
        self.write(content)?;
        self.pad(content.len())
    }

    /// Zeros after `len` bytes of content, up to the next chunk's alignment.
    fn pad(&mut self, len: usize) -> io::Result<()> {
        const ZEROS: [u8; ALIGN] = [0; ALIGN];
        self.write(&ZEROS[..len.next_multiple_of(ALIGN) - len])
    }

    /// An event chunk of records owned by the capture (made by hand, or read from a file that
    /// could not be read in place): packed, or header, thread id, reserved bytes and the
    /// records' words (event chunk version 5).
    fn owned_events(&mut self, thread: u64, records: &[RawEvent]) -> io::Result<()> {
        if compress::packing() {
            return self.packed(thread, 0, records);
        }
        if compress::records16() {
            return self.owned_events_marked(thread, 0, records);
        }
        let mut words = Vec::with_capacity(records.len());
        word::encode(records, 0, &mut words);
        self.word_events(thread, &words)
    }

    /// [`Writer::owned_events`] with `reserved` in the reserved field ([`EVENTS_CUT`]): packed,
    /// or 16-byte records (event chunk version 4), which is how readers read that chunk.
    fn owned_events_marked(
        &mut self,
        thread: u64,
        reserved: u64,
        records: &[RawEvent],
    ) -> io::Result<()> {
        if compress::packing() {
            return self.packed(thread, reserved, records);
        }
        let mut content = Vec::with_capacity(16 + 16 * records.len());
        content.extend_from_slice(&thread.to_le_bytes());
        content.extend_from_slice(&reserved.to_le_bytes());
        for record in records {
            content.extend_from_slice(&record.tick.to_le_bytes());
            content.extend_from_slice(&record.id.to_le_bytes());
            content.extend_from_slice(&(record.kind as u32).to_le_bytes());
        }
        self.chunk(EVENT_CHUNK, RECORD_CHUNK_VERSION, &content)
    }

    /// An event chunk of version 5 holding `words` (from a chunk's first) of thread `thread`.
    fn word_events(&mut self, thread: u64, words: &[u64]) -> io::Result<()> {
        let mut content = Vec::with_capacity(16 + 8 * words.len());
        content.extend_from_slice(&thread.to_le_bytes());
        content.extend_from_slice(&0u64.to_le_bytes());
        for w in words {
            content.extend_from_slice(&w.to_le_bytes());
        }
        self.chunk(EVENT_CHUNK, EVENT_CHUNK_VERSION, &content)
    }

    /// `records` of thread `thread` as packed event chunks ([`EVENTS_PACKED`]: columns
    /// compressed by zstd), as many as they need; nothing when there are none.
    pub(super) fn packed(
        &mut self,
        thread: u64,
        reserved: u64,
        records: &[RawEvent],
    ) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut content = Vec::new();
        // The packed records are `RawEvent`s, whose kinds are those of event chunk version 4
        // (version 5 changed their layout, not their kinds): readers from before version 5
        // read them.
        compress::pack_each(
            thread,
            reserved,
            RECORD_CHUNK_VERSION,
            records,
            &mut content,
            |packed| self.chunk(EVENTS_PACKED, EVENTS_PACKED_VERSION, packed),
        )
    }

    /// An event chunk of records read from a file, in place: header, thread id, reserved
    /// bytes, and the records as the file held them (`records`: 16 bytes each, no padding:
    /// event chunk version 4).
    fn file_events(&mut self, thread: u64, records: &[u8]) -> io::Result<()> {
        let mut prefix = [0u8; 16];
        prefix[..8].copy_from_slice(&thread.to_le_bytes());
        self.header(EVENT_CHUNK, RECORD_CHUNK_VERSION, 16 + records.len() as u64)?;
        self.write(&prefix)?;
        self.write(records)
    }

    /// An event chunk: packed, or a header for the held length (the chunk's own header may
    /// have grown since), then the chunk's memory as it is, in one write (16 + 8 bytes per
    /// word, padded).
    pub(super) fn events(&mut self, chunk: &SharedChunk) -> io::Result<()> {
        self.events_from(chunk, 0, None)
    }

    /// An event chunk of the records of `chunk` from the `from`-th on (a streaming session
    /// writes a chunk still being filled in parts); nothing when there are none. `decoded`:
    /// the chunk's records when the caller has decoded them already (else decoded here when
    /// they are needed: packed, as 16-byte records, or from a record past the first).
    pub(super) fn events_from(
        &mut self,
        chunk: &SharedChunk,
        from: usize,
        decoded: Option<&[RawEvent]>,
    ) -> io::Result<()> {
        if compress::packing() || compress::records16() || from > 0 {
            let owned;
            let records = match decoded {
                Some(records) => records,
                None => {
                    owned = chunk.records();
                    &owned
                }
            };
            let Some(rest) = records.get(from..).filter(|rest| !rest.is_empty()) else {
                return Ok(());
            };
            if compress::packing() {
                return self.packed(chunk.thread(), 0, rest);
            }
            if compress::records16() {
                return self.owned_events_marked(chunk.thread(), 0, rest);
            }
            // The words again from base tick 0, as a chunk of their own.
            let mut words = Vec::with_capacity(rest.len());
            word::encode(rest, 0, &mut words);
            return self.word_events(chunk.thread(), &words);
        }
        if chunk.words().is_empty() {
            return Ok(());
        }
        #[cfg(target_endian = "little")]
        {
            let content = chunk.content_bytes();
            self.chunk(EVENT_CHUNK, EVENT_CHUNK_VERSION, content)
        }
        #[cfg(target_endian = "big")]
        self.word_events(chunk.thread(), chunk.words())
    }
}

/// A string table being built: each distinct string once, NUL-terminated, ids from 0.
#[derive(Default)]
pub(super) struct Strings<'a> {
    ids: HashMap<&'a str, u32>,
    pub(super) bytes: Vec<u8>,
}

impl<'a> Strings<'a> {
    /// The id of `s`, added on first use.
    pub(super) fn id(&mut self, s: &'a str) -> u32 {
        let next = self.ids.len() as u32;
        *self.ids.entry(s).or_insert_with(|| {
            push_cstr(&mut self.bytes, s);
            next
        })
    }
}

/// Appends `s` and a NUL; a NUL inside `s` becomes U+FFFD.
fn push_cstr(out: &mut Vec<u8>, s: &str) {
    if s.contains('\0') {
        out.extend_from_slice(s.replace('\0', "\u{FFFD}").as_bytes());
    } else {
        out.extend_from_slice(s.as_bytes());
    }
    out.push(0);
}

/// A count as the `u32` the format holds (a calibration has a few dozen pairs).
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
