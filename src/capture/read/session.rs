//! A session being read ([`Session`]): its tables and threads, and the capture it becomes.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::record::hash::FxHashMap;
use std::fmt;

use crate::record::callsite::{self, Callsite};
use crate::record::clock::{Calibration, ClockSource, Compensation};
use crate::record::memory::MemoryMode;

use super::NO_FOOTER;
use super::bytes::{u32_at, u64_at};
use super::errors::ReadError;
use super::tables::{Footer, StringTable};
use crate::capture::format::{
    CALLSITE_ENTRY, CHUNK_HEADER, CLOCK_COMPENSATED, CLOCK_FIXED, CLOCK_IDENTITY, CLOCK_SOURCE_CPU,
    CLOCK_SOURCE_CPU_UNVERIFIED, CLOCK_SOURCE_MASK, CLOCK_SOURCE_MONOTONIC, CLOCK_UNCOMPENSATED,
    NO_STRING, THREAD_ENTRY,
};
use crate::capture::{Capture, CaptureThread, Chunk, ClockPairs, Header, LazyRecords};
use crate::record::flight::CutScope;

/// A session being read.
pub(super) struct Session {
    /// Where its header starts.
    offset: usize,
    pub(super) header: Header,
    clock: Option<ClockPairs>,
    /// The current string table.
    strings: StringTable,
    /// The strings of the current table interned (see `callsite::intern_str`) by id, as
    /// callsites ask for them: each string is hashed and leaked once, however many callsites
    /// name it.
    interned: FxHashMap<u32, &'static str>,
    /// `(id, offset of the entry, callsite)`, as declared.
    callsites: Vec<(u32, usize, &'static Callsite)>,
    pub(super) threads: Vec<ThreadBuild>,
    /// Index in `threads` by thread id.
    pub(super) thread_index: HashMap<u64, usize>,
    pub(super) records: u64,
    /// Per thread id, the scopes cut at the start of a flight recorder's window (from its
    /// cut-scopes chunks).
    pub(super) cut: Vec<(u64, Vec<CutScope>)>,
    pub(super) warnings: Vec<String>,
    /// A thread name was cut short (warned once).
    names_cut: bool,
    /// Bytes lost at the cut, for a session without footer (see `Capture::salvaged`).
    pub(super) lost_bytes: u64,
    /// Packed chunks read from the file, waiting for their check, in file order
    /// (`read/checks.rs`).
    pub(super) waiting: Vec<Packed>,
}

/// A packed chunk of a file, read, not yet checked (`read/checks.rs`).
pub(super) struct Packed {
    pub(super) pos: usize,
    /// Its content: the prefix and the compressed columns.
    pub(super) content: Vec<u8>,
    /// Its thread, and the thread's index in the session (none for an undeclared thread:
    /// an error once the chunk is checked, as the check comes first).
    pub(super) thread: u64,
    pub(super) index: Option<usize>,
    /// Where its records lie in the file.
    pub(super) lazy: LazyRecords,
    pub(super) count: usize,
}

/// A thread of a session being read: its records go into chunks as they come.
pub(super) struct ThreadBuild {
    id: u64,
    name: Option<String>,
    from_tick: u64,
    /// The thread's records so far, in file order: one chunk per event chunk of the file
    /// that holds any.
    chunks: Vec<Chunk>,
    /// The tick of the last record that is not data, for a session without footer.
    last_tick: Option<u64>,
    /// The most the allocations and frees seen say of the memory mode, for a session without
    /// footer.
    memory: MemoryMode,
}

impl ThreadBuild {
    /// Adds the records of an event chunk; `memory`: an allocation or a free is among them.
    pub(super) fn push(&mut self, chunk: Chunk, memory: MemoryMode) {
        let records = chunk.records();
        if records.is_empty() {
            return;
        }
        let last = records
            .iter()
            .rev()
            .find(|r| !r.kind.carries_data())
            .map(|r| r.tick);
        drop(records);
        self.push_checked(chunk, memory, last);
    }

    /// Adds the records of an event chunk, which holds some, checked by the caller: `memory`
    /// as for [`ThreadBuild::push`], `last` the tick of its last record that is not data.
    pub(super) fn push_checked(&mut self, chunk: Chunk, memory: MemoryMode, last: Option<u64>) {
        if last.is_some() {
            self.last_tick = last;
        }
        self.memory = self.memory.max(memory);
        self.chunks.push(chunk);
    }

