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

fn installed() -> &'static Source {
    init();
    SOURCE.get().expect("initialised above")
}

/// The current raw tick. Used on the hot path, after a session has started.
#[inline(always)]
pub(crate) fn now() -> u64 {
    match SOURCE.get() {
        Some(source) => source.clock.raw(),
        None => installed().clock.raw(),
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
        let source = installed();
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

/// Calibration pairs taken while sessions run, at most one per [`CHECKPOINT_EVERY_NS`],
/// ascending: decoding interpolates between them (see `decode/convert.rs`), so that a long
/// session follows the system clock's corrections (NTP slews it by up to 500 ppm) instead of
/// one straight line from start to stop. At most [`MAX_CHECKPOINTS`]; the older half goes when
/// full.
static CHECKPOINTS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
/// The tick of the last checkpoint (0: none yet), read without the lock.
static LAST_CHECKPOINT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// A checkpoint at most this often.
pub(crate) const CHECKPOINT_EVERY_NS: u64 = 1_000_000_000;
/// Checkpoints kept: 9 hours at one a second.
const MAX_CHECKPOINTS: usize = 32_768;

/// Takes a checkpoint (a `(tick, unix_ns)` pair, the best of a few back-to-back reads) if the
/// last one is [`CHECKPOINT_EVERY_NS`] old; nothing with the mock clock. Called off the hot
/// path: by the prefaulter, a stream's writer and snapshots.
pub(crate) fn checkpoint() {
    use std::sync::atomic::Ordering;
    let source = installed();
    if source.mock.is_some() {
        return;
    }
    let now = source.clock.raw();
    let last = LAST_CHECKPOINT.load(Ordering::Relaxed);
    let every = tick_rate().map_or(CHECKPOINT_EVERY_NS, |rate| {
        (CHECKPOINT_EVERY_NS as f64 / rate.max(f64::MIN_POSITIVE)) as u64
    });
    if last != 0 && now.saturating_sub(last) < every {
        return;
    }
    let pair = (0..5)
        .map(|_| {
            let t0 = source.clock.raw();
            let wall = unix_ns(SystemTime::now());
            let t1 = source.clock.raw();
            (t1.saturating_sub(t0), (t0 + t1.saturating_sub(t0) / 2, wall))
        })
        .min_by_key(|&(gap, _)| gap)
        .map(|(_, pair)| pair);
    let Some(pair) = pair else { return };
    let _untracked = crate::record::untracked::Untracked::enter();
    let mut points = crate::record::sync::lock(&CHECKPOINTS);
    if points.last().is_some_and(|&(tick, _)| pair.0 <= tick) {
        return; // another thread took one just now
    }
    if points.len() >= MAX_CHECKPOINTS {
        points.drain(..MAX_CHECKPOINTS / 2);
    }
    points.push(pair);
    LAST_CHECKPOINT.store(pair.0, Ordering::Relaxed);
}

/// The checkpoints taken strictly between ticks `from` and `to`.
pub(crate) fn checkpoints_between(from: u64, to: u64) -> Vec<(u64, u64)> {
    let points = crate::record::sync::lock(&CHECKPOINTS);
    let first = points.partition_point(|&(tick, _)| tick <= from);
    let last = points.partition_point(|&(tick, _)| tick < to);
    points[first..last.max(first)].to_vec()
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The clock's own rate in nanoseconds per tick (quanta's calibration), or `None` when ticks
/// already are nanoseconds (a mock clock).
pub(crate) fn tick_rate() -> Option<f64> {
    let source = installed();
    if source.mock.is_some() {
        return None;
    }
    const PROBE: u64 = 1 << 40;
    Some(source.clock.delta_as_nanos(0, PROBE) as f64 / PROBE as f64)
}

/// Where this process's ticks come from; see [`source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClockSource {
    /// The CPU's invariant counter (the TSC on x86_64, read with `rdtsc`; the generic timer on
    /// aarch64): a few ns per read, the same rate on every core and in every power state.
    Cpu,
    /// The CPU's counter, which the CPU says is invariant but the OS does not vouch for (on
    /// Linux, `/proc/cpuinfo` lacks `constant_tsc` or `nonstop_tsc`): a virtual machine or a
    /// firmware that may let it stop in deep sleep or differ between cores, so times of
    /// different threads may disagree by that skew.
    CpuUnverified,
    /// The OS monotonic clock (`clock_gettime(CLOCK_MONOTONIC)`): the fallback where the CPU
    /// has no invariant counter, correct everywhere but 20 ns or more per read.
    Monotonic,
    /// The [mock clock](use_mock_clock): ticks are nanoseconds set by the test.
    Mock,
}

impl std::fmt::Display for ClockSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Cpu => "CPU counter (invariant TSC)",
            Self::CpuUnverified => {
                "CPU counter not confirmed constant and non-stop by the OS (times of different \
                 cores may disagree)"
            }
            Self::Monotonic => "OS monotonic clock (no invariant CPU counter)",
            Self::Mock => "mock clock",
        })
    }
}

