//! Decoding a thread's pieces on one core while they are written on another: the pieces of
//! [`Pieces`](super::pieces::Pieces) made on a helper thread and handed over, in order,
//! through a short queue, so that decoding and writing overlap in memory bounded by the
//! pieces queued.

use std::io;
use std::sync::mpsc;

use crate::record::registry::Untracked;
use crate::trace::{MemoryStats, Span, SpanArg};

use super::piece::Piece;
use super::source::SpanEdge;
use super::summary::WINDOW;

/// Batches of pieces decoded ahead of the one being written, at most: memory stays bounded
/// by a few batches (with the one being filled and the one being written).
const AHEAD: usize = 1;

/// Below this many records, a thread's pieces are decoded where they are written: starting
/// a helper thread would cost more than it saves.
pub(crate) const PIPELINE_FROM: usize = 1 << 14;

/// The pieces `decode` hands to its callback, handed to `write` in the same order: on a helper
/// thread that runs up to [`AHEAD`] batches of pieces ahead when `apart` (and the machine has more than
/// one core), else in turn on this thread. Stops at the first error `write` returns (the
/// helper then stops at its next piece), and returns it.
pub(crate) fn pieces(
    apart: bool,
    decode: impl FnOnce(&mut dyn FnMut(Piece<'_>) -> io::Result<()>) -> io::Result<()> + Send,
    write: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    pieces_on(apart && cores >= 2 && !ALONE.get(), decode, write)
}

std::thread_local! {
    /// Set by [`alone`]: this thread's pieces are decoded where they are written.
    static ALONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// From now on, the pieces that this thread writes are decoded on it (no helper thread): for
/// the threads of writers that already keep every core busy, each with a thread of its own.
pub(crate) fn alone() {
    ALONE.set(true);
}

/// [`pieces`], on a helper thread when `apart` whatever the cores.
fn pieces_on(
    apart: bool,
    decode: impl FnOnce(&mut dyn FnMut(Piece<'_>) -> io::Result<()>) -> io::Result<()> + Send,
    write: &mut dyn FnMut(Piece<'_>) -> io::Result<()>,
) -> io::Result<()> {
    if !apart {
        return decode(write);
    }
    overlap(
        |send| {
            let mut batch = Batch::default();
            decode(&mut |piece| {
                batch.push(&piece);
                match batch.spans >= BATCH_SPANS {
                    true => send(&mut batch),
                    false => Ok(()),
                }
            })?;
            match batch.len > 0 {
                true => send(&mut batch),
                false => Ok(()),
            }
        },
        |batch| {
            let written = (batch.pieces[..batch.len])
                .iter()
                .try_for_each(|owned| write(owned.piece()));
            batch.clear();
            written
        },
    )
}

/// Edges ([`SpanEdge`]) handed over together between the helper and the writer of
/// [`edges`]: 16 Ki (384 KiB), so that a thread of millions of scopes is handed over some
/// hundreds of times, and memory stays that of a few batches.
const BATCH_EDGES: usize = 16 << 10;

/// [`pieces`] for the batches of edges that `decode` hands to its callback
/// ([`SpanSource::each_edge`](super::source::SpanSource::each_edge)): handed to `write` in the
/// same order, in batches of [`BATCH_EDGES`] from a helper thread when `apart` (and the
/// machine has more than one core), else as they come on this thread.
pub(crate) fn edges(
    apart: bool,
    decode: impl FnOnce(&mut dyn FnMut(&[SpanEdge]) -> io::Result<()>) -> io::Result<()> + Send,
    write: &mut dyn FnMut(&[SpanEdge]) -> io::Result<()>,
) -> io::Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    edges_on(apart && cores >= 2 && !ALONE.get(), decode, write)
}

/// [`edges`], on a helper thread when `apart` whatever the cores.
fn edges_on(
    apart: bool,
    decode: impl FnOnce(&mut dyn FnMut(&[SpanEdge]) -> io::Result<()>) -> io::Result<()> + Send,
    write: &mut dyn FnMut(&[SpanEdge]) -> io::Result<()>,
) -> io::Result<()> {
    if !apart {
        return decode(write);
    }
    overlap(
        |send| {
            let mut batch: Vec<SpanEdge> = Vec::with_capacity(BATCH_EDGES);
            decode(&mut |edges| {
                batch.extend_from_slice(edges);
                match batch.len() >= BATCH_EDGES {
                    true => send(&mut batch),
                    false => Ok(()),
                }
            })?;
            match batch.is_empty() {
                false => send(&mut batch),
                true => Ok(()),
            }
        },
        |batch: &mut Vec<SpanEdge>| {
            let written = write(batch);
            batch.clear();
            written
        },
    )
}

/// Runs `fill` on a helper thread, which hands each batch it fills to `send` (which hands
/// it over, putting an emptied one or a new one in its place), while this thread gives
/// `write` each batch in turn (to write and empty); at most [`AHEAD`] batches wait.
/// Stops at the first error `write` returns (the helper then stops at its next `send`), and
/// returns it, or `fill`'s.
fn overlap<B: Default + Send>(
    fill: impl FnOnce(&mut dyn FnMut(&mut B) -> io::Result<()>) -> io::Result<()> + Send,
    mut write: impl FnMut(&mut B) -> io::Result<()>,
) -> io::Result<()> {
    // Full batches one way, emptied ones back the other (reused, so that the helper does
    // not allocate a batch's worth of memory per batch).
    let (full, batches) = mpsc::sync_channel::<B>(AHEAD);
    let (emptied, spare) = mpsc::channel::<B>();
    std::thread::scope(|s| {
        let helper = s.spawn(move || {
            // Decoding allocates; that is the profiler's work, not the program's.
            let _untracked = Untracked::enter();
            fill(&mut |batch: &mut B| {
                let next = spare.try_recv().unwrap_or_default();
                // The writer stopped (its error is the one returned): stop decoding too.
                send_spinning(&full, std::mem::replace(batch, next))
                    .map_err(|_| io::Error::other("the pieces' writer stopped"))
            })
        });
        let mut written = Ok(());
        while let Some(mut batch) = recv_spinning(&batches) {
            written = write(&mut batch);
            if written.is_err() {
                break;
            }
            // The helper may be done already: then the buffers are not needed.
            let _ = emptied.send(batch);
        }
        // Ends the helper's sends if it is still decoding.
        drop(batches);
        let decoded = match helper.join() {
            Ok(decoded) => decoded,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        written.and(decoded)
    })
}

/// How long one side waits for the other by spinning before it sleeps: a batch takes some
/// microseconds to decode or write, and a side that sleeps must be woken (a system call on
/// the other side, and the time the scheduler takes), once a batch.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// The outcome of `attempt`, tried again and again while it has none, for [`SPIN`] at most;
/// `None` when it still has none then.
fn spinning<T>(mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
    let start = std::time::Instant::now();
    for spins in 1u32.. {
        if let Some(outcome) = attempt() {
            return Some(outcome);
        }
        if spins % 64 == 0 && start.elapsed() >= SPIN {
            break;
        }
        std::hint::spin_loop();
    }
    None
}

/// The next of `batches`, waited for by spinning ([`spinning`]), then asleep; `None` once the
/// sender is gone.
fn recv_spinning<B>(batches: &mpsc::Receiver<B>) -> Option<B> {
    spinning(|| match batches.try_recv() {
        Ok(batch) => Some(Some(batch)),
        Err(mpsc::TryRecvError::Disconnected) => Some(None),
        Err(mpsc::TryRecvError::Empty) => None,
    })
    .unwrap_or_else(|| batches.recv().ok())
}

/// Sends `batch` into `full`, waiting for room by spinning ([`spinning`]), then asleep; an
/// error once the receiver is gone.
fn send_spinning<B: Default>(full: &mpsc::SyncSender<B>, mut batch: B) -> Result<(), ()> {
    spinning(|| match full.try_send(std::mem::take(&mut batch)) {
        Ok(()) => Some(Ok(())),
        Err(mpsc::TrySendError::Disconnected(_)) => Some(Err(())),
        Err(mpsc::TrySendError::Full(back)) => {
            batch = back;
            None
        }
    })
    .unwrap_or_else(|| full.send(batch).map_err(drop))
}

/// Spans a batch of pieces holds before it is handed over: handing over may cost a wake-up
/// of the writer, so small pieces go in batches; a piece holds [`WINDOW`] spans or more but
/// for a thread's last, so most batches are one piece, and memory stays that of a few.
const BATCH_SPANS: usize = WINDOW;

/// Pieces handed over together: the first `len` of `pieces` (the rest are buffers to reuse).
#[derive(Default)]
struct Batch {
    pieces: Vec<Owned>,
    len: usize,
    /// The spans of the pieces.
    spans: usize,
}

impl Batch {
    /// Adds a copy of `piece`.
    fn push(&mut self, piece: &Piece<'_>) {
        if self.len == self.pieces.len() {
            self.pieces.push(Owned::default());
        }
        self.pieces[self.len].fill(piece);
        self.len += 1;
        self.spans += piece.spans.len();
    }

    /// No piece (the buffers are kept).
    fn clear(&mut self) {
        self.len = 0;
        self.spans = 0;
    }
}

/// A [`Piece`] with its own buffers, to cross threads.
#[derive(Default)]
struct Owned {
    base: u32,
    spans: Vec<Span>,
    memory: Vec<MemoryStats>,
    args: Vec<SpanArg>,
    carried: Vec<u32>,
    open: Vec<u32>,
}

impl Owned {
    /// A copy of `piece`, in these buffers.
    fn fill(&mut self, piece: &Piece<'_>) {
        self.base = piece.base;
        fill(&mut self.spans, piece.spans);
        fill(&mut self.memory, piece.memory);
        fill(&mut self.args, piece.args);
        fill(&mut self.carried, piece.carried);
        fill(&mut self.open, piece.open);
    }

    /// The piece copied.
    fn piece(&self) -> Piece<'_> {
        Piece {
            base: self.base,
            spans: &self.spans,
            memory: &self.memory,
            args: &self.args,
            carried: &self.carried,
            open: &self.open,
        }
    }
}

/// `to` holding a copy of `from`, in its own buffer.
fn fill<T: Clone>(to: &mut Vec<T>, from: &[T]) {
    to.clear();
    to.extend_from_slice(from);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::callsite::Callsite;
    use crate::trace::SpanKind;

    static SITE: Callsite = Callsite::new("site", file!(), line!(), module_path!());

    #[test]
    fn pieces_come_in_order_and_errors_stop_both_sides() {
        let callsite = &SITE;
        let span = |start_ns: u64| Span {
            callsite,
            start_ns,
            end_ns: start_ns + 1,
            depth: 0,
            parent: None,
            children_ns: 0,
            overhead_ns: 0,
            open_at_stop: false,
            cut_at_start: false,
            kind: SpanKind::Scope,
        };
        let decode = |n: u64| {
            move |f: &mut dyn FnMut(Piece<'_>) -> io::Result<()>| {
                for i in 0..n {
                    let spans = [span(2 * i), span(2 * i + 1)];
                    let carried = [i as u32];
                    f(Piece {
                        base: i as u32 * 2,
                        spans: &spans,
                        memory: &[],
                        args: &[],
                        carried: &carried,
                        open: &[],
                    })?;
                }
                Ok(())
            }
        };
        for apart in [false, true] {
            let mut seen = Vec::new();
            pieces_on(apart, decode(100), &mut |piece| {
                seen.push((piece.base, piece.spans[1].start_ns, piece.carried[0]));
                Ok(())
            })
            .unwrap();
            let expected: Vec<_> = (0..100u32)
                .map(|i| (2 * i, 2 * u64::from(i) + 1, i))
                .collect();
            assert_eq!(seen, expected);
            // The writer's error is the one returned, after its third piece.
            let mut written = 0;
            let error = pieces_on(apart, decode(100), &mut |_| {
                written += 1;
                match written {
                    3 => Err(io::Error::other("disk full")),
                    _ => Ok(()),
                }
            })
            .unwrap_err();
            assert_eq!(error.to_string(), "disk full");
            assert_eq!(written, 3);
        }
    }

    #[test]
    fn edges_come_in_order_and_errors_stop_both_sides() {
        let callsite = &SITE;
        // Batches of 1000 edges, as many as make several of the pipeline's batches.
        let decode = |n: u64| {
            move |f: &mut dyn FnMut(&[SpanEdge]) -> io::Result<()>| {
                for batch in 0..n {
                    let edges: Vec<SpanEdge> = (0..1000)
                        .map(|i| match i % 2 {
                            0 => SpanEdge::Begin {
                                callsite,
                                start_ns: batch * 1000 + i,
                                open_at_stop: false,
                            },
                            _ => SpanEdge::End {
                                end_ns: batch * 1000 + i,
                            },
                        })
                        .collect();
                    f(&edges)?;
                }
                Ok(())
            }
        };
        let n = 3 * BATCH_EDGES as u64 / 1000 + 1;
        for apart in [false, true] {
            let mut seen = Vec::new();
            edges_on(apart, decode(n), &mut |edges| {
                seen.extend(edges.iter().map(|edge| match *edge {
                    SpanEdge::Begin { start_ns, .. } => start_ns,
                    SpanEdge::End { end_ns } => end_ns,
                }));
                Ok(())
            })
            .unwrap();
            assert_eq!(seen, (0..n * 1000).collect::<Vec<u64>>(), "apart {apart}");
            // The writer's error is the one returned, after its second batch.
            let mut written = 0;
            let error = edges_on(apart, decode(n), &mut |_| {
                written += 1;
                match written {
                    2 => Err(io::Error::other("disk full")),
                    _ => Ok(()),
                }
            })
            .unwrap_err();
            assert_eq!(error.to_string(), "disk full");
            assert_eq!(written, 2);
            // The decoder's error is the one returned (what it handed over before may not all
            // be written: the output is an error).
            let failing = |f: &mut dyn FnMut(&[SpanEdge]) -> io::Result<()>| {
                decode(n)(f)?;
                Err(io::Error::other("damaged"))
            };
            let mut edges = 0;
            let error = edges_on(apart, failing, &mut |batch| {
                edges += batch.len() as u64;
                Ok(())
            })
            .unwrap_err();
            assert_eq!(error.to_string(), "damaged");
            assert!(edges <= n * 1000, "apart {apart}");
        }
    }
}
