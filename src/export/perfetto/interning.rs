//! Name iids: interned per trace, emitted once per sequence, and the callsite name cache.

use std::io::Write;

use super::fields::{CALLSITE_CACHE_BITS, EVENT_NAME_IID, INTERNED_NAMES};
use super::sequence::{Sequence, known};
use super::writer::Writer;
use crate::export::proto::{bytes_field, int_field};
use crate::record::callsite::Callsite;

impl<'a, W: Write + ?Sized> Writer<'a, W> {
    /// Puts `name_iid` in the event, interning the name on `seq` first if needed.
    pub(super) fn name_iid(&mut self, seq: &mut Sequence, iid: u64) {
        if !known(&mut seq.names, iid) {
            self.scratch.clear();
            int_field(&mut self.scratch, 1, iid);
            bytes_field(&mut self.scratch, 2, self.names.get(iid).as_bytes());
            bytes_field(&mut self.interned, INTERNED_NAMES, &self.scratch);
        }
        int_field(&mut self.event, EVENT_NAME_IID, iid);
    }

    /// The name iid of `callsite`.
    #[inline]
    pub(super) fn callsite_iid(&mut self, callsite: &'static Callsite) -> u64 {
        let address = std::ptr::from_ref(callsite) as usize;
        // Fibonacci hashing of the address onto the cache's slots.
        let slot =
            (address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CALLSITE_CACHE_BITS);
        let (cached, iid) = self.callsite_cache[slot as usize];
        if cached == address {
            return iid;
        }
        self.callsite_iid_slow(callsite, slot as usize)
    }

    /// [`callsite_iid`](Self::callsite_iid) when `slot` holds another callsite: the map,
    /// interning the name if it is new, and the slot remembers the answer.
    #[cold]
    #[inline(never)]
    fn callsite_iid_slow(&mut self, callsite: &'static Callsite, slot: usize) -> u64 {
        let iid = match self.callsite_names.get(&std::ptr::from_ref(callsite)) {
            Some(&iid) => iid,
            None => {
                let iid = self.names.id(callsite.name());
                self.callsite_names.insert(callsite, iid);
                iid
            }
        };
        self.callsite_cache[slot] = (std::ptr::from_ref(callsite) as usize, iid);
        iid
    }
}