    /// Adds the records of an event chunk that were not read ([`Capture::read_index`]): they
    /// say nothing of the thread's last tick nor of the memory mode.
    pub(super) fn push_unread(&mut self, records: LazyRecords) {
        if records.len > 0 {
            self.chunks.push(Chunk::Lazy(records));
        }
    }
}

impl Session {
    pub(super) fn new(offset: usize, header: Header) -> Self {
        Self {
            offset,
            header,
            clock: None,
            strings: StringTable::default(),
            interned: FxHashMap::default(),
            callsites: Vec::new(),
            threads: Vec::new(),
            thread_index: HashMap::new(),
            records: 0,
            cut: Vec::new(),
            warnings: Vec::new(),
            names_cut: false,
            lost_bytes: 0,
            waiting: Vec::new(),
        }
    }

    /// The clock chunk at `pos`.
    pub(super) fn clock(&mut self, pos: usize, content: &[u8]) -> Result<(), ReadError> {
        if content.len() < CLOCK_FIXED {
            return Err(ReadError::at(
                pos,
                format!(
                    "the clock chunk holds {} bytes, fewer than its fixed {CLOCK_FIXED}",
                    content.len()
                ),
            ));
        }
        let flags = u32_at(content, 0);
        let (starts, stops) = (u32_at(content, 4) as usize, u32_at(content, 8) as usize);
        let middles = u32_at(content, 28) as usize;
        // At most 3 × u32::MAX pairs of 16 bytes: no overflow in 64 bits.
        let need = CLOCK_FIXED as u64 + 16 * (starts as u64 + stops as u64 + middles as u64);
        if need > content.len() as u64 {
            return Err(ReadError::at(
                pos,
                format!(
                    "the clock chunk announces {starts} start, {stops} stop and {middles} \
                     checkpoint pairs ({need} bytes), but holds {} bytes",
                    content.len()
                ),
            ));
        }
        let pairs = |from: usize, n: usize| Calibration {
            pairs: content[from..from + 16 * n]
                .chunks_exact(16)
                .map(|p| (u64_at(p, 0), u64_at(p, 8)))
                .collect(),
        };
        let clock = ClockPairs {
            start: pairs(CLOCK_FIXED, starts),
            stop: pairs(CLOCK_FIXED + 16 * starts, stops),
            checkpoints: pairs(CLOCK_FIXED + 16 * (starts + stops), middles).pairs,
            ns_per_tick: (flags & CLOCK_IDENTITY == 0).then(|| f64::from_bits(u64_at(content, 16))),
            compensation: if flags & CLOCK_COMPENSATED != 0 {
                Compensation::Ticks {
                    inner: u32_at(content, 12),
                    outer: u32_at(content, 24),
                }
            } else if flags & CLOCK_UNCOMPENSATED != 0 {
                Compensation::Off
            } else {
                Compensation::Unknown
            },
            source: match flags & CLOCK_SOURCE_MASK {
                _ if flags & CLOCK_IDENTITY != 0 => Some(ClockSource::Mock),
                CLOCK_SOURCE_CPU => Some(ClockSource::Cpu),
                CLOCK_SOURCE_CPU_UNVERIFIED => Some(ClockSource::CpuUnverified),
                CLOCK_SOURCE_MONOTONIC => Some(ClockSource::Monotonic),
                _ => None,
            },
        };
        let previous = self.clock.replace(clock);
        // A streaming session writes its start calibration first, and again with the stop
        // pairs at its end: that one completes the first.
        let completes = |first: &ClockPairs| {
            self.clock.as_ref().is_some_and(|now| {
                now.start == first.start
                    && now.ns_per_tick == first.ns_per_tick
                    && now.compensation == first.compensation
            }) && first.stop.pairs.is_empty()
        };
        if previous.as_ref().is_some_and(|first| !completes(first)) {
            self.warnings.push(format!(
                "byte {pos}: a second clock chunk in the session replaces the first"
            ));
        }
        Ok(())
    }

    /// The string table at `pos`: it replaces the one before.
    pub(super) fn strings(&mut self, pos: usize, content: &[u8]) {
        let content = match content.split_last() {
            Some((0, strings)) => strings,
            Some(_) => {
                self.warnings.push(format!(
                    "byte {pos}: the string table does not end with a NUL: its last string is \
                     taken as it is"
                ));
                content
            }
            None => {
                self.strings = StringTable::default();
                self.interned.clear();
                return;
            }
        };
        self.interned.clear();
        let Some(table) = StringTable::new(content) else {
            self.strings = StringTable::default();
            self.warnings.push(format!(
                "byte {pos}: a string table of {} bytes (4 GiB or more) is not read: it holds no \
                 strings",
                content.len()
            ));
            return;
        };
        self.strings = table;
        let bad = content
            .split(|&b| b == 0)
            .filter(|s| std::str::from_utf8(s).is_err())
            .count();
        if bad > 0 {
            self.warnings.push(format!(
                "byte {pos}: {bad} strings of the string table are not UTF-8: their bad bytes \
                 read as U+FFFD"
            ));
        }
    }

