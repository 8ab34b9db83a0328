//! The native-code API (feature `native`): C code built here with the system `cc` into a
//! shared object records scopes into the test program's session, nested in its Rust scopes.
//! The test program exports its symbols (build.rs), so the C code finds
//! `tickscope_scope_begin` in it as in a program it is linked into.
#![cfg(all(feature = "native", target_os = "linux"))]

use tickscope::{Profiler, scope};

use crate::common::cbuild;

#[test]
fn c_scopes_nest_in_the_rust_scopes_around_them() {
    // Keep the exported functions in the program (nothing in Rust calls them).
    std::hint::black_box([
        tickscope::native::tickscope_callsite as *const () as usize,
        tickscope::native::tickscope_scope_begin as *const () as usize,
        tickscope::native::tickscope_scope_end as *const () as usize,
    ]);
    let dir = cbuild::temp_dir("native");
    let lib = cbuild::shared_object(&dir, "native_test", "tests/native/native_test.c", &[]);
    let source = format!("{}/tests/native/native_test.c", cbuild::ROOT);
    // SAFETY: the test's own C code; it has no initialisers.
    let library = unsafe { libloading::Library::new(&lib) }.unwrap();
    // SAFETY: `void native_work(unsigned)`, as declared in the C file.
    let native_work =
        unsafe { library.get::<unsafe extern "C" fn(std::ffi::c_uint)>(b"native_work") }.unwrap();

    let prof = Profiler::builder().current_thread().start();
    {
        let _g = scope!("rust");
        // SAFETY: a plain C function.
        unsafe { native_work(3) };
    }
    prof.stop();
    let trace = prof.trace();
    let spans: Vec<(&str, u32)> = trace.threads[0]
        .spans
        .iter()
        .map(|s| (s.name(), s.depth))
        .collect();
    assert_eq!(
        spans,
        [
            ("rust", 0),
            ("native outer", 1),
            ("native inner", 2),
            ("native inner", 2),
            ("native inner", 2),
        ]
    );
    let inner = &trace.threads[0].spans[2];
    assert_eq!(inner.callsite.file(), source);
    assert_eq!(inner.callsite.line(), 11);
    assert_eq!(inner.parent, Some(1));
    assert_eq!(prof.report().get("native inner").unwrap().calls, 3);
    // Outside a session nothing is recorded, and nothing breaks.
    // SAFETY: as above.
    unsafe { native_work(2) };
    assert_eq!(prof.report().get("native inner").unwrap().calls, 3);
    std::fs::remove_dir_all(&dir).unwrap();
}
