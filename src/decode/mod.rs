//! Decoding: the only code that turns a [`Capture`] into a [`Trace`].
//!
//! Each thread's records are read once, in recorded order, and paired as they come
//! ([`pair`]): entries with exits, payloads with the records they belong to, arguments with
//! their scope, allocations with the scope they happened in. What crosses threads is matched
//! once every thread is in: async spans ([`async_spans`]), links ([`links`]) and frees with the
//! allocations they release ([`memory`]). Ticks become Unix nanoseconds through the
//! capture's calibration ([`convert`]).

mod async_spans;
mod build;
pub(crate) mod call_labels;
mod call_match;
pub(crate) mod call_merge;
mod call_order;
pub(crate) use call_order::temporary;
// (What the OTLP export reads.)
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(crate) mod call_plan;
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
mod call_planning;
mod call_stream;
pub(crate) mod calls;
pub(crate) mod convert;
mod counters;
mod follows;
#[cfg(test)]
pub(crate) mod forged_async;
pub(crate) mod links;
mod memory;
mod memory_stream;
mod merge;
mod pair;
pub(crate) mod parallel;
mod piece;
pub(crate) mod pieces;
pub(crate) mod pipeline;
mod plain;
mod plain_pieces;
#[cfg(test)]
mod plain_tests;
mod poll_label;
pub(crate) mod quantiles;
mod source;
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
mod spill;
pub(crate) mod summary;
mod thread;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::capture::{Capture, CaptureThread};
use crate::record::clock::{Compensation as RawCompensation, PROBE_UNIT};
use crate::record::hash::{FxHashMap, FxHashSet};
use crate::record::registry::Untracked;
#[cfg(doc)]
use crate::trace::ThreadTrace;
use crate::trace::{Compensation, Process, Trace};

use self::build::Builder;
use self::convert::Converter;
#[cfg(test)]
use self::links::Links;
use self::links::OriginSites;
#[cfg(test)]
use self::pair::Pairing;
use self::summary::{Calls, Sum, Summary, ThreadSums};
use self::thread::{DECODED, Shared, has_span_follows};

/// The records this process has decoded so far, every decoding together; a display of one
/// decoding's progress subtracts the count it started from.
pub(crate) fn decoded_records() -> u64 {
    DECODED.load(Ordering::Relaxed)
}

impl Trace {
    /// Decodes `capture`: pairs entries and exits into nested spans, converts ticks to
    /// nanoseconds, and matches async spans, links and allocations across threads.
    ///
    /// Records are taken in order per thread; only those of the capture's window count. An
    /// exit closes the open scope it was recorded for (the entry's callsite and tick),
    /// whatever order scopes were left in; an exit with no open entry (its scope began before
    /// the window) is ignored; scopes still open at the window's end are closed there and
    /// flagged `open_at_stop` (in a session salvaged without its footer, at their own
    /// thread's last record, as the rest was lost: [`Trace::salvage`]). A scope that
    /// outlives its parent keeps its own end, and its
    /// parent's `children_ns` counts only the part inside the parent. A poll belongs to the
    /// latest async span with its id that began before it. Of a flight recorder's window,
    /// async calls are built only from the records from the window start common to every
    /// thread on ([`Trace::cut_start_ns`]). Threads with no record in the window are left out.
    pub fn from_capture(capture: &Capture) -> Self {
        decode(capture, parallel::PARALLEL_FROM)
    }
}

/// [`Trace::from_capture`], on several cores when the capture holds at least `parallel_from`
/// records (threads decode apart; the trace is the same either way).
fn decode(capture: &Capture, parallel_from: usize) -> Trace {
    decode_with(capture, parallel_from, None)
        .expect("a trace decoded whole")
        .trace
}

impl Summary {
    /// [`Summary::of`] with the spans summed by stack too ([`ThreadSums::stacks`]), for
    /// folded stacks and pprof profiles (with the memory figures of a session that tracked
    /// memory); durations in histograms.
    pub(crate) fn stacks_of<C: std::borrow::Borrow<Capture>>(captures: &[C]) -> Option<Self> {
        // The stacks hold the memory figures of a session that tracked memory.
        Self::of_with(captures, false, true)
    }

    /// [`Summary::stacks_of`], also of captures with async calls ([`Calls::Sum`]): each call
    /// counted once in the stacks, at its poll first in thread order, then index (as pprof
    /// profiles count them), from a second reading that matches the calls.
    pub(crate) fn stacks_with_calls_of(captures: &[&Capture]) -> Option<Self> {
        Self::summed(
            captures,
            Sum {
                exact: false,
                stacks: true,
                calls: Calls::Sum,
                sites: true,
            },
        )
    }

