//! Plug-ins: shared libraries implementing `include/tickscope_plugin.h`, as [`Collector`]s.

use std::ffi::{CStr, c_char};
use std::path::Path;
use std::ptr;

use super::abi::{self, ProfilerFns, RegistrationParams, Status};
use super::api::{BoxError, Collector, CollectorError, Stage};

/// The most bytes a plug-in's collect may ask for: past it, an error (not an allocation).
const MAX_COLLECT: usize = 1 << 30;

/// A struct handed to the plug-in, with zeroed room behind it: a plug-in that writes a newer
/// version's fields past the `struct_size` it was given writes there, not over other memory.
#[repr(C)]
struct Roomy<T> {
    value: T,
    room: [u8; 256],
}

impl<T> Roomy<T> {
    fn new(value: T) -> Box<Self> {
        Box::new(Self {
            value,
            room: [0; 256],
        })
    }
}

fn new_status() -> Status {
    Status {
        struct_size: size_of::<Status>(),
        ext: ptr::null_mut(),
        code: abi::OK,
        message: [0; abi::MESSAGE_SIZE],
    }
}

/// The status's message, or a default one; `None` when the code is OK.
fn failure(status: &Status) -> Option<String> {
    if status.code == abi::OK {
        return None;
    }
    let bytes: Vec<u8> = status
        .message
        .iter()
        .take_while(|&&c| c != 0)
        // `c_char` is `i8` on x86_64 and `u8` on aarch64 Linux: its byte either way, no cast.
        .map(|&c| u8::from_ne_bytes(c.to_ne_bytes()))
        .collect();
    let message = String::from_utf8_lossy(&bytes).into_owned();
    Some(if message.is_empty() {
        format!("status code {} (no message)", status.code)
    } else {
        format!("{message} (status code {})", status.code)
    })
}

/// A plug-in's start, stop, collect and destroy.
type Fns = (
    abi::StartStopFn,
    abi::StartStopFn,
    abi::CollectFn,
    abi::DestroyFn,
);

/// A loaded plug-in.
pub(super) struct Plugin {
    name: String,
    profiler: Box<Roomy<abi::Profiler>>,
    start: abi::StartStopFn,
    stop: abi::StartStopFn,
    collect: abi::CollectFn,
    destroy: abi::DestroyFn,
    /// Unloaded last, after `destroy`.
    _library: libloading::Library,
}

// SAFETY: the header requires a plug-in to accept calls from any thread, one at a time for
// one instance; the session calls it under its slot's mutex.
unsafe impl Send for Plugin {}

impl Plugin {
    /// Loads the plug-in at `path` and calls its init function.
    pub(super) fn load(path: &Path) -> Result<Self, CollectorError> {
        let file = path.display().to_string();
        let error = |message: String| CollectorError::new(&file, Stage::Load, message);
        if !path.exists() {
            return Err(error("no such file".to_owned()));
        }
        // SAFETY: loading a library runs its initialisers: loading a plug-in is trusting it,
        // which is what the user asked for by naming it.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| error(format!("cannot load: {e}")))?;
        // SAFETY: the symbol's type is the header's `TSP_InitProfilerFn`.
        let init: abi::InitFn = *unsafe { library.get::<abi::InitFn>(abi::INIT_SYMBOL.as_bytes()) }
            .map_err(|e| error(format!("no init function `{}`: {e}", abi::INIT_SYMBOL)))?;
        let mut profiler = Roomy::new(abi::Profiler {
            struct_size: size_of::<abi::Profiler>(),
            ext: ptr::null_mut(),
            data: ptr::null_mut(),
            name: ptr::null(),
        });
        let mut fns = Roomy::new(ProfilerFns {
            struct_size: size_of::<ProfilerFns>(),
            ext: ptr::null_mut(),
            start: None,
            stop: None,
            collect: None,
            destroy: None,
        });
        let mut params = Roomy::new(RegistrationParams {
            struct_size: size_of::<RegistrationParams>(),
            ext: ptr::null_mut(),
            major_version: abi::VERSION_MAJOR,
            minor_version: abi::VERSION_MINOR,
            patch_version: abi::VERSION_PATCH,
            profiler: &mut profiler.value,
            fns: &mut fns.value,
        });
        let mut status = Roomy::new(new_status());
        // SAFETY: the header's contract: every pointer is valid for the call, each struct's
        // `struct_size` says how much of it is ours (and there is room behind it).
        unsafe { init(&mut params.value, &mut status.value) };
        if let Some(message) = failure(&status.value) {
            return Err(error(format!("init failed: {message}")));
        }
        let rejected = |e: CollectorError| {
            // Initialised but not usable: its destroy, when it gave one, frees what init took.
            let f = &fns.value;
            if f.struct_size >= abi::PROFILER_FNS_STRUCT_SIZE_1_0
                && let Some(destroy) = f.destroy
            {
                // SAFETY: the instance its init filled; nothing is called on it afterwards.
                unsafe { destroy(&profiler.value) };
            }
            e
        };
        let checked = Self::check(&profiler.value, &fns.value, &error);
        let (start, stop, collect, destroy) = checked.map_err(rejected)?;
        let p = &profiler.value;
        // The name, a 1.1 field: only when the plug-in's struct has it.
        let has_name =
            p.struct_size >= std::mem::offset_of!(abi::Profiler, name) + size_of::<*const c_char>();
        let name = if has_name && !p.name.is_null() {
            // SAFETY: the header: a NUL-terminated string valid until destroy.
            unsafe { CStr::from_ptr(p.name) }
                .to_string_lossy()
                .into_owned()
        } else {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or(file)
        };
        Ok(Self {
            name,
            profiler,
            start,
            stop,
            collect,
            destroy,
            _library: library,
        })
    }

