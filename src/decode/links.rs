//! Links: scopes that followed from a [`Link`](crate::Link), matched to where the link was
//! captured by (thread id, sequence number), across threads; and `tracing` spans that follow
//! from spans not entered where `follows_from` was called, matched by span id.

use std::sync::Arc;

use crate::record::callsite::Callsite;
use crate::record::hash::{FxHashMap, FxHashSet};

use crate::trace::{Flow, SpanRef, ThreadTrace};

/// The callsite of each flow's origin (at the same index), when it has one: what a table split
/// by origin labels a follower with, without the origin's span.
pub(crate) type OriginSites = Vec<Option<&'static Callsite>>;

/// The end and callsite of spans, by (thread, span index in the thread).
pub(super) type Ends = FxHashMap<(u32, u32), (u64, &'static Callsite)>;

/// Where a link was captured: the innermost span open then, the time, and that span's
/// callsite.
pub(super) type Origin = (Option<SpanRef>, u64, Option<&'static Callsite>);

/// Which link captures and followers pairing keeps.
#[derive(Clone, Debug, Default)]
pub(super) enum Keep {
    /// Every one (a trace decoded whole).
    #[default]
    All,
    /// Every follower, and the captures up to this many: past them, none, and the thread is
    /// marked [`Links::overflowed`] (a first pass, which reads the thread again for the
    /// captures followed: a `scope!(.., seq)` captures a link each, most never followed).
    Upto(usize),
    /// The captures of these (thread id, sequence number) only, and no follower.
    Only(Arc<FxHashSet<(u64, u32)>>),
    /// Nothing (the links of pieces, matched by the first pass).
    Nothing,
}

/// Links seen while pairing, matched once every thread is in.
#[derive(Default)]
pub(super) struct Links {
    /// What is kept.
    pub(super) keep: Keep,
    /// More captures than [`Keep::Upto`] allows were seen: none is kept.
    pub(super) overflowed: bool,
    /// Captures: (thread id, sequence number) -> (innermost open span, time, its callsite).
    pub(super) origins: FxHashMap<(u64, u32), Origin>,
    /// Scopes that follow from a link: (the scope, link thread id, sequence number).
    pub(super) followers: Vec<(SpanRef, u64, u32)>,
    /// Whether to keep [`Links::tracing_enters`] and [`Links::tracing_closes`]: only while
    /// the capture holds a `follows_from` to resolve with them.
    pub(super) tracing_uses: bool,
    /// With [`Links::tracing_uses`], the span ids whose enters and closes are kept: all of
    /// them when `None`, else those that a `follows_from` names (a second reading of the
    /// threads, whose first one summed their spans and kept the `follows_from`s only).
    pub(super) tracing_named: Option<Arc<FxHashSet<u64>>>,
    /// Each enter of a `tracing` span: (span id, start, its slice).
    pub(super) tracing_enters: Vec<(u64, u64, SpanRef)>,
    /// Each close of a `tracing` span: (span id, time).
    pub(super) tracing_closes: Vec<(u64, u64)>,
    /// `tracing` spans that followed from spans not entered on the calling thread: (time,
    /// the effect's span id, the cause's span id).
    pub(super) tracing_follows: Vec<(u64, u64, u64)>,
}

/// Which enter of a `tracing` span a `follows_from` stands for, when none is in progress at
/// its time.
#[derive(Clone, Copy)]
enum Prefer {
    /// The next enter (the effect: the work that follows), else the last one before.
    Next,
    /// The last enter before (the cause: the work done), else the next one.
    Last,
}

impl Links {
    /// True when the enters and closes of `tracing` span `id` are kept.
    #[inline]
    pub(super) fn keeps_uses_of(&self, id: u64) -> bool {
        self.tracing_uses && self.tracing_named.as_ref().is_none_or(|n| n.contains(&id))
    }

    /// Links that keep what `keep` says.
    pub(super) fn keeping(keep: Keep) -> Self {
        Self {
            keep,
            ..Self::default()
        }
    }

    /// True when the capture of link `key` (thread id, sequence number) is to be kept; past
    /// [`Keep::Upto`]'s count, lets go of those kept.
    pub(super) fn keeps(&mut self, key: &(u64, u32)) -> bool {
        match &self.keep {
            Keep::All => true,
            Keep::Upto(_) if self.overflowed => false,
            Keep::Upto(most) if self.origins.len() < *most => true,
            Keep::Upto(_) => {
                self.overflowed = true;
                self.origins = FxHashMap::default();
                false
            }
            Keep::Only(keys) => keys.contains(key),
            Keep::Nothing => false,
        }
    }

    /// True when the scopes that follow from links are to be kept.
    pub(super) fn keeps_followers(&self) -> bool {
        matches!(self.keep, Keep::All | Keep::Upto(_))
    }

    /// Adds the links another thread saw, after this one's.
    pub(super) fn extend(&mut self, other: Self) {
        self.origins.extend(other.origins);
        self.followers.extend(other.followers);
        self.tracing_enters.extend(other.tracing_enters);
        self.tracing_closes.extend(other.tracing_closes);
        self.tracing_follows.extend(other.tracing_follows);
    }

    /// The flows: the links matched to their captures, then the `tracing` `follows_from`s
    /// matched to their spans in `threads`, or, when the threads' spans were not kept, with
    /// `ends`: the end and callsite of each span entered, by (thread, span); and the
    /// callsite of each flow's origin.
    pub(super) fn matched(
        self,
        threads: &[ThreadTrace],
        ends: Option<&Ends>,
    ) -> (Vec<Flow>, OriginSites) {
        let Links {
            keep: _,
            overflowed: _,
            origins,
            followers,
            tracing_uses: _,
            tracing_named: _,
            tracing_enters,
            tracing_closes,
            mut tracing_follows,
        } = self;
        let (mut flows, mut sites): (Vec<Flow>, OriginSites) = followers
            .into_iter()
            .map(|(follower, origin_thread, seq)| {
                let found = origins.get(&(origin_thread, seq));
                let flow = Flow {
                    seq,
                    origin_thread,
                    origin: found.and_then(|&(span, _, _)| span),
                    origin_ns: found.map(|&(_, ns, _)| ns),
                    follower,
                };
                (flow, found.and_then(|&(_, _, site)| site))
            })
            .unzip();
        if tracing_follows.is_empty() {
            return (flows, sites);
        }
        // The uses of each span id named by a `follows_from`, in time order: its enters
        // (`Some`) and closes (`None`); at equal times enters first (a span is entered before
        // it closes).
        let named: FxHashSet<u64> = tracing_follows
            .iter()
            .flat_map(|&(_, effect, cause)| [effect, cause])
            .collect();
        let mut uses: FxHashMap<u64, Vec<(u64, Option<SpanRef>)>> = FxHashMap::default();
        let enters = tracing_enters
            .into_iter()
            .map(|(id, ns, at)| (id, ns, Some(at)));
        let closes = tracing_closes.into_iter().map(|(id, ns)| (id, ns, None));
        for (id, ns, at) in enters.chain(closes) {
            if named.contains(&id) {
                uses.entry(id).or_default().push((ns, at));
            }
        }
        for list in uses.values_mut() {
            list.sort_by_key(|&(ns, at)| (ns, at.is_none()));
        }
        // The end and callsite of a span entered.
        let span_of = |at: SpanRef| {
            if let Some(ends) = ends {
                return ends.get(&(at.thread, at.span)).copied();
            }
            let span = threads
                .get(at.thread as usize)
                .and_then(|t| t.spans.get(at.span as usize));
            span.map(|s| (s.end_ns, s.callsite))
        };
        let end = |at: SpanRef| span_of(at).map_or(0, |(end, _)| end);
        let resolve = |id: u64, ns: u64, prefer: Prefer| -> Option<SpanRef> {
            let list = uses.get(&id)?;
            // The use of the id live at `ns`: after the last close before it, up to the next.
            let from = list[..list.partition_point(|&(t, _)| t < ns)]
                .iter()
                .rposition(|(_, at)| at.is_none())
                .map_or(0, |close| close + 1);
            let life = list[from..]
                .iter()
                .take_while(|(_, at)| at.is_some())
                .filter_map(|&(start, at)| Some((start, at?)));
            let (mut last, mut next) = (None, None);
            for (start, at) in life {
                if start <= ns {
                    if end(at) >= ns {
                        // In progress at the time.
                        return Some(at);
                    }
                    last = Some(at);
                } else if next.is_none() {
                    next = Some(at);
                }
            }
            match prefer {
                Prefer::Next => next.or(last),
                Prefer::Last => last.or(next),
            }
        };
        tracing_follows.sort_by_key(|&(ns, _, _)| ns);
        for (ns, effect, cause) in tracing_follows {
            // A span never entered in the window has no slice to link.
            let Some(follower) = resolve(effect, ns, Prefer::Next) else {
                continue;
            };
            let origin = resolve(cause, ns, Prefer::Last);
            sites.push(origin.and_then(|at| Some(span_of(at)?.1)));
            flows.push(Flow {
                seq: 0,
                origin_thread: origin
                    .and_then(|at| threads.get(at.thread as usize))
                    .map_or(0, |t| t.id),
                origin,
                origin_ns: Some(ns),
                follower,
            });
        }
        (flows, sites)
    }
}
