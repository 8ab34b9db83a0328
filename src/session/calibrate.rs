//! Calibration of the probe overhead that sessions subtract.

use std::sync::OnceLock;

use crate::record::clock::{self, Compensation};
use crate::record::registry;
use crate::record::thread;

use super::ProfilerBuilder;

/// The probe overhead to subtract in this process's sessions: calibrated once, by the first
/// session that compensates; [`Compensation::Unknown`] with the mock clock (exact times).
pub(super) fn probe_overhead() -> Compensation {
    static OVERHEAD: OnceLock<Compensation> = OnceLock::new();
    if clock::is_mock() {
        return Compensation::Unknown;
    }
    *OVERHEAD.get_or_init(calibrate_overhead)
}

/// Times empty scopes through the real probe, in short sessions of this thread of their own
/// that compensate nothing (observers do not see them): the middle of their durations is the
/// probe's part inside a scope, the middle of the gaps between one's exit and the next one's
/// entry the part outside it (what a child adds to its parent). Each is the mean of the typical
/// values (interruptions left out: [`clock::typical_mean`]), and of [`ROUNDS`] rounds the
/// least: the first ones warm the caches and the core up, and other
/// work on the core only adds time. The part outside includes the switches to a fresh chunk
/// (one per 2 048 scopes), shared among the scopes. About 33 000 scopes, under a millisecond.
fn calibrate_overhead() -> Compensation {
    // On a thread of its own that sessions of all threads leave out: the calibration's scopes
    // are the profiler's, not the program's.
    std::thread::Builder::new()
        .name("tickscope-calibrate".into())
        .spawn(|| {
            if let Some(entry) = thread::current_entry() {
                registry::make_private(entry.id);
            }
            calibrate_here()
        })
        .ok()
        .and_then(|handle| handle.join().ok())
        .unwrap_or(Compensation::Unknown)
}

/// [`calibrate_overhead`] on the calling thread.
fn calibrate_here() -> Compensation {
    let mut least: Option<(u64, u64)> = None;
    for _ in 0..ROUNDS {
        if let Some((inner, outer)) = calibration_round() {
            let (i, o) = least.get_or_insert((inner, outer));
            (*i, *o) = ((*i).min(inner), (*o).min(outer));
        }
    }
    match least {
        Some((inner, outer)) => Compensation::Ticks {
            inner: u32::try_from(inner).unwrap_or(u32::MAX),
            outer: u32::try_from(outer).unwrap_or(u32::MAX),
        },
        // Nothing recorded (a thread tearing down, instrumentation compiled out): nothing
        // known, nothing subtracted.
        None => Compensation::Unknown,
    }
}

/// Rounds of [`calibrate_overhead`].
const ROUNDS: usize = 8;

/// One round of [`calibrate_overhead`]: the probe's parts inside and outside a scope, in
/// 1/[`PROBE_UNIT`](clock::PROBE_UNIT) tick; `None` when nothing was recorded.
fn calibration_round() -> Option<(u64, u64)> {
    /// Scopes of a round: 4 096 fill two chunks, so a round switches chunks twice, as
    /// often as any scope does.
    const SCOPES: usize = 4096;
    static CALLSITE: crate::Callsite =
        crate::record::callsite::Callsite::new("tickscope::calibrate", file!(), line!(), "");
    let session = ProfilerBuilder::new()
        .current_thread()
        .compensate_overhead(false)
        .start();
    for _ in 0..SCOPES {
        let _g = crate::record::scope::ScopeGuard::enter_unobserved(&CALLSITE);
    }
    session.stop();
    let capture = session.capture();
    let (mut inner, mut outer) = (Vec::with_capacity(SCOPES), Vec::with_capacity(SCOPES));
    // Gaps that hold a switch to the next chunk (the entry is stamped after the switch).
    let mut switches = Vec::new();
    let (mut begin, mut end) = (None, None);
    for (n, chunk) in capture.threads.iter().flat_map(|t| &t.chunks).enumerate() {
        for (i, record) in chunk.records().iter().enumerate() {
            match record.kind {
                crate::record::event::RawKind::Begin => {
                    if let Some(end) = end.take() {
                        let gap = record.tick.saturating_sub(end);
                        if n > 0 && i == 0 {
                            switches.push(gap)
                        } else {
                            outer.push(gap)
                        }
                    }
                    begin = Some(record.tick);
                }
                crate::record::event::RawKind::End => {
                    if let Some(begin) = begin.take() {
                        inner.push(record.tick.saturating_sub(begin));
                    }
                    end = Some(record.tick);
                }
                _ => {}
            }
        }
    }
    if inner.is_empty() || outer.is_empty() {
        return None;
    }
    let gap = clock::typical_mean(&mut outer);
    // What the switches cost beyond a plain gap, shared among all the scopes.
    let extra: u64 = switches
        .iter()
        .map(|&s| (s * clock::PROBE_UNIT).saturating_sub(gap))
        .sum();
    let scopes = (outer.len() + switches.len()) as u64;
    Some((clock::typical_mean(&mut inner), gap + extra / scopes))
}
