//! A [`Diff`] of captures without their decoded traces: each run's calls of a name summed as
//! its threads are decoded again a chunk at a time, merged in the order the calls started
//! ([`each_call`]), so that the time blocks are those of the whole trace's calls.
//!
//! While a run's scopes fit the table's [exact budget](crate::decode::quantiles::exact_budget)
//! (counted from the records, two a scope), every call's compared time is kept: the diff of
//! the decoded traces, exactly. Past it, each time block's median and each name's median come
//! from log-linear histograms (within
//! [`RELATIVE_ERROR`](crate::decode::quantiles::RELATIVE_ERROR)); calls, totals and the
//! blocks' means stay exact. A block is let go once its calls have all ended, so what a run
//! holds is a few histograms per name and the scopes open at once, not its calls (with
//! `blocks = 0`, every call is a sample, and its time is kept).
//!
//! The calls of `#[profile] async fn`s are counted by the first pass too, and after the
//! scopes handed over in the order they began, matched as the threads are read again
//! ([`SpanSource::each_streamed_call`]): a name is either a scope's or an async call's (else
//! the run is decoded whole), so each name's calls come in start order.

use std::collections::BTreeMap;
use std::io;

use crate::capture::Capture;
use crate::decode::calls::{Call, each_call};
use crate::decode::pieces::{Pieces, SpanSource};
use crate::decode::quantiles::{Durations, Histogram, exact_budget};
use crate::decode::summary::{Calls as SumCalls, Sum, Summary};
use crate::record::hash::FxHashMap;

use super::samples::Calls;

/// An async call as the diff takes it: its start, name, and (duration, self time).
type Async = (u64, &'static str, (u64, u64));

/// Async calls the thread that reads them hands over at a time.
const ASYNC_BATCH: usize = 256;
use super::{Diff, Metric, Options};

impl Diff {
    /// [`Diff::new`] (with `repetitions`, [`Diff::from_repetitions`] of each capture as a
    /// session) of the traces that `base` and `new` decode to, without decoding them whole:
    /// see the [module documentation](self). `None` when a run cannot be read that way
    /// (async calls that cannot be matched as the threads are read again, a name of both
    /// scopes and async calls, or a thread whose scopes do not begin in time order): decode
    /// it whole.
    pub(crate) fn of_captures(
        base: &[Capture],
        new: &[Capture],
        options: &Options,
        repetitions: bool,
    ) -> Option<Self> {
        if repetitions {
            let sessions = |captures: &[Capture]| {
                let exact = exact(captures.iter());
                let mut sides = Vec::with_capacity(captures.len());
                let mut wall = 0u64;
                for capture in captures {
                    let (side, wall_ns) = run(&[capture], options.metric, None, exact)?;
                    sides.push(side);
                    wall = wall.saturating_add(wall_ns);
                }
                Some((sides, wall))
            };
            let (base, base_wall) = sessions(base)?;
            let (new, new_wall) = sessions(new)?;
            let mut diff = Self::from_session_calls(base, new, options);
            diff.base_wall_ns = base_wall;
            diff.new_wall_ns = new_wall;
            return Some(diff);
        }
        let base: Vec<&Capture> = base.iter().collect();
        let new: Vec<&Capture> = new.iter().collect();
        Self::of_capture_refs(&base, &new, options)
    }

    /// [`Diff::of_captures`] of the calls (not of repetitions) of borrowed captures: what an
    /// HTML report written from captures shows in its diff view.
    pub(crate) fn of_capture_refs(
        base: &[&Capture],
        new: &[&Capture],
        options: &Options,
    ) -> Option<Self> {
        let side = |captures: &[&Capture]| {
            run(
                captures,
                options.metric,
                Some(options.blocks),
                exact(captures.iter().copied()),
            )
        };
        let (base, base_wall) = side(base)?;
        let (new, new_wall) = side(new)?;
        let mut diff = Self::judge_all(base, new, options, false);
        diff.base_wall_ns = base_wall;
        diff.new_wall_ns = new_wall;
        Some(diff)
    }
}

/// True when `captures` hold few enough scopes for every call's time to be kept.
fn exact<'a>(captures: impl Iterator<Item = &'a Capture>) -> bool {
    let scopes: u64 = captures.map(|c| c.record_count() / 2).sum();
    scopes <= exact_budget()
}

