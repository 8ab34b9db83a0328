//! The parser: chunk after chunk, gathering sessions.

use std::borrow::Cow;

use super::bytes::{PREFIX, RECORD_LEN, array, u16_at, u32_at, u64_at};
use super::errors::ReadError;
use super::session::Session;
use super::sniff::{SNIFF, other_format};
use super::source::{Input, Source};
use super::tables::{Footer, footer, header};
use super::words::WORD_LEN;
use crate::capture::Capture;
use crate::capture::format::ORIGIN;
use crate::capture::format::{
    ALIGN, CALLSITES, CHUNK_HEADER, CHUNK_MAGIC, CLOCK, EVENT_CHUNK, EVENT_CHUNK_VERSION,
    SESSION_FOOTER, SESSION_HEADER, SESSION_HEADER_VERSION, STRINGS, THREADS, chunk_name,
    chunk_version,
};
use crate::capture::format::{EVENTS_CUT, EVENTS_PACKED};
use crate::record::chunk::WORDS_CHUNK_VERSION as WORDS_VERSION;

/// Reads chunk after chunk, gathering sessions.
pub(super) struct Parser {
    pub(super) input: Input,
    /// Bytes of thread names that may still be copied: each thread holds its name as a string
    /// of its own, so that many thread entries naming one long string would cost far more
    /// than the input; names are copied up to the input's size in all, and cut short past it.
    pub(super) names_left: usize,
    pub(super) sessions: Vec<Capture>,
    /// The session being read: its header was read, its footer not yet.
    pub(super) session: Option<Session>,
}

impl Parser {
    pub(super) fn run(mut self, source: &mut dyn Source) -> Result<Vec<Capture>, ReadError> {
        let total = source.len();
        let read = self.chunks(source, total);
        // The packed chunks still waiting are checked before the reading ends or fails: an
        // error of theirs comes first (they lie before whatever failed).
        self.check_waiting()?;
        read?;
        self.end_session(None, total);
        Ok(self.sessions)
    }

    /// Checks the packed chunks of the session waiting for their check
    /// ([`Session::check_waiting`]).
    fn check_waiting(&mut self) -> Result<(), ReadError> {
        match &mut self.session {
            Some(session) => session.check_waiting(),
            None => Ok(()),
        }
    }

    /// Reads chunk after chunk of the `total` bytes of `source`.
    fn chunks(&mut self, source: &mut dyn Source, total: usize) -> Result<(), ReadError> {
        if total == 0 {
            return Err(ReadError::at(
                0,
                "the input is empty: a capture starts with a session header chunk",
            ));
        }
        let skim = matches!(self.input, Input::File { skim: true, .. });
        let mut pos = 0;
        while pos < total {
            let left = total - pos;
            if left < CHUNK_HEADER {
                if pos == 0 {
                    return Err(ReadError::at(
                        0,
                        format!(
                            "{left} bytes are too few for a chunk header ({CHUNK_HEADER} bytes): \
                             not a capture"
                        ),
                    ));
                }
                self.warn(format!(
                    "byte {pos}: the last {left} bytes are too few for a chunk header \
                     ({CHUNK_HEADER} bytes): ignored (the file was cut short?)"
                ));
                if let Some(session) = &mut self.session {
                    session.lost_bytes = session.lost_bytes.saturating_add(left as u64);
                }
                break;
            }
            let head: [u8; CHUNK_HEADER] = array(source.get(pos, CHUNK_HEADER)?, 0);
            if u32_at(&head, 0) != CHUNK_MAGIC {
                if pos == 0
                    && let Some(what) = other_format(source.get(0, total.min(SNIFF))?)
                {
                    return Err(ReadError::at(0, format!("{what}, not a tickscope capture")));
                }
                return Err(ReadError::at(
                    pos,
                    format!(
                        "no chunk starts here: found {:02x?}, expected the magic \"TSCP\"",
                        &head[..4]
                    ),
                ));
            }
            let (kind, version, len) = (u16_at(&head, 4), u16_at(&head, 6), u64_at(&head, 8));
            if pos == 0 && kind != SESSION_HEADER {
                return Err(ReadError::at(
                    0,
                    format!(
                        "a capture starts with a session header chunk (type {SESSION_HEADER}), \
                         not {}",
                        describe(kind)
                    ),
                ));
            }
            let body_len = left - CHUNK_HEADER;
            let Some(len) = usize::try_from(len).ok().filter(|&len| len <= body_len) else {
                self.check_waiting()?;
                let body = source.get(pos + CHUNK_HEADER, body_len)?;
                self.cut_short(pos, kind, version, len, body)?;
                break;
            };
            let next = CHUNK_HEADER + len.next_multiple_of(ALIGN);
            if next > left {
                self.warn(format!(
                    "byte {pos}: the {} chunk misses {} bytes of padding at the end of the \
                     input (the file was cut short?)",
                    describe(kind),
                    next - left
                ));
            }
            // Skimming, an event chunk's records are not read: its prefix says whose they
            // are (and whether they are the entries of cut scopes, which are read).
            let skimmed = skim
                && kind == EVENT_CHUNK
                && version < WORDS_VERSION
                && len >= PREFIX
                && u64_at(source.get(pos + CHUNK_HEADER, PREFIX)?, 8) != EVENTS_CUT;
            let content = source.get(pos + CHUNK_HEADER, if skimmed { PREFIX } else { len })?;
            if kind != EVENTS_PACKED {
                // Whatever another chunk does comes after the packed chunks before it.
                self.check_waiting()?;
            }
            self.chunk(pos, kind, version, content, len)?;
            pos += next.min(left);
        }
        Ok(())
    }

