//! Writing a trace's large threads apart: while one thread is written out in its turn,
//! threads after it are written by other cores into parts of their own ([`Part`]: bytes in
//! memory, then a temporary file once the parts hold [`MEMORY`]), which are copied out,
//! in order, when their turn comes. A trace is the same bytes however many cores wrote it.
//!
//! Helper threads (the cores) take the large threads in order, at most twice their number
//! ahead of the turn, so that the parts waiting stay few; the calling thread writes the
//! turns: a part once it is written, or the thread itself where no core took it (its bytes
//! go straight out). So does a thread whose part could not be written: a writer apart
//! numbers no tracks, so a thread that needs an extra track is written in its turn, as are
//! threads too small to be worth it, and after a temporary file could not be written, every
//! thread that no core took yet.
//!
//! A thread written in its turn already takes two cores (one decodes its pieces while the
//! other writes them: `decode::pipeline`), and so does each thread written apart: a machine
//! of N cores writes up to N / 2 threads at once, each on two, and one of fewer than four
//! cores writes its threads in turn (copying parts would cost more than the cores save).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::decode::{self, pipeline};
use crate::record::registry::Untracked;

/// Below this weight ([`SpanSource::apart_weight`](crate::decode::pieces::SpanSource::apart_weight)),
/// a thread is written in its turn: another core would cost more than it saves.
pub(crate) const APART_FROM: usize = pipeline::PIPELINE_FROM;

/// The bytes that the parts written ahead keep in memory, all together; the rest of a part
/// goes to a temporary file.
const MEMORY: usize = 256 << 20;

#[cfg(test)]
std::thread_local! {
    /// Tests' settings on this thread ([`set_apart`]).
    static SETTINGS: std::cell::Cell<(Option<usize>, usize)> = const { std::cell::Cell::new((None, 0)) };
}

/// Writes up to `workers` threads apart at once (`None`: one per two cores of a machine of
/// four or more, else none) in the exports made on this thread, with `memory` bytes of parts
/// in memory (0: the default), for tests that show that the bytes written are the same
/// whatever writes them.
#[cfg(test)]
pub(crate) fn set_apart(workers: Option<usize>, memory: usize) {
    SETTINGS.set((workers, memory));
}

