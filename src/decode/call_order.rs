//! Async calls handed over in the order they began, as they settle in another order
//! ([`call_stream::each_call`](super::call_stream)): a call that stays open long (a server's
//! loop) holds back every call begun after it, so past [`HELD`] calls those waiting go to a
//! temporary file, each at the slot of its rank, read back in order at the end. What it holds
//! in memory is bounded; the file takes [`SLOT`] bytes a call.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};

use crate::record::callsite::Callsite;
use crate::record::hash::FxHashMap;
use crate::trace::AsyncSpan;

/// Calls waiting in memory before they go to a file.
#[cfg(not(test))]
const HELD: usize = 1 << 16;
/// Fewer in tests, so that theirs go to a file with a few thousand calls.
#[cfg(test)]
const HELD: usize = 1 << 10;

/// Bytes a call takes in the file (with its three words of [`Extra`]).
pub(super) const SLOT: u64 = 88;

/// Three words that go with a call (what the caller makes of them: see
/// [`call_plan`](super::call_plan)).
pub(super) type Extra = [u64; 3];

/// What [`InOrder`] hands each call to.
pub(super) type Hand<'f> = dyn FnMut(&AsyncSpan, Extra) -> io::Result<()> + 'f;

/// Hands calls to `f` by rank (0, 1, 2, ...) as they are given in any order; a rank may be
/// a hole ([`InOrder::skip`]: a `tracing` span found a plain scope after it was ranked),
/// handed over as nothing.
pub(super) struct InOrder<'f> {
    f: &'f mut Hand<'f>,
    /// The rank of the next call to hand over.
    next: u64,
    /// Calls (or holes) given before their turn, by rank.
    waiting: BTreeMap<u64, Option<(AsyncSpan, Extra)>>,
    /// Once calls waited past [`HELD`]: the file every call not handed over yet goes to, and
    /// the callsites of those in it (a file slot names its callsite by index).
    file: Option<(File, Vec<&'static Callsite>, FxHashMap<usize, u32>)>,
    /// Calls given so far (every rank below is given once).
    given: u64,
    /// The first error (of `f`, or of the file): nothing more is handed over.
    failed: Option<io::Error>,
    /// No temporary file could be made: calls wait in memory.
    no_file: bool,
}

impl<'f> InOrder<'f> {
    pub(super) fn new(f: &'f mut Hand<'f>) -> Self {
        Self {
            f,
            next: 0,
            waiting: BTreeMap::new(),
            file: None,
            given: 0,
            failed: None,
            no_file: false,
        }
    }

    /// The call of rank `rank`.
    pub(super) fn give(&mut self, rank: u64, call: AsyncSpan, extra: Extra) {
        self.take(rank, Some((call, extra)));
    }

    /// Rank `rank` is no call: nothing is handed over for it.
    pub(super) fn skip(&mut self, rank: u64) {
        self.take(rank, None);
    }

    fn take(&mut self, rank: u64, call: Option<(AsyncSpan, Extra)>) {
        self.given += 1;
        if self.failed.is_some() {
            return;
        }
        if self.file.is_some() {
            let written = self.write_slot(rank, call.as_ref());
            self.fail_on(written);
            return;
        }
        if rank != self.next {
            self.waiting.insert(rank, call);
            if self.waiting.len() > HELD {
                let spilled = self.spill();
                self.fail_on(spilled);
            }
            return;
        }
        self.hand(call);
        while let Some(call) = self.waiting.remove(&self.next) {
            self.hand(call);
        }
    }

    /// Hands the call of rank `next` over (a hole: nothing).
    fn hand(&mut self, call: Option<(AsyncSpan, Extra)>) {
        if let Some((call, extra)) = call {
            let handed = (self.f)(&call, extra);
            self.fail_on(handed);
        }
        self.next += 1;
    }

    /// Hands over what is left (every rank was given); the first error met.
    pub(super) fn finish(mut self) -> io::Result<()> {
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        debug_assert!(self.file.is_some() || self.waiting.is_empty());
        debug_assert!(self.given >= self.next);
        let Some((mut file, callsites, _)) = self.file.take() else {
            return Ok(());
        };
        file.seek(SeekFrom::Start(self.next * SLOT))?;
        let mut reader = io::BufReader::with_capacity(256 << 10, file);
        let mut slot = [0u8; SLOT as usize];
        for _ in self.next..self.given {
            reader.read_exact(&mut slot)?;
            let call = decode(&slot, &callsites).ok_or_else(|| {
                io::Error::other("a temporary file of async calls was changed while in use")
            })?;
            if let Some((call, extra)) = call {
                (self.f)(&call, extra)?;
            }
        }
        Ok(())
    }

