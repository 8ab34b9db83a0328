//! The scratch of one thread's packing and unpacking, kept between chunks.

use std::cell::RefCell;

/// The scratch of one thread's packing and unpacking, kept between chunks.
#[derive(Default)]
pub(super) struct Scratch {
    #[cfg(feature = "compress")]
    pub(super) compressor: Option<zstd::bulk::Compressor<'static>>,
    #[cfg(feature = "compress")]
    pub(super) decompressor: Option<zstd::bulk::Decompressor<'static>>,
    pub(super) kinds: Vec<u8>,
    pub(super) ids: Vec<u8>,
    pub(super) ticks: Vec<u8>,
    pub(super) values: Vec<u8>,
    pub(super) columns: Vec<u8>,
    pub(super) frame: Vec<u8>,
    pub(super) open: Vec<(u32, u64)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's scratch (a fresh one if it is in use further up the stack).
pub(super) fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    let mut f = Some(f);
    let done = SCRATCH.try_with(|cell| {
        cell.try_borrow_mut()
            .ok()
            .map(|mut scratch| (f.take().expect("called once"))(&mut scratch))
    });
    match done {
        Ok(Some(result)) => result,
        // In use (re-entered) or torn down (a thread's exit): a scratch of its own.
        _ => (f.take().expect("not called"))(&mut Scratch::default()),
    }
}