/// The calls of each name of the trace `captures` decode to, cut into `blocks` time blocks
/// (none when `None`: only their figures), and the trace's wall time; `None` when they
/// cannot be read in pieces in start order.
fn run(
    captures: &[&Capture],
    metric: Metric,
    blocks: Option<usize>,
    exact: bool,
) -> Option<(BTreeMap<&'static str, Calls>, u64)> {
    // The calls of `#[profile] async fn`s are summed too, when they can be matched as the
    // threads are read again.
    let sum = Sum {
        exact: false,
        stacks: false,
        calls: SumCalls::Sum,
        sites: true,
    };
    let summary = Summary::summed(captures, sum)?;
    // Each name's calls, which the blocks are cut by.
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    for site in summary.threads.iter().flat_map(|t| &t.sites) {
        let n = match &site.durations {
            Durations::Exact(values) => values.len() as u64,
            Durations::Histogram(histogram) => histogram.count(),
        };
        *counts.entry(site.callsite.name()).or_default() += n;
    }
    for site in summary.threads.iter().flat_map(|t| &t.calls) {
        *counts.entry(site.callsite.name()).or_default() += site.count;
    }
    let wall_ns = summary.trace.wall_ns();
    // The polls of async calls are spans of the pieces (not compared), their calls read
    // again after the scopes.
    let pieces = match summary.streamed_calls {
        true => Pieces::of_summary_with_calls(captures, &summary)?,
        false => Pieces::of_summary(captures, &summary)?,
    };
    let mut index: FxHashMap<&'static str, usize> = FxHashMap::default();
    let mut names: Vec<Name> = Vec::with_capacity(counts.len());
    for (&name, &n) in &counts {
        index.insert(name, names.len());
        names.push(Name::new(name, n, blocks, exact));
    }
    // The calls handed over open: their name and slot.
    let mut pending: FxHashMap<(u32, u32), (usize, usize)> = FxHashMap::default();
    let mut known = true;
    // A name's calls come in the order of their start, scopes first at one start (the
    // whole trace's stable sort of its scopes, then its async calls): the async calls,
    // read again on another thread in the order they began, are merged with the scopes.
    let (ordered, streamed) = std::thread::scope(|scope| {
        let (sender, batches) = std::sync::mpsc::sync_channel::<Vec<Async>>(2);
        let pieces = &pieces;
        let reader = scope.spawn(move || {
            let mut batch = Vec::with_capacity(ASYNC_BATCH);
            pieces.each_streamed_call(&mut |_, call| {
                let times = (call.duration_ns(), call.self_ns);
                batch.push((call.start_ns, call.name(), times));
                if batch.len() == ASYNC_BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(ASYNC_BATCH));
                    sender.send(full).map_err(io::Error::other)?;
                }
                Ok(())
            })?;
            sender.send(batch).map_err(io::Error::other)
        });
        let mut calls = batches.into_iter().flatten().peekable();
        let async_call = |(_, name, times): Async, names: &mut Vec<Name>| {
            let Some(&at) = index.get(name) else {
                return false;
            };
            names[at].begin(Some((compared(times, metric), times.0)));
            true
        };
        let ordered = each_call(pieces, &mut |call| match call {
            Call::Begin {
                key,
                start,
                name,
                times,
            } => {
                while let Some(call) = calls.next_if(|c| c.0 < start) {
                    known &= async_call(call, &mut names);
                }
                let Some(&at) = index.get(name) else {
                    known = false;
                    return;
                };
                let slot = names[at].begin(times.map(|t| (compared(t, metric), t.0)));
                if times.is_none() {
                    pending.insert(key, (at, slot));
                }
            }
            Call::End { key, times } => {
                if let Some((at, slot)) = pending.remove(&key) {
                    names[at].end(slot, compared(times, metric), times.0);
                }
            }
        });
        for call in calls {
            known &= async_call(call, &mut names);
        }
        let streamed = reader
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("panicked")));
        (ordered, streamed)
    });
    drop(pieces);
    if !(ordered && known && pending.is_empty() && streamed.is_ok()) {
        return None;
    }
    let calls = names
        .into_iter()
        .map(|name| Some((name.name, name.finish()?)))
        .collect::<Option<_>>()?;
    Some((calls, wall_ns))
}