/// Where this process's ticks come from: the clock quanta chose (it takes the CPU's counter
/// only where CPUID reports an invariant TSC and `rdtscp`, else the OS monotonic clock), and
/// on Linux whether the kernel confirms the TSC constant and non-stop.
///
/// ```
/// use tickscope::clock::{self, ClockSource};
///
/// let source = clock::source();
/// assert_ne!(source, ClockSource::Mock); // no test installed the mock clock here
/// println!("ticks from the {source}");
/// ```
pub fn source() -> ClockSource {
    static DETECTED: OnceLock<ClockSource> = OnceLock::new();
    if is_mock() {
        return ClockSource::Mock;
    }
    *DETECTED.get_or_init(detect)
}

/// What quanta does: the CPU counter where it is invariant and readable, else the OS clock.
fn detect() -> ClockSource {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // Leaf 0x8000_0007 EDX bit 8: invariant TSC; leaf 0x8000_0001 EDX bit 27: rdtscp.
        let max_extended = __cpuid(0x8000_0000).eax;
        let invariant = max_extended >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
        let rdtscp = max_extended >= 0x8000_0001 && __cpuid(0x8000_0001).edx & (1 << 27) != 0;
        if !(invariant && rdtscp) {
            return ClockSource::Monotonic;
        }
        match std::fs::read_to_string("/proc/cpuinfo") {
            Ok(info) if cfg!(target_os = "linux") => {
                let flags = info
                    .lines()
                    .find(|line| line.starts_with("flags"))
                    .unwrap_or("");
                let has = |flag: &str| flags.split_whitespace().any(|f| f == flag);
                if has("constant_tsc") && has("nonstop_tsc") {
                    ClockSource::Cpu
                } else {
                    ClockSource::CpuUnverified
                }
            }
            _ => ClockSource::Cpu,
        }
    }
    #[cfg(all(target_arch = "aarch64", not(target_os = "ios")))]
    {
        ClockSource::Cpu
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        all(target_arch = "aarch64", not(target_os = "ios"))
    )))]
    {
        ClockSource::Monotonic
    }
}

/// True when ticks are nanoseconds of a mock clock ([`use_mock_clock`]).
pub(crate) fn is_mock() -> bool {
    installed().mock.is_some()
}

/// What a session says about overhead compensation: the probe cost, in ticks, that decoding
/// subtracts from its spans' times.
///
/// A scope's probe is the work its guard does at entry and at exit around the two ticks it
/// stamps. Part of it falls between the two ticks, inside the scope's recorded duration
/// (`inner`: the work after the entry's tick and before the exit's); the rest falls outside,
/// in the parent's time (`outer`: the work before the entry's tick and after the exit's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Compensation {
    /// Nothing is known: a mock clock (ticks are exact nanoseconds), a capture made by hand, or
    /// a capture file written before compensation existed. Nothing is subtracted.
    #[default]
    Unknown,
    /// The session was started with compensation switched off: nothing is subtracted.
    Off,
    /// The probe cost calibrated at session start, subtracted at decoding, in units of
    /// 1/[`PROBE_UNIT`] tick (a probe costs a few dozen ticks: whole ticks would leave up to
    /// half a tick per child scope in a parent's self time).
    Ticks {
        /// Probe time of a scope inside its recorded duration.
        inner: u32,
        /// Probe time of a child outside its recorded duration (in its parent's).
        outer: u32,
    },
}

/// [`Compensation::Ticks`] counts in 1/256 tick.
pub(crate) const PROBE_UNIT: u64 = 256;

impl Compensation {
    /// The probe time to subtract, `(inner, outer)` in 1/[`PROBE_UNIT`] tick; zero unless
    /// calibrated.
    pub(crate) fn ticks(self) -> (u64, u64) {
        match self {
            Self::Ticks { inner, outer } => (u64::from(inner), u64::from(outer)),
            Self::Unknown | Self::Off => (0, 0),
        }
    }
}

/// The mean of the typical `values`, in 1/[`PROBE_UNIT`] of their unit (a median that keeps
/// fractions of a tick would miss a distribution of two modes, which sums see whole); 0 for
/// none. Values past four times the median (an interruption, a preempted thread) are left
/// out.
pub(crate) fn typical_mean(values: &mut [u64]) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let median = *values.select_nth_unstable(values.len() / 2).1;
    let cut = median.saturating_mul(4).saturating_add(4);
    let (sum, n) = values
        .iter()
        .filter(|&&v| v <= cut)
        .fold((0u128, 0u128), |(sum, n), &v| (sum + u128::from(v), n + 1));
    u64::try_from((sum * u128::from(PROBE_UNIT) + n / 2) / n.max(1)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typical_mean_keeps_fractions_and_both_modes_but_not_interruptions() {
        // Two modes, 20 and 30 ticks, three to one: 22.5 ticks; a preempted 10 000 is left out.
        let mut values = vec![20, 30, 20, 20, 10_000, 20, 30, 20, 20];
        assert_eq!(typical_mean(&mut values), 45 * PROBE_UNIT / 2);
        assert_eq!(typical_mean(&mut []), 0);
        assert_eq!(typical_mean(&mut [7]), 7 * PROBE_UNIT);
        assert_eq!(typical_mean(&mut [0, 0, 0, 1]), PROBE_UNIT / 4);
    }
}