#[cfg(test)]
std::thread_local! {
    /// Parts copied out by the turns of this thread.
    static WRITTEN_APART: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The parts that the turns on this thread copied out so far.
#[cfg(test)]
pub(crate) fn written_apart() -> usize {
    WRITTEN_APART.get()
}

/// The blocks of the parts in memory, reused from part to part, no more than the budget's
/// worth at once.
struct Pool {
    free: Mutex<Vec<Vec<u8>>>,
    /// Bytes of blocks handed out.
    used: AtomicUsize,
    budget: usize,
}

/// The bytes of a block of a part in memory: room for three whole huge pages, wherever the
/// block starts ([`huge_pages`]).
const BLOCK: usize = 8 << 20;

/// Asks the system to back the whole huge pages (2 MiB) inside `block`'s room with huge
/// pages (Linux; a hint, nothing elsewhere): a part fills fresh memory, a page fault per
/// 4 KiB without it (Chrome JSON written two threads at once on two cores: 60 to 72 K page
/// faults, 21 to 26 K with it; docs/PERFORMANCE.md).
fn huge_pages(block: &mut Vec<u8>) {
    #[cfg(all(target_os = "linux", feature = "enabled"))]
    {
        const HUGE: usize = 2 << 20;
        let start = block.as_mut_ptr();
        // (usize::MAX where it cannot be aligned: then nothing.)
        let skip = start.align_offset(HUGE);
        let len = block.capacity().saturating_sub(skip) / HUGE * HUGE;
        if len > 0 {
            // SAFETY: `skip + len` is at most the capacity, so `skip..skip + len` lies inside
            // `block`'s allocation, borrowed mutably here and holding no bytes yet;
            // `MADV_HUGEPAGE` changes how its pages are backed, not what they hold, and a
            // failure (no huge pages) changes nothing.
            unsafe {
                libc::madvise(start.add(skip).cast(), len, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(all(target_os = "linux", feature = "enabled")))]
    let _ = block;
}

impl Pool {
    fn new(budget: usize) -> Self {
        Self {
            free: Mutex::new(Vec::new()),
            used: AtomicUsize::new(0),
            budget,
        }
    }

    /// An empty block, unless the budget is spent.
    fn block(&self) -> Option<Vec<u8>> {
        if self.used.fetch_add(BLOCK, Ordering::Relaxed) + BLOCK > self.budget {
            self.used.fetch_sub(BLOCK, Ordering::Relaxed);
            return None;
        }
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        Some(reused.unwrap_or_else(|| {
            let mut block = Vec::with_capacity(BLOCK);
            huge_pages(&mut block);
            block
        }))
    }

    fn give_back(&self, mut block: Vec<u8>) {
        block.clear();
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(block);
        self.used.fetch_sub(BLOCK, Ordering::Relaxed);
    }
}

/// A thread's bytes written ahead of its turn: in blocks of memory while the budget lasts,
/// the rest in a temporary file.
pub(crate) struct Part<'s> {
    blocks: Vec<Vec<u8>>,
    spill: Option<Spill>,
    /// Its temporary file could not be made or written.
    spill_failed: bool,
    pool: &'s Pool,
    /// Set once the trace's writer stopped: writes fail from then on.
    stop: &'s AtomicBool,
}

impl<'s> Part<'s> {
    fn new(pool: &'s Pool, stop: &'s AtomicBool) -> Self {
        Self {
            blocks: Vec::new(),
            spill: None,
            spill_failed: false,
            pool,
            stop,
        }
    }

    /// The part's bytes, written to `out`.
    pub(crate) fn copy_to<O: Write + ?Sized>(mut self, out: &mut O) -> io::Result<()> {
        for block in &self.blocks {
            out.write_all(block)?;
        }
        // (Dropped, the part gives its blocks back, written or not.)
        let Some(spill) = &mut self.spill else {
            return Ok(());
        };
        let file = &mut spill.file;
        file.seek(SeekFrom::Start(0))?;
        let mut buf = vec![0; 1 << 20];
        let mut read = 0u64;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            read += n as u64;
            out.write_all(&buf[..n])?;
        }
        if read != spill.written {
            return Err(io::Error::other(format!(
                "a thread's part in a temporary file was cut: {read} of its {} bytes read back",
                spill.written
            )));
        }
        Ok(())
    }
}

impl Drop for Part<'_> {
    fn drop(&mut self) {
        for block in self.blocks.drain(..) {
            self.pool.give_back(block);
        }
    }
}

impl Write for Part<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other("the trace's writer stopped"));
        }
        let written = self.take(buf);
        self.spill_failed |= written.is_err();
        written
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Part<'_> {
    /// [`Write::write`]: all of `buf`, in blocks while the budget lasts, then in the file.
    fn take(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while self.spill.is_none() && !rest.is_empty() {
            match self.blocks.last_mut() {
                Some(last) if last.len() < BLOCK => {
                    let n = (BLOCK - last.len()).min(rest.len());
                    last.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                }
                _ => match self.pool.block() {
                    Some(block) => self.blocks.push(block),
                    None => self.spill = Some(Spill::create()?),
                },
            }
        }
        if let Some(spill) = &mut self.spill
            && !rest.is_empty()
        {
            spill.file.write_all(rest)?;
            spill.written += rest.len() as u64;
        }
        Ok(buf.len())
    }
}

/// A part's temporary file ([`decode::temporary`]: this user's only, gone from its folder).
struct Spill {
    file: File,
    written: u64,
}

impl Spill {
    fn create() -> io::Result<Self> {
        let file = decode::temporary()
            .ok_or_else(|| io::Error::other("no temporary file for a thread's part"))?;
        Ok(Self { file, written: 0 })
    }
}

