//! The async calls of captures written piece by piece ([`pieces`](super::pieces)): each call
//! is a span sent before its process's threads, the parent of its polls on any thread, and
//! the child of the span around its first poll. Where each stands comes from a first reading
//! of each session's threads ([`CallPlan`]): the calls in order, with their parent and trace,
//! and the call of each poll slice, read back as the threads are written. A piece's polls
//! then take their call as a parent that is elsewhere ([`Carried::elsewhere`]), the calls
//! theirs.
//!
//! The whole trace numbers the calls process by process, each process's in order of their
//! start, of one start those of the earlier session first: a call's number is its process's
//! first, plus its index in its session, plus the calls of the process's other sessions
//! before it (counted in their plans by start).
//!
//! Only where nothing is folded or sampled out ([`Options`]' defaults but for the service
//! name and the trace per process): a call's fate then needs nothing of the spans around it
//! but its trace. Elsewhere, captures with async calls are decoded whole.

use std::io;

use crate::decode::call_merge::{self, Started, Stream};
use crate::decode::call_plan::{CallPlan, NO_PARENT, Node, Root};
use crate::decode::pieces::{Piece, Pieces};
use crate::record::hash::FxHashMap;
use crate::trace::{AsyncSpan, SpanKind, Trace};

use super::carry::{Carried, Carry, Elsewhere};
use super::events;
use super::map::{NONE, Otlp, Start};
use super::options::{Options, Stats};

/// Calls sent a chunk at a time.
const CHUNK: usize = 4096;

/// A call to send: of a session (its index among its process's), with its parent and trace.
type Call = (AsyncSpan, usize, Node, Root);

/// The plans of the calls of the captures written, a session each ([`CallPlan`]), by process.
pub(super) struct Calls {
    processes: Vec<Process>,
}

/// The sessions with calls of one process.
struct Process {
    process: u32,
    /// The index among the trace's calls of its first call.
    offset: u64,
    /// In the order of the captures.
    sessions: Vec<Session>,
}

/// The plan of the calls of one session, and the index in the trace of each thread it names.
struct Session {
    plan: CallPlan,
    threads: Vec<usize>,
}

impl Calls {
    /// The plans of `pieces`' calls, when `options` fold and sample nothing and one can be
    /// made of each session; `None` else (an error making one too: the captures are then
    /// decoded whole).
    pub(super) fn of(pieces: &Pieces<'_>, options: &Options) -> Option<Self> {
        let plain = options.min_duration_ns == 0
            && options.max_depth.is_none()
            && options.sample_roots == 1;
        if !plain {
            return None;
        }
        let trace = crate::decode::pieces::SpanSource::trace(pieces);
        let mut processes: Vec<Process> = Vec::new();
        for &capture in pieces.call_captures() {
            let (plan, threads) = pieces.plan_calls(capture).ok()??;
            let process = trace.threads.get(*threads.first()?)?.process;
            let session = Session { plan, threads };
            match processes.iter_mut().find(|p| p.process == process) {
                Some(p) => p.sessions.push(session),
                None => processes.push(Process {
                    process,
                    offset: 0,
                    sessions: vec![session],
                }),
            }
        }
        processes.sort_by_key(|p| p.process);
        let mut offset = 0;
        for process in &mut processes {
            process.offset = offset;
            offset += process.sessions.iter().map(|s| s.plan.count).sum::<u64>();
        }
        Some(Self { processes })
    }

    /// How many calls (numbered before every span of the threads).
    pub(super) fn count(&self) -> u32 {
        let sessions = self.processes.iter().flat_map(|p| &p.sessions);
        sessions.map(|s| s.plan.count as u32).sum()
    }

    /// Sends the calls of process `process`, in order, a chunk at a time, each mapped and
    /// handed to `each`; counts them in `stats`.
    pub(super) fn send(
        &self,
        process: u32,
        trace: &Trace,
        (bases, options): (&[u32], &Options),
        stats: &mut Stats,
        each: &mut dyn FnMut(&Otlp<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        match self.processes.iter().find(|p| p.process == process) {
            Some(p) => p.send(trace, (bases, options), stats, each),
            None => Ok(()),
        }
    }

    /// The polls of thread `thread` (of the trace) with their calls, when it has some.
    pub(super) fn thread(&self, thread: usize) -> Option<ThreadPolls<'_>> {
        self.processes.iter().find_map(|process| {
            let (session, at) = (0..process.sessions.len()).find_map(|s| {
                let at = process.sessions[s].threads.binary_search(&thread).ok()?;
                Some((s, at))
            })?;
            Some(ThreadPolls {
                process,
                session,
                polls: process.sessions[session].plan.polls(at),
                open: FxHashMap::default(),
            })
        })
    }
}

impl Process {
    /// The index among the trace's calls of the call at `local` in session `session`'s,
    /// starting at `start`.
    fn call(&self, session: usize, local: u64, start: u64) -> io::Result<u64> {
        let mut index = self.offset + local;
        for (s, other) in self.sessions.iter().enumerate() {
            if s != session {
                // Of one start, those of the earlier session first.
                index += other.plan.count_before(start, s < session)?;
            }
        }
        Ok(index)
    }

    /// The index in the whole trace of `node` of session `session` (`start`: a call's);
    /// `bases`: of each thread's first span.
    fn global(&self, session: usize, (node, start): Root, bases: &[u32]) -> io::Result<u64> {
        let plan = &self.sessions[session];
        match plan.plan.node_of(node) {
            Ok(call) => self.call(session, call, start),
            Err((thread, index)) => {
                let base = plan.threads.get(thread).map_or(0, |&t| bases[t]);
                Ok(u64::from(base) + u64::from(index))
            }
        }
    }

