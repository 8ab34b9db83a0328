//! The capture file format: chunk types, versions and the sizes of their fixed parts.
//!
//! A capture file is a sequence of chunks (IREE's instrumentation files are the model), all
//! little-endian. Each chunk is a 16-byte header, [`CHUNK_MAGIC`] (`TSCP`), the chunk type
//! (`u16`), its version (`u16`) and the length of its content in bytes (`u64`, padding not
//! counted), then the content, then zero bytes up to the next multiple of [`ALIGN`]. A
//! session is a [`SESSION_HEADER`] chunk, the chunks of its tables and events, and a
//! [`SESSION_FOOTER`]; files concatenate (`cat a.tscope b.tscope > both.tscope` holds both
//! sessions). A reader skips chunk types and versions it does not know, with a warning.
//!
//! | type | chunk | content (version 1; event chunks: version 5) |
//! | ---: | --- | --- |
//! | 1 | [`SESSION_HEADER`] | format version, process id, start time, producer, process and host names |
//! | 2 | [`CLOCK`] | calibration pairs `(tick, unix_ns)` at start and stop, the tick rate |
//! | 3 | [`STRINGS`] | NUL-terminated UTF-8 strings; ids count from 0, valid until the next table |
//! | 4 | [`CALLSITES`] | [`CALLSITE_ENTRY`]-byte entries: id, name, file, line, module path |
//! | 5 | [`EVENT_CHUNK`] | thread id, 8 reserved bytes, the records as recorded: 8-byte words (version 5, see `record::word`), 16-byte records (versions 1 to 4) |
//! | 6 | [`THREADS`] | [`THREAD_ENTRY`]-byte entries: id, first tick, name |
//! | 7 | [`SESSION_FOOTER`] | the window's ticks, record count, dropped events, flags |
//! | 8 | [`ORIGIN`] | where a session taken by an attach comes from, and when |
//! | 9 | [`EVENTS_PACKED`] | an event chunk's records as columns compressed by zstd |
//!
//! The repository's `docs/FORMAT.md` gives every field with its offset.
// The layout is listed whole: some constants are read only under some features (gzip) or by
// the tests (through `test-hooks`).
#![cfg_attr(not(feature = "test-hooks"), allow(dead_code))]

pub use crate::record::chunk::{
    CHUNK_MAGIC, EVENT_CHUNK, EVENT_CHUNK_VERSION, EVENT_PREFIX, RECORD,
};

/// Version of the capture layout (chunk types, record kinds and their meaning), written in
/// every session header. Sessions of another version are not read as if they were this one.
pub const FORMAT_VERSION: u16 = 1;

/// Bytes of a chunk header: magic, type, version, content length.
pub const CHUNK_HEADER: usize = 16;
/// Chunks start at multiples of this many bytes: content is padded with zeros up to it.
pub const ALIGN: usize = 16;

/// Chunk type that starts a session: who recorded it, where and when.
pub const SESSION_HEADER: u16 = 1;
/// Version of the [`SESSION_HEADER`] chunk.
pub const SESSION_HEADER_VERSION: u16 = 1;
/// Bytes of the session header's fixed part, before its three strings.
pub const SESSION_HEADER_FIXED: usize = 16;

/// Chunk type of the clock calibration.
pub const CLOCK: u16 = 2;
/// Version of the [`CLOCK`] chunk.
pub const CLOCK_VERSION: u16 = 1;
/// Bytes of the clock chunk's fixed part, before its pairs.
pub const CLOCK_FIXED: usize = 32;
/// Clock flag: ticks are nanoseconds already (a mock clock); the tick rate is not used.
pub const CLOCK_IDENTITY: u32 = 1;
/// Clock flag: the session compensated its probe overhead; the chunk's bytes 12..16 hold the
/// ticks of a scope's probe inside its own duration and bytes 24..28 those outside it, which
/// decoding subtracts (older readers ignore them and decode without compensation).
pub const CLOCK_COMPENSATED: u32 = 2;
/// Clock flag: the session was started with overhead compensation switched off.
pub const CLOCK_UNCOMPENSATED: u32 = 4;
/// Clock flags, bits 3 and 4: where the ticks came from
/// ([`ClockSource`](crate::clock::ClockSource)): 0 not said (a file written before this field
/// existed), [`CLOCK_SOURCE_CPU`], [`CLOCK_SOURCE_CPU_UNVERIFIED`] or
/// [`CLOCK_SOURCE_MONOTONIC`] (a mock clock is [`CLOCK_IDENTITY`]).
pub const CLOCK_SOURCE_MASK: u32 = 3 << 3;
/// [`CLOCK_SOURCE_MASK`] value: the CPU's invariant counter.
pub const CLOCK_SOURCE_CPU: u32 = 1 << 3;
/// [`CLOCK_SOURCE_MASK`] value: the CPU's counter, not confirmed constant and non-stop by the
/// OS.
pub const CLOCK_SOURCE_CPU_UNVERIFIED: u32 = 2 << 3;
/// [`CLOCK_SOURCE_MASK`] value: the OS monotonic clock.
pub const CLOCK_SOURCE_MONOTONIC: u32 = 3 << 3;

/// Chunk type of a string table.
pub const STRINGS: u16 = 3;
/// Version of the [`STRINGS`] chunk.
pub const STRINGS_VERSION: u16 = 1;
/// A string id that names no string (a thread without a name).
pub const NO_STRING: u32 = u32::MAX;

