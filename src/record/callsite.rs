//! Static per-call-site metadata and the id table that maps ids back to it.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
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

/// The callsites with ids from `known + 1` on, in id order (a streaming session declares
/// the new ones since it last looked).
pub(crate) fn table_from(known: usize) -> Vec<&'static Callsite> {
    let table = crate::record::sync::recover(TABLE.read());
    table.get(known..).map_or_else(Vec::new, <[_]>::to_vec)
}

/// The callsite with id `id`.
pub(crate) fn by_id(id: u32) -> Option<&'static Callsite> {
    lookup(&crate::record::sync::recover(TABLE.read()), id)
}

/// The callsite with id `id` in `table`, a snapshot of the id table (see [`table`]) or a
/// capture's table; `None` for an id the table does not hold or marks [`UNDECLARED`].
#[inline]
pub(crate) fn lookup(table: &[&'static Callsite], id: u32) -> Option<&'static Callsite> {
    (id as usize)
        .checked_sub(1)
        .and_then(|i| table.get(i))
        .copied()
        .filter(|c| !std::ptr::eq(*c, &UNDECLARED))
}

/// Fills the ids of a capture's callsite table that its file does not declare (ids may be
/// sparse): [`lookup`] finds nothing there.
pub(crate) static UNDECLARED: Callsite = Callsite::new("<undeclared callsite>", "", 0, "");

/// Callsites read from capture files, by their interned strings' addresses and line.
type FileCallsites = HashMap<(usize, usize, u32, usize), &'static Callsite>;

/// Callsites read from capture files so far, process-wide.
static FROM_FILES: Mutex<Option<FileCallsites>> = Mutex::new(None);

/// Strings of callsites read from capture files so far, process-wide.
static FILE_STRINGS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

/// `s` as a `'static` string: leaked once per distinct string in the process and returned
/// again for the same one, so that reading a file twice, or one string named by many
/// callsites, costs its memory once.
pub(crate) fn intern_str(s: &str) -> &'static str {
    let _untracked = crate::record::registry::Untracked::enter();
    let mut set = crate::record::sync::lock(&FILE_STRINGS);
    let set = set.get_or_insert_with(HashSet::new);
    if let Some(&interned) = set.get(s) {
        return interned;
    }
    let leaked: &'static str = Box::leak(s.into());
    set.insert(leaked);
    leaked
}

/// The callsite for `name`, `file`, `line` and `module_path` as read from a capture file, its
/// strings interned with [`intern_str`]: leaked once per distinct quadruple in the process and
/// returned again for the same one (a small, fixed size each: the strings are shared). A
/// dynamic name (file `"<dynamic>"`, line 0, no module) is the same callsite as [`intern`]
/// gives that name.
pub(crate) fn intern_callsite(
    name: &'static str,
    file: &'static str,
    line: u32,
    module_path: &'static str,
) -> &'static Callsite {
    let _untracked = crate::record::registry::Untracked::enter();
    if file == DYNAMIC_FILE && line == 0 && module_path.is_empty() {
        return dynamic(name);
    }
    let key = (
        name.as_ptr() as usize,
        file.as_ptr() as usize,
        line,
        module_path.as_ptr() as usize,
    );
    let mut map = crate::record::sync::lock(&FROM_FILES);
    let map = map.get_or_insert_with(HashMap::new);
    let callsite: &'static Callsite = map
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(Callsite::new(name, file, line, module_path))));
    callsite
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
    dynamic(name).id()
}

/// The file of the callsites of dynamic names.
const DYNAMIC_FILE: &str = "<dynamic>";

/// The callsite of the dynamic name `name`, leaked the first time in the process.
pub(crate) fn dynamic(name: &str) -> &'static Callsite {
    let mut map = crate::record::sync::lock(&DYNAMIC);
    let map = map.get_or_insert_with(HashMap::new);
    match map.get(name) {
        Some(&callsite) => callsite,
        None => {
            let name: &'static str = Box::leak(name.into());
            let callsite: &'static Callsite =
                Box::leak(Box::new(Callsite::new(name, DYNAMIC_FILE, 0, "")));
            map.insert(name, callsite);
            callsite
        }
    }
}
