//! The session footer chunk: what it says, written ([`Footer::content`]) and read
//! ([`Footer::parse`]) by one definition.

use crate::record::memory::MemoryMode;

use super::format::{
    FOOTER_MEMORY, FOOTER_MEMORY_COUNTS, SESSION_FOOTER_LEN, SESSION_FOOTER_LEN_CUT,
    SESSION_FOOTER_LEN_OVERWRITTEN, SESSION_FOOTER_LEN_SALVAGED,
};

/// What a session footer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footer {
    pub(crate) start_tick: u64,
    pub(crate) end_tick: u64,
    pub(crate) records: u64,
    pub(crate) dropped_events: u64,
    pub(crate) memory: MemoryMode,
    /// Events a flight recorder overwrote (0 in a footer of 40 bytes).
    pub(crate) overwritten_events: u64,
    /// A flight recorder's window start common to every thread (in a footer of 56 bytes).
    pub(crate) cut_start: Option<u64>,
    /// The session was salvaged without its footer when read, losing this many bytes at the
    /// cut (in a footer of 64 bytes): written back, it still decodes as it did (what was open
    /// ends at each thread's last record).
    pub(crate) salvaged: Option<u64>,
}

impl Footer {
    /// The footer chunk's content: the window, the record count, the dropped events, the
    /// flags, the events a flight recorder overwrote (left out when there are none, for
    /// readers that know only the 40 bytes before) and its window start common to every
    /// thread (left out when it has none, for readers that know only the 48 bytes before),
    /// and whether it was salvaged, with the bytes lost plus one (left out when it was not).
    pub(crate) fn content(&self) -> Vec<u8> {
        let mut out = vec![0u8; SESSION_FOOTER_LEN];
        let flags = match self.memory {
            MemoryMode::Off => 0,
            MemoryMode::Counts => FOOTER_MEMORY | FOOTER_MEMORY_COUNTS,
            MemoryMode::Timeline => FOOTER_MEMORY,
        };
        out[0..8].copy_from_slice(&self.start_tick.to_le_bytes());
        out[8..16].copy_from_slice(&self.end_tick.to_le_bytes());
        out[16..24].copy_from_slice(&self.records.to_le_bytes());
        out[24..32].copy_from_slice(&self.dropped_events.to_le_bytes());
        out[32..36].copy_from_slice(&flags.to_le_bytes());
        let salvaged = self.salvaged.is_some();
        if self.overwritten_events > 0 || self.cut_start.is_some() || salvaged {
            out.extend_from_slice(&self.overwritten_events.to_le_bytes());
            debug_assert_eq!(out.len(), SESSION_FOOTER_LEN_OVERWRITTEN);
        }
        if self.cut_start.is_some() || salvaged {
            out.extend_from_slice(&self.cut_start.unwrap_or(u64::MAX).to_le_bytes());
            debug_assert_eq!(out.len(), SESSION_FOOTER_LEN_CUT);
        }
        if let Some(lost) = self.salvaged {
            out.extend_from_slice(&lost.saturating_add(1).to_le_bytes());
            debug_assert_eq!(out.len(), SESSION_FOOTER_LEN_SALVAGED);
        }
        out
    }

    /// The footer that `content` holds, `None` when it is shorter than the
    /// [`SESSION_FOOTER_LEN`] bytes every footer has; the fields after those are read when
    /// the content is long enough to hold them.
    pub(crate) fn parse(content: &[u8]) -> Option<Self> {
        let u64_at = |at: usize| {
            content
                .get(at..at + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        let flags = u32::from_le_bytes(content.get(32..36)?.try_into().expect("4 bytes"));
        Some(Self {
            start_tick: u64_at(0)?,
            end_tick: u64_at(8)?,
            records: u64_at(16)?,
            dropped_events: u64_at(24)?,
            memory: match flags {
                flags if flags & FOOTER_MEMORY == 0 => MemoryMode::Off,
                flags if flags & FOOTER_MEMORY_COUNTS != 0 => MemoryMode::Counts,
                _ => MemoryMode::Timeline,
            },
            overwritten_events: match content.len() >= SESSION_FOOTER_LEN_OVERWRITTEN {
                true => u64_at(SESSION_FOOTER_LEN)?,
                false => 0,
            },
            cut_start: match content.len() >= SESSION_FOOTER_LEN_CUT {
                true => u64_at(SESSION_FOOTER_LEN_OVERWRITTEN).filter(|&tick| tick != u64::MAX),
                false => None,
            },
            salvaged: match content.len() >= SESSION_FOOTER_LEN_SALVAGED {
                true => u64_at(SESSION_FOOTER_LEN_CUT).and_then(|marked| marked.checked_sub(1)),
                false => None,
            },
        })
        .filter(|_| content.len() >= SESSION_FOOTER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length a footer is written in reads back as written.
    #[test]
    fn footers_read_back_as_written() {
        let plain = Footer {
            start_tick: 1,
            end_tick: 2,
            records: 3,
            dropped_events: 4,
            memory: MemoryMode::Counts,
            overwritten_events: 0,
            cut_start: None,
            salvaged: None,
        };
        let overwritten = Footer {
            overwritten_events: 5,
            memory: MemoryMode::Timeline,
            ..plain
        };
        let cut = Footer {
            cut_start: Some(6),
            memory: MemoryMode::Off,
            ..overwritten
        };
        let salvaged = Footer {
            cut_start: None,
            salvaged: Some(0),
            ..cut
        };
        for (footer, len) in [
            (plain, SESSION_FOOTER_LEN),
            (overwritten, SESSION_FOOTER_LEN_OVERWRITTEN),
            (cut, SESSION_FOOTER_LEN_CUT),
            (salvaged, SESSION_FOOTER_LEN_SALVAGED),
        ] {
            let content = footer.content();
            assert_eq!(content.len(), len);
            assert_eq!(Footer::parse(&content), Some(footer));
        }
        assert_eq!(Footer::parse(&[0; SESSION_FOOTER_LEN - 1]), None);
    }
}