    fn fail_on(&mut self, result: io::Result<()>) {
        if let Err(error) = result {
            self.failed.get_or_insert(error);
        }
    }

    /// Moves the calls waiting to a new temporary file, if one can be made (else they keep
    /// waiting in memory).
    fn spill(&mut self) -> io::Result<()> {
        if self.no_file {
            return Ok(());
        }
        let Some(file) = temporary() else {
            self.no_file = true;
            return Ok(());
        };
        self.file = Some((file, Vec::new(), FxHashMap::default()));
        for (rank, call) in std::mem::take(&mut self.waiting) {
            self.write_slot(rank, call.as_ref())?;
        }
        Ok(())
    }

    fn write_slot(&mut self, rank: u64, call: Option<&(AsyncSpan, Extra)>) -> io::Result<()> {
        let Some((file, callsites, index)) = &mut self.file else {
            return Ok(());
        };
        let Some((call, extra)) = call else {
            file.seek(SeekFrom::Start(rank * SLOT))?;
            return file.write_all(&HOLE);
        };
        let address = std::ptr::from_ref(call.callsite) as usize;
        let site = *index.entry(address).or_insert_with(|| {
            callsites.push(call.callsite);
            callsites.len() as u32 - 1
        });
        file.seek(SeekFrom::Start(rank * SLOT))?;
        file.write_all(&encode(call, *extra, site))
    }
}

