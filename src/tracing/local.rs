//! The bridge's state on each thread: the plain spans it created, its cache of interned
//! sites and its stack of entered spans, in one const-initialised thread-local; and the
//! process-wide counters that tell when a thread's entries went stale.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};

use ::tracing::Metadata;

use super::site::{Site, global_site};
use crate::record::hash::FxHashMap;
use crate::record::registry;

/// Raised whenever a span that had no [`SpanState`](super::hooks::SpanState) gets one after it was created (a
/// `follows_from`): every thread's [`Plain`] entries made before are then stale.
pub(super) static STATE_EPOCH: AtomicU32 = AtomicU32::new(0);

/// The epoch a [`Plain`] entry is valid in: [`STATE_EPOCH`] plus the times recording resumed
/// after none was active ([`registry::resumed`]). Spans created while nothing recorded skipped
/// [`on_new_span`](super::hooks::on_new_span), so an entry made before may name a span whose id the
/// registry has since given (after its slot's generation wrapped) to another span. Both only
/// grow, so their sum changes whenever either does.
#[inline(always)]
fn epoch() -> u32 {
    STATE_EPOCH
        .load(Ordering::Relaxed)
        .wrapping_add(registry::resumed())
}

/// Raised when a span without [`SpanState`](super::hooks::SpanState) is first entered on a thread that does not hold it
/// as [`Plain`] (another thread created it), which marks it moved ([`Ext::moved`](super::hooks::Ext::moved)): a span whose close sees
/// the value of its creation was entered on its own thread only, which decoding resolves there.
pub(super) static MOVED: AtomicU32 = AtomicU32::new(0);

/// Slots of a thread's [`Plain`] cache.
const PLAIN_SLOTS: usize = 64;

/// A span this thread created that has no [`SpanState`](super::hooks::SpanState): its id, its callsite's id and the
/// [`STATE_EPOCH`] it was made in. Its enter needs no lookup in the registry.
#[derive(Clone, Copy, Default)]
struct Plain {
    span: u64,
    callsite: u32,
    epoch: u32,
    /// [`MOVED`] when the span was created.
    moved: u32,
}

/// Slots of a thread's first-level cache of `SITES` ([`site`](super::site)).
const SITE_SLOTS: usize = 64;

