//! Raw ticks for the hot path, and the calibrated tick → Unix-nanosecond [`Converter`].

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// The process-wide clock every event is stamped with.
struct Source {
    clock: quanta::Clock,
    /// `Some` when the clock is a test mock: its ticks are nanoseconds already.
    mock: Option<Arc<quanta::Mock>>,
}

static SOURCE: OnceLock<Source> = OnceLock::new();
static INSTALL: Mutex<()> = Mutex::new(());

/// Error returned by [`use_mock_clock`] when the real clock is already in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockInUse;

impl std::fmt::Display for ClockInUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the real clock is already in use: install the mock clock before any session starts",
        )
    }
}

impl std::error::Error for ClockInUse {}

/// Makes every event in this process use a [`quanta::Mock`] clock whose ticks are nanoseconds,
/// for tests that assert exact durations. Returns the handle that advances it.
///
/// Call it before the first session starts; calling it again returns the same mock. Sessions
/// then report times as nanoseconds since the Unix epoch equal to the mock's value.
pub fn use_mock_clock() -> Result<Arc<quanta::Mock>, ClockInUse> {
    let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let source = SOURCE.get_or_init(|| {
        let (clock, mock) = quanta::Clock::mock();
        Source {
            clock,
            mock: Some(mock),
        }
    });
    source.mock.clone().ok_or(ClockInUse)
}

/// Makes sure the clock exists, calibrating it if needed. Called at session start, so neither
/// `main`'s start nor the first scope pays for calibration.
pub(crate) fn init() {
    if SOURCE.get().is_none() {
        let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
        SOURCE.get_or_init(|| Source {
            clock: quanta::Clock::new(),
            mock: None,
        });
    }
}

fn source() -> &'static Source {
    init();
    SOURCE.get().expect("initialised above")
}

/// The current raw tick. Used on the hot path, after a session has started.
#[inline(always)]
pub(crate) fn now() -> u64 {
    match SOURCE.get() {
        Some(source) => source.clock.raw(),
        None => source().clock.raw(),
    }
}

/// One calibration point: ticks and system times read back to back, many times.
#[derive(Debug, Clone, Default)]
pub struct Calibration {
    /// `(tick, unix_ns)` pairs; the tick is the midpoint of the reads around the system time.
    pub pairs: Vec<(u64, u64)>,
}

impl Calibration {
    const SAMPLES: usize = 33;

    /// Reads [`Self::SAMPLES`] pairs now.
    pub(crate) fn sample() -> Self {
        let source = source();
        if source.mock.is_some() {
            let t = source.clock.raw();
            return Self {
                pairs: vec![(t, t)],
            };
        }
        let pairs = (0..Self::SAMPLES)
            .map(|_| {
                let t0 = source.clock.raw();
                let wall = unix_ns(SystemTime::now());
                let t1 = source.clock.raw();
                (t0 + t1.saturating_sub(t0) / 2, wall)
            })
            .collect();
        Self { pairs }
    }
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Maps raw ticks to nanoseconds since the Unix epoch: `ns = base_ns + (tick - base_tick) × scale`.
///
/// Built after collection from the calibration points taken at session start and stop (the
/// PyTorch profiler's `ApproximateClockToUnixTimeConverter` does the same): the scale is the
/// median over the pairs of (Δsystem time / Δticks) when the session lasted long enough for that
/// to beat the clock's own calibration, and the offset is the median over all pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Converter {
    base_tick: u64,
    base_ns: u64,
    scale: f64,
}

impl Converter {
    /// Sessions shorter than this use the clock's own tick rate instead of the measured one.
    const MIN_SPAN_NS: u64 = 50_000_000;

    /// The identity: ticks are already Unix nanoseconds (mock clocks).
    pub const IDENTITY: Self = Self {
        base_tick: 0,
        base_ns: 0,
        scale: 1.0,
    };

    /// A converter with an explicit anchor and rate.
    pub const fn new(base_tick: u64, base_ns: u64, ns_per_tick: f64) -> Self {
        Self {
            base_tick,
            base_ns,
            scale: ns_per_tick,
        }
    }