    /// [`Summary::stacks_of`], also of captures with the async calls of `#[profile] async
    /// fn`s ([`Calls::Check`]): for folded stacks (and flame graphs), whose stacks hold a
    /// call's polls as frames of their threads, whichever call they are of.
    pub(crate) fn stacks_with_polls_of(captures: &[&Capture]) -> Option<Self> {
        Self::summed(
            captures,
            Sum {
                exact: false,
                stacks: true,
                calls: Calls::Check,
                sites: true,
            },
        )
    }

    /// [`Summary::counts_of`] (the spans counted, not summed by callsite), for exports that
    /// read the captures' memory timeline again as they write it
    /// ([`Pieces::with_memory`](super::pieces::Pieces::with_memory)): the trace's
    /// [`MemoryTrace`](crate::trace::MemoryTrace) holds no events; with the async calls of
    /// `#[profile] async fn`s ([`Calls::Check`]), for exports that write them as they come
    /// ([`SpanSource::each_streamed_call`](super::pieces::SpanSource)). `None` as
    /// [`Summary::of_with`] gives it (but for those calls), and when a thread's allocations
    /// and frees do not come in time order (a forged file: they could not be merged as read).
    pub(crate) fn with_memory_timeline(captures: &[&Capture]) -> Option<Self> {
        let summary = Self::summed(
            captures,
            Sum {
                exact: false,
                stacks: false,
                calls: Calls::Check,
                sites: false,
            },
        )?;
        summary
            .threads
            .iter()
            .all(|t| t.memory_in_order)
            .then_some(summary)
    }

    /// [`Summary::of_with`] with the spans counted but not summed by callsite ([`Sum::sites`]):
    /// what [`Pieces`](super::pieces::Pieces) needs, at less work.
    pub(crate) fn counts_of(captures: &[&Capture]) -> Option<Self> {
        Self::summed(
            captures,
            Sum {
                exact: false,
                stacks: false,
                calls: Calls::Decline,
                sites: false,
            },
        )
    }

    /// The summary of what `captures` decode to ([`Trace::from_captures`]), keeping every
    /// duration when `exact`, else histograms; summing the spans by stack too when `stacks`;
    /// with each row's memory figures of sessions that tracked memory (the trace's
    /// [`MemoryTrace`](crate::trace::MemoryTrace) holds no events). `None` when the captures
    /// hold async calls (their polls on several threads make one call each).
    pub(crate) fn of_with<C: std::borrow::Borrow<Capture>>(
        captures: &[C],
        exact: bool,
        stacks: bool,
    ) -> Option<Self> {
        Self::summed(
            captures,
            Sum {
                exact,
                stacks,
                calls: Calls::Decline,
                sites: true,
            },
        )
    }

    /// The summary of what `captures` decode to, summed as `sum` says; `None` when the
    /// captures hold async calls that it does not take ([`Sum::calls`]).
    pub(crate) fn summed<C: std::borrow::Borrow<Capture>>(
        captures: &[C],
        sum: Sum,
    ) -> Option<Self> {
        let exact = sum.exact;
        let mut traces = Vec::with_capacity(captures.len());
        let (mut threads, mut origin_sites) = (Vec::new(), Vec::new());
        let mut call_captures = Vec::new();
        let (mut tracing_unresolved, mut calls_unordered) = (false, false);
        for (at, capture) in captures.iter().enumerate() {
            let decoded = summarize(capture.borrow(), sum)?;
            calls_unordered |= decoded.calls_unordered;
            tracing_unresolved |=
                decoded.tracing_enters && decoded.sums.iter().any(|t| t.enter_polls.is_none());
            traces.push(decoded.trace);
            threads.extend(decoded.sums);
            // The flows of each capture follow those before, in order, as merged.
            origin_sites.extend(decoded.origin_sites);
            if decoded.streamed_calls {
                call_captures.push(at);
            }
        }
        let trace = merge::merge(traces);
        debug_assert_eq!(trace.threads.len(), threads.len());
        debug_assert_eq!(trace.flows.len(), origin_sites.len());
        Some(Self {
            trace,
            threads,
            exact,
            live_at_end: Default::default(),
            origin_sites,
            streamed_calls: !call_captures.is_empty(),
            call_captures,
            tracing_unresolved,
            calls_unordered,
        })
    }
}