    /// String `id` of the current table, which entry `what` at `at` names.
    fn string(
        &self,
        at: usize,
        what: &dyn fmt::Display,
        id: u32,
    ) -> Result<Cow<'_, str>, ReadError> {
        match self.strings.get(id) {
            Some(s) => Ok(String::from_utf8_lossy(s)),
            None => Err(ReadError::at(
                at,
                format!(
                    "{what} names string {id}, but the session's string table holds {} strings",
                    self.strings.len()
                ),
            )),
        }
    }

    /// String `id` of the current table (which exists: checked with [`Session::string`]),
    /// interned.
    fn interned_string(&mut self, id: u32) -> &'static str {
        let strings = &self.strings;
        self.interned.entry(id).or_insert_with(|| {
            let string = strings.get(id).unwrap_or_default();
            callsite::intern_str(&String::from_utf8_lossy(string))
        })
    }

    /// The callsite table at `pos`.
    pub(super) fn callsites(&mut self, pos: usize, content: &[u8]) -> Result<(), ReadError> {
        if !content.len().is_multiple_of(CALLSITE_ENTRY) {
            return Err(ReadError::at(
                pos,
                format!(
                    "a callsite table holds {CALLSITE_ENTRY}-byte entries: {} bytes are not a \
                     whole number of them",
                    content.len()
                ),
            ));
        }
        self.callsites.reserve(content.len() / CALLSITE_ENTRY);
        for (i, entry) in content.chunks_exact(CALLSITE_ENTRY).enumerate() {
            let at = pos + CHUNK_HEADER + i * CALLSITE_ENTRY;
            let id = u32_at(entry, 0);
            let field = |what: &str, offset: usize| -> Result<Cow<'_, str>, ReadError> {
                self.string(
                    at,
                    &format_args!("callsite {id}'s {what}"),
                    u32_at(entry, offset),
                )
            };
            if u32_at(entry, 4) == NO_STRING {
                // Declared without a name: an id the writer's table held but knew nothing of.
                self.callsites.push((id, at, &callsite::UNDECLARED));
                continue;
            }
            // Check every field before interning any.
            field("name", 4)?;
            field("file", 8)?;
            field("module path", 16)?;
            let name = self.interned_string(u32_at(entry, 4));
            let file = self.interned_string(u32_at(entry, 8));
            let module_path = self.interned_string(u32_at(entry, 16));
            let site = callsite::intern_callsite(name, file, u32_at(entry, 12), module_path);
            self.callsites.push((id, at, site));
        }
        Ok(())
    }

    /// The thread table at `pos`; thread names are copied while `names_left` allows.
    pub(super) fn threads(
        &mut self,
        pos: usize,
        content: &[u8],
        names_left: &mut usize,
    ) -> Result<(), ReadError> {
        if !content.len().is_multiple_of(THREAD_ENTRY) {
            return Err(ReadError::at(
                pos,
                format!(
                    "a thread table holds {THREAD_ENTRY}-byte entries: {} bytes are not a whole \
                     number of them",
                    content.len()
                ),
            ));
        }
        for (i, entry) in content.chunks_exact(THREAD_ENTRY).enumerate() {
            let at = pos + CHUNK_HEADER + i * THREAD_ENTRY;
            let id = u64_at(entry, 0);
            let name = match u32_at(entry, 16) {
                NO_STRING => None,
                string => Some(
                    self.string(at, &format_args!("thread {id}'s name"), string)?
                        .into_owned(),
                ),
            };
            if self.thread_index.contains_key(&id) {
                self.warnings.push(format!(
                    "byte {at}: thread {id} is declared again: the first entry is kept"
                ));
                continue;
            }
            let name = name.map(|name| {
                let kept = name.floor_char_boundary(*names_left);
                *names_left -= kept;
                if kept < name.len() && !std::mem::replace(&mut self.names_cut, true) {
                    self.warnings.push(format!(
                        "byte {at}: thread names are cut short past the input's size in all: \
                         thread {id}'s name of {} bytes keeps {kept} (and the names after it, \
                         what is left)",
                        name.len()
                    ));
                }
                name[..kept].to_owned()
            });
            self.thread_index.insert(id, self.threads.len());
            self.threads.push(ThreadBuild {
                id,
                name,
                from_tick: u64_at(entry, 8),
                chunks: Vec::new(),
                last_tick: None,
                memory: MemoryMode::Off,
            });
        }
        Ok(())
    }
}

