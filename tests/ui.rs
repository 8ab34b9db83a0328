//! Compile-time behaviour of `#[profile]`: what it accepts, and the errors it gives, checked
//! against the `.stderr` files under `tests/ui/fail` (`TRYBUILD=overwrite` regenerates them).
#![cfg(feature = "enabled")]

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
