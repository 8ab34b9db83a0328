//! Why a packed chunk cannot be read: [`PackError`].

use std::fmt;

use super::{
    CODEC_ZSTD_COLUMNS, MAX_COLUMN_BYTES, MAX_PACKED_RECORDS, MAX_RECORDS_PER_BYTE, PACKED_PREFIX,
};

/// Why a packed chunk cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PackError {
    /// The content is shorter than the prefix.
    Short(usize),
    /// The prefix names a codec this build does not know.
    Codec(u16),
    /// The prefix says more records than a packed chunk holds, or columns larger than such
    /// records take.
    TooLarge {
        /// Records the prefix says.
        records: u64,
        /// Bytes of columns the prefix says.
        columns: u64,
    },
    /// The zstd frame does not decompress to the columns the prefix says (damaged).
    #[cfg_attr(not(feature = "compress"), allow(dead_code))]
    Frame(String),
    /// The columns do not hold the records the prefix says (damaged).
    Columns(&'static str),
    /// This build was made without the `compress` feature.
    #[cfg_attr(feature = "compress", allow(dead_code))]
    Unsupported,
    /// A record of a kind this build does not know.
    Kind {
        /// Its place in the chunk.
        record: usize,
        /// The kind's code.
        code: u8,
    },
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short(len) => write!(
                f,
                "a packed events chunk holds at least {PACKED_PREFIX} bytes, not {len}"
            ),
            Self::Codec(codec) => write!(
                f,
                "packed events chunk codec {codec} is not supported (this build reads codec \
                 {CODEC_ZSTD_COLUMNS})"
            ),
            Self::TooLarge { records, columns } => write!(
                f,
                "a packed events chunk says {records} records in {columns} bytes of columns: \
                 more than a chunk holds ({MAX_PACKED_RECORDS} records, {MAX_COLUMN_BYTES} \
                 bytes each, {MAX_RECORDS_PER_BYTE} a byte of the chunk)"
            ),
            Self::Frame(why) => write!(f, "the packed events chunk's zstd frame is damaged: {why}"),
            Self::Unsupported => f.write_str(
                "this build of tickscope reads no packed events chunk: it was built without \
                 the `compress` feature",
            ),
            Self::Columns(why) => write!(f, "the packed events chunk is damaged: {why}"),
            Self::Kind { record, code } => write!(
                f,
                "record {record} of the packed events chunk has unknown kind {code}"
            ),
        }
    }
}

impl std::error::Error for PackError {}
