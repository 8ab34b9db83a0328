//! Ticks to Unix nanoseconds: the [`Converter`] built from a capture's calibration pairs and
//! checkpoints.

use crate::record::clock::Calibration;

/// Ticks to Unix nanoseconds for a window: the straight [`Line`] fitted to its start and stop
/// calibrations, bent through the checkpoints taken while it ran (`clock::checkpoint`, about
/// one a second), so that a long window follows the system clock's corrections (NTP slews it
/// by up to 500 ppm: 30 µs a minute) instead of a single rate.
///
/// Between two knots (the line's value at the window's first start pair, each checkpoint, the
/// line's value at its first stop pair) ticks are interpolated linearly and clamped to the
/// knots' nanoseconds, so the mapping never goes back; before the first knot and after the last
/// the line applies, which meets them there. A checkpoint whose slope from the knot before, or
/// to the last knot, strays from the line's rate by more than [`MAX_SLEW`] is a step of the
/// system clock, not a slew, and is left out. Durations ([`Converter::ticks_to_ns`]) use the
/// line's rate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Converter {
    whole: Line,
    /// The pieces between knots, ascending; empty without checkpoints.
    pieces: Vec<Piece>,
}

/// Interpolation from knot `(from, from_ns)` to knot `(to, to_ns)`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Piece {
    from: u64,
    to: u64,
    from_ns: u64,
    to_ns: u64,
    line: Line,
}

/// Nanoseconds per tick from knot `a` to knot `b` (`b`'s tick after `a`'s), the differences
/// taken in integers: Unix nanoseconds as doubles are rounded to 256 ns.
fn slope(a: (u64, u64), b: (u64, u64)) -> f64 {
    (i128::from(b.1) - i128::from(a.1)) as f64 / b.0.saturating_sub(a.0).max(1) as f64
}

/// How far a checkpoint's slope may stray from the window's rate: NTP slews by at most 500 ppm;
/// more is a step of the system clock.
pub(crate) const MAX_SLEW: f64 = 1e-3;

impl Converter {
    /// The identity: ticks are already Unix nanoseconds (mock clocks).
    #[cfg(test)]
    pub(crate) const IDENTITY: Self = Self {
        whole: Line::IDENTITY,
        pieces: Vec::new(),
    };

    /// The converter of a window with `start` and `stop` calibrations and `checkpoints`
    /// between them, for a clock of `clock_rate` ns per tick (`None`: ticks are nanoseconds
    /// already, and nothing is bent).
    pub(crate) fn new(
        start: &Calibration,
        stop: &Calibration,
        clock_rate: Option<f64>,
        checkpoints: &[(u64, u64)],
    ) -> Self {
        let whole = Line::calibrated(start, stop, clock_rate);
        let ends = (start.pairs.first(), stop.pairs.first());
        let (Some(_), Some(&(first, _)), Some(&(last, _))) = (clock_rate, ends.0, ends.1) else {
            return Self {
                whole,
                pieces: Vec::new(),
            };
        };
        let rate = whole.ns_per_tick();
        let slope_ok = |a: (u64, u64), b: (u64, u64)| {
            b.0 > a.0 && (slope(a, b) - rate).abs() <= rate * MAX_SLEW
        };
        let end = (last, whole.to_unix_ns(last));
        let mut knots = vec![(first, whole.to_unix_ns(first))];
        for &point in checkpoints {
            let prev = *knots.last().unwrap_or(&end);
            if point.0 > prev.0 && point.0 < last && slope_ok(prev, point) {
                knots.push(point);
            }
        }
        // The last piece must hold too: leave out checkpoints until it does.
        while knots.len() > 1 && !slope_ok(knots[knots.len() - 1], end) {
            knots.pop();
        }
        if knots.len() == 1 {
            return Self {
                whole,
                pieces: Vec::new(),
            };
        }
        knots.push(end);
        let pieces = knots
            .windows(2)
            .map(|pair| {
                let (a, b) = (pair[0], pair[1]);
                Piece {
                    from: a.0,
                    to: b.0,
                    from_ns: a.1,
                    to_ns: b.1.max(a.1),
                    line: Line::new(a.0, a.1, slope(a, b)),
                }
            })
            .collect();
        Self { whole, pieces }
    }

    /// Nanoseconds since the Unix epoch at `tick` (saturating at 0 and `u64::MAX`).
    #[inline]
    pub(crate) fn to_unix_ns(&self, tick: u64) -> u64 {
        // The usual case, no checkpoint to bend through: one line, inlined where it is used.
        if self.pieces.is_empty() {
            return self.whole.to_unix_ns(tick);
        }
        self.bent_to_unix_ns(tick)
    }

