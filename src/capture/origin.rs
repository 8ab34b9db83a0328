//! The `ORIGIN` chunk of a capture taken by an attach ([`crate::attach`]): whether a session
//! is the flight recorder's window at the attach or what was recorded while attached, and when
//! the attach was. Read and written here, in the capture stage; `attach` re-exports it.

use super::format::{CHUNK_HEADER, ORIGIN, padded};

/// Where a session of an attach's capture comes from, as its
/// `ORIGIN` chunk says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The flight recorder's window at the attach: what the program recorded before.
    Flight,
    /// What the program recorded while the client was attached.
    Live,
}

impl Origin {
    /// Its code in the `ORIGIN` chunk.
    pub fn code(self) -> u32 {
        match self {
            Self::Flight => 1,
            Self::Live => 2,
        }
    }

    /// How `tickscope` names it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Flight => "flight recorder window before the attach",
            Self::Live => "recorded while attached",
        }
    }
}

/// The [`Origin`] of each session of a capture file's bytes, in order: `None` for a session
/// without an `ORIGIN` chunk (one not taken by an attach). Stops at the first bytes that are
/// not a chunk.
pub fn origins(bytes: &[u8]) -> Vec<Option<(Origin, u64)>> {
    use crate::capture::format::{CHUNK_MAGIC, SESSION_HEADER};
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(header) = bytes.get(pos..pos.saturating_add(CHUNK_HEADER)) {
        let field = |at: usize, len: usize| &header[at..at + len];
        if field(0, 4) != CHUNK_MAGIC.to_le_bytes() {
            break;
        }
        let kind = u16::from_le_bytes([header[4], header[5]]);
        let mut len = [0u8; 8];
        len.copy_from_slice(field(8, 8));
        let len = u64::from_le_bytes(len);
        let content = usize::try_from(len)
            .ok()
            .and_then(|len| bytes.get(pos + CHUNK_HEADER..)?.get(..len));
        match kind {
            SESSION_HEADER => out.push(None),
            ORIGIN => {
                if let (Some(last), Some(content)) = (out.last_mut(), content)
                    && let Some(origin) = parse_origin(content)
                {
                    *last = Some(origin);
                }
            }
            _ => {}
        }
        let Some(next) = usize::try_from(padded(len))
            .ok()
            .and_then(|l| pos.checked_add(CHUNK_HEADER)?.checked_add(l))
        else {
            break;
        };
        pos = next;
    }
    out
}

/// The content of an `ORIGIN` chunk saying `origin`, of an attach at `attach_unix_ns`.
pub(crate) fn origin_content(origin: Origin, attach_unix_ns: u64) -> Vec<u8> {
    let mut content = Vec::with_capacity(crate::capture::format::ORIGIN_LEN);
    content.extend_from_slice(&origin.code().to_le_bytes());
    content.extend_from_slice(&0u32.to_le_bytes());
    content.extend_from_slice(&attach_unix_ns.to_le_bytes());
    content
}

/// An `ORIGIN` chunk's content: the origin and the Unix nanoseconds of the attach.
pub(crate) fn parse_origin(content: &[u8]) -> Option<(Origin, u64)> {
    let code = u32::from_le_bytes(content.get(0..4)?.try_into().ok()?);
    let at = u64::from_le_bytes(content.get(8..16)?.try_into().ok()?);
    let origin = match code {
        1 => Origin::Flight,
        2 => Origin::Live,
        _ => return None,
    };
    Some((origin, at))
}
