//! The one panic hook of the crate: what streaming sessions and flight recorders write when a
//! thread panics.
//!
//! Each kind of work registers its action once ([`register`]) in its [`Slot`]; the hook, set
//! with the first registration and chained to the hook in place before it, runs every
//! registered action in slot order (stream flushes first, then flight recorder dumps), all
//! untracked, and then the previous hook. Each action reaches its own sessions through weak
//! references and skips a lock another thread holds: a panic hook must not hang.

use std::sync::{Once, OnceLock};

use crate::record::registry::Untracked;

/// Where an action runs in the hook: slots run in this order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    /// Streaming sessions write what they have recorded ([`super::stream`]).
    StreamFlush,
    /// Flight recorders that asked for it write their window.
    FlightDump,
}

/// The actions by slot, in the order they run.
static ACTIONS: [OnceLock<fn()>; 2] = [OnceLock::new(), OnceLock::new()];
static HOOK: Once = Once::new();

/// Runs `action` in `slot` on every panic from now on, installing the hook (once per process)
/// chained to the hook in place before it. A slot keeps the first action registered for it.
pub(crate) fn register(slot: Slot, action: fn()) {
    ACTIONS[slot as usize].get_or_init(|| action);
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            run_all();
            previous(info);
        }));
    });
}

/// Runs every registered action, in slot order, untracked.
fn run_all() {
    let _untracked = Untracked::enter();
    for action in ACTIONS.iter().filter_map(OnceLock::get) {
        action();
    }
}
