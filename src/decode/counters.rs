//! Counter and value samples, merged across threads into tracks and series.

use std::collections::BTreeMap;

use crate::record::event::{RawEvent, RawKind};
use crate::trace::{CounterOp, CounterSample, CounterTrack, Number, ValueSample, ValueSeries};

/// A counter or value sample of one thread, decoded but not yet merged.
#[derive(Clone, Copy, Debug)]
pub(super) struct RawSample {
    pub(super) ns: u64,
    pub(super) name: &'static str,
    pub(super) thread: u64,
    /// `Some` for a counter, `None` for a value.
    pub(super) op: Option<CounterOp>,
    pub(super) number: Number,
}

/// The operation of a sample record of `kind`: `Some(Some(op))` for a counter,
/// `Some(None)` for a value, `None` for other kinds.
pub(super) fn sample_kind(kind: RawKind) -> Option<Option<CounterOp>> {
    match kind {
        RawKind::CounterSet => Some(Some(CounterOp::Set)),
        RawKind::CounterAdd => Some(Some(CounterOp::Add)),
        RawKind::Value => Some(None),
        _ => None,
    }
}

/// The number a sample's payload holds; `None` for a type tag this build does not know.
pub(super) fn number(payload: &RawEvent) -> Option<Number> {
    match payload.id {
        RawEvent::NUMBER_INT => Some(Number::Int(payload.tick as i64)),
        RawEvent::NUMBER_FLOAT => Some(Number::Float(f64::from_bits(payload.tick))),
        _ => None,
    }
}

/// Merges the samples of every thread of a process (thread by thread, each in recorded
/// order) into one counter track per name and one value series per name, ordered by name.
/// Samples are put in time order; ties keep the order they came in.
pub(super) fn merge(
    samples: Vec<RawSample>,
    process: u32,
) -> (Vec<CounterTrack>, Vec<ValueSeries>) {
    let mut counters: BTreeMap<&'static str, Vec<CounterSample>> = BTreeMap::new();
    let mut values: BTreeMap<&'static str, Vec<ValueSample>> = BTreeMap::new();
    for s in samples {
        match s.op {
            Some(op) => counters.entry(s.name).or_default().push(CounterSample {
                ns: s.ns,
                thread: s.thread,
                op,
                amount: s.number,
                value: s.number,
            }),
            None => values.entry(s.name).or_default().push(ValueSample {
                ns: s.ns,
                thread: s.thread,
                value: s.number,
            }),
        }
    }
    let counters = counters
        .into_iter()
        .map(|(name, mut samples)| {
            samples.sort_by_key(|s| s.ns);
            running(&mut samples);
            CounterTrack {
                name,
                process,
                samples,
            }
        })
        .collect();
    let values = values
        .into_iter()
        .map(|(name, mut samples)| {
            samples.sort_by_key(|s| s.ns);
            ValueSeries {
                name,
                process,
                samples,
            }
        })
        .collect();
    (counters, values)
}

/// Sets each sample's `value`, the counter's value after it, from the samples in order: a
/// set replaces the value, an add adds to it (from 0).
pub(super) fn running(samples: &mut [CounterSample]) {
    let mut value = Number::Int(0);
    for s in samples {
        value = match s.op {
            CounterOp::Set => s.amount,
            CounterOp::Add => value + s.amount,
        };
        s.value = value;
    }
}

/// Merges tracks of several traces: tracks of one process and name become one, in time order
/// (ties keep the order of the traces), with their running values computed again; the result
/// is ordered by process then name.
pub(super) fn merge_tracks(tracks: Vec<CounterTrack>) -> Vec<CounterTrack> {
    let tracks = tracks.into_iter().map(|t| ((t.process, t.name), t.samples));
    merge_by_name(tracks, |s| s.ns)
        .map(|((process, name), mut samples)| {
            running(&mut samples);
            CounterTrack {
                name,
                process,
                samples,
            }
        })
        .collect()
}

/// [`merge_tracks`] for value series.
pub(super) fn merge_series(series: Vec<ValueSeries>) -> Vec<ValueSeries> {
    let series = series.into_iter().map(|v| ((v.process, v.name), v.samples));
    merge_by_name(series, |s| s.ns)
        .map(|((process, name), samples)| ValueSeries {
            name,
            process,
            samples,
        })
        .collect()
}

/// The samples of every track of one process and name together, in time order (`ns`; ties
/// keep the order of the tracks), ordered by process then name.
fn merge_by_name<S>(
    tracks: impl Iterator<Item = ((u32, &'static str), Vec<S>)>,
    ns: impl Fn(&S) -> u64,
) -> impl Iterator<Item = ((u32, &'static str), Vec<S>)> {
    let mut by: BTreeMap<(u32, &'static str), Vec<S>> = BTreeMap::new();
    for (key, samples) in tracks {
        by.entry(key).or_default().extend(samples);
    }
    by.into_iter().map(move |(key, mut samples)| {
        samples.sort_by_key(&ns);
        (key, samples)
    })
}