/// Chunk type of a callsite table.
pub const CALLSITES: u16 = 4;
/// Version of the [`CALLSITES`] chunk.
pub const CALLSITES_VERSION: u16 = 1;
/// Bytes of one callsite entry.
pub const CALLSITE_ENTRY: usize = 24;

/// Chunk type of a thread table.
pub const THREADS: u16 = 6;
/// Version of the [`THREADS`] chunk.
pub const THREADS_VERSION: u16 = 1;
/// Bytes of one thread entry.
pub const THREAD_ENTRY: usize = 24;

/// Chunk type that ends a session.
pub const SESSION_FOOTER: u16 = 7;
/// Version of the [`SESSION_FOOTER`] chunk.
pub const SESSION_FOOTER_VERSION: u16 = 1;
/// Bytes of the session footer's content.
pub const SESSION_FOOTER_LEN: usize = 40;
/// Content length of a session footer that counts the events a flight recorder overwrote
/// (readers take 40 bytes and more).
pub const SESSION_FOOTER_LEN_OVERWRITTEN: usize = 48;
/// Content length of a session footer that also holds a flight recorder's window start
/// common to every thread (readers take 40 bytes and more).
pub const SESSION_FOOTER_LEN_CUT: usize = 56;
/// Content length of a session footer that also says that the session was salvaged without
/// its footer when it was read, and how many bytes it lost at the cut (written back, by
/// `tickscope merge --allow-salvaged`): its window start is then `u64::MAX` when it has none.
pub const SESSION_FOOTER_LEN_SALVAGED: usize = 64;
/// The reserved field of an event chunk whose records are the entries of the thread's scopes
/// cut at the start of a flight recorder's window (0 in every other event chunk).
pub const EVENTS_CUT: u64 = 1;
/// Footer flag: the session recorded allocations and frees.
pub const FOOTER_MEMORY: u32 = 1;
/// Session footer flag, with [`FOOTER_MEMORY`]: allocations were only counted
/// ([`MemoryMode::Counts`](crate::MemoryMode::Counts): size records without time or address).
pub const FOOTER_MEMORY_COUNTS: u32 = 2;

/// Chunk type that says where a session taken by an attach (`tickscope record --pid`) comes
/// from, right after its header: the flight recorder's window at the attach, or what was
/// recorded while attached (see [`attach::origins`](crate::attach::origins)).
pub const ORIGIN: u16 = 8;
/// Version of the [`ORIGIN`] chunk.
pub const ORIGIN_VERSION: u16 = 1;
/// Bytes of the [`ORIGIN`] chunk's content: origin (`u32`: 1 flight recorder window, 2
/// recorded while attached), reserved (`u32`), Unix nanoseconds of the attach (`u64`).
pub const ORIGIN_LEN: usize = 16;

/// Chunk type of a thread's records packed: split into columns that repeat (kinds, ids,
/// tick differences, values) and compressed by zstd, chunk by chunk. What
/// [`Capture::write_to`](crate::Capture::write_to) and streaming sessions write in builds
/// with the `compress` feature (the default); the module `capture::compress` and the
/// repository's `docs/FORMAT.md` give the layout.
pub const EVENTS_PACKED: u16 = 9;
/// Version of the [`EVENTS_PACKED`] chunk.
pub const EVENTS_PACKED_VERSION: u16 = 1;

/// A gzipped capture may decompress to at most this many times its size, plus
/// [`GZIP_ALLOWANCE`]: a capture's records hold clock ticks, which compress a few times at
/// best, so anything past that is refused as a gzip bomb rather than read into memory.
pub const GZIP_MAX_RATIO: u64 = 64;
/// Bytes a gzipped capture may decompress to beyond [`GZIP_MAX_RATIO`] times its size: small
/// captures of repetitive records (a mock clock) compress better than large real ones.
pub const GZIP_ALLOWANCE: u64 = 64 << 20;

/// `len` rounded up to a multiple of [`ALIGN`] (saturating).
pub const fn padded(len: u64) -> u64 {
    match len.checked_next_multiple_of(ALIGN as u64) {
        Some(padded) => padded,
        None => u64::MAX,
    }
}

/// The name of chunk type `kind`, for messages; `None` for a type this build does not know.
pub const fn chunk_name(kind: u16) -> Option<&'static str> {
    Some(match kind {
        SESSION_HEADER => "session header",
        CLOCK => "clock",
        STRINGS => "string table",
        CALLSITES => "callsite table",
        EVENT_CHUNK => "events",
        THREADS => "thread table",
        SESSION_FOOTER => "session footer",
        ORIGIN => "origin",
        EVENTS_PACKED => "packed events",
        _ => return None,
    })
}

/// The version of chunk type `kind` this build reads and writes; `None` for an unknown type.
pub const fn chunk_version(kind: u16) -> Option<u16> {
    Some(match kind {
        SESSION_HEADER => SESSION_HEADER_VERSION,
        CLOCK => CLOCK_VERSION,
        STRINGS => STRINGS_VERSION,
        CALLSITES => CALLSITES_VERSION,
        EVENT_CHUNK => EVENT_CHUNK_VERSION,
        THREADS => THREADS_VERSION,
        SESSION_FOOTER => SESSION_FOOTER_VERSION,
        ORIGIN => ORIGIN_VERSION,
        EVENTS_PACKED => EVENTS_PACKED_VERSION,
        _ => return None,
    })
}