    /// [`Converter::to_unix_ns`] with checkpoints.
    #[inline(never)]
    fn bent_to_unix_ns(&self, tick: u64) -> u64 {
        match (self.pieces.first(), self.pieces.last()) {
            (Some(first), Some(last)) if tick >= first.from && tick < last.to => {
                let piece = &self.pieces[self.pieces.partition_point(|p| p.to <= tick)];
                piece
                    .line
                    .to_unix_ns(tick)
                    .clamp(piece.from_ns, piece.to_ns)
            }
            _ => self.whole.to_unix_ns(tick),
        }
    }

    /// Nanoseconds for a span of `ticks` ticks at the window's rate.
    #[inline]
    pub(crate) fn ticks_to_ns(&self, ticks: u64) -> u64 {
        self.whole.ticks_to_ns(ticks)
    }

    /// Nanoseconds per tick over the window.
    pub(crate) fn ns_per_tick(&self) -> f64 {
        self.whole.ns_per_tick()
    }

    /// The checkpoints the converter bends through (knots other than the two ends).
    #[cfg(test)]
    fn bends(&self) -> usize {
        self.pieces.len().saturating_sub(1)
    }
}

/// One straight line from raw ticks to nanoseconds since the Unix epoch:
/// `ns = base_ns + (tick - base_tick) × scale`.
///
/// Built after collection from the calibration points taken at session start and stop (the
/// PyTorch profiler's `ApproximateClockToUnixTimeConverter` does the same): the scale is the
/// median over the pairs of (Δsystem time / Δticks) when the session lasted long enough for that
/// to beat the clock's own calibration, and the offset is the median over all pairs.
///
/// The arithmetic is integer: the scale is held as a whole part and a 64-bit binary fraction,
/// and each conversion is two multiplications of the tick's distance from the anchor, rounded
/// to the nearest nanosecond. So nanoseconds stay exact at any tick value and any uptime (a
/// double would round them to 256 ns once values pass 2⁵³, about five weeks of a 2–3 GHz TSC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    base_tick: u64,
    base_ns: u64,
    /// Whole nanoseconds per tick.
    whole: u64,
    /// The fraction of a nanosecond per tick, in units of 2⁻⁶⁴.
    frac: u64,
}

impl Line {
    /// Sessions shorter than this use the clock's own tick rate instead of the measured one.
    const MIN_SPAN_NS: u64 = 50_000_000;

    /// The identity: ticks are already Unix nanoseconds (mock clocks).
    pub(crate) const IDENTITY: Self = Self::new(0, 0, 1.0);

    /// A converter with an explicit anchor and rate (negative or NaN rates count as 0).
    pub(crate) const fn new(base_tick: u64, base_ns: u64, ns_per_tick: f64) -> Self {
        let whole = ns_per_tick as u64;
        let frac = ((ns_per_tick - whole as f64) * TWO_POW_64) as u64;
        Self {
            base_tick,
            base_ns,
            whole,
            frac,
        }
    }

    /// Builds a converter from two calibrations, falling back to `clock_rate` (ns per tick)
    /// when they are too close together to measure the rate; the identity when `clock_rate`
    /// is `None` (ticks are nanoseconds already).
    pub(crate) fn calibrated(
        start: &Calibration,
        stop: &Calibration,
        clock_rate: Option<f64>,
    ) -> Self {
        match clock_rate {
            Some(rate) => Self::from_calibrations(start, stop, rate),
            None => Self::IDENTITY,
        }
    }

