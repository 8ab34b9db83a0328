//! The `#[repr(C)]` mirror of `include/tickscope_plugin.h`, the C ABI of profiler plug-ins.
//!
//! `tests/it/plugins.rs` compiles the header with static assertions of every size and offset
//! given here, so the two cannot drift apart.

use std::ffi::{c_char, c_void};

/// The header's major version (`TSP_VERSION_MAJOR`).
pub const VERSION_MAJOR: u32 = 1;
/// The header's minor version (`TSP_VERSION_MINOR`).
pub const VERSION_MINOR: u32 = 1;
/// The header's patch version (`TSP_VERSION_PATCH`).
pub const VERSION_PATCH: u32 = 0;
/// The init function every plug-in exports (`TSP_INIT_SYMBOL`).
pub const INIT_SYMBOL: &str = "TSP_InitProfiler";
/// Success (`TSP_OK`).
pub const OK: i32 = 0;
/// A failure (`TSP_ERROR`); any non-zero code is one.
pub const ERROR: i32 = 1;
/// The size of [`Status::message`], its NUL included (`TSP_MESSAGE_SIZE`).
pub const MESSAGE_SIZE: usize = 256;

/// `TSP_Status`: the outcome of a call.
#[repr(C)]
#[derive(Debug)]
pub struct Status {
    /// The size of the struct the caller knows.
    pub struct_size: usize,
    /// Reserved: NULL.
    pub ext: *mut c_void,
    /// [`OK`], or a failure.
    pub code: i32,
    /// A NUL-terminated message on failure.
    pub message: [c_char; MESSAGE_SIZE],
}

/// `TSP_Profiler`: the plug-in's instance.
#[repr(C)]
#[derive(Debug)]
pub struct Profiler {
    /// The size of the struct its writer knows.
    pub struct_size: usize,
    /// Reserved: NULL.
    pub ext: *mut c_void,
    /// The plug-in's own state.
    pub data: *mut c_void,
    /// Since 1.1: the plug-in's name (NUL-terminated), or NULL.
    pub name: *const c_char,
}

/// `start` and `stop`.
pub type StartStopFn = unsafe extern "C" fn(*const Profiler, *mut Status);
/// `collect`: buffer (NULL to ask the size), size in and out, status.
pub type CollectFn = unsafe extern "C" fn(*const Profiler, *mut u8, *mut usize, *mut Status);
/// `destroy`.
pub type DestroyFn = unsafe extern "C" fn(*const Profiler);
/// `TSP_InitProfilerFn`.
pub type InitFn = unsafe extern "C" fn(*mut RegistrationParams, *mut Status);

/// `TSP_ProfilerFns`: the functions the core calls.
#[repr(C)]
#[derive(Debug)]
pub struct ProfilerFns {
    /// The size of the struct its writer knows.
    pub struct_size: usize,
    /// Reserved: NULL.
    pub ext: *mut c_void,
    /// The session starts.
    pub start: Option<StartStopFn>,
    /// The session stops.
    pub stop: Option<StartStopFn>,
    /// Two calls: the size, then the bytes.
    pub collect: Option<CollectFn>,
    /// The last call.
    pub destroy: Option<DestroyFn>,
}

/// `TSP_RegistrationParams`: what the init function gets.
#[repr(C)]
#[derive(Debug)]
pub struct RegistrationParams {
    /// The size of the struct the core knows.
    pub struct_size: usize,
    /// Reserved: NULL.
    pub ext: *mut c_void,
    /// The core's header version.
    pub major_version: u32,
    /// The core's header version.
    pub minor_version: u32,
    /// The core's header version.
    pub patch_version: u32,
    /// The instance to fill.
    pub profiler: *mut Profiler,
    /// The function table to fill.
    pub fns: *mut ProfilerFns,
}

/// The size of version 1.0's `TSP_Profiler` (`TSP_PROFILER_STRUCT_SIZE_1_0`).
pub const PROFILER_STRUCT_SIZE_1_0: usize = std::mem::offset_of!(Profiler, name);
/// The size of version 1.0's `TSP_ProfilerFns`.
pub const PROFILER_FNS_STRUCT_SIZE_1_0: usize = size_of::<ProfilerFns>();
/// The size of version 1.0's `TSP_Status`.
pub const STATUS_STRUCT_SIZE_1_0: usize = size_of::<Status>();
/// The size of version 1.0's `TSP_RegistrationParams`.
pub const REGISTRATION_PARAMS_STRUCT_SIZE_1_0: usize = size_of::<RegistrationParams>();
