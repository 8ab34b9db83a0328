//! Raw ticks for the hot path, the calibration pairs that later turn them into Unix
//! nanoseconds, and the mock clock for tests.
//!
//! Ticks come from quanta (the CPU's counter) with the `enabled` feature; without it (nothing
//! is recorded, and the build does without quanta) they are the OS monotonic clock's, or the
//! mock's.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

mod compensation;

pub(crate) use compensation::{Compensation, PROBE_UNIT, typical_mean};

/// The process-wide clock every event is stamped with.
struct Source {
    /// quanta's clock: the CPU's counter, or the OS clock where quanta finds no invariant
    /// counter, or a mock; unused when `os`.
    #[cfg(feature = "enabled")]
    clock: quanta::Clock,
    /// Ticks are the OS monotonic clock's, read through [`Instant`]: the fallback where the
    /// OS does not confirm the CPU's counter invariant, or the clock the program chose
    /// ([`use_os_clock`], [`CLOCK_ENV`]). A flag of its own, tested before quanta's clock is
    /// read, rather than a fourth kind of clock beside quanta's three (an `Option` of it):
    /// that four-way switch compiled to an indirect jump in front of every TSC read.
    os: bool,
    /// `Some` when the clock is a test mock: its ticks are nanoseconds already.
    mock: Option<Arc<Mock>>,
    /// Where the OS clock's ticks count from (less [`OS_TICK_BASE`]).
    origin: Instant,
}

/// The OS clock's tick at [`Source::origin`]: ticks are never 0 (0 means "none" in places).
const OS_TICK_BASE: u64 = 1 << 30;

/// The environment variable that chooses the clock when the process first needs it: `os`
/// for the OS monotonic clock, `cpu` for the CPU's counter even where the OS does not confirm
/// it invariant ([`ClockSource::CpuUnverified`]); unset, empty or any other value: the
/// CPU's counter where it is confirmed invariant, else the OS clock.
pub const CLOCK_ENV: &str = "TICKSCOPE_CLOCK";

impl Source {
    #[cfg(feature = "enabled")]
    fn quanta() -> Self {
        Self {
            clock: quanta::Clock::new(),
            os: false,
            mock: None,
            origin: Instant::now(),
        }
    }

    fn os() -> Self {
        Self {
            // Never read; a mock costs no calibration.
            #[cfg(feature = "enabled")]
            clock: quanta::Clock::mock().0,
            os: true,
            mock: None,
            origin: Instant::now(),
        }
    }

    /// The clock a process gets unless it chose one: [`CLOCK_ENV`], else the OS clock where
    /// the CPU's counter is not confirmed invariant. Without `enabled`, always the OS clock.
    #[cfg(feature = "enabled")]
    fn chosen() -> Self {
        let env = std::env::var(CLOCK_ENV).ok();
        if os_chosen(env.as_deref(), detected) {
            Self::os()
        } else {
            Self::quanta()
        }
    }

    /// Without `enabled` (no quanta), the OS clock.
    #[cfg(not(feature = "enabled"))]
    fn chosen() -> Self {
        Self::os()
    }

    /// The current raw tick.
    #[inline(always)]
    fn raw(&self) -> u64 {
        if self.os {
            os_ticks(self.origin)
        } else {
            #[cfg(feature = "enabled")]
            return self.clock.raw();
            // Without quanta, a source that is not the OS clock is the mock.
            #[cfg(not(feature = "enabled"))]
            return self.mock.as_ref().map_or(0, |mock| mock.value());
        }
    }
}

/// Whether a process whose [`CLOCK_ENV`] is `env` uses the OS clock: `os` says yes, `cpu` no
/// (either in any case, spaces around ignored), anything else leaves it to what `detected`
/// says of the CPU's counter: the OS clock where the OS does not confirm it invariant.
#[cfg(any(test, feature = "enabled"))]
fn os_chosen(env: Option<&str>, detected: impl FnOnce() -> ClockSource) -> bool {
    match env.map(str::trim) {
        Some(v) if v.eq_ignore_ascii_case("os") => true,
        Some(v) if v.eq_ignore_ascii_case("cpu") => false,
        _ => detected() == ClockSource::CpuUnverified,
    }
}

/// Nanoseconds of the OS monotonic clock since `origin`, plus [`OS_TICK_BASE`]. Out of line
/// and cold, so that the CPU counter's read stays a straight line.
#[cold]
#[inline(never)]
fn os_ticks(origin: Instant) -> u64 {
    let elapsed = origin.elapsed();
    // 2⁶⁴ ns is 584 years.
    (elapsed.as_secs() * 1_000_000_000 + u64::from(elapsed.subsec_nanos())) + OS_TICK_BASE
}

static SOURCE: OnceLock<Source> = OnceLock::new();
static INSTALL: Mutex<()> = Mutex::new(());

/// Error returned by [`use_mock_clock`] and [`use_os_clock`] when another clock is already in
/// use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockInUse;