/// The compared time of a call of (duration, self time).
fn compared((duration, self_ns): (u64, u64), metric: Metric) -> u64 {
    match metric {
        Metric::SelfTime => self_ns,
        Metric::PerCall | Metric::Total => duration,
    }
}

/// One name's calls as they come.
struct Name {
    name: &'static str,
    /// Its calls in the trace (from the first pass).
    n: u64,
    /// Calls begun so far.
    begun: u64,
    /// Sum of the durations, saturating.
    total_ns: u64,
    kept: Kept,
}

/// What a [`Name`] keeps.
enum Kept {
    /// Every call's compared time, in start order (0 until an open call ends), and the time
    /// blocks to cut them into (`None`: only the figures).
    Each(Vec<u64>, Option<usize>),
    /// Histograms: of every call, and of each time block not yet complete.
    Binned(Box<Binned>),
}

/// A name's calls past the exact budget.
struct Binned {
    all: Histogram,
    /// Time blocks (0: only `all`).
    k: u64,
    /// The blocks with calls still to come or to end, by index.
    open: BTreeMap<u64, Block>,
    /// Each block's median and mean, once complete.
    done: Vec<Option<(u64, f64)>>,
}

/// A time block being filled.
#[derive(Default)]
struct Block {
    values: Histogram,
    sum: u128,
    /// Calls whose time came.
    filled: u64,
}

impl Name {
    fn new(name: &'static str, n: u64, blocks: Option<usize>, exact: bool) -> Self {
        let blocks_of = |b: usize| if b == 0 { n } else { (b as u64).min(n) };
        // Without blocks (0: a block per call) past the budget, the calls are still kept:
        // every one is a sample.
        let kept = match blocks {
            Some(0) => Kept::Each(Vec::new(), blocks),
            _ if exact => Kept::Each(Vec::new(), blocks),
            _ => Kept::Binned(Box::new(Binned {
                all: Histogram::default(),
                k: blocks.map_or(0, blocks_of),
                open: BTreeMap::new(),
                done: vec![None; blocks.map_or(0, |b| blocks_of(b) as usize)],
            })),
        };
        Self {
            name,
            n,
            begun: 0,
            total_ns: 0,
            kept,
        }
    }

    /// The next call in start order, with its compared time and duration when it has ended;
    /// the slot its time goes to ([`Name::end`]).
    fn begin(&mut self, times: Option<(u64, u64)>) -> usize {
        let rank = self.begun;
        self.begun += 1;
        let slot = match &mut self.kept {
            Kept::Each(values, _) => {
                values.push(0);
                rank as usize
            }
            Kept::Binned(binned) if binned.k == 0 => 0,
            Kept::Binned(binned) => {
                // Block j holds the calls [j·n/k, (j+1)·n/k): the first j past `rank`'s.
                let (n, k) = (u128::from(self.n), u128::from(binned.k));
                // (More calls than the first pass counted, not expected, go to the last
                // block, and `finish` refuses the name.)
                let j = (((u128::from(rank) + 1) * k).div_ceil(n) - 1).min(k - 1);
                binned.open.entry(j as u64).or_default();
                j as usize
            }
        };
        if let Some((value, duration)) = times {
            self.end(slot, value, duration);
        }
        slot
    }

    /// The time of the call at `slot` (its rank, or its time block).
    fn end(&mut self, slot: usize, value: u64, duration: u64) {
        self.total_ns = self.total_ns.saturating_add(duration);
        let n = self.n;
        match &mut self.kept {
            Kept::Each(values, _) => {
                if let Some(v) = values.get_mut(slot) {
                    *v = value;
                }
            }
            Kept::Binned(binned) => {
                binned.all.add(value);
                if binned.k == 0 {
                    return;
                }
                let j = slot as u64;
                let size = bound(j + 1, n, binned.k) - bound(j, n, binned.k);
                let Some(block) = binned.open.get_mut(&j) else {
                    return;
                };
                block.values.add(value);
                block.sum += u128::from(value);
                block.filled += 1;
                if block.filled == size {
                    let mean = block.sum as f64 / size as f64;
                    binned.done[slot] = Some((block.values.quantile(50), mean));
                    binned.open.remove(&j);
                }
            }
        }
    }