/// Writes thread `index` apart into a part, and returns what goes with the part to its turn.
type Apart<'f, T> = dyn Fn(usize, &mut Part<'_>) -> io::Result<T> + Sync + 'f;

/// Thread `index`'s turn, with its part and what went with it when it was written apart.
type Turn<'f, T> = dyn FnMut(usize, Option<(Part<'_>, T)>) -> io::Result<()> + 'f;

/// Where a thread is.
enum Slot<'s, T> {
    /// Nobody writes it yet.
    Free,
    /// Written apart now.
    Claimed,
    /// Written apart, waiting for its turn.
    Written(Part<'s>, T),
    /// Could not be written apart: its turn writes it.
    Failed,
    /// Its turn came.
    Taken,
}

struct State<'s, T> {
    slots: Vec<Slot<'s, T>>,
    /// The thread whose turn it is.
    turn: usize,
    /// The threads to write apart that nobody took yet.
    free: usize,
    stop: bool,
    /// A panic of a core writing apart, raised once all have stopped.
    panic: Option<Box<dyn std::any::Any + Send>>,
}

/// Writes threads `0..weights.len()` in order: `turn(index, part)` for each, with its part
/// when another core wrote it apart (`apart(index, part)`, into `part`, and what it
/// returned), `None` when the turn is to write it itself. Threads whose weight is
/// [`APART_FROM`] or more are written apart where the machine has the cores; `apart` may fail
/// (its thread is then written in its turn). Stops at the first error of `turn` and returns
/// it.
pub(crate) fn threads<T: Send>(
    weights: &[usize],
    apart: &Apart<'_, T>,
    turn: &mut Turn<'_, T>,
) -> io::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // A thread written in its turn takes two cores already: one decodes its pieces while
    // the other writes them (`pipeline`); so does each thread written apart, where the
    // machine has the cores.
    // With fewer than four cores, the copies of the parts would cost more than the cores
    // save (measured on two).
    let (workers, memory) = settings();
    let workers = workers.unwrap_or(match cores {
        0..4 => 0,
        _ => cores / 2,
    });
    let memory = match memory {
        0 => MEMORY,
        set => set,
    };
    let large = weights.iter().filter(|&&w| w >= APART_FROM).count();
    // One large thread is written in its turn: a part would only copy it.
    let workers = if large < 2 { 0 } else { workers.min(large) };
    threads_on(workers, cores, memory, weights, apart, turn)
}

/// The tests' settings ([`set_apart`]): the threads written apart at once, and the memory.
fn settings() -> (Option<usize>, usize) {
    #[cfg(test)]
    return SETTINGS.get();
    #[cfg(not(test))]
    (None, 0)
}

/// [`threads`], with up to `workers` threads written apart at once (each on a thread of its
/// own; this one writes the turns) on a machine of `cores` cores.
fn threads_on<T: Send>(
    workers: usize,
    cores: usize,
    memory: usize,
    weights: &[usize],
    apart: &Apart<'_, T>,
    turn: &mut Turn<'_, T>,
) -> io::Result<()> {
    if workers == 0 {
        return (0..weights.len()).try_for_each(|index| turn(index, None));
    }
    // Each thread written apart takes a core, and another to decode on where there are
    // enough.
    let alone = cores < 2 * workers;
    let pool = Pool::new(memory);
    let stop = AtomicBool::new(false);
    let shared = Shared {
        state: Mutex::new(State {
            slots: weights.iter().map(|_| Slot::Free).collect(),
            turn: 0,
            free: weights.iter().filter(|&&w| w >= APART_FROM).count(),
            stop: false,
            panic: None,
        }),
        changed: Condvar::new(),
        weights,
        ahead: 2 * workers,
        pool: &pool,
        stop: &stop,
    };
    let written = std::thread::scope(|s| {
        // Whatever ends the turns (an error, a panic), the cores stop.
        let _stop = StopOnDrop(&shared);
        for _ in 0..workers {
            let spawned = std::thread::Builder::new()
                .name("tickscope-writer".into())
                .spawn_scoped(s, || {
                    let _untracked = Untracked::enter();
                    if alone {
                        pipeline::alone();
                    }
                    shared.work(apart);
                });
            // Fewer cores, then: the turns write what no core takes.
            if spawned.is_err() {
                break;
            }
        }
        shared.turns(turn)
    });
    if let Some(panic) = shared.lock().panic.take() {
        resume_unwind(panic);
    }
    written
}