/// The layer's state on one thread, in one const-initialised thread-local without a
/// destructor (no lazy initialisation on the hot path).
pub(super) struct Local {
    /// The plain spans this thread created lately, by the low bits of their id.
    plain: [Cell<Plain>; PLAIN_SLOTS],
    /// Interned sites by the address of their metadata, direct-mapped.
    sites: [Cell<(usize, Option<&'static Site>)>; SITE_SLOTS],
    /// The spans entered on this thread whose slice was recorded, innermost last: (span id,
    /// end key), the first [`STACK`] here and the deeper ones in [`DEEPER`].
    stack: [Cell<(u64, u32)>; STACK],
    /// How many spans are entered ([`Local::stack`] and [`DEEPER`] together).
    depth: Cell<usize>,
}

/// Entered spans a thread keeps in its [`Local::stack`] before [`DEEPER`].
const STACK: usize = 32;

impl Local {
    /// Notes the slice of span `span`, whose end carries `key`, as the innermost one entered.
    #[inline(always)]
    pub(super) fn enter(&self, span: u64, key: u32) {
        let depth = self.depth.get();
        match self.stack.get(depth) {
            Some(slot) => slot.set((span, key)),
            None => {
                let _ = DEEPER.try_with(|d| d.borrow_mut().push((span, key)));
            }
        }
        self.depth.set(depth + 1);
    }

    /// Forgets the innermost slice of span `span` entered here and returns its end's key;
    /// `None` when none is entered here (its enter was not recorded).
    #[inline(always)]
    pub(super) fn exit(&self, span: u64) -> Option<u32> {
        let depth = self.depth.get();
        // The usual case: the innermost span exits.
        if let Some(slot) = depth.checked_sub(1).and_then(|top| self.stack.get(top))
            && slot.get().0 == span
        {
            self.depth.set(depth - 1);
            return Some(slot.get().1);
        }
        self.exit_slow(span)
    }

    /// [`Local::exit`] for a span below the innermost one (guards dropped out of order) or
    /// deeper than [`STACK`].
    #[cold]
    #[inline(never)]
    fn exit_slow(&self, span: u64) -> Option<u32> {
        let mut all = self.entered();
        let at = all.iter().rposition(|&(s, _)| s == span)?;
        let (_, key) = all.remove(at);
        for (slot, &entry) in self.stack.iter().zip(&all) {
            slot.set(entry);
        }
        let _ = DEEPER.try_with(|d| {
            let mut deeper = d.borrow_mut();
            deeper.clear();
            deeper.extend(all.iter().skip(STACK));
        });
        self.depth.set(all.len());
        Some(key)
    }

    /// The spans entered here, outermost first.
    fn entered(&self) -> Vec<(u64, u32)> {
        let depth = self.depth.get();
        let mut all: Vec<(u64, u32)> = self.stack[..depth.min(STACK)]
            .iter()
            .map(Cell::get)
            .collect();
        if depth > STACK {
            let _ = DEEPER.try_with(|d| all.extend(d.borrow().iter().take(depth - STACK)));
        }
        all
    }

    /// The innermost span entered here.
    pub(super) fn innermost(&self) -> Option<u64> {
        let depth = self.depth.get();
        match depth.checked_sub(1)? {
            top if top < STACK => Some(self.stack[top].get().0),
            _ => self.entered().last().map(|&(s, _)| s),
        }
    }
}

thread_local! {
    pub(super) static LOCAL: Local = const {
        Local {
            plain: [const {
                Cell::new(Plain {
                    span: 0,
                    callsite: 0,
                    epoch: 0,
                    moved: 0,
                })
            }; PLAIN_SLOTS],
            sites: [const { Cell::new((0, None)) }; SITE_SLOTS],
            stack: [const { Cell::new((0, 0)) }; STACK],
            depth: Cell::new(0),
        }
    };
    /// This thread's cache of `SITES` ([`site`](super::site)), so that an event costs no lock.
    static LOCAL_SITES: RefCell<FxHashMap<usize, &'static Site>> =
        RefCell::new(FxHashMap::default());
    /// The spans entered on this thread beyond the first [`STACK`], innermost last.
    static DEEPER: RefCell<Vec<(u64, u32)>> = const { RefCell::new(Vec::new()) };
}

/// The slot of span `span` in a thread's [`Local::plain`] cache.
#[inline(always)]
fn plain_slot(span: u64) -> usize {
    // The registry's ids differ in their low bits between spans alive at once.
    (span as usize) % PLAIN_SLOTS
}

/// The callsite id of span `span` when this thread created it without state, since the last
/// [`STATE_EPOCH`] change.
#[inline(always)]
pub(super) fn plain_callsite(span: u64) -> Option<u32> {
    let plain = LOCAL.try_with(|l| l.plain[plain_slot(span)].get()).ok()?;
    (plain.span == span && plain.epoch == epoch()).then_some(plain.callsite)
}

/// True when this thread created span `span` as [`Plain`] and no span was entered since on a
/// thread that did not create it: then every enter of `span` was on this thread.
#[inline(always)]
pub(super) fn entered_only_here(span: u64) -> bool {
    LOCAL
        .try_with(|l| {
            let plain = l.plain[plain_slot(span)].get();
            plain.span == span
                && plain.epoch == epoch()
                && plain.moved == MOVED.load(Ordering::Relaxed)
        })
        .unwrap_or(false)
}

/// Notes (or, with `callsite` `None`, forgets) span `span` in this thread's [`Local::plain`] cache.
#[inline(always)]
pub(super) fn set_plain(span: u64, callsite: Option<u32>) {
    let _ = LOCAL.try_with(|l| {
        let slot = &l.plain[plain_slot(span)];
        match callsite {
            Some(callsite) => slot.set(Plain {
                span,
                callsite,
                epoch: epoch(),
                moved: MOVED.load(Ordering::Relaxed),
            }),
            None if slot.get().span == span => slot.set(Plain::default()),
            None => {}
        }
    });
}

/// The interned site of `meta`, made the first time in the process.
#[inline]
pub(super) fn site(meta: &'static Metadata<'static>) -> &'static Site {
    let key = std::ptr::from_ref(meta) as usize;
    // Metadata are statics, at least 8 bytes apart.
    let slot = (key >> 3) % SITE_SLOTS;
    if let Ok((cached, Some(site))) = LOCAL.try_with(|l| l.sites[slot].get())
        && cached == key
    {
        return site;
    }
    site_slow(key, slot, meta)
}

/// [`site`] when the thread's first-level cache misses.
#[cold]
#[inline(never)]
fn site_slow(key: usize, slot: usize, meta: &'static Metadata<'static>) -> &'static Site {
    let site = match LOCAL_SITES.try_with(|m| m.borrow().get(&key).copied()) {
        Ok(Some(site)) => site,
        _ => {
            let site = global_site(key, meta);
            let _ = LOCAL_SITES.try_with(|m| m.borrow_mut().insert(key, site));
            site
        }
    };
    let _ = LOCAL.try_with(|l| l.sites[slot].set((key, Some(site))));
    site
}

/// True when the span `id` is entered on this thread with a recorded slice.
pub(super) fn entered_here(id: u64) -> bool {
    LOCAL
        .try_with(|l| l.entered().iter().any(|&(s, _)| s == id))
        .unwrap_or(false)
}
