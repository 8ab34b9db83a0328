//! Overhead compensation: the probe cost a session measures, and decoding subtracts.

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
