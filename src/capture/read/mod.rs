//! Reading capture files back into [`Capture`]s: every session of a file, each checked chunk
//! by chunk.
//!
//! Reading never trusts a length: every one is checked against the input left before it is
//! used, and what is allocated is proportional to the input's size. What cannot be read is an
//! error that names the byte offset ([`ReadError`]); what can be read past (an unknown chunk
//! type or version, a last chunk cut short, a session without footer) is read past with a
//! warning ([`Capture::warnings`]).
//!
//! Records are not copied: the captures keep the input's bytes and use each event chunk's
//! records where they lie ([`FileRecords`]), once their kinds are checked.

mod bytes;
mod checks;
mod errors;
mod events;
mod gzip;
#[cfg(all(target_os = "linux", feature = "enabled", feature = "gzip"))]
pub(crate) use gzip::file_size_unlimited;
mod open;
mod parser;
mod session;
mod sniff;
mod source;
mod tables;
#[cfg(test)]
mod tests;
mod words;

pub use errors::ReadError;
pub(super) use open::read_path;

/// What a session without footer is said to have, in its warning.
pub(super) const NO_FOOTER: &str = "has no footer";
