//! The scopes of every thread of some captures in the order they started, read as each thread
//! is decoded again a chunk at a time and merged across threads: what a comparison of two
//! runs cuts into time blocks (`tickscope diff`), in memory bounded by the threads (a piece of
//! spans each) and the scopes open at once, not by the captures' size.
//!
//! The order is that of a stable sort of the decoded trace's scopes by start, thread after
//! thread: start time, then thread (in the trace's order), then position in the thread. A
//! merge of the threads gives it when each thread's scopes begin in time order, which
//! [`each_call`] checks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::capture::CaptureThread;
use crate::record::registry::Untracked;
use crate::trace::{Span, SpanKind};

use super::Shared;
use super::async_spans::Mark;
use super::links::{Keep, Links};
use super::memory::{Keeps, RawMemory};
use super::pair::Pairing;
use super::pieces::{Piece, Pieces};
use super::summary;

/// A scope of [`each_call`]: where it began in the order of starts, or where its times came
/// when it was still open there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// The next scope in the order of starts: its key (thread, index in the thread), start
    /// (ns), name, and (duration, self time) when it has ended, else `None` (an
    /// [`Call::End`] with its key gives them later).
    Begin {
        key: (u32, u32),
        start: u64,
        name: &'static str,
        times: Option<(u64, u64)>,
    },
    /// The (duration, self time) of a scope handed over open.
    End { key: (u32, u32), times: (u64, u64) },
}

/// The scopes of `pieces` (not the polls of async calls, whose calls are read apart:
/// [`SpanSource::each_streamed_call`](super::pieces::SpanSource)) handed to `f` in the order
/// of their starts. `false` when a thread's
/// scopes do not begin in time order (which only a forged file gives): the order merged is not
/// the decoded trace's, and what `f` was given is to be dropped.
pub(crate) fn each_call(pieces: &Pieces<'_>, f: &mut dyn FnMut(Call)) -> bool {
    let _untracked = Untracked::enter();
    let threads: Vec<_> = (0..pieces.thread_count())
        .filter_map(|t| Some((t, pieces.source_of(t)?)))
        .collect();
    let shared: Vec<Shared<'_>> = (threads.iter())
        .map(|(_, source)| Shared::new(source.capture, false, false))
        .collect();
    let mut stores: Vec<(Vec<Mark>, Links, Vec<RawMemory>)> = (threads.iter())
        .map(|_| (Vec::new(), Links::keeping(Keep::Nothing), Vec::new()))
        .collect();
    let mut feeds: Vec<Feed<'_, '_>> = (threads.iter().zip(&shared).zip(&mut stores))
        .map(|((&(t, ref source), shared), (marks, links, events))| {
            let mut pairing = Pairing::new(
                shared.callsites,
                (&shared.converter, shared.probe),
                (t, source.thread.id),
                marks,
                links,
                source.capture.memory.is_on().then_some(events),
                summary::WINDOW,
            );
            pairing.memory_keeps(Keeps::Figures);
            if source.carry {
                pairing.ends_open(source.open_at_end.to_vec());
            }
            if let Some(polls) = &source.enter_polls {
                pairing.enter_polls(polls.clone());
            }
            shared.start(&mut pairing, source.thread);
            Feed {
                thread: t as u32,
                shared,
                source: source.thread,
                carry: source.carry,
                pairing,
                chunk: 0,
                keep: false,
                closed: false,
                queue: VecDeque::new(),
                ends: Vec::new(),
                last_start: 0,
                in_order: true,
            }
        })
        .collect();
    let mut heads: BinaryHeap<Reverse<(u64, u32, u32, usize)>> = BinaryHeap::new();
    for (at, feed) in feeds.iter_mut().enumerate() {
        if let Some((start, index)) = feed.next() {
            heads.push(Reverse((start, feed.thread, index, at)));
        }
    }
    while let Some(Reverse((_, _, _, at))) = heads.pop() {
        let feed = &mut feeds[at];
        let Some(begun) = feed.queue.pop_front() else {
            continue;
        };
        f(Call::Begin {
            key: (feed.thread, begun.index),
            start: begun.start,
            name: begun.name,
            times: begun.times,
        });
        if let Some((start, index)) = feed.next() {
            heads.push(Reverse((start, feed.thread, index, at)));
        }
        for (index, times) in feed.ends.drain(..) {
            f(Call::End {
                key: (feed.thread, index),
                times,
            });
        }
        if !feed.in_order {
            return false;
        }
    }
    feeds.iter().all(|feed| feed.in_order)
}

