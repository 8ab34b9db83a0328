//! OTLP/JSON and pushes of sessions recorded for real, with `#[profile] async fn` calls:
//! written from pieces with the whole trace's bytes, or decoded whole (the hostile pass of
//! `export::otlp`'s `hostile_calls_tests`, whose comparisons these use; here because
//! recording takes a session, a later stage than the exports).

use crate::capture::Capture;
use crate::export::otlp::Options;
use crate::export::otlp::hostile_calls_tests::{same_bytes, same_wire};
use crate::trace::Trace;

/// A future pending `0` more times, then ready.
struct Yield(u32);

impl std::future::Future for Yield {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        match self.0 {
            0 => std::task::Poll::Ready(()),
            _ => {
                self.0 -= 1;
                std::task::Poll::Pending
            }
        }
    }
}

/// An async call that yields `i % 3` times, a `parse` scope in its first poll.
#[crate::profile(crate = crate)]
async fn leaf(i: u64) -> u64 {
    {
        let _parse = crate::scope!("parse");
        std::hint::black_box(i);
    }
    Yield((i % 3) as u32).await;
    i
}

/// An async call awaiting `i % 4` [`leaf`] calls, yielding between them.
#[crate::profile(crate = crate)]
async fn request(i: u64) -> u64 {
    let mut sum = 0;
    for k in 0..i % 4 {
        sum += leaf(i + k).await;
        Yield(1).await;
    }
    sum
}

type Task = std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send>>;

/// Records `tasks` [`request`] calls run to their end by `workers` threads taking them from
/// one queue and polling each once before putting it back (its polls hop between threads),
/// the first `open` of them left unfinished at the stop; the capture read back from its bytes.
fn recorded(tasks: u64, workers: usize, open: u64) -> Vec<Capture> {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    let prof = crate::Profiler::builder().current_thread().start();
    let queue: Mutex<VecDeque<(u64, Task)>> = Mutex::new(
        (0..tasks)
            .map(|i| (i, Box::pin(request(i)) as Task))
            .collect(),
    );
    let left: Mutex<Vec<Task>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                prof.join_current_thread();
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                loop {
                    let Some((i, mut task)) = queue.lock().unwrap().pop_front() else {
                        break;
                    };
                    if task.as_mut().poll(&mut cx).is_pending() {
                        match i < open {
                            true => left.lock().unwrap().push(task),
                            false => queue.lock().unwrap().push_back((i, task)),
                        }
                    }
                }
            });
        }
    });
    prof.stop();
    let mut bytes = Vec::new();
    prof.capture().write_to(&mut bytes).unwrap();
    drop(left);
    Capture::from_bytes(&bytes).unwrap()
}

#[test]
fn calls_recorded_on_a_pool_of_threads_are_written_from_pieces() {
    let options = Options::new();
    for (tasks, workers, open) in [(40, 1, 0), (300, 3, 5), (1_200, 4, 0)] {
        let captures = recorded(tasks, workers, open);
        let trace = Trace::from_captures(&captures);
        // (A task left open began its first leaf only.)
        let leaves: u64 = (0..tasks)
            .map(|i| if i < open { (i % 4).min(1) } else { i % 4 })
            .sum();
        assert_eq!(trace.async_spans.len() as u64, tasks + leaves, "{tasks}");
        let what = format!("{tasks} recorded on {workers}");
        // (Two workers may poll at one instant: then decoded whole.)
        let planned = same_bytes(&captures, &options, &what);
        eprintln!("{what}: planned {planned}");
        same_wire(&captures, &Options::new().batch_spans(100), &what);
    }
}

/// Two sessions started on one thread record the same scopes, calls and (with `events`)
/// instants and counter samples, read back from their bytes.
fn one_thread_recorded_twice(events: bool) -> Vec<Capture> {
    let first = crate::Profiler::builder().current_thread().start();
    let second = crate::Profiler::builder().current_thread().start();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut calls: Vec<Option<Task>> = (0..4).map(|i| Some(Box::pin(request(i)) as Task)).collect();
    for round in 0..16 {
        let _outer = crate::scope!("round");
        if events {
            crate::instant!("tick");
            crate::counter!("round", set = round);
        }
        for call in &mut calls {
            if call
                .as_mut()
                .is_some_and(|c| c.as_mut().poll(&mut cx).is_ready())
            {
                *call = None;
            }
        }
    }
    assert!(calls.iter().all(Option::is_none));
    second.stop();
    first.stop();
    [&first, &second]
        .iter()
        .flat_map(|prof| {
            let mut bytes = Vec::new();
            prof.capture().write_to(&mut bytes).unwrap();
            Capture::from_bytes(&bytes).unwrap()
        })
        .collect()
}

/// Two sessions recording one thread: each event is placed on the innermost span open at
/// its time across both (of two as deep, the later session's), by the whole trace as from
/// pieces (then decoded whole); without events, their calls are planned.
#[test]
fn two_sessions_recording_one_thread_are_written_as_decoded() {
    for events in [true, false] {
        let captures = one_thread_recorded_twice(events);
        let trace = Trace::from_captures(&captures);
        assert_eq!(trace.threads.len(), 2);
        assert_eq!(trace.instants.len(), if events { 32 } else { 0 });
        // Four requests and their leaves (0 + 1 + 2 + 3), twice.
        assert_eq!(trace.async_spans.len(), 2 * (4 + 6));
        let planned = same_bytes(&captures, &Options::new(), "two sessions of one thread");
        assert_eq!(planned, !events);
    }
}
