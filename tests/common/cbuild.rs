//! Builds the C code of the tests (plug-ins, the native API's callers) into shared objects with
//! the system's `cc`: C99, every warning an error, `include/` on the path.
// Each test binary that includes this module uses only some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Runs `cc` with `args`; panics with the compiler's output when it fails.
pub fn cc(args: &[&str]) {
    let out = Command::new("cc")
        .args(args)
        .output()
        .expect("the tests build C code with `cc`: install a C compiler");
    assert!(
        out.status.success(),
        "cc {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compiles `source` (a path from the repository's root) into the shared object
/// `lib<name>.so` in `dir`, with `extra` flags after the common ones (`-O2`, `-pthread`,
/// `-D…`, more `-I…`).
pub fn shared_object(dir: &Path, name: &str, source: &str, extra: &[&str]) -> PathBuf {
    let lib = dir.join(format!("lib{name}.so"));
    let (include, out, source) = (
        format!("-I{ROOT}/include"),
        lib.display().to_string(),
        format!("{ROOT}/{source}"),
    );
    let mut args = vec![
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
        "-shared",
        "-fPIC",
        &include,
    ];
    args.extend_from_slice(extra);
    args.extend(["-o", &out, &source]);
    cc(&args);
    lib
}

/// A folder of this test process for what it builds: `tickscope-<what>-<pid>` in the
/// temporary folder.
pub fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tickscope-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
