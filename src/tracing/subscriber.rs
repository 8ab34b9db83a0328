//! The tickscope subscriber: the bridge without `tracing-subscriber`'s registry, its spans kept
//! in tables owned by the threads that create them.
//!
//! Each thread takes a table of its own ([`Shard`]) when it creates its first span and hands
//! it to a later thread when it exits. A span's id names its table, its slot there and the
//! slot's generation, so any thread finds the span without a lookup in anything shared, and
//! the thread that creates spans takes free slots from a list of its own. A span's slot is
//! written by the threads that use it (its count of handles, its state) and by no other: the
//! span path of a thread that creates, enters, exits and closes its own spans writes nothing
//! that other threads write.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use ::tracing::span::{Attributes, Id, Record};
use ::tracing::subscriber::Interest;
use ::tracing::{Event, Metadata};
use tracing_core::span::Current;

use super::hooks::{self, Ext, SpanStore};
use super::local::site;

/// Bits of a span id that hold its slot (plus one: an id is never 0).
const SLOT_BITS: u32 = 28;
/// Bits of a span id that hold its table.
const SHARD_BITS: u32 = 16;
/// Bits of a span id that hold its slot's generation: a slot's id comes back after 16,384
/// spans, as the registry's does (decoding tells the spans of one id apart by their closes).
const GEN_BITS: u32 = 14;
/// Tables at most: one per thread alive at once, the first kept for threads without one.
const SHARDS: usize = 1 << SHARD_BITS;
/// Slots of a table's first page; page `p` holds `FIRST_PAGE << p`.
const FIRST_PAGE: usize = 64;
/// Pages of a table: together `FIRST_PAGE * (2^PAGES - 1)` slots, at least `2^SLOT_BITS - 1`.
const PAGES: usize = 22;

/// The tickscope subscriber: records `tracing` spans and events as
/// [`TickscopeLayer`](super::TickscopeLayer) does, keeping its spans itself rather than in a
/// `tracing-subscriber` registry; see the [module documentation](super).
///
/// It holds nothing: every instance is the same subscriber, so that each thread may set a
/// `Dispatch` of its own ([`dispatch`](super::dispatch)) and write no reference count that
/// other threads write.
#[derive(Clone, Copy, Debug, Default)]
pub struct TickscopeSubscriber {
    _private: (),
}

/// One span's slot.
struct Slot {
    /// Raised when the slot is freed: an id of an earlier span no longer finds it.
    generation: AtomicU32,
    /// Handles of the span (`clone_span` adds one, `try_close` takes one); 0 while free.
    refs: AtomicUsize,
    /// The span's metadata.
    metadata: AtomicPtr<Metadata<'static>>,
    /// What the bridge keeps of a span that is not plain.
    ext: Mutex<Ext>,
}

impl Slot {
    fn new() -> Self {
        Self {
            generation: AtomicU32::new(0),
            refs: AtomicUsize::new(0),
            metadata: AtomicPtr::new(std::ptr::null_mut()),
            ext: Mutex::new(Ext::default()),
        }
    }
}

/// A table of slots, owned by one thread at a time, which alone takes its free slots.
struct Shard {
    /// Page `p`, once made: `FIRST_PAGE << p` slots.
    pages: [AtomicPtr<Slot>; PAGES],
    /// Slots freed by threads other than the owner, for the owner to take.
    remote: Mutex<Vec<u32>>,
    /// How many slots [`Shard::remote`] holds, read before locking it.
    remote_len: AtomicUsize,
}

impl Shard {
    fn new() -> Self {
        Self {
            pages: [const { AtomicPtr::new(std::ptr::null_mut()) }; PAGES],
            remote: Mutex::new(Vec::new()),
            remote_len: AtomicUsize::new(0),
        }
    }

    /// The page and the offset in it of slot `slot`.
    fn place(slot: usize) -> (usize, usize) {
        let page = (slot / FIRST_PAGE + 1).ilog2() as usize;
        (page, slot - FIRST_PAGE * ((1 << page) - 1))
    }

