//! A thread of plain scopes summed on a short path: what [`Shared::thread`] gives when summing,
//! for a thread whose records are entries and exits only, each exit closing the innermost
//! scope open (or none).
//!
//! Most threads of most captures are that. Their sums need no [`Span`](crate::trace::Span),
//! none of the general pairing's cases (payloads, arguments, memory, `tracing` enters,
//! guards dropped out of order), and no window of spans kept to be handed over: each scope's
//! running figures stay on the open stack, and a closed one leaves its callsite, duration,
//! self time and whether it was open at the stop in a slot of 32 bytes.
//!
//! A reading that only counts the scopes (the first reading of an export) needs no time at
//! all while the thread's ticks do not go back ([`Plain::count`]).
//!
//! The sums are those of the general path, to the order in which scopes are added (which
//! decides the order of the rows' callsites and of their durations): scopes are handed over
//! when that path's [`Pairing::drain_final`](super::pair::Pairing::drain_final) hands them
//! over, in the same order. A record of any other kind, or an exit that closes a scope that
//! is not the innermost one, gives up: the thread is read again by the general path.
//! `plain_sums_are_those_of_the_general_path` (in this module's tests) checks it on captures
//! made to take every branch.

use std::sync::atomic::Ordering;

use crate::capture::CaptureThread;
use crate::capture::compress::Step;
use crate::record::callsite::{self, Callsite};
use crate::record::clock::PROBE_UNIT;
use crate::record::registry::Untracked;
use crate::trace::ThreadTrace;

use super::async_spans::MarksSeen;
use super::links::{Keep, Links};
use super::pair::Extras;
use super::summary::{Sum, ThreadSums, WINDOW};
use super::thread::{DECODED, Decoded, ORIGINS_KEPT, Shared, Steps};

/// An open scope: its index in the thread, the key its exit carries, and its figures so far.
#[derive(Clone, Copy)]
struct Open {
    index: u32,
    key: u32,
    callsite: &'static Callsite,
    start_ns: u64,
    /// Its children's time so far (ns).
    children_ns: u64,
    /// The probe ticks inside it so far, in 1/[`PROBE_UNIT`] tick.
    probe: u64,
    /// The latest end of its children closed so far (ns).
    child_end: u64,
}

/// A scope's sums once closed: `None` for one still open.
#[derive(Clone, Copy)]
struct Closed {
    callsite: &'static Callsite,
    duration_ns: u64,
    self_ns: u64,
    open_at_stop: bool,
}

/// The scopes begun since the last hand-over, as the general path keeps them: when to hand
/// them over, and in which order.
struct Window {
    /// The index of `slots[0]`.
    base: u32,
    /// Per scope begun since the last hand-over: its sums once closed.
    slots: Vec<Option<Closed>>,
    /// Scopes begun before the last hand-over (open then) and closed since, with their index.
    late: Vec<(u32, Closed)>,
    /// Hand over from this many scopes on ([`Pairing::window_full`](super::pair::Pairing::window_full)).
    drain_at: usize,
}

impl Window {
    /// True when the general path hands the scopes over now, `open` being open.
    #[inline(always)]
    fn full(&self, open: usize) -> bool {
        let kept = self.slots.len();
        kept >= self.drain_at && (open == 0 || kept >= 2 * self.drain_at)
    }

    /// Hands every closed scope to `sums`: those begun before the last hand-over first, then
    /// the newer ones, each in index order. `open` scopes are still open; the next one begun
    /// has index `next`.
    fn drain(&mut self, sums: &mut ThreadSums, open: usize, next: u32) {
        self.late.sort_unstable_by_key(|&(index, _)| index);
        for (_, closed) in self.late.drain(..) {
            sums.add_scope(closed.callsite, closed.figures());
        }
        for closed in self.slots.drain(..).flatten() {
            sums.add_scope(closed.callsite, closed.figures());
        }
        self.base = next;
        // (The general path keeps the open scopes aside, and hands over at least as many.)
        self.drain_at = self.drain_at.max(open);
    }

    /// Keeps the sums of the scope at `index`, closed.
    #[inline(always)]
    fn close(&mut self, index: u32, closed: Closed) {
        match index.checked_sub(self.base) {
            Some(at) => self.slots[at as usize] = Some(closed),
            None => self.late.push((index, closed)),
        }
    }
}

impl Closed {
    #[inline(always)]
    fn figures(self) -> (u64, u64, bool) {
        (self.duration_ns, self.self_ns, self.open_at_stop)
    }
}

/// Why a thread is not summed here.
struct GiveUp;