    /// Builds a converter from two calibrations, falling back to `clock_rate` (ns per tick)
    /// when they are too close together to measure the rate.
    pub(crate) fn from_calibrations(
        start: &Calibration,
        stop: &Calibration,
        clock_rate: f64,
    ) -> Self {
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
                .map(|(a, b)| (b.1 as i128 - a.1 as i128) as f64 / (b.0 - a.0) as f64)
                .collect();
            median(&mut rates).unwrap_or(clock_rate)
        } else {
            clock_rate
        };
        let rate = Self::new(base_tick, 0, scale);
        // Offsets in integers: a double would round Unix nanoseconds to 256 ns.
        let mut offsets: Vec<i128> = start
            .pairs
            .iter()
            .chain(&stop.pairs)
            .map(|&(tick, ns)| i128::from(ns) - rate.signed_delta_ns(tick))
            .collect();
        offsets.sort_unstable();
        let base_ns = offsets.get(offsets.len() / 2).copied().unwrap_or(0);
        Self {
            base_ns: u64::try_from(base_ns.max(0)).unwrap_or(u64::MAX),
            ..rate
        }
    }

    /// Nanoseconds for `ticks` ticks, rounded to the nearest (saturating).
    #[inline]
    fn scaled(&self, ticks: u64) -> u64 {
        let whole = ticks.saturating_mul(self.whole);
        let frac = (u128::from(ticks) * u128::from(self.frac) + (1 << 63)) >> 64;
        whole.saturating_add(frac as u64)
    }

    /// Nanoseconds from the anchor to `tick`, signed.
    fn signed_delta_ns(&self, tick: u64) -> i128 {
        if tick >= self.base_tick {
            i128::from(self.scaled(tick - self.base_tick))
        } else {
            -i128::from(self.scaled(self.base_tick - tick))
        }
    }

    /// Nanoseconds since the Unix epoch at `tick` (saturating at 0 and `u64::MAX`).
    #[inline]
    pub(crate) fn to_unix_ns(self, tick: u64) -> u64 {
        if tick >= self.base_tick {
            self.base_ns
                .saturating_add(self.scaled(tick - self.base_tick))
        } else {
            self.base_ns
                .saturating_sub(self.scaled(self.base_tick - tick))
        }
    }

    /// Nanoseconds for a span of `ticks` ticks, rounded to the nearest (saturating).
    #[inline]
    pub(crate) fn ticks_to_ns(&self, ticks: u64) -> u64 {
        self.scaled(ticks)
    }

    /// Nanoseconds per tick.
    pub(crate) fn ns_per_tick(&self) -> f64 {
        self.whole as f64 + self.frac as f64 / TWO_POW_64
    }
}

