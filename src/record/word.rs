//! Chunk words: how records lie in a chunk, 8 bytes for a scope's entry or exit.
//!
//! A chunk holds 64-bit words. The low 2 bits of a word say what it is:
//!
//! - [`BEGIN`] and [`END`]: a whole [`RawKind::Begin`] or [`RawKind::End`] record in one word:
//!   bits 2 to 31 hold its tick less the chunk's base tick (below 2³⁰), bits 32 to 63 its id
//!   (a callsite id, or an exit's key).
//! - [`WIDE`]: any record in two words: the first holds the kind in bits 2 to 31 and the id in
//!   bits 32 to 63, the second the whole tick (or, for the kinds that
//!   [carry data](RawKind::carries_data), the data). A wide record whose tick is a time makes
//!   it the chunk's base tick.
//!
//! The base tick starts at 0 in every chunk: the first entry or exit of a chunk is usually
//! wide (real clocks are far above 2³⁰), and so is one that comes 2³⁰ ticks (about 0.3 s at
//! 3 GHz) or more after the base, or before it (the re-base of a delta that does not fit).
//! A thread that records scopes at any steady rate above a few per second spends 8 bytes a
//! record, 16 a scope; arguments, payloads, memory and counter records keep their 16 bytes
//! and their meaning.
//!
//! Decoding turns words back into the [`RawEvent`]s they were made of, exactly: every
//! reader of recorded chunks reads [`RawEvent`]s.

use crate::record::event::{RawEvent, RawKind};

/// The tag of a one-word [`RawKind::Begin`].
pub const BEGIN: u64 = 0;
/// The tag of a one-word [`RawKind::End`].
pub const END: u64 = 1;
/// The tag of a two-word record of any kind.
pub const WIDE: u64 = 2;
/// Bits of a one-word record's tick delta.
pub const DELTA_BITS: u32 = 30;
/// The deltas a one-word record holds are below this.
pub const DELTA_LIMIT: u64 = 1 << DELTA_BITS;
/// Bytes per word.
pub const WORD: u64 = 8;

/// The one word of `event` on a chunk whose base tick is `base`, if it fits in one: an entry
/// or exit less than [`DELTA_LIMIT`] ticks after the base.
#[inline(always)]
pub const fn narrow(event: RawEvent, base: u64) -> Option<u64> {
    let tag = match event.kind {
        RawKind::Begin => BEGIN,
        RawKind::End => END,
        _ => return None,
    };
    let delta = event.tick.wrapping_sub(base);
    if delta < DELTA_LIMIT {
        Some(tag | delta << 2 | (event.id as u64) << 32)
    } else {
        None
    }
}

/// The two words of `event` as a wide record.
#[inline(always)]
pub const fn wide(event: RawEvent) -> [u64; 2] {
    [
        WIDE | (event.kind as u32 as u64) << 2 | (event.id as u64) << 32,
        event.tick,
    ]
}

/// The base tick after `event` was written on a chunk whose base is `base`: its tick when it
/// went wide and its tick is a time.
#[inline(always)]
pub const fn base_after(event: RawEvent, base: u64, narrow: bool) -> u64 {
    if narrow || event.kind.carries_data() {
        base
    } else {
        event.tick
    }
}

/// Words `event` takes on a chunk whose base tick is `base`, and the base after it.
#[inline(always)]
pub const fn size(event: RawEvent, base: u64) -> (usize, u64) {
    match narrow(event, base) {
        Some(_) => (1, base),
        None => (2, base_after(event, base, false)),
    }
}

/// Appends the words of `events`, written in order on a chunk whose base tick is `base`, to
/// `out`; returns the base after them.
#[cfg_attr(loom, allow(dead_code))] // used by captures and decoding, which loom builds leave out
pub fn encode(events: &[RawEvent], mut base: u64, out: &mut Vec<u64>) -> u64 {
    for &event in events {
        match narrow(event, base) {
            Some(word) => out.push(word),
            None => {
                out.extend_from_slice(&wide(event));
                base = base_after(event, base, false);
            }
        }
    }
    base
}

/// The little-endian words of `bytes` (as a capture file holds them), whole words only.
#[cfg_attr(loom, allow(dead_code))] // used by captures and decoding, which loom builds leave out
pub fn from_le_bytes(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(WORD as usize)
        .map(|w| u64::from_le_bytes(std::array::from_fn(|i| w[i])))
        .collect()
}

/// What is wrong with a run of words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadWord {
    /// Word `at` has a tag no writer writes.
    Tag { at: usize },
    /// Word `at` is a wide record of a kind this build does not know.
    Kind { at: usize, kind: u32 },
    /// The wide record at word `at` lacks its second word: the words end there.
    Cut { at: usize },
}

