//! Static per-call-site metadata and the id table that maps ids back to it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, RwLock};

/// Name and source location of one `scope!` call site (or of one interned dynamic name).
///
/// `scope!` puts one `static Callsite` at each call site, so name, file and line are written
/// once at compile time; the hot path reads only the compact [`id`](Callsite::id).
#[derive(Debug)]
pub struct Callsite {
    name: &'static str,
    file: &'static str,
    line: u32,
    module_path: &'static str,
    /// 0 until registered, then the index in the global table plus one. Written once.
    id: AtomicU32,
}

impl Callsite {
    /// Describes a call site; `const` so it can initialise a `static`.
    pub(crate) const fn new(
        name: &'static str,
        file: &'static str,
        line: u32,
        module_path: &'static str,
    ) -> Self {
        Self {
            name,
            file,
            line,
            module_path,
            id: AtomicU32::new(0),
        }
    }

    /// The scope's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Source file of the call site (`"<dynamic>"` for names interned at run time).
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// Source line of the call site (0 for names interned at run time).
    pub fn line(&self) -> u32 {
        self.line
    }

    /// Module path of the call site (empty for names interned at run time).
    pub fn module_path(&self) -> &'static str {
        self.module_path
    }

    /// The callsite's process-wide id (never 0), registering it on first use.
    #[inline(always)]
    pub fn id(&'static self) -> u32 {
        let id = self.id.load(Ordering::Relaxed);
        if id != 0 { id } else { self.register() }
    }

    #[cold]
    #[inline(never)]
    fn register(&'static self) -> u32 {
        let _untracked = crate::record::registry::Untracked::enter();
        let mut table = crate::record::sync::recover(TABLE.write());
        // Another thread may have won the race between our load and the lock.
        let id = self.id.load(Ordering::Relaxed);
        if id != 0 {
            return id;
        }
        table.push(self);
        let id = u32::try_from(table.len()).expect("more than u32::MAX callsites");
        self.id.store(id, Ordering::Relaxed);
        id
    }
}

/// Callsites are equal when they are the same call site (the same `static`).
impl PartialEq for Callsite {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Callsite {}

/// Every registered callsite; id `n` is at index `n - 1`.
static TABLE: RwLock<Vec<&'static Callsite>> = RwLock::new(Vec::new());

/// Dynamic names interned so far, process-wide.
static DYNAMIC: Mutex<Option<HashMap<&'static str, &'static Callsite>>> = Mutex::new(None);

thread_local! {
    /// This thread's cache of dynamic names, so a repeated name costs one hash lookup.
    static LOCAL_NAMES: RefCell<HashMap<Box<str>, u32>> = RefCell::new(HashMap::new());
}

/// A snapshot of the id table, for post-processing.
pub(crate) fn table() -> Vec<&'static Callsite> {
    crate::record::sync::recover(TABLE.read()).clone()
}

/// The callsite with id `id`.
pub(crate) fn by_id(id: u32) -> Option<&'static Callsite> {
    lookup(&crate::record::sync::recover(TABLE.read()), id)
}

/// The callsite with id `id` in `table`, a snapshot of the id table (see [`table`]).
#[inline]
pub(crate) fn lookup(table: &[&'static Callsite], id: u32) -> Option<&'static Callsite> {
    (id as usize)
        .checked_sub(1)
        .and_then(|i| table.get(i))
        .copied()
}

/// Interns a run-time name and returns its callsite id.
///
/// The first use of a name on a thread takes a lock and, the first time in the process,
/// allocates and leaks one [`Callsite`] for it: dynamic names live until the process exits, so
/// they suit a bounded set of names (file kinds, request routes), not unbounded ones (user ids).
pub fn intern(name: &str) -> u32 {
    LOCAL_NAMES
        .try_with(|cache| {
            if let Some(&id) = cache.borrow().get(name) {
                return id;
            }
            let _untracked = crate::record::registry::Untracked::enter();
            let id = intern_global(name);
            cache.borrow_mut().insert(name.into(), id);
            id
        })
        .unwrap_or_else(|_| intern_global(name))
}

#[cold]
fn intern_global(name: &str) -> u32 {
    let _untracked = crate::record::registry::Untracked::enter();
    let callsite = {
        let mut map = crate::record::sync::lock(&DYNAMIC);
        let map = map.get_or_insert_with(HashMap::new);
        match map.get(name) {
            Some(&callsite) => callsite,
            None => {
                let name: &'static str = Box::leak(name.into());
                let callsite: &'static Callsite =
                    Box::leak(Box::new(Callsite::new(name, "<dynamic>", 0, "")));
                map.insert(name, callsite);
                callsite
            }
        }
    };
    callsite.id()
}
