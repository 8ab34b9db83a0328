//! Raw ticks for the hot path, the calibration pairs that later turn them into Unix
//! nanoseconds, and the mock clock for tests.

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
    let _guard = crate::record::sync::lock(&INSTALL);
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
        let _guard = crate::record::sync::lock(&INSTALL);
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Calibration {
    /// `(tick, unix_ns)` pairs; the tick is the midpoint of the reads around the system time.
    pub(crate) pairs: Vec<(u64, u64)>,
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

/// The clock's own rate in nanoseconds per tick (quanta's calibration), or `None` when ticks
/// already are nanoseconds (a mock clock).
pub(crate) fn tick_rate() -> Option<f64> {
    let source = source();
    if source.mock.is_some() {
        return None;
    }
    const PROBE: u64 = 1 << 40;
    Some(source.clock.delta_as_nanos(0, PROBE) as f64 / PROBE as f64)
}
