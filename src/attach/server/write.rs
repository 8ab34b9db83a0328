//! A session written for a client: an `ORIGIN` chunk after its header.

use std::io::{self, Write};

use crate::attach::Origin;
use crate::attach::protocol;
use crate::capture::Capture;
use crate::capture::format::{CHUNK_HEADER, ORIGIN, ORIGIN_VERSION, padded};

/// Writes `capture` as one session with an `ORIGIN` chunk after its header.
pub(crate) fn write_session(
    capture: &Capture,
    origin: Origin,
    attach_ns: u64,
    out: &mut dyn Write,
) -> io::Result<()> {
    let content = crate::capture::origin::origin_content(origin, attach_ns);
    let mut chunk = Vec::new();
    protocol::write_chunk(&mut chunk, ORIGIN, ORIGIN_VERSION, &content)?;
    let mut spliced = AfterHeader {
        out,
        extra: Some(chunk),
        seen: 0,
        head: Vec::with_capacity(CHUNK_HEADER),
        header_end: None,
    };
    capture.write_to(&mut spliced)?;
    Ok(())
}

/// A writer that inserts `extra` after the first chunk written through it.
struct AfterHeader<'a> {
    out: &'a mut dyn Write,
    extra: Option<Vec<u8>>,
    /// Bytes written so far.
    seen: u64,
    /// The first chunk's header, while incomplete.
    head: Vec<u8>,
    /// Where the first chunk ends, once its header is known.
    header_end: Option<u64>,
}

impl Write for AfterHeader<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(extra) = &self.extra else {
            return self.out.write(buf);
        };
        let mut rest = buf;
        if self.header_end.is_none() {
            let take = (CHUNK_HEADER - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..take]);
            if self.head.len() == CHUNK_HEADER {
                let mut len = [0u8; 8];
                len.copy_from_slice(&self.head[8..16]);
                self.header_end = Some(CHUNK_HEADER as u64 + padded(u64::from_le_bytes(len)));
            }
        }
        if let Some(end) = self.header_end {
            let before = usize::try_from(end.saturating_sub(self.seen))
                .unwrap_or(usize::MAX)
                .min(rest.len());
            self.out.write_all(&rest[..before])?;
            self.seen += before as u64;
            rest = &rest[before..];
            if self.seen == end {
                self.out.write_all(extra)?;
                self.extra = None;
            }
            self.out.write_all(rest)?;
        } else {
            self.out.write_all(rest)?;
        }
        self.seen += rest.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Ends `capture`'s window just before tick `start` (where another window starts).
pub(crate) fn end_before(capture: &mut Capture, start: u64) {
    capture.end_tick = capture.end_tick.min(start.saturating_sub(1));
}

/// Unix nanoseconds now (0 before 1970).
pub(crate) fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