/// The trace of `capture` without spans, and the sums of each thread's spans, for
/// [`Summary::of`]; `None` when the capture holds async calls.
fn summarize(capture: &Capture, sum: Sum) -> Option<Decoding> {
    decode_with(capture, parallel::PARALLEL_FROM, Some(sum))
}

/// What [`decode_with`] gives.
struct Decoding {
    trace: Trace,
    /// The sums of each thread's spans, when summed.
    sums: Vec<ThreadSums>,
    /// The callsite of each flow's origin, at the same index as `trace.flows`.
    origin_sites: OriginSites,
    /// Summed, the capture's async calls were summed by [`call_stream`].
    streamed_calls: bool,
    /// Summed, it holds `tracing` enters matched across threads ([`ThreadSums::enter_polls`]).
    tracing_enters: bool,
    /// Summed, its calls cannot be read again in the decoded trace's order
    /// ([`Summary::calls_unordered`]).
    calls_unordered: bool,
}

/// [`decode`], with each thread's spans summed ([`ThreadSums`], as `sum` says) and let go as
/// they are paired when `sum` is given, instead of kept; then the sums are returned too, and
/// the trace holds no spans or span arguments (the flows of `tracing` spans' `follows_from`s
/// are matched by a second reading of the threads, [`follows`]). `None` only when summing a
/// capture with async calls, whose matching needs the spans.
fn decode_with(capture: &Capture, parallel_from: usize, sum: Option<Sum>) -> Option<Decoding> {
    let exact = sum;
    let sum = sum.is_some();
    // Decoding allocates; that is the profiler's work, not the program's.
    let _untracked = Untracked::enter();
    let clock = &capture.clock;
    // Spans are kept, and a `tracing` span followed from one entered elsewhere: where each
    // span id was entered and closed is needed to resolve it.
    let tracing_uses = !sum && has_span_follows(capture);
    let shared = Shared::new(capture, capture.memory.is_on(), tracing_uses);
    // Threads with no record in the window are left out; the others keep their order, and
    // their index in the trace is known before any is decoded, so threads decode apart.
    let threads: Vec<&CaptureThread> = capture
        .threads
        .iter()
        .filter(|t| shared.has_records(t))
        .collect();
    let decoded = parallel::map(
        &threads,
        parallel_from,
        |thread| thread.record_bound(),
        |index, thread| shared.thread(index, thread, exact),
    );
    let mut decoded = decoded;
    // Summed, async calls are summed by reading the threads again when their marks can be
    // merged as read (or only checked: [`Calls::Check`]); else the capture is not summed.
    let mut tracing_enters = false;
    let mut calls_unordered = false;
    let calls = match exact {
        Some(how) if decoded.iter().any(|(thread, _)| thread.marks_seen.any) => {
            let seen = || decoded.iter().map(|(thread, _)| thread.marks_seen);
            // `tracing` spans entered several times: which enters' slices are polls is
            // known once their marks are matched, which exports' pieces read
            // ([`ThreadSums::enter_polls`]).
            let tracing = seen().any(|s| s.tracing);
            tracing_enters = tracing;
            // Stacks only (folded stacks, flame graphs) take a poll as a frame of its thread
            // whatever its call, and a `tracing` enter's slice the same way whether it is a
            // poll or a scope: any marks will do.
            let stacks_only = how.stacks && how.calls == Calls::Check;
            let streamable =
                stacks_only || how.calls != Calls::Decline && seen().all(|s| s.streamable);
            if !streamable {
                return None;
            }
            // Checked only, the calls are still matched of a salvaged session (its calls cut
            // open count with its scopes), of `tracing` spans for their slices' kinds (and to
            // find marks out of order before anything is written), and of a flight
            // recorder's window for the number of its calls cut at its start, which come
            // first ([`CallSums::cut`](summary::CallSums)).
            let cut = capture.cut_start.is_some();
            if how.calls == Calls::Sum || shared.salvaged || (tracing || cut) && !stacks_only {
                let ends: Vec<u64> = decoded.iter().map(|(thread, _)| thread.end_ns).collect();
                let mut sums: Vec<&mut ThreadSums> =
                    decoded.iter_mut().filter_map(|(_, s)| s.as_mut()).collect();
                // `None`: marks out of order (a forged file), decoded whole.
                // Summed by stack, each async call counts once: the stacks of that reading.
                let stacks = how.stacks && !stacks_only;
                let calls = call_stream::sum_calls(
                    &shared,
                    &threads,
                    &ends,
                    (how.exact, stacks),
                    &mut sums,
                )?;
                let each = (sums.iter_mut().zip(calls.by_thread))
                    .zip(calls.enter_polls)
                    .zip(calls.stacks);
                for (((sums, calls), polls), tree) in each {
                    sums.calls = calls;
                    sums.enter_polls = tracing.then(|| std::sync::Arc::new(polls));
                    if stacks {
                        sums.stacks = tree;
                    }
                }
                // The decoded trace holds its calls by start: those cut at a window's start
                // first, unless a `tracing` span entered before the window (whose enters
                // make marks there) starts earlier; the calls read again come cut ones first.
                let cut_calls = (sums.iter().flat_map(|s| &s.calls)).any(|c| c.cut > 0);
                if tracing && cut_calls {
                    if how.calls == Calls::Check && !stacks_only {
                        return None;
                    }
                    calls_unordered = true;
                }
                Some(calls.open)
            } else {
                Some(0)
            }
        }
        _ => None,
    };
    if sum {
        origins_followed(&shared, &threads, parallel_from, &mut decoded);
    }
    let mut builder = Builder::new(shared.end_ns, capture.memory, shared.salvaged, sum);
    // Summed, the spans that `tracing` spans' `follows_from`s name are found by a second
    // reading of the threads.
    let named = match sum {
        true => follows::named(decoded.iter().map(|(thread, _)| &thread.links)),
        false => Default::default(),
    };
    if !named.is_empty() {
        let named = std::sync::Arc::new(named);
        builder.tracing_uses(parallel::map(
            &threads,
            parallel_from,
            |thread| thread.record_bound(),
            |index, thread| shared.tracing_uses_of(index, thread, &named),
        ));
    }
    let cut_start_ns = capture
        .cut_start
        .map(|tick| shared.converter.to_unix_ns(tick));
    builder.cut_start_ns = cut_start_ns;
    let mut sums = Vec::new();
    for (thread, thread_sums) in decoded {
        builder.add(thread);
        sums.extend(thread_sums);
    }
    let process = Process {
        id: capture.header.process_id,
        name: capture.header.process_name.clone(),
        host: capture.header.host_name.clone(),
    };
    let compensation = match clock.compensation {
        RawCompensation::Unknown => None,
        RawCompensation::Off => Some(Compensation::Off),
        RawCompensation::Ticks { inner, outer } => Some(Compensation::Applied {
            inner_ns: f64::from(inner) / PROBE_UNIT as f64 * shared.converter.ns_per_tick(),
            outer_ns: f64::from(outer) / PROBE_UNIT as f64 * shared.converter.ns_per_tick(),
        }),
    };
    let declared = capture.threads.len();
    let (mut trace, origin_sites) = builder.finish(
        &shared.converter,
        capture.start_tick,
        capture.dropped_events,
        process,
    );
    if let Some(lost_bytes) = capture.salvaged {
        trace.salvage.sessions = 1;
        trace.salvage.lost_bytes = lost_bytes;
        trace.salvage.threads_without_records = (declared - threads.len()) as u64;
    }
    trace.compensation = compensation;
    trace.clock_source = clock.source;
    trace.overwritten_events = capture.overwritten_events;
    trace.cut_start_ns = cut_start_ns;
    if let Some(open) = calls
        && shared.salvaged
    {
        // As the decoded trace counts them: its async calls cut open too.
        trace.salvage.open_scopes = trace.salvage.open_scopes.saturating_add(open);
    }
    Some(Decoding {
        trace,
        sums,
        origin_sites,
        streamed_calls: calls.is_some(),
        tracing_enters,
        calls_unordered,
    })
}

