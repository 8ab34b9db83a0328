//! Ticks to Unix nanoseconds: the [`Converter`] built from a capture's calibration pairs.

use crate::record::clock::Calibration;

/// Maps raw ticks to nanoseconds since the Unix epoch: `ns = base_ns + (tick - base_tick) × scale`.
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
pub(crate) struct Converter {
    base_tick: u64,
    base_ns: u64,
    /// Whole nanoseconds per tick.
    whole: u64,
    /// The fraction of a nanosecond per tick, in units of 2⁻⁶⁴.
    frac: u64,
}

impl Converter {
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
    fn nanoseconds_are_exact_at_any_tick() {
        // Unix-epoch magnitudes (the mock clock) and ticks near 2^60: every nanosecond counts.
        for base in [1_700_000_000_000_000_000u64, 1 << 60, (1 << 60) + 12_345] {
            for dur in [1u64, 7, 100, 255, 256, 1000, 999_999_937] {
                let c = Converter::IDENTITY;
                assert_eq!(c.to_unix_ns(base + dur) - c.to_unix_ns(base), dur);
            }
        }
        // A rate of 0.25 ns per tick, anchored near 2^60.
        let c = Converter::new(1 << 60, 1_700_000_000_000_000_000, 0.25);
        assert_eq!(c.to_unix_ns((1 << 60) + 4), 1_700_000_000_000_000_001);
        assert_eq!(
            c.to_unix_ns((1 << 60) + 4_000_000_000),
            1_700_000_001_000_000_000
        );
        assert_eq!(c.to_unix_ns((1 << 60) - 8), 1_699_999_999_999_999_998);
        // Two ticks per ns, far from the anchor: a double would be off by hundreds of ns.
        let c = Converter::new(0, 0, 0.5);
        assert_eq!(c.to_unix_ns(1 << 60), 1 << 59);
        assert_eq!(c.to_unix_ns((1 << 60) + 2), (1 << 59) + 1);
        // Saturation instead of wrapping.
        assert_eq!(
            Converter::new(0, u64::MAX - 1, 1.0).to_unix_ns(10),
            u64::MAX
        );
        assert_eq!(Converter::new(100, 5, 1.0).to_unix_ns(0), 0);
        assert_eq!(Converter::new(0, 0, 3.0).to_unix_ns(u64::MAX), u64::MAX);
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
        let c = Converter::from_calibrations(&start, &stop, 9.0);
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
        let c = Converter::from_calibrations(&start, &stop, 0.25);
        assert_eq!(c.ns_per_tick(), 0.25);
        // Offsets at that rate: 5 000 (start) and 5 100 - 200 × 0.25 = 5 050 (stop); the median
        // of an even count is the upper one.
        assert_eq!(c.to_unix_ns(100), 5_050);
        assert_eq!(c.to_unix_ns(300), 5_100);
    }
}
