//! The native-code API (feature `native`): C functions, declared in `include/tickscope.h`,
//! through which C or C++ code linked into a Rust program records scopes into the same
//! sessions as Rust code, on the calling thread.
//!
//! ```c
//! #include "tickscope.h"
//!
//! void solve(void) {
//!     static uint32_t site = 0;
//!     if (site == 0) site = tickscope_callsite("solve", __FILE__, __LINE__);
//!     tickscope_scope_begin(site);
//!     /* ... */
//!     tickscope_scope_end();
//! }
//! ```

use std::cell::RefCell;
use std::ffi::{CStr, c_char};

use crate::record::callsite;
use crate::record::scope::ScopeGuard;

thread_local! {
    /// The scopes native code opened on this thread, innermost last.
    static OPEN: RefCell<Vec<ScopeGuard>> = const { RefCell::new(Vec::new()) };
}

/// `s` as a string: lossy UTF-8, or `default` for NULL.
///
/// # Safety
///
/// `s` is NULL or a NUL-terminated string.
unsafe fn text(s: *const c_char, default: &str) -> String {
    if s.is_null() {
        return default.to_owned();
    }
    // SAFETY: the caller's promise: a NUL-terminated string.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// The id of the callsite `name` at `file`:`line`, registered the first time (leaked once
/// per distinct callsite, like `scope!`'s): call it once per site and keep the id. 0 for a
/// NULL name. A NULL file is `<native>`.
///
/// # Safety
///
/// `name` and `file` are NULL or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tickscope_callsite(
    name: *const c_char,
    file: *const c_char,
    line: u32,
) -> u32 {
    if name.is_null() {
        return 0;
    }
    // SAFETY: the caller's promise, passed on.
    let (name, file) = unsafe { (text(name, ""), text(file, "<native>")) };
    let (name, file) = (callsite::intern_str(&name), callsite::intern_str(&file));
    callsite::intern_callsite(name, file, line, "").id()
}

/// Opens a scope of `callsite` (an id from [`tickscope_callsite`]) on this thread, recorded by
/// the sessions that record the thread; [`tickscope_scope_end`] closes it. An unknown id
/// opens a scope that records nothing (so that ends still pair with begins).
#[unsafe(no_mangle)]
pub extern "C" fn tickscope_scope_begin(callsite: u32) {
    let guard = match callsite::by_id(callsite) {
        Some(site) => ScopeGuard::enter(site),
        None => ScopeGuard::inactive(),
    };
    let _ = OPEN.try_with(|open| open.borrow_mut().push(guard));
}

/// Closes the innermost scope this thread opened with [`tickscope_scope_begin`]; nothing when
/// none is open.
#[unsafe(no_mangle)]
pub extern "C" fn tickscope_scope_end() {
    let guard = OPEN.try_with(|open| open.borrow_mut().pop()).ok().flatten();
    // Dropped outside the borrow: closing a scope may call observers.
    drop(guard);
}
