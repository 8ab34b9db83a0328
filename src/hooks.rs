//! Hooks of tickscope's own tests and benchmarks into its internals (the `test-hooks`
//! feature); not public API.

pub use crate::capture::format;
pub use crate::record::event::RawEvent;

/// A capture of records made by hand (benchmarks of decoding): one `(thread id, records)`
/// per thread, ticks that are nanoseconds, and the window `start_tick..=end_tick`.
pub fn capture_from_records(
    threads: Vec<(u64, Vec<RawEvent>)>,
    start_tick: u64,
    end_tick: u64,
) -> crate::Capture {
    crate::Capture::from_records(threads, start_tick, end_tick)
}

/// Runs `f` with this thread's capture writers writing event chunks as recorded (8-byte
/// words, the format of builds without packing), not packed.
pub fn unpacked<R>(f: impl FnOnce() -> R) -> R {
    crate::capture::compress::unpacked(f)
}

/// Runs `f` with this thread's capture writers writing event chunks of 16-byte records, not
/// packed (event chunk version 4, the format before 8-byte words): old files for the tests
/// of their reading.
pub fn as_records<R>(f: impl FnOnce() -> R) -> R {
    crate::capture::compress::as_records(f)
}

/// Each thread's records of `capture`: `(thread id, records)`, in its order.
pub fn capture_records(capture: &crate::Capture) -> Vec<(u64, Vec<RawEvent>)> {
    capture
        .threads
        .iter()
        .map(|t| {
            let records = t.chunks.iter().flat_map(|c| c.records().to_vec());
            (t.id, records.collect())
        })
        .collect()
}

/// The content of a packed event chunk of `records` (at most 65,536) of thread 1, into `out`
/// (cleared first): what capture writers write for a chunk of records.
pub fn pack_records(records: &[RawEvent], out: &mut Vec<u8>) -> std::io::Result<()> {
    out.clear();
    crate::capture::compress::pack(
        1,
        0,
        crate::record::chunk::RECORD_CHUNK_VERSION,
        records,
        out,
    )
}

/// The records of the packed event chunk `content`, into `out`; an error's message when it is
/// damaged.
pub fn unpack_records(content: &[u8], out: &mut Vec<RawEvent>) -> Result<(), String> {
    crate::capture::compress::unpack(content, out)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Chunks allocated and not freed, process-wide.
pub fn live_chunks() -> usize {
    crate::record::chunk::live_chunks()
}

/// Chunks reserved by running sessions and not taken yet
/// ([`ProfilerBuilder::reserve_memory`](crate::ProfilerBuilder::reserve_memory)).
pub fn reserved_chunks() -> usize {
    crate::record::pool::reserved_chunks()
}

/// Threads in the registry (live, or exited with events still needed).
pub fn registered_threads() -> usize {
    crate::record::registry::thread_count()
}

/// The running flight recorder's chunk reads so far: `(ahead, late)`, by its scanner and
/// when recycled; `None` without one.
pub fn flight_reads() -> Option<(u64, u64)> {
    crate::record::flight::reads()
}

/// Pauses (or resumes) the flight recorder's scanner (tests: chunks then are read when
/// recycled, or by [`flight_read_pending`]).
pub fn flight_pause_scanner(paused: bool) {
    crate::record::flight::pause_scanner(paused);
}

/// Reads the flight recorder's complete chunks not read yet on this thread, as its
/// scanner does; returns how many.
pub fn flight_read_pending() -> usize {
    crate::record::flight::read_pending()
}
