//! A tickscope plug-in written in Rust against the C ABI of `include/tickscope_plugin.h` only
//! (no tickscope dependency): a simulated device whose "kernels" run on a clock of its own,
//! ticking at 1 GHz from an offset base, as a GPU's would.
//!
//! The host launches kernels with `tsp_sim_device_launch(name, duration_ns)`: each starts on
//! the device at the launch and runs `duration_ns`. The plug-in calibrates its clock against
//! Unix time at start and stop, so tickscope places the kernels under the host scopes that
//! launched them. The process is "sim-device", the track "queue 0".

use std::ffi::{CStr, c_char, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The device clock's reading at the first use of the plug-in: far from Unix time.
const BASE: u64 = 7_000_000_000_000;

/// `TSP_Status`.
#[repr(C)]
pub struct Status {
    struct_size: usize,
    ext: *mut c_void,
    code: i32,
    message: [c_char; 256],
}

/// `TSP_Profiler`.
#[repr(C)]
pub struct Profiler {
    struct_size: usize,
    ext: *mut c_void,
    data: *mut c_void,
    name: *const c_char,
}

/// `TSP_ProfilerFns`.
#[repr(C)]
pub struct ProfilerFns {
    struct_size: usize,
    ext: *mut c_void,
    start: Option<unsafe extern "C" fn(*const Profiler, *mut Status)>,
    stop: Option<unsafe extern "C" fn(*const Profiler, *mut Status)>,
    collect: Option<unsafe extern "C" fn(*const Profiler, *mut u8, *mut usize, *mut Status)>,
    destroy: Option<unsafe extern "C" fn(*const Profiler)>,
}

/// `TSP_RegistrationParams`.
#[repr(C)]
pub struct RegistrationParams {
    struct_size: usize,
    ext: *mut c_void,
    major_version: u32,
    minor_version: u32,
    patch_version: u32,
    profiler: *mut Profiler,
    fns: *mut ProfilerFns,
}

/// The device: kernels of the window, its calibration pairs.
#[derive(Default)]
struct Device {
    recording: bool,
    /// (name, first tick, last tick).
    kernels: Vec<(String, u64, u64)>,
    start: (u64, u64),
    stop: (u64, u64),
}

fn device() -> MutexGuard<'static, Device> {
    static DEVICE: Mutex<Device> = Mutex::new(Device {
        recording: false,
        kernels: Vec::new(),
        start: (0, 0),
        stop: (0, 0),
    });
    DEVICE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The device clock: nanoseconds since the plug-in's first use, from [`BASE`].
fn ticks() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    BASE + EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A (tick, Unix ns) pair: of a few reads, the one whose ticks bracket the Unix time most
/// tightly, the tick taken at the middle.
fn pair() -> (u64, u64) {
    (0..5)
        .map(|_| {
            let before = ticks();
            let unix = unix_ns();
            let after = ticks();
            (after - before, (before + (after - before) / 2, unix))
        })
        .min_by_key(|&(spread, _)| spread)
        .map_or((ticks(), unix_ns()), |(_, pair)| pair)
}

/// Launches kernel `name` on the device: it runs from now for `duration_ns`. Recorded
/// while a session runs; a NULL name is "kernel".
///
/// # Safety
///
/// `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn tsp_sim_device_launch(name: *const c_char, duration_ns: u64) {
    let name = if name.is_null() {
        "kernel".to_owned()
    } else {
        // SAFETY: the caller's promise: a NUL-terminated string.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    };
    let begin = ticks();
    let mut device = device();
    if device.recording {
        device.kernels.push((name, begin, begin + duration_ns));
    }
}

unsafe extern "C" fn start(_: *const Profiler, _: *mut Status) {
    let mut device = device();
    device.kernels.clear();
    device.start = pair();
    device.recording = true;
}

unsafe extern "C" fn stop(_: *const Profiler, _: *mut Status) {
    let mut device = device();
    device.recording = false;
    // The window ends after the last kernel does.
    let last = device.kernels.iter().map(|k| k.2).max().unwrap_or(0);
    let mut end = pair();
    if end.0 < last {
        end = (last, end.1 + (last - end.0));
    }
    device.stop = end;
}

unsafe extern "C" fn collect(
    _: *const Profiler,
    buffer: *mut u8,
    size: *mut usize,
    status: *mut Status,
) {
    let bytes = session(&device());
    if buffer.is_null() {
        // SAFETY: tickscope's size, valid for the call.
        unsafe { *size = bytes.len() };
        return;
    }
    // SAFETY: tickscope's size and buffer, valid for the call, `*size` bytes long.
    unsafe {
        if bytes.len() > *size {
            (*status).code = 1;
            *size = 0;
            return;
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buffer, bytes.len());
        *size = bytes.len();
    }
}

unsafe extern "C" fn destroy(_: *const Profiler) {
    device().recording = false;
}

/// The init function tickscope calls.
///
/// # Safety
///
/// `params` and its structs are tickscope's, valid for the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn TSP_InitProfiler(params: *mut RegistrationParams, status: *mut Status) {
    // SAFETY: tickscope's structs, valid for the call.
    unsafe {
        let params = &mut *params;
        if params.major_version != 1 {
            (*status).code = 1;
            return;
        }
        let profiler = &mut *params.profiler;
        // `name` (1.1) only when tickscope's struct has it.
        if profiler.struct_size >= size_of::<Profiler>() {
            profiler.name = c"sim-device".as_ptr();
        }
        profiler.struct_size = size_of::<Profiler>();
        let fns = &mut *params.fns;
        fns.struct_size = size_of::<ProfilerFns>();
        fns.start = Some(start);
        fns.stop = Some(stop);
        fns.collect = Some(collect);
        fns.destroy = Some(destroy);
    }
}