    /// Slot `slot`, if its page was made.
    fn slot(&self, slot: usize) -> Option<&'static Slot> {
        let (page, offset) = Self::place(slot);
        let base = self.pages.get(page)?.load(Ordering::Acquire);
        if base.is_null() {
            return None;
        }
        // SAFETY: a page, once published, is a leaked array of `FIRST_PAGE << page` slots
        // that is never freed, and `offset` is below that length.
        Some(unsafe { &*base.add(offset) })
    }

    /// Slot `slot`, making its page first if needed (by the owner only).
    fn slot_or_make(&self, slot: usize) -> Option<&'static Slot> {
        if let Some(slot) = self.slot(slot) {
            return Some(slot);
        }
        let (page, _) = Self::place(slot);
        let len = FIRST_PAGE << page;
        let slots: Box<[Slot]> = (0..len).map(|_| Slot::new()).collect();
        let base = Box::leak(slots).as_mut_ptr();
        self.pages.get(page)?.store(base, Ordering::Release);
        self.slot(slot)
    }
}

/// Every table, by number; each made once and never freed.
static TABLES: [AtomicPtr<Shard>; SHARDS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SHARDS];

/// The table `shard`, if it was made.
fn table(shard: usize) -> Option<&'static Shard> {
    let ptr = TABLES.get(shard)?.load(Ordering::Acquire);
    // SAFETY: a published table is a leaked `Shard`, never freed.
    (!ptr.is_null()).then(|| unsafe { &*ptr })
}

/// The owner's side of a table: its free slots and how many it ever gave.
struct Owned {
    shard: u32,
    free: Vec<u32>,
    next: u32,
}

impl Owned {
    /// A slot for a new span: its number and the slot.
    fn take(&mut self) -> Option<(u32, &'static Slot)> {
        let table = table(self.shard as usize)?;
        if self.free.is_empty() && table.remote_len.load(Ordering::Relaxed) > 0 {
            let mut remote = crate::record::sync::recover(table.remote.lock());
            self.free.append(&mut remote);
            table.remote_len.store(0, Ordering::Relaxed);
        }
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None if u64::from(self.next) + 1 < 1 << SLOT_BITS => {
                self.next += 1;
                self.next - 1
            }
            None => return None,
        };
        Some((slot, table.slot_or_make(slot as usize)?))
    }
}

/// Tables of threads that exited, for the next threads; and how many tables were made.
static POOL: Mutex<(Vec<Owned>, u32)> = Mutex::new((Vec::new(), 0));

/// Table 0, which threads without one of their own (exiting, or beyond [`SHARDS`]) share.
fn shared() -> &'static Mutex<Owned> {
    static SHARED: OnceLock<Mutex<Owned>> = OnceLock::new();
    SHARED.get_or_init(|| Mutex::new(make_table(0)))
}

/// Makes table `shard`.
fn make_table(shard: u32) -> Owned {
    let table = Box::leak(Box::new(Shard::new()));
    TABLES[shard as usize].store(table, Ordering::Release);
    Owned {
        shard,
        free: Vec::new(),
        next: 0,
    }
}

/// A table for a thread: one a thread left, else a new one; `None` when all are taken.
fn adopt() -> Option<Owned> {
    let _ = shared();
    let mut pool = crate::record::sync::recover(POOL.lock());
    if let Some(owned) = pool.0.pop() {
        return Some(owned);
    }
    let shard = pool.1 + 1;
    if shard as usize >= SHARDS {
        return None;
    }
    pool.1 = shard;
    Some(make_table(shard))
}

/// This thread's table, handed back when it exits; and whether it asked for one (when all
/// were taken, it uses the shared one from then on, without asking again).
struct Owner(RefCell<Option<Owned>>, Cell<bool>);

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(owned) = self.0.get_mut().take() {
            crate::record::sync::recover(POOL.lock()).0.push(owned);
        }
    }
}