/// A thread's pairing of plain scopes, summed.
struct Plain<'s, 'c> {
    shared: &'s Shared<'c>,
    open: Vec<Open>,
    /// Scopes begun so far (the next one's index).
    begun: u32,
    /// Records taken.
    events: u64,
    /// A scope ended before one of its children (forged ticks).
    tangled: bool,
    /// Kept to be handed over in the general path's order, when summing by callsite.
    window: Option<Window>,
    sums: ThreadSums,
    /// Only counting (no sums by callsite): see [`Plain::count_step`].
    counting: bool,
    /// Counting, the tick of the last record taken.
    last_tick: u64,
}

impl Steps for Plain<'_, '_> {
    type Error = GiveUp;

    fn other() -> GiveUp {
        GiveUp
    }

    /// Takes a record; `Err` for one this path does not take.
    #[inline(always)]
    fn step(&mut self, step: Step) -> Result<(), GiveUp> {
        match step {
            Step::Begin { id, tick, key } => self.begin(id, tick, key),
            Step::End { key, tick } => self.end(key, tick)?,
        }
        self.drain_when_full();
        Ok(())
    }
}

/// A [`Plain`] only counting: [`Plain::count_step`].
struct Counting<'p, 's, 'c>(&'p mut Plain<'s, 'c>);

impl Steps for Counting<'_, '_, '_> {
    type Error = GiveUp;

    fn other() -> GiveUp {
        GiveUp
    }

    #[inline(always)]
    fn step(&mut self, step: Step) -> Result<(), GiveUp> {
        self.0.count_step(step)
    }
}

impl Plain<'_, '_> {
    /// Hands the scopes over when the general path would.
    #[inline(always)]
    fn drain_when_full(&mut self) {
        if let Some(window) = &mut self.window
            && window.full(self.open.len())
        {
            window.drain(&mut self.sums, self.open.len(), self.begun);
        }
    }

    /// [`Plain::step`](Steps::step) for a reading that only counts the scopes (and which end at the stop,
    /// and whether one ended before a child): no time is needed. No scope can end before a
    /// child while the ticks do not go back: a child's exit comes before its parent's, and
    /// Unix times never go back as ticks grow (`convert`'s
    /// `checkpoints_follow_a_slewed_clock` checks it across checkpoints). A thread whose
    /// ticks go back is the general path's.
    #[inline(always)]
    fn count_step(&mut self, step: Step) -> Result<(), GiveUp> {
        let (Step::Begin { tick, .. } | Step::End { tick, .. }) = step;
        if tick < self.last_tick {
            return Err(GiveUp);
        }
        self.last_tick = tick;
        match step {
            Step::Begin { id, key, .. } => self.open_counted(id, key),
            Step::End { key, .. } => self.end_counted(key)?,
        }
        Ok(())
    }

    /// Counting, opens a scope of callsite `id` whose exit carries `key` (not of an unknown
    /// callsite).
    #[inline(always)]
    fn open_counted(&mut self, id: u32, key: u32) {
        let Some(callsite) = callsite::lookup(self.shared.callsites, id) else {
            return;
        };
        self.open.push(Open {
            index: self.begun,
            key,
            callsite,
            start_ns: 0,
            children_ns: 0,
            probe: 0,
            child_end: 0,
        });
        self.begun += 1;
    }

    /// Counting, an exit with the key `key`.
    #[inline(always)]
    fn end_counted(&mut self, key: u32) -> Result<(), GiveUp> {
        match self.open.last() {
            Some(top) if top.key == key => {
                if let Some(closed) = self.open.pop() {
                    self.sums.add_scope(closed.callsite, (0, 0, false));
                }
            }
            _ if self.open.iter().any(|o| o.key == key) => return Err(GiveUp),
            _ => {}
        }
        Ok(())
    }

    /// Opens a scope of callsite `id` at `tick`, whose exit carries `key`.
    #[inline(always)]
    fn begin(&mut self, id: u32, tick: u64, key: u32) {
        let Some(callsite) = callsite::lookup(self.shared.callsites, id) else {
            // An unknown callsite opens nothing (and its exit closes nothing).
            return;
        };
        let index = self.begun;
        self.begun += 1;
        self.open.push(Open {
            index,
            key,
            callsite,
            start_ns: self.shared.converter.to_unix_ns(tick),
            children_ns: 0,
            probe: self.shared.probe.inner,
            child_end: 0,
        });
        if let Some(window) = &mut self.window {
            window.slots.push(None);
        }
    }

    /// An exit with the key `key` at `tick`.
    #[inline(always)]
    fn end(&mut self, key: u32, tick: u64) -> Result<(), GiveUp> {
        match self.open.last() {
            Some(top) if top.key == key => {}
            // Closes a scope that is not the innermost one: the general path's.
            _ if self.open.iter().any(|o| o.key == key) => return Err(GiveUp),
            // Its entry was outside the window (or of an unknown callsite).
            _ => return Ok(()),
        }
        let ns = self.shared.converter.to_unix_ns(tick);
        self.close(ns, false);
        Ok(())
    }

