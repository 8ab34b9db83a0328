//! Helpers shared by the integration-test binaries (`tests/it`, `tests/mock`, `tests/process`
//! and the few that must stay alone): one lock for tests that need the process to themselves,
//! the mock clock, scratch paths, child runs of a test, and futures driven by hand.
//!
//! Each binary declares it once (`#[path = "../common/mod.rs"] mod common;`) and uses part
//! of it.
#![allow(dead_code)]

pub mod cbuild;
#[macro_use]
pub mod memory;
pub mod perfetto_pb;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};

/// The lock of the tests that need what the whole process shares: the mock clock's value,
/// sessions of all threads (which see every thread's scopes), the global chunk and thread
/// counters, resident memory, the flight recorder's scanner.
///
/// In `tests/mock` and `tests/process` every test that records takes it, so they run one at
/// a time; `tests/it` holds only tests that may run beside any other (sessions of their own
/// thread, nothing process-wide) and takes it nowhere.
static SERIAL: Mutex<()> = Mutex::new(());

/// Waits until no other test holds [`SERIAL`]; the test runs alone until the guard drops. A
/// test that failed while holding it does not block the others.
///
/// Where a test installed the mock clock ([`mock`]), the guard's test begins a tick after
/// every record of the tests before it: a session's window takes in the records of its start
/// tick, and the mock stands still unless a test moves it, so a session of all threads started
/// at once would otherwise take in the last records of the test before (their thread, still
/// registered while it exits, then shows in its trace with exits of nothing).
pub fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(mock) = MOCK.get() {
        mock.increment(1u64);
    }
    guard
}

/// The mock clock, once [`mock`] installed it.
static MOCK: OnceLock<Arc<tickscope::clock::Mock>> = OnceLock::new();

/// The process-wide mock clock (`tickscope::clock::use_mock_clock`), installed by the first
/// call; every test of `tests/mock` calls it before its first session.
pub fn mock() -> Arc<tickscope::clock::Mock> {
    let mock = tickscope::clock::use_mock_clock().expect("mock clock installed first");
    MOCK.get_or_init(|| mock.clone());
    mock
}

/// [`serial`] and [`mock`] at once.
pub fn serial_mock() -> (MutexGuard<'static, ()>, Arc<tickscope::clock::Mock>) {
    let guard = serial();
    (guard, mock())
}

/// This process's folder for what its tests write: `tickscope-tests-<pid>` in the temporary
/// folder.
fn process_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tickscope-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fresh path (nothing there) in this process's folder, for one test: `name` is unique
/// within the test binary.
pub fn scratch_path(name: &str) -> PathBuf {
    let path = process_dir().join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// A fresh path for one test (see [`scratch_path`]), whose file is removed when dropped.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A fresh path for one test, its file removed when dropped.
pub fn scratch(name: &str) -> Scratch {
    Scratch(scratch_path(name))
}

/// A fresh, empty folder for one test: `name` is unique within the test binary.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = process_dir().join(format!("{name}.d"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The name by which `--exact` selects the test `name` of the module `module` (its
/// `module_path!()`): the path without the binary's crate name, as the test harness lists it.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}

/// Pending on its first poll, ready on the second.
#[derive(Default)]
pub struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Polls `fut` once with a waker that does nothing.
pub fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

/// Where two byte strings meant to be equal (say, a file written two ways) first differ,
/// with their lengths and 200 bytes either side of it: an assertion's message.
pub fn first_difference(a: &[u8], b: &[u8]) -> String {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let from = at.saturating_sub(200);
    format!(
        "lengths {} vs {}, first difference at byte {at}:\nleft:  {}\nright: {}",
        a.len(),
        b.len(),
        String::from_utf8_lossy(&a[from..(at + 200).min(a.len())]),
        String::from_utf8_lossy(&b[from..(at + 200).min(b.len())])
    )
}