impl Session {
    /// The capture of the session, which ends at `end` (its footer, or where the next session
    /// or the input begins).
    pub(super) fn finish(mut self, footer: Option<Footer>, end: usize) -> Capture {
        let callsites = self.callsite_table();
        let clock = self.clock.take().unwrap_or_else(|| {
            self.warnings.push(format!(
                "the session at byte {} has no clock chunk: its ticks are taken as nanoseconds",
                self.offset
            ));
            ClockPairs::nanoseconds()
        });
        let overwritten_events = footer.as_ref().map_or(0, |f| f.overwritten_events);
        // Salvaged now, or when read before and written back with its footer since.
        let salvaged = match &footer {
            None => Some(self.lost_bytes),
            Some(footer) => footer.salvaged,
        };
        let cut_start = footer.as_ref().and_then(|f| f.cut_start);
        let (start_tick, end_tick, dropped_events, memory) = match footer {
            Some(footer) => {
                if footer.records != self.records {
                    self.warnings.push(format!(
                        "byte {end}: the footer counts {} records, the session holds {}",
                        footer.records, self.records
                    ));
                }
                (
                    footer.start_tick,
                    footer.end_tick,
                    footer.dropped_events,
                    footer.memory,
                )
            }
            None => {
                let start = self
                    .threads
                    .iter()
                    .map(|t| t.from_tick)
                    .min()
                    .or_else(|| clock.start.pairs.first().map(|p| p.0))
                    .unwrap_or(0);
                let end_tick = self
                    .threads
                    .iter()
                    .filter_map(|t| t.last_tick)
                    .max()
                    .unwrap_or(start);
                // Where the window ends, as a time since the session start and the thread
                // whose record it is: ticks mean nothing to a reader.
                let last = self
                    .threads
                    .iter()
                    .filter(|t| t.last_tick == Some(end_tick))
                    .map(|t| match &t.name {
                        Some(name) => format!("thread {} \"{name}\"", t.id),
                        None => format!("thread {}", t.id),
                    })
                    .next()
                    .map_or_else(String::new, |thread| format!(", on {thread}"));
                let ticks = end_tick.saturating_sub(start) as f64;
                let since = clock.ns_per_tick.map_or(ticks, |rate| ticks * rate);
                self.warnings.push(format!(
                    "the session at byte {} {NO_FOOTER} (it ends at byte {end}; its process \
                     may have stopped abruptly): salvaged {} records of {} threads, {} bytes \
                     ({} bytes lost at the cut), its window ending at its last record, {} \
                     after the session start{last}; scopes left open end at their own \
                     thread's last record",
                    self.offset,
                    self.records,
                    self.threads.len(),
                    end - self.offset,
                    self.lost_bytes,
                    crate::record::clock::format_ns(since as u64),
                ));
                let memory = self
                    .threads
                    .iter()
                    .map(|t| t.memory)
                    .max()
                    .unwrap_or_default();
                (start, end_tick, 0, memory)
            }
        };
        let threads = self
            .threads
            .into_iter()
            .map(|t| CaptureThread {
                id: t.id,
                name: t.name,
                from_tick: t.from_tick,
                chunks: t.chunks,
            })
            .collect();
        Capture {
            header: self.header,
            clock,
            callsites,
            threads,
            start_tick,
            end_tick,
            memory,
            dropped_events,
            overwritten_events,
            cut: {
                let mut cut = self.cut;
                cut.sort_by_key(|&(id, _)| id);
                cut
            },
            cut_start,
            warnings: self.warnings,
            salvaged,
        }
    }

    /// The callsite table by id (id `n` at index `n - 1`). Ids run from 1 to the number of
    /// entries the session declares, so a forged id allocates nothing: entries outside that
    /// range are skipped, ids no entry declares are [`callsite::UNDECLARED`].
    fn callsite_table(&mut self) -> Vec<&'static Callsite> {
        let declared = self.callsites.len();
        let in_range = |id: u32| (1..=declared).contains(&(id as usize));
        let len = self
            .callsites
            .iter()
            .map(|&(id, ..)| id)
            .filter(|&id| in_range(id))
            .max()
            .unwrap_or(0) as usize;
        let mut table = vec![&callsite::UNDECLARED; len];
        for &(id, at, site) in &self.callsites {
            if !in_range(id) {
                self.warnings.push(format!(
                    "byte {at}: callsite id {id} is out of range (the session declares {declared} \
                     callsites, numbered from 1): skipped"
                ));
                continue;
            }
            let slot = &mut table[id as usize - 1];
            if std::ptr::eq(*slot, &callsite::UNDECLARED) {
                *slot = site;
            } else if !std::ptr::eq(*slot, site) {
                self.warnings.push(format!(
                    "byte {at}: callsite {id} is declared again, differently: the first entry is \
                     kept"
                ));
            }
        }
        table
    }
}