impl std::fmt::Display for ClockInUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "another clock is already in use: choose the mock or the OS clock before any session \
             starts",
        )
    }
}

impl std::error::Error for ClockInUse {}

/// The handle of the mock clock ([`use_mock_clock`]): quanta's `Mock`, whose `increment`,
/// `decrement` and `value` move and read the clock in nanoseconds.
#[cfg(feature = "enabled")]
pub use quanta::{IntoNanoseconds, Mock};

/// The handle of the mock clock ([`use_mock_clock`]), in a build without the `enabled` feature
/// (and so without quanta, whose `Mock` it is in a build with it): the same methods.
#[cfg(not(feature = "enabled"))]
#[derive(Debug, Default)]
pub struct Mock {
    nanos: std::sync::atomic::AtomicU64,
}

#[cfg(not(feature = "enabled"))]
impl Mock {
    /// Moves the clock forward by `amount` nanoseconds.
    pub fn increment<N: IntoNanoseconds>(&self, amount: N) {
        let amount = amount.into_nanos();
        self.nanos
            .fetch_add(amount, std::sync::atomic::Ordering::Release);
    }

    /// Moves the clock back by `amount` nanoseconds.
    pub fn decrement<N: IntoNanoseconds>(&self, amount: N) {
        let amount = amount.into_nanos();
        self.nanos
            .fetch_sub(amount, std::sync::atomic::Ordering::Release);
    }

