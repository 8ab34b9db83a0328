//! What a reservation ([`super::Reservation`]) may take and how its chunks are prepared: at
//! most half the memory the system says is available, touched on several threads.

use crate::record::chunk::{Chunk, ChunkBox};
use crate::record::untracked::Untracked;

/// A worker of [`Reservation::new`] prepares at least this many chunks (4 MiB): fewer are not
/// worth a thread.
pub(super) const MIN_CHUNKS_PER_WORKER: usize = 64;

/// Allocates and touches `chunks` chunks on `workers` threads (the calling one among them).
pub(super) fn prepare_in_parallel(chunks: usize, workers: usize) -> Vec<ChunkBox> {
    let prepare = |count: usize| {
        let _untracked = Untracked::enter();
        let mut prepared: Vec<ChunkBox> = (0..count).map(|_| ChunkBox::alloc()).collect();
        // One `madvise` for each run of chunks next to each other in memory.
        ChunkBox::touch_all(&mut prepared);
        prepared
    };
    let share = chunks / workers;
    std::thread::scope(|s| {
        let helpers: Vec<_> = (1..workers)
            .map(|_| {
                std::thread::Builder::new()
                    .name("tickscope-reserve".into())
                    .spawn_scoped(s, move || prepare(share))
            })
            .collect();
        // This thread's share, and that of every helper that could not start.
        let failed = helpers.iter().filter(|h| h.is_err()).count();
        let mut all = prepare(chunks - share * (workers - 1) + share * failed);
        for helper in helpers.into_iter().flatten() {
            // A helper that panicked (out of memory aborts instead) prepared nothing usable.
            all.extend(helper.join().unwrap_or_default());
        }
        all
    })
}

/// The most chunks one reservation takes: half the memory the system says is available
/// (`MemAvailable` on Linux; 1 GiB where it says nothing), so that a mistaken size cannot
/// exhaust the machine.
pub(super) fn reservable_chunks() -> usize {
    reservable_chunks_of(available_memory())
}

/// [`reservable_chunks`] when the system reports `available` bytes.
fn reservable_chunks_of(available: Option<usize>) -> usize {
    available.unwrap_or(2 << 30) / 2 / std::mem::size_of::<Chunk>()
}

/// Bytes of memory available to programs, as the system reports it (Linux).
fn available_memory() -> Option<usize> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&meminfo)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn parse_mem_available(meminfo: &str) -> Option<usize> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: usize = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let meminfo =
            "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   22000000 kB\n";
        assert_eq!(parse_mem_available(meminfo), Some(22_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: 5 MB\n"), None);
        assert_eq!(
            parse_mem_available(&format!("MemAvailable: {} kB", usize::MAX)),
            None
        );
    }

    #[test]
    fn reservations_are_capped_at_half_the_available_memory() {
        // 32 816 bytes a chunk: 16 of bookkeeping, the header and prefix, 32 KiB of words.
        assert_eq!(std::mem::size_of::<Chunk>(), 32_816);
        assert_eq!(reservable_chunks_of(Some(8 << 30)), (4 << 30) / 32_816);
        assert_eq!(reservable_chunks_of(None), (1 << 30) / 32_816);
        assert_eq!(reservable_chunks_of(Some(32_816)), 0);
    }
}