/// The window's kernels as one capture session (docs/FORMAT.md).
fn session(device: &Device) -> Vec<u8> {
    let mut out = Vec::new();
    // Session header: format 1, pid 0 (a device of its own), start, producer, process, host.
    let mut c = Vec::new();
    c.extend_from_slice(&1u16.to_le_bytes());
    c.extend_from_slice(&0u16.to_le_bytes());
    c.extend_from_slice(&0u32.to_le_bytes());
    c.extend_from_slice(&device.start.1.to_le_bytes());
    c.extend_from_slice(b"tickscope-sim-device\0sim-device\0\0");
    chunk(&mut out, 1, &c);
    // Clock: one start pair, one stop pair, 1 ns a tick.
    c.clear();
    for v in [0u32, 1, 1, 0] {
        c.extend_from_slice(&v.to_le_bytes());
    }
    c.extend_from_slice(&1.0f64.to_bits().to_le_bytes());
    c.extend_from_slice(&[0; 8]);
    for v in [device.start.0, device.start.1, device.stop.0, device.stop.1] {
        c.extend_from_slice(&v.to_le_bytes());
    }
    chunk(&mut out, 2, &c);
    // Strings: 0 "", 1 the file, 2 the track, 3.. the kernels' names.
    let mut names: Vec<&str> = Vec::new();
    for (name, ..) in &device.kernels {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    c.clear();
    c.extend_from_slice(b"\0<sim-device>\0queue 0\0");
    for name in &names {
        c.extend(name.bytes().map(|b| if b == 0 { b'?' } else { b }));
        c.push(0);
    }
    chunk(&mut out, 3, &c);
    // Callsites: kernel name `i` is callsite i + 1, string i + 3.
    c.clear();
    for i in 0..names.len() as u32 {
        for v in [i + 1, i + 3, 1, 0, 0, 0] {
            c.extend_from_slice(&v.to_le_bytes());
        }
    }
    chunk(&mut out, 4, &c);
    // Threads: the track "queue 0".
    c.clear();
    for v in [1u64, 0] {
        c.extend_from_slice(&v.to_le_bytes());
    }
    for v in [2u32, 0] {
        c.extend_from_slice(&v.to_le_bytes());
    }
    chunk(&mut out, 6, &c);
    // Events: kernels one after the other on the queue (a kernel starts when launched or
    // when the one before ends).
    c.clear();
    for v in [1u64, 0] {
        c.extend_from_slice(&v.to_le_bytes());
    }
    let mut records = 0u64;
    let mut free_at = 0;
    for (name, begin, end) in &device.kernels {
        let id = names.iter().position(|n| n == name).unwrap_or(0) as u32 + 1;
        let begin = (*begin).max(free_at);
        let end = (*end).max(begin);
        free_at = end;
        record(&mut c, begin, id, 1);
        record(&mut c, end, end_key(id, begin), 2);
        records += 2;
    }
    chunk(&mut out, 5, &c);
    // Footer.
    c.clear();
    for v in [device.start.0, device.stop.0.max(free_at), records, 0, 0] {
        c.extend_from_slice(&v.to_le_bytes());
    }
    chunk(&mut out, 7, &c);
    out
}

fn record(out: &mut Vec<u8>, tick: u64, id: u32, kind: u32) {
    out.extend_from_slice(&tick.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
}

/// The key an End record carries for the entry of callsite `id` at `tick`.
fn end_key(id: u32, tick: u64) -> u32 {
    let x = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ tick;
    (x.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32) as u32
}

fn chunk(out: &mut Vec<u8>, kind: u16, content: &[u8]) {
    out.extend_from_slice(b"TSCP");
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&(content.len() as u64).to_le_bytes());
    out.extend_from_slice(content);
    out.resize(out.len().next_multiple_of(16), 0);
}
