//! The async calls of captures written piece by piece ([`pieces`](super::pieces)): each call
//! is a span sent before its process's threads, the parent of its polls on any thread, and
//! the child of the span around its first poll. Where each stands comes from a first reading
//! of the threads ([`CallPlan`]): the calls in order, with their parent and trace, and the
//! call of each poll slice, read back as the threads are written. A piece's polls then take
//! their call as a parent that is elsewhere ([`Carried::elsewhere`]), the calls theirs.
//!
//! Only where nothing is folded or sampled out ([`Options`]' defaults but for the service
//! name and the trace per process): a call's fate then needs nothing of the spans around it
//! but its trace. Elsewhere, captures with async calls are decoded whole.

use std::io;

use crate::decode::call_plan::{self, CallPlan, NO_PARENT, Node};
use crate::decode::pieces::{Piece, Pieces};
use crate::record::hash::FxHashMap;
use crate::trace::{AsyncSpan, SpanKind, Trace};

use super::carry::{Carried, Carry, Elsewhere};
use super::events;
use super::map::{NONE, Otlp, Start};
use super::options::{Options, Stats};

/// Calls sent a chunk at a time.
const CHUNK: usize = 4096;

/// The plans of the calls of the captures written, a session each, and what names their
/// nodes. The whole trace numbers calls process by process (each process's in order of their
/// start): sessions of processes of their own each give a run of them.
pub(super) struct Calls {
    /// By process.
    sessions: Vec<Session>,
}

/// The plan of the calls of one session ([`CallPlan`]), and what names its nodes.
struct Session {
    plan: CallPlan,
    /// The index in the trace of each thread the plan names.
    threads: Vec<usize>,
    /// The process of the calls.
    process: u32,
    /// The index among the trace's calls of its first.
    offset: u64,
}

impl Calls {
    /// The plans of `pieces`' calls, when `options` fold and sample nothing and one can be
    /// made of each session, each of a process of its own; `None` else (an error making one
    /// too: the captures are then decoded whole).
    pub(super) fn of(pieces: &Pieces<'_>, options: &Options) -> Option<Self> {
        let plain = options.min_duration_ns == 0
            && options.max_depth.is_none()
            && options.sample_roots == 1;
        if !plain {
            return None;
        }
        let trace = crate::decode::pieces::SpanSource::trace(pieces);
        let mut sessions = Vec::new();
        for &capture in pieces.call_captures() {
            let (plan, threads) = pieces.plan_calls(capture).ok()??;
            let process = trace.threads.get(*threads.first()?)?.process;
            sessions.push(Session {
                plan,
                threads,
                process,
                offset: 0,
            });
        }
        sessions.sort_by_key(|s| s.process);
        let mut offset = 0;
        for session in &mut sessions {
            session.offset = offset;
            offset += session.plan.count;
        }
        if sessions.windows(2).any(|w| w[0].process == w[1].process) {
            return None;
        }
        Some(Self { sessions })
    }

    /// How many calls (numbered before every span of the threads).
    pub(super) fn count(&self) -> u32 {
        self.sessions.iter().map(|s| s.plan.count as u32).sum()
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
        match self.sessions.iter().find(|s| s.process == process) {
            Some(session) => session.send(trace, (bases, options), stats, each),
            None => Ok(()),
        }
    }

    /// The polls of thread `thread` (of the trace) with their calls, when it has some.
    pub(super) fn thread(&self, thread: usize) -> Option<ThreadPolls<'_>> {
        let (session, at) = self.sessions.iter().find_map(|s| {
            let at = s.threads.binary_search(&thread).ok()?;
            Some((s, at))
        })?;
        Some(ThreadPolls {
            calls: session,
            polls: session.plan.polls(at),
            open: FxHashMap::default(),
        })
    }
}

impl Session {
    /// The index in the whole trace of `node`; `bases`: of each thread's first span.
    fn global(&self, node: Node, bases: &[u32]) -> u64 {
        match self.plan.node_of(node) {
            Ok(call) => self.offset + call,
            Err((thread, index)) => {
                let base = self.threads.get(thread).map_or(0, |&t| bases[t]);
                u64::from(base) + u64::from(index)
            }
        }
    }

    /// The low half of the `trace_id` of the tree whose root is `node`.
    fn trace_low(&self, node: Node, bases: &[u32], options: &Options) -> u64 {
        match options.trace_per_process {
            true => (1 << 63) | u64::from(self.process),
            false => self.global(node, bases) + 1,
        }
    }

    /// Sends every call, in order, a chunk at a time, each mapped and handed to `each`;
    /// counts them in `stats`.
    fn send(
        &self,
        trace: &Trace,
        (bases, options): (&[u32], &Options),
        stats: &mut Stats,
        each: &mut dyn FnMut(&Otlp<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut chunk: Vec<(AsyncSpan, Node, Node)> = Vec::with_capacity(CHUNK);
        let mut first = self.offset as u32;
        let mut send = |chunk: &mut Vec<(AsyncSpan, Node, Node)>, first: u32| {
            let mut mini = events::frame(trace);
            let mut carried = Carried::default();
            for (at, (call, parent, root)) in (0..).zip(chunk.iter()) {
                mini.async_spans.push(call.clone());
                carried.global.push(first + at);
                carried.seeds.push(Carry {
                    rep: at,
                    trace: self.trace_low(*root, bases, options),
                    depth: 0,
                    folded_count: 0,
                    folded_ns: 0,
                });
                if *parent != NO_PARENT {
                    let k = carried.elsewhere.len() as u32;
                    carried.elsewhere.push(Elsewhere {
                        global: self.global(*parent, bases),
                        trace: NONE.into(),
                    });
                    carried.parents.push((at, k));
                }
            }
            let otlp = Otlp::with_carried(&mini, options, Start::default(), carried);
            stats.sent += chunk.len() as u64;
            chunk.clear();
            each(&otlp)
        };
        self.plan.each_call(&mut |call, parent, root| {
            chunk.push((call.clone(), parent, root));
            if chunk.len() == CHUNK {
                send(&mut chunk, first)?;
                first += CHUNK as u32;
            }
            Ok(())
        })?;
        if !chunk.is_empty() {
            send(&mut chunk, first)?;
        }
        Ok(())
    }
}

/// One thread's polls with their calls, piece by piece ([`Calls::thread`]).
pub(super) struct ThreadPolls<'c> {
    calls: &'c Session,
    polls: call_plan::Polls<'c>,
    /// The polls open at the end of the last piece (by index in the thread), with theirs.
    open: FxHashMap<u32, (u32, Node)>,
}

impl ThreadPolls<'_> {
    /// Gives each poll of `piece` its call as a parent elsewhere in `carried`.
    pub(super) fn attach(
        &mut self,
        piece: Piece<'_>,
        (bases, options): (&[u32], &Options),
        carried: &mut Carried,
    ) -> io::Result<()> {
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
            let Some((call, root)) = found else {
                continue;
            };
            if piece.is_open(i) {
                open.insert(index, (call, root));
            }
            let k = *stands.entry(call).or_insert_with(|| {
                carried.elsewhere.push(Elsewhere {
                    global: self.calls.offset + self.calls.plan.call_index(call),
                    trace: self.calls.trace_low(root, bases, options),
                });
                carried.elsewhere.len() as u32 - 1
            });
            carried.parents.push((i, k));
        }
        self.open = open;
        Ok(())
    }
}