/// 2⁶⁴ as a double (exact).
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

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

    /// A system clock that runs at 1 ns per tick, then slews by +500 ppm from tick 10⁹ on
    /// (NTP catching up), over a 60 s window starting at Unix time 1.7 × 10¹⁸ ns.
    fn slewed(tick: u64) -> u64 {
        const BASE: u64 = 1_700_000_000_000_000_000;
        const BEND: u64 = 1_000_000_000;
        if tick <= BEND {
            BASE + tick
        } else {
            BASE + BEND + (tick - BEND) + (tick - BEND) / 2_000
        }
    }

    fn calibration(tick: u64) -> Calibration {
        Calibration {
            pairs: vec![(tick, slewed(tick))],
        }
    }

    #[test]
    fn checkpoints_follow_a_slewed_clock() {
        let (start, stop) = (calibration(0), calibration(60_000_000_000));
        let checkpoints: Vec<(u64, u64)> = (1..60u64)
            .map(|s| (s * 1_000_000_000, slewed(s * 1_000_000_000)))
            .collect();
        let line = Converter::new(&start, &stop, Some(1.0), &[]);
        let bent = Converter::new(&start, &stop, Some(1.0), &checkpoints);
        assert_eq!((line.bends(), bent.bends()), (0, 59));
        let error = |c: &Converter, tick: u64| c.to_unix_ns(tick).abs_diff(slewed(tick));
        let ticks = (0..=600u64).map(|i| i * 100_000_000 + i % 7);
        let worst_line = ticks.clone().map(|t| error(&line, t)).max().unwrap();
        let worst_bent = ticks.clone().map(|t| error(&bent, t)).max().unwrap();
        // One line from start to stop is off by up to ~24 µs where the slew began; the
        // checkpoints bring it to the nanosecond.
        assert!(worst_line > 20_000, "{worst_line}");
        assert!(worst_bent <= 1, "{worst_bent}");
        // The mapping never goes back, also across knots.
        let mut last = 0;
        for tick in (0..=60_000u64).map(|i| i * 1_000_000 - i.min(1)) {
            let ns = bent.to_unix_ns(tick);
            assert!(ns >= last, "{tick}");
            last = ns;
        }
        // Outside the window, the line.
        assert_eq!(
            bent.to_unix_ns(70_000_000_000),
            line.to_unix_ns(70_000_000_000)
        );
    }

    #[test]
    fn a_step_of_the_system_clock_is_left_out() {
        let (start, stop) = (calibration(0), calibration(60_000_000_000));
        // The system clock jumped 1 s back at 30 s, and forth again before stop; a checkpoint
        // at the window's start and one out of order are left out too.
        let checkpoints = [
            (0, slewed(0)),
            (10_000_000_000, slewed(10_000_000_000)),
            (30_000_000_000, slewed(30_000_000_000) - 1_000_000_000),
            (20_000_000_000, slewed(20_000_000_000)),
            (40_000_000_000, slewed(40_000_000_000)),
            (15_000_000_000, slewed(15_000_000_000)),
        ];
        let bent = Converter::new(&start, &stop, Some(1.0), &checkpoints);
        assert_eq!(bent.bends(), 3, "10, 20 and 40 s");
        let error = |tick: u64| bent.to_unix_ns(tick).abs_diff(slewed(tick));
        assert!(error(30_000_000_000) < 5_000, "{}", error(30_000_000_000));
        // Mock clocks (ticks are nanoseconds) bend nothing.
        let identity = Converter::new(&start, &stop, None, &checkpoints);
        assert_eq!(identity, Converter::IDENTITY);
    }

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
        let c = Line::from_calibrations(&start, &stop, 99.0);
        assert_eq!(c.ns_per_tick(), 0.5);
        assert_eq!(c.to_unix_ns(1_000), 10_000_000_000);
        assert_eq!(c.to_unix_ns(1_000_001_000), 10_500_000_000);
        assert_eq!(c.to_unix_ns(0), 9_999_999_500);
    }

    #[test]
    fn nanoseconds_are_exact_at_any_tick() {
        // Unix-epoch magnitudes (the mock clock) and ticks near 2^60: every nanosecond counts.
        for base in [1_700_000_000_000_000_000u64, 1 << 60, (1 << 60) + 12_345] {
            for dur in [1u64, 7, 100, 255, 256, 1000, 999_999_937] {
                let c = Line::IDENTITY;
                assert_eq!(c.to_unix_ns(base + dur) - c.to_unix_ns(base), dur);
            }
        }
        // A rate of 0.25 ns per tick, anchored near 2^60.
        let c = Line::new(1 << 60, 1_700_000_000_000_000_000, 0.25);
        assert_eq!(c.to_unix_ns((1 << 60) + 4), 1_700_000_000_000_000_001);
        assert_eq!(
            c.to_unix_ns((1 << 60) + 4_000_000_000),
            1_700_000_001_000_000_000
        );
        assert_eq!(c.to_unix_ns((1 << 60) - 8), 1_699_999_999_999_999_998);
        // Two ticks per ns, far from the anchor: a double would be off by hundreds of ns.
        let c = Line::new(0, 0, 0.5);
        assert_eq!(c.to_unix_ns(1 << 60), 1 << 59);
        assert_eq!(c.to_unix_ns((1 << 60) + 2), (1 << 59) + 1);
        // Saturation instead of wrapping.
        assert_eq!(Line::new(0, u64::MAX - 1, 1.0).to_unix_ns(10), u64::MAX);
        assert_eq!(Line::new(100, 5, 1.0).to_unix_ns(0), 0);
        assert_eq!(Line::new(0, 0, 3.0).to_unix_ns(u64::MAX), u64::MAX);
    }

    #[test]
    fn calibrated_offsets_keep_every_nanosecond() {
        // Unix times at today's magnitude: the offset is exact, not rounded to 256 ns.
        let start = Calibration {
            pairs: vec![(1_000, 1_763_780_000_000_000_123)],
        };
        let stop = Calibration {
            pairs: vec![(1_000 + 200_000_000, 1_763_780_000_100_000_123)],
        };
        let c = Line::from_calibrations(&start, &stop, 9.0);
        assert_eq!(c.ns_per_tick(), 0.5);
        assert_eq!(c.to_unix_ns(1_000), 1_763_780_000_000_000_123);
        assert_eq!(c.to_unix_ns(1_002), 1_763_780_000_000_000_124);
    }

    #[test]
    fn short_sessions_use_the_clock_rate() {
        let start = Calibration {
            pairs: vec![(100, 5_000)],
        };
        let stop = Calibration {
            pairs: vec![(300, 5_100)],
        };
        let c = Line::from_calibrations(&start, &stop, 0.25);
        assert_eq!(c.ns_per_tick(), 0.25);
        // Offsets at that rate: 5 000 (start) and 5 100 - 200 × 0.25 = 5 050 (stop); the median
        // of an even count is the upper one.
        assert_eq!(c.to_unix_ns(100), 5_050);
        assert_eq!(c.to_unix_ns(300), 5_100);
    }
}