/// A new file in the temporary folder, readable by this user only and gone from the folder
/// at once (nothing is left behind, whatever happens next); `None` where it cannot be made,
/// where the process may write files only up to a size (`ulimit -f`), and on other systems
/// (an open file cannot be removed there): the calls then wait in memory, and the parts of
/// threads written apart ([`parts`](crate::export::parts)) are written in their turn.
#[cfg(all(target_os = "linux", feature = "enabled", feature = "gzip"))]
pub(crate) fn temporary() -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if !crate::capture::file_size_unlimited() {
        return None;
    }
    let path = std::env::temp_dir().join(format!(
        ".tickscope-calls-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let file = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .ok()?;
    std::fs::remove_file(&path).ok()?;
    Some(file)
}

#[cfg(not(all(target_os = "linux", feature = "enabled", feature = "gzip")))]
pub(crate) fn temporary() -> Option<File> {
    None
}

/// A hole as a file slot: written (the flag of every slot written), and a hole.
const HOLE: [u8; SLOT as usize] = {
    let mut slot = [0u8; SLOT as usize];
    slot[60] = 1 << 7 | 1 << 6;
    slot
};

/// The call and its extra words of a file slot (see [`decode`]).
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(super) fn decode_slot(
    slot: &[u8],
    callsites: &[&'static Callsite],
) -> Option<(AsyncSpan, Extra)> {
    decode(slot.try_into().ok()?, callsites).flatten()
}

/// `call` and `extra` as a file slot, its callsite by `site` (an index).
pub(super) fn encode(call: &AsyncSpan, extra: Extra, site: u32) -> [u8; SLOT as usize] {
    let mut slot = [0u8; SLOT as usize];
    // Whether it ended on a thread is a flag: any thread id (a forged file's too) is kept.
    let end_thread = call.end_thread.unwrap_or(0);
    let flags = u8::from(call.open_at_stop)
        | u8::from(call.cut_at_start) << 1
        | u8::from(call.end_thread.is_some()) << 2
        | 1 << 7;
    let words = [
        call.start_ns,
        call.end_ns,
        call.thread,
        end_thread,
        call.busy_ns,
        call.self_ns,
    ];
    for (at, word) in words.into_iter().enumerate() {
        slot[at * 8..at * 8 + 8].copy_from_slice(&word.to_le_bytes());
    }
    slot[48..52].copy_from_slice(&site.to_le_bytes());
    slot[52..56].copy_from_slice(&call.process.to_le_bytes());
    slot[56..60].copy_from_slice(&call.polls.to_le_bytes());
    slot[60] = flags;
    slot[64..72].copy_from_slice(&extra[0].to_le_bytes());
    slot[72..80].copy_from_slice(&extra[1].to_le_bytes());
    slot[80..88].copy_from_slice(&extra[2].to_le_bytes());
    slot
}

/// The call of a file slot (`Some(None)`: a hole), `None` when it was never written (no
/// flag set) or names no callsite of `callsites`.
fn decode(
    slot: &[u8; SLOT as usize],
    callsites: &[&'static Callsite],
) -> Option<Option<(AsyncSpan, Extra)>> {
    let word = |at: usize| u64::from_le_bytes(slot[at * 8..at * 8 + 8].try_into().unwrap());
    let int = |at: usize| u32::from_le_bytes(slot[at..at + 4].try_into().unwrap());
    let flags = slot[60];
    if flags & 1 << 7 == 0 {
        return None;
    }
    if flags & 1 << 6 != 0 {
        return Some(None);
    }
    let call = AsyncSpan {
        callsite: callsites.get(int(48) as usize)?,
        start_ns: word(0),
        end_ns: word(1),
        thread: word(2),
        end_thread: (flags & 4 != 0).then_some(word(3)),
        busy_ns: word(4),
        self_ns: word(5),
        process: int(52),
        polls: int(56),
        open_at_stop: flags & 1 != 0,
        cut_at_start: flags & 2 != 0,
    };
    Some(Some((call, [word(8), word(9), word(10)])))
}

#[cfg(test)]
mod tests {
    use super::*;

    static A: Callsite = Callsite::new("a", file!(), line!(), module_path!());
    static B: Callsite = Callsite::new("b", file!(), line!(), module_path!());

    fn call(rank: u64) -> AsyncSpan {
        AsyncSpan {
            callsite: if rank.is_multiple_of(3) { &A } else { &B },
            start_ns: rank * 10,
            end_ns: rank * 10 + rank % 7,
            process: (rank % 2) as u32,
            thread: rank % 5,
            end_thread: (!rank.is_multiple_of(4)).then_some(rank % 3),
            polls: (rank % 9) as u32,
            busy_ns: rank * 3,
            self_ns: rank,
            open_at_stop: rank.is_multiple_of(4),
            cut_at_start: false,
        }
    }

    /// What goes with the call of rank `rank`.
    fn extra(rank: u64) -> Extra {
        [rank * 10, !rank, rank ^ 5]
    }

    /// Calls given in an order where the first is given last (an open call holding back
    /// every other) come out by rank, through the file past [`HELD`] waiting, and not.
    #[test]
    fn calls_come_out_by_rank() {
        for n in [10, HELD as u64 + 1000] {
            let mut out = Vec::new();
            let mut f = |c: &AsyncSpan, extra: Extra| {
                assert_eq!(extra, [c.start_ns, !c.self_ns, c.self_ns ^ 5]);
                out.push(c.clone());
                Ok(())
            };
            let mut order = InOrder::new(&mut f);
            // Rank 0 last; the others in pairs swapped.
            for rank in 1..n {
                let swapped = if !rank.is_multiple_of(2) && rank + 1 < n {
                    rank + 1
                } else if rank.is_multiple_of(2) {
                    rank - 1
                } else {
                    rank
                };
                order.give(swapped, call(swapped), extra(swapped));
            }
            // Past the calls held in memory, those waiting are in a file where one can be made.
            let spilled = order.file.is_some();
            assert_eq!(spilled, n > HELD as u64 && temporary().is_some());
            order.give(0, call(0), extra(0));
            order.finish().unwrap();
            assert_eq!(out.len() as u64, n);
            for (rank, got) in (0..).zip(&out) {
                assert_eq!(got, &call(rank));
            }
        }
    }
    /// Ranks that are holes are handed over as nothing, the calls still by rank, through the
    /// file and not.
    #[test]
    fn holes_are_skipped() {
        for n in [12, HELD as u64 + 1000] {
            let mut out = Vec::new();
            let mut f = |c: &AsyncSpan, extra: Extra| {
                assert_eq!(extra, [c.start_ns, !c.self_ns, c.self_ns ^ 5]);
                out.push(c.clone());
                Ok(())
            };
            let mut order = InOrder::new(&mut f);
            // Every fifth rank a hole; given from the last to the first.
            for rank in (0..n).rev() {
                if rank.is_multiple_of(5) {
                    order.skip(rank);
                } else {
                    order.give(rank, call(rank), extra(rank));
                }
            }
            order.finish().unwrap();
            let expected: Vec<AsyncSpan> =
                (0..n).filter(|r| !r.is_multiple_of(5)).map(call).collect();
            assert_eq!(out, expected);
        }
    }
}