    /// The low half of the `trace_id` of the tree whose root is `root`, of session `session`.
    fn trace_low(
        &self,
        session: usize,
        root: Root,
        (bases, options): (&[u32], &Options),
    ) -> io::Result<u64> {
        match options.trace_per_process {
            true => Ok((1 << 63) | u64::from(self.process)),
            false => Ok(self.global(session, root, bases)? + 1),
        }
    }

    /// Sends its calls in the order of the trace (merged by start, of one start the earlier
    /// session's first), a chunk at a time, each mapped and handed to `each`; counts them in
    /// `stats`.
    fn send(
        &self,
        trace: &Trace,
        at: (&[u32], &Options),
        stats: &mut Stats,
        each: &mut dyn FnMut(&Otlp<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut chunk: Vec<Call> = Vec::with_capacity(CHUNK);
        let mut first = self.offset;
        let mut flush = |chunk: &mut Vec<Call>, first: &mut u64| {
            self.send_chunk(trace, at, (chunk, *first), each)?;
            stats.sent += chunk.len() as u64;
            *first += chunk.len() as u64;
            chunk.clear();
            Ok::<_, io::Error>(())
        };
        let mut add = |call: &AsyncSpan, session: usize, parent: Node, root: Root| {
            chunk.push((call.clone(), session, parent, root));
            if chunk.len() == CHUNK {
                flush(&mut chunk, &mut first)?;
            }
            Ok(())
        };
        if let [session] = &self.sessions[..] {
            (session.plan).each_call(&mut |call, parent, root| add(call, 0, parent, root))?;
        } else {
            self.merged(&mut add)?;
        }
        if !chunk.is_empty() {
            flush(&mut chunk, &mut first)?;
        }
        Ok(())
    }

    /// Maps `chunk`, calls numbered from `first` in the trace, and hands it to `each`.
    fn send_chunk(
        &self,
        trace: &Trace,
        at: (&[u32], &Options),
        (chunk, first): (&[Call], u64),
        each: &mut dyn FnMut(&Otlp<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut mini = events::frame(trace);
        let mut carried = Carried::default();
        for (local, (call, session, parent, root)) in (0..).zip(chunk) {
            mini.async_spans.push(call.clone());
            carried.global.push((first + u64::from(local)) as u32);
            carried.seeds.push(Carry {
                rep: local,
                trace: self.trace_low(*session, *root, at)?,
                depth: 0,
                folded_count: 0,
                folded_ns: 0,
            });
            if *parent != NO_PARENT {
                carried
                    .parents
                    .push((local, carried.elsewhere.len() as u32));
                carried.elsewhere.push(Elsewhere {
                    global: self.global(*session, (*parent, 0), at.0)?,
                    trace: NONE.into(),
                });
            }
        }
        each(&Otlp::with_carried(&mini, at.1, Start::default(), carried))
    }

    /// Hands the calls of its sessions to `f` merged in the order of the trace: by start, of
    /// one start the earlier session's first (each session's read on a thread of its own).
    fn merged(
        &self,
        f: &mut dyn FnMut(&AsyncSpan, usize, Node, Root) -> io::Result<()>,
    ) -> io::Result<()> {
        let streams = (self.sessions.iter())
            .map(|session| -> Stream<'_, Planned> {
                Box::new(move |f| {
                    session.plan.each_call(&mut |call, parent, root| {
                        f(&Planned(call.clone(), parent, root))
                    })
                })
            })
            .collect();
        call_merge::each_merged_of(streams, &mut |_, session, Planned(call, parent, root)| {
            f(call, session, *parent, *root)
        })
    }
}

/// A call with its parent and trace, as its session's plan gives it.
#[derive(Clone)]
struct Planned(AsyncSpan, Node, Root);

impl Started for Planned {
    fn start_ns(&self) -> u64 {
        self.0.start_ns
    }
}

/// One thread's polls with their calls, piece by piece ([`Calls::thread`]).
pub(super) struct ThreadPolls<'c> {
    process: &'c Process,
    /// Its session among its process's.
    session: usize,
    polls: crate::decode::call_plan::Polls<'c>,
    /// The polls open at the end of the last piece (by index in the thread), with theirs.
    open: FxHashMap<u32, ((u32, u64), Root)>,
}

impl ThreadPolls<'_> {
    /// Gives each poll of `piece` its call as a parent elsewhere in `carried`.
    pub(super) fn attach(
        &mut self,
        piece: Piece<'_>,
        at: (&[u32], &Options),
        carried: &mut Carried,
    ) -> io::Result<()> {
        let (process, session) = (self.process, self.session);
        let mut stands: FxHashMap<u32, u32> = FxHashMap::default();
        let mut open = FxHashMap::default();
        for (i, span) in (0..).zip(piece.spans) {
            if !matches!(span.kind, SpanKind::Poll { .. }) {
                continue;
            }
            let index = piece.index(i);
            let found = match piece.is_carried(i) {
                true => self.open.get(&index).copied(),
                false => self.polls.find(index)?,
            };
            let Some(((rank, start), root)) = found else {
                continue;
            };
            if piece.is_open(i) {
                open.insert(index, ((rank, start), root));
            }
            let k = match stands.get(&rank) {
                Some(&k) => k,
                None => {
                    let call = process.sessions[session].plan.call_index(rank);
                    carried.elsewhere.push(Elsewhere {
                        global: process.call(session, call, start)?,
                        trace: process.trace_low(session, root, at)?,
                    });
                    let k = carried.elsewhere.len() as u32 - 1;
                    stands.insert(rank, k);
                    k
                }
            };
            carried.parents.push((i, k));
        }
        self.open = open;
        Ok(())
    }
}