    /// A warning for the session being read, or the last one read.
    fn warn(&mut self, warning: String) {
        if let Some(session) = &mut self.session {
            session.warnings.push(warning);
        } else if let Some(last) = self.sessions.last_mut() {
            last.warnings.push(warning);
        }
    }

    /// One whole chunk at `pos`, of `len` bytes of content: `content`, or when skimming an
    /// event chunk its prefix only.
    fn chunk(
        &mut self,
        pos: usize,
        kind: u16,
        version: u16,
        content: &[u8],
        len: usize,
    ) -> Result<(), ReadError> {
        if kind == SESSION_HEADER {
            self.end_session(None, pos);
            if version != SESSION_HEADER_VERSION {
                return Err(ReadError::at(
                    pos,
                    format!(
                        "session header chunk version {version} is not supported (this build \
                         reads version {SESSION_HEADER_VERSION})"
                    ),
                ));
            }
            self.session = Some(Session::new(pos, header(pos, content)?));
            return Ok(());
        }
        let Some(name) = chunk_name(kind) else {
            self.warn(format!(
                "byte {pos}: unknown chunk type {kind} (version {version}, {len} bytes): skipped"
            ));
            return Ok(());
        };
        // Event chunks of older versions are read as the current one (which adds record
        // kinds).
        let readable = |known: u16| known == version || (kind == EVENT_CHUNK && version < known);
        if let Some(known) = chunk_version(kind).filter(|&known| !readable(known)) {
            self.warn(format!(
                "byte {pos}: {name} chunk version {version} is not supported (this build reads \
                 version {known}): skipped"
            ));
            return Ok(());
        }
        let Some(session) = &mut self.session else {
            self.warn(format!(
                "byte {pos}: a {name} chunk outside any session (after a footer, before the \
                 next header): skipped"
            ));
            return Ok(());
        };
        match kind {
            CLOCK => session.clock(pos, content)?,
            STRINGS => session.strings(pos, content),
            CALLSITES => session.callsites(pos, content)?,
            THREADS => session.threads(pos, content, &mut self.names_left)?,
            EVENT_CHUNK if version >= WORDS_VERSION => {
                session.word_events(&self.input, pos, content, len, false)?;
            }
            EVENT_CHUNK => {
                session.events(&self.input, pos, content, len, false)?;
            }
            EVENTS_PACKED => session.packed(&self.input, pos, content)?,
            SESSION_FOOTER => {
                let footer = footer(pos, content)?;
                self.end_session(Some(footer), pos);
            }
            ORIGIN => match crate::capture::origin::parse_origin(content) {
                Some(origin) => session.header.origin = Some(origin),
                None => session.warnings.push(format!(
                    "byte {pos}: an origin chunk of {len} bytes that says no origin this build \
                     knows: skipped"
                )),
            },
            // `chunk_name` knows no other type.
            _ => {}
        }
        Ok(())
    }

    /// The chunk at `pos` announces `len` bytes of content where only `body` is left: a
    /// file cut short. An event chunk keeps its whole records; other chunks are lost.
    fn cut_short(
        &mut self,
        pos: usize,
        kind: u16,
        version: u16,
        len: u64,
        body: &[u8],
    ) -> Result<(), ReadError> {
        if kind == SESSION_HEADER {
            return Err(ReadError::at(
                pos,
                format!(
                    "the session header chunk announces {len} bytes of content, but only {} \
                     are left",
                    body.len()
                ),
            ));
        }
        let salvaged = match &mut self.session {
            Some(session)
                if kind == EVENT_CHUNK
                    && (1..=EVENT_CHUNK_VERSION).contains(&version)
                    && body.len() >= PREFIX =>
            {
                let unit = if version >= WORDS_VERSION {
                    WORD_LEN
                } else {
                    RECORD_LEN
                };
                let whole = PREFIX + (body.len() - PREFIX) / unit * unit;
                if version >= WORDS_VERSION {
                    session.word_events(&self.input, pos, &body[..whole], whole, true)?
                } else {
                    session.events(&self.input, pos, &body[..whole], whole, true)?
                }
            }
            _ => 0,
        };
        if let Some(session) = &mut self.session {
            // Of the chunk's content, what its header announces beyond the whole records kept.
            let lost = len.saturating_sub(salvaged as u64);
            session.lost_bytes = session.lost_bytes.saturating_add(lost);
        }
        self.warn(format!(
            "byte {pos}: the {} chunk is cut short by the end of the input: salvaged {salvaged} \
             of {len} bytes",
            describe(kind)
        ));
        Ok(())
    }

    /// Ends the session being read, if any, at `pos`: with its footer, or salvaged without.
    fn end_session(&mut self, footer: Option<Footer>, pos: usize) {
        if let Some(session) = self.session.take() {
            self.sessions.push(session.finish(footer, pos));
        }
    }
}

/// "type N" or the type's name, for messages.
fn describe(kind: u16) -> Cow<'static, str> {
    match chunk_name(kind) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(format!("type {kind}")),
    }
}