    /// The clock's current value in nanoseconds.
    pub fn value(&self) -> u64 {
        self.nanos.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Amounts that [`Mock`] moves by: nanoseconds as a `u64`, or a [`Duration`](std::time::Duration)
/// (quanta's trait of that name in a build with the `enabled` feature).
#[cfg(not(feature = "enabled"))]
pub trait IntoNanoseconds {
    /// The amount in nanoseconds.
    fn into_nanos(self) -> u64;
}

#[cfg(not(feature = "enabled"))]
impl IntoNanoseconds for u64 {
    fn into_nanos(self) -> u64 {
        self
    }
}

#[cfg(not(feature = "enabled"))]
impl IntoNanoseconds for std::time::Duration {
    fn into_nanos(self) -> u64 {
        self.as_nanos() as u64
    }
}

/// Makes every event in this process use a [`Mock`] clock whose ticks are nanoseconds,
/// for tests that assert exact durations. Returns the handle that advances it.
///
/// Call it before the first session starts; calling it again returns the same mock. Sessions
/// then report times as nanoseconds since the Unix epoch equal to the mock's value.
///
/// A session's window takes in the records stamped with its start tick, and the mock stands
/// still unless moved: a session started right after another session's last records, with the
/// mock not moved in between, takes those records in too, where it records their thread (its
/// own thread, or any thread for a session of all threads such as a flight recorder): an
/// instant counted twice, or a thread with exits of scopes it never saw begin. Tests that run
/// sessions one after another move the mock by a tick before each start.
pub fn use_mock_clock() -> Result<Arc<Mock>, ClockInUse> {
    let _guard = crate::record::sync::lock(&INSTALL);
    let source = SOURCE.get_or_init(|| {
        #[cfg(feature = "enabled")]
        let (clock, mock) = quanta::Clock::mock();
        #[cfg(not(feature = "enabled"))]
        let mock = Arc::new(Mock::default());
        Source {
            #[cfg(feature = "enabled")]
            clock,
            os: false,
            mock: Some(mock),
            origin: Instant::now(),
        }
    });
    source.mock.clone().ok_or(ClockInUse)
}

/// Makes every event in this process use the OS monotonic clock (`clock_gettime(CLOCK_MONOTONIC)`
/// on Linux, through [`std::time::Instant`]), whatever the CPU's counter: ticks are then
/// nanoseconds, at 20 ns or more per read instead of a few. The same as setting [`CLOCK_ENV`]
/// to `os`; a process gets it anyway where the OS does not confirm the CPU's counter invariant.
/// [`source`] then says [`ClockSource::Monotonic`].
///
/// Call it before the first session starts; calling it again is fine.
///
/// ```no_run
/// tickscope::clock::use_os_clock().expect("before any session");
/// assert_eq!(tickscope::clock::source(), tickscope::clock::ClockSource::Monotonic);
/// ```
pub fn use_os_clock() -> Result<(), ClockInUse> {
    let _guard = crate::record::sync::lock(&INSTALL);
    let source = SOURCE.get_or_init(Source::os);
    if source.os { Ok(()) } else { Err(ClockInUse) }
}

/// Makes sure the clock exists, calibrating it if needed. Called at session start, so neither
/// `main`'s start nor the first scope pays for calibration.
pub(crate) fn init() {
    if SOURCE.get().is_none() {
        let _guard = crate::record::sync::lock(&INSTALL);
        SOURCE.get_or_init(Source::chosen);
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
        Some(source) => source.raw(),
        None => installed().raw(),
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
            let t = source.raw();
            return Self {
                pairs: vec![(t, t)],
            };
        }
        let pairs = (0..Self::SAMPLES)
            .map(|_| {
                let t0 = source.raw();
                let wall = unix_ns(SystemTime::now());
                let t1 = source.raw();
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
    let now = source.raw();
    let last = LAST_CHECKPOINT.load(Ordering::Relaxed);
    let every = tick_rate().map_or(CHECKPOINT_EVERY_NS, |rate| {
        (CHECKPOINT_EVERY_NS as f64 / rate.max(f64::MIN_POSITIVE)) as u64
    });
    if last != 0 && now.saturating_sub(last) < every {
        return;
    }
    let pair = (0..5)
        .map(|_| {
            let t0 = source.raw();
            let wall = unix_ns(SystemTime::now());
            let t1 = source.raw();
            (
                t1.saturating_sub(t0),
                (t0 + t1.saturating_sub(t0) / 2, wall),
            )
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

/// The clock's own rate in nanoseconds per tick (quanta's calibration; 1 for the OS clock),
/// or `None` when ticks already are Unix nanoseconds (a mock clock).
pub(crate) fn tick_rate() -> Option<f64> {
    let source = installed();
    if source.mock.is_some() {
        return None;
    }
    if source.os {
        return Some(1.0);
    }
    // Without `enabled`, a source that is neither the OS clock nor the mock does not exist.
    #[cfg(not(feature = "enabled"))]
    return Some(1.0);
    #[cfg(feature = "enabled")]
    {
        const PROBE: u64 = 1 << 40;
        Some(source.clock.delta_as_nanos(0, PROBE) as f64 / PROBE as f64)
    }
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
    /// different threads may disagree by that skew. A process uses it only when told to
    /// ([`CLOCK_ENV`]`=cpu`); otherwise it falls back to [`Monotonic`](Self::Monotonic).
    CpuUnverified,
    /// The OS monotonic clock (`clock_gettime(CLOCK_MONOTONIC)`): the fallback where the CPU
    /// has no invariant counter or the OS does not confirm it invariant, and the clock chosen
    /// with [`use_os_clock`] or [`CLOCK_ENV`]`=os`; correct everywhere but 20 ns or more per
    /// read.
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
            Self::Monotonic => {
                "OS monotonic clock (no CPU counter confirmed invariant, or the OS clock chosen)"
            }
            Self::Mock => "mock clock",
        })
    }
}

/// Where this process's ticks come from: the CPU's counter where CPUID reports an invariant
/// TSC and `rdtscp` and, on Linux, the kernel confirms it constant and non-stop; else the OS
/// monotonic clock. [`use_os_clock`] and [`CLOCK_ENV`] choose otherwise.
///
/// ```
/// use tickscope::clock::{self, ClockSource};
///
/// let source = clock::source();
/// assert_ne!(source, ClockSource::Mock); // no test installed the mock clock here
/// println!("ticks from the {source}");
/// ```
pub fn source() -> ClockSource {
    let source = installed();
    if source.mock.is_some() {
        ClockSource::Mock
    } else if source.os {
        ClockSource::Monotonic
    } else {
        detected()
    }
}

/// What the CPU and the OS say of the CPU's counter (see [`detect`]), read once.
fn detected() -> ClockSource {
    static DETECTED: OnceLock<ClockSource> = OnceLock::new();
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

/// A duration with a unit that keeps 3 to 4 significant digits (`812 ns`, `1.50 µs`,
/// `3.20 ms`, `1.250 s`): what tables and messages show ([`crate::table::format_ns`]).
#[cfg(not(loom))]
pub(crate) fn format_ns(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.2} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_clock_is_chosen_by_the_environment_or_an_unconfirmed_tsc() {
        use ClockSource::{Cpu, CpuUnverified, Monotonic};
        let cases = [
            (None, Cpu, false),
            (None, CpuUnverified, true),
            // quanta reads the OS clock itself where the CPU has no invariant counter.
            (None, Monotonic, false),
            (Some("os"), Cpu, true),
            (Some(" OS "), Cpu, true),
            (Some("cpu"), CpuUnverified, false),
            (Some("Cpu"), CpuUnverified, false),
            (Some(""), CpuUnverified, true),
            (Some("tsc?"), Cpu, false),
            (Some("tsc?"), CpuUnverified, true),
        ];
        for (env, detected, os) in cases {
            assert_eq!(os_chosen(env, || detected), os, "{env:?} {detected:?}");
        }
        // `os` and `cpu` need no look at the CPU.
        assert!(os_chosen(Some("os"), || unreachable!()));
        assert!(!os_chosen(Some("cpu"), || unreachable!()));
    }

    #[test]
    fn os_ticks_are_nanoseconds_from_the_base() {
        let origin = Instant::now();
        let t = os_ticks(origin);
        assert!(t >= OS_TICK_BASE);
        let later = os_ticks(origin);
        assert!(later >= t);
    }
}
