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

/// The plan of the calls of the captures written ([`CallPlan`]), and what names its nodes.
pub(super) struct Calls {
    plan: CallPlan,
    /// The index in the trace of each thread the plan names.
    threads: Vec<usize>,
    /// The process of the calls.
    pub(super) process: u32,
}

impl Calls {
    /// The plan of `pieces`' calls, when `options` fold and sample nothing and one can be
    /// made; `None` else (an error making it too: the captures are then decoded whole).
    pub(super) fn of(pieces: &Pieces<'_>, options: &Options) -> Option<Self> {
        let plain = options.min_duration_ns == 0
            && options.max_depth.is_none()
            && options.sample_roots == 1;
        if !plain {
            return None;
        }
        let (plan, threads) = pieces.plan_calls().ok()??;
        let trace = crate::decode::pieces::SpanSource::trace(pieces);
        let process = trace.threads.get(*threads.first()?)?.process;
        Some(Self {
            plan,
            threads,
            process,
        })
    }

    /// How many calls (numbered before every span of the threads).
    pub(super) fn count(&self) -> u32 {
        self.plan.count as u32
    }

    /// The index in the whole trace of `node`; `bases`: of each thread's first span.
    fn global(&self, node: Node, bases: &[u32]) -> u64 {
        match self.plan.node_of(node) {
            Ok(call) => call,
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
    pub(super) fn send(
        &self,
        trace: &Trace,
        (bases, options): (&[u32], &Options),
        stats: &mut Stats,
        each: &mut dyn FnMut(&Otlp<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut chunk: Vec<(AsyncSpan, Node, Node)> = Vec::with_capacity(CHUNK);
        let mut first = 0u32;
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

    /// The polls of thread `thread` (of the trace) with their calls, when it has some.
    pub(super) fn thread(&self, thread: usize) -> Option<ThreadPolls<'_>> {
        let at = self.threads.binary_search(&thread).ok()?;
        Some(ThreadPolls {
            calls: self,
            polls: self.plan.polls(at),
            open: FxHashMap::default(),
        })
    }
}

/// One thread's polls with their calls, piece by piece ([`Calls::thread`]).
pub(super) struct ThreadPolls<'c> {
    calls: &'c Calls,
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
                    global: self.calls.plan.call_index(call),
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
