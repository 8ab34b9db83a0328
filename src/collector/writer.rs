//! [`SessionWriter`]: a collector's events as the bytes of a capture session.

use crate::capture::format;
use crate::record::event::{RawEvent, RawKind};

/// Writes one capture session (the capture format of the repository's `docs/FORMAT.md`) of a collector's events: its own
/// process, its tracks as threads, its spans on its own clock: what a collector's `collect`
/// hands back.
///
/// The clock is given by two pairs of (tick, Unix nanoseconds), read at the collector's start
/// and stop, and its rate in nanoseconds per tick (for windows too short to measure one);
/// the session's window runs from the start pair's tick to the stop pair's. A track's events
/// must be added in the order of their ticks, and within the window.
#[derive(Clone, Debug)]
pub struct SessionWriter {
    process: String,
    process_id: u32,
    start: (u64, u64),
    stop: (u64, u64),
    ns_per_tick: f64,
    /// Strings: string id `n` is index `n`.
    strings: Vec<String>,
    /// Callsite id `n` is index `n - 1`: its name's string id.
    callsites: Vec<u32>,
    /// Tracks: id `n` is index `n - 1`.
    tracks: Vec<Track>,
}

#[derive(Clone, Debug)]
struct Track {
    /// The name's string id.
    name: u32,
    records: Vec<[u8; 16]>,
    /// The spans open: their end keys.
    open: Vec<u32>,
}

impl SessionWriter {
    /// A session of the process named `process`, on a clock that read `start.0` at Unix time
    /// `start.1` (nanoseconds) and `stop.0` at `stop.1`, at `ns_per_tick` nanoseconds per tick.
    pub fn new(process: &str, start: (u64, u64), stop: (u64, u64), ns_per_tick: f64) -> Self {
        Self {
            process: process.to_owned(),
            process_id: 0,
            start,
            stop,
            ns_per_tick,
            strings: vec![String::new(), "<collector>".to_owned()],
            callsites: Vec::new(),
            tracks: Vec::new(),
        }
    }

    /// Sets the process id of the session header (0 by default). Sessions that agree on
    /// process name and id are one process of the trace.
    pub fn process_id(mut self, id: u32) -> Self {
        self.process_id = id;
        self
    }

    fn string(&mut self, s: &str) -> u32 {
        let id = match self.strings.iter().position(|t| t == s) {
            Some(i) => i,
            None => {
                self.strings.push(s.to_owned());
                self.strings.len() - 1
            }
        };
        id as u32
    }

    fn callsite(&mut self, name: &str) -> u32 {
        let sid = self.string(name);
        match self.callsites.iter().position(|&c| c == sid) {
            Some(i) => i as u32 + 1,
            None => {
                self.callsites.push(sid);
                self.callsites.len() as u32
            }
        }
    }

    fn record(&mut self, track: u64, tick: u64, id: u32, kind: RawKind) {
        let Some(Track { records, .. }) = self.track(track) else {
            return;
        };
        let mut r = [0; 16];
        r[..8].copy_from_slice(&tick.to_le_bytes());
        r[8..12].copy_from_slice(&id.to_le_bytes());
        r[12..].copy_from_slice(&(kind as u32).to_le_bytes());
        records.push(r);
    }

    /// A new track (a thread of the session) named `name`; returns its id.
    pub fn thread(&mut self, name: &str) -> u64 {
        let sid = self.string(name);
        self.tracks.push(Track {
            name: sid,
            records: Vec::new(),
            open: Vec::new(),
        });
        self.tracks.len() as u64
    }

    /// A span named `name` on `track`, from tick `begin` to tick `end`. Spans nest when one
    /// lies within another added before it; [`SessionWriter::begin`] and
    /// [`SessionWriter::end`] write them one edge at a time. A track that is not one of
    /// [`SessionWriter::thread`]'s ids is ignored.
    pub fn span(&mut self, track: u64, name: &str, begin: u64, end: u64) {
        self.begin(track, name, begin);
        self.end(track, end);
    }

    /// Opens a span named `name` on `track` at tick `tick`.
    pub fn begin(&mut self, track: u64, name: &str, tick: u64) {
        let id = self.callsite(name);
        if let Some(t) = self.track(track) {
            t.open.push(RawEvent::end_key(id, tick));
        }
        self.record(track, tick, id, RawKind::Begin);
    }