    /// The four functions of a plug-in that passed the version checks.
    fn check(
        p: &abi::Profiler,
        f: &ProfilerFns,
        error: &dyn Fn(String) -> CollectorError,
    ) -> Result<Fns, CollectorError> {
        if p.struct_size < abi::PROFILER_STRUCT_SIZE_1_0 {
            return Err(error(format!(
                "TSP_Profiler.struct_size is {}, smaller than version 1.0's {}",
                p.struct_size,
                abi::PROFILER_STRUCT_SIZE_1_0
            )));
        }
        if f.struct_size < abi::PROFILER_FNS_STRUCT_SIZE_1_0 {
            return Err(error(format!(
                "TSP_ProfilerFns.struct_size is {}, smaller than version 1.0's {}",
                f.struct_size,
                abi::PROFILER_FNS_STRUCT_SIZE_1_0
            )));
        }
        let missing = |what: &str| error(format!("TSP_ProfilerFns.{what} is NULL"));
        let start = f.start.ok_or_else(|| missing("start"))?;
        let stop = f.stop.ok_or_else(|| missing("stop"))?;
        let collect = f.collect.ok_or_else(|| missing("collect"))?;
        let destroy = f.destroy.ok_or_else(|| missing("destroy"))?;
        Ok((start, stop, collect, destroy))
    }

    fn profiler(&self) -> *const abi::Profiler {
        &self.profiler.value
    }

    /// Calls `start` or `stop`.
    fn call(&self, f: abi::StartStopFn) -> Result<(), BoxError> {
        let mut status = Roomy::new(new_status());
        // SAFETY: the instance the plug-in filled, and a status of ours, valid for the call.
        unsafe { f(self.profiler(), &mut status.value) };
        match failure(&status.value) {
            Some(message) => Err(message.into()),
            None => Ok(()),
        }
    }
}

impl Collector for Plugin {
    fn name(&self) -> &str {
        &self.name
    }

    fn start(&mut self) -> Result<(), BoxError> {
        self.call(self.start)
    }

    fn stop(&mut self) -> Result<(), BoxError> {
        self.call(self.stop)
    }

    fn collect(&mut self, out: &mut Vec<u8>) -> Result<(), BoxError> {
        let mut status = Roomy::new(new_status());
        let mut size = 0usize;
        // SAFETY: a NULL buffer asks the size, written to `size`, ours for the call.
        unsafe {
            (self.collect)(
                self.profiler(),
                ptr::null_mut(),
                &mut size,
                &mut status.value,
            )
        };
        if let Some(message) = failure(&status.value) {
            return Err(format!("size query: {message}").into());
        }
        if size == 0 {
            return Ok(());
        }
        if size > MAX_COLLECT {
            return Err(format!(
                "size query asks for {size} bytes, more than the {MAX_COLLECT} allowed"
            )
            .into());
        }
        let capacity = size;
        let at = out.len();
        out.resize(at + capacity, 0);
        let mut status = Roomy::new(new_status());
        // SAFETY: `capacity` bytes at `out[at..]` are ours to lend for the call.
        unsafe {
            (self.collect)(
                self.profiler(),
                out[at..].as_mut_ptr(),
                &mut size,
                &mut status.value,
            )
        };
        // Never more than the buffer lent: a bigger size is an error, the buffer kept.
        out.truncate(at + size.min(capacity));
        if let Some(message) = failure(&status.value) {
            return Err(message.into());
        }
        if size > capacity {
            return Err(format!(
                "the second call reports {size} bytes, more than the {capacity} its size query \
                 asked for: the {capacity} bytes written are kept"
            )
            .into());
        }
        Ok(())
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        // SAFETY: the last call on the instance, before the library is unloaded.
        unsafe { (self.destroy)(self.profiler()) };
    }
}