struct Shared<'s, 'w, T> {
    state: Mutex<State<'s, T>>,
    changed: Condvar,
    weights: &'w [usize],
    /// How far past the turn threads are taken.
    ahead: usize,
    pool: &'s Pool,
    stop: &'s AtomicBool,
}

/// Stops every core when dropped.
struct StopOnDrop<'a, 's, 'w, T>(&'a Shared<'s, 'w, T>);

impl<T> Drop for StopOnDrop<'_, '_, '_, T> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::Relaxed);
        self.0.lock().stop = true;
        self.0.changed.notify_all();
    }
}

impl<'s, T> Shared<'s, '_, T> {
    fn lock(&self) -> MutexGuard<'_, State<'s, T>> {
        // A core that panicked holds no lock while it writes: the state is whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<'s, T: Send> Shared<'s, '_, T> {
    /// The first thread to write apart that nobody took, from the turn on, taken.
    fn take(&self, state: &mut State<'s, T>) -> Option<usize> {
        let end = (state.turn + self.ahead).min(state.slots.len());
        let index = (state.turn..end)
            .find(|&i| self.weights[i] >= APART_FROM && matches!(state.slots[i], Slot::Free))?;
        state.slots[index] = Slot::Claimed;
        state.free -= 1;
        Some(index)
    }

    /// A core's work: threads written apart until none is left, the writer stopped, or a
    /// part could not be written to its temporary file (the turns write the rest).
    fn work(&self, apart: &Apart<'_, T>) {
        let mut state = self.lock();
        while !state.stop && state.free > 0 {
            let Some(index) = self.take(&mut state) else {
                state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            drop(state);
            let mut part = Part::new(self.pool, self.stop);
            let written = catch_unwind(AssertUnwindSafe(|| apart(index, &mut part)));
            state = self.lock();
            state.slots[index] = match written {
                Ok(Ok(value)) => Slot::Written(part, value),
                // Its turn writes it, and meets the error again if it was not this core's.
                Ok(Err(_)) => {
                    if part.spill_failed {
                        // No more parts: they would fail too.
                        state.free = 0;
                    }
                    Slot::Failed
                }
                Err(panic) => {
                    state.panic.get_or_insert(panic);
                    state.stop = true;
                    self.stop.store(true, Ordering::Relaxed);
                    Slot::Failed
                }
            };
            self.changed.notify_all();
        }
    }

    /// Each thread's turn, in order: its part once written, or the turn writes it where no
    /// core took it.
    fn turns(&self, turn: &mut Turn<'_, T>) -> io::Result<()> {
        for index in 0..self.weights.len() {
            let mut state = self.lock();
            state.turn = index;
            self.changed.notify_all();
            let part = loop {
                if let Some(panic) = state.panic.take() {
                    resume_unwind(panic);
                }
                match std::mem::replace(&mut state.slots[index], Slot::Taken) {
                    Slot::Written(part, value) => {
                        #[cfg(test)]
                        WRITTEN_APART.set(WRITTEN_APART.get() + 1);
                        break Some((part, value));
                    }
                    Slot::Free => {
                        if self.weights[index] >= APART_FROM {
                            state.free -= 1;
                        }
                        break None;
                    }
                    Slot::Failed | Slot::Taken => break None,
                    Slot::Claimed => {
                        state.slots[index] = Slot::Claimed;
                        state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
                    }
                }
            };
            drop(state);
            turn(index, part)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod traces_tests;