thread_local! {
    static OWNER: Owner = const { Owner(RefCell::new(None), Cell::new(false)) };
    /// The table this thread owns (`u32::MAX`: none yet), read when a span closes.
    static OWN_SHARD: Cell<u32> = const { Cell::new(u32::MAX) };
    /// The spans entered on this thread, innermost last, for `current_span`.
    static CURRENT: RefCell<Vec<(Id, &'static Metadata<'static>)>> = const { RefCell::new(Vec::new()) };
}

/// The id of slot `slot` of table `shard` in generation `generation`.
fn make_id(shard: u32, slot: u32, generation: u32) -> Id {
    let generation = u64::from(generation) & ((1 << GEN_BITS) - 1);
    Id::from_u64(
        (generation << (SLOT_BITS + SHARD_BITS))
            | (u64::from(shard) << SLOT_BITS)
            | (u64::from(slot) + 1),
    )
}

/// The table, slot number and slot of span `id`, while it is the span the slot holds.
fn find(id: &Id) -> Option<(u32, u32, &'static Slot)> {
    let raw = id.into_u64();
    let slot = ((raw & ((1 << SLOT_BITS) - 1)) as u32).checked_sub(1)?;
    let shard = ((raw >> SLOT_BITS) & ((1 << SHARD_BITS) - 1)) as u32;
    let generation = (raw >> (SLOT_BITS + SHARD_BITS)) as u32;
    let found = table(shard as usize)?.slot(slot as usize)?;
    let now = found.generation.load(Ordering::Acquire) & ((1 << GEN_BITS) - 1);
    (now == generation && found.refs.load(Ordering::Relaxed) > 0).then_some((shard, slot, found))
}

