//! Packet sequences ([`Sequence`]) and what they intern: strings numbered per trace
//! ([`Interner`]), marked per sequence as they are emitted.

use crate::record::hash::FxHashMap;

use super::fields::TAIL;

/// One packet sequence: one track's events, timed by its incremental clock.
pub(super) struct Sequence {
    pub(super) id: u32,
    /// The track its events go to by default.
    pub(super) track: u64,
    /// The time of its last packet; `None` before its first (the state is not set up yet).
    pub(super) last_ns: Option<u64>,
    /// Which names, categories and annotation names (by iid) it has interned.
    pub(super) names: Vec<bool>,
    pub(super) categories: Vec<bool>,
    pub(super) annotations: Vec<bool>,
    /// The end of each of its event packets: its `trusted_packet_sequence_id` and
    /// `sequence_flags` fields (`SEQ_NEEDS_INCREMENTAL_STATE`), padded with zeros.
    pub(super) tail: [u8; TAIL],
    /// How many bytes of `tail` are used.
    pub(super) tail_len: usize,
}

/// Strings numbered from 1 (an interning id space).
#[derive(Default)]
pub(super) struct Interner {
    ids: FxHashMap<String, u64>,
    list: Vec<String>,
}

impl Interner {
    pub(super) fn id(&mut self, s: &str) -> u64 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        self.list.push(s.to_owned());
        let id = self.list.len() as u64;
        self.ids.insert(s.to_owned(), id);
        id
    }

    pub(super) fn get(&self, id: u64) -> &str {
        &self.list[id as usize - 1]
    }
}

/// Whether `iid` is marked in `set`, marking it.
pub(super) fn known(set: &mut Vec<bool>, iid: u64) -> bool {
    let i = iid as usize;
    if i >= set.len() {
        set.resize(i + 1, false);
    }
    std::mem::replace(&mut set[i], true)
}

/// The tracks of async calls so far: per (process, callsite), each track's sequence and the
/// end of its last call.
pub(super) type CallLanes = crate::record::hash::FxHashMap<
    (u32, *const crate::record::callsite::Callsite),
    Vec<(Sequence, u64)>,
>;
