//! The async calls of several sessions handed over as [`Trace::from_captures`] merges them:
//! each session's calls come in the order they began (from its own reading of its threads,
//! [`call_stream::each_call_in_order`](super::call_stream)), and the merged trace puts them
//! all in order of their start, ties in the order of the sessions (a stable sort of the
//! sessions' calls one after the other). So the streams are read at once, each on a thread
//! of its own handing its calls over in short batches, and merged here by (start, session):
//! what it holds more is a batch or two a session.
//!
//! [`Trace::from_captures`]: crate::trace::Trace::from_captures

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::sync::mpsc;
use std::thread::ScopedJoinHandle;

use crate::record::registry::Untracked;
use crate::trace::AsyncSpan;

/// Calls a stream hands over at once.
const BATCH: usize = 256;

/// A session's calls (or what stands for each, [`Started`]), handed to its callback in the
/// order they began; stops at the first error of the callback.
pub(crate) type Stream<'a, T = AsyncSpan> =
    Box<dyn FnOnce(&mut dyn FnMut(&T) -> io::Result<()>) -> io::Result<()> + Send + 'a>;

/// What a merged stream holds: a call, or something that goes with one.
pub(crate) trait Started: Clone + Send {
    /// The start of its call (ns).
    fn start_ns(&self) -> u64;
}

impl Started for AsyncSpan {
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
}

/// Hands the calls of `streams` to `f` with their index in the merged order: by start, of
/// one start those of the earlier stream first, each stream's in its order (as
/// `merge::sort_by_start` orders the calls of traces appended one after the other). Stops at
/// the first error of `f` or of a stream; an error too when a stream's calls do not come in
/// order of their start (they could not be merged as the trace sorts them).
pub(super) fn each_merged(
    streams: Vec<Stream<'_>>,
    f: &mut dyn FnMut(usize, &AsyncSpan) -> io::Result<()>,
) -> io::Result<()> {
    each_merged_of(streams, &mut |id, _, call| f(id, call))
}

/// [`each_merged`] of streams of any [`Started`]: `f` takes each with its index in the
/// merged order and its stream's.
pub(crate) fn each_merged_of<T: Started>(
    streams: Vec<Stream<'_, T>>,
    f: &mut dyn FnMut(usize, usize, &T) -> io::Result<()>,
) -> io::Result<()> {
    if streams.len() <= 1 {
        let mut id = 0;
        for stream in streams {
            stream(&mut |call| {
                f(id, 0, call)?;
                id += 1;
                Ok(())
            })?;
        }
        return Ok(());
    }
    std::thread::scope(|s| {
        let mut feeds = Vec::with_capacity(streams.len());
        for (at, stream) in streams.into_iter().enumerate() {
            let (send, calls) = mpsc::sync_channel::<Vec<T>>(1);
            let helper = std::thread::Builder::new()
                .name(format!("tickscope-calls-{at}"))
                .spawn_scoped(s, move || produce(stream, &send))?;
            feeds.push(Feed {
                calls,
                helper: Some(helper),
                batch: VecDeque::new(),
                last_ns: 0,
            });
        }
        merge(&mut feeds, f)
        // Dropping the feeds ends the helpers' sends (after an error, they stop at their
        // next batch).
    })
}

/// Runs `stream`, sending its calls in batches through `send`.
fn produce<T: Started>(stream: Stream<'_, T>, send: &mpsc::SyncSender<Vec<T>>) -> io::Result<()> {
    // Decoding allocates; that is the profiler's work, not the program's.
    let _untracked = Untracked::enter();
    let stopped = || io::Error::other("the merge of async calls stopped");
    let mut batch = Vec::with_capacity(BATCH);
    stream(&mut |call| {
        batch.push(call.clone());
        if batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            send.send(full).map_err(|_| stopped())?;
        }
        Ok(())
    })?;
    if !batch.is_empty() {
        send.send(batch).map_err(|_| stopped())?;
    }
    Ok(())
}

/// A stream read on a helper thread.
struct Feed<'s, T> {
    calls: mpsc::Receiver<Vec<T>>,
    /// Until the stream ended: its thread, whose result says whether it ended whole.
    helper: Option<ScopedJoinHandle<'s, io::Result<()>>>,
    /// Calls received, not handed over yet.
    batch: VecDeque<T>,
    /// The start of the call handed over last.
    last_ns: u64,
}

impl<T> Feed<'_, T> {
    /// The stream's next call (waiting for it), `None` once it ended; an error when its
    /// helper failed.
    fn next(&mut self) -> io::Result<Option<&T>> {
        if self.batch.is_empty() {
            match self.calls.recv() {
                Ok(batch) => self.batch.extend(batch),
                Err(mpsc::RecvError) => {
                    if let Some(helper) = self.helper.take() {
                        match helper.join() {
                            Ok(ended) => ended?,
                            Err(panic) => std::panic::resume_unwind(panic),
                        }
                    }
                }
            }
        }
        Ok(self.batch.front())
    }
}

