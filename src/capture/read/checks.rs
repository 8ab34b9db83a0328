//! The checks of a file's packed chunks, on every core: each chunk read from a file is checked
//! (decompressed, every column read) before it is kept where it lies, and the checks of
//! consecutive chunks do not depend on each other. So they wait in a batch, checked together
//! on the machine's cores, and what each finds is applied in file order, as if each had been
//! checked as it was read: the first damaged chunk's error, before anything a later chunk
//! would do. A batch is checked before any other chunk is read, and before the reading ends
//! or fails.

use crate::capture::compress::{Checked, PackError, check};
use crate::capture::{Chunk, LazyRecords};

use super::errors::ReadError;
use super::session::{Packed, Session};

/// Chunks that wait at most: some hundreds of kilobytes of compressed columns, and a batch
/// large enough to share between the cores (in the tests, small files make several).
const BATCH: usize = if cfg!(test) { 16 } else { 256 };

/// Chunks a core checks at least, for the batch to be shared.
const SHARE: usize = if cfg!(test) { 2 } else { 8 };

impl Session {
    /// The packed chunk at `pos` (`content`), of thread `thread`, whose records lie as `lazy`
    /// says: checked with the chunks waiting, once there are enough of them.
    pub(super) fn check_later(
        &mut self,
        pos: usize,
        content: &[u8],
        thread: u64,
        lazy: LazyRecords,
    ) -> Result<(), ReadError> {
        let index = self.thread_index.get(&thread).copied();
        let count = lazy.len;
        self.waiting.push(Packed {
            pos,
            content: content.to_vec(),
            thread,
            index,
            lazy,
            count,
        });
        match self.waiting.len() >= BATCH {
            true => self.check_waiting(),
            false => Ok(()),
        }
    }

    /// Checks the chunks waiting, on every core, and applies what each finds in file order;
    /// the first error stops there (the later chunks are let go).
    pub(super) fn check_waiting(&mut self) -> Result<(), ReadError> {
        let waiting = std::mem::take(&mut self.waiting);
        let checked = check_all(&waiting);
        for (packed, checked) in waiting.into_iter().zip(checked) {
            let checked = checked.map_err(|e| ReadError::at(packed.pos, e.to_string()))?;
            let Some(index) = packed.index else {
                return Err(self.undeclared(packed.pos, packed.thread));
            };
            if packed.count > 0 {
                let chunk = Chunk::Lazy(LazyRecords {
                    kept: checked.kept,
                    ..packed.lazy
                });
                self.threads[index].push_checked(chunk, checked.memory, checked.last_tick);
            }
            self.records += packed.count as u64;
        }
        Ok(())
    }
}

/// The checks of `waiting`, in order: on this thread for a few, else split between the cores.
fn check_all(waiting: &[Packed]) -> Vec<Result<Checked, PackError>> {
    let check_each = |chunks: &[Packed]| -> Vec<Result<Checked, PackError>> {
        chunks.iter().map(|packed| check(&packed.content)).collect()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = cores.min(waiting.len() / SHARE);
    if workers < 2 {
        return check_each(waiting);
    }
    let share = waiting.len().div_ceil(workers);
    std::thread::scope(|s| {
        // The first share is checked here; each other on a thread of its own (or here, when
        // a thread cannot be started).
        let mut parts = waiting.chunks(share);
        let first = parts.next().unwrap_or_default();
        let helpers: Vec<_> = parts
            .map(|part| {
                let started = std::thread::Builder::new().spawn_scoped(s, move || check_each(part));
                started.map_err(|_| part)
            })
            .collect();
        let mut all = check_each(first);
        for helper in helpers {
            match helper {
                Ok(helper) => match helper.join() {
                    Ok(checked) => all.extend(checked),
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                Err(part) => all.extend(check_each(part)),
            }
        }
        all
    })
}

#[cfg(test)]
mod tests {
    use crate::capture::Capture;
    use crate::capture::format::{ALIGN, CHUNK_HEADER, EVENTS_PACKED};
    use crate::record::callsite::Callsite;
    use crate::record::event::RawEvent;

    static S: Callsite = Callsite::new("checked", file!(), line!(), module_path!());

    /// The positions of a file's packed chunks.
    fn packed_chunks(bytes: &[u8]) -> Vec<usize> {
        let (mut pos, mut found) = (0, Vec::new());
        while pos + CHUNK_HEADER <= bytes.len() {
            let kind = u16::from_le_bytes([bytes[pos + 4], bytes[pos + 5]]);
            let len = u64::from_le_bytes(bytes[pos + 8..pos + 16].try_into().unwrap()) as usize;
            if kind == EVENTS_PACKED {
                found.push(pos);
            }
            pos += CHUNK_HEADER + len.next_multiple_of(ALIGN);
        }
        found
    }

    /// A file's packed chunks checked in batches on every core read as checked one by one:
    /// the same records; the first damaged chunk's error, whatever comes after it (another
    /// damaged chunk, a cut).
    #[test]
    fn chunks_checked_together_read_as_one_by_one() {
        let threads: Vec<(u64, Vec<RawEvent>)> = (1..=3u64)
            .map(|thread| {
                let records = (0..60_000u64)
                    .map(|i| match i % 2 {
                        0 => RawEvent::begin(S.id(), 10 * i + thread),
                        _ => {
                            RawEvent::end(RawEvent::end_key(S.id(), 10 * (i - 1) + thread), 10 * i)
                        }
                    })
                    .collect();
                (thread, records)
            })
            .collect();
        let capture = Capture::from_records(threads.clone(), 0, 700_000);
        let mut bytes = Vec::new();
        capture.write_to(&mut bytes).unwrap();
        let chunks = packed_chunks(&bytes);
        assert!(chunks.len() > 40, "{} packed chunks", chunks.len());
        let path =
            std::env::temp_dir().join(format!("tickscope-checks-{}.tscope", std::process::id()));
        let read = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            Capture::read_all(&path)
        };
        let whole = read(&bytes).unwrap().remove(0);
        for (thread, records) in &threads {
            let t = whole.threads.iter().find(|t| t.id == *thread).unwrap();
            let back: Vec<RawEvent> = t.chunks.iter().flat_map(|c| c.records().to_vec()).collect();
            assert!(&back == records, "thread {thread}");
        }
        // A byte of a chunk's frame damaged, and another of a later chunk, or the file cut
        // after it: the first one's error.
        let frame = |chunk: usize| chunks[chunk] + CHUNK_HEADER + 60;
        for (first, then) in [(3, Some(30)), (20, Some(21)), (35, None), (0, Some(1))] {
            let mut damaged = bytes.clone();
            damaged[frame(first)] ^= 0x55;
            if let Some(then) = then {
                damaged[frame(then)] ^= 0x55;
            }
            let at = format!("at byte {}", chunks[first]);
            let error = read(&damaged).unwrap_err().to_string();
            assert!(error.contains(&at), "{first}: {error}");
            damaged.truncate(frame(first) + 5_000);
            let error = read(&damaged).unwrap_err().to_string();
            assert!(error.contains(&at), "{first}, cut: {error}");
        }
        std::fs::remove_file(&path).unwrap();
    }
}