/// Gives each thread of `decoded` (summed, of `threads`) whose link captures were too many to
/// keep ([`Links::overflowed`](self::links::Links)) those that a thread follows, read again.
fn origins_followed(
    shared: &Shared<'_>,
    threads: &[&CaptureThread],
    parallel_from: usize,
    decoded: &mut [(thread::Decoded, Option<ThreadSums>)],
) {
    let overflowed = |d: &thread::Decoded| d.links.overflowed;
    if !decoded.iter().any(|(d, _)| overflowed(d)) {
        return;
    }
    let wanted: FxHashSet<(u64, u32)> = (decoded.iter())
        .flat_map(|(d, _)| d.links.followers.iter().map(|&(_, t, seq)| (t, seq)))
        .collect();
    let ids: FxHashSet<u64> = wanted.iter().map(|&(id, _)| id).collect();
    let wanted = Arc::new(wanted);
    let read: Vec<bool> = (decoded.iter())
        .zip(threads)
        .map(|((d, _), t)| overflowed(d) && ids.contains(&t.id))
        .collect();
    let origins = parallel::map(
        threads,
        parallel_from,
        |thread| thread.record_bound(),
        |index, thread| match read[index] {
            true => shared.origins(index, thread, Arc::clone(&wanted)),
            false => FxHashMap::default(),
        },
    );
    for ((d, _), origins) in decoded.iter_mut().zip(origins) {
        d.links.origins.extend(origins);
    }
}