    /// Closes the innermost open scope at `end`, as `Pairing::close` does when it is the
    /// innermost one.
    #[inline(always)]
    fn close(&mut self, end: u64, open_at_stop: bool) {
        let Some(closed) = self.open.pop() else {
            return;
        };
        let converter = &self.shared.converter;
        let probe_ns = converter.ticks_to_ns(closed.probe);
        let (start, end) = (closed.start_ns, end.max(closed.start_ns));
        self.tangled |= end < closed.child_end;
        let room = (end - start).saturating_sub(closed.children_ns);
        let overhead = (probe_ns.saturating_add(PROBE_UNIT / 2) / PROBE_UNIT).min(room);
        if start < end
            && let Some(parent) = self.open.last_mut()
        {
            parent.probe = (parent.probe)
                .saturating_add(self.shared.probe.outer)
                .saturating_add(closed.probe);
            parent.child_end = parent.child_end.max(end);
            parent.children_ns =
                (parent.children_ns).saturating_add((end - start).saturating_sub(overhead));
        }
        let duration_ns = (end - start).saturating_sub(overhead);
        let closed_sums = Closed {
            callsite: closed.callsite,
            duration_ns,
            self_ns: duration_ns.saturating_sub(closed.children_ns),
            open_at_stop,
        };
        match &mut self.window {
            Some(window) => window.close(closed.index, closed_sums),
            None => self
                .sums
                .add_scope(closed_sums.callsite, closed_sums.figures()),
        }
    }
}

impl Shared<'_> {
    /// [`Shared::thread`] summing (as `sum` says) a thread of plain scopes on the short path
    /// of this module; `None` when the thread is not one (it is left to the general path).
    pub(super) fn plain(
        &self,
        thread: &CaptureThread,
        sum: Sum,
    ) -> Option<(Decoded, Option<ThreadSums>)> {
        // Scopes cut at a flight recorder's start, allocations and stacks: the general path's.
        if sum.stacks || self.memory || !self.capture.cut_of(thread.id).is_empty() {
            return None;
        }
        let _untracked = Untracked::enter();
        let mut plain = Plain {
            shared: self,
            open: Vec::new(),
            begun: 0,
            events: 0,
            tangled: false,
            window: sum.sites.then(|| Window {
                base: 0,
                slots: Vec::with_capacity(2 * WINDOW),
                late: Vec::new(),
                drain_at: WINDOW,
            }),
            sums: match sum.sites {
                true => ThreadSums::new(sum.exact),
                false => ThreadSums::counting(),
            },
            counting: !sum.sites,
            last_tick: 0,
        };
        let mut keep = false;
        for chunk in 0..thread.chunks.len() {
            // (An error of a kept chunk's columns gives up too: the general path reads them
            // again, and says it.)
            let taken = match plain.counting {
                true => self.for_each_step_of(thread, chunk, &mut keep, &mut Counting(&mut plain)),
                false => self.for_each_step_of(thread, chunk, &mut keep, &mut plain),
            };
            plain.events += taken.as_ref().map_or(0, |&records| records);
            if taken.is_err() {
                // Read again by the general path: its count of the records read stands.
                let read: usize = thread.chunks[..=chunk].iter().map(|c| c.len()).sum();
                DECODED.fetch_sub(read as u64, Ordering::Relaxed);
                return None;
            }
        }
        let end_ns = self.end_of(thread);
        // What is still open closes at the end, marked open at the stop, innermost first.
        let open_at_end: Vec<u32> = plain.open.iter().map(|o| o.index).collect();
        while !plain.open.is_empty() {
            plain.close(end_ns, true);
        }
        let Plain {
            begun,
            events,
            tangled,
            window,
            mut sums,
            ..
        } = plain;
        if let Some(mut window) = window {
            window.drain(&mut sums, 0, begun);
        }
        sums.tangled = tangled;
        sums.plain = true;
        let open_scopes = match self.salvaged {
            true => open_at_end.len() as u64,
            false => 0,
        };
        sums.open_at_end = open_at_end;
        let decoded = Decoded {
            thread: ThreadTrace {
                process: 0,
                id: thread.id,
                name: thread.name.clone(),
                spans: Vec::new(),
                memory: Vec::new(),
                args: Vec::new(),
            },
            events,
            marks: Vec::new(),
            marks_seen: MarksSeen::default(),
            links: Links {
                tracing_uses: self.tracing_uses,
                keep: Keep::Upto(ORIGINS_KEPT),
                ..Links::default()
            },
            memory: None,
            extras: Extras {
                samples: Vec::new(),
                instants: Vec::new(),
                stacks: None,
            },
            end_ns,
            open_scopes,
        };
        Some((decoded, Some(sums)))
    }
}