    /// The name's [`Calls`]; `None` when its calls were not all seen (not expected).
    fn finish(self) -> Option<Calls> {
        if self.begun != self.n {
            return None;
        }
        match self.kept {
            Kept::Each(values, blocks) => Some(Calls::of_compared(
                values,
                self.total_ns,
                blocks.unwrap_or(0),
            )),
            Kept::Binned(binned) => {
                let (values, means): (Vec<u64>, Vec<f64>) =
                    binned.done.into_iter().collect::<Option<_>>()?;
                Some(Calls::of_blocks(
                    values,
                    &means,
                    binned.all.quantile(50),
                    self.total_ns,
                    self.n,
                ))
            }
        }
    }
}

/// The first call of time block `j` of `n` calls in `k` blocks: `j·n/k`.
fn bound(j: u64, n: u64, k: u64) -> u64 {
    (u128::from(j) * u128::from(n) / u128::from(k)) as u64
}

#[cfg(test)]
mod tests {
    use super::{Calls, Name};

    /// `n` calls (in start order) through a [`Name`] kept each (`exact`) or in histograms,
    /// every tenth handed over open and its time given after every call has begun, last first.
    fn through(values: &[u64], blocks: Option<usize>, exact: bool) -> Calls {
        let mut name = Name::new("x", values.len() as u64, blocks, exact);
        let mut open = Vec::new();
        for (i, &v) in values.iter().enumerate() {
            match i % 10 {
                0 => open.push((name.begin(None), v)),
                _ => {
                    name.begin(Some((v, v)));
                }
            }
        }
        for (slot, v) in open.into_iter().rev() {
            name.end(slot, v, v);
        }
        name.finish().expect("every call seen")
    }

    fn figures(c: &Calls) -> (Vec<u64>, u64, u64, u64, f64) {
        (
            c.values.clone(),
            c.median_ns,
            c.total_ns,
            c.calls,
            c.total_var,
        )
    }

    #[test]
    fn calls_merged_as_they_come_are_the_calls_kept_whole() {
        // Below 256 ns a histogram keeps each value: the blocks' medians are exact too.
        let small: Vec<u64> = (0..1_003).map(|i| (i * 37 + i / 100) % 250).collect();
        let total = small.iter().sum();
        for blocks in [20, 7, 1] {
            let whole = figures(&Calls::of_compared(small.clone(), total, blocks));
            assert_eq!(figures(&through(&small, Some(blocks), true)), whole);
            assert_eq!(figures(&through(&small, Some(blocks), false)), whole);
        }
        // A sample per call, and only the figures (repetitions).
        let whole = figures(&Calls::of_compared(small.clone(), total, 0));
        assert_eq!(figures(&through(&small, Some(0), false)), whole);
        let figures_only = through(&small, None, false);
        assert_eq!(
            (
                figures_only.median_ns,
                figures_only.total_ns,
                figures_only.calls
            ),
            (whole.1, whole.2, whole.3)
        );
        // Above, medians within 0.2 %; the rest exact.
        let large: Vec<u64> = small.iter().map(|v| 1_000_000 + v * 1_013).collect();
        let total = large.iter().sum();
        let whole = Calls::of_compared(large.clone(), total, 20);
        let binned = through(&large, Some(20), false);
        assert_eq!(
            (binned.total_ns, binned.calls, binned.total_var),
            (whole.total_ns, whole.calls, whole.total_var)
        );
        for (got, want) in binned.values.iter().zip(&whole.values) {
            assert!(
                got.abs_diff(*want) as f64 <= *want as f64 / 512.0,
                "{got} {want}"
            );
        }
        assert!(binned.median_ns.abs_diff(whole.median_ns) <= whole.median_ns / 512);
    }

    #[test]
    fn a_call_more_than_counted_is_refused() {
        let mut name = Name::new("x", 2, Some(20), false);
        for _ in 0..3 {
            name.begin(Some((5, 5)));
        }
        assert!(name.finish().is_none());
    }
}
