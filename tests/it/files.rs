//! File exports on the file system: no temporary file survives a failure, concurrent writers
//! of one path, symbolic links, device nodes and FIFOs.
#![cfg(feature = "enabled")]
#![cfg(unix)]

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier, mpsc};
use std::time::Duration;

use serde_json::Value;
use tickscope::export::{chrome, folded};
use tickscope::{Profiler, scope};

use crate::common::scratch_dir as scratch;

/// A stopped session of the calling thread: "outer" around `steps` "step" scopes.
fn record(steps: usize) -> Profiler {
    let prof = Profiler::builder().current_thread().start();
    {
        let _outer = scope!("outer");
        for _ in 0..steps {
            let _step = scope!("step");
            std::hint::black_box(0);
        }
    }
    prof.stop();
    prof
}

/// What `write_chrome_trace` must put in a file for `prof`.
fn chrome_bytes(prof: &Profiler) -> Vec<u8> {
    let mut out = Vec::new();
    chrome::write(&prof.trace(), &mut out).unwrap();
    out
}

/// The names in `dir`.
fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// The temporary files left in `dir`.
fn temps(dir: &Path) -> Vec<String> {
    entries(dir)
        .into_iter()
        .filter(|n| n.contains(".tmp"))
        .collect()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip magic");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The names of the complete events ("X") in a Chrome trace, sorted.
fn span_names(json: &[u8]) -> Vec<String> {
    let doc: Value = serde_json::from_slice(json).expect("complete JSON");
    let mut names: Vec<String> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// Makes a character device node `path` (`major`, `minor`) with mknod(1); `false` where that
/// is not allowed (not root) or the file system ignores device nodes (`nodev`).
fn mknod_char(path: &Path, major: u32, minor: u32) -> bool {
    let made = Command::new("mknod")
        .arg(path)
        .args(["c", &major.to_string(), &minor.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    made && std::fs::OpenOptions::new().write(true).open(path).is_ok()
}

fn is_char_device(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// Whether the export is known to write device nodes in place. Checked on a private node before
/// any test writes to the real `/dev/null` or `/dev/full`, so that a regression can never
/// replace those (as root it could). `true` where no private node can be made: then the
/// process cannot create files in `/dev` either.
fn devices_are_written_in_place(test: &str) -> bool {
    let dir = scratch(test);
    let node = dir.join("null");
    if !mknod_char(&node, 1, 3) {
        std::fs::remove_dir_all(&dir).unwrap();
        return true;
    }
    let result = record(1).write_chrome_trace(&node);
    let in_place = result.is_ok() && is_char_device(&node) && temps(&dir).is_empty();
    std::fs::remove_dir_all(&dir).unwrap();
    in_place
}

#[test]
fn directory_target_fails_and_leaves_its_parent_unchanged() {
    let prof = record(2);
    let dir = scratch("directory");
    for name in ["trace.json", "trace.json.gz"] {
        let target = dir.join(name);
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "keep").unwrap();
        let before = entries(&dir);
        let named = target.to_string_lossy().into_owned();
        let err = prof.write_chrome_trace(&target).unwrap_err();
        assert!(err.to_string().contains(&named), "{err}");
        assert_eq!(entries(&dir), before, "the parent changed");
        let err = prof.write(&target, &folded::Options::new()).unwrap_err();
        assert!(err.to_string().contains(&named), "{err}");
        assert_eq!(entries(&dir), before, "the parent changed");
        assert!(target.is_dir());
        assert_eq!(entries(&target), BTreeSet::from(["keep".to_owned()]));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_errors_leave_no_temporary_file() {
    let prof = record(2);
    let dir = scratch("write-errors");

    // A parent that does not exist: NotFound, naming the path; nothing created anywhere.
    let missing = dir.join("no/such/trace.json");
    let err = prof.write_chrome_trace(&missing).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("no/such/trace.json"), "{err}");
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));

    // A full disk in the middle of the write: a private node like /dev/full.
    let full = dir.join("full");
    let full_gz = dir.join("full.json.gz");
    if mknod_char(&full, 1, 7) && mknod_char(&full_gz, 1, 7) {
        let before = entries(&dir);
        for path in [&full, &full_gz] {
            let err = prof
                .write_chrome_trace(path)
                .expect_err("a full disk must fail");
            assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
            assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
            let err = prof
                .write(path, &folded::Options::new())
                .expect_err("a full disk must fail");
            assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
            assert!(is_char_device(path), "{} was replaced", path.display());
        }
        assert_eq!(entries(&dir), before, "temporary files left");
    } else {
        eprintln!("skipped the full-disk half: cannot make device nodes here");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Run by `regular_file_write_errors_leave_no_temporary_file` in a child process whose file
/// size limit (`ulimit -f`) makes writes of regular files fail half-way (EFBIG).
const FSIZE_CHILD: &str = "TICKSCOPE_FILES_FSIZE_CHILD";

#[test]
fn regular_file_write_errors_leave_no_temporary_file() {
    if let Some(dir) = std::env::var_os(FSIZE_CHILD) {
        let dir = PathBuf::from(dir);
        let prof = record(2_000);
        for name in ["trace.json", "trace.json.gz"] {
            let path = dir.join(name);
            std::fs::write(&path, "old").unwrap();
            let err = prof
                .write_chrome_trace(&path)
                .expect_err("the file size limit must fail the write");
            assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
            assert_eq!(std::fs::read(&path).unwrap(), b"old", "{name} was touched");
        }
        assert!(temps(&dir).is_empty(), "{:?}", temps(&dir));
        return;
    }
    let dir = scratch("fsize");
    // SIGXFSZ ignored (ignored signals stay ignored across exec), so the write gets EFBIG.
    let out = Command::new("sh")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 8 || exit 99; exec \"$0\" \"$@\"",
        ])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::common::test_name(
                module_path!(),
                "regular_file_write_errors_leave_no_temporary_file",
            ),
            "--test-threads=1",
            "--nocapture",
        ])
        .env(FSIZE_CHILD, &dir)
        .output();
    match out {
        Ok(out) if out.status.code() == Some(99) => eprintln!("skipped: no ulimit -f"),
        Ok(out) => assert!(
            out.status.success(),
            "child failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("skipped: no sh ({e})"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn concurrent_writers_of_one_path_all_succeed() {
    const WRITERS: usize = 8;
    let dir = scratch("concurrent");
    for name in ["trace.json", "trace.json.gz"] {
        let path = dir.join(name);
        for round in 0..3 {
            let barrier = Arc::new(Barrier::new(WRITERS));
            let writers: Vec<_> = (0..WRITERS)
                .map(|i| {
                    let barrier = barrier.clone();
                    let path = path.clone();
                    std::thread::spawn(move || {
                        let prof = record(i + 1);
                        let expected = chrome_bytes(&prof);
                        barrier.wait();
                        (expected, prof.write_chrome_trace(&path))
                    })
                })
                .collect();
            let mut expected = Vec::new();
            let mut errors = Vec::new();
            for writer in writers {
                let (bytes, result) = writer.join().unwrap();
                expected.push(bytes);
                if let Err(e) = result {
                    errors.push(e.to_string());
                }
            }
            assert!(errors.is_empty(), "{name} round {round}: {errors:?}");
            let mut written = std::fs::read(&path).unwrap();
            if name.ends_with(".gz") {
                written = gunzip(&written);
            }
            let steps = span_names(&written).iter().filter(|n| *n == "step").count();
            assert!((1..=WRITERS).contains(&steps), "{steps} steps");
            assert!(
                expected.contains(&written),
                "{name} round {round}: not one writer's whole trace"
            );
            assert!(temps(&dir).is_empty(), "{:?}", temps(&dir));
        }
    }
    assert_eq!(
        entries(&dir),
        BTreeSet::from(["trace.json".to_owned(), "trace.json.gz".to_owned()])
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn symlinks_to_regular_files_are_written_through() {
    let prof = record(3);
    let expected = chrome_bytes(&prof);
    let dir = scratch("symlink");
    let real = dir.join("real");
    let links = dir.join("links");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::create_dir_all(&links).unwrap();

    // Relative link, private target: the link stays, the target gets the trace and keeps its
    // mode.
    let target = real.join("trace.json");
    std::fs::write(&target, "old").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = links.join("trace.json");
    std::os::unix::fs::symlink("../real/trace.json", &link).unwrap();
    prof.write_chrome_trace(&link).unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("../real/trace.json")
    );
    assert_eq!(std::fs::read(&target).unwrap(), expected);
    let meta = std::fs::symlink_metadata(&target).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // A chain of links, absolute then relative, to a gzipped target.
    let gz = real.join("trace.json.gz");
    std::fs::write(&gz, "old").unwrap();
    let hop = links.join("hop.json.gz");
    std::os::unix::fs::symlink(&gz, &hop).unwrap();
    let chain = links.join("chain.json.gz");
    std::os::unix::fs::symlink("hop.json.gz", &chain).unwrap();
    prof.write_chrome_trace(&chain).unwrap();
    for l in [&hop, &chain] {
        assert!(
            std::fs::symlink_metadata(l)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
    assert_eq!(gunzip(&std::fs::read(&gz).unwrap()), expected);

    // Folded stacks through a link too.
    let folded = real.join("trace.folded");
    std::fs::write(&folded, "old").unwrap();
    let folded_link = links.join("trace.folded");
    std::os::unix::fs::symlink(&folded, &folded_link).unwrap();
    prof.write(&folded_link, &folded::Options::new()).unwrap();
    assert!(
        std::fs::symlink_metadata(&folded_link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&folded).unwrap().lines().count(), 2);

    assert_eq!(
        entries(&real),
        BTreeSet::from(["trace.json", "trace.json.gz", "trace.folded"].map(String::from))
    );
    assert_eq!(
        entries(&links),
        BTreeSet::from(
            ["trace.json", "hop.json.gz", "chain.json.gz", "trace.folded"].map(String::from)
        )
    );

    // A loop of links: an error naming the path, nothing written.
    let a = links.join("a.json");
    let b = links.join("b.json");
    std::os::unix::fs::symlink("b.json", &a).unwrap();
    std::os::unix::fs::symlink("a.json", &b).unwrap();
    let err = prof.write_chrome_trace(&a).unwrap_err();
    assert!(err.to_string().contains(&*a.to_string_lossy()), "{err}");
    assert!(temps(&links).is_empty(), "{:?}", temps(&links));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dangling_symlinks_create_their_target() {
    let prof = record(1);
    let expected = chrome_bytes(&prof);
    let dir = scratch("dangling");
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let link = dir.join("trace.json");
    std::os::unix::fs::symlink("sub/new.json", &link).unwrap();
    prof.write_chrome_trace(&link).unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(sub.join("new.json")).unwrap(), expected);

    let gz_link = dir.join("trace.json.gz");
    std::os::unix::fs::symlink(sub.join("new.json.gz"), &gz_link).unwrap();
    prof.write_chrome_trace(&gz_link).unwrap();
    assert!(
        std::fs::symlink_metadata(&gz_link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        gunzip(&std::fs::read(sub.join("new.json.gz")).unwrap()),
        expected
    );

    // A link into a directory that does not exist: NotFound, the link untouched.
    let broken = dir.join("broken.json");
    std::os::unix::fs::symlink("nowhere/x.json", &broken).unwrap();
    let err = prof.write_chrome_trace(&broken).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
    assert!(
        err.to_string().contains(&*broken.to_string_lossy()),
        "{err}"
    );
    assert!(
        std::fs::symlink_metadata(&broken)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    assert_eq!(
        entries(&dir),
        BTreeSet::from(["trace.json", "trace.json.gz", "broken.json", "sub"].map(String::from))
    );
    assert_eq!(
        entries(&sub),
        BTreeSet::from(["new.json", "new.json.gz"].map(String::from))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dev_full_reports_disk_full_and_stays_a_device() {
    let full = Path::new("/dev/full");
    if !is_char_device(full) {
        eprintln!("skipped: no /dev/full");
        return;
    }
    assert!(
        devices_are_written_in_place("canary-full"),
        "exports replace device nodes; not touching /dev/full"
    );
    let prof = record(2);
    let err = prof
        .write_chrome_trace(full)
        .expect_err("/dev/full must fail");
    assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
    assert!(err.to_string().contains("/dev/full"), "{err}");
    let err = prof
        .write(full, &folded::Options::new())
        .expect_err("/dev/full must fail");
    assert!(err.to_string().contains("/dev/full"), "{err}");
    assert!(is_char_device(full), "/dev/full is no longer a device");
}

#[test]
fn dev_null_accepts_and_stays_a_device() {
    let null = Path::new("/dev/null");
    if !is_char_device(null) {
        eprintln!("skipped: no /dev/null");
        return;
    }
    assert!(
        devices_are_written_in_place("canary-null"),
        "exports replace device nodes; not touching /dev/null"
    );
    let prof = record(2);
    prof.write_chrome_trace(null).unwrap();
    prof.write(null, &folded::Options::new()).unwrap();
    assert!(is_char_device(null), "/dev/null is no longer a device");
}

#[test]
fn fifos_are_written_directly() {
    let prof = record(3);
    let expected = chrome_bytes(&prof);
    let dir = scratch("fifo");
    for name in ["trace.json", "trace.json.gz"] {
        let fifo = dir.join(name);
        match Command::new("mkfifo").arg(&fifo).status() {
            Ok(s) if s.success() => {}
            _ => {
                eprintln!("skipped: mkfifo unavailable");
                std::fs::remove_dir_all(&dir).unwrap();
                return;
            }
        }
        let (tx, rx) = mpsc::channel();
        let reader = fifo.clone();
        // Not joined: if the export never opens the FIFO, the reader stays blocked in open and
        // the checks below fail instead of hanging.
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let read = std::fs::File::open(&reader).and_then(|mut f| f.read_to_end(&mut bytes));
            let _ = tx.send(read.map(|_| bytes));
        });
        prof.write_chrome_trace(&fifo).unwrap();
        let file_type = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(
            file_type.is_fifo(),
            "{name} is no longer a FIFO: {file_type:?}"
        );
        let mut read = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the reader got nothing")
            .unwrap();
        if name.ends_with(".gz") {
            read = gunzip(&read);
        }
        assert_eq!(read, expected);
    }
    assert_eq!(
        entries(&dir),
        BTreeSet::from(["trace.json", "trace.json.gz"].map(String::from))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
