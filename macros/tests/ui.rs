//! Compile-time behaviour of `#[profile]` and `scope!`: what they accept, and the errors they
//! give, checked against the `.stderr` files under `tests/ui/fail` (`TRYBUILD=overwrite`
//! regenerates them).
//!
//! The cases build against tickscope with its `enabled` feature (this crate's dev-dependency),
//! which turns on this crate's `enabled` in trybuild's project whatever features this test
//! binary has: the full expansions are always the ones checked.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
