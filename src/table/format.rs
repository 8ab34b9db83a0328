//! Numbers, durations, bytes and units as tables write them; the output [`Format`]s.

use std::str::FromStr;

use crate::trace::Number;

/// An integer as it is; a float as [`format_float`] writes it.
pub(crate) fn format_number(n: Number) -> String {
    match n {
        Number::Int(v) => v.to_string(),
        Number::Float(v) => format_float(v),
    }
}

/// A float with at most 3 decimals, trailing zeros cut (`2.5`, `3`, `0.333`).
pub(crate) fn format_float(v: f64) -> String {
    let text = format!("{v:.3}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// A name cell: indented by `depth` levels, `(poll)` after the polls of an async call, and a
/// `*` when calls were still open at stop.
pub(super) fn name_cell(name: &str, depth: usize, poll: bool, open: u64) -> String {
    let indent = "  ".repeat(depth);
    let poll = if poll { " (poll)" } else { "" };
    let open = if open > 0 { " *" } else { "" };
    format!("{indent}{name}{poll}{open}")
}

/// A percentage with one decimal.
pub(super) fn format_percent(percent: f64) -> String {
    format!("{percent:.1}")
}

pub(super) fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Formats a duration with a unit that keeps 3 to 4 significant digits.
#[doc(hidden)] // the command line's; not public API
pub fn format_ns(ns: u64) -> String {
    crate::record::clock::format_ns(ns)
}

/// Formats a byte count: exact below 1 KiB, else with a binary unit and 3 to 4 digits.
pub(crate) fn format_bytes(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match bytes {
        0..KIB => format!("{bytes} B"),
        KIB..MIB => format!("{:.2} KiB", bytes as f64 / KIB as f64),
        MIB..GIB => format!("{:.2} MiB", bytes as f64 / MIB as f64),
        _ => format!("{:.2} GiB", bytes as f64 / GIB as f64),
    }
}

/// The form a report is written in: `tickscope table`, `diff` and `info --format`, and
/// [`Table::render`](super::Table::render).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned columns, as [`Table`](super::Table)'s `Display` writes them.
    #[default]
    Text,
    /// A GitHub-flavoured Markdown table, the footer as lines after it: ready to paste into a
    /// pull-request comment.
    Markdown,
    /// JSON of the versioned schema in `docs/REPORT-SCHEMA.md` (a `"schema"` number per
    /// `"kind"`: 2 for a table); times in ns.
    Json,
    /// CSV (RFC 4180): a header row, then a row per line, times as plain numbers in ns.
    Csv,
}

impl Format {
    /// Every format, in the order of `--format`'s help.
    pub const ALL: [Self; 4] = [Self::Text, Self::Markdown, Self::Json, Self::Csv];

    /// The format's name: `text`, `markdown`, `json`, `csv`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Markdown => "markdown",
            Self::Json => "json",
            Self::Csv => "csv",
        }
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("`{s}` is not a format: text, markdown, json or csv"))
    }
}

/// The unit of the durations of text and Markdown tables. JSON and CSV are always in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Unit {
    /// Chosen per value: 3 to 4 significant digits ([`format_ns`]).
    #[default]
    Auto,
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl Unit {
    /// Every unit, in the order of `--unit`'s help.
    pub const ALL: [Self; 5] = [Self::Auto, Self::Ns, Self::Us, Self::Ms, Self::S];

    /// The unit's name: `auto`, `ns`, `us`, `ms`, `s`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ns => "ns",
            Self::Us => "us",
            Self::Ms => "ms",
            Self::S => "s",
        }
    }

    /// `ns` written in this unit: `1500 ns`, `1.500 µs`, `0.002 ms`; with [`Unit::Auto`] as
    /// [`format_ns`] writes it (fractions of a ns rounded).
    pub fn format(self, ns: f64) -> String {
        let sign = if ns < 0.0 { "-" } else { "" };
        let abs = ns.abs();
        match self {
            Self::Auto => format!("{sign}{}", format_ns(abs.round() as u64)),
            Self::Ns => format!("{sign}{abs:.0} ns"),
            Self::Us => format!("{sign}{:.3} µs", abs / 1e3),
            Self::Ms => format!("{sign}{:.3} ms", abs / 1e6),
            Self::S => format!("{sign}{:.6} s", abs / 1e9),
        }
    }
}

impl FromStr for Unit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|u| u.name() == s)
            .ok_or_else(|| format!("`{s}` is not a unit: auto, ns, us, ms or s"))
    }
}
