//! Several sessions' traces on one time line, for
//! [`Trace::from_captures`](crate::trace::Trace::from_captures).
//!
//! Each capture is decoded on its own, its ticks converted to Unix nanoseconds with its own
//! clock calibration, so the traces already share a time base; merging them only renumbers
//! what points across a trace (processes, threads, async calls, allocations) and puts the
//! async calls and allocations of all of them in time order.

use crate::record::clock::ClockSource;
use crate::trace::{SpanKind, Trace};

/// The traces of `traces` as one trace: a trace alone is returned as it is, none gives
/// [`Trace::empty`].
///
/// Processes that agree on id, executable name and host name are one process of the result
/// (two sessions of one program); the others are processes of their own, in the order they
/// first appear. Threads, links and allocations stay with their process; the window runs from the
/// earliest start to the latest end of the traces whose session ran (a capture of a session
/// that never ran has no window, 0 to 0, and does not pull the start back to the epoch).
pub(super) fn merge(traces: Vec<Trace>) -> Trace {
    if traces.len() <= 1 {
        return traces.into_iter().next().unwrap_or_else(Trace::empty);
    }
    let ran = |t: &&Trace| t.start_ns != 0 || t.end_ns != 0;
    let mut out = Trace {
        start_ns: traces
            .iter()
            .filter(ran)
            .map(|t| t.start_ns)
            .min()
            .unwrap_or(0),
        end_ns: traces
            .iter()
            .filter(ran)
            .map(|t| t.end_ns)
            .max()
            .unwrap_or(0),
        processes: Vec::new(),
        ..Trace::empty()
    };
    for trace in traces {
        append(&mut out, trace);
    }
    sort_by_start(&mut out);
    out
}

/// Adds `trace` to `out`, renumbering its processes, threads, async calls and allocations
/// after those already there.
fn append(out: &mut Trace, trace: Trace) {
    let Trace {
        start_ns: _,
        end_ns: _,
        threads,
        async_spans,
        dropped_events,
        overwritten_events,
        cut_start_ns,
        event_count,
        memory,
        flows: links,
        processes,
        compensation,
        clock_source,
        counters,
        values,
        instants,
        salvage,
    } = trace;
    out.compensation = out.compensation.or(compensation);
    // The least trustworthy clock that says.
    let doubt = |source: &Option<ClockSource>| match source {
        Some(ClockSource::Monotonic) => 3,
        Some(ClockSource::CpuUnverified) => 2,
        Some(_) => 1,
        None => 0,
    };
    if doubt(&clock_source) > doubt(&out.clock_source) {
        out.clock_source = clock_source;
    }
    // The index in `out` of each process of `trace`.
    let process: Vec<u32> = processes
        .into_iter()
        .map(|p| {
            let at = out.processes.iter().position(|q| *q == p);
            at.unwrap_or_else(|| {
                out.processes.push(p);
                out.processes.len() - 1
            }) as u32
        })
        .collect();
    let thread_base = out.threads.len() as u32;
    let task_base = out.async_spans.len() as u32;
    for mut thread in threads {
        thread.process = process[thread.process as usize];
        for span in &mut thread.spans {
            if let SpanKind::Poll {
                async_span: Some(task),
            } = &mut span.kind
            {
                *task += task_base;
            }
        }
        out.threads.push(thread);
    }
    out.async_spans
        .extend(async_spans.into_iter().map(|mut call| {
            call.process = process[call.process as usize];
            call
        }));
    out.flows.extend(links.into_iter().map(|mut link| {
        link.follower.thread += thread_base;
        if let Some(origin) = &mut link.origin {
            origin.thread += thread_base;
        }
        link
    }));
    if let Some(memory) = memory {
        let all = out.memory.get_or_insert_with(Default::default);
        all.mode = all.mode.max(memory.mode);
        let events = &mut all.events;
        let base = events.len() as u32;
        events.extend(memory.events.into_iter().map(|mut event| {
            event.process = process[event.process as usize];
            if let Some(matched) = &mut event.matched {
                *matched += base;
            }
            event
        }));
    }
    out.counters.extend(counters.into_iter().map(|mut track| {
        track.process = process[track.process as usize];
        track
    }));
    out.values.extend(values.into_iter().map(|mut series| {
        series.process = process[series.process as usize];
        series
    }));
    out.instants.extend(instants.into_iter().map(|mut instant| {
        instant.process = process[instant.process as usize];
        instant
    }));
    // Saturating: forged capture files may count anything.
    out.dropped_events = out.dropped_events.saturating_add(dropped_events);
    out.overwritten_events = out.overwritten_events.saturating_add(overwritten_events);
    out.cut_start_ns = out.cut_start_ns.max(cut_start_ns);
    out.event_count = out.event_count.saturating_add(event_count);
    let sum = &mut out.salvage;
    sum.sessions = sum.sessions.saturating_add(salvage.sessions);
    sum.lost_bytes = sum.lost_bytes.saturating_add(salvage.lost_bytes);
    sum.open_scopes = sum.open_scopes.saturating_add(salvage.open_scopes);
    sum.threads_without_records = sum
        .threads_without_records
        .saturating_add(salvage.threads_without_records);
}

/// Puts the async calls in order of their first poll and the allocations and frees in time
/// order, across processes (ties keep the order of the traces), and renumbers what points to
/// them.
fn sort_by_start(trace: &mut Trace) {
    trace.counters = super::counters::merge_tracks(std::mem::take(&mut trace.counters));
    trace.values = super::counters::merge_series(std::mem::take(&mut trace.values));
    trace.instants.sort_by_key(|i| i.ns);
    let calls = std::mem::take(&mut trace.async_spans);
    let (calls, new_call) = sort_by_key(calls, |call| call.start_ns);
    trace.async_spans = calls;
    if let Some(new_call) = new_call {
        for span in trace.threads.iter_mut().flat_map(|t| &mut t.spans) {
            if let SpanKind::Poll {
                async_span: Some(task),
            } = &mut span.kind
            {
                *task = new_call[*task as usize];
            }
        }
    }
    if let Some(memory) = &mut trace.memory {
        let events = std::mem::take(&mut memory.events);
        let (events, new_event) = sort_by_key(events, |event| event.ns);
        memory.events = events;
        if let Some(new_event) = new_event {
            for event in &mut memory.events {
                if let Some(matched) = &mut event.matched {
                    *matched = new_event[*matched as usize];
                }
            }
        }
    }
}

/// `items` sorted by `key`, stable, and the new index of each old one (`None` when nothing
/// moved).
fn sort_by_key<T>(items: Vec<T>, key: impl Fn(&T) -> u64) -> (Vec<T>, Option<Vec<u32>>) {
    if items.is_sorted_by_key(&key) {
        return (items, None);
    }
    let mut keyed: Vec<(u32, T)> = (0..).zip(items).collect();
    keyed.sort_by_key(|(_, item)| key(item));
    let mut new = vec![0; keyed.len()];
    for (at, &(old, _)) in (0..).zip(&keyed) {
        new[old as usize] = at;
    }
    (keyed.into_iter().map(|(_, item)| item).collect(), Some(new))
}