impl BadWord {
    /// The word where the run goes wrong.
    #[cfg_attr(loom, allow(dead_code))] // used by captures and decoding, which loom builds leave out
    pub fn at(&self) -> usize {
        match *self {
            Self::Tag { at } | Self::Kind { at, .. } | Self::Cut { at } => at,
        }
    }
}

impl std::fmt::Display for BadWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Tag { at } => write!(f, "word {at} has tag 3, which no writer writes"),
            Self::Kind { at, kind } => {
                write!(
                    f,
                    "word {at} is a record of kind {kind}, which this build does not know"
                )
            }
            Self::Cut { at } => write!(f, "the two-word record at word {at} is cut short"),
        }
    }
}

/// Decodes words one record at a time, keeping the base tick.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    words: &'a [u64],
    at: usize,
    base: u64,
}

impl<'a> Decoder<'a> {
    /// A decoder of the words of one chunk, from its first.
    pub fn new(words: &'a [u64]) -> Self {
        Self {
            words,
            at: 0,
            base: 0,
        }
    }

    /// Words of the records read so far: after a bad word, where it is (decoding stops
    /// there).
    #[cfg_attr(loom, allow(dead_code))] // used by captures and decoding, which loom builds leave out
    pub fn words_read(&self) -> usize {
        self.at
    }
}

impl Iterator for Decoder<'_> {
    type Item = Result<RawEvent, BadWord>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let at = self.at;
        let &word = self.words.get(at)?;
        let id = (word >> 32) as u32;
        let low = ((word >> 2) & (DELTA_LIMIT - 1)) as u32;
        let event = match word & 3 {
            BEGIN => RawEvent::new(RawKind::Begin, id, self.base.wrapping_add(u64::from(low))),
            END => RawEvent::new(RawKind::End, id, self.base.wrapping_add(u64::from(low))),
            WIDE => {
                let Some(kind) = RawKind::from_u32(low) else {
                    self.words = &self.words[..at];
                    return Some(Err(BadWord::Kind { at, kind: low }));
                };
                let Some(&tick) = self.words.get(at + 1) else {
                    self.words = &self.words[..at];
                    return Some(Err(BadWord::Cut { at }));
                };
                if !kind.carries_data() {
                    self.base = tick;
                }
                self.at = at + 2;
                return Some(Ok(RawEvent::new(kind, id, tick)));
            }
            _ => {
                self.words = &self.words[..at];
                return Some(Err(BadWord::Tag { at }));
            }
        };
        self.at = at + 1;
        Some(Ok(event))
    }
}

/// Appends the records of `words` (a chunk's, from its first) to `out`; stops at the first
/// bad word, which it returns.
pub fn decode_into(words: &[u64], out: &mut Vec<RawEvent>) -> Result<(), BadWord> {
    out.reserve(words.len());
    for event in Decoder::new(words) {
        out.push(event?);
    }
    Ok(())
}

/// The records of `words` (a chunk's, from its first), up to the first bad word.
pub fn decode(words: &[u64]) -> Vec<RawEvent> {
    let mut out = Vec::new();
    // Recorded chunks hold only what writers wrote: a bad word ends what is read.
    let _ = decode_into(words, &mut out);
    out
}

/// Records in `words`, up to the first bad word.
pub fn count(words: &[u64]) -> usize {
    Decoder::new(words).take_while(Result::is_ok).count()
}

/// True when a record of `kind` is among the records of `words`, up to the first bad word,
/// without collecting them.
#[cfg_attr(loom, allow(dead_code))] // used by captures and decoding, which loom builds leave out
pub fn holds_kind(words: &[u64], kind: RawKind) -> bool {
    Decoder::new(words)
        .map_while(Result::ok)
        .any(|e| e.kind == kind)
}