/// A scope begun, waiting for its turn in the merge.
struct Begun {
    index: u32,
    start: u64,
    name: &'static str,
    times: Option<(u64, u64)>,
}

/// A thread read again a chunk at a time for its scopes.
struct Feed<'s, 'c> {
    /// Its index in the trace.
    thread: u32,
    shared: &'s Shared<'c>,
    source: &'c CaptureThread,
    carry: bool,
    pairing: Pairing<'s>,
    /// The next chunk to read.
    chunk: usize,
    /// Whether the last record read counted ([`Shared::for_each_run_of`]).
    keep: bool,
    /// Every chunk was read and what was open closed.
    closed: bool,
    /// Its scopes begun and not yet merged, in the order they began.
    queue: VecDeque<Begun>,
    /// The times of scopes handed over open and merged already: (index, times).
    ends: Vec<(u32, (u64, u64))>,
    /// The start of the last scope queued.
    last_start: u64,
    /// Its scopes began in time order so far.
    in_order: bool,
}

impl Feed<'_, '_> {
    /// The start and index of the thread's next scope, reading chunks until one comes; `None`
    /// when the thread has no more.
    fn next(&mut self) -> Option<(u64, u32)> {
        while self.queue.is_empty() && !self.closed {
            if self.chunk < self.source.chunks.len() {
                self.read_chunk();
            } else {
                // As `Pieces::each_piece` closes what is still open.
                let _ = self.pairing.close_rest(self.shared.end_of(self.source));
                let Self {
                    pairing,
                    queue,
                    ends,
                    last_start,
                    in_order,
                    ..
                } = self;
                pairing.drain_piece(|piece| take(piece, queue, ends, last_start, in_order));
                self.closed = true;
            }
        }
        self.queue.front().map(|b| (b.start, b.index))
    }

    /// Reads the next chunk, handing over a piece as `Pieces::each_piece` does.
    fn read_chunk(&mut self) {
        let Self {
            shared,
            source,
            carry,
            pairing,
            chunk,
            keep,
            queue,
            ends,
            last_start,
            in_order,
            ..
        } = self;
        let carry = *carry;
        shared.for_each_run_of(source, *chunk, keep, |records| {
            for &record in records {
                pairing.push(record);
                if pairing.piece_due(carry) {
                    pairing.drain_piece(|piece| take(piece, queue, ends, last_start, in_order));
                }
            }
        });
        // The marks of async calls are matched apart (`SpanSource::each_streamed_call`).
        pairing.marks_mut().clear();
        *chunk += 1;
    }
}

/// The (duration, self time) of `span`.
fn times(span: &Span) -> (u64, u64) {
    (span.duration_ns(), span.self_ns())
}

/// Queues the scopes `piece` began and gives the times of those it carried that end in it:
/// to their entry in `queue` while it waits there, else to `ends`.
fn take(
    piece: Piece<'_>,
    queue: &mut VecDeque<Begun>,
    ends: &mut Vec<(u32, (u64, u64))>,
    last_start: &mut u64,
    in_order: &mut bool,
) {
    for (at, span) in piece.spans.iter().enumerate() {
        let at = at as u32;
        if span.kind != SpanKind::Scope {
            continue;
        }
        let index = piece.index(at);
        let open = piece.is_open(at);
        if piece.is_carried(at) {
            if open {
                continue;
            }
            match queue.binary_search_by_key(&index, |b| b.index) {
                Ok(waiting) => queue[waiting].times = Some(times(span)),
                Err(_) => ends.push((index, times(span))),
            }
            continue;
        }
        if span.start_ns < *last_start {
            *in_order = false;
        }
        *last_start = span.start_ns;
        queue.push_back(Begun {
            index,
            start: span.start_ns,
            name: span.name(),
            times: (!open).then(|| times(span)),
        });
    }
}