    fn track(&mut self, track: u64) -> Option<&mut Track> {
        let index = usize::try_from(track).ok()?.checked_sub(1)?;
        self.tracks.get_mut(index)
    }

    /// An unsigned integer argument `key` of the span just opened on `track`.
    pub fn arg_u64(&mut self, track: u64, key: &str, value: u64) {
        let id = self.callsite(key);
        self.record(track, value, id, RawKind::ArgU64);
    }

    /// Closes the innermost open span of `track` at tick `tick` (nothing when none is open).
    pub fn end(&mut self, track: u64, tick: u64) {
        // An end carries the key of the entry it closes; one with no span open is ignored.
        if let Some(key) = self.track(track).and_then(|t| t.open.pop()) {
            self.record(track, tick, key, RawKind::End);
        }
    }

    /// Appends the session's chunks to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let mut content = Vec::new();
        // Session header.
        content.extend_from_slice(&format::FORMAT_VERSION.to_le_bytes());
        content.extend_from_slice(&0u16.to_le_bytes());
        content.extend_from_slice(&self.process_id.to_le_bytes());
        content.extend_from_slice(&self.start.1.to_le_bytes());
        for s in [
            concat!("tickscope ", env!("CARGO_PKG_VERSION")),
            &self.process,
            "",
        ] {
            push_str(&mut content, s);
        }
        chunk(out, format::SESSION_HEADER, &content);
        // Clock: one start pair, one stop pair.
        content.clear();
        for v in [0u32, 1, 1, 0] {
            content.extend_from_slice(&v.to_le_bytes());
        }
        content.extend_from_slice(&self.ns_per_tick.to_bits().to_le_bytes());
        content.extend_from_slice(&[0; 8]);
        for v in [self.start.0, self.start.1, self.stop.0, self.stop.1] {
            content.extend_from_slice(&v.to_le_bytes());
        }
        chunk(out, format::CLOCK, &content);
        // Strings.
        content.clear();
        for s in &self.strings {
            push_str(&mut content, s);
        }
        chunk(out, format::STRINGS, &content);
        // Callsites: name, file `<collector>`, line 0, module path empty.
        content.clear();
        for (i, &name) in self.callsites.iter().enumerate() {
            for v in [i as u32 + 1, name, 1, 0, 0, 0] {
                content.extend_from_slice(&v.to_le_bytes());
            }
        }
        chunk(out, format::CALLSITES, &content);
        // Threads.
        content.clear();
        for (i, Track { name, .. }) in self.tracks.iter().enumerate() {
            content.extend_from_slice(&(i as u64 + 1).to_le_bytes());
            content.extend_from_slice(&0u64.to_le_bytes());
            content.extend_from_slice(&name.to_le_bytes());
            content.extend_from_slice(&0u32.to_le_bytes());
        }
        chunk(out, format::THREADS, &content);
        // One event chunk per track.
        let mut records = 0u64;
        for (i, Track { records: track, .. }) in self.tracks.iter().enumerate() {
            content.clear();
            content.extend_from_slice(&(i as u64 + 1).to_le_bytes());
            content.extend_from_slice(&0u64.to_le_bytes());
            for r in track {
                content.extend_from_slice(r);
            }
            records += track.len() as u64;
            chunk(out, format::EVENT_CHUNK, &content);
        }
        // Footer.
        content.clear();
        for v in [self.start.0, self.stop.0, records, 0] {
            content.extend_from_slice(&v.to_le_bytes());
        }
        content.extend_from_slice(&[0; 8]);
        chunk(out, format::SESSION_FOOTER, &content);
    }
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    out.extend(s.bytes().map(|b| if b == 0 { b'?' } else { b }));
    out.push(0);
}

/// Appends a chunk of `kind` (version 1) holding `content`, padded.
fn chunk(out: &mut Vec<u8>, kind: u16, content: &[u8]) {
    out.extend_from_slice(&format::CHUNK_MAGIC.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&(content.len() as u64).to_le_bytes());
    out.extend_from_slice(content);
    out.resize(out.len().next_multiple_of(format::ALIGN), 0);
}