    /// Builds the converter of the process clock from its start and stop calibrations.
    pub(crate) fn calibrated(start: &Calibration, stop: &Calibration) -> Self {
        let source = source();
        if source.mock.is_some() {
            return Self::IDENTITY;
        }
        // quanta's own calibration, as a rate: exact enough over short spans.
        const PROBE: u64 = 1 << 40;
        let clock_rate = source.clock.delta_as_nanos(0, PROBE) as f64 / PROBE as f64;
        Self::from_calibrations(start, stop, clock_rate)
    }

    /// Builds a converter from two calibrations, falling back to `clock_rate` (ns per tick)
    /// when they are too close together to measure the rate.
    pub fn from_calibrations(start: &Calibration, stop: &Calibration, clock_rate: f64) -> Self {
        let Some(&(base_tick, _)) = start.pairs.first().or(stop.pairs.first()) else {
            return Self::new(0, 0, clock_rate);
        };
        let n = start.pairs.len().min(stop.pairs.len());
        let span_ns = match (start.pairs.first(), stop.pairs.first()) {
            (Some(a), Some(b)) => b.1.saturating_sub(a.1),
            _ => 0,
        };
        let scale = if span_ns >= Self::MIN_SPAN_NS && n > 0 {
            let mut rates: Vec<f64> = start.pairs[..n]
                .iter()
                .zip(&stop.pairs[..n])
                .filter(|(a, b)| b.0 > a.0)
                .map(|(a, b)| (b.1 as f64 - a.1 as f64) / (b.0 - a.0) as f64)
                .collect();
            median(&mut rates).unwrap_or(clock_rate)
        } else {
            clock_rate
        };
        let mut offsets: Vec<f64> = start
            .pairs
            .iter()
            .chain(&stop.pairs)
            .map(|&(tick, ns)| ns as f64 - (tick as f64 - base_tick as f64) * scale)
            .collect();
        let base_ns = median(&mut offsets).unwrap_or(0.0).max(0.0).round() as u64;
        Self {
            base_tick,
            base_ns,
            scale,
        }
    }

    /// Nanoseconds since the Unix epoch at `tick`.
    #[inline]
    pub fn to_unix_ns(&self, tick: u64) -> u64 {
        // i64 holds ±292 years of nanoseconds; float-to-int casts saturate, and so does the
        // sum, so absurd ticks clamp instead of wrapping. (An i128 here costs a library call per
        // event.)
        let delta = if tick >= self.base_tick {
            ((tick - self.base_tick) as f64 * self.scale) as i64
        } else {
            -(((self.base_tick - tick) as f64 * self.scale) as i64)
        };
        let base = i64::try_from(self.base_ns).unwrap_or(i64::MAX);
        base.saturating_add(delta).max(0) as u64
    }

    /// Nanoseconds per tick.
    pub fn ns_per_tick(&self) -> f64 {
        self.scale
    }
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrations_give_rate_and_offset() {
        // 2 ticks per ns, tick 1_000 at 10 s after the epoch, stop 1 s later.
        let start = Calibration {
            pairs: vec![(1_000, 10_000_000_000), (1_002, 10_000_000_001)],
        };
        let stop = Calibration {
            pairs: vec![
                (2_000_001_000, 11_000_000_000),
                (2_000_001_002, 11_000_000_001),
            ],
        };
        let c = Converter::from_calibrations(&start, &stop, 99.0);
        assert_eq!(c.ns_per_tick(), 0.5);
        assert_eq!(c.to_unix_ns(1_000), 10_000_000_000);
        assert_eq!(c.to_unix_ns(1_000_001_000), 10_500_000_000);
        assert_eq!(c.to_unix_ns(0), 9_999_999_500);
    }

    #[test]
    fn short_sessions_use_the_clock_rate() {
        let start = Calibration {
            pairs: vec![(100, 5_000)],
        };
        let stop = Calibration {
            pairs: vec![(300, 5_100)],
        };
        let c = Converter::from_calibrations(&start, &stop, 0.25);
        assert_eq!(c.ns_per_tick(), 0.25);
        // Offsets at that rate: 5 000 (start) and 5 100 - 200 × 0.25 = 5 050 (stop); the median
        // of an even count is the upper one.
        assert_eq!(c.to_unix_ns(100), 5_050);
        assert_eq!(c.to_unix_ns(300), 5_100);
    }
}