impl Trace {
    /// Decodes several captures into one trace on one time line: the sessions of a file of
    /// several ([`Capture::read_all`]; `cat a.tscope b.tscope > both.tscope`), of several
    /// files, of one process or of many processes and hosts.
    ///
    /// Each capture is decoded as [`Trace::from_capture`] does, its ticks converted to Unix
    /// nanoseconds with its own clock calibration, so scopes that ran at the same Unix
    /// instant in two processes have the same times, and the trace's window runs from the
    /// earliest start to the latest end. Each thread, async call and allocation names its
    /// process ([`ThreadTrace::process`], an index in [`Trace::processes`]), so threads of two
    /// processes that share an id stay apart; links and allocations are matched within their
    /// capture only. The async calls, and the allocations and frees, are put in time order
    /// across processes.
    ///
    /// Sessions of one process (same process id, executable name and host name: a program
    /// that stopped and wrote a capture twice) are one process of the trace, and a thread
    /// they both recorded (tickscope's thread ids are never reused in a process) has an entry
    /// per session in [`Trace::threads`], which the report, the table and the exports count
    /// as one thread. Sessions that overlap in time, such as nested sessions, recorded the
    /// same scopes twice, and the trace holds both.
    ///
    /// One capture gives what [`Trace::from_capture`] gives; none gives [`Trace::empty`].
    ///
    /// ```
    /// use tickscope::Capture;
    /// use tickscope::trace::Trace;
    ///
    /// let session = |name: &'static str| {
    ///     let prof = tickscope::Profiler::builder().current_thread().start();
    ///     drop(tickscope::scope!(name = name));
    ///     prof.stop();
    ///     let mut file = Vec::new();
    ///     prof.capture().write_to(&mut file).unwrap();
    ///     file
    /// };
    /// // Two captures written one after the other: what `cat a.tscope b.tscope` gives.
    /// let both = [session("first"), session("second")].concat();
    /// let captures = Capture::from_bytes(&both)?;
    /// let trace = Trace::from_captures(&captures);
    /// assert_eq!(trace.processes.len(), 1); // two sessions of this process
    /// assert_eq!(trace.threads.len(), 2); // this thread, once per session
    /// assert_eq!(trace.thread_count(), 1);
    /// # Ok::<(), tickscope::capture::ReadError>(())
    /// ```
    pub fn from_captures<'c>(captures: impl IntoIterator<Item = &'c Capture>) -> Self {
        let traces = captures.into_iter().map(Self::from_capture).collect();
        merge::merge(traces)
    }
}

impl Capture {
    /// Decodes the capture into a [`Trace`]; see [`Trace::from_capture`].
    pub fn decode(&self) -> Trace {
        Trace::from_capture(self)
    }

    /// The length of the capture's window in nanoseconds: what its trace's
    /// [`Trace::wall_ns`] gives, from the window and the clock calibration alone (no record
    /// is read).
    pub fn wall_ns(&self) -> u64 {
        let (start, end, _) = self.window_ns();
        end.saturating_sub(start)
    }

    /// The part of the window the data covers, in nanoseconds: what its trace's
    /// [`Trace::covered_ns`] gives (of a flight recorder that overwrote events, from the start
    /// common to every thread's retained records), without reading a record.
    pub fn covered_ns(&self) -> u64 {
        let (start, end, cut) = self.window_ns();
        let start = cut.map_or(start, |cut| cut.max(start));
        end.saturating_sub(start)
    }

    /// The window's start, end and flight recorder's cut in Unix nanoseconds, as decoding
    /// converts them.
    fn window_ns(&self) -> (u64, u64, Option<u64>) {
        let clock = &self.clock;
        let converter = Converter::new(
            &clock.start,
            &clock.stop,
            clock.ns_per_tick,
            &clock.checkpoints,
        );
        (
            converter.to_unix_ns(self.start_tick),
            converter.to_unix_ns(self.end_tick),
            self.cut_start.map(|tick| converter.to_unix_ns(tick)),
        )
    }
}

#[cfg(test)]
mod tests;
