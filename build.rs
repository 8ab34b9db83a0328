//! With the `native` feature, the integration tests export their symbols (`-rdynamic`): the C
//! code of tests/it/native.rs, loaded as a shared object, finds `tickscope_scope_begin` and
//! its siblings in the test program, as C linked into a program would.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if linux && std::env::var_os("CARGO_FEATURE_NATIVE").is_some() {
        println!("cargo::rustc-link-arg-tests=-rdynamic");
    }
}