/// Hands the calls of `feeds` to `f` in the merged order.
fn merge<T: Started>(
    feeds: &mut [Feed<'_, T>],
    f: &mut dyn FnMut(usize, usize, &T) -> io::Result<()>,
) -> io::Result<()> {
    // The next call of each stream not ended: (start, stream).
    let mut heads = BinaryHeap::with_capacity(feeds.len());
    for (at, feed) in feeds.iter_mut().enumerate() {
        if let Some(call) = feed.next()? {
            heads.push(Reverse((call.start_ns(), at)));
        }
    }
    let mut id = 0;
    while let Some(Reverse((_, at))) = heads.pop() {
        let feed = &mut feeds[at];
        let Some(call) = feed.batch.pop_front() else {
            continue;
        };
        if call.start_ns() < feed.last_ns {
            return Err(io::Error::other(
                "a session's async calls are not in order of their start",
            ));
        }
        feed.last_ns = call.start_ns();
        f(id, at, &call)?;
        id += 1;
        if let Some(next) = feed.next()? {
            heads.push(Reverse((next.start_ns(), at)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::forged_async::{FETCH, HANDLE};

    /// A call of `thread` (its stream, to tell them apart) begun at `start_ns`.
    fn call(thread: u64, start_ns: u64) -> AsyncSpan {
        AsyncSpan {
            callsite: if thread.is_multiple_of(2) {
                &FETCH
            } else {
                &HANDLE
            },
            start_ns,
            end_ns: start_ns + 5,
            process: 0,
            thread,
            end_thread: Some(thread),
            polls: 1,
            busy_ns: 1,
            self_ns: 1,
            open_at_stop: false,
            cut_at_start: false,
        }
    }

    /// A stream of the calls of `thread` begun at `starts`, then `end` (its error, if any).
    fn stream(thread: u64, starts: Vec<u64>, end: Option<&'static str>) -> Stream<'static> {
        Box::new(move |f| {
            for start in starts {
                f(&call(thread, start))?;
            }
            end.map_or(Ok(()), |e| Err(io::Error::other(e)))
        })
    }

    /// The (thread, start) of each call `streams` merge to, with their ids in order.
    fn merged(streams: Vec<Stream<'static>>) -> io::Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        each_merged(streams, &mut |id, call| {
            assert_eq!(id, out.len());
            out.push((call.thread, call.start_ns));
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn calls_are_merged_by_start_the_earlier_stream_first() {
        let out = merged(vec![
            stream(0, vec![1, 3, 3, 7], None),
            stream(1, Vec::new(), None),
            stream(2, vec![0, 3, 7, 9], None),
            stream(3, vec![3], None),
        ])
        .unwrap();
        let want = [
            (2, 0),
            (0, 1),
            (0, 3),
            (0, 3),
            (2, 3),
            (3, 3),
            (0, 7),
            (2, 7),
            (2, 9),
        ];
        assert_eq!(out, want);
        // Many batches a stream, interleaved one by one.
        let evens: Vec<u64> = (0..1_000).map(|n| 2 * n).collect();
        let odds: Vec<u64> = (0..1_000).map(|n| 2 * n + 1).collect();
        let out = merged(vec![stream(0, odds, None), stream(1, evens, None)]).unwrap();
        let starts: Vec<u64> = out.iter().map(|&(_, start)| start).collect();
        assert_eq!(starts, (0..2_000).collect::<Vec<u64>>());
        // One stream: its calls as they come, in its order.
        let out = merged(vec![stream(4, vec![5, 2, 9], None)]).unwrap();
        assert_eq!(out, [(4, 5), (4, 2), (4, 9)]);
    }

    #[test]
    fn errors_of_streams_and_of_the_callback_stop_the_merge() {
        // A stream's error, after calls handed over and past a batch.
        let long: Vec<u64> = (0..600).collect();
        let failed = merged(vec![
            stream(0, long.clone(), None),
            stream(1, vec![2, 4], Some("marks out of order")),
        ]);
        assert_eq!(failed.unwrap_err().to_string(), "marks out of order");
        // A stream whose calls go back in time cannot be merged as the trace sorts them.
        let failed = merged(vec![
            stream(0, vec![1, 2], None),
            stream(1, vec![5, 3], None),
        ]);
        let error = failed.unwrap_err().to_string();
        assert_eq!(
            error,
            "a session's async calls are not in order of their start"
        );
        // The callback's error, while the helpers still have calls to send.
        let mut handed = 0;
        let streams = vec![stream(0, long.clone(), None), stream(1, long, None)];
        let failed = each_merged(streams, &mut |_, _| {
            handed += 1;
            match handed {
                300 => Err(io::Error::other("disk full")),
                _ => Ok(()),
            }
        });
        assert_eq!(failed.unwrap_err().to_string(), "disk full");
        assert_eq!(handed, 300);
    }
}
