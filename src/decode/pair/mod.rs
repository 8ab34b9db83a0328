//! Pairing one thread's records: entries with exits, payloads with the records they belong to,
//! arguments with their scope, and allocations with the scope they happened in.

mod close;
mod entering;
mod enters;
mod pairing;
mod records;
mod window;

pub(super) use close::begun;
pub(super) use pairing::{Extras, Pairing, Probe};
pub(super) use window::{Kept, piece_due};
