//! The columns a table sorts by ([`SortBy`]).

use std::fmt;
use std::str::FromStr;

use crate::report::ScopeStats;

/// Column to sort a [`Table`](super::Table) by. Names sort ascending, everything else descending.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Scope name.
    Name,
    /// Number of calls.
    Calls,
    /// Total time (the default).
    #[default]
    Total,
    /// Self time.
    SelfTime,
    /// Mean duration.
    Avg,
    /// Shortest call.
    Min,
    /// Longest call.
    Max,
    /// Median duration.
    P50,
    /// 99th-percentile duration.
    P99,
    /// Bytes allocated, child scopes included (0 without memory tracking).
    Alloc,
    /// Bytes allocated by the scope itself.
    SelfAlloc,
    /// Peak live bytes of a call.
    Peak,
}

impl SortBy {
    /// Every column, in the order the table shows them.
    pub const ALL: [SortBy; 12] = [
        Self::Name,
        Self::Calls,
        Self::Total,
        Self::SelfTime,
        Self::Avg,
        Self::Min,
        Self::Max,
        Self::P50,
        Self::P99,
        Self::Alloc,
        Self::SelfAlloc,
        Self::Peak,
    ];

    /// The column's key, as [`str::parse`] reads it (and `tickscope table --sort` takes it):
    /// `name`, `calls`, `total`, `self`, `avg`, `min`, `max`, `p50`, `p99`, `alloc`,
    /// `self-alloc`, `peak`.
    pub const fn key_name(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Calls => "calls",
            Self::Total => "total",
            Self::SelfTime => "self",
            Self::Avg => "avg",
            Self::Min => "min",
            Self::Max => "max",
            Self::P50 => "p50",
            Self::P99 => "p99",
            Self::Alloc => "alloc",
            Self::SelfAlloc => "self-alloc",
            Self::Peak => "peak",
        }
    }

    /// What the column holds, in a few words (for help texts).
    pub const fn description(self) -> &'static str {
        match self {
            Self::Name => "scope name",
            Self::Calls => "number of calls",
            Self::Total => "total time",
            Self::SelfTime => "self time",
            Self::Avg => "mean duration",
            Self::Min => "shortest call",
            Self::Max => "longest call",
            Self::P50 => "median duration",
            Self::P99 => "99th-percentile duration",
            Self::Alloc => "bytes allocated, child scopes included",
            Self::SelfAlloc => "bytes allocated by the scope itself",
            Self::Peak => "peak live bytes of a call",
        }
    }

    pub(super) fn key(self, row: &ScopeStats) -> u64 {
        match self {
            Self::Name => 0,
            Self::Calls => row.calls,
            Self::Total => row.total_ns,
            Self::SelfTime => row.self_ns,
            Self::Avg => row.avg_ns(),
            Self::Min => row.min_ns,
            Self::Max => row.max_ns,
            Self::P50 => row.p50_ns,
            Self::P99 => row.p99_ns,
            Self::Alloc => row.memory.map_or(0, |m| m.alloc_bytes),
            Self::SelfAlloc => row.memory.map_or(0, |m| m.self_alloc_bytes),
            Self::Peak => row.memory.map_or(0, |m| m.peak_bytes),
        }
    }
}

/// The column of its key ([`SortBy::key_name`]), ASCII case ignored.
///
/// ```
/// use tickscope::table::SortBy;
///
/// assert_eq!("self".parse::<SortBy>(), Ok(SortBy::SelfTime));
/// assert_eq!("P99".parse::<SortBy>(), Ok(SortBy::P99));
/// let error = "colour".parse::<SortBy>().unwrap_err();
/// assert!(error.to_string().starts_with("unknown sort key \"colour\": valid keys are name, calls,"));
/// ```
impl FromStr for SortBy {
    type Err = ParseSortByError;

    fn from_str(key: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|column| column.key_name().eq_ignore_ascii_case(key))
            .ok_or_else(|| ParseSortByError {
                key: key.to_owned(),
            })
    }
}

/// Shows the column's key ([`SortBy::key_name`]).
impl fmt::Display for SortBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key_name())
    }
}

/// A sort key that names no column: its message lists the valid keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseSortByError {
    key: String,
}

impl fmt::Display for ParseSortByError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown sort key {:?}: valid keys are ", self.key)?;
        for (i, column) in SortBy::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{}", column.key_name())?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseSortByError {}
