//! The names a report shows, each once, by index.

use crate::record::callsite::Callsite;
use crate::record::hash::FxHashMap;

/// Name indices: every name the report shows once, in order of first use.
#[derive(Default)]
pub(super) struct Names {
    pub(super) index: FxHashMap<&'static str, u32>,
    pub(super) list: Vec<&'static str>,
    /// The index of each callsite's name, by the callsite's address: a scope's name is found
    /// without hashing it (names can be long).
    pub(super) callsites: FxHashMap<usize, u32>,
}

impl Names {
    pub(super) fn id(&mut self, name: &'static str) -> u32 {
        *self.index.entry(name).or_insert_with(|| {
            self.list.push(name);
            (self.list.len() - 1) as u32
        })
    }

    pub(super) fn of(&mut self, callsite: &'static Callsite) -> u32 {
        let key = std::ptr::from_ref(callsite) as usize;
        match self.callsites.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.id(callsite.name());
                self.callsites.insert(key, id);
                id
            }
        }
    }
}
