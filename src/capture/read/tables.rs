//! The session header, string table and session footer chunks.

use super::bytes::{u16_at, u32_at, u64_at};
use super::errors::ReadError;
use crate::capture::Header;
pub(super) use crate::capture::footer::Footer;
use crate::capture::format::{
    CHUNK_HEADER, FORMAT_VERSION, SESSION_FOOTER_LEN, SESSION_HEADER_FIXED,
};

/// The session header chunk's content, at `pos`.
pub(super) fn header(pos: usize, content: &[u8]) -> Result<Header, ReadError> {
    if content.len() < SESSION_HEADER_FIXED {
        return Err(ReadError::at(
            pos,
            format!(
                "the session header holds {} bytes, fewer than its fixed {SESSION_HEADER_FIXED}",
                content.len()
            ),
        ));
    }
    let format_version = u16_at(content, 0);
    if format_version != FORMAT_VERSION {
        return Err(ReadError::at(
            pos + CHUNK_HEADER,
            format!(
                "capture format version {format_version} is not supported (this build reads \
                 version {FORMAT_VERSION})"
            ),
        ));
    }
    let mut strings = content[SESSION_HEADER_FIXED..].split(|&b| b == 0);
    let mut next = || {
        strings
            .next()
            .map(|s| String::from_utf8_lossy(s).into_owned())
    };
    let (producer, process_name, host_name) = (next(), next(), next());
    // `split` gives one piece more than there are NULs: three strings need a fourth piece.
    let (Some(producer), Some(process_name), Some(host_name), Some(_)) =
        (producer, process_name, host_name, next())
    else {
        return Err(ReadError::at(
            pos + CHUNK_HEADER + SESSION_HEADER_FIXED,
            "the session header's producer, process name and host name are not three \
             NUL-terminated strings",
        ));
    };
    Ok(Header {
        format_version,
        producer,
        process_id: u32_at(content, 4),
        process_name,
        host_name,
        start_unix_ns: u64_at(content, 8),
        origin: None,
    })
}

/// A string table: its bytes (the last NUL left out) and where each string starts, 4 bytes a
/// string however short it is. String `n` ends at the NUL before string `n + 1`, the last one
/// at the end of the bytes.
#[derive(Default)]
pub(super) struct StringTable {
    bytes: Vec<u8>,
    starts: Vec<u32>,
}

impl StringTable {
    /// The strings of `bytes` (copied), NUL-separated; `None` past 4 GiB.
    pub(super) fn new(bytes: &[u8]) -> Option<Self> {
        u32::try_from(bytes.len()).ok()?;
        let mut starts = Vec::with_capacity(1 + bytes.iter().filter(|&&b| b == 0).count());
        starts.push(0);
        // Each start is at most the length, which fits.
        starts.extend(
            bytes
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == 0)
                .map(|(at, _)| at as u32 + 1),
        );
        Some(Self {
            bytes: bytes.to_vec(),
            starts,
        })
    }

    /// Strings in the table.
    pub(super) fn len(&self) -> usize {
        self.starts.len()
    }

    /// String `id`, without its NUL.
    pub(super) fn get(&self, id: u32) -> Option<&[u8]> {
        let index = id as usize;
        let start = *self.starts.get(index)? as usize;
        let end = self
            .starts
            .get(index + 1)
            .map_or(self.bytes.len(), |&next| next as usize - 1);
        self.bytes.get(start..end)
    }
}

/// The session footer chunk's content, at `pos`.
pub(super) fn footer(pos: usize, content: &[u8]) -> Result<Footer, ReadError> {
    Footer::parse(content).ok_or_else(|| {
        ReadError::at(
            pos,
            format!(
                "the session footer holds {} bytes, fewer than its {SESSION_FOOTER_LEN}",
                content.len()
            ),
        )
    })
}
