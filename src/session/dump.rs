//! Flight recorders that write their window when a thread panics
//! ([`ProfilerBuilder::flight_recorder_dump_on_panic`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::Inner;
#[cfg(doc)]
use super::ProfilerBuilder;
use crate::capture::panic;
use crate::record::clock::{self, Calibration};

static DUMPS: Mutex<Vec<(Weak<Inner>, PathBuf)>> = Mutex::new(Vec::new());

/// Dumps `inner`'s window to `path` on panic (while it records), from the one panic hook
/// ([`panic`]).
pub(super) fn register(inner: &Arc<Inner>, path: PathBuf) {
    panic::register(panic::Slot::FlightDump, dump_all);
    let mut dumps = crate::record::sync::lock(&DUMPS);
    dumps.retain(|(d, _)| d.strong_count() > 0 && !d.ptr_eq(&Arc::downgrade(inner)));
    dumps.push((Arc::downgrade(inner), path));
}

/// Writes the window of every flight recorder that asked for it. A lock another thread
/// holds is not waited for: a panic hook must not hang.
fn dump_all() {
    let dumps: Vec<(Arc<Inner>, PathBuf)> = match DUMPS.try_lock() {
        Ok(dumps) => upgrade(&dumps),
        Err(std::sync::TryLockError::Poisoned(p)) => upgrade(&p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for (inner, path) in dumps {
        let Ok(state) = inner.state.try_lock() else {
            continue;
        };
        let Some(window) = &state.window else {
            continue;
        };
        let capture = inner.capture(window, clock::now(), Calibration::sample());
        drop(state);
        if let Err(e) = write(&capture, &path) {
            eprintln!("tickscope: flight recorder dump on panic: {e}");
        }
    }
}

fn upgrade(dumps: &[(Weak<Inner>, PathBuf)]) -> Vec<(Arc<Inner>, PathBuf)> {
    dumps
        .iter()
        .filter_map(|(d, p)| Some((d.upgrade()?, p.clone())))
        .collect()
}

/// Writes `capture` to `path`: a Chrome trace for `.json` and `.json.gz`, the HTML report
/// for `.html` and `.html.gz`, else a capture file.
fn write(capture: &crate::Capture, path: &Path) -> std::io::Result<()> {
    let name = path.to_string_lossy();
    if name.ends_with(".json") || name.ends_with(".json.gz") {
        let trace = capture.decode();
        crate::export::write_file(&trace, path, &crate::export::chrome::Options::default())
    } else if name.ends_with(".html") || name.ends_with(".html.gz") {
        let trace = capture.decode();
        let report = crate::export::html::Options::new().title("tickscope flight recorder dump");
        crate::export::write_file(&trace, path, &report)
    } else {
        crate::capture::output::atomic_write(path, |out| capture.write_to(out).map(drop))
    }
}