/// Tick of the last record of `words` whose tick is a time, if any.
pub fn last_tick(words: &[u64]) -> Option<u64> {
    Decoder::new(words)
        .map_while(Result::ok)
        .filter(|e| !e.kind.carries_data())
        .last()
        .map(|e| e.tick)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(events: &[RawEvent]) -> Vec<u64> {
        let mut words = Vec::new();
        encode(events, 0, &mut words);
        assert_eq!(decode(&words), events);
        assert_eq!(count(&words), events.len());
        words
    }

    #[test]
    fn a_kind_is_found_in_the_words_as_in_the_records() {
        let t = 5_000_000_000_000u64;
        let events = [
            RawEvent::begin(7, t),
            RawEvent::new(RawKind::SpanFollows, 3, t + 1),
            RawEvent::new(RawKind::Payload, 0, RawKind::SpanFollows as u64),
            RawEvent::end(RawEvent::end_key(7, t), t + 2),
        ];
        let words = round_trip(&events);
        assert!(holds_kind(&words, RawKind::SpanFollows));
        assert!(holds_kind(&words, RawKind::Payload));
        assert!(!holds_kind(&words, RawKind::ArgStr));
        // Cut short, the record is no record; a bad word ends the scan.
        assert!(!holds_kind(&words[..3], RawKind::SpanFollows));
        assert!(!holds_kind(&[3, words[2], words[3]], RawKind::SpanFollows));
        assert!(!holds_kind(&[], RawKind::SpanFollows));
        // Data that reads as the first word of a wide record of the kind is data: only the
        // first word of a wide record says its kind.
        let looks_like = WIDE | (RawKind::SpanFollows as u64) << 2;
        let events = [
            RawEvent::begin(7, t),
            RawEvent::new(RawKind::Payload, 0, looks_like),
            RawEvent::end(RawEvent::end_key(7, t), t + 2),
        ];
        let words = round_trip(&events);
        assert!(words.contains(&looks_like));
        assert!(!holds_kind(&words, RawKind::SpanFollows));
    }

    #[test]
    fn entries_and_exits_near_the_base_take_a_word() {
        let t = 5_000_000_000_000u64;
        let key = RawEvent::end_key(7, t + 10);
        let events = [
            RawEvent::begin(7, t),
            RawEvent::begin(7, t + 10),
            RawEvent::end(key, t + 20),
            RawEvent::end(9, t + DELTA_LIMIT - 1),
            RawEvent::begin(3, t + DELTA_LIMIT),
            RawEvent::end(3, t + DELTA_LIMIT + 5),
        ];
        let words = round_trip(&events);
        // Wide (the first from base 0), three narrow, wide again (the delta is 2^30), narrow.
        assert_eq!(words.len(), 2 + 3 + 2 + 1);
        assert_eq!(words[0] & 3, WIDE);
        assert_eq!(words[2], BEGIN | 10 << 2 | 7 << 32);
        assert_eq!(words[3], END | 20 << 2 | u64::from(key) << 32);
        assert_eq!(words[5] & 3, WIDE);
        assert_eq!(last_tick(&words), Some(t + DELTA_LIMIT + 5));
    }

    #[test]
    fn ticks_before_the_base_and_data_records_go_wide() {
        let t = 1u64 << 40;
        let mut events = vec![RawEvent::begin(1, t), RawEvent::begin(2, t - 1)];
        events.extend(RawEvent::memory(
            RawKind::Alloc,
            1 << 33,
            u64::MAX - 8,
            t + 3,
        ));
        events.push(RawEvent::end(4, t + 4));
        events.push(RawEvent::new(RawKind::ArgI64, 5, u64::MAX));
        events.push(RawEvent::end(6, t + 7));
        let words = round_trip(&events);
        // begin (wide), begin before the base (wide), alloc + payload (wide: the payload's
        // address is no base), end narrow from t + 3, arg (wide), end narrow.
        assert_eq!(words.len(), 2 + 2 + 4 + 1 + 2 + 1);
        assert_eq!(words[8], END | 1 << 2 | 4 << 32);
        assert_eq!(last_tick(&words), Some(t + 7));
    }

    #[test]
    fn small_ticks_are_narrow_from_the_first() {
        let events: Vec<RawEvent> = (1..=5).map(|t| RawEvent::begin(1, t)).collect();
        assert_eq!(round_trip(&events).len(), 5);
    }

    #[test]
    fn bad_words_end_decoding_with_where_they_are() {
        let mut words = Vec::new();
        encode(
            &[RawEvent::begin(1, 2), RawEvent::begin(1, 1 << 35)],
            0,
            &mut words,
        );
        let mut out = Vec::new();
        assert_eq!(
            decode_into(&words[..2], &mut out),
            Err(BadWord::Cut { at: 1 })
        );
        assert_eq!(out, [RawEvent::begin(1, 2)]);
        assert_eq!(count(&words[..2]), 1);
        assert_eq!(
            decode_into(&[3], &mut Vec::new()),
            Err(BadWord::Tag { at: 0 })
        );
        assert_eq!(
            decode_into(&[WIDE | 99 << 2, 0], &mut Vec::new()),
            Err(BadWord::Kind { at: 0, kind: 99 })
        );
    }

    #[test]
    fn sizes_match_what_encoding_writes() {
        let mut random = crate::record::test_random(11);
        let mut base = 0;
        let mut words = Vec::new();
        let mut tick = 1u64 << 41;
        let mut events = Vec::new();
        for _ in 0..10_000 {
            tick = tick.wrapping_add(random(1 << 31)).wrapping_sub(1 << 20);
            let event = match random(4) {
                0 => RawEvent::begin(random(0) as u32, tick),
                1 => RawEvent::end(random(0) as u32, tick),
                2 => RawEvent::new(RawKind::Payload, random(0) as u32, random(0)),
                _ => RawEvent::new(RawKind::Link, random(0) as u32, tick),
            };
            let before = words.len();
            let (n, next) = size(event, base);
            base = encode(&[event], base, &mut words);
            assert_eq!((words.len() - before, base), (n, next));
            events.push(event);
        }
        assert_eq!(decode(&words), events);
    }
}