/// A live span's slot, as the bridge's hooks find it.
struct Found(&'static Slot);

impl SpanStore for Found {
    fn metadata(&self) -> &'static Metadata<'static> {
        let ptr = self.0.metadata.load(Ordering::Acquire);
        // SAFETY: a live slot's metadata is a `&'static Metadata` stored when its span was
        // made (a slot is found only while it holds a span).
        unsafe { &*ptr }
    }

    fn with_ext<R>(&self, f: impl FnOnce(&mut Ext) -> R) -> R {
        f(&mut crate::record::sync::lock(&self.0.ext))
    }
}

/// Makes a span of `metadata` in this thread's table (or the shared one): its id and slot.
fn make_span(metadata: &'static Metadata<'static>) -> Option<(Id, &'static Slot)> {
    let own = OWNER
        .try_with(|owner| {
            let mut owned = owner.0.borrow_mut();
            if owned.is_none() && !owner.1.replace(true) {
                *owned = adopt();
                let shard = owned.as_ref().map_or(u32::MAX, |o| o.shard);
                let _ = OWN_SHARD.try_with(|s| s.set(shard));
            }
            let owned = owned.as_mut()?;
            Some((owned.shard, owned.take()?))
        })
        .ok()
        .flatten();
    let (shard, (slot, found)) = match own {
        Some(own) => own,
        None => {
            let mut owned = crate::record::sync::recover(shared().lock());
            (owned.shard, owned.take()?)
        }
    };
    found
        .metadata
        .store(std::ptr::from_ref(metadata).cast_mut(), Ordering::Release);
    found.refs.store(1, Ordering::Release);
    let generation = found.generation.load(Ordering::Relaxed);
    Some((make_id(shard, slot, generation), found))
}

/// Frees the slot `slot` of table `shard`, whose span closed.
fn free(shard: u32, slot: u32, found: &'static Slot) {
    {
        let mut ext = crate::record::sync::recover(found.ext.lock());
        *ext = Ext::default();
    }
    found.generation.fetch_add(1, Ordering::Release);
    let mine = OWN_SHARD.try_with(Cell::get).ok() == Some(shard)
        && OWNER
            .try_with(|owner| match owner.0.borrow_mut().as_mut() {
                Some(owned) if owned.shard == shard => {
                    owned.free.push(slot);
                    true
                }
                _ => false,
            })
            .unwrap_or(false);
    if mine {
        return;
    }
    if shard == 0 {
        crate::record::sync::recover(shared().lock())
            .free
            .push(slot);
        return;
    }
    if let Some(table) = table(shard as usize) {
        let mut remote = crate::record::sync::recover(table.remote.lock());
        remote.push(slot);
        table.remote_len.store(remote.len(), Ordering::Relaxed);
    }
}

impl ::tracing::Subscriber for TickscopeSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        site(meta);
        Interest::always()
    }

    fn enabled(&self, _metadata: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let Some((id, found)) = make_span(attrs.metadata()) else {
            // Every slot of every table is taken (2^28 spans open on one thread): the span
            // gets an id that finds nothing, and is not recorded.
            return Id::from_u64(u64::MAX);
        };
        if let Some(state) = hooks::on_new_span(attrs, &id) {
            crate::record::sync::recover(found.ext.lock()).state = Some(state);
        }
        id
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        hooks::on_record(span, values, || find(span).map(|f| Found(f.2)));
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        hooks::on_follows_from(span, follows, || find(span).map(|f| Found(f.2)));
    }

    fn event(&self, event: &Event<'_>) {
        hooks::on_event(event);
    }

    fn enter(&self, span: &Id) {
        if let Some((_, _, found)) = find(span) {
            let metadata = Found(found).metadata();
            let _ = CURRENT.try_with(|c| c.borrow_mut().push((span.clone(), metadata)));
        }
        hooks::on_enter(span, || find(span).map(|f| Found(f.2)));
    }

    fn exit(&self, span: &Id) {
        hooks::on_exit(span);
        let _ = CURRENT.try_with(|c| {
            let mut current = c.borrow_mut();
            if let Some(at) = current.iter().rposition(|(id, _)| id == span) {
                current.remove(at);
            }
        });
    }

    fn clone_span(&self, id: &Id) -> Id {
        if let Some((_, _, found)) = find(id) {
            found.refs.fetch_add(1, Ordering::Relaxed);
        }
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        let Some((shard, slot, found)) = find(&id) else {
            return false;
        };
        if found.refs.fetch_sub(1, Ordering::Release) != 1 {
            return false;
        }
        std::sync::atomic::fence(Ordering::Acquire);
        hooks::on_close(&id, || Some(Found(found)));
        free(shard, slot, found);
        true
    }

    fn current_span(&self) -> Current {
        CURRENT
            .try_with(|c| match c.borrow().last() {
                Some((id, metadata)) => Current::new(id.clone(), metadata),
                None => Current::none(),
            })
            .unwrap_or_else(|_| Current::none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's table: its number, the slots it ever made and its free ones.
    fn own() -> (u32, u32, usize) {
        OWNER.with(|owner| {
            let owned = owner.0.borrow();
            let owned = owned.as_ref().expect("a table");
            (owned.shard, owned.next, owned.free.len())
        })
    }

    /// The table of span id `id`.
    fn shard_of(id: u64) -> u32 {
        ((id >> SLOT_BITS) & ((1 << SHARD_BITS) - 1)) as u32
    }

    // One test: tables handed back by threads of other tests would be taken by its threads.
    #[test]
    fn each_thread_takes_and_frees_the_slots_of_its_own_table() {
        // On the test's thread, which keeps its table until the test ends.
        an_id_no_longer_finds_its_slot_once_the_span_closed();
        the_current_span_is_the_innermost_entered_here();
        let dispatch = ::tracing::Dispatch::new(TickscopeSubscriber::default());
        // Two threads, each making 10,000 spans one after another, then one it keeps. Both
        // hold their tables at once (neither exits before the other has taken its own: a
        // thread that exits hands its table back, and the other could take it).
        let both = std::sync::Barrier::new(2);
        let run = || {
            let _d = ::tracing::dispatcher::set_default(&dispatch);
            for _ in 0..10_000 {
                let _s = ::tracing::info_span!("x").entered();
            }
            let kept = ::tracing::info_span!("kept");
            let id = kept.id().unwrap().into_u64();
            let own = own();
            both.wait();
            (own, id, kept)
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(run);
            let b = s.spawn(run);
            (a.join().unwrap(), b.join().unwrap())
        });
        let ((a_own, a_id, a_span), (b_own, b_id, b_span)) = (a, b);
        // Each took one slot of its own table and used it again for every span: no span
        // took or gave back a slot anywhere another thread does.
        assert_ne!(a_own.0, b_own.0);
        assert_eq!((a_own.1, a_own.2), (1, 0));
        assert_eq!((b_own.1, b_own.2), (1, 0));
        assert_eq!(shard_of(a_id), a_own.0);
        assert_eq!(shard_of(b_id), b_own.0);
        for own in [a_own, b_own] {
            assert_eq!(
                table(own.0 as usize)
                    .unwrap()
                    .remote_len
                    .load(Ordering::Relaxed),
                0
            );
        }
        // Closed here, on another thread: each slot goes back to its table's remote list.
        drop((a_span, b_span));
        for own in [a_own, b_own] {
            assert_eq!(
                table(own.0 as usize)
                    .unwrap()
                    .remote_len
                    .load(Ordering::Relaxed),
                1
            );
        }
        // The threads exited: the next one takes one of their tables, and the slot freed
        // remotely, rather than a slot it never made.
        let (next, id) = std::thread::spawn(move || {
            let _d = ::tracing::dispatcher::set_default(&dispatch);
            let span = ::tracing::info_span!("next");
            (own(), span.id().unwrap().into_u64())
        })
        .join()
        .unwrap();
        assert!([a_own.0, b_own.0].contains(&next.0));
        assert_eq!((next.1, shard_of(id)), (1, next.0));
    }

    /// A span's id finds its slot while a handle of it is left, and not after.
    fn an_id_no_longer_finds_its_slot_once_the_span_closed() {
        let dispatch = ::tracing::Dispatch::new(TickscopeSubscriber::default());
        let _d = ::tracing::dispatcher::set_default(&dispatch);
        let span = ::tracing::info_span!("gone");
        let id = span.id().unwrap();
        assert!(find(&id).is_some());
        let copy = span.clone();
        drop(span);
        assert!(find(&id).is_some(), "a handle is left");
        drop(copy);
        assert!(find(&id).is_none());
        let again = ::tracing::info_span!("again");
        // The same slot, another generation: another id.
        assert_ne!(again.id().unwrap(), id);
        assert_eq!(
            again.id().unwrap().into_u64() & ((1 << SLOT_BITS) - 1),
            id.into_u64() & ((1 << SLOT_BITS) - 1)
        );
    }

    /// `Span::current()` is the innermost span entered on the thread.
    fn the_current_span_is_the_innermost_entered_here() {
        let dispatch = ::tracing::Dispatch::new(TickscopeSubscriber::default());
        let _d = ::tracing::dispatcher::set_default(&dispatch);
        let name = || ::tracing::Span::current().metadata().map(|m| m.name());
        assert_eq!(name(), None);
        let outer = ::tracing::info_span!("outer");
        let inner = ::tracing::info_span!("inner");
        {
            let _o = outer.enter();
            assert_eq!(name(), Some("outer"));
            {
                let _i = inner.enter();
                assert_eq!(name(), Some("inner"));
                assert_eq!(::tracing::Span::current().id(), inner.id());
            }
            assert_eq!(name(), Some("outer"));
        }
        assert_eq!(name(), None);
    }
}
